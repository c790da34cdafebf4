//! `sluice check`: a one-screen summary of a valid configuration, one
//! function per part of it (zones, Redis, each server and its locations,
//! the process settings).

use crate::config::{Action, Backend, Level, LocationSpec, ServerSpec, Spec, ZoneSpec};
use crate::errlog::Severity;
use crate::limiter::redis::RedisServers;
use crate::limiter::{Algorithm, Limit, Policy, RedisConfig};
use std::fmt::Write as _;

/// Render the summary of `spec`.
pub fn summary(file: &str, spec: &Spec) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{file}: syntax is ok, configuration is valid");
    let _ = writeln!(s, "zones:");
    for z in &spec.zones {
        zone(&mut s, z);
    }
    for z in &spec.zones {
        forgeable_key(&mut s, z);
    }
    vars(&mut s, &spec.vars);
    if let Some(r) = &spec.redis {
        redis(&mut s, r);
    }
    for u in &spec.upstreams {
        upstream(&mut s, u);
    }
    for srv in &spec.servers {
        server(&mut s, spec, srv);
    }
    if let Some(a) = &spec.ops.admin {
        admin(&mut s, a);
    }
    if let Some(p) = &spec.ops.pid_file {
        let _ = writeln!(s, "pid_file {}", p.display());
    }
    if spec.ops.watch {
        let _ = writeln!(s, "watch: reloads when the file changes");
    }
    s
}

/// The rate as written (`10r/10s`); for nginx's leaky bucket also what it
/// leaks when that reads differently (`10r/10s = 1r/s`), in its own
/// milli-requests per second when it truncated (`1r/m = 16 milli-req/s`).
fn rate_text(p: &Policy) -> String {
    let written = crate::limiter::algorithm::rate_text(p.count, p.period_ms);
    let milli = p.rate.milli();
    let leaks = match milli % 1000 {
        0 => format!("{}r/s", milli / 1000),
        _ => format!("{milli} milli-req/s"),
    };
    if p.algorithm != Algorithm::LeakyBucket || leaks == written {
        written
    } else {
        format!("{written} = {leaks}")
    }
}

/// A zone: key, size (and how many keys' states fit), algorithm and rate,
/// backend.
fn zone(s: &mut String, z: &ZoneSpec) {
    let _ = writeln!(
        s,
        "  {:<16} key {:<24} size {:>8} B ({} states)  {} rate {}{}",
        z.name,
        z.key.source(),
        z.size,
        crate::limiter::MemoryZone::keys_in(z.size, &z.policy),
        z.policy.algorithm.name(),
        rate_text(&z.policy),
        match z.backend {
            Backend::Memory => "",
            Backend::Redis => "  backend redis",
        }
    );
}

/// The client's fields any client can write: a key made of them is
/// whatever each request says.
fn forgeable(v: &crate::vars::Var) -> bool {
    use crate::vars::Var;
    match v {
        Var::Http(h) => h == "x-forwarded-for" || h == "forwarded" || h == "x-real-ip",
        Var::ProxyAddXForwardedFor => true,
        _ => false,
    }
}

/// A warning when a zone's key reads a field any client can forge.
fn forgeable_key(s: &mut String, z: &ZoneSpec) {
    if z.key.uses(forgeable) {
        let _ = writeln!(
            s,
            "warning: zone {} is keyed on \"{}\", which any client can write: each request names its own bucket (key on $binary_remote_addr with real_ip from your proxies instead)",
            z.name,
            z.key.source()
        );
    }
}

/// A server's `real_ip`: where the client comes from, and a warning when
/// it trusts every peer (any client can then name itself, in a field or
/// in a PROXY header of its own), or reads a PROXY header its address
/// never has (`proxy_protocol` missing from its `listen`: nothing then).
fn real_ip(s: &mut String, r: &crate::realip::RealIp, address_reads_headers: bool) {
    use crate::realip::Source;
    let from: Vec<String> = r.from.iter().map(|n| n.to_string()).collect();
    let source = match &r.source {
        Source::Header(h) => h.as_str().to_string(),
        Source::ProxyProtocol => "proxy_protocol".into(),
        Source::Forwarded => "forwarded".into(),
    };
    let _ = writeln!(
        s,
        "  real_ip {source} from {}{}",
        from.join(", "),
        if r.recursive { " (recursive)" } else { "" }
    );
    if r.trusts_everyone() {
        let _ = writeln!(
            s,
            "warning: real_ip reads {source} from any client (from {}): any client can name itself; list only your proxies' addresses",
            from.join(", ")
        );
    }
    if r.source == Source::ProxyProtocol && !address_reads_headers {
        let _ = writeln!(
            s,
            "warning: real_ip reads proxy_protocol, but this server's listen has no proxy_protocol: no connection on it carries a header"
        );
    }
}

/// `[redis]`, its passwords masked.
fn redis(s: &mut String, r: &RedisConfig) {
    let mask = |u: &String| {
        u.split_once('@')
            .map_or(u.clone(), |(scheme, h)| match scheme.split_once("://") {
                Some((scheme, _)) => format!("{scheme}://***@{h}"),
                None => format!("***@{h}"),
            })
    };
    let list = |urls: &[String]| urls.iter().map(mask).collect::<Vec<_>>().join(", ");
    let servers = match &r.servers {
        RedisServers::Url(url) => mask(url),
        RedisServers::Cluster(seeds) => format!("cluster [{}]", list(seeds)),
        RedisServers::Sentinel {
            sentinels,
            master_name,
        } => format!("sentinel [{}] master \"{master_name}\"", list(sentinels)),
    };
    let _ = writeln!(
        s,
        "redis: {servers} timeout {} ms, on_error {}, prefix \"{}\", reject_cache {}",
        r.timeout.as_millis(),
        r.on_error.as_str(),
        r.prefix,
        if r.reject_cache { "on" } else { "off" }
    );
}

/// A server line, then a line per location.
fn server(s: &mut String, spec: &Spec, srv: &ServerSpec) {
    let level = srv.level.inherit(&spec.http);
    // The address's flag: one server saying it makes all on it read headers.
    let proxy_protocol = spec
        .servers
        .iter()
        .any(|o| o.listen == srv.listen && o.options.proxy_protocol);
    let _ = writeln!(
        s,
        "server {}{}{}",
        srv.listen,
        if proxy_protocol {
            " proxy_protocol"
        } else {
            ""
        },
        if srv.server_name.is_empty() {
            String::new()
        } else {
            format!(" ({})", srv.server_name)
        }
    );
    if let Some(t) = &srv.tls {
        tls(s, srv, t, crate::clock::unix_secs());
    }
    if srv.options.quic {
        quic(s, srv, &level);
    }
    if srv.ssl_early_data {
        early_data(s, srv);
    }
    if let Some(r) = &level.real_ip {
        real_ip(s, r, proxy_protocol);
    }
    for loc in &srv.locations {
        location(s, spec, loc, &loc.effective(&level));
    }
}

/// A server's certificate (read, its key checked against it), its expiry
/// and protocols; `now` in Unix seconds.
fn tls(s: &mut String, srv: &ServerSpec, t: &crate::config::TlsSpec, now: u64) {
    let expiry = match t.certificate.as_ref().and_then(|c| c.not_after) {
        Some(at) => {
            let date = crate::fmt::Timestamp::from_secs(at.max(0) as u64).iso8601();
            let left = at - now as i64;
            if left < 0 {
                format!("EXPIRED {date}, {} day(s) ago", -left / 86_400)
            } else {
                format!("expires {date}, in {} day(s)", left / 86_400)
            }
        }
        None => "expiry unknown".into(),
    };
    let read = match &t.certificate {
        Some(c) => format!("{} in chain, key matches, {expiry}", c.chain_len),
        None => "not read".into(),
    };
    let protocols: Vec<&str> = t.protocols.iter().map(|p| p.name()).collect();
    let http2 = srv.http2_on();
    let _ = writeln!(
        s,
        "  tls {} ({read}) protocols {} http2 {}",
        t.cert_file.display(),
        protocols.join(" "),
        if http2 { "on" } else { "off" }
    );
}

/// `ssl_early_data`: what it does not do. sluice takes 0-RTT on a `quic`
/// listen only; TLS over TCP refuses early data (its clients send again
/// after the handshake), where nginx takes it on both.
fn early_data(s: &mut String, srv: &ServerSpec) {
    let _ = if srv.options.quic {
        writeln!(
            s,
            "warning: ssl_early_data on {} applies to its quic listen only: TLS over TCP takes no early data (its clients send after the handshake)",
            srv.listen
        )
    } else {
        writeln!(
            s,
            "warning: ssl_early_data on {} does nothing: it applies to a quic listen, and TLS over TCP takes no early data",
            srv.listen
        )
    };
}

/// A `quic` listen: HTTP/3, Retry and 0-RTT on or off, and a warning when no
/// `add_header Alt-Svc` tells browsers of it (they find HTTP/3 only so).
fn quic(s: &mut String, srv: &ServerSpec, level: &Level) {
    let _ = writeln!(
        s,
        "  quic {} (udp) http3 {} quic_retry {} ssl_early_data {}",
        srv.listen,
        if srv.http3 { "on" } else { "off" },
        if srv.quic_retry { "on" } else { "off" },
        if srv.ssl_early_data { "on" } else { "off" }
    );
    let advertised = |l: &Level| {
        l.headers
            .add_header
            .as_ref()
            .is_some_and(|h| h.iter().any(|a| a.name.as_str() == "alt-svc"))
    };
    let everywhere = advertised(level)
        || !srv.locations.is_empty()
            && srv
                .locations
                .iter()
                .all(|l| advertised(&l.effective(level)));
    if srv.http3 && !everywhere {
        let _ = writeln!(
            s,
            "warning: {} listens with quic but its responses carry no Alt-Svc: browsers will not find HTTP/3 (add_header = [{{ name = \"Alt-Svc\", value = 'h3=\":{}\"; ma=86400', always = true }}])",
            srv.listen,
            srv.listen.port()
        );
    }
}

/// A location with its effective limits, action and limit_req settings.
fn location(s: &mut String, spec: &Spec, loc: &LocationSpec, eff: &Level) {
    let limits = limits_text(spec, eff);
    let _ = writeln!(
        s,
        "  location {:<14} {:<40} {}  [status {}{}{}{}{}]",
        loc.path,
        if limits.is_empty() {
            "no limit".to_string()
        } else {
            format!("limit_req {}", limits.join(", "))
        },
        action_text(&loc.action),
        eff.status
            .unwrap_or(crate::config::DEFAULT_LIMIT_REQ_STATUS),
        match eff.log_level {
            Some(l) if l != Severity::Error => format!(", log {}", l.name()),
            _ => String::new(),
        },
        if eff.dry_run == Some(true) {
            ", dry run"
        } else {
            ""
        },
        upstream_tls_text(&loc.action, eff),
        group_text(spec, &loc.action, eff),
    );
    if let Some(rules) = eff.access.as_deref().filter(|r| !r.is_empty()) {
        let text: Vec<String> = rules.iter().map(|r| r.to_string()).collect();
        let _ = writeln!(s, "    access: {}", text.join("; "));
    }
    if let Some(c) = eff.compress.compile() {
        compression(s, &c);
    }
}

/// Where compression is on: the codings with their levels, and what is
/// compressed (nginx's `gzip_types`, `gzip_min_length`).
fn compression(s: &mut String, c: &crate::compress::Compression) {
    let codings: Vec<String> = c
        .codings
        .iter()
        .map(|k| match k {
            crate::compress::Coding::Gzip => format!("gzip {}", c.gzip_level),
            crate::compress::Coding::Zstd => format!("zstd {}", c.zstd_level),
            crate::compress::Coding::Br => format!("br {}", c.brotli_level),
        })
        .collect();
    let types = match &c.types {
        crate::compress::Types::Any => "*".to_string(),
        crate::compress::Types::List(l) => std::iter::once("text/html".to_string())
            .chain(
                l.iter()
                    .filter(|t| t.as_slice() != b"text/html")
                    .map(|t| String::from_utf8_lossy(t).into_owned()),
            )
            .collect::<Vec<_>>()
            .join(" "),
    };
    let _ = writeln!(
        s,
        "    compress {} (types {types}; min_length {}{})",
        codings.join(", "),
        c.min_length,
        if c.vary { "; vary" } else { "" }
    );
}

/// `[maps]` and `[geos]`: each variable, what it matches and how many
/// entries it has.
fn vars(s: &mut String, tables: &crate::vars::Tables) {
    use crate::vars::Def;
    if !tables.is_empty() {
        let _ = writeln!(s, "variables:");
    }
    for (name, def) in tables.names().iter().zip(tables.defs()) {
        let what = match def {
            Def::Map(m) => format!("map {}", m.describe()),
            Def::Geo(g) => format!("geo {}", g.describe()),
        };
        let _ = writeln!(s, "  ${name:<15} {what}");
    }
}

/// `upstream NAME: BALANCE[, keepalive N]` and its servers, one a line, as
/// nginx writes them (`weight=`, `max_fails=`, `fail_timeout=` when not
/// the defaults; `backup`, `down`).
fn upstream(s: &mut String, u: &crate::config::UpstreamSpec) {
    use crate::upstream::group::{DEFAULT_FAIL_TIMEOUT, DEFAULT_MAX_FAILS, Method};
    let d = &u.def;
    let balance = match d.method {
        Method::RoundRobin => "round_robin".to_string(),
        Method::LeastConn => "least_conn".to_string(),
        Method::Hash => format!("hash {}", d.hash.as_deref().unwrap_or("")),
        Method::Consistent => format!("hash {} consistent", d.hash.as_deref().unwrap_or("")),
    };
    let keepalive = d
        .keepalive
        .map(|n| format!(", keepalive {n}"))
        .unwrap_or_default();
    let _ = writeln!(s, "upstream {}: {balance}{keepalive}", d.name);
    for v in &d.servers {
        let mut t = format!("  server {}", v.address);
        if v.weight != 1 {
            let _ = write!(t, " weight={}", v.weight);
        }
        if v.max_fails != DEFAULT_MAX_FAILS {
            let _ = write!(t, " max_fails={}", v.max_fails);
        }
        if v.fail_timeout != DEFAULT_FAIL_TIMEOUT {
            let _ = write!(t, " fail_timeout={}ms", v.fail_timeout.as_millis());
        }
        for (on, word) in [(v.backup, " backup"), (v.down, " down")] {
            if on {
                t.push_str(word);
            }
        }
        let _ = writeln!(s, "{t}");
    }
}

/// For a `proxy_pass` to a group: when a request goes on to its next
/// server.
fn group_text(spec: &Spec, action: &Action, eff: &Level) -> String {
    let Action::Proxy(p) = action else {
        return String::new();
    };
    let named = p.authority.port().is_none()
        && spec
            .upstreams
            .iter()
            .any(|u| u.def.name.eq_ignore_ascii_case(p.host()));
    if !named {
        return String::new();
    }
    let conditions = eff
        .proxy_next_upstream
        .unwrap_or(crate::upstream::group::Conditions::DEFAULT);
    let mut t = format!(", next_upstream {}", conditions.words());
    if let Some(n) = eff.proxy_next_upstream_tries.filter(|&n| n > 0) {
        let _ = write!(t, " tries {n}");
    }
    if let Some(d) = eff.proxy_next_upstream_timeout.filter(|d| !d.is_zero()) {
        let _ = write!(t, " timeout {}ms", d.as_millis());
    }
    t
}

/// For an `https://` upstream: how its certificate is verified (against
/// what, for which name), or that it is not.
fn upstream_tls_text(action: &Action, eff: &Level) -> String {
    let Action::Proxy(p) = action else {
        return String::new();
    };
    if !p.https {
        return String::new();
    }
    let tls = &eff.proxy_ssl;
    if tls.verify == Some(false) {
        return ", tls verify off".into();
    }
    let mut t = match &tls.trusted_certificate {
        Some(f) => format!(", tls verify {}", f.path.display()),
        None => ", tls verify system CAs".into(),
    };
    if let Some(n) = &tls.name {
        let _ = write!(t, " name {}", n.to_str());
    }
    if tls.certificate.is_some() {
        t.push_str(" client cert");
    }
    t
}

/// Each `limit_req` as nginx writes it: `ZONE burst=N nodelay|delay=N`.
fn limits_text(spec: &Spec, eff: &Level) -> Vec<String> {
    eff.limit_req
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|l| {
            let mut t = spec.zones[l.zone].name.clone();
            if l.burst > 0 {
                let _ = write!(t, " burst={}", l.burst / 1000);
            }
            if l.delay == Limit::NODELAY {
                t.push_str(" nodelay");
            } else if l.delay > 0 {
                let _ = write!(t, " delay={}", l.delay / 1000);
            }
            t
        })
        .collect()
}

fn action_text(action: &Action) -> String {
    match action {
        Action::Return(r) => format!("return {}", r.status),
        Action::Proxy(p) => format!(
            "{} {}://{}{}",
            if p.grpc { "grpc_pass" } else { "proxy_pass" },
            p.scheme(),
            p.authority,
            p.uri.as_deref().unwrap_or("")
        ),
    }
}

/// `[admin]`: where, who may use it, and a warning when anyone may reach
/// it and nothing guards the write methods.
fn admin(s: &mut String, a: &crate::config::AdminSpec) {
    let _ = writeln!(
        s,
        "admin {} (/metrics, /healthz, /api/9, /api/sluice, dashboard at /)",
        a.listen
    );
    if !a.allow.is_empty() {
        let nets: Vec<String> = a.allow.iter().map(|n| n.to_string()).collect();
        let _ = writeln!(s, "  allow {} (besides loopback)", nets.join(", "));
    }
    let _ = writeln!(
        s,
        "  write methods (DELETE): {}",
        if a.token.is_some() {
            "with the token of token_file"
        } else {
            "off (no token_file)"
        }
    );
    if a.top_keys > 0 {
        let _ = writeln!(s, "  top limited keys: {} per zone", a.top_keys);
    }
    let open = !a.listen.ip().is_loopback() || !a.allow.is_empty();
    if open && a.token.is_none() {
        let _ = writeln!(
            s,
            "warning: [admin] listens on {} for other hosts without a token_file: anyone allowed can read every zone's clients",
            a.listen
        );
    }
}

#[cfg(test)]
mod tests;
