//! Behind a load balancer (issue #43): `listen … proxy_protocol`,
//! `real_ip_header proxy_protocol` and the `$proxy_protocol_*` variables.

use super::Kind;
use super::tests::{http, run};

#[test]
fn listen_proxy_protocol_is_a_flag_of_listen_on_every_server_of_the_address() {
    let o = run(&http(
        "server { listen 443 ssl http2 proxy_protocol default_server; server_name a.test;
                  ssl_certificate c.pem; ssl_certificate_key c.key; location / { return 200; } }
         server { listen 443 ssl; server_name b.test;
                  ssl_certificate c.pem; ssl_certificate_key c.key; location / { return 200; } }
         server { listen 127.0.0.1:8080 proxy_protocol; location / { return 200; } }
         server { listen 127.0.0.1:8081; location / { return 200; } }",
    ));
    let listen = |i: usize| o.server(i)["listen"].as_str().unwrap().to_string();
    assert_eq!(
        listen(0),
        "0.0.0.0:443 ssl http2 proxy_protocol default_server"
    );
    // nginx's socket reads the header for every server on it.
    assert_eq!(listen(1), "0.0.0.0:443 ssl proxy_protocol");
    assert!(
        o.text
            .contains("(proxy_protocol: another server's listen on the address says it)")
    );
    assert_eq!(listen(2), "127.0.0.1:8080 proxy_protocol");
    assert_eq!(listen(3), "127.0.0.1:8081");
    assert!(!o.reports.iter().any(|r| r.directive.starts_with("listen")));
}

#[test]
fn real_ip_header_proxy_protocol_is_real_ips_header() {
    let o = run(&http(
        "set_real_ip_from 10.0.0.0/8;
         server { listen 127.0.0.1:8080; set_real_ip_from 192.168.0.0/16;
                  real_ip_header proxy_protocol; real_ip_recursive on;
                  location / { return 200; } }
         server { listen 127.0.0.1:8081; real_ip_header PROXY_PROTOCOL;
                  location / { return 200; } }",
    ));
    assert_eq!(
        o.server(0)["real_ip"].to_string(),
        "{ from = [\"192.168.0.0/16\"], header = \"proxy_protocol\", recursive = true }"
    );
    // Another case is a header's name for nginx: left out, and said.
    let r = o.report("real_ip_header PROXY_PROTOCOL");
    assert_eq!(r.kind, Kind::NotTranslated);
    assert!(r.why.contains("as a header's name"), "{}", r.why);
    assert!(o.server(1).get("real_ip").is_none());
}

#[test]
fn the_proxy_protocol_variables_are_translated_where_variables_are() {
    let o = run(&http(
        "map $proxy_protocol_addr $lb { default $proxy_protocol_server_addr; }
         limit_req_zone $proxy_protocol_addr zone=z:1m rate=1r/s;
         log_format lb '$proxy_protocol_addr:$proxy_protocol_port $proxy_protocol_server_port';
         access_log /tmp/a.log lb;
         server { listen 127.0.0.1:8080 proxy_protocol;
                  location / { limit_req zone=z; proxy_pass http://127.0.0.1:9000;
                               proxy_set_header X-LB $lb;
                               proxy_set_header X-Client $proxy_protocol_addr; } }",
    ));
    assert!(
        !o.reports.iter().any(|r| r.why.contains("proxy_protocol")),
        "{:#?}",
        o.reports
    );
    assert_eq!(
        o.toml["zones"]["z"]["key"].as_str(),
        Some("$proxy_protocol_addr")
    );
    assert_eq!(
        o.toml["maps"]["lb"]["source"].as_str(),
        Some("$proxy_protocol_addr")
    );
    assert_eq!(
        o.toml["log_format"].as_str(),
        Some("$proxy_protocol_addr:$proxy_protocol_port $proxy_protocol_server_port")
    );
    let headers = o.location(0, 0)["proxy_set_header"].to_string();
    assert!(
        headers.contains("X-Client = \"$proxy_protocol_addr\""),
        "{headers}"
    );
}

#[test]
fn real_ip_header_forwarded_is_translated_and_its_new_meaning_said() {
    let o = run(&http(
        "server { listen 127.0.0.1:8080; set_real_ip_from 10.0.0.0/8; real_ip_header Forwarded;
                  location / { return 200; } }",
    ));
    assert_eq!(
        o.server(0)["real_ip"].to_string(),
        "{ from = [\"10.0.0.0/8\"], header = \"Forwarded\" }"
    );
    let r = o.report("real_ip_header Forwarded");
    assert_eq!(r.kind, Kind::Partial);
    assert!(r.why.contains("RFC 7239"), "{}", r.why);
}
