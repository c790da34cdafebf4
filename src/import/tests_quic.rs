//! nginx 1.25's HTTP/3: `listen … quic` beside the TCP listen, `http3`,
//! `quic_retry`, and the `http3_*`/`quic_*` settings sluice keeps fixed.

use super::Kind;
use super::tests::{http, run};

#[test]
fn a_quic_listen_joins_its_tcp_listen_and_http3_keys_follow() {
    let o = run(&http(
        "server { listen 443 ssl; listen 443 quic reuseport; http3 on; quic_retry on;
                  http3_max_concurrent_streams 64; quic_gso on;
                  ssl_certificate /etc/ssl/site.pem; ssl_certificate_key /etc/ssl/site.key;
                  add_header Alt-Svc 'h3=\":443\"; ma=86400';
                  location / { return 200 ok; } }
         server { listen 8443 quic; ssl_certificate /etc/ssl/site.pem;
                  ssl_certificate_key /etc/ssl/site.key; location / { return 204; } }",
    ));
    let listen = o.server(0)["listen"].as_array().expect("a listen list");
    let listen: Vec<&str> = listen.iter().filter_map(|v| v.as_str()).collect();
    assert_eq!(listen, ["0.0.0.0:443 ssl", "0.0.0.0:443 quic"]);
    assert_eq!(o.server(0)["http3"].as_bool(), Some(true));
    assert_eq!(o.server(0)["quic_retry"].as_bool(), Some(true));
    assert_eq!(o.report("listen 443 quic").kind, Kind::Partial);
    assert!(o.report("listen 443 quic").why.contains("reuseport"));
    for fixed in ["http3_max_concurrent_streams", "quic_gso"] {
        let r = o.report(fixed);
        assert_eq!(r.kind, Kind::NotTranslated, "{fixed}");
        assert!(
            r.why.contains("HTTP/3 settings are fixed"),
            "{fixed}: {}",
            r.why
        );
    }
    // A quic listen alone has no TCP listen to go beside.
    let alone = o
        .reports
        .iter()
        .find(|r| r.why.contains("listen 0.0.0.0:8443 quic alone"))
        .unwrap_or_else(|| panic!("{:#?}", o.reports));
    assert_eq!(alone.kind, Kind::NotTranslated);
    // What import-nginx writes, sluice reads.
    crate::config::parse_str("t.toml", &o.text).unwrap_or_else(|e| panic!("{e}\n{}", o.text));
}

#[test]
fn ssl_early_data_becomes_the_server_key_said_to_apply_to_quic_only() {
    let o = run(&http(
        "ssl_early_data on;
         server { listen 443 ssl; listen 443 quic;
                  ssl_certificate /etc/ssl/site.pem; ssl_certificate_key /etc/ssl/site.key;
                  location / { proxy_set_header Early-Data $ssl_early_data;
                               proxy_pass http://127.0.0.1:8080; } }
         server { listen 8443 ssl; ssl_early_data off;
                  ssl_certificate /etc/ssl/site.pem; ssl_certificate_key /etc/ssl/site.key;
                  location / { return 204; } }",
    ));
    assert_eq!(o.server(0)["ssl_early_data"].as_bool(), Some(true));
    assert_eq!(o.server(1)["ssl_early_data"].as_bool(), Some(false));
    let r = o.report("ssl_early_data on");
    assert_eq!(r.kind, Kind::Partial);
    assert!(r.why.contains("quic listen only"), "{}", r.why);
    assert!(
        !o.reports
            .iter()
            .any(|r| r.directive.contains("ssl_early_data off")),
        "{:#?}",
        o.reports
    );
    // The variable is sluice's too.
    assert!(
        o.text.contains("Early-Data = \"$ssl_early_data\""),
        "{}",
        o.text
    );
    crate::config::parse_str("t.toml", &o.text).unwrap_or_else(|e| panic!("{e}\n{}", o.text));
}
