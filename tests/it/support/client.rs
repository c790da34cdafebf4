//! The one HTTP/1.1 client of the tests: one connection per request, bound to a chosen source
//! address (127.0.0.2, 127.0.0.3, … are different clients to a limiter keyed on the address),
//! `Connection: close`, the answer read until the server closes, parsed into a [`Reply`].
//! [`request`] and [`get`] send one request, [`burst`] and [`fire`] many at once, [`exchange`]
//! sends bytes as given (a body, a malformed head).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{Instant, timeout};

use super::http1::{self, Kind};

/// How long a burst's connections stay open, idle, before the requests are written: long enough
/// for the server to have accepted all of them, so the requests arrive together (as in the
/// article's 10 concurrent curls) and nginx sees them in one event-loop iteration.
const SETTLE: Duration = Duration::from_millis(50);

/// The longest a request may take; longer is a test failure, not a hang.
const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// One request to send.
#[derive(Clone, Debug)]
pub struct Request {
    /// Source address the client socket binds (port 0).
    pub source: IpAddr,
    pub method: String,
    /// Request target, e.g. `/burst?i=3`.
    pub path: String,
    /// Extra header lines. `Host` and `Connection: close` are added unless given here.
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn get(source: IpAddr, path: &str) -> Request {
        Request {
            source,
            method: "GET".to_owned(),
            path: path.to_owned(),
            headers: Vec::new(),
        }
    }

    fn encode(&self, addr: SocketAddr) -> Vec<u8> {
        let has = |name: &str| {
            self.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.path);
        if !has("host") {
            head.push_str(&format!("Host: {addr}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !has("connection") {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        head.into_bytes()
    }
}

/// What came back for one request.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The status code, or **0 when the connection was closed without any response** (nginx's
    /// `444`).
    pub status: u16,
    pub reason: String,
    /// Header fields in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
    /// From writing the request to the end of the response (the server closing the connection).
    pub elapsed: Duration,
    pub source: IpAddr,
    pub path: String,
}

impl Reply {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn ms(&self) -> u64 {
        u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX)
    }

    /// Parses `bytes`, an answer received on a connection of the test's own.
    pub fn parse(bytes: &[u8]) -> Result<Reply, String> {
        let (status, reason, headers, body) = parse(bytes, false)?;
        Ok(Reply {
            status,
            reason,
            headers,
            body,
            elapsed: Duration::ZERO,
            source: super::client(1),
            path: String::new(),
        })
    }

    /// True when the connection was closed without a response.
    pub fn no_response(&self) -> bool {
        self.status == 0
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = if self.status == 0 {
            "closed".to_owned()
        } else {
            self.status.to_string()
        };
        write!(
            f,
            "{status} {:>5} ms  {} {}",
            self.ms(),
            self.source,
            self.path
        )
    }
}

/// One request on its own connection from `source_ip`.
pub async fn request(
    addr: SocketAddr,
    source_ip: IpAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let req = Request {
        source: source_ip,
        method: method.to_owned(),
        path: path.to_owned(),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
    };
    let mut stream = connect(addr, source_ip).await;
    let start = Instant::now();
    write(&mut stream, addr, &req).await;
    read_reply(stream, addr, req, start).await
}

/// `GET path` from 127.0.0.1, the address a plain `connect` comes from.
pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, super::client(1), "GET", path, &[]).await
}

/// `raw` (one whole request, as bytes) from `source` on a new connection; the answer read until
/// the server closes.
pub async fn exchange(addr: SocketAddr, source: IpAddr, raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw);
    let mut line = text.lines().next().unwrap_or_default().split(' ');
    let req = Request {
        source,
        method: line.next().unwrap_or_default().to_owned(),
        path: line.next().unwrap_or_default().to_owned(),
        headers: Vec::new(),
    };
    let mut stream = connect(addr, source).await;
    let start = Instant::now();
    stream
        .write_all(raw)
        .await
        .unwrap_or_else(|e| panic!("cannot send {} {} to {addr}: {e}", req.method, req.path));
    read_reply(stream, addr, req, start).await
}

/// `n` simultaneous `GET path` from `source_ip`, sorted by latency.
pub async fn burst(addr: SocketAddr, source_ip: IpAddr, path: &str, n: usize) -> Vec<Reply> {
    fire(addr, vec![Request::get(source_ip, path); n]).await
}

/// Sends all `requests` at once: opens every connection first, lets the server accept them, then
/// writes all requests back to back. Returns the replies sorted by latency.
pub async fn fire(addr: SocketAddr, requests: Vec<Request>) -> Vec<Reply> {
    let mut streams = Vec::with_capacity(requests.len());
    for req in &requests {
        streams.push(connect(addr, req.source).await);
    }
    tokio::time::sleep(SETTLE).await;
    let mut tasks = Vec::with_capacity(requests.len());
    for (mut stream, req) in streams.into_iter().zip(requests) {
        let start = Instant::now();
        write(&mut stream, addr, &req).await;
        tasks.push(tokio::spawn(read_reply(stream, addr, req, start)));
    }
    let mut replies = Vec::with_capacity(tasks.len());
    for task in tasks {
        match task.await {
            Ok(reply) => replies.push(reply),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("request task failed: {e}"),
        }
    }
    replies.sort_by_key(|r| (r.elapsed, r.status));
    replies
}

/// A connection to `addr` from `source` (port 0), for a test that writes on it itself (a
/// keep-alive connection, a client that leaves early). `TCP_NODELAY` is on.
pub async fn connect(addr: SocketAddr, source: IpAddr) -> TcpStream {
    let socket = match source {
        IpAddr::V4(_) => TcpSocket::new_v4(),
        IpAddr::V6(_) => TcpSocket::new_v6(),
    }
    .expect("create a TCP socket");
    socket.bind(SocketAddr::new(source, 0)).unwrap_or_else(|e| {
        panic!(
            "cannot bind a client socket to {source}:0: {e} (on Linux all of 127.0.0.0/8 \
                 is local; elsewhere add loopback aliases)"
        )
    });
    let stream = timeout(Duration::from_secs(10), socket.connect(addr))
        .await
        .unwrap_or_else(|_| panic!("connecting from {source} to {addr} took over 10 s"))
        .unwrap_or_else(|e| panic!("cannot connect from {source} to {addr}: {e}"));
    stream.set_nodelay(true).expect("TCP_NODELAY");
    stream
}

async fn write(stream: &mut TcpStream, addr: SocketAddr, req: &Request) {
    stream
        .write_all(&req.encode(addr))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot send {} {} to {addr} from {}: {e}",
                req.method, req.path, req.source
            )
        });
}

async fn read_reply(
    mut stream: TcpStream,
    addr: SocketAddr,
    req: Request,
    start: Instant,
) -> Reply {
    let mut buf = Vec::new();
    let read = timeout(ANSWER_LIMIT, stream.read_to_end(&mut buf)).await;
    let elapsed = start.elapsed();
    let what = format!("{} {} to {addr} from {}", req.method, req.path, req.source);
    match read {
        Err(_) => panic!(
            "no complete answer to {what} within {ANSWER_LIMIT:?}; received so far: {:?}",
            String::from_utf8_lossy(&buf)
        ),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Ok(Err(e)) => panic!("reading the answer to {what}: {e}"),
        Ok(Ok(_)) => {}
    }
    let mut reply = Reply {
        status: 0,
        reason: String::new(),
        headers: Vec::new(),
        body: Vec::new(),
        elapsed,
        source: req.source,
        path: req.path.clone(),
    };
    if buf.is_empty() {
        return reply;
    }
    let parsed = parse(&buf, req.method.eq_ignore_ascii_case("HEAD")).unwrap_or_else(|e| {
        panic!(
            "malformed answer to {what}: {e}\n--- received ---\n{}",
            String::from_utf8_lossy(&buf)
        )
    });
    (reply.status, reply.reason, reply.headers, reply.body) = parsed;
    reply
}

type Parsed = (u16, String, Vec<(String, String)>, Vec<u8>);

/// One whole answer, up to the end of the connection ([`super::http1::parse`]).
fn parse(buf: &[u8], head_only: bool) -> Result<Parsed, String> {
    let kind = if head_only {
        Kind::ResponseToHead
    } else {
        Kind::Response
    };
    let (m, _) = http1::parse(buf, kind, true)?.expect("complete at the end of the data");
    Ok((m.status, m.reason, m.headers, m.body))
}
