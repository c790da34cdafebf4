//! `[upstreams.NAME]` and the `proxy_next_upstream*` keys: what is accepted, and every
//! problem at its FILE:LINE:COL.

use super::tests::{errors, ok};
use crate::upstream::group::{Conditions, Method};
use std::time::Duration;

const SERVER: &str = "[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://backend\"\n";

#[test]
fn a_group_as_written() {
    let spec = ok(&format!(
        r#"[upstreams.backend]
servers = [
  {{ address = "127.0.0.1:8081", weight = 3, max_fails = 2, fail_timeout = "30s" }},
  {{ address = "127.0.0.1:8082" }},
  {{ address = "127.0.0.1:8083", backup = true }},
  {{ address = "127.0.0.1:8084", down = true }},
]
balance = "least_conn"
keepalive = 32
{SERVER}proxy_next_upstream = ["error", "http_503"]
proxy_next_upstream_tries = 3
proxy_next_upstream_timeout = "10s"
"#
    ));
    let d = &spec.upstreams[0].def;
    assert_eq!(
        (d.name.as_str(), d.method, d.keepalive),
        ("backend", Method::LeastConn, Some(32))
    );
    let s = &d.servers;
    assert_eq!(
        (s[0].weight, s[0].max_fails, s[0].fail_timeout),
        (3, 2, Duration::from_secs(30))
    );
    assert_eq!(
        (s[1].weight, s[1].max_fails, s[1].fail_timeout),
        (1, 1, Duration::from_secs(10))
    );
    assert!(s[2].backup && s[3].down);
    let l = &spec.servers[0].level;
    assert_eq!(
        l.proxy_next_upstream,
        Some(Conditions::parse("error http_503").unwrap())
    );
    assert_eq!(l.proxy_next_upstream_tries, Some(3));
    assert_eq!(l.proxy_next_upstream_timeout, Some(Duration::from_secs(10)));
}

#[test]
fn problems_at_their_place() {
    let text = format!(
        r#"[upstreams.empty]
servers = []
[upstreams.spare]
servers = [{{ address = "127.0.0.1:1", backup = true }}]
[upstreams.heavy]
servers = [{{ address = "127.0.0.1:1", weight = 0 }}, {{ address = "http://x:1" }}, {{ weight = 2 }}]
[upstreams.hashed]
servers = [{{ address = "127.0.0.1:1" }}, {{ address = "127.0.0.1:2", backup = true }}]
balance = "hash"
hash = "$request_uri"
[upstreams.nokey]
servers = [{{ address = "127.0.0.1:1" }}]
balance = "hash"
[upstreams.stray]
servers = [{{ address = "127.0.0.1:1" }}]
hash = "$uri"
colour = "blue"
{SERVER}proxy_next_upstream = "error http_501"
[[servers.locations]]
path = "/"
proxy_pass = "http://hashed:8080"
"#
    );
    assert_eq!(
        errors(&text),
        vec![
            "t.toml:2:11: no servers in upstream \"empty\"",
            "t.toml:4:11: no servers in upstream \"spare\"",
            "t.toml:6:48: \"weight\": value must be between 1 and 1000000",
            "t.toml:6:65: invalid address \"http://x:1\" in upstream (expected \"IP:PORT\", \"HOST:PORT\", or without the port for 80)",
            "t.toml:6:81: a server of an upstream must have \"address\"",
            "t.toml:8:77: balance = \"hash\" does not take backup servers (nginx: invalid parameter \"backup\")",
            "t.toml:13:11: [upstreams.nokey] has balance = \"hash\" but no \"hash\" key (e.g. hash = \"$request_uri\")",
            "t.toml:16:8: \"hash\" needs balance = \"hash\"",
            "t.toml:17:1: unknown key \"colour\" in [upstreams.stray] (expected one of: servers, balance, hash, consistent, keepalive)",
            "t.toml:21:23: \"proxy_next_upstream\": invalid value \"http_501\" (expected error, timeout, invalid_header, http_500, http_502, http_503, http_504, http_403, http_404, http_429, non_idempotent or off)",
            "t.toml:24:14: upstream \"hashed\" may not have port 8080 (proxy_pass names [upstreams.hashed], whose servers have their ports)",
        ]
    );
}

/// A proxy_pass whose host names no group is a host, as in nginx; a group's name is matched
/// without case.
#[test]
fn unknown_names_are_hosts() {
    let spec = ok(
        "[upstreams.Backend]\nservers = [{ address = \"127.0.0.1:1\" }]\n[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://other:81\"\n[[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://backend\"\n",
    );
    let c = crate::config::Config::compile(spec, None).unwrap_or_else(|e| panic!("{e}"));
    let locs: Vec<_> = c.servers[0].locations.iter().collect();
    assert!(
        locs.iter()
            .any(|l| l.group.as_ref().is_some_and(|g| g.name() == "Backend"))
    );
    // A host name resolves at compile, one server per address.
    let spec = ok(
        "[upstreams.b]\nservers = [{ address = \"localhost:81\" }]\n[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://b\"\n",
    );
    let c = crate::config::Config::compile(spec, None).unwrap_or_else(|e| panic!("{e}"));
    let g = &c.upstreams[0];
    assert!(
        !g.primary.is_empty()
            && g.primary
                .iter()
                .all(|p| p.name.ends_with(":81") && p.server == "localhost:81")
    );
    let spec = ok(
        "[upstreams.b]\nservers = [{ address = \"no-such-host.invalid\" }]\n[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://b\"\n",
    );
    let e = crate::config::Config::compile(spec, None)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.starts_with("host not found in upstream \"no-such-host.invalid\" in upstream \"b\""),
        "{e}"
    );
}

/// A reload keeps a group that did not change (with its state), and makes a new one that did.
#[test]
fn a_reload_keeps_an_unchanged_group() {
    let text = |ft: &str| {
        format!(
            "[upstreams.b]\nservers = [{{ address = \"127.0.0.1:1\", fail_timeout = \"{ft}\" }}, {{ address = \"127.0.0.1:2\" }}]\n{SERVER}"
        )
    };
    let compile = |t: &str, prev| {
        crate::config::Config::compile(ok(t), prev).unwrap_or_else(|e| panic!("{e}"))
    };
    let first = compile(&text("1s"), None);
    let same = compile(&text("1s"), Some(&first));
    assert!(std::sync::Arc::ptr_eq(
        &first.upstreams[0],
        &same.upstreams[0]
    ));
    let changed = compile(&text("2s"), Some(&same));
    assert!(!std::sync::Arc::ptr_eq(
        &same.upstreams[0],
        &changed.upstreams[0]
    ));
}
