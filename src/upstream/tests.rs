//! The upstream client against small scripted upstreams on loopback:
//! reuse, retries, framing both ways, nginx's timeouts and error wording.

use super::response::MAX_HEAD;
use super::*;
use crate::http1::Fields;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::Frame;
use http_body_util::BodyExt;
use http_body_util::{Empty, Full};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// An upstream that answers each request with the next of `answers`
/// (one connection may carry several), and keeps what it received.
struct Upstream {
    key: Authority,
    accepted: Arc<AtomicUsize>,
    received: Arc<parking_lot::Mutex<Vec<u8>>>,
}

/// How the test upstream answers: bytes to send, in pieces, and
/// whether to close the connection afterwards.
#[derive(Clone)]
struct Answer {
    pieces: Vec<&'static [u8]>,
    close: bool,
    /// How long the request waits before the first piece.
    wait: Duration,
}

fn answer(pieces: &[&'static [u8]]) -> Answer {
    Answer {
        pieces: pieces.to_vec(),
        close: false,
        wait: Duration::ZERO,
    }
}

async fn upstream(answers: Vec<Answer>) -> Upstream {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let key: Authority = l.local_addr().unwrap().to_string().parse().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let answers = Arc::new(parking_lot::Mutex::new(answers.into_iter()));
    let (a, r) = (accepted.clone(), received.clone());
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            a.fetch_add(1, Ordering::SeqCst);
            let (answers, received) = (answers.clone(), r.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    received.lock().extend_from_slice(&buf[..n]);
                    // The rest of it, if it comes in more pieces.
                    let settle = Duration::from_millis(20);
                    while let Ok(Ok(n @ 1..)) = tokio::time::timeout(settle, s.read(&mut buf)).await
                    {
                        received.lock().extend_from_slice(&buf[..n]);
                    }
                    let Some(ans) = answers.lock().next() else {
                        return;
                    };
                    tokio::time::sleep(ans.wait).await;
                    for p in ans.pieces {
                        if s.write_all(p).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    if ans.close {
                        return;
                    }
                }
            });
        }
    });
    Upstream {
        key,
        accepted,
        received,
    }
}

fn head<'a>(method: &'a Method, headers: &'a Fields, host: &'a Authority) -> Head<'a> {
    let vars = crate::vars::RequestVars::for_test(headers, "127.0.0.9");
    Head {
        method,
        target: "/t?q=1",
        headers,
        proxy: Box::leak(Box::default()),
        hidden: Box::leak(Box::default()),
        vars: Box::leak(Box::new(vars)),
        proxy_host: host.as_str(),
        upgrade: None,
    }
}

fn empty() -> http_body_util::combinators::BoxBody<Bytes, BodyError> {
    Empty::new().map_err(|n| match n {}).boxed()
}

async fn get(up: &Upstream, method: Method) -> Result<(Response<()>, Bytes), String> {
    let headers = Fields::default();
    let h = head(&method, &headers, &up.key);
    let resp = send(&up.key, None, timeouts(Duration::from_secs(1)), &h, empty())
        .await
        .map_err(|e| e.to_string())?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    // Its fields all in the map, as a reader sees them.
    let mut resp = Response::from_parts(parts, ());
    super::into_header_map(&mut resp);
    Ok((resp, body))
}

/// POSTs `body` with `headers` and reads the whole response.
async fn post(up: &Upstream, headers: &Fields, body: &'static [u8]) {
    let method = Method::POST;
    let h = head(&method, headers, &up.key);
    let body = Full::new(Bytes::from_static(body))
        .map_err(|n| match n {})
        .boxed();
    let timeouts = timeouts(Duration::from_secs(1));
    let resp = send(&up.key, None, timeouts, &h, body).await.unwrap();
    resp.into_body().collect().await.unwrap();
}

/// Test timeouts: 1 s to connect, `read` for the response, nginx's 60 s
/// for the rest.
fn timeouts(read: Duration) -> UpstreamTimeouts {
    UpstreamTimeouts {
        proxy_connect: Duration::from_secs(1),
        proxy_send: Duration::from_secs(60),
        proxy_read: read,
        client_body: Duration::from_secs(60),
    }
}

/// A `size`-byte request body and the Content-Length header for it.
fn big_body(
    size: usize,
) -> (
    Fields,
    http_body_util::combinators::BoxBody<Bytes, BodyError>,
) {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    let body = Full::new(Bytes::from(vec![b'x'; size]))
        .map_err(|n| match n {})
        .boxed();
    (headers.into(), body)
}

const HI: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nhi";

#[tokio::test]
async fn kept_alive_connections_are_reused() {
    let up = upstream(vec![answer(&[HI]); 3]).await;
    for _ in 0..3 {
        let (resp, body) = get(&up, Method::GET).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(&body[..], b"hi");
        assert!(resp.headers().get("connection").is_none(), "hop-by-hop");
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn chunked_responses_are_decoded_across_reads() {
    let chunked = answer(&[
        b"HTTP/1.1 200 OK\r\ntransfer-enc",
        b"oding: chunked\r\n\r\n3;ext=1\r\nab",
        b"c\r\n2\r",
        b"\nde\r\n0\r\nx-trailer: 1\r\n",
        b"\r\n",
    ]);
    let up = upstream(vec![chunked, answer(&[HI])]).await;
    let (resp, body) = get(&up, Method::GET).await.unwrap();
    assert_eq!(&body[..], b"abcde");
    assert!(resp.headers().get("transfer-encoding").is_none());
    assert!(resp.headers().get("content-length").is_none());
    let (_, body) = get(&up, Method::GET).await.unwrap();
    assert_eq!(&body[..], b"hi");
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "reused after the last chunk"
    );
}

#[tokio::test]
async fn a_closed_kept_alive_connection_is_retried_on_a_new_one() {
    let first = Answer {
        pieces: vec![HI],
        close: true,
        wait: Duration::ZERO,
    };
    let up = upstream(vec![first, answer(&[HI])]).await;
    get(&up, Method::GET).await.unwrap();
    // Let the close arrive, but do not let the pool notice it first.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (resp, body) = get(&up, Method::GET).await.unwrap();
    assert_eq!((resp.status().as_u16(), &body[..]), (200, &b"hi"[..]));
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn interim_responses_are_skipped_and_unframed_bodies_read_to_close() {
    let up = upstream(vec![
        Answer {
            pieces: vec![
                b"HTTP/1.1 100 Continue\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nx-a: 1\r\n\r\nuntil ",
                b"close",
            ],
            close: true,
            wait: Duration::ZERO,
        },
        answer(&[HI]),
    ])
    .await;
    let (resp, body) = get(&up, Method::GET).await.unwrap();
    assert_eq!(resp.headers()["x-a"], "1");
    assert_eq!(&body[..], b"until close");
    get(&up, Method::GET).await.unwrap();
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2, "not reused");
}

#[tokio::test]
async fn head_204_and_304_have_no_body() {
    let up = upstream(vec![
        answer(&[b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n"]),
        answer(&[b"HTTP/1.1 204 No Content\r\n\r\n"]),
        answer(&[b"HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\n"]),
        answer(&[HI]),
    ])
    .await;
    let (resp, body) = get(&up, Method::HEAD).await.unwrap();
    assert_eq!(resp.headers()["content-length"], "10");
    assert!(body.is_empty());
    for status in [204, 304] {
        let (resp, body) = get(&up, Method::GET).await.unwrap();
        assert_eq!((resp.status().as_u16(), body.len()), (status, 0));
    }
    get(&up, Method::GET).await.unwrap();
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn broken_responses_are_errors() {
    let big: &'static [u8] = Box::leak(
        format!("HTTP/1.1 200 OK\r\nx-big: {}\r\n\r\n", "a".repeat(MAX_HEAD))
            .into_bytes()
            .into_boxed_slice(),
    );
    let up = upstream(vec![
        answer(&[big]),
        answer(&[b"HTTP/1.1 2000 Nope\r\n\r\n"]),
        answer(&[b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n"]),
        Answer {
            pieces: vec![b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc"],
            close: true,
            wait: Duration::ZERO,
        },
        Answer {
            pieces: vec![b"HTTP/1.1 200 OK\r\n"],
            close: true,
            wait: Duration::ZERO,
        },
    ])
    .await;
    let e = get(&up, Method::GET).await.unwrap_err();
    assert!(e.contains("too big header"), "{e}");
    let e = get(&up, Method::GET).await.unwrap_err();
    assert!(e.contains("invalid"), "{e}");
    let e = get(&up, Method::GET).await.unwrap_err();
    assert!(e.contains("Content-Length"), "{e}");
    let e = get(&up, Method::GET).await.unwrap_err();
    assert!(
        e.contains("prematurely closed connection while reading upstream"),
        "{e}"
    );
    let e = get(&up, Method::GET).await.unwrap_err();
    assert!(
        e.contains("prematurely closed connection while reading response header"),
        "{e}"
    );
}

#[tokio::test]
async fn a_stalled_body_times_out_after_proxy_read_timeout() {
    let up = upstream(vec![answer(&[
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc",
    ])])
    .await;
    let headers = Fields::default();
    let h = head(&Method::GET, &headers, &up.key);
    let read_timeout = Duration::from_millis(300);
    let resp = send(&up.key, None, timeouts(read_timeout), &h, empty())
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    let Err(e) = resp.into_body().collect().await else {
        panic!("a stalled body completed");
    };
    let took = start.elapsed();
    assert!(e.to_string().contains("upstream timed out"), "{e}");
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(2),
        "{took:?}"
    );
}

/// A kept connection's `proxy_read_timeout` timer serves each of its
/// responses: it fires early for a later wait and is moved, never cutting
/// a response short, and still times out a wait that is too long, counted
/// from that wait's start.
#[tokio::test]
async fn a_kept_connections_read_timeout_runs_from_each_wait() {
    let late = |ms| Answer {
        wait: Duration::from_millis(ms),
        ..answer(&[HI])
    };
    let up = upstream(vec![late(0), late(200), late(200), late(200), late(700)]).await;
    let key = up.key.clone();
    let headers = Fields::default();
    let h = head(&Method::GET, &headers, &key);
    let read_timeout = Duration::from_millis(300);
    for i in 0..4 {
        let resp = send(&key, None, timeouts(read_timeout), &h, empty()).await;
        let body = resp.unwrap().into_body().collect().await.unwrap();
        assert_eq!(&body.to_bytes()[..], b"hi", "response {i}");
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1, "one kept connection");
    let start = tokio::time::Instant::now();
    let Err(e) = send(&key, None, timeouts(read_timeout), &h, empty()).await else {
        panic!("a response 700 ms late came within 300 ms");
    };
    let took = start.elapsed();
    assert!(matches!(e, Error::ReadTimeout), "{e}");
    assert!(
        took >= Duration::from_millis(280) && took < Duration::from_millis(600),
        "{took:?}"
    );
}

#[tokio::test]
async fn connect_errors_read_like_nginx() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let key: Authority = l.local_addr().unwrap().to_string().parse().unwrap();
    drop(l);
    let headers = Fields::default();
    let h = head(&Method::GET, &headers, &key);
    let Err(e) = send(&key, None, timeouts(Duration::from_secs(1)), &h, empty()).await else {
        panic!("connected to a closed port");
    };
    assert!(e.is_connect());
    assert_eq!(
        e.to_string(),
        "connect() failed (111: Connection refused) while connecting to upstream"
    );
}

#[tokio::test]
async fn the_request_head_is_rewritten_and_bodies_reframed() {
    let up = upstream(vec![answer(&[HI]), answer(&[HI])]).await;
    let mut headers = HeaderMap::new();
    for (n, v) in [
        ("host", "client.example"),
        ("x-forwarded-for", "1.2.3.4"),
        ("x-forwarded-for", "5.6.7.8"),
        ("connection", "keep-alive, x-drop"),
        ("x-drop", "secret"),
        ("keep-alive", "timeout=5"),
        ("te", "trailers"),
        ("x-keep", "kept"),
        ("transfer-encoding", "chunked"),
    ] {
        headers.append(HeaderName::from_static(n), HeaderValue::from_static(v));
    }
    // A chunked request whose body is whole (read before it is sent, as
    // proxy_request_buffering does) goes with a Content-Length, as nginx
    // sends it.
    post(&up, &headers.clone().into(), b"hello").await;
    let got = String::from_utf8(up.received.lock().clone()).unwrap();
    assert_eq!(
        got,
        format!(
            "POST /t?q=1 HTTP/1.1\r\nhost: {}\r\n\
             x-forwarded-for: 1.2.3.4, 5.6.7.8, 127.0.0.9\r\nx-keep: kept\r\ncontent-length: 5\r\n\r\nhello",
            up.key
        )
    );
    up.received.lock().clear();
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("2"));
    post(&up, &headers.clone().into(), b"ab").await;
    let got = String::from_utf8(up.received.lock().clone()).unwrap();
    assert!(
        got.ends_with("x-forwarded-for: 127.0.0.9\r\ncontent-length: 2\r\n\r\nab"),
        "{got:?}"
    );
}

/// A client cannot take the framing away by naming it in Connection:
/// sluice writes Content-Length itself (request smuggling otherwise).
#[tokio::test]
async fn framing_headers_are_sluices_own() {
    let up = upstream(vec![answer(&[HI])]).await;
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONNECTION,
        HeaderValue::from_static("content-length, host"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("5"));
    headers.insert(header::EXPECT, HeaderValue::from_static("100-continue"));
    post(&up, &headers.clone().into(), b"hello").await;
    let got = String::from_utf8(up.received.lock().clone()).unwrap();
    assert_eq!(
        got,
        format!(
            "POST /t?q=1 HTTP/1.1\r\nhost: {}\r\nx-forwarded-for: 127.0.0.9\r\n\
             content-length: 5\r\n\r\nhello",
            up.key
        )
    );
}

/// An upstream that answers before reading the body (401, 413) is
/// heard, and its connection is not reused.
#[tokio::test]
async fn an_early_answer_during_a_large_upload_is_heard() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let key: Authority = l.local_addr().unwrap().to_string().parse().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf).await;
        s.write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        // Keeps the connection, reads nothing more.
        tokio::time::sleep(Duration::from_secs(10)).await;
    });
    let (headers, body) = big_body(32 << 20);
    let method = Method::POST;
    let h = head(&method, &headers, &key);
    let timeouts = timeouts(Duration::from_secs(2));
    let start = tokio::time::Instant::now();
    let resp = send(&key, None, timeouts, &h, body).await.expect("the 401");
    assert_eq!(resp.status(), 401);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    let body = resp.into_body();
    assert!(
        body.conn.is_none() || !body.keep,
        "a half-sent request's connection is not reused"
    );
}

/// Bytes an upstream sends on an idle kept-alive connection (a 408
/// before closing) are never taken for the next response.
#[tokio::test]
async fn a_pooled_connection_that_spoke_is_not_reused() {
    let up = upstream(vec![
        answer(&[
            HI,
            b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n\r\n",
        ]),
        answer(&[HI]),
    ])
    .await;
    get(&up, Method::GET).await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    let (resp, _) = get(&up, Method::GET).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2);
}

/// A request is sent again at most once, on a new connection, and a
/// POST never.
#[tokio::test]
async fn retries_are_bounded() {
    // Every connection reads a request, then closes without answering.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let key: Authority = l.local_addr().unwrap().to_string().parse().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                // The first request on each connection is answered (to
                // get the connection pooled), later ones are not.
                if matches!(s.read(&mut buf).await, Ok(n) if n > 0) {
                    seen.fetch_add(1, Ordering::SeqCst);
                    let _ = s.write_all(HI).await;
                }
                if matches!(s.read(&mut buf).await, Ok(n) if n > 0) {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    let headers = Fields::default();
    let timeouts = timeouts(Duration::from_secs(1));
    // Pool several connections: concurrent requests.
    let pool = |m: Method| {
        let key = key.clone();
        let headers = headers.clone();
        async move {
            let h = head(&m, &headers, &key);
            let r = send(&key, None, timeouts, &h, empty()).await.unwrap();
            r.into_body().collect().await.unwrap();
        }
    };
    tokio::join!(pool(Method::GET), pool(Method::GET), pool(Method::GET));
    let mut before = requests.load(Ordering::SeqCst);
    assert_eq!(before, 3, "three connections pooled");
    // A POST meets a connection the upstream drops: not sent again.
    let h = head(&Method::POST, &headers, &key);
    assert!(send(&key, None, timeouts, &h, empty()).await.is_err());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(requests.load(Ordering::SeqCst) - before, 1);
    before += 1;
    // A GET: once on a pooled connection (dropped), once more on a new
    // one (answered) — not once per pooled connection.
    let h = head(&Method::GET, &headers, &key);
    assert!(send(&key, None, timeouts, &h, empty()).await.is_ok());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(requests.load(Ordering::SeqCst) - before, 2);
}

#[tokio::test]
async fn strict_framing_of_responses() {
    let up = upstream(vec![
        // Bare-LF chunk lines, as nginx accepts.
        answer(&[b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\nabc\n0\n\n"]),
        answer(&[b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\nxx"]),
        answer(&[b"HTTP/1.1 200 OK\r\ncontent-length: +2\r\n\r\nhi"]),
    ])
    .await;
    let (_, body) = get(&up, Method::GET).await.unwrap();
    assert_eq!(&body[..], b"abc");
    let e = get(&up, Method::GET).await.unwrap_err();
    assert!(e.contains("Transfer-Encoding"), "{e}");
    let e = get(&up, Method::GET).await.unwrap_err();
    assert!(e.contains("Content-Length"), "{e}");
}

/// A body that yields `pieces`, each after `pause`.
struct Slow {
    pieces: Vec<&'static [u8]>,
    pause: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Slow {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.pieces.is_empty() {
            return Poll::Ready(None);
        }
        let pause = self.pause;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)));
        ready!(timer.as_mut().poll(cx));
        self.timer = None;
        let piece = self.pieces.remove(0);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(piece)))))
    }
}

/// proxy_read_timeout waits for the response once the request is sent:
/// a slow upload longer than it is not a 504 (nginx: client_body_timeout
/// bounds each pause instead).
#[tokio::test]
async fn a_slow_upload_is_not_a_read_timeout() {
    // Answers once the whole chunked body is in.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let key: Authority = l.local_addr().unwrap().to_string().parse().unwrap();
    let got = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = got.clone();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        while !seen.lock().ends_with(b"0\r\n\r\n") {
            match s.read(&mut buf).await {
                Ok(n @ 1..) => seen.lock().extend_from_slice(&buf[..n]),
                _ => return,
            }
        }
        s.write_all(HI).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let mut headers = HeaderMap::new();
    headers.insert(
        header::TRANSFER_ENCODING,
        HeaderValue::from_static("chunked"),
    );
    let method = Method::POST;
    let headers = Fields::from(headers);
    let h = head(&method, &headers, &key);
    let body = Slow {
        pieces: vec![b"aa", b"bb", b"cc", b"dd", b"ee"],
        pause: Duration::from_millis(150),
        timer: None,
    };
    let timeouts = timeouts(Duration::from_millis(300));
    let start = tokio::time::Instant::now();
    let resp = send(&key, None, timeouts, &h, body)
        .await
        .expect("answered");
    assert_eq!(resp.status(), 200);
    assert!(
        start.elapsed() >= Duration::from_millis(700),
        "{:?}",
        start.elapsed()
    );
    let got = String::from_utf8(got.lock().clone()).unwrap();
    assert!(got.ends_with("2\r\nee\r\n0\r\n\r\n"), "{got:?}");
}

/// proxy_send_timeout bounds each wait for the upstream to take more of
/// the request, not the whole transfer: a slow, steady reader is served
/// even when the upload takes many times the timeout.
#[tokio::test]
async fn a_slow_steady_upstream_is_not_a_send_timeout() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let key: Authority = l.local_addr().unwrap().to_string().parse().unwrap();
    let size = 12 << 20;
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0usize;
        // At most 256 KB every 10 ms: the body takes about half a second
        // (and the kernel wakes a blocked writer well within 200 ms).
        while got < size {
            match s.read(&mut buf).await {
                Ok(n @ 1..) => got += n,
                _ => return,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        s.write_all(HI).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let (headers, body) = big_body(size);
    let method = Method::POST;
    let h = head(&method, &headers, &key);
    let timeouts = UpstreamTimeouts {
        proxy_send: Duration::from_millis(200),
        ..timeouts(Duration::from_secs(60))
    };
    let start = tokio::time::Instant::now();
    let resp = send(&key, None, timeouts, &h, body)
        .await
        .expect("answered");
    assert_eq!(resp.status(), 200);
    assert!(
        start.elapsed() > Duration::from_millis(400),
        "the upload must outlast proxy_send_timeout for this test to mean anything: {:?}",
        start.elapsed()
    );
}
