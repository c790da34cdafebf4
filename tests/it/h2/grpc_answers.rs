//! What sluice answers a gRPC call itself on a `grpc_pass` location: a trailers-only answer
//! (`:status 200`, `content-type: application/grpc`, `grpc-status`, `grpc-message`, one
//! HEADERS frame that ends the stream), chosen by cause: `RESOURCE_EXHAUSTED` with
//! `grpc-retry-pushback-ms` for `limit_req`, `PERMISSION_DENIED` for `deny`, `UNAVAILABLE` for
//! an upstream that refuses; an error page's `grpc_status` and `grpc_message` instead; nginx's
//! HTTP answers with `grpc_errors = "http"` and for requests that are no gRPC calls; a
//! `grpc-timeout` shorter than the delay refused at once. The calls are the `h2` crate's
//! (headers decoded) and frames written by hand (the wire itself).

use std::time::Duration;

use super::client::H2;
use super::raw::{self, END_HEADERS, END_STREAM, HEADERS, Raw};
use crate::support::{Port, Reply, Sluice, client};

/// A gRPC call's request: `POST path`, `content-type: application/grpc`, `te: trailers`, and
/// `more` fields.
fn call(c: &H2, path: &str, more: &[(&str, &str)]) -> http::Request<()> {
    let mut b = http::Request::builder()
        .method("POST")
        .uri(format!("http://{}{path}", c.addr))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (n, v) in more {
        b = b.header(*n, *v);
    }
    b.body(()).unwrap()
}

/// One unary call with an empty message (its 5-byte prefix), answered.
async fn unary(c: &mut H2, path: &str, more: &[(&str, &str)]) -> Reply {
    let req = call(c, path, more);
    c.start(req, Some(&[0, 0, 0, 0, 0])).await.reply().await
}

/// `r` is a trailers-only answer with `code`: status 200, gRPC's content type, no body.
fn assert_grpc(r: &Reply, code: u8) {
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/grpc"), "{r:?}");
    assert_eq!(r.header("grpc-status"), Some(&*code.to_string()), "{r:?}");
    assert!(r.body.is_empty(), "no message, no DATA: {r:?}");
}

/// `/limited` (1r/s, burst 0, RateLimit fields, an `add_header`), `/denied`, `/http`
/// (`grpc_errors = "http"`), `/paged` (an error page naming code 14), all with `grpc_pass` to
/// `closed` (nothing listens there); `$status $grpc_status $limit_req_status` in the access log.
fn server(closed: &Port) -> String {
    format!(
        r#"log_format = "$request_uri $status $grpc_status $limit_req_status"
access_log = "access.log"
[zones.one]
key = "$binary_remote_addr$uri"
size = "1m"
rate = "1r/s"
[[servers]]
http2 = true
grpc_pass = "grpc://{addr}"
[[servers.locations]]
path = "/limited"
limit_req = {{ zone = "one" }}
ratelimit_headers = "draft"
add_header = [{{ name = "x-added", value = "$limit_req_status" }}]
[[servers.locations]]
path = "/denied"
access = ["deny all"]
[[servers.locations]]
path = "/http"
limit_req = {{ zone = "one" }}
grpc_errors = "http"
[[servers.locations]]
path = "/paged"
limit_req = {{ zone = "one" }}
[servers.locations.error_pages.503]
grpc_status = 14
grpc_message = "busy: 100%"
headers = {{ x-page = "yes" }}
"#,
        addr = closed.addr()
    )
}

/// The second call within a second to a 1r/s limit gets `RESOURCE_EXHAUSTED`, its message
/// the limit, `grpc-retry-pushback-ms` the wait in ms (≈ 1000), `retry-after: 1` and the
/// RateLimit fields as the HTTP answer, the location's `add_header`; the access log says 200,
/// the code, REJECTED. On the wire it is one HEADERS frame with END_STREAM.
#[tokio::test]
async fn a_limited_call_is_resource_exhausted_with_the_wait() {
    let closed = Port::reserve();
    let s = Sluice::start(&server(&closed));
    let mut c = H2::connect(s.addr(), client(1)).await;
    let first = unary(&mut c, "/limited", &[]).await;
    assert_ne!(first.header("grpc-status"), Some("8"), "{first:?}");
    let r = unary(&mut c, "/limited", &[]).await;
    assert_grpc(&r, 8);
    let pushback: u64 = r.header("grpc-retry-pushback-ms").unwrap().parse().unwrap();
    assert!((800..=1000).contains(&pushback), "{pushback} {r:?}");
    assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");
    assert_eq!(r.header("ratelimit"), Some("\"one\";r=0;t=1"), "{r:?}");
    assert!(r.header("ratelimit-policy").is_some(), "{r:?}");
    assert_eq!(r.header("x-added"), Some("REJECTED"), "{r:?}");
    let message = r.header("grpc-message").unwrap();
    assert_eq!(
        message, "1 request per second (zone \"one\"). Retry after 1 second.",
        "{r:?}"
    );
    // The third, by hand: one HEADERS frame, END_STREAM on it, nothing else on the stream.
    let mut raw = Raw::connect(s.addr()).await;
    let block = raw::request_block(
        "POST",
        "/limited",
        "localhost",
        &[("content-type", "application/grpc"), ("te", "trailers")],
    );
    raw.send(&raw::frame(HEADERS, END_STREAM | END_HEADERS, 1, &block))
        .await;
    let frames = raw.until_end(1).await;
    let ours: Vec<_> = frames.iter().filter(|f| f.stream == 1).collect();
    assert_eq!(ours.len(), 1, "{frames:?}");
    assert!(ours[0].is_200(), "{frames:?}");
    assert_eq!(ours[0].flags & END_STREAM, END_STREAM, "{frames:?}");
    let log = s.wait_lines("access.log", 3).await;
    assert!(log.contains("/limited 200 8 REJECTED\n"), "{log}");
}

/// `deny` is `PERMISSION_DENIED`; an upstream that refuses the connection is `UNAVAILABLE`.
#[tokio::test]
async fn denied_and_unreachable_calls_get_their_codes() {
    let closed = Port::reserve();
    let s = Sluice::start(&server(&closed));
    let mut c = H2::connect(s.addr(), client(1)).await;
    let r = unary(&mut c, "/denied", &[]).await;
    assert_grpc(&r, 7);
    assert_eq!(
        r.header("grpc-message"),
        Some("Access is forbidden to this client.")
    );
    let r = unary(&mut c, "/unreachable", &[]).await;
    assert_grpc(&r, 14);
    let log = s.wait_lines("access.log", 2).await;
    assert!(log.contains("/denied 200 7 -\n"), "{log}");
    assert!(log.contains("/unreachable 200 14 -\n"), "{log}");
}

/// `grpc_errors = "http"` gives nginx's 503 and its problem body; so does a request to a gRPC
/// location that is no gRPC call (no `application/grpc`); an error page's `grpc_status` and
/// `grpc_message` (percent-encoded) replace the cause's code, its headers come too.
#[tokio::test]
async fn http_answers_and_error_pages_as_configured() {
    let closed = Port::reserve();
    let s = Sluice::start(&server(&closed));
    let mut c = H2::connect(s.addr(), client(1)).await;
    for path in ["/http", "/paged"] {
        unary(&mut c, path, &[]).await;
    }
    let r = unary(&mut c, "/http", &[]).await;
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.header("grpc-status"), None, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let plain = c.get("/limited").body(()).unwrap();
    c.start(plain, None).await.reply().await;
    let plain = c.get("/limited").body(()).unwrap();
    let r = c.start(plain, None).await.reply().await;
    assert_eq!(r.status, 503, "not a gRPC call: {r:?}");
    let r = unary(&mut c, "/paged", &[]).await;
    assert_grpc(&r, 14);
    assert_eq!(r.header("grpc-message"), Some("busy: 100%25"), "{r:?}");
    assert_eq!(r.header("x-page"), Some("yes"), "{r:?}");
    assert!(r.header("grpc-retry-pushback-ms").is_some(), "{r:?}");
}

/// A call whose `grpc-timeout` (100 ms) is shorter than the 2 s delay `limit_req` would impose
/// is refused at once, `RESOURCE_EXHAUSTED`, the pushback the delay; an invalid `grpc-timeout`
/// is none (the call is delayed, not refused).
#[tokio::test]
async fn a_deadline_shorter_than_the_delay_is_refused_at_once() {
    let closed = Port::reserve();
    let s = Sluice::start(&format!(
        r#"[zones.slow]
key = "$binary_remote_addr"
size = "1m"
rate = "30r/m"
[[servers]]
http2 = true
grpc_pass = "grpc://{}"
limit_req = {{ zone = "slow", burst = 5 }}
"#,
        closed.addr()
    ));
    let mut c = H2::connect(s.addr(), client(1)).await;
    unary(&mut c, "/svc/M", &[]).await;
    let r = unary(&mut c, "/svc/M", &[("grpc-timeout", "100m")]).await;
    assert_grpc(&r, 8);
    assert!(r.elapsed < Duration::from_millis(500), "{r:?}");
    let pushback: u64 = r.header("grpc-retry-pushback-ms").unwrap().parse().unwrap();
    assert!((1800..=2000).contains(&pushback), "{pushback} {r:?}");
    assert_eq!(r.header("retry-after"), Some("2"), "{r:?}");
    // Invalid (9 digits): no deadline, the call waits out its delay (the refused one was
    // charged: 4 s now) and then fails upstream.
    let req = call(&c, "/svc/M", &[("grpc-timeout", "123456789m")]);
    let pending = c.start(req, Some(&[0, 0, 0, 0, 0])).await;
    let r = tokio::time::timeout(Duration::from_millis(1500), pending.reply()).await;
    assert!(r.is_err(), "still delayed after 1.5 s: {r:?}");
}

/// A real gRPC client (Debian's python3-grpcio): the second call within a second is
/// `RESOURCE_EXHAUSTED` with the limit in its details; with a retry policy for that code, the
/// next call waits out the pushback (≈ 1 s, gRFC A6) before its retry, which the limit lets
/// through (and which fails upstream: nothing listens there). A client whose timer fires a few
/// ms early is told the rest and retries once more; one that ignored the pushback would spend
/// its retries within milliseconds and end `RESOURCE_EXHAUSTED`.
#[tokio::test]
async fn grpcio_reads_resource_exhausted_and_waits_the_pushback() {
    let closed = Port::reserve();
    let s = Sluice::start(&server(&closed));
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/h2/grpc_client.py");
    let out = tokio::process::Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(s.addr().to_string())
        .args(["/limited/svc.S/M", "plain", "plain", "retry"])
        .output()
        .await
        .expect("/usr/bin/python3 (scripts/test.sh installs python3-grpcio)");
    let said = String::from_utf8_lossy(&out.stdout);
    let calls: Vec<serde_json::Value> = said
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && calls.len() == 3, "{said}{err}");
    assert_eq!(calls[0]["code"], "UNAVAILABLE", "{said}");
    assert_eq!(calls[1]["code"], "RESOURCE_EXHAUSTED", "{said}");
    assert_eq!(
        calls[1]["details"], "1 request per second (zone \"one\"). Retry after 1 second.",
        "{said}"
    );
    assert_eq!(calls[2]["code"], "UNAVAILABLE", "the retry passed: {said}");
    let ms = calls[2]["ms"].as_u64().unwrap();
    assert!((700..3000).contains(&ms), "waited the pushback: {said}");
}
