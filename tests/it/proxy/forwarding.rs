//! Forwarding: nginx's proxy_pass URI rule and headers, 502 and 504, stalled uploads, whole
//! responses on closing connections, bodies streamed both ways.

use super::*;
use crate::support::http1::{self, Kind};

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
    let (slow, _task) = silent_upstream();
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
    let (up, _task) = silent_upstream();
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
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut s = Reader::new(s);
                if s.request().await.is_none() {
                    return;
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
        let whole = http1::parse(&got, Kind::Response, true);
        let (r, used) = whole
            .unwrap_or_else(|e| panic!("{addr}: {e}"))
            .expect("complete at the end");
        assert_eq!(
            (r.body.len(), used),
            (SIZE, got.len()),
            "{addr}: the body was cut short"
        );
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
