//! What an HTTP/2 connection may not do, with nginx's defaults where nginx has one: the
//! settings sluice advertises (nghttp shows them) and the streams over the limit refused; header
//! fields and lists too large; rapid reset (CVE-2023-44487) in one write and paced; idle
//! connections closed after `client_header_timeout` or `keepalive_timeout`; a graceful stop.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::client::{H2, Pending};
use super::raw::{self, Raw};
use super::{NginxH2, run};
use crate::support::{Sluice, Upstream, client, get};

/// A sluice server with `http2 = true` and `more` (its own keys), `/` answered locally and
/// `/slow` delayed for minutes (burst 1000 at 1r/m); `[admin]` for `/healthz`.
fn sluice_h2(more: &str) -> Sluice {
    Sluice::start(&format!(
        r#"[admin]
[zones.slow]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[[servers]]
http2 = true
{more}
[[servers.locations]]
path = "/"
return = {{ status = 200, body = "ok\n" }}
[[servers.locations]]
path = "/slow"
limit_req = {{ zone = "slow", burst = 1000 }}
return = {{ status = 200 }}
"#
    ))
}

/// The same on nginx (`/slow` delayed: the first request of a client passes at once, the
/// others wait a minute each).
fn nginx_h2(more: &str) -> NginxH2 {
    NginxH2::start(
        "  limit_req_zone $binary_remote_addr zone=slow:1m rate=1r/m;",
        &format!(
            "    root html;\n{more}
    location / {{ try_files /ok.txt =404; }}
    location /slow {{ limit_req zone=slow burst=1000; try_files /ok.txt =404; }}"
        ),
    )
}

/// The server's SETTINGS as nghttp prints them (`SETTINGS_NAME(0xNN):VALUE`).
async fn settings(addr: SocketAddr) -> Vec<String> {
    let out = run("nghttp", &["-nv", &format!("http://{addr}/")]).await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "nghttp: {text}");
    let first = text
        .split("recv SETTINGS frame")
        .nth(1)
        .unwrap_or_else(|| panic!("no SETTINGS from {addr}: {text}"));
    let block = first.split("[ ").next().unwrap_or("");
    block
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("[SETTINGS_"))
        .map(|l| l.trim_start_matches('[').trim_end_matches(']').to_owned())
        .collect()
}

/// sluice advertises nginx's stream limit and initial window (128, 64 KB) and, where nginx
/// advertises nothing, the header list it takes (4 × 8k, `large_client_header_buffers`); a
/// 129th concurrent stream is refused (REFUSED_STREAM), as nginx refuses it.
#[tokio::test]
async fn settings_and_the_stream_limit_are_nginx_defaults() {
    let (sluice, nginx) = (sluice_h2(""), nginx_h2(""));
    let (s, n) = tokio::join!(settings(sluice.addr()), settings(nginx.addr()));
    for want in [
        "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):128",
        "SETTINGS_INITIAL_WINDOW_SIZE(0x04):65536",
    ] {
        assert!(s.iter().any(|l| l == want), "sluice: {s:?}");
        assert!(n.iter().any(|l| l == want), "nginx: {n:?}");
    }
    assert!(
        s.iter()
            .any(|l| l == "SETTINGS_MAX_HEADER_LIST_SIZE(0x06):32768"),
        "sluice: {s:?}"
    );
    let refused = async |addr: SocketAddr| {
        // The client's first request passes at once: the 130 that follow all wait.
        assert_eq!(
            H2::connect(addr, client(1))
                .await
                .fetch("/slow")
                .await
                .status,
            200
        );
        let mut c = Raw::connect(addr).await;
        let block = raw::request_block("GET", "/slow", &addr.to_string(), &[]);
        let mut bytes = Vec::new();
        for i in 0..130u32 {
            bytes.extend(raw::frame(
                raw::HEADERS,
                raw::END_HEADERS | raw::END_STREAM,
                1 + 2 * i,
                &block,
            ));
        }
        c.send(&bytes).await;
        let mut refused = Vec::new();
        while let Some(f) = c.next(Duration::from_millis(500)).await {
            if f.kind == raw::RST_STREAM && f.payload == 7u32.to_be_bytes() {
                refused.push(f.stream);
            }
        }
        refused
    };
    let (s, n) = tokio::join!(refused(sluice.addr()), refused(nginx.addr()));
    assert_eq!(n, [257, 259], "nginx");
    assert_eq!(s, [257, 259], "sluice");
}

/// Header fields over one buffer of `large_client_header_buffers` (8k) get what the same head
/// gets over HTTP/1.1 (414 for the path, 400 for a field), a header list over all four (32k)
/// gets hyper's 431; the connection serves its next stream after each. nginx ends the whole
/// connection instead (GOAWAY ENHANCE_YOUR_CALM), shown here too.
#[tokio::test]
async fn too_large_header_fields_end_their_stream_only() {
    let s = sluice_h2("");
    let mut c = H2::connect(s.addr(), client(1)).await;
    let long = "x".repeat(9000);
    let field = c.get("/").header("x-long", &long).body(()).unwrap();
    assert_eq!(c.start(field, None).await.reply().await.status, 400);
    assert_eq!(c.fetch("/").await.status, 200);
    let path = c.get(&format!("/{long}")).body(()).unwrap();
    assert_eq!(c.start(path, None).await.reply().await.status, 414);
    let mut list = c.get("/");
    for i in 0..5 {
        list = list.header(format!("x-part-{i}"), "y".repeat(7000));
    }
    assert_eq!(
        c.start(list.body(()).unwrap(), None)
            .await
            .reply()
            .await
            .status,
        431
    );
    assert_eq!(c.fetch("/").await.status, 200);
    let log = s.log();
    assert!(
        log.contains("client sent too large header field while reading client request headers"),
        "{log}"
    );

    let nginx = nginx_h2("");
    let mut c = Raw::connect(nginx.addr()).await;
    let block = raw::request_block("GET", "/", &nginx.addr().to_string(), &[("x-long", &long)]);
    c.send(&raw::frame(
        raw::HEADERS,
        raw::END_HEADERS | raw::END_STREAM,
        1,
        &block,
    ))
    .await;
    let mut goaway = None;
    while let Some(f) = c.next(Duration::from_secs(2)).await {
        goaway = goaway.or(f.goaway_code());
    }
    assert_eq!(goaway, Some(11), "nginx: GOAWAY ENHANCE_YOUR_CALM");
}

/// Rapid reset, in one write: streams opened and reset before the server could accept them (the
/// CVE's pattern). Past 20 (the h2 crate's limit) the connection gets GOAWAY ENHANCE_YOUR_CALM
/// and is closed; the proxy serves the next client.
#[tokio::test]
async fn rapid_reset_in_one_write_gets_enhance_your_calm() {
    let s = sluice_h2("");
    let mut c = Raw::connect(s.addr()).await;
    let block = raw::request_block("GET", "/", &s.addr().to_string(), &[]);
    let mut bytes = Vec::new();
    for i in 0..200u32 {
        let id = 1 + 2 * i;
        bytes.extend(raw::frame(
            raw::HEADERS,
            raw::END_HEADERS | raw::END_STREAM,
            id,
            &block,
        ));
        bytes.extend(raw::frame(raw::RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    c.send(&bytes).await;
    let mut goaway = None;
    while let Some(f) = c.next(Duration::from_secs(5)).await {
        goaway = goaway.or(f.goaway_code());
    }
    assert_eq!(goaway, Some(11), "GOAWAY ENHANCE_YOUR_CALM, then the close");
    assert_eq!(
        H2::connect(s.addr(), client(2))
            .await
            .fetch("/")
            .await
            .status,
        200
    );
    assert_eq!(get(s.admin_addr(), "/healthz").await.status, 200);
}

/// Rapid reset, paced: each stream accepted (and delayed) before the client resets it, so the
/// h2 crate's limit never sees it; sluice counts the streams reset before their answer and,
/// past 256 with none answered, ends the connection with GOAWAY ENHANCE_YOUR_CALM.
#[tokio::test]
async fn paced_rapid_reset_gets_enhance_your_calm() {
    let s = sluice_h2("");
    let mut c = H2::connect(s.addr(), client(3)).await;
    for _ in 0..3 {
        let mut round: Vec<Pending> = Vec::new();
        for _ in 0..100 {
            let req = c.get("/slow").body(()).unwrap();
            round.push(c.start(req, None).await);
        }
        // Long enough for the server to have begun every one.
        tokio::time::sleep(Duration::from_millis(200)).await;
        round.into_iter().for_each(Pending::cancel);
        tokio::time::sleep(Duration::from_millis(50)).await;
        if c.conn.is_finished() {
            break;
        }
    }
    let ended = c.ended(Duration::from_secs(5)).await;
    let reason = ended.as_ref().err().and_then(h2::Error::reason);
    assert_eq!(reason, Some(h2::Reason::ENHANCE_YOUR_CALM), "{ended:?}");
    let log = s.log();
    assert!(
        log.contains("client reset 257 streams before their response"),
        "{log}"
    );
    assert_eq!(
        H2::connect(s.addr(), client(4))
            .await
            .fetch("/")
            .await
            .status,
        200
    );
}

/// Idle connections go away as on nginx: one that opens no stream after
/// `client_header_timeout`, one whose streams are done after `keepalive_timeout`, each with a
/// GOAWAY (NO_ERROR) and the close; `keepalive_timeout 0` allows one stream.
#[tokio::test]
async fn idle_connections_get_goaway_after_their_timeouts() {
    let timeouts = "client_header_timeout = \"1s\"\nkeepalive_timeout = \"2s\"";
    let (sluice, nginx) = (
        sluice_h2(timeouts),
        nginx_h2("    client_header_timeout 1s; keepalive_timeout 2s;"),
    );
    let no_stream = async |addr: SocketAddr| {
        let start = Instant::now();
        let mut c = Raw::connect(addr).await;
        let mut goaway = None;
        while let Some(f) = c.next(Duration::from_secs(5)).await {
            goaway = goaway.or(f.goaway_code());
        }
        (goaway, start.elapsed())
    };
    let after_stream = async |addr: SocketAddr| {
        let mut c = H2::connect(addr, client(5)).await;
        assert_eq!(c.fetch("/").await.status, 200);
        let start = Instant::now();
        let ended = c.ended(Duration::from_secs(5)).await;
        (ended.is_ok(), start.elapsed())
    };
    let ((s1, s2), (n1, n2)) = tokio::join!(
        async { tokio::join!(no_stream(sluice.addr()), after_stream(sluice.addr())) },
        async { tokio::join!(no_stream(nginx.addr()), after_stream(nginx.addr())) },
    );
    for (side, (goaway, took)) in [("sluice", s1), ("nginx", n1)] {
        assert_eq!(goaway, Some(0), "{side}: GOAWAY NO_ERROR");
        assert!(
            (900..1400).contains(&took.as_millis()),
            "{side}: closed after {took:?}"
        );
    }
    for (side, (clean, took)) in [("sluice", s2), ("nginx", n2)] {
        assert!(clean, "{side}: a clean GOAWAY");
        assert!(
            (1900..2400).contains(&took.as_millis()),
            "{side}: closed after {took:?}"
        );
    }
    let once = sluice_h2("keepalive_timeout = 0");
    let mut c = H2::connect(once.addr(), client(6)).await;
    assert_eq!(c.fetch("/").await.status, 200);
    assert!(c.ended(Duration::from_secs(3)).await.is_ok());
}

/// A graceful stop (SIGTERM): the client's connection gets GOAWAY at once, its stream in
/// flight still gets its answer, then sluice exits.
#[tokio::test]
async fn a_stop_sends_goaway_and_lets_open_streams_finish() {
    let upstream = Upstream::start_slow(Duration::from_millis(800));
    let mut s = Sluice::start(&format!(
        "shutdown_timeout = \"5s\"\n[[servers]]\nhttp2 = true\nproxy_pass = \"http://{}\"\n",
        upstream.addr
    ));
    let mut c = H2::connect(s.addr(), client(7)).await;
    let slow = c.start(c.get("/slow").body(()).unwrap(), None).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.signal(libc::SIGTERM);
    // The GOAWAY came: the client opens no new stream on the connection.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let req = c.get("/late").body(()).unwrap();
    let late = c
        .send
        .clone()
        .ready()
        .await
        .and_then(|mut send| send.send_request(req, true));
    assert!(late.is_err(), "a new stream after the GOAWAY");
    let answer = slow.reply().await;
    assert_eq!(answer.status, 200);
    assert!(answer.elapsed >= Duration::from_millis(700), "{answer}");
    assert!(c.ended(Duration::from_secs(3)).await.is_ok());
    let exit = s.wait_exit(Duration::from_secs(5)).await;
    assert!(exit.is_some_and(|e| e.success()), "{exit:?}");
}

/// A client whose window stays shut takes nothing: once no stream has got on for
/// `send_timeout`, the connection is closed with HTTP/1.1's info line (nginx times such a
/// stream out after `send_timeout` too). The client got its window's worth (65535 bytes) of a
/// 1 MB answer the upstream sent at once.
#[tokio::test]
async fn a_client_whose_window_stays_shut_is_timed_out() {
    use crate::support::Reader;
    use tokio::io::AsyncWriteExt;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = l.local_addr().unwrap();
    let upstream = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let mut s = Reader::new(s);
        if s.request().await.is_none() {
            return;
        }
        let body = vec![b'x'; 1 << 20];
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n")
            .await;
        let _ = s.write_all(&body).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let s = Sluice::start(&format!(
        "[[servers]]\nhttp2 = true\nsend_timeout = \"1s\"\nproxy_pass = \"http://{up}\"\n"
    ));
    let mut c = Raw::connect(s.addr()).await;
    let block = raw::request_block("GET", "/big", &s.addr().to_string(), &[]);
    c.send(&raw::frame(
        raw::HEADERS,
        raw::END_HEADERS | raw::END_STREAM,
        1,
        &block,
    ))
    .await;
    let start = Instant::now();
    let mut data = 0;
    while let Some(f) = c.next(Duration::from_secs(5)).await {
        if f.kind == raw::DATA {
            data += f.payload.len();
        }
    }
    let took = start.elapsed();
    upstream.abort();
    assert_eq!(data, 65535);
    assert!(
        (900..1800).contains(&took.as_millis()),
        "closed after {took:?}"
    );
    let log = s.log();
    assert!(
        log.contains(
            "client timed out (110: Connection timed out) while sending response to client"
        ),
        "{log}"
    );
}

/// A stream reset over a malformed head (an upper-case field name) gets nginx's access-log line
/// as well as its info line: no request (`"-"`), status `000`, nothing sent; its sibling is
/// served and logged as usual.
#[tokio::test]
async fn a_reset_stream_gets_nginxs_access_line() {
    let sluice = Sluice::start(
        r#"access_log = "stdout"
log_format = '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"'
[[servers]]
http2 = true
[[servers.locations]]
path = "/"
return = { status = 200, body = "ok\n" }
"#,
    );
    let nginx = nginx_h2("");
    let bad = raw::request_block("GET", "/", "h2.test", &[("X-Upper", "1")]);
    let good = raw::request_block("GET", "/", "h2.test", &[]);
    for addr in [nginx.addr(), sluice.addr()] {
        let mut c = Raw::connect(addr).await;
        let mut frames = raw::frame(raw::HEADERS, raw::END_STREAM | raw::END_HEADERS, 1, &bad);
        frames.extend(raw::frame(
            raw::HEADERS,
            raw::END_STREAM | raw::END_HEADERS,
            3,
            &good,
        ));
        c.send(&frames).await;
        let answers = c.until_end(3).await;
        let reset = answers
            .iter()
            .any(|f| f.stream == 1 && f.kind == raw::RST_STREAM);
        assert!(reset, "{answers:?}");
    }
    // Both lines, the date left out.
    let strip = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains("\" 000 ") || l.contains("\"GET / HTTP/2.0\""))
            .map(|l| {
                let (head, rest) = l.split_once(" [").unwrap_or((l, ""));
                format!("{head} {}", rest.split_once("] ").map_or("", |r| r.1))
            })
            .collect()
    };
    let wait = Instant::now() + Duration::from_secs(3);
    while strip(&sluice.stdout()).len() < 2 && Instant::now() < wait {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (n, s) = (strip(&nginx.nginx.access_log()), strip(&sluice.stdout()));
    assert_eq!(n.len(), 2, "nginx: {n:?}");
    assert!(n[0].contains("\"-\" 000 0 \"-\" \"-\""), "nginx: {n:?}");
    assert_eq!(s, n, "sluice's lines against nginx's");
}

/// Two stream-identifier rules of RFC 9113 that hyper alone did not see (the gate rewrites
/// header blocks without their priority fields), the same frames to nginx and to sluice:
/// - HEADERS on an even stream (one only the server may open) ends the connection with GOAWAY
///   PROTOCOL_ERROR (§5.1.1), on both, and the stream after it is not served;
/// - a request whose priority names its own stream is never served: RFC 9113 §5.3.1 makes it a
///   stream error, which sluice answers (RST_STREAM PROTOCOL_ERROR, the next stream served);
///   nginx 1.22 ends the whole connection (GOAWAY PROTOCOL_ERROR, "client sent HEADERS frame
///   for stream 1 with incorrect dependency").
#[tokio::test]
async fn an_even_stream_and_a_self_dependency_are_refused() {
    let sluice = sluice_h2("");
    let nginx = nginx_h2("");
    let get = raw::request_block("GET", "/", "h2.test", &[]);
    let mut own = vec![0, 0, 0, 1, 15];
    own.extend_from_slice(&get);
    let self_dependent = raw::END_STREAM | raw::END_HEADERS | 0x20;
    let next = raw::frame(raw::HEADERS, raw::END_STREAM | raw::END_HEADERS, 3, &get);
    for (addr, is_nginx) in [(nginx.addr(), true), (sluice.addr(), false)] {
        let mut c = Raw::connect(addr).await;
        let mut frames = raw::frame(raw::HEADERS, raw::END_STREAM | raw::END_HEADERS, 2, &get);
        frames.extend_from_slice(&next);
        c.send(&frames).await;
        let seen = all_frames(&mut c).await;
        let goaway = seen.iter().find_map(raw::Frame::goaway_code);
        assert_eq!(goaway, Some(1), "even stream, {addr}: {seen:?}");
        assert!(!seen.iter().any(raw::Frame::is_200), "{addr}: {seen:?}");

        let mut c = Raw::connect(addr).await;
        let mut frames = raw::frame(raw::HEADERS, self_dependent, 1, &own);
        frames.extend_from_slice(&next);
        c.send(&frames).await;
        let seen = all_frames(&mut c).await;
        let served = |s: u32| seen.iter().any(|f| f.stream == s && f.is_200());
        assert!(!served(1), "self-dependent, {addr}: {seen:?}");
        if is_nginx {
            let goaway = seen.iter().find_map(raw::Frame::goaway_code);
            assert_eq!(goaway, Some(1), "nginx: {seen:?}");
            continue;
        }
        let reset = seen
            .iter()
            .find(|f| f.stream == 1 && f.kind == raw::RST_STREAM);
        let code = reset.map(|f| u32::from_be_bytes(f.payload[..4].try_into().unwrap()));
        assert_eq!(code, Some(1), "sluice: {seen:?}");
        assert!(served(3), "sluice: {seen:?}");
    }
}

/// Every frame until the server closes or stays silent for a second.
async fn all_frames(c: &mut Raw) -> Vec<raw::Frame> {
    let mut seen = Vec::new();
    while let Some(f) = c.next(Duration::from_secs(1)).await {
        seen.push(f);
    }
    seen
}
