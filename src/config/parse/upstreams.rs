//! `[upstreams.NAME]`: nginx's `upstream NAME { server ADDRESS [weight=…]
//! [max_fails=…] [fail_timeout=…] [backup] [down]; [least_conn;] [hash KEY
//! [consistent];] [keepalive N;] }`.
//!
//! Each table is read on its own; a `proxy_pass` naming one is checked by
//! validation once every group is known, and the host names are resolved
//! when the configuration is compiled (at load and at each reload).

use super::super::spec::UpstreamSpec;
use super::read::{Cx, Key, Schema, Val, has};
use crate::upstream::group::{
    DEFAULT_FAIL_TIMEOUT, DEFAULT_MAX_FAILS, GroupDef, Method, ServerDef,
};
use crate::vars::{Context, Template};
use std::ops::Range;
use toml::de::DeValue;

/// A group's table as read.
struct GroupDraft {
    def: GroupDef,
    hash_key: Option<Template>,
    /// Where `balance` and `hash` were written (for the messages).
    balance: Option<(String, Range<usize>)>,
    hash_span: Option<Range<usize>>,
    consistent: Option<(bool, Range<usize>)>,
    /// Where each `backup = true` was written.
    backups: Vec<Range<usize>>,
    servers_span: Option<Range<usize>>,
    ok: bool,
}

/// `[upstreams.NAME]`'s keys.
static GROUP: Schema<GroupDraft> = Schema::plain(&[
    Key {
        name: "servers",
        read: |cx, k, v, g| servers(cx, k, v, g),
    },
    Key {
        name: "balance",
        read: |cx, k, v, g| match cx.str(v, k) {
            Some(s @ ("round_robin" | "least_conn" | "hash")) => {
                g.balance = Some((s.to_string(), v.span()))
            }
            Some(s) => {
                cx.err(
                    v.span(),
                    format!(
                        "invalid balance \"{s}\" (expected \"round_robin\", \"least_conn\" or \"hash\")"
                    ),
                );
                g.ok = false;
            }
            None => g.ok = false,
        },
    },
    Key {
        name: "hash",
        read: |cx, k, v, g| {
            g.hash_span = Some(v.span());
            match cx.template(v, k, Context::Key) {
                Some(t) => {
                    g.def.hash = Some(t.source().to_string());
                    g.hash_key = Some(t);
                }
                None => g.ok = false,
            }
        },
    },
    Key {
        name: "consistent",
        read: |cx, k, v, g| match cx.bool(v, k) {
            Some(b) => g.consistent = Some((b, v.span())),
            None => g.ok = false,
        },
    },
    Key {
        name: "keepalive",
        read: |cx, k, v, g| match cx.int(v, k) {
            Some(n) if (1..=1_000_000).contains(&n) => g.def.keepalive = Some(n as usize),
            Some(_) => {
                cx.err(
                    v.span(),
                    "\"keepalive\": value must be between 1 and 1000000",
                );
                g.ok = false;
            }
            None => g.ok = false,
        },
    },
]);

/// A `servers` entry as read.
struct ServerDraft {
    def: ServerDef,
    backup_span: Option<Range<usize>>,
    ok: bool,
}

/// A `servers` entry's keys.
static SERVER: Schema<ServerDraft> = Schema::plain(&[
    Key {
        name: "address",
        read: |cx, k, v, s| match cx.str(v, k) {
            Some(a) => match check_address(a) {
                Ok(()) => s.def.address = a.to_string(),
                Err(e) => {
                    cx.err(v.span(), e);
                    s.ok = false;
                }
            },
            None => s.ok = false,
        },
    },
    Key {
        name: "weight",
        read: |cx, k, v, s| match cx.int(v, k) {
            Some(n) if (1..=1_000_000).contains(&n) => s.def.weight = n as u32,
            Some(_) => {
                cx.err(v.span(), "\"weight\": value must be between 1 and 1000000");
                s.ok = false;
            }
            None => s.ok = false,
        },
    },
    Key {
        name: "max_fails",
        read: |cx, k, v, s| match cx.int(v, k) {
            Some(n) if (0..=1_000_000).contains(&n) => s.def.max_fails = n as u32,
            Some(_) => {
                cx.err(
                    v.span(),
                    "\"max_fails\": value must be between 0 and 1000000",
                );
                s.ok = false;
            }
            None => s.ok = false,
        },
    },
    Key {
        name: "fail_timeout",
        read: |cx, k, v, s| match cx.duration(v, k) {
            Some(d) => s.def.fail_timeout = d,
            None => s.ok = false,
        },
    },
    Key {
        name: "backup",
        read: |cx, k, v, s| match cx.bool(v, k) {
            Some(b) => {
                s.def.backup = b;
                if b {
                    s.backup_span = Some(v.span());
                }
            }
            None => s.ok = false,
        },
    },
    Key {
        name: "down",
        read: |cx, k, v, s| match cx.bool(v, k) {
            Some(b) => s.def.down = b,
            None => s.ok = false,
        },
    },
]);

/// An address nginx's `server` takes: `IP:port`, `[IPv6]:port`,
/// `host:port`, or any of them without the port. Not a URL.
fn check_address(a: &str) -> Result<(), String> {
    if a.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let bad = a.is_empty()
        || a.contains("://")
        || a.contains(['/', '?', '#', '@', ' '])
        || a.starts_with(':');
    if bad {
        return Err(format!(
            "invalid address \"{a}\" in upstream (expected \"IP:PORT\", \"HOST:PORT\", or without the port for 80)"
        ));
    }
    if let Some((_, port)) = a.rsplit_once(':').filter(|_| !a.ends_with(']')) {
        let v6_bare = a.matches(':').count() > 1 && !a.starts_with('[');
        if !v6_bare && port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!("invalid port in upstream \"{a}\""));
        }
    }
    Ok(())
}

/// The `servers` list.
fn servers(cx: &mut Cx, k: &str, v: &Val, g: &mut GroupDraft) {
    g.servers_span = Some(v.span());
    let DeValue::Array(items) = v.get_ref() else {
        cx.err(
            v.span(),
            "\"servers\" must be a list of tables ({ address = \"IP:PORT\", … })",
        );
        g.ok = false;
        return;
    };
    for item in items {
        let Some(t) = cx.table(item, k) else {
            g.ok = false;
            continue;
        };
        let mut s = ServerDraft {
            def: ServerDef {
                address: String::new(),
                weight: 1,
                max_fails: DEFAULT_MAX_FAILS,
                fail_timeout: DEFAULT_FAIL_TIMEOUT,
                backup: false,
                down: false,
            },
            backup_span: None,
            ok: true,
        };
        SERVER.read(
            cx,
            t,
            &format!("a server of [upstreams.{}]", g.def.name),
            &mut s,
        );
        if !has(t, "address") {
            cx.err(item.span(), "a server of an upstream must have \"address\"");
            s.ok = false;
        }
        if let Some(span) = s.backup_span.take() {
            g.backups.push(span);
        }
        g.ok &= s.ok;
        g.def.servers.push(s.def);
    }
}

/// `[upstreams]`: the groups without a problem.
pub(super) fn upstreams(cx: &mut Cx, k: &str, v: &Val) -> Vec<UpstreamSpec> {
    let mut out = Vec::new();
    let Some(t) = cx.table(v, k) else { return out };
    for (name, gv) in t.iter() {
        let Some(gt) = cx.table(gv, name.get_ref()) else {
            continue;
        };
        let what = format!("[upstreams.{}]", name.get_ref());
        let mut g = GroupDraft {
            def: GroupDef {
                name: name.get_ref().to_string(),
                servers: Vec::new(),
                method: Method::RoundRobin,
                hash: None,
                keepalive: None,
            },
            hash_key: None,
            balance: None,
            hash_span: None,
            consistent: None,
            backups: Vec::new(),
            servers_span: None,
            ok: true,
        };
        GROUP.read(cx, gt, &what, &mut g);
        if let Some(spec) = finish(cx, g, name.span(), &what) {
            out.push(spec);
        }
    }
    out
}

/// The checks across a group's keys: a `hash` for `balance = "hash"` and
/// only then, no backup with it (nginx refuses), some servers.
fn finish(cx: &mut Cx, mut g: GroupDraft, name: Range<usize>, what: &str) -> Option<UpstreamSpec> {
    if g.servers_span.is_none() {
        cx.err(name.clone(), format!("{what} must have \"servers\""));
        g.ok = false;
    } else if g.ok && g.def.servers.iter().all(|s| s.backup) {
        // (nginx: the backup servers alone are no servers.)
        let span = g.servers_span.clone().unwrap_or(name.clone());
        cx.err(span, format!("no servers in upstream \"{}\"", g.def.name));
        g.ok = false;
    }
    let balance = g.balance.as_ref().map(|(b, _)| b.as_str());
    let hashed = balance == Some("hash");
    match (&g.hash_span, hashed) {
        (None, true) => {
            let span = g.balance.as_ref().map_or(name.clone(), |(_, s)| s.clone());
            cx.err(span, format!("{what} has balance = \"hash\" but no \"hash\" key (e.g. hash = \"$request_uri\")"));
            g.ok = false;
        }
        (Some(span), false) => {
            cx.err(span.clone(), "\"hash\" needs balance = \"hash\"");
            g.ok = false;
        }
        _ => {}
    }
    if let Some((true, span)) = &g.consistent {
        if !hashed {
            cx.err(span.clone(), "\"consistent\" needs balance = \"hash\"");
            g.ok = false;
        }
    }
    if hashed {
        for span in &g.backups {
            cx.err(
                span.clone(),
                "balance = \"hash\" does not take backup servers (nginx: invalid parameter \"backup\")",
            );
            g.ok = false;
        }
    }
    g.def.method = match balance {
        Some("least_conn") => Method::LeastConn,
        Some("hash") if g.consistent.is_some_and(|(c, _)| c) => Method::Consistent,
        Some("hash") => Method::Hash,
        _ => Method::RoundRobin,
    };
    g.ok.then_some(UpstreamSpec {
        def: g.def,
        hash_key: g.hash_key,
    })
}

#[cfg(test)]
mod tests {
    use super::check_address;

    #[test]
    fn addresses() {
        for ok in [
            "127.0.0.1:8081",
            "127.0.0.1",
            "[::1]:80",
            "[::1]",
            "::1",
            "backend.local:81",
            "localhost",
        ] {
            assert!(check_address(ok).is_ok(), "{ok}");
        }
        for bad in ["", "http://a:1", "a:1/x", "a:0", "a:x", ":80", "a:99999"] {
            assert!(check_address(bad).is_err(), "{bad}");
        }
    }
}
