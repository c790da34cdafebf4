//! What sluice counts of HTTP/3: `limit_conn` per request stream (nginx counts each HTTP/2 or
//! HTTP/3 stream as a connection for `limit_conn`), released the moment a stream ends or its
//! client cancels it; and the requests, connections and QUIC handshakes `/metrics` and the
//! status API report by protocol, moved by real aioquic requests.

use super::{h3, server, start, status};
use crate::support::{KeyKind, TestCa, Upstream, client};
use std::time::Duration;

/// A `limit_conn` zone by client address and a server over TCP and QUIC that allows one
/// request at a time per client, in front of `upstream`.
fn limit_conn_1(leaf: &crate::support::Leaf, upstream: &Upstream) -> String {
    let zone = "[conn_zones.addr]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\n";
    let body = format!(
        "access_log = \"access.log\"\n\
         limit_conn = {{ zone = \"addr\", conn = 1 }}\n\
         [[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://{}\"\n",
        upstream.addr
    );
    format!("{zone}{}", server("h3.test", leaf, "", &body))
}

fn ms(v: &serde_json::Value) -> f64 {
    v["ms"].as_f64().unwrap_or(-1.0)
}

/// Streams of one QUIC connection against `conn = 1`, an upstream holding each answer 1 s:
/// the first passes; a second while it runs gets 503 at once; one sent the moment the first
/// ended passes (the count went with the answer); and a request cancelled as RFC 9114 has a
/// client cancel one (STOP_SENDING, after its GET was all sent) frees its count at once: a
/// request 150 ms later passes while the upstream still holds the cancelled one; so does a
/// POST whose client resets it while its body is still on the way to the upstream.
#[tokio::test]
async fn limit_conn_counts_each_stream_and_frees_it_at_once() {
    let ca = TestCa::new();
    let leaf = ca.leaf("h3", &["h3.test"], KeyKind::EcdsaP256);
    let up = Upstream::start_slow(Duration::from_millis(1000));
    let s = start(&limit_conn_1(&leaf, &up));
    let spec = serde_json::json!([
        {"path": "/first"},
        {"path": "/second", "at": 0.2},
        {"path": "/third", "after": 0},
        {"path": "/cancelled", "after": 2, "cancel_at": 0.3},
        {"path": "/fifth", "after": 3, "at": 0.15},
        {"path": "/posted", "method": "POST", "after": 4, "body": "hello",
         "headers": [["content-length", "10"]], "later": {"at": 5, "data": "world"},
         "reset_at": 0.3},
        {"path": "/last", "after": 5, "at": 0.15},
    ]);
    let got = h3(s.addr(), "h3.test", &ca, client(31), spec).await;
    assert_eq!(status(&got[0]), Some(200), "{got:?}");
    assert_eq!(status(&got[1]), Some(503), "the second at once: {got:?}");
    assert!(ms(&got[1]) < 500.0, "refused without waiting: {got:?}");
    assert_eq!(
        status(&got[2]),
        Some(200),
        "sent as the first ended: {got:?}"
    );
    assert_eq!(got[3]["reset"], "sent", "{got:?}");
    assert_eq!(
        status(&got[4]),
        Some(200),
        "the cancelled request's count is free at once: {got:?}"
    );
    assert_eq!(got[5]["reset"], "sent", "{got:?}");
    assert_eq!(
        status(&got[6]),
        Some(200),
        "the reset POST's count is free at once: {got:?}"
    );
    let log = s.wait_lines("access.log", 7).await;
    assert!(log.contains("\"GET /cancelled HTTP/3.0\" 499"), "{log}");
}
