//! `upstream NAME { … }` → `[upstreams.NAME]`: the servers with their
//! weights and passive-health settings, the balancing method, `keepalive`.

use super::Cx;
use super::doc::{Table, Value};
use super::report::Kind;
use super::top::{self, Out};
use super::tree::Directive;
use super::values;

fn comment(d: &Directive) -> String {
    format!("{}: {}", d.origin.short(), d.text())
}

pub fn upstream(cx: &mut Cx, out: &mut Out, d: &Directive) {
    if d.args.len() != 1 {
        cx.report(Kind::NotTranslated, d, "invalid number of arguments");
        return;
    }
    let mut t = Table {
        comments: vec![comment(d)],
        ..Table::default()
    };
    let mut servers = Vec::new();
    let mut server_comments = Vec::new();
    let mut method: Option<(Vec<(String, Value)>, String)> = None;
    let mut keepalive = None;
    for c in d.children() {
        match c.name.as_str() {
            "server" => {
                if let Some(s) = server(cx, c) {
                    servers.push(s);
                    server_comments.push(comment(c));
                }
            }
            "least_conn" | "hash" | "ip_hash" => {
                if method.is_some() {
                    cx.report(Kind::NotTranslated, c, "a second balancing method");
                } else if let Some(m) = balance(cx, c) {
                    method = Some((m, comment(c)));
                }
            }
            "keepalive" => match c.arg(0).parse::<i64>() {
                Ok(n) if n > 0 => keepalive = Some((n, comment(c))),
                _ => cx.report(Kind::NotTranslated, c, "invalid number"),
            },
            "zone" => cx.report(
                Kind::Ignored,
                c,
                "sluice's worker threads share the group's state without a shared memory zone",
            ),
            "keepalive_timeout" | "keepalive_requests" | "keepalive_time" => cx.report(
                Kind::NotTranslated,
                c,
                "sluice keeps idle upstream connections by its own rules",
            ),
            "random" => cx.report(
                Kind::NotTranslated,
                c,
                "sluice balances by round_robin, least_conn or hash: round_robin is used",
            ),
            _ => top::other(cx, c),
        }
    }
    if servers.is_empty() {
        cx.report(Kind::NotTranslated, d, "no server sluice can connect to");
        return;
    }
    t.set("servers", Value::Array(servers), server_comments);
    if let Some((kv, c)) = method {
        let mut first = true;
        for (k, v) in kv {
            let comments = if first { vec![c.clone()] } else { vec![] };
            first = false;
            t.set(&k, v, comments);
        }
    }
    if let Some((n, c)) = keepalive {
        t.set("keepalive", Value::Int(n), vec![c]);
    }
    *out.upstreams.sub(d.arg(0)) = t;
}

/// `least_conn`, `hash KEY [consistent]`, `ip_hash` as keys.
fn balance(cx: &mut Cx, d: &Directive) -> Option<Vec<(String, Value)>> {
    let s = |v: &str| Value::str(v);
    match d.name.as_str() {
        "least_conn" => Some(vec![("balance".into(), s("least_conn"))]),
        "ip_hash" => {
            let why = "as hash $binary_remote_addr: each client stays on one server, but not \
                       on the one nginx's ip_hash (by /24) chooses";
            cx.report(Kind::Partial, d, why);
            Some(vec![
                ("balance".into(), s("hash")),
                ("hash".into(), s("$binary_remote_addr")),
            ])
        }
        _ => {
            let mut key = d.arg(0).to_string();
            let unknown = values::unknown_vars(&key, crate::vars::Context::Key, &cx.vars);
            if !unknown.is_empty() {
                let why = format!(
                    "the key {} {}: hashed by $binary_remote_addr instead",
                    values::list_vars(&unknown),
                    cx.why_var(&unknown)
                );
                cx.report(Kind::Partial, d, why);
                key = "$binary_remote_addr".into();
            }
            let mut kv = vec![
                ("balance".into(), s("hash")),
                ("hash".into(), Value::Str(key)),
            ];
            match d.args.get(1).map(String::as_str) {
                Some("consistent") => kv.push(("consistent".into(), Value::Bool(true))),
                None => {}
                Some(other) => {
                    cx.report(
                        Kind::NotTranslated,
                        d,
                        format!("invalid parameter \"{other}\""),
                    );
                    return None;
                }
            }
            Some(kv)
        }
    }
}

/// One `server ADDRESS [weight=N] [max_fails=N] [fail_timeout=T] [backup]
/// [down]`.
fn server(cx: &mut Cx, d: &Directive) -> Option<Value> {
    let addr = d.arg(0);
    if addr.starts_with("unix:") {
        cx.report(
            Kind::NotTranslated,
            d,
            "sluice connects to TCP upstreams only",
        );
        return None;
    }
    let with_port = if addr.ends_with(']') || !addr.contains(':') {
        format!("{addr}:80")
    } else {
        addr.to_string()
    };
    let mut kv = vec![("address".to_string(), Value::Str(with_port))];
    for p in d.args.iter().skip(1) {
        let int = |n: &str| n.parse::<i64>().ok().map(Value::Int);
        let parsed = match p.split_once('=') {
            Some(("weight", n)) => int(n).map(|v| ("weight", v)),
            Some(("max_fails", n)) => int(n).map(|v| ("max_fails", v)),
            Some(("fail_timeout", t)) => values::time(t)
                .ok()
                .map(|t| ("fail_timeout", Value::Str(t))),
            None if p == "backup" => Some(("backup", Value::Bool(true))),
            None if p == "down" => Some(("down", Value::Bool(true))),
            _ => None,
        };
        match parsed {
            Some((k, v)) => kv.push((k.to_string(), v)),
            None => {
                let why = format!("\"{p}\" is not among sluice's server parameters");
                cx.report(Kind::Partial, d, why);
            }
        }
    }
    Some(Value::Inline(kv))
}
