//! The one HTTP/1.x reader of the tests, for both ends of a connection: a client's responses
//! (Content-Length, chunked, close-delimited, 1xx, no body after HEAD or with 204 and 304,
//! several pipelined on one connection) and an upstream's requests. [`parse`] reads bytes in
//! hand; [`Reader`] reads them off a connection and keeps what follows a message for the next.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::time::timeout;

/// How long a [`Reader`] waits for what a client test asks of it, unless told otherwise.
pub const READ_LIMIT: Duration = Duration::from_secs(10);

/// What is being read: it decides where a body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A response to any request but HEAD.
    Response,
    /// A response to HEAD: no body, whatever its fields say.
    ResponseToHead,
    /// A request: a body only by Content-Length or chunked.
    Request,
}

/// One request or response.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// The head as received, without the empty line that ends it.
    pub head: String,
    /// The status code; 0 for a request.
    pub status: u16,
    /// The reason phrase; empty for a request.
    pub reason: String,
    /// Header fields in order, names as sent, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Message {
    /// The first field with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The request line or the status line.
    pub fn start_line(&self) -> &str {
        self.head.split("\r\n").next().unwrap_or_default()
    }

    /// A request's target (its second word).
    pub fn target(&self) -> &str {
        self.start_line().split(' ').nth(1).unwrap_or_default()
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The connection ends after this message: `Connection: close`, or HTTP/1.0 without
    /// `Connection: keep-alive`.
    pub fn closes(&self) -> bool {
        let connection = self.header("connection").unwrap_or_default();
        let connection = connection.to_ascii_lowercase();
        let line = self.start_line();
        let http10 = line.ends_with("HTTP/1.0") || line.starts_with("HTTP/1.0");
        connection.contains("close") || (http10 && !connection.contains("keep-alive"))
    }
}

impl std::fmt::Display for Message {
    /// The head as received.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.head)
    }
}

/// One message at the start of `buf`: `Ok(Some((message, bytes it took)))`, `Ok(None)` when more
/// bytes could complete it, `Err` when it is malformed. `eof`: no byte will follow `buf`, so a
/// response's body without a length ends with it, and a message cut short is an error.
pub fn parse(buf: &[u8], kind: Kind, eof: bool) -> Result<Option<(Message, usize)>, String> {
    let Some((mut m, start)) = parse_head(buf, kind)? else {
        return if eof {
            Err("no end of header (CRLF CRLF)".to_owned())
        } else {
            Ok(None)
        };
    };
    let rest = &buf[start..];
    let chunked = m
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = match m.header("content-length") {
        Some(v) => Some(
            v.parse::<usize>()
                .map_err(|_| format!("bad Content-Length {v:?}"))?,
        ),
        None => None,
    };
    let bodiless = |s: u16| (100..200).contains(&s) || s == 204 || s == 304;
    let used = if kind == Kind::ResponseToHead || (kind == Kind::Response && bodiless(m.status)) {
        0
    } else if chunked {
        match dechunk(rest)? {
            Some((body, used)) => {
                m.body = body;
                used
            }
            None if eof => return Err("chunked body truncated".to_owned()),
            None => return Ok(None),
        }
    } else if let Some(len) = length {
        if rest.len() < len {
            return if eof {
                Err(format!(
                    "body truncated: Content-Length {len}, received {}",
                    rest.len()
                ))
            } else {
                Ok(None)
            };
        }
        m.body = rest[..len].to_vec();
        len
    } else if kind == Kind::Response {
        if !eof {
            return Ok(None);
        }
        m.body = rest.to_vec();
        rest.len()
    } else {
        0
    };
    Ok(Some((m, start + used)))
}

/// The head at the start of `buf` (its body not read) and where the body starts; `Ok(None)`
/// before its empty line.
pub fn parse_head(buf: &[u8], kind: Kind) -> Result<Option<(Message, usize)>, String> {
    let Some(end) = find(buf, b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = if kind == Kind::Request {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        std::str::from_utf8(&buf[..end])
            .map_err(|e| format!("header is not UTF-8: {e}"))?
            .to_owned()
    };
    let mut m = Message::default();
    let mut lines = head.split("\r\n");
    let start_line = lines.next().unwrap_or_default();
    if kind != Kind::Request {
        let mut parts = start_line.splitn(3, ' ');
        let bad = || format!("bad status line {start_line:?}");
        if !parts.next().unwrap_or_default().starts_with("HTTP/1.") {
            return Err(bad());
        }
        m.status = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        m.reason = parts.next().unwrap_or_default().to_owned();
    }
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("bad header line {line:?}"))?;
        m.headers
            .push((name.trim().to_owned(), value.trim().to_owned()));
    }
    m.head = head;
    Ok(Some((m, end + 4)))
}

/// A chunked body at the start of `data`, trailers skipped: the body and the bytes it took;
/// `Ok(None)` when cut short.
fn dechunk(data: &[u8]) -> Result<Option<(Vec<u8>, usize)>, String> {
    let mut body = Vec::new();
    let mut pos = 0;
    loop {
        let Some(eol) = find(&data[pos..], b"\r\n") else {
            return Ok(None);
        };
        let line =
            std::str::from_utf8(&data[pos..pos + eol]).map_err(|_| "chunk size is not UTF-8")?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size_text, 16).map_err(|_| format!("bad chunk size {line:?}"))?;
        pos += eol + 2;
        if size == 0 {
            // Trailer fields, up to an empty line.
            loop {
                let Some(eol) = find(&data[pos..], b"\r\n") else {
                    return Ok(None);
                };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some((body, pos)));
                }
            }
        }
        if data.len() < pos + size + 2 {
            return Ok(None);
        }
        if &data[pos + size..pos + size + 2] != b"\r\n" {
            return Err(format!("chunk of {size} bytes without its CRLF"));
        }
        body.extend_from_slice(&data[pos..pos + size]);
        pos += size + 2;
    }
}

/// The first `needle` in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A connection read message by message. It reads and writes as the stream it wraps (bytes
/// read ahead of a message come first), so a test writes its requests on it too.
pub struct Reader<S> {
    stream: S,
    buf: Vec<u8>,
    limit: Duration,
}

impl<S: AsyncRead + Unpin> Reader<S> {
    pub fn new(stream: S) -> Reader<S> {
        Reader {
            stream,
            buf: Vec::new(),
            limit: READ_LIMIT,
        }
    }

    /// Waits `limit` instead of [`READ_LIMIT`] before a client read panics.
    pub fn limit(mut self, limit: Duration) -> Reader<S> {
        self.limit = limit;
        self
    }

    /// The next response to a request other than HEAD. Panics when none comes whole within the
    /// limit, or it is malformed.
    pub async fn response(&mut self) -> Message {
        self.expect(Kind::Response).await
    }

    /// The next response, to a HEAD request.
    pub async fn response_to_head(&mut self) -> Message {
        self.expect(Kind::ResponseToHead).await
    }

    /// The next response's head; its body (after a `101`, the tunnel's bytes) is left to read.
    pub async fn head(&mut self) -> Message {
        let limit = self.limit;
        let read = timeout(limit, async {
            loop {
                if let Some((m, start)) = parse_head(&self.buf, Kind::Response)? {
                    self.buf.drain(..start);
                    return Ok(m);
                }
                if self.fill().await? == 0 {
                    return Err("closed before the end of a head".to_owned());
                }
            }
        });
        match read.await {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => panic!("{e}; received {:?}", self.received()),
            Err(_) => panic!(
                "no whole head within {limit:?}; received {:?}",
                self.received()
            ),
        }
    }

    /// The next request, for an upstream: None at the end of the connection, or when the
    /// request is cut short or malformed. Waits as long as it takes.
    pub async fn request(&mut self) -> Option<Message> {
        self.next(Kind::Request).await.ok()
    }

    /// The next `n` bytes. Panics when they do not come within the limit.
    pub async fn read_n(&mut self, n: usize) -> Vec<u8> {
        let limit = self.limit;
        let read = timeout(limit, async {
            while self.buf.len() < n {
                if self.fill().await? == 0 {
                    return Err("closed".to_owned());
                }
            }
            Ok(())
        });
        match read.await {
            Ok(Ok(())) => self.buf.drain(..n).collect(),
            Ok(Err(e)) => panic!("{e} before {n} bytes; received {:?}", self.received()),
            Err(_) => panic!(
                "no {n} bytes within {limit:?}; received {:?}",
                self.received()
            ),
        }
    }

    /// Everything up to the end of the connection. Panics when it does not end within the limit.
    pub async fn read_to_close(&mut self) -> Vec<u8> {
        let limit = self.limit;
        let read = timeout(limit, async {
            while self.fill().await.map_err(|e| e.to_string())? > 0 {}
            Ok::<_, String>(())
        });
        match read.await {
            Ok(Ok(())) => std::mem::take(&mut self.buf),
            Ok(Err(e)) => panic!("{e}; received {:?}", self.received()),
            Err(_) => panic!(
                "no end of file within {limit:?}; received {:?}",
                self.received()
            ),
        }
    }

    /// The bytes read ahead of what was asked for.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// The wrapped stream and the bytes read ahead.
    pub fn into_parts(self) -> (S, Vec<u8>) {
        (self.stream, self.buf)
    }

    async fn expect(&mut self, kind: Kind) -> Message {
        let limit = self.limit;
        match timeout(limit, self.next(kind)).await {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => panic!("{e}; received {:?}", self.received()),
            Err(_) => panic!(
                "no whole response within {limit:?}; received {:?}",
                self.received()
            ),
        }
    }

    async fn next(&mut self, kind: Kind) -> Result<Message, String> {
        let mut eof = false;
        loop {
            if let Some((m, used)) = parse(&self.buf, kind, eof)? {
                self.buf.drain(..used);
                return Ok(m);
            }
            if eof {
                unreachable!("parse answers Some or Err at the end of the data");
            }
            eof = self.fill().await? == 0;
            if eof && self.buf.is_empty() {
                return Err("closed before a message".to_owned());
            }
        }
    }

    /// One read into the buffer: the bytes read, 0 at the end of the connection (or a reset).
    async fn fill(&mut self) -> Result<usize, String> {
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk).await {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(0),
            Err(e) => Err(e.to_string()),
        }
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Reader<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.buf.is_empty() {
            return Pin::new(&mut self.stream).poll_read(cx, out);
        }
        let n = self.buf.len().min(out.remaining());
        out.put_slice(&self.buf[..n]);
        self.buf.drain(..n);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Reader<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8], kind: Kind) -> Result<(Message, usize), String> {
        parse(bytes, kind, true).map(|m| m.expect("complete at the end of the data"))
    }

    #[test]
    fn reads_content_length_chunked_and_close_delimited_bodies() {
        let bytes =
            b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 3\r\n\r\nok\nxx";
        let (m, used) = one(bytes, Kind::Response).unwrap();
        assert_eq!(
            (m.status, m.reason.as_str(), m.body.as_slice(), used),
            (429, "Too Many Requests", &b"ok\n"[..], bytes.len() - 2)
        );
        assert_eq!(m.headers[0], ("Retry-After".to_owned(), "1".to_owned()));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n2;x=y\r\nab\r\n0\r\nT: 1\r\n\r\n";
        let (m, used) = one(chunked, Kind::Response).unwrap();
        assert_eq!((m.body.as_slice(), used), (&b"ok\nab"[..], chunked.len()));
        let (m, _) = one(b"HTTP/1.0 200 OK\r\n\r\nuntil close", Kind::Response).unwrap();
        assert_eq!(m.body, b"until close");
        assert_eq!(
            parse(b"HTTP/1.0 200 OK\r\n\r\nuntil", Kind::Response, false),
            Ok(None)
        );
        assert!(
            one(
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort",
                Kind::Response
            )
            .is_err()
        );
        assert!(one(b"garbage\r\n\r\n", Kind::Response).is_err());
        assert!(one(b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", Kind::Response).is_err());
    }

    #[test]
    fn reads_bodiless_responses_and_pipelined_ones_in_turn() {
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n\
                      HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 404 X\r\n";
        let mut pos = 0;
        let mut statuses = Vec::new();
        while let Some((m, used)) = parse(&bytes[pos..], Kind::Response, false).unwrap() {
            statuses.push((m.status, m.body_text()));
            pos += used;
        }
        let want = [(100, ""), (304, ""), (204, ""), (200, "ok")];
        let want: Vec<_> = want.iter().map(|(s, b)| (*s, (*b).to_owned())).collect();
        assert_eq!(statuses, want);
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(one(head, Kind::ResponseToHead).unwrap().1, head.len());
    }

    #[test]
    fn reads_requests_with_and_without_bodies() {
        let bytes = b"POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /b HTTP/1.0\r\n\r\n";
        let (a, used) = one(bytes, Kind::Request).unwrap();
        assert_eq!(
            (a.target(), a.body_text().as_str(), a.closes()),
            ("/a", "hi", false)
        );
        let (b, _) = one(&bytes[used..], Kind::Request).unwrap();
        assert_eq!((b.target(), b.body.len(), b.closes()), ("/b", 0, true));
        let chunked =
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        assert_eq!(one(chunked, Kind::Request).unwrap().0.body, b"hello");
    }
}
