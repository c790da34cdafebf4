//! A client's RST_STREAM, side by side with nginx 1.22: the stream's request is let go at once,
//! whatever it was doing, and so is its `limit_conn` count, before the connection's next stream
//! is judged. nginx-tests' h2_limit_conn.t "RST_STREAM 1/2" (a stream whose answer a one-byte
//! window holds up is reset, then another is opened), then the same while the request waits for
//! its upstream's head and while its body streams: the upstream sees its connection closed, and
//! the access log has what nginx writes (499 before the answer's head, its status after).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::NginxH2;
use super::raw::{self, Raw};
use crate::support::{Sluice, eventually, timing};

/// An HTTP/1.1 upstream that answers by path: `/head` never (the request waits for the head),
/// `/body` a chunked head and one chunk (`first`), then nothing (the body waits); any other
/// `ok`, keeping the connection. It notes when a proxy closes a held request's connection.
struct Held {
    addr: SocketAddr,
    /// `(path, when)` for each held request whose connection the proxy closed.
    closed: Arc<Mutex<Vec<(String, Instant)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Held {
    fn start() -> Held {
        let listener = crate::support::local_listener("held upstream");
        let addr = listener.local_addr().unwrap();
        let closed = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(Held::accept(listener, closed.clone()));
        Held { addr, closed, task }
    }

    async fn accept(listener: TcpListener, closed: Arc<Mutex<Vec<(String, Instant)>>>) {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                Ok((tcp, _)) = listener.accept() => {
                    conns.spawn(Held::serve(tcp, closed.clone()));
                }
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    }

    async fn serve(mut tcp: TcpStream, closed: Arc<Mutex<Vec<(String, Instant)>>>) {
        let mut buf = Vec::new();
        loop {
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                let mut chunk = [0u8; 4096];
                match tcp.read(&mut chunk).await {
                    Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                    _ => return,
                }
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let path = head.split(' ').nth(1).unwrap_or("").to_owned();
            let answer: &[u8] = match path.as_str() {
                "/head" => b"",
                "/body" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n",
                _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            };
            if tcp.write_all(answer).await.is_err() {
                return;
            }
            if path == "/head" || path == "/body" {
                // Held until the proxy lets the request go.
                let mut rest = [0u8; 4096];
                while matches!(tcp.read(&mut rest).await, Ok(n) if n > 0) {}
                closed.lock().unwrap().push((path, Instant::now()));
                return;
            }
        }
    }

    /// When the proxy closed the connection of its held request to `path`.
    fn closed_at(&self, path: &str) -> Option<Instant> {
        let closed = self.closed.lock().unwrap();
        closed.iter().find(|(p, _)| p == path).map(|(_, at)| *at)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// nginx and sluice with `limit_conn` 1 per client address on every path, in front of their
/// held upstreams, each logging its access lines.
fn limited(nginx_upstream: &Held, sluice_upstream: &Held) -> (NginxH2, Sluice) {
    let nginx = NginxH2::start(
        "  limit_conn_zone $binary_remote_addr zone=addr:1m;",
        &format!(
            "    location / {{ limit_conn addr 1; proxy_pass http://{}; }}",
            nginx_upstream.addr
        ),
    );
    let sluice = Sluice::start(&format!(
        "access_log = \"stdout\"\n\
         [conn_zones.addr]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\n[[servers]]\n\
         http2 = true\nproxy_pass = \"http://{}\"\nlimit_conn = {{ zone = \"addr\", conn = 1 }}\n",
        sluice_upstream.addr
    ));
    (nginx, sluice)
}

/// A GET of `path` on `stream`, its head ending the request.
fn get(addr: SocketAddr, stream: u32, path: &str) -> Vec<u8> {
    let block = raw::request_block("GET", path, &addr.to_string(), &[]);
    raw::frame(
        raw::HEADERS,
        raw::END_HEADERS | raw::END_STREAM,
        stream,
        &block,
    )
}

fn rst_stream(stream: u32, code: u32) -> Vec<u8> {
    raw::frame(raw::RST_STREAM, 0, stream, &code.to_be_bytes())
}

/// Reads until `stream`'s HEADERS and, if `data`, one DATA frame of it: whether the head was
/// `:status 200`.
async fn head_of(c: &mut Raw, stream: u32, data: bool) -> bool {
    let mut head = None;
    loop {
        let f = c
            .next(Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("stream {stream}'s answer"));
        if f.stream == stream && f.kind == raw::HEADERS {
            head = Some(f.is_200());
        }
        let seen_data = !data || (f.stream == stream && f.kind == raw::DATA);
        if let Some(h) = head.filter(|_| seen_data) {
            return h;
        }
    }
}

/// What one side answered: the first stream's head (if it had one before the reset), the next
/// stream's, and when the reset went.
type Seen = (Option<bool>, bool, Instant);

/// Stream 1 to `path` (on a connection whose SETTINGS are `settings`), reset with `code` once
/// `wait_head` (its head and a DATA frame came) or after 300 ms; stream 3 to `/next` in the
/// same write as the reset (so it is judged right after it).
async fn reset_then_next(
    addr: SocketAddr,
    (path, settings, code): (&str, &[(u16, u32)], u32),
    wait_head: bool,
) -> Seen {
    let mut c = Raw::connect_with(addr, settings).await;
    c.send(&get(addr, 1, path)).await;
    let first = if wait_head {
        Some(head_of(&mut c, 1, true).await)
    } else {
        tokio::time::sleep(Duration::from_millis(300)).await;
        None
    };
    let mut both = rst_stream(1, code);
    both.extend(get(addr, 3, "/next"));
    let reset_at = Instant::now();
    c.send(&both).await;
    (first, head_of(&mut c, 3, false).await, reset_at)
}

/// The access lines of both sides, once each has `n`: nginx's, sluice's.
async fn access_lines(nginx: &NginxH2, sluice: &Sluice, n: usize) -> (String, String) {
    let enough = |log: String| (log.lines().count() >= n).then_some(log);
    let limit = Duration::from_secs(5);
    let n_log = eventually("nginx's access lines", limit, async || {
        enough(nginx.nginx.access_log())
    })
    .await;
    let s_log = eventually("sluice's access lines", limit, async || {
        enough(sluice.stdout())
    })
    .await;
    (n_log, s_log)
}

/// `"GET PATH HTTP/2.0" STATUS BYTES` of each access line, in order (`with_bytes`: else
/// without BYTES).
fn requests(log: &str, with_bytes: bool) -> Vec<String> {
    let n = if with_bytes { 5 } else { 4 };
    log.lines()
        .filter_map(|l| {
            let rest = &l[l.find("\"GET ")?..];
            Some(rest.split(' ').take(n).collect::<Vec<_>>().join(" "))
        })
        .collect()
}

/// nginx-tests' h2_limit_conn.t, "RST_STREAM 1" and "RST_STREAM 2": a client whose window is one
/// byte gets its first stream's head and one byte of body, resets it (RST_STREAM
/// STREAM_CLOSED), and its next stream on the connection is served 200, on nginx and on sluice:
/// the reset stream's count went with it.
#[tokio::test]
async fn h2_limit_conn_t_a_reset_stream_lets_its_count_go() {
    let _timing = timing();
    let (nu, su) = (Held::start(), Held::start());
    let (nginx, sluice) = limited(&nu, &su);
    let case = ("/t.html", &[(0x4u16, 1u32)][..], 5);
    let (n, s) = tokio::join!(
        reset_then_next(nginx.addr(), case, true),
        reset_then_next(sluice.addr(), case, true),
    );
    assert_eq!(
        (n.0, n.1),
        (Some(true), true),
        "nginx: RST_STREAM 1, RST_STREAM 2"
    );
    assert_eq!((s.0, s.1), (n.0, n.1), "sluice as nginx");
    let (n_log, s_log) = access_lines(&nginx, &sluice, 2).await;
    // Statuses only: nginx's $body_bytes_sent is what it wrote (1 byte each, the window's),
    // sluice's what hyper took of the upstream's body (2).
    assert_eq!(
        requests(&s_log, false),
        requests(&n_log, false),
        "access lines\nnginx:\n{n_log}\nsluice:\n{s_log}"
    );
}

/// A stream reset (CANCEL) while its request waits for the upstream's head: the next stream is
/// served (the count went at once), the upstream sees its connection closed at once, and the
/// access log says 499, as nginx's.
#[tokio::test]
async fn a_stream_reset_while_waiting_for_the_upstream_is_cancelled() {
    let _timing = timing();
    let (nu, su) = (Held::start(), Held::start());
    let (nginx, sluice) = limited(&nu, &su);
    let case = ("/head", &[][..], 8);
    let (n, s) = tokio::join!(
        reset_then_next(nginx.addr(), case, false),
        reset_then_next(sluice.addr(), case, false),
    );
    assert_eq!((n.0, n.1), (None, true), "nginx serves the next stream");
    assert_eq!((s.0, s.1), (n.0, n.1), "sluice as nginx");
    for (side, up, reset_at) in [("nginx", &nu, n.2), ("sluice", &su, s.2)] {
        let at = eventually(
            &format!("{side}'s upstream connection closed"),
            Duration::from_secs(2),
            async || up.closed_at("/head"),
        )
        .await;
        let took = at.saturating_duration_since(reset_at);
        assert!(
            took < Duration::from_millis(500),
            "{side} closed it {took:?} after the reset"
        );
    }
    let (n_log, s_log) = access_lines(&nginx, &sluice, 2).await;
    assert_eq!(
        requests(&n_log, true),
        [
            "\"GET /head HTTP/2.0\" 499 0",
            "\"GET /next HTTP/2.0\" 200 2"
        ],
        "nginx:\n{n_log}"
    );
    assert_eq!(
        requests(&s_log, true),
        requests(&n_log, true),
        "sluice:\n{s_log}"
    );
}

/// A stream reset (CANCEL) while its body streams (the upstream sent its head and a chunk, then
/// holds the rest): as above, the next stream is served, the upstream connection is closed (not
/// kept for another request: it is mid-response), and the access line is nginx's.
#[tokio::test]
async fn a_stream_reset_while_its_body_streams_is_cancelled() {
    let _timing = timing();
    let (nu, su) = (Held::start(), Held::start());
    let (nginx, sluice) = limited(&nu, &su);
    let case = ("/body", &[][..], 8);
    let (n, s) = tokio::join!(
        reset_then_next(nginx.addr(), case, true),
        reset_then_next(sluice.addr(), case, true),
    );
    assert_eq!(
        (n.0, n.1),
        (Some(true), true),
        "nginx serves the next stream"
    );
    assert_eq!((s.0, s.1), (n.0, n.1), "sluice as nginx");
    for (side, up, reset_at) in [("nginx", &nu, n.2), ("sluice", &su, s.2)] {
        let at = eventually(
            &format!("{side}'s upstream connection closed"),
            Duration::from_secs(2),
            async || up.closed_at("/body"),
        )
        .await;
        let took = at.saturating_duration_since(reset_at);
        assert!(
            took < Duration::from_millis(500),
            "{side} closed it {took:?} after the reset"
        );
    }
    let (n_log, s_log) = access_lines(&nginx, &sluice, 2).await;
    assert_eq!(
        requests(&n_log, true),
        [
            "\"GET /body HTTP/2.0\" 200 5",
            "\"GET /next HTTP/2.0\" 200 2"
        ],
        "nginx:\n{n_log}"
    );
    assert_eq!(
        requests(&s_log, true),
        requests(&n_log, true),
        "sluice:\n{s_log}"
    );
}
