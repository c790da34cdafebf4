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
mod tests {
    #[test]
    fn an_open_admin_listener_without_a_token_is_warned_about() {
        let text = |admin: &str| {
            format!(
                "[admin]\n{admin}\n[[servers]]\nlisten = \"127.0.0.1:8080\"\n[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200 }}\n"
            )
        };
        let out = |admin: &str| {
            let spec = crate::config::parse_str("t.toml", &text(admin)).unwrap();
            summary("t.toml", &spec)
        };
        assert!(!out("listen = \"127.0.0.1:9090\"").contains("warning"));
        let open = out("listen = \"0.0.0.0:9090\"");
        assert!(
            open.contains("warning: [admin] listens on 0.0.0.0:9090"),
            "{open}"
        );
        assert!(open.contains("write methods (DELETE): off"), "{open}");
    }

    use super::*;

    #[test]
    fn grpc_pass_locations_show_the_grpc_set() {
        let text = "grpc_next_upstream_tries = 2\n[upstreams.g]\nservers = [{ address = \"127.0.0.1:1\" }]\n[[servers]]\nlisten = \"127.0.0.1:1\"\n[[servers.locations]]\npath = \"/\"\ngrpc_pass = \"grpc://g\"\nproxy_next_upstream_tries = 5\n";
        let out = summary("t.toml", &crate::config::parse_str("t.toml", text).unwrap());
        assert!(
            out.contains("grpc_pass grpc://g  [status 503, next_upstream error timeout tries 2]"),
            "{out}"
        );
    }

    #[test]
    fn forgeable_keys_and_real_ip_from_everyone_are_warned_about() {
        let out = |key: &str, real_ip: &str| {
            let text = format!(
                "[zones.z]\nkey = \"{key}\"\nsize = \"1m\"\nrate = \"1r/s\"\n[[servers]]\nlisten = \"127.0.0.1:8080 proxy_protocol\"\nreal_ip = {real_ip}\n[[servers.locations]]\npath = \"/\"\nlimit_req = {{ zone = \"z\" }}\nreturn = {{ status = 200 }}\n"
            );
            let spec = crate::config::parse_str("t.toml", &text).unwrap();
            summary("t.toml", &spec)
        };
        let pp = r#"{ from = ["10.0.0.0/8"], header = "proxy_protocol" }"#;
        let quiet = out("$binary_remote_addr", pp);
        assert!(!quiet.contains("warning"), "{quiet}");
        assert!(
            quiet.contains("server 127.0.0.1:8080 proxy_protocol"),
            "{quiet}"
        );
        assert!(
            quiet.contains("  real_ip proxy_protocol from 10.0.0.0/8"),
            "{quiet}"
        );
        for key in [
            "$http_x_forwarded_for",
            "${http_forwarded}:$uri",
            "$http_X_Real_IP",
        ] {
            let w = out(key, pp);
            assert!(w.contains("warning: zone z is keyed on"), "{key}: {w}");
        }
        for header in ["X-Forwarded-For", "Forwarded"] {
            for from in ["0.0.0.0/0", "::/0"] {
                let r = format!(r#"{{ from = ["127.0.0.1", "{from}"], header = "{header}" }}"#);
                let w = out("$binary_remote_addr", &r);
                assert!(w.contains("warning: real_ip reads"), "{header} {from}: {w}");
            }
        }
        // Any client reaching a proxy_protocol address can send a header
        // of its own: trusting every peer is warned about there too.
        let everyone_pp = r#"{ from = ["0.0.0.0/0"], header = "proxy_protocol" }"#;
        assert!(out("$binary_remote_addr", everyone_pp).contains("warning: real_ip reads"));
        let w = out("$proxy_add_x_forwarded_for", pp);
        assert!(w.contains("warning: zone z is keyed on"), "{w}");
        let trusted = r#"{ from = ["10.0.0.0/8"], header = "Forwarded" }"#;
        assert!(!out("$binary_remote_addr", trusted).contains("warning"));
    }

    #[test]
    fn proxy_protocol_is_the_addresss_and_real_ip_without_it_is_warned_about() {
        let spec = crate::config::parse_str(
            "t.toml",
            r#"
real_ip = { from = ["10.0.0.0/8"], header = "proxy_protocol" }
[[servers]]
listen = "127.0.0.1:8080 proxy_protocol"
server_name = "a"
proxy_pass = "http://127.0.0.1:9"
[[servers]]
listen = "127.0.0.1:8080"
server_name = "b"
proxy_pass = "http://127.0.0.1:9"
[[servers]]
listen = "127.0.0.1:8081"
proxy_pass = "http://127.0.0.1:9"
"#,
        )
        .unwrap();
        let out = summary("t.toml", &spec);
        assert!(
            out.contains("server 127.0.0.1:8080 proxy_protocol (b)"),
            "{out}"
        );
        assert_eq!(
            out.matches("warning: real_ip reads proxy_protocol, but this server's listen has no proxy_protocol").count(),
            1,
            "{out}"
        );
    }

    #[test]
    fn zones_name_their_algorithm_and_rate() {
        let spec = crate::config::parse_str(
            "t.toml",
            r#"
[zones.plain]
key = "$binary_remote_addr"
size = "1m"
rate = "2r/s"
[zones.minute]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[zones.article]
key = "$binary_remote_addr"
size = "1m"
rate = "10r/10s"
[zones.window]
key = "$binary_remote_addr"
size = "1m"
rate = "100r/5m"
algorithm = "sliding_window"
[zones.gcra]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/h"
algorithm = "gcra"
[zones.log]
key = "$binary_remote_addr"
size = "1m"
rate = "100r/m"
algorithm = "sliding_log"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/"
limit_req = { zone = "gcra", burst = 9, nodelay = true }
return = { status = 200 }
"#,
        )
        .unwrap();
        let s = summary("t.toml", &spec);
        let zone = |name: &str| {
            s.lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("no {name} in\n{s}"))
                .split_once("states)")
                .map(|(_, rest)| rest.trim().to_string())
                .unwrap()
        };
        assert_eq!(zone("plain"), "leaky_bucket rate 2r/s");
        assert_eq!(zone("minute"), "leaky_bucket rate 1r/m = 16 milli-req/s");
        assert_eq!(zone("article"), "leaky_bucket rate 10r/10s = 1r/s");
        assert_eq!(zone("window"), "sliding_window rate 100r/5m");
        assert_eq!(zone("gcra"), "gcra rate 1r/h");
        assert!(s.contains("limit_req gcra burst=9 nodelay"), "{s}");
        // A state per key, and for a sliding log its log of 100 times too
        // (1 + (32 + 800) / 64 = 14 states a key).
        assert!(s.contains("1048576 B (16384 states)  gcra"), "{s}");
        assert!(s.contains("1048576 B (1170 states)  sliding_log"), "{s}");
    }

    #[test]
    fn https_upstreams_say_how_they_are_verified() {
        let spec = crate::config::parse_str(
            "t.toml",
            r#"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "https://up.example"
[[servers.locations]]
path = "/system"
[[servers.locations]]
path = "/ca"
proxy_ssl_trusted_certificate = "ca.pem"
proxy_ssl_name = "backend.internal"
[[servers.locations]]
path = "/lab"
proxy_ssl_verify = false
[[servers.locations]]
path = "/plain"
proxy_pass = "http://up.example"
"#,
        )
        .unwrap();
        let s = summary("t.toml", &spec);
        let line = |path: &str| {
            s.lines()
                .find(|l| l.contains(&format!("location {path} ")))
                .unwrap_or_else(|| panic!("no {path} in\n{s}"))
                .to_string()
        };
        assert!(
            line("/system").contains("proxy_pass https://up.example"),
            "{s}"
        );
        assert!(
            line("/system").ends_with("[status 503, tls verify system CAs]"),
            "{s}"
        );
        assert!(
            line("/ca").ends_with(", tls verify ca.pem name backend.internal]"),
            "{s}"
        );
        assert!(line("/lab").ends_with(", tls verify off]"), "{s}");
        assert!(line("/plain").ends_with("[status 503]"), "{s}");
    }

    /// The groups and their servers as nginx writes them, and what a
    /// location proxying to one does on failure.
    #[test]
    fn upstream_groups_and_next_upstream() {
        let spec = crate::config::parse_str(
            "t.toml",
            r#"
[upstreams.backend]
servers = [
  { address = "127.0.0.1:8081", weight = 3, max_fails = 2, fail_timeout = "30s" },
  { address = "127.0.0.1:8082" },
  { address = "127.0.0.1:8083", backup = true },
  { address = "127.0.0.1:8084", down = true },
]
keepalive = 8
[upstreams.ring]
servers = [{ address = "10.0.0.1" }]
balance = "hash"
hash = "$request_uri"
consistent = true
[[servers]]
listen = "127.0.0.1:8080"
proxy_next_upstream = ["error", "http_502"]
proxy_next_upstream_tries = 2
[[servers.locations]]
path = "/"
proxy_pass = "http://backend"
[[servers.locations]]
path = "/plain"
proxy_pass = "http://127.0.0.1:9000"
"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let out = summary("t.toml", &spec);
        for want in [
            "upstream backend: round_robin, keepalive 8\n  server 127.0.0.1:8081 weight=3 max_fails=2 fail_timeout=30000ms\n  server 127.0.0.1:8082\n  server 127.0.0.1:8083 backup\n  server 127.0.0.1:8084 down\n",
            "upstream ring: hash $request_uri consistent\n  server 10.0.0.1\n",
            "proxy_pass http://backend  [status 503, next_upstream error http_502 tries 2]",
            "proxy_pass http://127.0.0.1:9000  [status 503]",
        ] {
            assert!(out.contains(want), "{want:?} in:\n{out}");
        }
    }
}
