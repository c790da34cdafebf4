//! Validate: [`Draft`] → [`Spec`], the checks that need more than one
//! table: zones named by levels, a location's `proxy_pass` or `return`
//! (its own or its server's), duplicate locations and listen addresses,
//! `[redis]`'s TLS files against its url (after the file step, so that an
//! unreadable file is reported as such), and that there is a server.
//!
//! Each check reports into the same diagnostics as parsing, and what
//! failed is left out of the result: the caller returns the errors, not
//! the `Spec`, when there is any.

use super::error::Diagnostics;
use super::parse::Draft;
use super::parse::level::LevelDraft;
use super::parse::limits::{LimitSettings, ZoneUse};
use super::parse::read::Reported;
use super::parse::redis::{RedisDraft, TlsFile};
use super::parse::servers::{LocationDraft, ServerDraft};
use super::spec::{
    Action, ConnLimitSpec, ConnZoneSpec, Level, LimitSpec, LocationSpec, ServerSpec, Spec, TlsSpec,
    ZoneSpec,
};
use super::values::{PathRule, ProxyPass};
use crate::limiter::RedisConfig;
use std::ops::Range;

/// The zones levels may name.
struct Zones<'a> {
    req: &'a [ZoneSpec],
    /// `[zones]` tables with an error (reported), by name.
    broken: &'a [String],
    conn: &'a [ConnZoneSpec],
    /// The `[upstreams]` tables' names (`proxy_pass` may name them).
    groups: &'a [String],
}

/// Validate `draft`; problems go to `d`.
pub(super) fn validate(draft: Draft, d: &mut Diagnostics) -> Spec {
    let redis = draft.redis.and_then(|r| redis(r, d));
    if draft.servers.is_none() {
        d.error(0..0, "no [[servers]]: nothing to listen on");
    }
    let zones = Zones {
        req: &draft.zones,
        broken: &draft.broken_zones,
        conn: &draft.conn_zones,
        groups: &draft.upstream_names,
    };
    let http = level(draft.http, &zones, d);
    let servers: Vec<(ServerSpec, Spans)> = draft
        .servers
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| server(s, &zones, d))
        .collect();
    addresses(&servers, d);
    let servers = servers.into_iter().map(|(s, _)| s).collect();
    let vars = draft.vars.validate(d);
    Spec {
        http,
        log_format: draft.log_format,
        zones: draft.zones,
        conn_zones: draft.conn_zones,
        servers,
        ops: draft.ops,
        redis,
        upstreams: draft.upstreams,
        vars,
    }
}

/// `[redis]` complete: TLS files only with a `rediss://` url, a client
/// certificate only with its key. A file already reported (a wrong type,
/// unreadable) is not judged again.
fn redis(mut r: RedisDraft, d: &mut Diagnostics) -> Option<RedisConfig> {
    if let Ok(servers) = &r.servers {
        // The lists are all redis:// or all rediss:// (parsing saw to it).
        if !servers.urls().iter().all(|u| u.starts_with("rediss://")) {
            for file in r.tls_files() {
                if let Some(Ok(f)) = file {
                    d.error(
                        f.span.clone(),
                        format!("\"{}\" needs a rediss:// url", f.key),
                    );
                    *file = Some(Err(Reported));
                }
            }
        }
    }
    let failed = |f: &TlsFile| matches!(f, Some(Err(Reported)));
    if !failed(&r.tls_cert) && !failed(&r.tls_key) && r.tls_cert.is_some() != r.tls_key.is_some() {
        d.error(
            r.span.clone(),
            "[redis] needs both \"tls_cert\" and \"tls_key\" (mutual TLS) or neither",
        );
        return None;
    }
    let path = |f: TlsFile| match f {
        None => Some(None),
        Some(Ok(f)) => Some(Some(f.path)),
        Some(Err(Reported)) => None,
    };
    Some(RedisConfig {
        servers: r.servers.ok()?,
        password: r.password.ok()?,
        sentinel_password: r.sentinel_password.ok()?,
        timeout: r.timeout.ok()?,
        on_error: r.on_error.ok()?,
        prefix: r.prefix.ok()?,
        tls_ca: path(r.tls_ca)?,
        tls_cert: path(r.tls_cert)?,
        tls_key: path(r.tls_key)?,
        reject_cache: r.reject_cache.ok()?,
        connections: r.connections.ok()?,
    })
}

/// A level with its zones resolved.
fn level(l: LevelDraft, zones: &Zones, d: &mut Diagnostics) -> Level {
    let mut level = l.level;
    level.limit_req = l.limit_req.and_then(|uses| {
        let lookup = |name: &str| match zones.req.iter().position(|z| z.name == name) {
            Some(i) => Ok(i),
            None if zones.broken.iter().any(|b| b == name) => Err(format!(
                "limit_req_zone \"{name}\" cannot be used: its table [zones.{name}] has an error"
            )),
            None => Err(format!("unknown limit_req_zone \"{name}\"")),
        };
        let limits = resolve(uses, "limit_req", lookup, d)?;
        let mut ok = true;
        for (zone, s) in &limits {
            ok &= fits_algorithm(&zones.req[*zone], s, d);
        }
        ok.then(|| {
            limits
                .into_iter()
                .map(|(zone, s)| LimitSpec {
                    zone,
                    burst: s.burst,
                    delay: s.delay,
                })
                .collect()
        })
    });
    level.limit_conn = l.limit_conn.and_then(|uses| {
        let lookup = |name: &str| match zones.conn.iter().position(|z| z.name == name) {
            Some(i) => Ok(i),
            None if zones.req.iter().any(|z| z.name == name) => Err(format!(
                "unknown limit_conn_zone \"{name}\" (\"{name}\" is a [zones] table, for limit_req; limit_conn needs a [conn_zones] table)"
            )),
            None => Err(format!("unknown limit_conn_zone \"{name}\"")),
        };
        let limits = resolve(uses, "limit_conn", lookup, d)?;
        Some(
            limits
                .into_iter()
                .map(|(zone, conn)| ConnLimitSpec { zone, conn })
                .collect(),
        )
    });
    level
}

/// A `limit_req` item's settings against its zone's algorithm: only the
/// leaky bucket delays (`delay` is an error elsewhere; `nodelay` is
/// accepted and changes nothing), and windows take no `burst`.
fn fits_algorithm(zone: &ZoneSpec, s: &LimitSettings, d: &mut Diagnostics) -> bool {
    let (name, alg) = (&zone.name, zone.policy.algorithm);
    let mut ok = true;
    if let (Some(span), true) = (&s.burst_span, alg.is_window()) {
        d.error(
            span.clone(),
            format!(
                "zone \"{name}\" uses algorithm \"{}\", which takes no \"burst\": it admits the rate's count per period (raise \"rate\" instead)",
                alg.name()
            ),
        );
        ok = false;
    }
    if let (Some(span), false) = (&s.delay_span, alg.delays()) {
        d.error(
            span.clone(),
            format!(
                "zone \"{name}\" uses algorithm \"{}\", which never delays: \"delay\" is for \"leaky_bucket\" only (remove it: this algorithm admits or rejects at once)",
                alg.name()
            ),
        );
        ok = false;
    }
    ok
}

/// The zones of one `limit_req` or `limit_conn` list, by index, with their
/// settings; `None` when an item failed. As nginx, a zone may be limited
/// once per level; an item after a failed one is still checked, but only
/// against the items before the failure.
fn resolve<T>(
    uses: Vec<ZoneUse<T>>,
    directive: &str,
    lookup: impl Fn(&str) -> Result<usize, String>,
    d: &mut Diagnostics,
) -> Option<Vec<(usize, T)>> {
    let mut out: Vec<(usize, T)> = Vec::new();
    let mut ok = true;
    for u in uses {
        let zone = u.zone.and_then(|n| match lookup(&n.name) {
            Ok(i) if out.iter().any(|(z, _)| *z == i) => {
                d.error(
                    n.span,
                    format!(
                        "\"{directive}\" directive is duplicate: zone \"{}\" is already limited at this level",
                        n.name
                    ),
                );
                None
            }
            Ok(i) => Some(i),
            Err(message) => {
                d.error(n.span, message);
                None
            }
        });
        match (zone, u.settings) {
            (Some(zone), Some(settings)) if ok => out.push((zone, settings)),
            _ => ok = false,
        }
    }
    ok.then_some(out)
}

/// Where a server's `listen` and `server_name` values are, for the checks
/// of an address's servers together.
struct Spans {
    listen: Range<usize>,
    names: Option<Range<usize>>,
    /// Its certificate had a problem (reported): not "missing" too.
    tls_failed: bool,
}

/// The servers sharing an address, as nginx checks them: one default
/// server, no name twice, and — the address speaks TLS if any of them says
/// `ssl` — a certificate for every one of them.
fn addresses(servers: &[(ServerSpec, Spans)], d: &mut Diagnostics) {
    for (i, (s, spans)) in servers.iter().enumerate() {
        let group = || servers.iter().filter(|(o, _)| o.listen == s.listen);
        if s.options.default_server
            && servers[..i]
                .iter()
                .any(|(o, _)| o.listen == s.listen && o.options.default_server)
        {
            d.error(
                spans.listen.clone(),
                format!("a duplicate default server for {}", s.listen),
            );
        }
        if s.tls.is_none() && !spans.tls_failed && group().any(|(o, _)| o.options.ssl) {
            d.error(
                spans.listen.clone(),
                format!(
                    "no \"ssl_certificate\" is defined for the server on {} (listen with \"ssl\" there): set \"ssl_certificate\" and \"ssl_certificate_key\"",
                    s.listen
                ),
            );
        }
        let earlier: Vec<String> = servers[..i]
            .iter()
            .filter(|(o, _)| o.listen == s.listen)
            .flat_map(|(o, _)| name_keys(o))
            .collect();
        if let Some(clash) = name_keys(s).into_iter().find(|n| earlier.contains(n)) {
            d.error(
                spans.names.clone().unwrap_or(spans.listen.clone()),
                format!("conflicting server name \"{clash}\" on {}", s.listen),
            );
        }
    }
}

/// A server's names to compare; no `server_name` is nginx's `""`.
fn name_keys(s: &ServerSpec) -> Vec<String> {
    if s.names.is_empty() {
        return vec![String::new()];
    }
    s.names.iter().filter_map(name_key).collect()
}

/// A name as written back, to compare (regexes are never the same name).
fn name_key(n: &super::values::ServerName) -> Option<String> {
    use super::values::ServerName;
    match n {
        ServerName::Exact(e) => Some(e.clone()),
        ServerName::Front(f) => Some(format!("*{f}")),
        ServerName::Back(b) => Some(format!("{b}*")),
        ServerName::Regex(_) => None,
    }
}

/// A server's certificate: both files or neither, and only with `ssl`
/// (`Err`: a problem, reported).
fn tls(s: &mut ServerDraft, d: &mut Diagnostics) -> Result<Option<TlsSpec>, Reported> {
    let ssl = s.listen.as_ref().is_some_and(|(l, _)| l.ssl);
    let protocols = match s.ssl_protocols.take() {
        Some(Ok(p)) => p,
        Some(Err(Reported)) => return Err(Reported),
        None => crate::tls::DEFAULT_PROTOCOLS.to_vec(),
    };
    let (cert, key) = match (s.ssl_certificate.take(), s.ssl_certificate_key.take()) {
        (None, None) => return Ok(None),
        (Some(Ok(c)), Some(Ok(k))) => (c, k),
        (Some(Ok(f)), None) | (None, Some(Ok(f))) => {
            let other = if f.key == "ssl_certificate" {
                "ssl_certificate_key"
            } else {
                "ssl_certificate"
            };
            d.error(f.span, format!("\"{}\" needs \"{other}\"", f.key));
            return Err(Reported);
        }
        _ => return Err(Reported),
    };
    if !ssl && s.listen.is_some() {
        d.error(
            cert.span.clone(),
            "\"ssl_certificate\" is set but the server does not listen with \"ssl\" (listen = \"ADDR:PORT ssl\")",
        );
    }
    let certificate = match s.certificate.take() {
        Some(Ok(c)) => Some(c),
        Some(Err(Reported)) => return Err(Reported),
        None => None,
    };
    Ok(Some(TlsSpec {
        cert_file: cert.path,
        key_file: key.path,
        protocols,
        certificate,
    }))
}

/// A server with its locations; `None` without a usable `listen` (reported).
fn server(mut s: ServerDraft, zones: &Zones, d: &mut Diagnostics) -> Option<(ServerSpec, Spans)> {
    let tls = tls(&mut s, d);
    let level = level(s.level, zones, d);
    let proxy_pass = s.proxy_pass.and_then(Result::ok);
    if let (Some(pp), Some(span)) = (&proxy_pass, &s.proxy_pass_span) {
        group_port(pp, span, zones.groups, d);
    }
    // nginx: "duplicate location", reported after each location's own.
    let mut seen = std::collections::HashSet::new();
    let duplicates: Vec<(Range<usize>, String)> = s
        .locations
        .iter()
        .filter_map(|l| l.path.as_ref().ok())
        .filter(|p| !seen.insert(&p.rule))
        .map(|p| (p.span.clone(), format!("duplicate location \"{}\"", p.text)))
        .collect();
    let locations = s
        .locations
        .into_iter()
        .filter_map(|l| location(l, proxy_pass.as_ref(), zones, d))
        .collect();
    for (span, message) in duplicates {
        d.error(span, message);
    }
    let (options, span) = s.listen?;
    let tls_failed = tls.is_err();
    Some((
        ServerSpec {
            listen: options.addr,
            options,
            server_name: s.server_name,
            names: s.names,
            tls: tls.unwrap_or(None),
            http2: s.http2,
            http3: s.http3.unwrap_or(true),
            quic_retry: s.quic_retry.unwrap_or(false),
            ssl_early_data: s.ssl_early_data.unwrap_or(false),
            proxy_pass,
            level,
            locations,
        },
        Spans {
            listen: span,
            names: s.names_span,
            tls_failed,
        },
    ))
}

/// A location with its action: its `return`, else its own or its server's
/// `proxy_pass` (which may not replace a URI in a regex location). `None`
/// when something is missing (reported); without a usable path, only the
/// zones of its level are checked.
fn location(
    l: LocationDraft,
    server_proxy: Option<&ProxyPass>,
    zones: &Zones,
    d: &mut Diagnostics,
) -> Option<LocationSpec> {
    let level = level(l.level, zones, d);
    let path = l.path.ok()?;
    let own = l.proxy_pass.as_ref().and_then(|(p, _)| p.as_ref().ok());
    if let Some((Ok(pp), span)) = &l.proxy_pass {
        group_port(pp, span, zones.groups, d);
    }
    let proxy = own.or(server_proxy);
    if l.ret.is_none() && proxy.is_none() {
        d.error(
            path.span.clone(),
            format!("location \"{}\" has neither \"proxy_pass\" (or \"grpc_pass\") nor \"return\" (set one here or on the server)", path.text),
        );
    }
    if let (PathRule::Regex { .. }, Some(p)) = (&path.rule, proxy) {
        if p.uri.is_some() {
            let span = l
                .proxy_pass
                .as_ref()
                .map_or(path.span.clone(), |(_, s)| s.clone());
            d.error(
                span,
                "\"proxy_pass\" cannot have URI part in location given by regular expression",
            );
        }
    }
    let action = match l.ret {
        Some(ret) => Action::Return(ret.ok()?),
        None => Action::Proxy(proxy?.clone()),
    };
    Some(LocationSpec {
        path: path.text,
        rule: path.matcher.ok()?,
        level,
        action,
    })
}

/// nginx: a `proxy_pass` naming an upstream group carries no port (its
/// servers have theirs): "upstream \"NAME\" may not have port N".
fn group_port(pp: &ProxyPass, span: &Range<usize>, groups: &[String], d: &mut Diagnostics) {
    let Some(port) = pp.authority.port_u16() else {
        return;
    };
    let host = pp.host();
    if let Some(g) = groups.iter().find(|g| g.eq_ignore_ascii_case(host)) {
        d.error(
            span.clone(),
            format!(
                "upstream \"{g}\" may not have port {port} ({} names [upstreams.{g}], whose servers have their ports)",
                if pp.grpc { "grpc_pass" } else { "proxy_pass" }
            ),
        );
    }
}
