//! limit_req over HTTP/2, against real nginx 1.22 (`listen … http2`): each stream is a request,
//! so a burst of streams on one connection gets the article's table, statuses and delays, as
//! the same burst of HTTP/1.1 connections does; a rejected stream ends alone; a delayed stream
//! holds up no other. Then nginx-tests' h2_limit_req.t cases (request bodies meeting a delay),
//! and a client that resets a delayed stream.

use std::net::SocketAddr;
use std::time::Duration;

use super::client::{H2, answers};
use super::raw::Raw;
use super::{NginxH2, raw, run};
use crate::support::{
    Answer, Reply, Sluice, Upstream, assert_expected, assert_same, assert_same_limit_lines, client,
    expect, get, timing,
};

/// The article's `/burst` (2r/s, burst=5) and a `/free` location without limits, both in front
/// of `upstream`, on nginx.
fn nginx_burst(upstream: SocketAddr) -> NginxH2 {
    NginxH2::start(
        "  limit_req_zone $binary_remote_addr zone=z:1m rate=2r/s;",
        &format!(
            "    location /burst {{ limit_req zone=z burst=5; proxy_pass http://{upstream}; }}
    location /free {{ proxy_pass http://{upstream}; }}"
        ),
    )
}

/// The same on sluice.
fn sluice_burst(upstream: SocketAddr) -> Sluice {
    Sluice::start(&sluice_burst_toml(upstream))
}

fn sluice_burst_toml(upstream: SocketAddr) -> String {
    format!(
        r#"limit_req_log_level = "error"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "2r/s"
[[servers]]
http2 = true
proxy_pass = "http://{upstream}"
[[servers.locations]]
path = "/burst"
limit_req = {{ zone = "z", burst = 5 }}
[[servers.locations]]
path = "/free"
"#
    )
}

/// 10 streams to `/burst` and one to `/free`, sent together on connection `c`; then, the burst
/// done, one more `/burst` on the same connection. Returns the burst's replies, `/free`'s, the
/// last one's.
pub(super) async fn burst_and_more(mut c: H2) -> (Vec<Reply>, Reply, Reply) {
    let mut pending = Vec::new();
    for _ in 0..10 {
        let req = c.get("/burst").body(()).unwrap();
        pending.push(c.start(req, None).await);
    }
    let free = c.start(c.get("/free").body(()).unwrap(), None).await;
    let (burst, free) = tokio::join!(answers(pending), free.reply());
    let after = c.fetch("/burst").await;
    (burst, free, after)
}

/// The article's table over one HTTP/2 connection: 200 at 0, 500, … 2500 ms and four 503s at
/// once, on nginx and on sluice, with the same limit lines (`request: "GET /burst HTTP/2.0"`);
/// the stream to `/free` sent with them is answered at once on both, and the connection that
/// carried the 503s serves the next request.
#[tokio::test]
async fn burst_of_streams_gets_the_article_table_as_on_nginx() {
    let _timing = timing();
    let (nu, su) = (Upstream::start(), Upstream::start());
    let (nginx, sluice) = (nginx_burst(nu.addr), sluice_burst(su.addr));
    let ((n_burst, n_free, n_after), (s_burst, s_free, s_after)) = tokio::join!(
        async { burst_and_more(H2::connect(nginx.addr(), client(2)).await).await },
        async { burst_and_more(H2::connect(sluice.addr(), client(2)).await).await },
    );
    let table = expect(&[(200, &[0, 500, 1000, 1500, 2000, 2500]), (503, &[0; 4])]);
    assert_expected("burst over HTTP/2", "nginx", &n_burst, &table);
    assert_expected("burst over HTTP/2", "sluice", &s_burst, &table);
    assert_same("burst over HTTP/2", &n_burst, &s_burst);
    let one = std::slice::from_ref;
    assert_expected(
        "/free beside the burst",
        "nginx",
        one(&n_free),
        &expect(&[(200, &[0])]),
    );
    assert_expected(
        "/free beside the burst",
        "sluice",
        one(&s_free),
        &expect(&[(200, &[0])]),
    );
    assert_same(
        "the next request on the connection",
        one(&n_after),
        one(&s_after),
    );
    assert_eq!(s_after.status, 200);
    // 6 + /free + the last one reached each upstream.
    assert_eq!((nu.hits(), su.hits()), (8, 8));
    assert_same_limit_lines("burst over HTTP/2", &nginx.nginx.error_log(), &sluice.log());
}

/// h2load's burst: 10 streams at once on one connection (`-c1 -m10`), the same outcome on nginx
/// and sluice: six answered 2xx, four 503s, done after the five delays (2.5 s).
#[tokio::test]
async fn h2load_burst_matches_nginx() {
    let _timing = timing();
    let (nu, su) = (Upstream::start(), Upstream::start());
    let (nginx, sluice) = (nginx_burst(nu.addr), sluice_burst(su.addr));
    let h2load = async |addr: SocketAddr| {
        let url = format!("http://{addr}/burst");
        let out = run("h2load", &["-n10", "-c1", "-m10", &url]).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "h2load {url}: {text}");
        text
    };
    let (n, s) = tokio::join!(h2load(nginx.addr()), h2load(sluice.addr()));
    let summary = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("requests:") || l.starts_with("status codes:"))
            .map(str::to_owned)
            .collect()
    };
    let want = [
        "requests: 10 total, 10 started, 10 done, 6 succeeded, 4 failed, 0 errored, 0 timeout",
        "status codes: 6 2xx, 0 3xx, 0 4xx, 4 5xx",
    ];
    assert_eq!(summary(&n), want, "nginx:\n{n}");
    assert_eq!(summary(&s), want, "sluice:\n{s}");
    let secs = |text: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with("finished in "))
            .expect("h2load's time");
        line["finished in ".len()..]
            .split('s')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    for (side, t) in [("nginx", secs(&n)), ("sluice", secs(&s))] {
        assert!((2.45..2.7).contains(&t), "{side} took {t} s for the burst");
    }
    assert_eq!((nu.hits(), su.hits()), (6, 6));
}

/// A client that resets a delayed stream (RST_STREAM CANCEL while it waits): nothing of it
/// reaches the upstream, it is logged once (nginx's info line and a 499 in the access log,
/// counted once in the metrics), its slot stays charged, and the connection serves the next
/// stream.
#[tokio::test]
async fn a_reset_delayed_stream_is_never_forwarded_and_counted_once() {
    let _timing = timing();
    let (nu, su) = (Upstream::start(), Upstream::start());
    let nginx = nginx_burst(nu.addr);
    let sluice = Sluice::start(&format!(
        "access_log = \"stdout\"\n{}\n[admin]\n",
        &sluice_burst_toml(su.addr)
    ));
    let scenario = async |addr: SocketAddr| {
        let mut c = H2::connect(addr, client(2)).await;
        let first = c.fetch("/burst").await;
        let delayed = c.start(c.get("/burst").body(()).unwrap(), None).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        delayed.cancel();
        // Past the delay it had (500 ms).
        tokio::time::sleep(Duration::from_millis(600)).await;
        let next = c.fetch("/burst").await;
        (first, next)
    };
    let ((n_first, n_next), (s_first, s_next)) =
        tokio::join!(scenario(nginx.addr()), scenario(sluice.addr()));
    let one = std::slice::from_ref;
    assert_same("the first request", one(&n_first), one(&s_first));
    assert_same(
        "the request after the reset one",
        one(&n_next),
        one(&s_next),
    );
    assert_eq!((n_next.status, s_next.status), (200, 200));
    assert_eq!(
        (nu.hits(), su.hits()),
        (2, 2),
        "the reset stream must not be forwarded"
    );
    // nginx also says "client canceled stream 3" first (sluice does not know stream numbers:
    // hyper keeps them).
    // Each side writes a request's access line once it is done with it, which may be a little
    // after the client has its response: wait for the three lines.
    let three = |log: String| (log.lines().count() >= 3).then_some(log);
    let n_access = crate::support::eventually(
        "nginx's three access lines",
        Duration::from_secs(5),
        async || three(nginx.nginx.access_log()),
    )
    .await;
    let s_access = crate::support::eventually(
        "sluice's three access lines",
        Duration::from_secs(5),
        async || three(sluice.stdout()),
    )
    .await;
    let (n_log, s_log) = (nginx.nginx.error_log(), sluice.log());
    for (side, log, access) in [("nginx", &n_log, &n_access), ("sluice", &s_log, &s_access)] {
        assert_eq!(
            log.matches("client prematurely closed connection").count(),
            1,
            "{side}: {log}"
        );
        assert_eq!(log.matches("delaying request").count(), 2, "{side}: {log}");
        assert_eq!(
            access.matches(r#""GET /burst HTTP/2.0" 499 0"#).count(),
            1,
            "{side}: {access}"
        );
        assert_eq!(access.lines().count(), 3, "{side}: {access}");
    }
    let metrics = get(sluice.admin_addr(), "/metrics").await.body_text();
    assert!(
        metrics.contains("sluice_http_responses_total{code=\"499\"} 1"),
        "{metrics}"
    );
}

/// nginx-tests' h2_limit_req.t's server: a 1r/s zone, `burst=2` on a location that proxies to a
/// body-echo upstream and on one answered locally, and `/` without limits.
fn h2_limit_req_pair(echo: &Upstream, nginx_echo: &Upstream) -> (NginxH2, Sluice) {
    let nginx = NginxH2::start(
        "  limit_req_zone $binary_remote_addr zone=req:1m rate=1r/s;",
        &format!(
            "    root html;
    location / {{ try_files /ok.txt =404; }}
    location /limit_req {{ limit_req zone=req burst=2; try_files /ok.txt =404; }}
    location /proxy_limit_req/ {{ limit_req zone=req burst=2; proxy_pass http://{}/; }}",
            nginx_echo.addr
        ),
    );
    let sluice = Sluice::start(&format!(
        r#"[zones.req]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/s"
[[servers]]
http2 = true
[[servers.locations]]
path = "/"
return = {{ status = 200, body = "ok\n" }}
[[servers.locations]]
path = "/limit_req"
limit_req = {{ zone = "req", burst = 2 }}
return = {{ status = 200, body = "ok\n" }}
[[servers.locations]]
path = "/proxy_limit_req/"
limit_req = {{ zone = "req", burst = 2 }}
proxy_pass = "http://{}/"
"#,
        echo.addr
    ));
    (nginx, sluice)
}

/// A stream to `/proxy_limit_req/` whose body follows its HEADERS, `wait` later (none: at once;
/// `body` empty: an empty DATA frame ends it). The echo's answer: status and body.
async fn body_after(addr: SocketAddr, body: &[u8], wait: Option<Duration>) -> (u16, String) {
    let mut c = H2::connect(addr, client(3)).await;
    let req = http::Request::post(format!("http://{addr}/proxy_limit_req/"))
        .body(())
        .unwrap();
    let (pending, stream) = c.open(req, false).await;
    if let Some(w) = wait {
        tokio::time::sleep(w).await;
    }
    stream
        .expect("an open stream")
        .send_data(bytes::Bytes::copy_from_slice(body), true)
        .expect("send the body");
    let r = pending.reply().await;
    (r.status, r.body_text())
}

/// h2_limit_req.t's four body cases, in its order (so the later ones are delayed by the zone):
/// the body after the headers; the body 1.1 s after them, into the delay; an empty DATA frame
/// then a wait; the body with the headers, then a wait. The upstream gets each body whole.
async fn body_cases(addr: SocketAddr) -> Vec<(u16, String)> {
    let mut out = vec![body_after(addr, b"TEST", None).await];
    out.push(body_after(addr, b"TEST", Some(Duration::from_millis(1100))).await);
    out.push(body_after(addr, b"", None).await);
    let mut c = H2::connect(addr, client(3)).await;
    let req = http::Request::post(format!("http://{addr}/proxy_limit_req/"))
        .body(())
        .unwrap();
    let pending = c.start(req, Some(b"TEST2")).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = pending.reply().await;
    out.push((r.status, r.body_text()));
    out
}

/// h2_limit_req.t's last cases: a DATA frame cut in two, its rest sent 1.1 s later (after the
/// delayed answer) or never (the connection closed): the delayed stream is answered 200, the
/// rest of the frame is discarded, the connection serves its next stream; a connection closed
/// mid-frame harms nothing. Returns the two statuses as 200 or not.
async fn split_frame_cases(addr: SocketAddr) -> (bool, bool, bool) {
    let authority = addr.to_string();
    let mut both = Vec::new();
    for close in [false, true] {
        let mut raw = raw::Raw::connect(addr).await;
        let block = raw::request_block("GET", "/limit_req", &authority, &[]);
        let mut bytes = raw::frame(raw::HEADERS, raw::END_HEADERS, 1, &block);
        bytes.extend(raw::frame(raw::DATA, raw::END_STREAM, 1, b"TEST"));
        let cut = bytes.len() - 2;
        raw.send(&bytes[..cut]).await;
        if close {
            tokio::time::sleep(Duration::from_millis(1100)).await;
            drop(raw);
            break;
        }
        let answer = raw.until_end(1).await;
        both.push(answer.iter().any(raw::Frame::is_200));
        tokio::time::sleep(Duration::from_millis(1100)).await;
        raw.send(&bytes[cut..]).await;
        let block = raw::request_block("GET", "/", &authority, &[]);
        raw.send(&raw::frame(
            raw::HEADERS,
            raw::END_HEADERS | raw::END_STREAM,
            3,
            &block,
        ))
        .await;
        let next = raw.until_end(3).await;
        both.push(next.iter().any(raw::Frame::is_200));
    }
    let alive = H2::connect(addr, client(4)).await.fetch("/").await.status == 200;
    (both[0], both[1], alive)
}

/// nginx-tests' h2_limit_req.t, in our own words, on nginx and on sluice.
#[tokio::test]
async fn nginx_tests_h2_limit_req_cases() {
    let (echo, nginx_echo) = (body_echo(), body_echo());
    let (nginx, sluice) = h2_limit_req_pair(&echo, &nginx_echo);
    let (n, s) = tokio::join!(body_cases(nginx.addr()), body_cases(sluice.addr()));
    let want = [
        (200, "TEST".to_owned()),
        (200, "TEST".to_owned()),
        (200, String::new()),
        (200, "TEST2".to_owned()),
    ];
    assert_eq!(n, want, "nginx");
    assert_eq!(s, want, "sluice");
    assert_eq!((nginx_echo.hits(), echo.hits()), (4, 4));
    let (n, s) = tokio::join!(
        split_frame_cases(nginx.addr()),
        split_frame_cases(sluice.addr())
    );
    assert_eq!(
        n,
        (true, true, true),
        "nginx: delayed answer, next stream, still serving"
    );
    assert_eq!(
        s,
        (true, true, true),
        "sluice: delayed answer, next stream, still serving"
    );
}

/// nginx and sluice with `limit_conn` 1 per client address, each in front of its upstream.
fn limit_conn_1(nginx_upstream: &Upstream, sluice_upstream: &Upstream) -> (NginxH2, Sluice) {
    let nginx = NginxH2::start(
        "  limit_conn_zone $binary_remote_addr zone=addr:1m;",
        &format!(
            "    location / {{ limit_conn addr 1; proxy_pass http://{}; }}",
            nginx_upstream.addr
        ),
    );
    let sluice = Sluice::start(&format!(
        "[conn_zones.addr]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\n[[servers]]\n\
         http2 = true\nproxy_pass = \"http://{}\"\nlimit_conn = {{ zone = \"addr\", conn = 1 }}\n",
        sluice_upstream.addr
    ));
    (nginx, sluice)
}

/// limit_conn counts requests, so streams: three at once on one connection with `conn = 1`, in
/// front of an upstream that holds each answer 300 ms, get one 200 and two 503s on nginx and on
/// sluice; the connection itself is not what is counted.
#[tokio::test]
async fn limit_conn_counts_each_stream() {
    let _timing = timing();
    let hold = Duration::from_millis(300);
    let (nu, su) = (Upstream::start_slow(hold), Upstream::start_slow(hold));
    let (nginx, sluice) = limit_conn_1(&nu, &su);
    let three = async |addr: SocketAddr| {
        let mut c = H2::connect(addr, client(2)).await;
        let mut pending = Vec::new();
        for _ in 0..3 {
            pending.push(c.start(c.get("/").body(()).unwrap(), None).await);
        }
        let replies = answers(pending).await;
        // The count is released with the answer: the connection's next stream passes.
        (replies, c.fetch("/").await)
    };
    let ((n, n_next), (s, s_next)) = tokio::join!(three(nginx.addr()), three(sluice.addr()));
    let want = expect(&[(200, &[300]), (503, &[0, 0])]);
    assert_expected("3 streams, limit_conn 1", "nginx", &n, &want);
    assert_same("3 streams, limit_conn 1", &n, &s);
    let one = std::slice::from_ref;
    assert_same("the next stream", one(&n_next), one(&s_next));
    assert_eq!((n_next.status, s_next.status), (200, 200));
}

/// nginx-tests' h2_limit_conn.t, in our words: a stream's `limit_conn` count is held until its
/// response has been sent, not until the proxy buffered it. A client whose window is one byte
/// (SETTINGS_INITIAL_WINDOW_SIZE 1) gets the first byte of its first answer; its second stream
/// is refused with 503 while the first one's body waits, on nginx and on sluice, and sluice's
/// upstream saw only the first request.
#[tokio::test]
async fn a_stream_whose_window_holds_its_body_keeps_its_limit_conn_count() {
    let (nu, su) = (Upstream::start(), Upstream::start());
    let (nginx, sluice) = limit_conn_1(&nu, &su);
    let two = async |addr: SocketAddr| {
        let mut c = Raw::connect_with(addr, &[(0x4, 1)]).await;
        let block = |path: &str| raw::request_block("GET", path, &addr.to_string(), &[]);
        let get = |stream, path: &str| {
            raw::frame(
                raw::HEADERS,
                raw::END_HEADERS | raw::END_STREAM,
                stream,
                &block(path),
            )
        };
        c.send(&get(1, "/first")).await;
        // The first answer's head and its one byte of body.
        let (mut head, mut data) = (None, 0);
        while head.is_none() || data == 0 {
            let f = c
                .next(Duration::from_secs(5))
                .await
                .expect("the first answer");
            if f.stream == 1 && f.kind == raw::HEADERS {
                head = Some(f.is_200());
            } else if f.stream == 1 && f.kind == raw::DATA {
                data += f.payload.len();
            }
        }
        c.send(&get(3, "/second")).await;
        let second = loop {
            let f = c
                .next(Duration::from_secs(5))
                .await
                .expect("the second answer");
            if f.stream == 3 && f.kind == raw::HEADERS {
                break f.is_200();
            }
        };
        (head, data, second)
    };
    let (n, s) = tokio::join!(two(nginx.addr()), two(sluice.addr()));
    assert_eq!(
        n,
        (Some(true), 1, false),
        "nginx: first 200 (1 byte), second refused"
    );
    assert_eq!(s, n, "sluice as nginx");
    assert_eq!(su.hits(), 1, "sluice's upstream saw only the first request");
}

/// An upstream that answers every request with its body (`X-Length` says how many bytes came)
/// and counts the requests it read: what a proxy forwarded of a body, with a Content-Length or
/// chunked.
fn body_echo() -> Upstream {
    Upstream::answering(Answer::Body, 200)
}
