//! The proxy itself on real sockets: nginx's proxy_pass URI rule, headers,
//! 502/504, 444, streaming, timeouts, malformed requests, error pages, and
//! the places where sluice differs from nginx on purpose.

use crate::support::{
    InProcess, Port, Sluice, Upstream, burst, client, eventually, limit_lines, request,
};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// One server whose every path answers 200 `ok` under zone `z`: one request
/// per minute per client, no burst.
const ONE_PER_MINUTE: &str = r#"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[[servers]]
[[servers.locations]]
path = "/"
limit_req = { zone = "z" }
return = { status = 200, body = "ok\n" }
"#;

/// An upstream that accepts connections, reads, and never answers.
async fn silent_upstream() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    (addr, task)
}

/// An upstream that reads a request with a Content-Length body, then answers
/// with a chunked body: `got N bytes\n` at once, and `done\n` 600 ms later.
async fn counting_upstream() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                let (head_end, len) = loop {
                    let n = s.read(&mut chunk).await.unwrap();
                    assert!(n > 0, "upstream: request ended early");
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map(|v| v.trim().parse().unwrap())
                            .unwrap_or(0);
                        break (i + 4, len);
                    }
                };
                while buf.len() < head_end + len {
                    let n = s.read(&mut chunk).await.unwrap();
                    assert!(n > 0, "upstream: body ended early");
                    buf.extend_from_slice(&chunk[..n]);
                }
                let got = buf.len() - head_end;
                let first = format!("got {got} bytes\n");
                let head = format!(
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{first}\r\n",
                    first.len()
                );
                s.write_all(head.as_bytes()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(600)).await;
                s.write_all(b"5\r\ndone\n\r\n0\r\n\r\n").await.unwrap();
            });
        }
    });
    (addr, task)
}

#[tokio::test]
async fn proxy_pass_rewrites_uri_and_headers_as_nginx() {
    let up = Upstream::start();
    let toml = format!(
        r#"
[[servers]]
[[servers.locations]]
path = "/api/"
proxy_pass = "http://{up}/base/"
[[servers.locations]]
path = "/raw"
proxy_pass = "http://{up}"
"#,
        up = up.addr
    );
    let s = Sluice::in_process(&toml);
    let r = request(
        s.addr(),
        client(2),
        "GET",
        "/api/x/y?q=1",
        &[
            ("X-Forwarded-For", "1.2.3.4"),
            ("X-Forwarded-For", "5.6.7.8"),
            ("Connection", "close, X-Drop"),
            ("X-Drop", "secret"),
            ("Keep-Alive", "timeout=5"),
            ("X-Keep", "kept"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body_text());
    let echo = r.body_text().to_ascii_lowercase();
    assert!(echo.starts_with("get /base/x/y?q=1 http/1.1"), "{echo}");
    assert!(echo.contains(&format!("host: {}", up.addr)), "{echo}");
    assert!(
        echo.contains("x-forwarded-for: 1.2.3.4, 5.6.7.8, 127.0.0.2"),
        "{echo}"
    );
    assert!(echo.contains("x-keep: kept"), "{echo}");
    assert!(
        !echo.contains("x-drop"),
        "hop-by-hop header named in Connection: {echo}"
    );
    assert!(!echo.contains("keep-alive: timeout"), "{echo}");

    let r = request(s.addr(), client(2), "GET", "/raw/a%20b?z=2", &[]).await;
    assert!(
        r.body_text().starts_with("GET /raw/a%20b?z=2 HTTP/1.1"),
        "without a URI part the request URI passes unchanged: {}",
        r.body_text()
    );
}

#[tokio::test]
async fn dead_upstream_is_502_and_slow_upstream_is_504() {
    let dead = Port::reserve(); // nothing listens there
    let (slow, _task) = silent_upstream().await;
    let toml = format!(
        r#"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/s"
[[servers]]
[[servers.locations]]
path = "/dead"
proxy_pass = "http://{dead}"
[[servers.locations]]
path = "/dead-limited"
proxy_pass = "http://{dead}"
limit_req = {{ zone = "z", burst = 5 }}
[servers.locations.error_pages.502]
body = "upstream down after $limit_req_status by $limit_req_zone\n"
[[servers.locations]]
path = "/slow"
proxy_pass = "http://{slow}"
proxy_read_timeout = "300ms"
"#,
        dead = dead.addr()
    );
    let s = Sluice::start(&toml);
    let r = request(s.addr(), client(2), "GET", "/dead", &[]).await;
    assert_eq!(r.status, 502);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert!(
        r.body_text().contains("\"status\":502"),
        "{}",
        r.body_text()
    );

    let r = request(s.addr(), client(2), "GET", "/dead-limited", &[]).await;
    assert_eq!(r.status, 502);
    assert_eq!(r.body_text(), "upstream down after PASSED by z\n");

    let r = request(s.addr(), client(2), "GET", "/slow", &[]).await;
    assert_eq!(r.status, 504);
    assert!(
        (250..2000).contains(&r.ms()),
        "504 after proxy_read_timeout, took {} ms",
        r.ms()
    );
    let log = s.log();
    // nginx's wording and field order: the upstream after the request.
    let refused = format!(
        "connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.2, \
         server: , request: \"GET /dead HTTP/1.1\", upstream: \"http://{dead}/dead\", host: ",
        dead = dead.addr()
    );
    assert!(log.contains(&refused), "{log}");
    let timed_out = format!(
        "upstream timed out (110: Connection timed out) while reading response header from upstream, \
         client: 127.0.0.2, server: , request: \"GET /slow HTTP/1.1\", upstream: \"http://{slow}/slow\""
    );
    assert!(log.contains(&timed_out), "{log}");
}

/// nginx's `client_body_timeout` and `proxy_send_timeout`, configured: a
/// client that stops sending its body gets 408 (logged at info, as nginx);
/// an upstream that stops taking the request gets the client a 504.
#[tokio::test]
async fn stalled_uploads_time_out_as_configured() {
    let (up, _task) = silent_upstream().await;
    let toml = format!(
        r#"
client_max_body_size = "64m"
[[servers]]
proxy_pass = "http://{up}"
client_body_timeout = "300ms"
[[servers.locations]]
path = "/sink"
proxy_send_timeout = "300ms"
client_body_timeout = "10s"
"#
    );
    let s = Sluice::start(&toml);

    // Three bytes of ten, then nothing.
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    c.write_all(b"POST /slow-client HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        .await
        .unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut got)).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        (250..3000).contains(&start.elapsed().as_millis()),
        "408 after client_body_timeout, took {:?}",
        start.elapsed()
    );

    // An upstream that never reads: 64 MB cannot fit in the socket buffers.
    let body = vec![b'x'; 64 * 1024 * 1024];
    let c = TcpStream::connect(s.addr()).await.unwrap();
    let (mut rd, mut wr) = c.into_split();
    let head = format!(
        "POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(head.as_bytes()).await;
        let _ = wr.write_all(&body).await;
        wr
    });
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), rd.read_to_end(&mut got)).await;
    writer.abort();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 504"), "{text}");

    let log = s.log();
    let slow = log
        .lines()
        .find(|l| l.contains("while reading client request body"))
        .unwrap_or_else(|| panic!("no client_body_timeout line: {log}"));
    assert!(slow.contains("[info]"), "{slow}");
    assert!(
        slow.contains(
            "client timed out (110: Connection timed out) while reading client request body, \
             client: 127.0.0.1, server: , request: \"POST /slow-client HTTP/1.1\""
        ),
        "{slow}"
    );
    let timed_out = format!(
        "upstream timed out (110: Connection timed out) while sending request to upstream, \
         client: 127.0.0.1, server: , request: \"POST /sink HTTP/1.1\", upstream: \"http://{up}/sink\""
    );
    assert!(log.contains(&timed_out), "{log}");
}

/// A connection that ends after its response (the client's
/// `Connection: close`, or `keepalive_timeout = 0`) gets the whole body,
/// even when the client reads it late and it did not fit in the socket.
#[tokio::test]
async fn a_closing_connection_gets_its_whole_response() {
    const SIZE: usize = 8 << 20;
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(n @ 1..) => got.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\n\r\n");
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(&vec![b'x'; SIZE]).await;
            });
        }
    });
    let toml = format!(
        r#"
[[servers]]
proxy_pass = "http://{up}"
[[servers]]
proxy_pass = "http://{up}"
keepalive_timeout = 0
"#
    );
    let s = Sluice::in_process(&toml);
    for (addr, close) in [(s.addr_of(0), "Connection: close\r\n"), (s.addr_of(1), "")] {
        let mut c = TcpStream::connect(addr).await.unwrap();
        let req = format!("GET /big HTTP/1.1\r\nHost: x\r\n{close}\r\n");
        c.write_all(req.as_bytes()).await.unwrap();
        // The client reads late: sluice's last writes wait for room.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut got))
            .await
            .expect("closed after the response")
            .unwrap();
        let head_end = got
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head")
            + 4;
        assert_eq!(got.len() - head_end, SIZE, "{addr}: the body was cut short");
    }
}

#[tokio::test]
async fn bodies_stream_both_ways() {
    let (up, _task) = counting_upstream().await;
    let toml = format!(
        r#"
client_max_body_size = "8m"    # the default 1m would answer 413, as nginx
[[servers]]
proxy_pass = "http://{up}"
"#
    );
    let s = Sluice::in_process(&toml);
    let body = vec![b'x'; 4 * 1024 * 1024];
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c.write_all(&body).await.unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut first_at = None;
    loop {
        let n = c.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if first_at.is_none() && String::from_utf8_lossy(&got).contains("got 4194304 bytes") {
            first_at = Some(start.elapsed());
        }
    }
    let text = String::from_utf8_lossy(&got);
    let first_at = first_at.unwrap_or_else(|| panic!("the upload did not arrive whole: {text}"));
    assert!(text.contains("done"), "{text}");
    assert!(
        first_at < Duration::from_millis(400) && start.elapsed() >= Duration::from_millis(550),
        "the first chunk must reach the client before the upstream finishes \
         (first after {first_at:?}, end after {:?})",
        start.elapsed()
    );
}

/// Malformed requests get 400 and never reach a location. (A client that
/// sends nothing is dropped after client_header_timeout: tests/it/ops.rs.)
#[tokio::test]
async fn malformed_requests_get_400() {
    let unused = Port::reserve();
    let toml = format!(
        r#"
access_log = "stdout"
[[servers]]
[[servers.locations]]
path = "/"
return = {{ status = 200, body = "ok\n" }}
[[servers.locations]]
path = "/upload"
proxy_pass = "http://{unused}"
"#,
        unused = unused.addr()
    );
    let s = Sluice::start(&toml);
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    c.write_all(b"GARBAGE\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 400"), "{text:?}");

    let r = request(s.addr(), client(2), "GET", "/a/../../etc", &[]).await;
    assert_eq!(r.status, 400, "a path above the root");

    // A chunk size past client_max_body_size is a 413 at once, even with no
    // data after it (nginx checks the size line).
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    c.write_all(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    // The size line comes while the body is already being waited for.
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.write_all(b"100001\r\n").await.unwrap();
    let mut out = vec![0; 64];
    let n = tokio::time::timeout(Duration::from_secs(3), c.read(&mut out))
        .await
        .expect("an answer before client_body_timeout")
        .unwrap();
    let text = String::from_utf8_lossy(&out[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text:?}");

    // Refused heads are logged as nginx logs them: the line as sent, 400.
    tokio::time::sleep(crate::support::LOG_SETTLE).await;
    let log = s.stdout();
    assert!(log.contains("\"GARBAGE\" 400 "), "{log}");
    assert!(log.contains("\"GET /a/../../etc HTTP/1.1\" 400 "), "{log}");
}

#[tokio::test]
async fn status_444_closes_the_connection_without_a_response() {
    let toml = format!("limit_req_status = 444\n{ONE_PER_MINUTE}");
    let s = Sluice::in_process(&toml);
    let a = request(s.addr(), client(2), "GET", "/", &[]).await;
    let b = request(s.addr(), client(2), "GET", "/", &[]).await;
    assert_eq!(a.status, 200);
    assert!(b.no_response(), "444 closes without a response, got {b}");
}

/// Unlike nginx (where `return` runs before limit_req), limits apply to `return`.
/// And with no error page, a rejection is problem+json with an exact Retry-After.
#[tokio::test]
async fn return_is_limited_and_rejections_carry_retry_after() {
    let toml = r#"
limit_req_status = 429
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "30r/m"
[zones.slow]
key = "$binary_remote_addr"
size = "1m"
rate = "6r/m"
[[servers]]
[[servers.locations]]
path = "/r"
limit_req = { zone = "z" }
return = { status = 200, body = "ok $limit_req_status\n" }
[[servers.locations]]
path = "/six"
limit_req = { zone = "slow" }
return = { status = 200 }
"#;
    let s = Sluice::in_process(toml);
    let replies = crate::support::burst(s.addr(), client(2), "/r", 3).await;
    let ok: Vec<_> = replies.iter().filter(|r| r.status == 200).collect();
    assert_eq!(ok.len(), 1, "one passes, the rest are limited");
    assert_eq!(ok[0].body_text(), "ok PASSED\n");
    let rejected = replies.iter().find(|r| r.status == 429).unwrap();
    assert_eq!(
        rejected.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(
        rejected.header("retry-after"),
        Some("2"),
        "30r/m without burst"
    );
    let body = rejected.body_text();
    assert!(
        body.contains("\"status\":429") && body.contains("#quota-exceeded"),
        "{body}"
    );

    request(s.addr(), client(3), "GET", "/six", &[]).await;
    let r = request(s.addr(), client(3), "GET", "/six", &[]).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("10"), "6r/m without burst");
}

/// nginx: a client that goes away while delayed is logged (499) and its slot
/// stays charged: the next request is delayed as if it had stayed.
#[tokio::test]
async fn a_delayed_client_that_leaves_keeps_its_slot() {
    let toml = r#"
access_log = "stdout"
[admin]
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "2r/s"
[[servers]]
[[servers.locations]]
path = "/"
limit_req = { zone = "z", burst = 5 }
return = { status = 200 }
"#;
    let s = Sluice::start(toml);
    // The raw connection below comes from 127.0.0.1: use that client throughout.
    let me = "127.0.0.1".parse().unwrap();
    let first = request(s.addr(), me, "GET", "/", &[]).await;
    assert_eq!(first.status, 200);
    // Second: delayed ~500 ms; leave after 100 ms.
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(c);
    let start = Instant::now();
    let r = request(s.addr(), me, "GET", "/", &[]).await;
    let waited = start.elapsed();
    assert_eq!(r.status, 200);
    // Excess after the first two: 2000 minus ~100 ms of leak → delay ≈ 900 ms.
    assert!(
        waited >= Duration::from_millis(700),
        "the slot of the client that left must stay charged (waited {waited:?})"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = s.log();
    assert!(
        log.contains("client prematurely closed connection"),
        "{log}"
    );
    let access = s.stdout();
    assert!(access.contains("\" 499 0 "), "{access}");
    let metrics = request(s.admin_addr(), me, "GET", "/metrics", &[]).await;
    assert!(
        metrics
            .body_text()
            .contains("sluice_http_responses_total{code=\"499\"} 1"),
        "{}",
        metrics.body_text()
    );
    assert!(
        access
            .lines()
            .any(|l| l.contains(" 499 ") && l.ends_with("DELAYED")),
        "{access}"
    );
}

#[tokio::test]
async fn locations_match_in_nginx_order() {
    let loc = |path: &str, name: &str| {
        format!(
            "[[servers.locations]]\npath = '{path}'\nreturn = {{ status = 200, body = \"{name}\" }}\n"
        )
    };
    let toml = format!(
        "[[servers]]\n{}{}{}{}{}{}",
        loc("/", "root"),
        loc("= /exact", "exact"),
        loc("^~ /static/", "static"),
        loc("~ \\.png$", "png"),
        loc("~* \\.JPG$", "jpg"),
        loc("/images/", "images"),
    );
    let s = Sluice::in_process(&toml);
    for (path, want) in [
        ("/exact", "exact"),
        ("/exact/more", "root"),
        ("/static/a.png", "static"),
        ("/images/a.png", "png"),
        ("/images/a.jpg", "jpg"),
        ("/images/a.txt", "images"),
        ("/x.PNG", "root"),
        ("/other", "root"),
    ] {
        let r = request(s.addr(), client(2), "GET", path, &[]).await;
        assert_eq!(r.body_text(), want, "{path}");
    }
}

/// X-Forwarded-For is never trusted by default; with `real_ip` from a
/// trusted peer, `$binary_remote_addr` is the address it names.
#[tokio::test]
async fn real_ip_is_trusted_only_when_configured() {
    let zone = r#"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
"#;
    let server = r#"
[[servers]]
limit_req_status = 429
[[servers.locations]]
path = "/"
limit_req = { zone = "z" }
return = { status = 200, body = "$remote_addr\n" }
"#;
    let via = |s: &InProcess, peer: u8, xff: &'static str| {
        let addr = s.addr();
        async move { request(addr, client(peer), "GET", "/", &[("X-Forwarded-For", xff)]).await }
    };
    // Default: the header is ignored, the peer is the client.
    let s = Sluice::in_process(&format!("{zone}{server}"));
    let a = via(&s, 2, "1.1.1.1").await;
    let b = via(&s, 2, "2.2.2.2").await;
    assert_eq!((a.status, b.status), (200, 429));
    assert_eq!(a.body_text(), "127.0.0.2\n");

    // Trusted peer, recursive: the rightmost untrusted address is the client.
    let toml = format!(
        "real_ip = {{ from = [\"127.0.0.0/8\", \"10.0.0.0/8\"], header = \"X-Forwarded-For\", recursive = true }}\n{zone}{server}"
    );
    let s = Sluice::in_process(&toml);
    let a = via(&s, 2, "1.1.1.1, 10.0.0.9").await;
    let b = via(&s, 2, "2.2.2.2").await;
    let c = via(&s, 3, "9.9.9.9, 1.1.1.1").await;
    assert_eq!(a.body_text(), "1.1.1.1\n");
    assert_eq!((a.status, b.status, c.status), (200, 200, 429));
}

/// Dry run: nothing is rejected or delayed, a dry-run delay is charged and a
/// dry-run rejection is not; `$limit_req_status` says what would have happened;
/// delays log one level below `limit_req_log_level`.
#[tokio::test]
async fn dry_run_statuses_and_log_levels() {
    let toml = r#"
access_log = "stdout"
log_format = "$status $limit_req_status $request_uri"
limit_req_log_level = "warn"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[[servers]]
[[servers.locations]]
path = "/dry"
limit_req_dry_run = true
limit_req = { zone = "z", burst = 1 }
return = { status = 200 }
[[servers.locations]]
path = "/real"
limit_req = { zone = "z", burst = 1 }
return = { status = 200 }
"#;
    let s = Sluice::start(toml);
    let replies = crate::support::burst(s.addr(), client(2), "/dry", 4).await;
    assert!(
        replies.iter().all(|r| r.status == 200 && r.ms() < 300),
        "dry run never rejects or delays: {replies:?}"
    );
    // 1r/m leaks nothing in a few hundred ms, so the excesses are exact.
    // Charged: pass (0) + dry-run delay (1000); the two dry-run rejections charged nothing.
    let r = request(s.addr(), client(2), "GET", "/real", &[]).await;
    assert_eq!(
        r.status, 503,
        "excess 2000 - leak > burst 1000: rejected, default status 503"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut lines: Vec<String> = s.stdout().lines().map(String::from).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "200 DELAYED_DRY_RUN /dry",
            "200 PASSED /dry",
            "200 REJECTED_DRY_RUN /dry",
            "200 REJECTED_DRY_RUN /dry",
            "503 REJECTED /real",
        ]
    );
    let log = s.log();
    assert!(
        log.contains("[notice]")
            && log.contains("delaying request, dry run, excess: 1.000, by zone \"z\""),
        "{log}"
    );
    assert!(
        log.contains("[warn]")
            && log.contains("limiting requests, dry run, excess: 2.000 by zone \"z\""),
        "{log}"
    );
}

/// Error-log lines are batched per worker (one write for many lines): a
/// flood of rejections still leaves exactly one whole, well-formed line per
/// rejection, written by the time the responses are out.
#[tokio::test]
async fn a_flood_of_rejections_logs_every_line_whole() {
    // An access log too: batched like the error log, every line whole.
    let toml = format!("access_log = \"stdout\"\n{ONE_PER_MINUTE}");
    let s = Sluice::start(&toml);
    let n = 300;
    let replies = burst(s.addr(), client(3), "/flood", n).await;
    let rejected = replies.iter().filter(|r| r.status == 503).count();
    assert_eq!(rejected, n - 1, "one passes, the rest are rejected");
    // Batched lines may trail the responses: wait until all have arrived, then check that
    // there are no more (one each).
    eventually(
        "a line per rejection",
        Duration::from_millis(500),
        async || {
            let lines = limit_lines(&s.log()).expect("every line in nginx's format");
            (lines.len() >= rejected).then_some(())
        },
    )
    .await;
    let lines = limit_lines(&s.log()).expect("every line in nginx's format");
    assert_eq!(lines.len(), rejected, "one line per rejection");
    assert!(
        lines
            .iter()
            .all(|l| l.zone == "z" && l.request == "GET /flood HTTP/1.1")
    );
    let access = s.stdout();
    let statuses: Vec<&str> = access
        .lines()
        .filter_map(|l| l.split("\"GET /flood HTTP/1.1\" ").nth(1))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    assert_eq!(access.lines().count(), n, "one access line per request");
    assert_eq!(statuses.iter().filter(|s| **s == "503").count(), n - 1);
    assert_eq!(statuses.iter().filter(|s| **s == "200").count(), 1);
}
