//! What sluice counts of HTTP/3: `limit_conn` per request stream (nginx counts each HTTP/2 or
//! HTTP/3 stream as a connection for `limit_conn`), released the moment a stream ends or its
//! client cancels it; and the requests, connections and QUIC handshakes `/metrics` and the
//! status API report by protocol, moved by real aioquic requests.

use super::{ADDR, h3, h3_with, leaf_for, server, start, status};
use crate::support::{Sluice, TestCa, Upstream, client, eventually, get};
use serde_json::Value;
use std::net::SocketAddr;
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
    let leaf = leaf_for(&ca);
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

/// `curl` over TLS with `version` (`--http1.1`, `--http2`): the status.
async fn curl_as(addr: SocketAddr, ca: &TestCa, version: &str, path: &str) -> u16 {
    let out = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "--max-time",
            "5",
            "-w",
            "%{http_code}",
        ])
        .args([version, "--cacert"])
        .arg(ca.cert())
        .arg("--resolve")
        .arg(format!("h3.test:{}:127.0.0.1", addr.port()))
        .arg(format!("https://h3.test:{}{path}", addr.port()))
        .output()
        .await
        .expect("curl");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// `/api/sluice/protocols` of the admin listener at `admin`.
async fn protocols(admin: SocketAddr) -> Value {
    let r = get(admin, "/api/sluice/protocols").await;
    assert_eq!(r.status, 200, "{}", r.body_text());
    serde_json::from_str(&r.body_text()).expect("JSON")
}

/// One aioquic connection's three requests (one of them a head nginx refuses, still a
/// request), curl's one over HTTP/1.1 and one over HTTP/2, and an aioquic client that gives
/// up on the certificate: `/metrics` and `/api/sluice/protocols` count each by its protocol —
/// requests, connections accepted, connections open while the QUIC one is (and none after),
/// QUIC handshakes by result.
#[tokio::test]
async fn metrics_and_the_status_api_count_http3_beside_http1_and_http2() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let up = Upstream::start_slow(Duration::from_millis(1500));
    let toml = format!(
        r#"[admin]
[[servers]]
listen = ["{ADDR} ssl http2", "{ADDR} quic"]
server_name = "h3.test"
ssl_certificate = "{cert}"
ssl_certificate_key = "{key}"
[[servers.locations]]
path = "/"
return = {{ status = 200 }}
[[servers.locations]]
path = "/slow"
proxy_pass = "http://{up}"
"#,
        cert = leaf.chain.display(),
        key = leaf.key.display(),
        up = up.addr,
    );
    let s = Sluice::builder(&toml).relocate(ADDR).start();
    let (addr, admin) = (s.addr(), s.admin_addr());
    let spec = serde_json::json!([{"path": "/slow"}, {"path": "/ok"}, {"path": "/../x"}]);
    let quic = h3(addr, "h3.test", &ca, client(32), spec);
    let open_meanwhile = async {
        eventually(
            "an open HTTP/3 connection",
            Duration::from_secs(3),
            async || {
                let p = protocols(admin).await;
                (p["h3"]["connections"]["active"] == 1).then_some(p)
            },
        )
        .await
    };
    let (got, meanwhile) = tokio::join!(quic, open_meanwhile);
    let statuses: Vec<_> = got[..3].iter().map(status).collect();
    assert_eq!(statuses, [Some(200), Some(200), Some(400)], "{got:?}");
    assert_eq!(meanwhile["h3"]["connections"]["accepted"], 1, "{meanwhile}");
    assert_eq!(curl_as(addr, &ca, "--http1.1", "/one").await, 200);
    assert_eq!(curl_as(addr, &ca, "--http2", "/two").await, 200);
    let other = TestCa::new();
    let refused = h3(addr, "h3.test", &other, client(33), serde_json::json!([])).await;
    assert_eq!(refused[0]["connection"], "failed", "{refused:?}");
    let want = serde_json::json!({
        "http/1.1": {"requests": 1, "connections": {"accepted": 1, "active": 0}},
        "h2": {"requests": 1, "connections": {"accepted": 1, "active": 0}},
        "h3": {"requests": 3, "connections": {"accepted": 1, "active": 0},
               "handshakes": {"ok": 1, "failed": 1, "timeout": 0, "retry": 0}},
    });
    let mut last = Value::Null;
    let settled = crate::support::within(Duration::from_secs(5), async || {
        last = protocols(admin).await;
        (last == want).then_some(())
    })
    .await;
    assert!(settled.is_some(), "want {want}, got {last}");
    let metrics = get(admin, "/metrics").await.body_text();
    for line in [
        "sluice_http_requests_total{protocol=\"h3\"} 3",
        "sluice_http_requests_total{protocol=\"h2\"} 1",
        "sluice_http_requests_total{protocol=\"http/1.1\"} 1",
        "sluice_http_connections_total{protocol=\"h3\"} 1",
        "sluice_http_connections_active{protocol=\"h3\"} 0",
        "sluice_quic_handshakes_total{result=\"ok\"} 1",
        "sluice_quic_handshakes_total{result=\"failed\"} 1",
        "sluice_connections_active 0",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
}

/// A connection whose request streams end cancelled 1000 times (quinn keeps a little for each
/// until the connection ends), between as many answered ones, is asked to go: the next stream is still answered, GOAWAY names it
/// the last, and once it is answered the connection closes with H3_NO_ERROR (a stream sent after
/// the GOAWAY gets no answer).
#[tokio::test]
async fn a_connection_whose_streams_end_cancelled_1000_times_gets_goaway() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let zone = "[zones.slow]\nsize = \"1m\"\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n";
    let body = "[[servers.locations]]\npath = \"/slow\"\n\
                limit_req = { zone = \"slow\", burst = 5000 }\nreturn = { status = 200 }\n\
                [[servers.locations]]\npath = \"/ok\"\nreturn = { status = 200 }\n";
    let s = start(&format!("{zone}{}", server("h3.test", &leaf, "", body)));
    // 1005 delayed requests, each cancelled 50 ms after it was sent, 100 at a time, each hundred
    // after a hundred answered ones (so that the rapid-reset bound, which lets a connection
    // cancel as many streams as it had answered, never cuts it first).
    let mut spec: Vec<Value> = Vec::new();
    for i in 0..1005 {
        let at = f64::from(i / 100) * 0.3;
        if i % 100 == 0 {
            spec.extend((0..100).map(|_| serde_json::json!({"path": "/ok", "at": at})));
        }
        spec.push(serde_json::json!({"path": "/slow", "at": at + 0.1, "cancel_at": 0.05}));
    }
    let last = spec.len();
    spec.push(serde_json::json!({"path": "/ok", "at": 3.8}));
    spec.push(serde_json::json!({"path": "/ok", "after": last, "at": 0.1}));
    let linger = [std::ffi::OsStr::new("--linger"), std::ffi::OsStr::new("3")];
    let got = h3_with(
        s.addr(),
        ("h3.test", &ca),
        client(34),
        Value::Array(spec),
        &linger,
    )
    .await;
    let cancelled = got[..last].iter().filter(|g| g["reset"] == "sent").count();
    assert!(cancelled >= 1000, "{cancelled} cancelled");
    assert_eq!(status(&got[last]), Some(200), "{:?}", &got[last..]);
    assert_eq!(got[last + 1]["status"], Value::Null, "{:?}", &got[last..]);
    let connection = &got[last + 2];
    assert_eq!(
        (&connection["connection"], &connection["error"]),
        (&Value::from("closed"), &Value::from(0x100)),
        "closed with H3_NO_ERROR once its last stream was answered: {:?}",
        &got[last..]
    );
}
