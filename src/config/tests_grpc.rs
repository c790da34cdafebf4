//! The `grpc_*` keys: read at the three levels, inherited on their own
//! (apart from their `proxy_*` twins, as nginx's two modules), a
//! `grpc_pass` location compiled from them and a `proxy_pass` one from the
//! `proxy_*` ones, nginx's grpc module's defaults, `grpcs://` verified
//! with ALPN `h2`, and mistakes as `FILE:LINE:COL`, all at once.

use super::tests::{errors, ok};
use super::tests_upstream_tls::Pki;
use super::*;
use crate::upstream::group::Conditions;
use std::sync::Arc;
use std::time::Duration;

fn compile(text: &str) -> Config {
    Config::compile(ok(text), None).unwrap_or_else(|e| panic!("{e}"))
}

fn loc<'c>(c: &'c Config, path: &str) -> &'c Arc<Location> {
    c.servers[0].locations.find(path).unwrap()
}

const BOTH: &str = r#"
proxy_read_timeout = "11s"
grpc_read_timeout = "21s"
grpc_connect_timeout = "2s"
proxy_next_upstream = "error http_502"
grpc_next_upstream = ["error", "timeout", "http_503"]
grpc_next_upstream_tries = 3
proxy_set_header = { "X-Proxy" = "p" }
grpc_set_header = { "X-Grpc" = "g", "X-Forwarded-For" = "" }
grpc_hide_header = "X-Secret"

[upstreams.backends]
servers = [{ address = "127.0.0.1:50051" }, { address = "127.0.0.1:50052" }]

[[servers]]
listen = "127.0.0.1:1"
grpc_send_timeout = "7s"
proxy_send_timeout = "8s"

[[servers.locations]]
path = "/grpc"
grpc_pass = "grpc://backends"
proxy_connect_timeout = "99s"

[[servers.locations]]
path = "/own"
grpc_pass = "grpc://127.0.0.1:50051"
grpc_read_timeout = "1s"
grpc_next_upstream_timeout = "5s"
grpc_set_header = { Host = "$host" }
grpc_pass_header = "Server"

[[servers.locations]]
path = "/http"
proxy_pass = "http://backends"
grpc_read_timeout = "1s"
"#;

/// Each module reads its own set: a grpc_pass location never sees the
/// proxy_* values (nor a proxy_pass one the grpc_* values), and each set is
/// inherited top → server → location on its own.
#[test]
fn grpc_pass_reads_the_grpc_set_and_proxy_pass_the_proxy_set() {
    let c = compile(BOTH);
    let g = loc(&c, "/grpc");
    assert_eq!(g.timeouts.proxy_read, Duration::from_secs(21));
    assert_eq!(g.timeouts.proxy_connect, Duration::from_secs(2), "not 99s");
    assert_eq!(g.timeouts.proxy_send, Duration::from_secs(7));
    let want = Conditions::parse("error timeout http_503").unwrap();
    assert_eq!(g.next_upstream.conditions, want);
    assert_eq!((g.next_upstream.tries, g.next_upstream.timeout), (3, None));
    assert!(g.group.is_some(), "grpc://backends names the group");
    let set = |l: &Location, n: &str| l.headers.proxy.replaces(n.as_bytes());
    assert!(set(g, "x-grpc") && !set(g, "x-proxy"));
    assert!(g.headers.hidden.hides(b"x-secret"));

    let own = loc(&c, "/own");
    assert_eq!(own.timeouts.proxy_read, Duration::from_secs(1));
    assert_eq!(own.next_upstream.timeout, Some(Duration::from_secs(5)));
    assert_eq!(own.next_upstream.tries, 3, "inherited from the top");
    assert!(set(own, "host") && !set(own, "x-grpc"), "its own list");
    assert!(!own.headers.hidden.hides(b"server") && own.headers.hidden.hides(b"x-secret"));

    let h = loc(&c, "/http");
    assert_eq!(h.timeouts.proxy_read, Duration::from_secs(11));
    assert_eq!(h.timeouts.proxy_connect, Duration::from_secs(60));
    assert_eq!(h.timeouts.proxy_send, Duration::from_secs(8));
    assert_eq!(
        h.next_upstream.conditions,
        Conditions::parse("error http_502").unwrap()
    );
    assert_eq!(h.next_upstream.tries, 0);
    assert!(set(h, "x-proxy") && !set(h, "x-grpc"));
    assert!(!h.headers.hidden.hides(b"x-secret"));
}

/// nginx's grpc module's defaults: 60s timeouts, `error timeout`, the
/// request's Host replaced (by `:authority`, from `$proxy_host`), Date,
/// Server and X-Accel-* hidden but not X-Pad; sluice's X-Forwarded-For as
/// for proxy_pass.
#[test]
fn defaults_are_the_grpc_modules() {
    let c = compile(
        "[[servers]]\nlisten = \"127.0.0.1:1\"\ngrpc_pass = \"grpc://127.0.0.1:50051\"\n\
         [[servers.locations]]\npath = \"/p\"\nproxy_pass = \"http://127.0.0.1:2\"\n",
    );
    let g = loc(&c, "/");
    let t = &g.timeouts;
    let minute = Duration::from_secs(60);
    assert_eq!(
        (t.proxy_connect, t.proxy_send, t.proxy_read),
        (minute, minute, minute)
    );
    assert_eq!(g.next_upstream.conditions, Conditions::DEFAULT);
    assert!(g.headers.proxy.replaces(b"host") && g.headers.proxy.replaces(b"x-forwarded-for"));
    let hidden = &g.headers.hidden;
    for n in [
        "date",
        "server",
        "x-accel-expires",
        "x-accel-redirect",
        "x-accel-charset",
    ] {
        assert!(hidden.hides(n.as_bytes()), "{n}");
    }
    assert!(!hidden.hides(b"x-pad"), "nginx's grpc module passes X-Pad");
    assert!(
        loc(&c, "/p").headers.hidden.hides(b"x-pad"),
        "its proxy module not"
    );
    // With a list of its own, still without X-Pad.
    let c = compile(
        "grpc_hide_header = \"X-Other\"\n[[servers]]\nlisten = \"127.0.0.1:1\"\n\
         grpc_pass = \"grpc://127.0.0.1:50051\"\n",
    );
    let hidden = &loc(&c, "/").headers.hidden;
    assert!(hidden.hides(b"x-other") && hidden.hides(b"x-accel-buffering"));
    assert!(!hidden.hides(b"x-pad"));
    assert!(loc(&c, "/").upstream_tls.is_none(), "grpc:// speaks no TLS");
}

/// nginx's grpc module streams request bodies (calls stream both ways):
/// proxy_request_buffering, the proxy module's, does not apply.
#[test]
fn grpc_pass_never_buffers_the_request_body() {
    let c = compile(
        "proxy_request_buffering = true\n[[servers]]\nlisten = \"127.0.0.1:1\"\n\
         [[servers.locations]]\npath = \"/g\"\ngrpc_pass = \"grpc://127.0.0.1:50051\"\n\
         proxy_request_buffering = true\n\
         [[servers.locations]]\npath = \"/p\"\nproxy_pass = \"http://127.0.0.1:2\"\n",
    );
    assert!(loc(&c, "/g").request_buffering.is_none());
    assert!(loc(&c, "/p").request_buffering.is_some());
}

/// `grpcs://` is verified by default like `https://`, from the grpc_ssl_*
/// set (the proxy_ssl_* one ignored), and offers ALPN h2; `https://` none.
#[test]
fn grpcs_is_verified_from_grpc_ssl_keys_with_alpn_h2() {
    let pki = Pki::new();
    let text = format!(
        r#"grpc_ssl_trusted_certificate = {ca}
proxy_ssl_verify = false
proxy_ssl_trusted_certificate = "/nonexistent/ca.pem"
[[servers]]
listen = "127.0.0.1:1"
grpc_ssl_name = "backend.internal"
grpc_ssl_certificate = {cert}
grpc_ssl_certificate_key = {key}
[[servers.locations]]
path = "/a"
grpc_pass = "grpcs://10.0.0.1:8443"
[[servers.locations]]
path = "/b"
grpc_pass = "grpcs://up.example"
grpc_ssl_verify = false
grpc_ssl_server_name = false
grpc_ssl_protocols = "TLSv1.3"
[[servers.locations]]
path = "/h"
proxy_pass = "https://up.example"
proxy_ssl_trusted_certificate = {ca}
"#,
        ca = pki.toml("ca.crt"),
        cert = pki.toml("me.crt"),
        key = pki.toml("me.key"),
    );
    // Parsed without the file step: the compiler reads what it needs, and
    // never the proxy_ssl_* file no location uses.
    let c = compile(&text);
    let a = loc(&c, "/a").upstream_tls.as_ref().unwrap();
    assert!(a.verify && a.sends_sni() && a.h2());
    assert_eq!(a.name().to_str(), "backend.internal");
    assert_eq!(a.config().alpn_protocols, [b"h2".to_vec()]);
    let b = loc(&c, "/b").upstream_tls.as_ref().unwrap();
    assert!(!b.verify && !b.sends_sni() && b.h2());
    let h = loc(&c, "/h").upstream_tls.as_ref().unwrap();
    assert!(!h.h2() && h.config().alpn_protocols.is_empty());
    assert!(
        !h.verify,
        "proxy_ssl_verify = false at the top is for proxy_pass"
    );
    assert!(!Arc::ptr_eq(a.config(), h.config()));
}

/// The same settings for `https://` and `grpcs://` make two client
/// configurations (one offers h2); two grpcs locations share one.
#[test]
fn h2_is_part_of_a_client_configurations_identity() {
    let pki = Pki::new();
    let c = compile(&format!(
        "proxy_ssl_trusted_certificate = {ca}\ngrpc_ssl_trusted_certificate = {ca}\n\
         [[servers]]\nlisten = \"127.0.0.1:1\"\n\
         [[servers.locations]]\npath = \"/1\"\ngrpc_pass = \"grpcs://a.example\"\n\
         [[servers.locations]]\npath = \"/2\"\ngrpc_pass = \"grpcs://b.example:443\"\n\
         [[servers.locations]]\npath = \"/3\"\nproxy_pass = \"https://a.example\"\n",
        ca = pki.toml("ca.crt")
    ));
    let config = |p| loc(&c, p).upstream_tls.as_ref().unwrap().config().clone();
    assert!(Arc::ptr_eq(&config("/1"), &config("/2")));
    assert!(!Arc::ptr_eq(&config("/1"), &config("/3")));
}

#[test]
fn mistakes_are_located_all_at_once_with_grpc_names() {
    let text = r#"grpc_ssl_protocols = "TLSv1.1"
grpc_read_timeout = "soon"
[upstreams.g]
servers = [{ address = "127.0.0.1:1" }]
[[servers]]
listen = "127.0.0.1:1"
grpc_ssl_name = "not a name"
grpc_next_upstream = "sometimes"
grpc_next_upstream_tries = -1
grpc_set_header = { "Content-Length" = "1" }
[[servers.locations]]
path = "/a"
grpc_pass = "grpc://g:50051"
grpc_hide_header = 3
[[servers.locations]]
path = "/b"
grpc_pass = "http://127.0.0.1:1"
[[servers.locations]]
path = "/c"
"#;
    let e = errors(text);
    let want = [
        "t.toml:1:22: \"grpc_ssl_protocols\": \"TLSv1.1\" is not supported",
        "t.toml:2:21: ",
        "t.toml:7:17: invalid grpc_ssl_name \"not a name\"",
        "t.toml:8:22: \"grpc_next_upstream\": ",
        "t.toml:9:28: \"grpc_next_upstream_tries\": value must be between 0 and 1000000",
        "t.toml:10:21: \"Content-Length\" cannot be set",
        "t.toml:13:13: upstream \"g\" may not have port 50051 (grpc_pass names [upstreams.g]",
        "t.toml:14:20: ",
        // A bad grpc_pass leaves the location without one (as proxy_pass).
        "t.toml:16:8: location \"/b\" has neither",
        "t.toml:17:13: invalid URL prefix in \"http://127.0.0.1:1\" (expected \"grpc://HOST:PORT\"",
        "t.toml:19:8: location \"/c\" has neither \"proxy_pass\" (or \"grpc_pass\") nor \"return\"",
    ];
    assert_eq!(e.len(), want.len(), "{e:#?}");
    for (got, want) in e.iter().zip(want) {
        assert!(
            got.starts_with(want),
            "{got}\n  does not start with\n{want}"
        );
    }
}

/// The file step reads the grpc_ssl_* files and names their keys; a
/// client certificate needs its key within the same set.
#[test]
fn grpc_ssl_files_are_checked_under_their_own_names() {
    let pki = Pki::new();
    let text = format!(
        r#"grpc_ssl_trusted_certificate = "/nonexistent/ca.pem"
proxy_ssl_certificate_key = {key}
[[servers]]
listen = "127.0.0.1:1"
grpc_pass = "grpcs://up.example"
grpc_ssl_certificate = {cert}
"#,
        cert = pki.toml("me.crt"),
        key = pki.toml("me.key"),
    );
    let e = match load_text("t.toml", &text) {
        Ok(_) => vec![],
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    };
    let cert = pki.path("me.crt").display().to_string();
    let key = pki.path("me.key").display().to_string();
    let want = [
        "t.toml:1:32: \"grpc_ssl_trusted_certificate\": cannot load certificate \"/nonexistent/ca.pem\"".to_string(),
        format!("t.toml:2:29: no \"proxy_ssl_certificate\" is defined for key \"{key}\""),
        format!("t.toml:6:24: no \"grpc_ssl_certificate_key\" is defined for certificate \"{cert}\""),
    ];
    assert_eq!(e.len(), want.len(), "{e:#?}");
    for (got, want) in e.iter().zip(&want) {
        assert!(
            got.starts_with(want.as_str()),
            "{got}\n  does not start with\n{want}"
        );
    }
}
