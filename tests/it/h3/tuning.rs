//! nginx 1.25's QUIC tuning over a real QUIC client (aioquic): `http3_max_concurrent_streams`
//! is the number of requests a client has in flight at once (and a reload changes it for the
//! next connection), `http3_stream_buffer_size` a window that still carries bodies of any size,
//! `quic_gso` a transport that serves the same responses.

use super::{ADDR, h3, header, leaf_for, server, status};
use crate::support::{Answer, Sluice, TestCa, Upstream, client};
use serde_json::Value;
use std::time::Duration;

/// How long the slow upstream holds each answer.
const HOLD: Duration = Duration::from_millis(500);

/// sluice on [`ADDR`] with `keys`, proxying `/` to `upstream`.
fn sluice_with(ca: &TestCa, upstream: std::net::SocketAddr, keys: &str) -> Sluice {
    let leaf = leaf_for(ca);
    let body = format!("[[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://{upstream}\"\n");
    Sluice::builder(&server("h3.test", &leaf, keys, &body))
        .relocate(ADDR)
        .start()
}

/// Four requests at once on one connection to the slow upstream: when each was answered, in
/// milliseconds, sorted.
async fn four_at_once(s: &Sluice, ca: &TestCa, source: u8) -> Vec<f64> {
    let spec: Vec<Value> = (0..4)
        .map(|i| serde_json::json!({"path": format!("/{i}")}))
        .collect();
    let got = h3(s.addr(), "h3.test", ca, client(source), Value::Array(spec)).await;
    assert!(got[..4].iter().all(|g| status(g) == Some(200)), "{got:?}");
    let mut ms: Vec<f64> = got[..4]
        .iter()
        .map(|g| g["ms"].as_f64().unwrap_or(f64::MAX))
        .collect();
    ms.sort_by(f64::total_cmp);
    ms
}

/// With 2, the third and fourth requests wait for QUIC credit until two are answered: two
/// rounds of the upstream's hold. With nginx's 128 (and after a reload back to it, on a new
/// connection) all four are in flight at once: one round.
#[tokio::test]
async fn http3_max_concurrent_streams_is_what_a_client_has_in_flight() {
    let ca = TestCa::new();
    let up = Upstream::start_slow(HOLD);
    let s = sluice_with(&ca, up.addr, "http3_max_concurrent_streams = 2");
    let hold = HOLD.as_millis() as f64;
    let two = four_at_once(&s, &ca, 12).await;
    assert!(two[1] < 1.6 * hold, "the first two in one round: {two:?}");
    assert!(
        two[2] >= 2.0 * hold - 20.0,
        "the last two in a second round: {two:?}"
    );
    let toml = s
        .config_text()
        .replace("http3_max_concurrent_streams = 2", "");
    s.reload(&toml).await;
    let all = four_at_once(&s, &ca, 13).await;
    assert!(
        all[3] < 1.6 * hold,
        "nginx's 128: all four in one round: {all:?}"
    );
}

/// A 4 KB window each way: a 1 MB upload and its 1 MB echo still arrive whole (QUIC's flow
/// control lets each through 4 KB at a time); so does the same exchange with `quic_gso`.
#[tokio::test]
async fn small_windows_and_gso_carry_whole_bodies() {
    for keys in [
        "http3_stream_buffer_size = \"4k\"\nclient_max_body_size = \"2m\"",
        "quic_gso = true\nclient_max_body_size = \"2m\"",
    ] {
        let ca = TestCa::new();
        let up = Upstream::answering(Answer::Body, 200);
        let s = sluice_with(&ca, up.addr, keys);
        let body = "q".repeat(1 << 20);
        let spec = serde_json::json!([{"path": "/up", "method": "POST", "body": body}]);
        let got = h3(s.addr(), "h3.test", &ca, client(14), spec).await;
        assert_eq!(status(&got[0]), Some(200), "{keys}: {}", got[1]);
        assert_eq!(
            header(&got[0], "x-length"),
            Some("1048576"),
            "{keys}: upstream"
        );
        assert_eq!(
            got[0]["body"].as_str().map(str::len),
            Some(1 << 20),
            "{keys}: the echo back"
        );
    }
}
