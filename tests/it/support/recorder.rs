//! A recording upstream: every byte a proxy sends it, per connection, for the conformance suite.
//!
//! It listens on several ports, one per *slot*: the suite runs one case at a time per slot, so
//! every upstream connection on a slot's port during a case belongs to that case, and cases run
//! concurrently on different slots without tagging the requests (a tag would change the bytes
//! under test). Each request it reads (under the strict [`Reading::TeFirst`]) is answered with a
//! small fixed `200` that carries `X-Recorder: hit`, so a client can tell an upstream answer from
//! a proxy's own.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::readings::{Reading, split};

/// The answer to every request read.
pub const ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Recorder: hit\r\nConnection: keep-alive\r\n\r\nok\n";
const ANSWER_CLOSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Recorder: hit\r\nConnection: close\r\n\r\nok\n";

/// Other answers, chosen by a request's `X-Answer: N` (for the tests of how responses are
/// written: every framing, status and field shape a client can be sent); `true`: the recorder
/// closes after it. A `HEAD` request gets the head alone.
pub const MENU: &[(&[u8], bool)] = &[
    (ANSWER, false),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Recorder: hit\r\n\r\n3\r\nabc\r\n5;x=1\r\nhello\r\n0\r\n\r\n", false),
    (b"HTTP/1.1 204 No Content\r\nX-Recorder: hit\r\n\r\n", false),
    (b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nX-Recorder: hit\r\n\r\n", false),
    (b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 9\r\nX-Recorder: hit\r\n\r\nnot here\n", false),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\nX-Recorder: hit\r\n\r\n2\r\nhi\r\n0\r\nX-T: done\r\n\r\n", false),
    (b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nCache-Control: no-cache\r\nSet-Cookie: b=2\r\nX-Recorder: hit\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\nX-Recorder: hit\r\n\r\nok\n", true),
    (b"HTTP/1.1 200 OK\r\nX-Recorder: hit\r\nConnection: close\r\n\r\nuntil the end", true),
    (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nContent-Length: 5\r\nX-Recorder: hit\r\n\r\nbusy\n", false),
];

/// What one upstream connection received, and how much of it [`Recorder::take`] has handed out.
#[derive(Default)]
struct Conn {
    bytes: Vec<u8>,
    taken: usize,
    closed: bool,
}

type Conns = Arc<Mutex<Vec<Arc<Mutex<Conn>>>>>;

pub struct Recorder {
    addrs: Vec<SocketAddr>,
    slots: Vec<Conns>,
    tasks: Vec<JoinHandle<()>>,
}

impl Recorder {
    /// Binds `slots` ports on 127.0.0.1. Must be called inside a tokio runtime.
    pub fn start(slots: usize) -> Recorder {
        let mut r = Recorder {
            addrs: Vec::new(),
            slots: Vec::new(),
            tasks: Vec::new(),
        };
        for _ in 0..slots {
            let listener = super::ports::local_listener("recorder");
            r.addrs
                .push(listener.local_addr().expect("recorder address"));
            let conns: Conns = Arc::default();
            r.slots.push(Arc::clone(&conns));
            r.tasks.push(tokio::spawn(async move {
                let mut tasks = JoinSet::new();
                loop {
                    tokio::select! {
                        accepted = listener.accept() => {
                            if let Ok((stream, _)) = accepted {
                                let rec: Arc<Mutex<Conn>> = Arc::default();
                                conns.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::clone(&rec));
                                tasks.spawn(serve(stream, rec));
                            }
                        }
                        Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                    }
                }
            }));
        }
        r
    }

    pub fn addr(&self, slot: usize) -> SocketAddr {
        self.addrs[slot]
    }

    /// The bytes received on each connection to `slot` since the last take, in accept order,
    /// for the connections that received any. A proxy that keeps upstream connections alive
    /// (sluice does) sends a later case's requests on an earlier case's connection: what counts
    /// is when the bytes arrived, not when the connection was opened.
    pub fn take(&self, slot: usize) -> Vec<Vec<u8>> {
        let mut conns = self.slots[slot].lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        conns.retain(|c| {
            let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
            if c.taken < c.bytes.len() {
                out.push(c.bytes[c.taken..].to_vec());
                c.taken = c.bytes.len();
            }
            !c.closed
        });
        out
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn serve(stream: TcpStream, rec: Arc<Mutex<Conn>>) {
    serve_conn(stream, &rec).await;
    rec.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
}

async fn serve_conn(mut stream: TcpStream, rec: &Mutex<Conn>) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut answered = 0;
    let mut closing = false;
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        rec.lock()
            .unwrap_or_else(|e| e.into_inner())
            .bytes
            .extend_from_slice(&chunk[..n]);
        if closing {
            // Keep recording what the proxy still sends after our Connection: close.
            continue;
        }
        let s = split(&buf, Reading::TeFirst);
        let complete = if s.complete {
            s.count
        } else {
            s.count.saturating_sub(1)
        };
        while answered < complete {
            let start = s.starts[answered];
            let head = &buf[start..];
            let head = &head[..super::readings::find(head, b"\r\n\r\n").map_or(head.len(), |i| i)];
            let head = String::from_utf8_lossy(head).to_ascii_lowercase();
            let http10 = head.lines().next().is_some_and(|l| l.ends_with("http/1.0"));
            let close = head.contains("\nconnection: close")
                || (http10 && !head.contains("\nconnection: keep-alive"));
            answered += 1;
            let picked = head
                .split("\nx-answer: ")
                .nth(1)
                .and_then(|v| v.split('\r').next()?.trim().parse::<usize>().ok())
                .and_then(|n| MENU.get(n));
            if let Some(&(answer, closes)) = picked {
                let answer = if head.starts_with("head ") {
                    let end =
                        super::readings::find(answer, b"\r\n\r\n").map_or(answer.len(), |i| i + 4);
                    &answer[..end]
                } else {
                    answer
                };
                if stream.write_all(answer).await.is_err() {
                    return;
                }
                if close || closes {
                    let _ = stream.shutdown().await;
                    closing = true;
                    break;
                }
                continue;
            }
            let answer = if close { ANSWER_CLOSE } else { ANSWER };
            if stream.write_all(answer).await.is_err() {
                return;
            }
            if close {
                let _ = stream.shutdown().await;
                closing = true;
                break;
            }
        }
    }
}
