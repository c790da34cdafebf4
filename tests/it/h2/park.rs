//! Parked connections: an HTTP/2 connection quiet for 250 ms lets hyper's connection (and its
//! buffers) go, and a fresh one takes over, in step with the client, when the client speaks
//! again. Real clients must not see the difference: python3-h2 (tests/it/h2/park.py, which
//! checks every frame against what it allowed: windows, frame sizes, its HPACK table), the `h2`
//! crate's client, curl over TLS; frames on streams of before the park get what h2 gives a
//! closed stream; a parked connection times out and stops as an awake one does.
//! `sluice_http2_parked` (the admin listener's /metrics) shows each park.

use std::path::PathBuf;
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use super::client::H2;
use super::raw::{self, Raw};
use super::run;
use crate::support::{Answer, KeyKind, Sluice, TestCa, Upstream, client, get};

const PYTHON: &str = "/usr/bin/python3";

/// `sluice_http2_parked` now.
async fn parked(s: &Sluice) -> i64 {
    let text = get(s.admin_addr(), "/metrics").await.body_text();
    text.lines()
        .find_map(|l| l.strip_prefix("sluice_http2_parked "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sluice_http2_parked in /metrics:\n{text}"))
}

/// Waits (5 s at most) until `sluice_http2_parked` is `want`.
async fn wait_parked(s: &Sluice, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = parked(s).await;
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "sluice_http2_parked stayed {now}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// h2c in front of two upstreams: `/echo` gives back the request's body, `/head` its head;
/// `/local` is answered by sluice. Bodies up to 10 MB.
fn config(echo: &Upstream, head: &Upstream, more: &str) -> String {
    format!(
        r#"client_max_body_size = "10m"
{more}
[admin]
[[servers]]
http2 = true
[[servers.locations]]
path = "/echo"
proxy_pass = "http://{}"
[[servers.locations]]
path = "/head"
proxy_pass = "http://{}"
[[servers.locations]]
path = "/local"
return = {{ status = 200, body = "ok\n" }}
"#,
        echo.addr, head.addr
    )
}

/// python3-h2 comes back to its parked connection again and again: with a window below a
/// fresh connection's and above it, bodies larger than either side's connection window both
/// ways, its own settings (small stream windows, no HPACK table for the server), and header
/// fields its encoder indexed before each park. The upstream read each request once.
#[tokio::test]
async fn python_h2_finds_its_parked_connection_as_it_left_it() {
    let (echo, head) = (
        Upstream::answering(Answer::Body, 200),
        Upstream::answering(Answer::Head, 200),
    );
    let s = Sluice::start(&config(&echo, &head, ""));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/h2/park.py");
    let (port, admin) = (
        s.addr().port().to_string(),
        s.admin_addr().port().to_string(),
    );
    for (scenario, parks) in [("small", 6), ("large", 6), ("settings", 3)] {
        let out = Command::new(PYTHON)
            .args([script.to_str().unwrap(), scenario, &port, &admin])
            .output()
            .await
            .expect("/usr/bin/python3 (scripts/test.sh installs python3-h2)");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.trim() == format!("ok {parks}"),
            "{scenario}: {said}{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            s.log()
        );
    }
    assert_eq!(echo.hits(), 2 * 4, "each POST and the first GET, once");
    assert_eq!(head.hits(), 4);
    wait_parked(&s, 0).await;
}

/// The `h2` crate's client (hyper's) over h2c: a request, the park, requests again.
#[tokio::test]
async fn the_h2_crate_client_wakes_its_parked_connection() {
    let (echo, head) = (Upstream::start(), Upstream::start());
    let s = Sluice::start(&config(&echo, &head, ""));
    let mut c = H2::connect(s.addr(), client(2)).await;
    for round in 0..3 {
        assert_eq!(c.fetch("/local").await.status, 200, "round {round}");
        wait_parked(&s, 1).await;
    }
    let reply = c.fetch("/head").await;
    assert_eq!(reply.status, 200);
    assert_eq!(parked(&s).await, 0, "awake while it is used");
}

/// After a park, hyper's fresh connection has never seen the streams used before it: the gate
/// answers frames on them as h2 answers a closed stream. A WINDOW_UPDATE or PRIORITY is
/// ignored, DATA gets RST_STREAM STREAM_CLOSED and its bytes back on the connection window,
/// a header block RST_STREAM STREAM_CLOSED; the connection goes on.
#[tokio::test]
async fn frames_on_streams_of_before_the_park_get_a_closed_streams_answers() {
    let (echo, head) = (Upstream::start(), Upstream::start());
    let s = Sluice::start(&config(&echo, &head, ""));
    let mut c = Raw::connect(s.addr()).await;
    let get = raw::request_block("GET", "/local", "park.test", &[]);
    c.send(&raw::frame(
        raw::HEADERS,
        raw::END_STREAM | raw::END_HEADERS,
        1,
        &get,
    ))
    .await;
    assert!(c.until_end(1).await.iter().any(raw::Frame::is_200));
    wait_parked(&s, 1).await;
    let mut late = raw::frame(raw::WINDOW_UPDATE, 0, 1, &100u32.to_be_bytes());
    late.extend(raw::frame(raw::PRIORITY, 0, 1, &[0, 0, 0, 0, 16]));
    late.extend(raw::frame(raw::DATA, 0, 1, b"0123456789"));
    late.extend(raw::frame(
        raw::HEADERS,
        raw::END_STREAM | raw::END_HEADERS,
        1,
        &get,
    ));
    late.extend(raw::frame(
        raw::HEADERS,
        raw::END_STREAM | raw::END_HEADERS,
        3,
        &get,
    ));
    c.send(&late).await;
    let frames = c.until_end(3).await;
    let seen: Vec<_> = frames
        .iter()
        .filter(|f| f.stream == 1 || f.kind == raw::WINDOW_UPDATE)
        .map(|f| (f.kind, f.stream, f.payload.clone()))
        .collect();
    let closed = 5u32.to_be_bytes().to_vec();
    assert_eq!(
        seen,
        [
            (raw::RST_STREAM, 1, closed.clone()),
            (raw::WINDOW_UPDATE, 0, 10u32.to_be_bytes().to_vec()),
            (raw::RST_STREAM, 1, closed),
        ],
        "{frames:?}"
    );
    assert!(
        frames.iter().any(|f| f.stream == 3 && f.is_200()),
        "{frames:?}"
    );
}

/// A parked connection keeps `keepalive_timeout` from its last stream's end (a GOAWAY NO_ERROR
/// naming that stream, then the close), and a stop (SIGTERM) sends it the GOAWAY at once.
#[tokio::test]
async fn a_parked_connection_times_out_and_stops_as_an_awake_one() {
    let (echo, head) = (Upstream::start(), Upstream::start());
    let mut s = Sluice::start(&config(&echo, &head, "keepalive_timeout = \"1500ms\""));
    let mut raw = Raw::connect(s.addr()).await;
    let get = raw::request_block("GET", "/local", "park.test", &[]);
    raw.send(&raw::frame(
        raw::HEADERS,
        raw::END_STREAM | raw::END_HEADERS,
        1,
        &get,
    ))
    .await;
    assert!(raw.until_end(1).await.iter().any(raw::Frame::is_200));
    let end = Instant::now();
    wait_parked(&s, 1).await;
    let mut goaway = None;
    while let Some(f) = raw.next(Duration::from_secs(5)).await {
        if f.kind == raw::GOAWAY {
            goaway = Some((f.payload[..8].to_vec(), end.elapsed()));
        }
    }
    let (payload, took) = goaway.expect("a GOAWAY before the close");
    assert_eq!(payload, [0, 0, 0, 1, 0, 0, 0, 0], "last stream 1, NO_ERROR");
    assert!(
        (1400..2200).contains(&took.as_millis()),
        "closed {took:?} after the stream"
    );
    wait_parked(&s, 0).await;
    // A stop: the GOAWAY comes at once.
    let mut c = H2::connect(s.addr(), client(4)).await;
    assert_eq!(c.fetch("/local").await.status, 200);
    wait_parked(&s, 1).await;
    let stop = Instant::now();
    s.signal(libc::SIGTERM);
    assert!(c.ended(Duration::from_secs(2)).await.is_ok());
    assert!(
        stop.elapsed() < Duration::from_millis(800),
        "{:?}",
        stop.elapsed()
    );
    let exit = s.wait_exit(Duration::from_secs(5)).await;
    assert!(exit.is_some_and(|e| e.success()), "{exit:?}");
}

/// curl over TLS (ALPN h2), three requests a second apart on one connection: each after the
/// first wakes it; one TLS handshake in all.
#[tokio::test]
async fn curl_over_tls_comes_back_to_its_parked_connection() {
    let ca = TestCa::new();
    let leaf = ca.leaf("localhost", &["localhost"], KeyKind::EcdsaP256);
    let s = Sluice::builder(&format!(
        "[admin]\n[[servers]]\nlisten = \"127.0.0.1:7443 ssl\"\n\
         ssl_certificate = \"{}\"\nssl_certificate_key = \"{}\"\n\
         [[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200, body = \"ok\\n\" }}\n",
        leaf.chain.display(),
        leaf.key.display()
    ))
    .relocate("127.0.0.1:7443")
    .start();
    let port = s.addr().port();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let url = format!("https://localhost:{port}/");
    let ca_path = ca.cert();
    let args = [
        "-sS",
        "--http2",
        "--cacert",
        ca_path.to_str().unwrap(),
        "--resolve",
        &resolve,
        "--rate",
        "1/s",
        "-w",
        "%{http_version} %{num_connects}\n",
        &url,
        &url,
        &url,
    ];
    let (out, _) = tokio::join!(run("curl", &args), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        wait_parked(&s, 1).await;
    });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text, "ok\n2 1\nok\n2 0\nok\n2 0\n",
        "one connection, HTTP/2 each time"
    );
    let metrics = get(s.admin_addr(), "/metrics").await.body_text();
    assert!(
        metrics.contains("sluice_tls_handshakes_total{result=\"ok\"} 1\n"),
        "{metrics}"
    );
}
