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

fn parse(buf: &[u8], head_only: bool) -> Result<Parsed, String> {
    let end = find(buf, b"\r\n\r\n").ok_or("no end of header (CRLF CRLF)")?;
    let head = std::str::from_utf8(&buf[..end]).map_err(|e| format!("header is not UTF-8: {e}"))?;
    let rest = &buf[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!("bad status line {status_line:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let reason = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("bad header line {line:?}"))?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _): &&(String, String)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let body = if head_only || status == 204 || status == 304 || (100..200).contains(&status) {
        Vec::new()
    } else if get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = get("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| format!("bad Content-Length {len:?}"))?;
        if rest.len() < len {
            return Err(format!(
                "body truncated: Content-Length {len}, received {}",
                rest.len()
            ));
        }
        rest[..len].to_vec()
    } else {
        rest.to_vec()
    };
    Ok((status, reason, headers, body))
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let eol = find(data, b"\r\n").ok_or("chunk size line without CRLF")?;
        let line = std::str::from_utf8(&data[..eol]).map_err(|_| "chunk size is not UTF-8")?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size_text, 16).map_err(|_| format!("bad chunk size {line:?}"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(body);
        }
        if data.len() < size + 2 || &data[size..size + 2] != b"\r\n" {
            return Err(format!("chunk of {size} bytes truncated"));
        }
        body.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_chunked_and_close_delimited_bodies() {
        let (status, reason, headers, body) = parse(
            b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 3\r\n\r\nok\nxx",
            false,
        )
        .unwrap();
        assert_eq!(
            (status, reason.as_str(), body.as_slice()),
            (429, "Too Many Requests", &b"ok\n"[..])
        );
        assert_eq!(headers[0], ("Retry-After".to_owned(), "1".to_owned()));

        let (_, _, _, body) = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n2;x=y\r\nab\r\n0\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(body, b"ok\nab");

        let (_, _, _, body) = parse(b"HTTP/1.0 200 OK\r\n\r\nuntil close", false).unwrap();
        assert_eq!(body, b"until close");

        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", false).is_err());
        assert!(parse(b"garbage\r\n\r\n", false).is_err());
    }
}
