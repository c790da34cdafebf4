//! `sluice check`'s summary: what it says of a configuration, and its warnings.

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
        out.matches(
            "warning: real_ip reads proxy_protocol, but this server's listen has no proxy_protocol"
        )
        .count(),
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

#[test]
fn a_quic_listen_is_shown_and_warned_about_without_alt_svc() {
    let text = |extra: &str| {
        format!(
            "[[servers]]\nlisten = [\"127.0.0.1:8443 ssl\", \"127.0.0.1:8443 quic\"]\nssl_certificate = \"a.crt\"\nssl_certificate_key = \"a.key\"\nquic_retry = true\n{extra}[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200 }}\n"
        )
    };
    let out = |extra: &str| {
        let spec = crate::config::parse_str("t.toml", &text(extra)).unwrap();
        summary("t.toml", &spec)
    };
    let bare = out("");
    assert!(
        bare.contains("  quic 127.0.0.1:8443 (udp) http3 on quic_retry on"),
        "{bare}"
    );
    assert!(
        bare.contains(
            "warning: 127.0.0.1:8443 listens with quic but its responses carry no Alt-Svc"
        ),
        "{bare}"
    );
    let told = out(
        "add_header = [{ name = \"Alt-Svc\", value = 'h3=\":8443\"; ma=86400', always = true }]\n",
    );
    assert!(!told.contains("Alt-Svc:"), "{told}");
    assert!(!told.contains("warning"), "{told}");
}

#[test]
fn ssl_early_data_is_shown_and_warned_about_where_it_does_not_apply() {
    let text = |listen: &str| {
        format!(
            "[[servers]]\nlisten = {listen}\nssl_certificate = \"a.crt\"\nssl_certificate_key = \"a.key\"\nssl_early_data = true\nadd_header = [{{ name = \"Alt-Svc\", value = 'h3=\":8443\"', always = true }}]\n[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200 }}\n"
        )
    };
    let out = |listen: &str| {
        let spec = crate::config::parse_str("t.toml", &text(listen)).unwrap();
        summary("t.toml", &spec)
    };
    let quic = out("[\"127.0.0.1:8443 ssl\", \"127.0.0.1:8443 quic\"]");
    assert!(
        quic.contains("  quic 127.0.0.1:8443 (udp) http3 on quic_retry off ssl_early_data on"),
        "{quic}"
    );
    assert!(
        quic.contains("warning: ssl_early_data on 127.0.0.1:8443 applies to its quic listen only: TLS over TCP takes no early data"),
        "{quic}"
    );
    let tcp = out("\"127.0.0.1:8443 ssl\"");
    assert!(
        tcp.contains("warning: ssl_early_data on 127.0.0.1:8443 does nothing"),
        "{tcp}"
    );
}

#[test]
fn compression_is_shown_where_it_is_on() {
    let text = "gzip = true\ngzip_types = [\"application/json\"]\ngzip_vary = true\n\
                [[servers]]\nlisten = \"127.0.0.1:8080\"\n\
                [[servers.locations]]\npath = \"/api/\"\ncompress = [\"zstd\", \"gzip\"]\ngzip_comp_level = 5\nreturn = { status = 200 }\n\
                [[servers.locations]]\npath = \"/raw/\"\ngzip = false\nreturn = { status = 200 }\n";
    let out = summary("t.toml", &crate::config::parse_str("t.toml", text).unwrap());
    assert!(
        out.contains(
            "    compress zstd 1, gzip 5 (types text/html application/json; min_length 20; vary)"
        ),
        "{out}"
    );
    assert_eq!(
        out.matches("    compress ").count(),
        1,
        "not where gzip = false:\n{out}"
    );
}
