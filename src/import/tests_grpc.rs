//! gRPC (issue #45): `grpc_pass` in its three URL forms and nginx's bare
//! address, the `grpc_*` directives to their own keys (apart from the
//! `proxy_*` ones), and those sluice lacks reported as not translated.

use super::Kind;
use super::tests::{http, run};

#[test]
fn grpc_pass_takes_nginxs_forms_and_a_bare_address_is_grpc() {
    let o = run(&http(
        "upstream backends { server 127.0.0.1:50051; server 127.0.0.1:50052; }
         server { listen 127.0.0.1:8080 http2;
                  location /a { grpc_pass grpc://127.0.0.1:50051; }
                  location /b { grpc_pass grpcs://api.example:443; }
                  location /c { grpc_pass grpc://backends; }
                  location /d { grpc_pass 127.0.0.1:50053; }
                  location /e { grpc_pass GRPC://127.0.0.1:50054; } }",
    ));
    let pass = |i: usize| o.location(0, i)["grpc_pass"].as_str().unwrap().to_string();
    assert_eq!(pass(0), "grpc://127.0.0.1:50051");
    assert_eq!(pass(1), "grpcs://api.example:443");
    assert_eq!(pass(2), "grpc://backends");
    assert_eq!(
        pass(3),
        "grpc://127.0.0.1:50053",
        "nginx: no scheme is grpc://"
    );
    assert_eq!(pass(4), "grpc://127.0.0.1:50054");
    assert!(o.location(0, 0).get("proxy_pass").is_none());
    assert!(
        !o.reports
            .iter()
            .any(|r| r.directive.starts_with("grpc_pass")),
        "{:#?}",
        o.reports
    );
    assert!(
        o.text
            .contains("to gRPC upstreams unless grpc_set_header sets it")
    );
    crate::config::parse_str("t.toml", &o.text).unwrap_or_else(|e| panic!("{e}\n{}", o.text));
}

#[test]
fn grpc_pass_sluice_cannot_take_is_said_and_answers_502() {
    let o = run(&http(
        "server { listen 127.0.0.1:8080 http2;
                  location /v { grpc_pass grpc://$host:50051; }
                  location /u { grpc_pass unix:/run/g.sock; }
                  location /p { grpc_pass grpc://127.0.0.1:50051/path; } }",
    ));
    for (i, d) in ["grpc_pass grpc://$host:50051", "grpc_pass unix:/run/g.sock"]
        .iter()
        .enumerate()
    {
        assert_eq!(o.report(d).kind, Kind::NotTranslated, "{d}");
        assert_eq!(o.location(0, i)["return"]["status"].as_integer(), Some(502));
    }
    let r = o.report("grpc_pass grpc://127.0.0.1:50051/path");
    assert!(r.why.contains("no URI part"), "{}", r.why);
}

#[test]
fn grpc_directives_become_their_own_keys_at_their_levels() {
    let o = run(&http(
        "grpc_read_timeout 120s;
         grpc_set_header X-Top top;
         proxy_set_header X-Proxy p;
         grpc_ssl_verify on;
         grpc_ssl_trusted_certificate /etc/ssl/ca.pem;
         server { listen 127.0.0.1:8080 http2;
                  grpc_connect_timeout 2s; grpc_send_timeout 3s;
                  grpc_next_upstream error timeout http_503;
                  grpc_next_upstream_tries 3; grpc_next_upstream_timeout 10s;
                  location / {
                      grpc_pass grpcs://api.example:443;
                      grpc_set_header Host $host; grpc_set_header X-A 1; grpc_set_header X-A 2;
                      grpc_hide_header X-Secret; grpc_pass_header Server;
                      grpc_ssl_name api.internal; grpc_ssl_server_name on;
                      grpc_ssl_certificate /etc/ssl/c.pem; grpc_ssl_certificate_key /etc/ssl/c.key;
                      grpc_ssl_protocols TLSv1.1 TLSv1.2 TLSv1.3;
                  } }",
    ));
    let top = &o.toml;
    assert_eq!(top["grpc_read_timeout"].as_str(), Some("120s"));
    assert_eq!(top["grpc_set_header"].to_string(), "{ X-Top = \"top\" }");
    assert_eq!(top["proxy_set_header"].to_string(), "{ X-Proxy = \"p\" }");
    assert_eq!(top["grpc_ssl_verify"].as_bool(), Some(true));
    assert!(top["grpc_ssl_trusted_certificate"].as_str().is_some());
    let s = o.server(0);
    assert_eq!(s["grpc_connect_timeout"].as_str(), Some("2s"));
    assert_eq!(s["grpc_send_timeout"].as_str(), Some("3s"));
    assert_eq!(
        s["grpc_next_upstream"].to_string(),
        "[\"error\", \"timeout\", \"http_503\"]"
    );
    assert_eq!(s["grpc_next_upstream_tries"].as_integer(), Some(3));
    assert_eq!(s["grpc_next_upstream_timeout"].as_str(), Some("10s"));
    let l = o.location(0, 0);
    assert_eq!(
        l["grpc_set_header"].to_string(),
        "{ Host = \"$host\", X-A = [\"1\", \"2\"] }"
    );
    assert_eq!(l["grpc_hide_header"].as_str(), Some("X-Secret"));
    assert_eq!(l["grpc_pass_header"].as_str(), Some("Server"));
    assert_eq!(l["grpc_ssl_name"].as_str(), Some("api.internal"));
    assert_eq!(l["grpc_ssl_server_name"].as_bool(), Some(true));
    assert!(l["grpc_ssl_certificate"].as_str().is_some());
    assert!(l["grpc_ssl_certificate_key"].as_str().is_some());
    assert_eq!(l["grpc_ssl_protocols"].as_str(), Some("TLSv1.2 TLSv1.3"));
    assert_eq!(
        o.report("grpc_ssl_protocols TLSv1.1 TLSv1.2 TLSv1.3").kind,
        Kind::Partial
    );
    for k in [
        "proxy_read_timeout",
        "proxy_ssl_verify",
        "proxy_next_upstream",
    ] {
        assert!(
            top.get(k).is_none() && s.get(k).is_none() && l.get(k).is_none(),
            "{k}"
        );
    }
    crate::config::parse_str("t.toml", &o.text).unwrap_or_else(|e| panic!("{e}\n{}", o.text));
}

#[test]
fn grpc_directives_sluice_lacks_are_not_translated() {
    let o = run(&http(
        "server { listen 127.0.0.1:8080 http2;
                  location / { grpc_pass grpc://127.0.0.1:50051;
                               grpc_buffer_size 16k; grpc_intercept_errors on;
                               grpc_ssl_ciphers HIGH; grpc_socket_keepalive on;
                               grpc_ssl_name $host; } }",
    ));
    for (d, why) in [
        ("grpc_buffer_size 16k", "grpc settings"),
        ("grpc_intercept_errors on", "own errors only"),
        ("grpc_ssl_ciphers HIGH", "TLS settings"),
        ("grpc_socket_keepalive on", "grpc settings"),
        ("grpc_ssl_name $host", "grpc_ssl_name takes no variables"),
    ] {
        let r = o.report(d);
        assert_eq!(r.kind, Kind::NotTranslated, "{d}");
        assert!(r.why.contains(why), "{d}: {}", r.why);
    }
    assert_eq!(
        o.location(0, 0)["grpc_pass"].as_str(),
        Some("grpc://127.0.0.1:50051")
    );
}
