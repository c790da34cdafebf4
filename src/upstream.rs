//! Upstream HTTP/1.1: sluice's own client for `proxy_pass`.
//!
//! Why not hyper's client: on the pass path hyper-util's pooled client cost
//! more CPU per request than all of nginx's user time — a task per upstream
//! connection, a channel between it and the request, a pool behind a lock, a
//! clone of the request's header map. Here the request's own task writes the
//! request head in one `write`, parses the response head with `httparse`, and
//! the response body carries the connection back to its worker thread's idle
//! list the moment its last byte is read: nginx's `keepalive` cache of
//! upstream connections, one per worker.
//!
//! What it does, as nginx does it: one request per connection at a time,
//! HTTP/1.1 with kept-alive connections, request bodies streamed with their
//! Content-Length or re-chunked, responses framed by RFC 9112 §6.3 (HEAD,
//! 1xx/204/304, chunked, Content-Length, or read until close), hop-by-hop
//! headers dropped both ways, and a request that meets a kept-alive
//! connection the upstream had closed is sent again on a new one (nginx
//! retries cached connections too) — if it had no body to lose.

use crate::body::BodyError;
use bytes::{Buf, Bytes, BytesMut};
use http::uri::Authority;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Largest response head accepted; nginx's `proxy_buffer_size` is 4k or 8k,
/// so anything nginx accepts fits.
const MAX_HEAD: usize = 64 * 1024;
/// Most header lines in a response head (hyper's default).
const MAX_HEADERS: usize = 100;
/// Idle connections kept per upstream and worker thread.
const MAX_IDLE: usize = 512;
/// A connection idle for longer is closed, not reused (nginx's upstream
/// `keepalive_timeout` default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often each worker closes idle connections that expired or that the
/// upstream closed.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// Read buffer growth.
const READ_CHUNK: usize = 8 * 1024;
/// The timeouts of one proxied request, nginx's names and defaults (60 s each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `proxy_connect_timeout`: connecting to the upstream.
    pub connect: Duration,
    /// `proxy_send_timeout`: one write of the request to the upstream may
    /// stall this long.
    pub send: Duration,
    /// `proxy_read_timeout`: waiting for the response head once the request
    /// is sent, then between two reads of the response body.
    pub read: Duration,
    /// `client_body_timeout`: the client may pause this long between two
    /// pieces of its request body.
    pub client_body: Duration,
}

/// Why a request got no response from upstream. The messages are nginx's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("connect() failed ({}) while connecting to upstream", os(.0))]
    Connect(io::Error),
    #[error("upstream timed out (110: Connection timed out) while connecting to upstream")]
    ConnectTimeout,
    #[error("writev() failed ({}) while sending request to upstream", os(.0))]
    Send(io::Error),
    /// The client's request body failed (too large, or the client left).
    #[error("client request body: {0}")]
    Body(BodyError),
    #[error("recv() failed ({}) while reading response header from upstream", os(.0))]
    Recv(io::Error),
    #[error("upstream prematurely closed connection while reading response header from upstream")]
    Closed,
    #[error("upstream sent too big header while reading response header from upstream")]
    TooBig,
    #[error("upstream sent invalid {0} while reading response header from upstream")]
    Invalid(&'static str),
    /// `proxy_read_timeout` passed waiting for the response head.
    #[error(
        "upstream timed out (110: Connection timed out) while reading response header from upstream"
    )]
    ReadTimeout,
    /// A write of the request stalled for `proxy_send_timeout`.
    #[error("upstream timed out (110: Connection timed out) while sending request to upstream")]
    SendTimeout,
    /// The client sent no more of its body for `client_body_timeout`.
    #[error("client timed out (110: Connection timed out) while reading client request body")]
    ClientBodyTimeout,
}

impl Error {
    pub fn is_connect(&self) -> bool {
        matches!(self, Error::Connect(_) | Error::ConnectTimeout)
    }

    /// One of the upstream's timeouts passed (nginx answers 504).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            Error::ConnectTimeout | Error::ReadTimeout | Error::SendTimeout
        )
    }
}

/// `111: Connection refused`, as nginx prints errno.
fn os(e: &io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(code) => {
            let suffix = format!(" (os error {code})");
            format!("{code}: {}", text.strip_suffix(&suffix).unwrap_or(&text))
        }
        None => text,
    }
}

/// One upstream connection and its buffers, reused with it.
struct Conn {
    stream: TcpStream,
    read: BytesMut,
    write: Vec<u8>,
}

impl Conn {
    /// No news from the upstream since the last response: not closed, no
    /// stray bytes. Costs no system call while the socket is quiet.
    fn is_quiet(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        match self.stream.poll_read_ready(&mut cx) {
            Poll::Pending => true,
            Poll::Ready(Err(_)) => false,
            Poll::Ready(Ok(())) => {
                let mut probe = [0u8; 1];
                matches!(self.stream.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
        }
    }
}

struct Idle {
    conn: Conn,
    /// The pool's sweep count when it was checked in.
    since: u64,
}

thread_local! {
    /// This worker's idle upstream connections, most recently used last.
    static IDLE: RefCell<Pool> = RefCell::new(Pool::default());
}

/// Idle connections per upstream. Few upstreams per worker, so a list
/// (compared by bytes) beats hashing the authority on every request; age is
/// counted in sweeps, so checking in and out reads no clock.
#[derive(Default)]
struct Pool {
    idle: Vec<(Authority, Vec<Idle>)>,
    sweeps: u64,
    sweeping: bool,
}

/// Sweeps an idle connection may live through: [`IDLE_TIMEOUT`] give or
/// take one sweep.
const MAX_SWEEPS: u64 = IDLE_TIMEOUT.as_secs() / SWEEP_EVERY.as_secs();

impl Pool {
    fn list(&mut self, key: &Authority) -> Option<&mut Vec<Idle>> {
        let k = key.as_str().as_bytes();
        self.idle
            .iter_mut()
            .find(|(a, _)| a.as_str().as_bytes() == k)
            .map(|(_, l)| l)
    }
}

fn checkout(key: &Authority) -> Option<Conn> {
    IDLE.with(|p| {
        let mut p = p.borrow_mut();
        let sweeps = p.sweeps;
        let list = p.list(key)?;
        while let Some(mut idle) = list.pop() {
            // A connection the upstream wrote to since (a 408 before
            // closing, stray bytes) is not reused: nginx closes it too.
            if sweeps - idle.since < MAX_SWEEPS && idle.conn.is_quiet() {
                return Some(idle.conn);
            }
        }
        None
    })
}

fn checkin(key: &Authority, conn: Conn) {
    let start_sweeper = IDLE.with(|p| {
        let mut p = p.borrow_mut();
        let since = p.sweeps;
        if p.list(key).is_none() {
            p.idle.push((key.clone(), Vec::new()));
        }
        let list = p.list(key).expect("just added");
        if list.len() < MAX_IDLE {
            list.push(Idle { conn, since });
        }
        !std::mem::replace(&mut p.sweeping, true)
    });
    if start_sweeper {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(sweeper());
            }
            Err(_) => IDLE.with(|p| p.borrow_mut().sweeping = false),
        }
    }
}

/// Runs on each worker that has kept a connection: closes the expired and
/// the upstream-closed ones, so they do not sit in CLOSE_WAIT.
async fn sweeper() {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        IDLE.with(|p| {
            let mut p = p.borrow_mut();
            p.sweeps += 1;
            let sweeps = p.sweeps;
            for (_, list) in &mut p.idle {
                list.retain_mut(|i| sweeps - i.since < MAX_SWEEPS && i.conn.is_quiet());
            }
        });
    }
}

/// What to send: the request head as the proxy rewrote it.
pub struct Head<'a> {
    pub method: &'a Method,
    /// Origin-form target: path and query.
    pub target: &'a str,
    /// The client's headers; hop-by-hop ones, Host and X-Forwarded-For are
    /// replaced here.
    pub headers: &'a HeaderMap,
    /// Host, as nginx's `$proxy_host`.
    pub host: &'a Authority,
    /// Appended to X-Forwarded-For.
    pub client: IpAddr,
}

/// Sends one request to `upstream` and returns its response once the head
/// is read; the body streams from the connection.
///
/// Timeouts as nginx's ([`Timeouts`]): `proxy_connect_timeout` to connect,
/// `proxy_send_timeout` per write of the request, `client_body_timeout` per
/// read of the client's body, and `proxy_read_timeout` for the response
/// head once the request is sent (and then between reads of the body). The response is read while the
/// body is still being sent: an upstream that answers early (401, 413)
/// is heard, and its connection not reused.
pub async fn send<B>(
    upstream: &Authority,
    timeouts: Timeouts,
    head: &Head<'_>,
    mut body: B,
) -> Result<Response<UpstreamBody>, Error>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    let length = body.size_hint().exact();
    // A body of known length (a whole, buffered one) goes with a
    // Content-Length, as nginx sends it, whatever the client's framing was.
    let chunked = length.is_none()
        && (head.headers.contains_key(header::TRANSFER_ENCODING) || !body.is_end_stream());
    let has_body = chunked || length.is_some_and(|n| n > 0);
    let framing = if chunked {
        Framing::Chunked(Chunk::Size)
    } else if has_body || head.headers.contains_key(header::CONTENT_LENGTH) {
        Framing::Length(length.unwrap_or(0))
    } else {
        Framing::Done
    };
    // nginx does not send a non-idempotent request twice.
    let idempotent = !matches!(head.method.as_str(), "POST" | "PATCH" | "LOCK");
    let mut fresh = false;
    loop {
        let (mut conn, reused) = match if fresh { None } else { checkout(upstream) } {
            Some(c) => (c, true),
            None => (connect(upstream, timeouts.connect).await?, false),
        };
        write_head(&mut conn.write, head, framing);
        let mut received = false;
        let exchanged = exchange(
            &mut conn,
            head.method,
            has_body.then_some((&mut body, chunked)),
            timeouts,
            &mut received,
        )
        .await;
        match exchanged {
            Ok((resp, framing, keep)) => {
                let body = UpstreamBody {
                    conn: Some(conn),
                    key: upstream.clone(),
                    framing,
                    keep,
                    read_timeout: timeouts.read,
                    timer: None,
                };
                let mut resp = resp.map(|()| body);
                resp.body_mut().finish_if_done();
                return Ok(resp);
            }
            // The upstream had closed a kept-alive connection before this
            // request: once more, on a new connection.
            Err(Error::Send(_) | Error::Closed | Error::Recv(_))
                if reused && !has_body && !received && idempotent =>
            {
                fresh = true;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes the request (head already in `conn.write`) and reads the response
/// head, the two at once while a body is being sent.
async fn exchange<B>(
    conn: &mut Conn,
    method: &Method,
    body: Option<(&mut B, bool)>,
    timeouts: Timeouts,
    received: &mut bool,
) -> Result<(Response<()>, Framing, bool), Error>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    let read_timeout = timeouts.read;
    write_all(&mut conn.stream, &conn.write, timeouts.send).await?;
    let Some((body, chunked)) = body else {
        let reading = read_head(&mut conn.stream, &mut conn.read, method, received);
        return match tokio::time::timeout(read_timeout, reading).await {
            Ok(r) => r,
            Err(_) => Err(Error::ReadTimeout),
        };
    };
    let (mut rd, mut wr) = conn.stream.split();
    let sending = send_body(&mut wr, &mut conn.write, body, chunked, timeouts);
    let reading = read_head(&mut rd, &mut conn.read, method, received);
    let waiting = tokio::time::sleep(read_timeout);
    tokio::pin!(sending, reading, waiting);
    // Once the request is sent (or the upstream stopped taking it),
    // proxy_read_timeout runs.
    let mut sent = false;
    let mut send_error = None;
    loop {
        tokio::select! {
            biased;
            head = &mut reading => {
                return match head {
                    // Answered before the whole body was sent: the rest of
                    // it would be read as a request, so no reuse.
                    Ok((resp, framing, keep)) => Ok((resp, framing, keep && sent)),
                    Err(e) => Err(send_error.unwrap_or(e)),
                };
            }
            done = &mut sending, if !sent && send_error.is_none() => match done {
                Ok(()) => {
                    sent = true;
                    waiting.as_mut().reset(tokio::time::Instant::now() + read_timeout);
                }
                // The client's failures, and nginx's 504 for an upstream
                // that took nothing for proxy_send_timeout (an answer it
                // had sent would have been read first).
                Err(e @ (Error::Body(_) | Error::ClientBodyTimeout | Error::SendTimeout)) => {
                    return Err(e);
                }
                // The upstream closed its side: it may still have answered.
                Err(e) => {
                    send_error = Some(e);
                    waiting.as_mut().reset(tokio::time::Instant::now() + read_timeout);
                }
            },
            () = &mut waiting, if sent || send_error.is_some() => {
                return Err(send_error.unwrap_or(Error::ReadTimeout));
            }
        }
    }
}

/// Writes part of the request. As nginx's `proxy_send_timeout`, the timeout
/// bounds each wait for the upstream to take more, not the whole transfer:
/// an upstream that reads slowly but steadily is not timed out.
async fn write_all<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    mut bytes: &[u8],
    timeout: Duration,
) -> Result<(), Error> {
    while !bytes.is_empty() {
        match tokio::time::timeout(timeout, w.write(bytes)).await {
            Ok(Ok(0)) => return Err(Error::Send(io::ErrorKind::WriteZero.into())),
            Ok(Ok(n)) => bytes = &bytes[n..],
            Ok(Err(e)) => return Err(Error::Send(e)),
            Err(_) => return Err(Error::SendTimeout),
        }
    }
    Ok(())
}

async fn connect(upstream: &Authority, timeout: Duration) -> Result<Conn, Error> {
    let addr = (upstream.host(), upstream.port_u16().unwrap_or(80));
    let host = addr.0.trim_start_matches('[').trim_end_matches(']');
    let stream = match tokio::time::timeout(timeout, TcpStream::connect((host, addr.1))).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(Error::Connect(e)),
        Err(_) => return Err(Error::ConnectTimeout),
    };
    let _ = stream.set_nodelay(true);
    Ok(Conn {
        stream,
        read: BytesMut::with_capacity(READ_CHUNK),
        write: Vec::with_capacity(1024),
    })
}

/// Request headers that are the connection's, not the request's (RFC 9110
/// §7.6.1), `Expect` (sluice answers 100-continue itself and streams the
/// body at once), and those this function writes itself (Host, framing,
/// X-Forwarded-For).
fn replaced(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "content-length"
            | "upgrade"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "expect"
            | "host"
            | "x-forwarded-for"
    )
}

/// Names a `Connection` header lists are hop-by-hop too.
fn named_in_connection(headers: &HeaderMap, name: &HeaderName) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .any(|t| {
            t.trim_ascii()
                .eq_ignore_ascii_case(name.as_str().as_bytes())
        })
}

/// The request head into `out`; `framing` says how its body is sent
/// (`Done`: no body and no Content-Length).
fn write_head(out: &mut Vec<u8>, head: &Head<'_>, framing: Framing) {
    out.clear();
    out.extend_from_slice(head.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(head.host.as_str().as_bytes());
    out.extend_from_slice(b"\r\n");
    let listed = head.headers.contains_key(header::CONNECTION);
    for (name, value) in head.headers {
        if replaced(name) || (listed && named_in_connection(head.headers, name)) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    // $proxy_add_x_forwarded_for; several lines are one list (nginx joins them).
    out.extend_from_slice(b"x-forwarded-for: ");
    for v in head.headers.get_all("x-forwarded-for") {
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b", ");
    }
    let mut ip = [0u8; 64];
    let n = {
        use std::io::Write;
        let mut w = &mut ip[..];
        let _ = write!(w, "{}", head.client);
        64 - w.len()
    };
    out.extend_from_slice(&ip[..n]);
    out.extend_from_slice(b"\r\n");
    // The framing is sluice's own, never the client's word for it.
    match framing {
        Framing::Chunked(_) => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Framing::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Framing::UntilClose | Framing::Done => {}
    }
    out.extend_from_slice(b"\r\n");
}

async fn send_body<B, W>(
    w: &mut W,
    buf: &mut Vec<u8>,
    body: &mut B,
    chunked: bool,
    timeouts: Timeouts,
) -> Result<(), Error>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    loop {
        let frame = match tokio::time::timeout(timeouts.client_body, body.frame()).await {
            Ok(Some(frame)) => frame.map_err(Error::Body)?,
            Ok(None) => break,
            Err(_) => return Err(Error::ClientBodyTimeout),
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers are not forwarded
        };
        if data.is_empty() {
            continue;
        }
        if chunked {
            buf.clear();
            buf.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            buf.extend_from_slice(&data);
            buf.extend_from_slice(b"\r\n");
            write_all(w, buf, timeouts.send).await?;
        } else {
            write_all(w, &data, timeouts.send).await?;
        }
    }
    if chunked {
        write_all(w, b"0\r\n\r\n", timeouts.send).await?;
    }
    Ok(())
}

/// The response head (1xx skipped), how its body is framed, and whether
/// the connection may be reused after it.
async fn read_head<R: tokio::io::AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    method: &Method,
    received: &mut bool,
) -> Result<(Response<()>, Framing, bool), Error> {
    loop {
        if !buf.is_empty() {
            *received = true;
            match parse_head(buf, method)? {
                Some(Parsed::Interim) => continue,
                Some(Parsed::Final(resp, framing, keep)) => return Ok((resp, framing, keep)),
                None if buf.len() >= MAX_HEAD => return Err(Error::TooBig),
                None => {}
            }
        }
        buf.reserve(READ_CHUNK);
        let read =
            std::future::poll_fn(|cx| tokio_util::io::poll_read_buf(Pin::new(&mut *rd), cx, buf));
        match read.await {
            Ok(0) => return Err(Error::Closed),
            Ok(_) => {}
            Err(e) => return Err(Error::Recv(e)),
        }
    }
}

pub(crate) enum Parsed {
    Interim,
    Final(Response<()>, Framing, bool),
}

/// Parses a complete head off the front of `buf`, or `None` if it is not
/// all there yet.
pub(crate) fn parse_head(buf: &mut BytesMut, method: &Method) -> Result<Option<Parsed>, Error> {
    let mut lines = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut parsed,
        buf,
        &mut lines,
    ) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Error::TooBig),
        Err(_) => return Err(Error::Invalid("header")),
    };
    let code = parsed.code.unwrap_or(0);
    let status = StatusCode::from_u16(code).map_err(|_| Error::Invalid("status"))?;
    if status.is_informational() {
        if code == 101 {
            return Err(Error::Invalid("101 response"));
        }
        buf.advance(len);
        return Ok(Some(Parsed::Interim));
    }
    let http11 = parsed.version == Some(1);
    let mut keep = http11;
    let mut length: Option<u64> = None;
    let mut chunked = None;
    let count = parsed.headers.len();
    // Header values share the head's bytes rather than each being copied:
    // where each name and value is, before the head is split off.
    let mut at = [(0u32, 0u32, 0u32, 0u32); MAX_HEADERS];
    let base = buf.as_ptr() as usize;
    for (slot, h) in at.iter_mut().zip(parsed.headers.iter()) {
        let n = (h.name.as_ptr() as usize - base) as u32;
        let v = (h.value.as_ptr() as usize - base) as u32;
        *slot = (n, h.name.len() as u32, v, h.value.len() as u32);
    }
    let head = buf.split_to(len).freeze();
    let mut headers = HeaderMap::with_capacity(count);
    let mut connection = Vec::new();
    for &(n, nl, v, vl) in &at[..count] {
        let (n, nl, v, vl) = (n as usize, nl as usize, v as usize, vl as usize);
        let name =
            HeaderName::from_bytes(&head[n..n + nl]).map_err(|_| Error::Invalid("header"))?;
        let value = &head[v..v + vl];
        match name.as_str() {
            "content-length" => {
                let l = parse_number(value.trim_ascii(), 10)
                    .ok_or(Error::Invalid("\"Content-Length\" header"))?;
                if length.is_some_and(|old| old != l) {
                    return Err(Error::Invalid("\"Content-Length\" header"));
                }
                length = Some(l);
            }
            "transfer-encoding" => {
                let last = value.rsplit(|&b| b == b',').next().unwrap_or(b"");
                chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
                continue;
            }
            "connection" => {
                for t in value.split(|&b| b == b',') {
                    let t = t.trim_ascii();
                    if t.eq_ignore_ascii_case(b"close") {
                        keep = false;
                    } else if t.eq_ignore_ascii_case(b"keep-alive") {
                        keep = true;
                    } else if let Ok(n) = HeaderName::from_bytes(t) {
                        connection.push(n);
                    }
                }
                continue;
            }
            "keep-alive" | "proxy-connection" | "te" | "trailer" | "upgrade"
            | "proxy-authenticate" => continue,
            _ => {}
        }
        let value = HeaderValue::from_maybe_shared(head.slice(v..v + vl))
            .map_err(|_| Error::Invalid("header"))?;
        headers.append(name, value);
    }
    for n in connection {
        headers.remove(n);
    }
    // RFC 9112 §6.3.
    let framing = if *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Framing::Length(0)
    } else if let Some(chunked) = chunked {
        // Only chunked is understood (nginx: "upstream sent unknown
        // Transfer-Encoding"); with a Content-Length too the message is
        // suspect (RFC 9112 §6.3): read it, but do not reuse the connection.
        if !chunked {
            return Err(Error::Invalid("\"Transfer-Encoding\" header"));
        }
        if headers.remove(header::CONTENT_LENGTH).is_some() {
            keep = false;
        }
        Framing::Chunked(Chunk::Size)
    } else if let Some(l) = length {
        Framing::Length(l)
    } else {
        keep = false;
        Framing::UntilClose
    };
    if !http11 && keep {
        // An HTTP/1.0 upstream that said keep-alive: trust only a framed body.
        keep = !matches!(framing, Framing::UntilClose);
    }
    let mut resp = Response::new(());
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    Ok(Some(Parsed::Final(resp, framing, keep)))
}

/// Digits only (no sign, no spaces), in `radix`; `None` if empty, other or
/// too large.
fn parse_number(digits: &[u8], radix: u32) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(|&b| (b as char).is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, radix).ok()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Framing {
    /// This many bytes left.
    Length(u64),
    Chunked(Chunk),
    /// Everything until the upstream closes.
    UntilClose,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk: bytes left.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
}

/// The upstream's response body. When its last byte is read, the connection
/// goes back to this worker's idle list (if the upstream allows); dropped
/// before that, the connection closes.
pub struct UpstreamBody {
    conn: Option<Conn>,
    key: Authority,
    framing: Framing,
    keep: bool,
    /// nginx's `proxy_read_timeout` between two reads of the body.
    read_timeout: Duration,
    /// Armed only while a read waits.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// Why a response body broke off (the client connection is then closed:
/// its response cannot be completed).
#[derive(Debug, thiserror::Error)]
pub enum BodyFailure {
    #[error("upstream prematurely closed connection while reading upstream")]
    Truncated,
    #[error("upstream timed out (110: Connection timed out) while reading upstream")]
    TimedOut,
    #[error("upstream sent invalid chunked response while reading upstream")]
    InvalidChunked,
    #[error("recv() failed ({}) while reading upstream", os(.0))]
    Recv(io::Error),
}

impl UpstreamBody {
    fn finish_if_done(&mut self) {
        if matches!(self.framing, Framing::Length(0)) {
            self.framing = Framing::Done;
        }
        if self.framing == Framing::Done {
            if let Some(conn) = self.conn.take() {
                if self.keep && conn.read.is_empty() {
                    checkin(&self.key, conn);
                }
            }
        }
    }

    /// The next piece of body out of the buffer, or `None` if more must
    /// be read first.
    fn take(&mut self) -> Result<Option<Bytes>, BodyError> {
        match self.conn.as_mut() {
            Some(conn) => take_body(&mut self.framing, &mut conn.read),
            None => Ok(None),
        }
    }
}

/// The next piece of body framed by `framing` out of `buf` (advancing both),
/// or `None` if more must be read first or the body is done. Never takes a
/// byte past the body's end: what follows stays in `buf`. A free function,
/// not a method of [`UpstreamBody`], so that it can be exercised on bytes
/// alone (the fuzz target `upstream`, see `crate::fuzzing`).
pub(crate) fn take_body(
    framing: &mut Framing,
    buf: &mut BytesMut,
) -> Result<Option<Bytes>, BodyError> {
    loop {
        match framing {
            Framing::Done | Framing::Length(0) => return Ok(None),
            Framing::Length(left) => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = (*left).min(buf.len() as u64) as usize;
                *left -= n as u64;
                return Ok(Some(buf.split_to(n).freeze()));
            }
            Framing::UntilClose => {
                if buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(buf.split().freeze()));
            }
            Framing::Chunked(Chunk::Data(left)) => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = (*left).min(buf.len() as u64) as usize;
                *left -= n as u64;
                if *left == 0 {
                    *framing = Framing::Chunked(Chunk::DataEnd);
                }
                return Ok(Some(buf.split_to(n).freeze()));
            }
            Framing::Chunked(state) => {
                let state = *state;
                // Lines end in CRLF, or a bare LF (nginx accepts both).
                let Some(end) = buf.iter().position(|&b| b == b'\n') else {
                    if buf.len() > 4096 {
                        return Err(Box::new(BodyFailure::InvalidChunked));
                    }
                    return Ok(None);
                };
                let line = buf.split_to(end + 1);
                let line = line[..end].strip_suffix(b"\r").unwrap_or(&line[..end]);
                let next = match state {
                    Chunk::Size => {
                        let size = line.split(|&b| b == b';').next().unwrap_or(b"");
                        let size = parse_number(size.trim_ascii(), 16)
                            .ok_or_else(|| Box::new(BodyFailure::InvalidChunked) as BodyError)?;
                        if size == 0 {
                            Chunk::Trailers
                        } else {
                            Chunk::Data(size)
                        }
                    }
                    Chunk::DataEnd if line.is_empty() => Chunk::Size,
                    Chunk::DataEnd => {
                        return Err(Box::new(BodyFailure::InvalidChunked));
                    }
                    Chunk::Trailers if line.is_empty() => {
                        *framing = Framing::Done;
                        return Ok(None);
                    }
                    Chunk::Trailers => Chunk::Trailers,
                    Chunk::Data(_) => unreachable!("handled above"),
                };
                *framing = Framing::Chunked(next);
            }
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        loop {
            let taken = this.take();
            this.finish_if_done();
            match taken {
                Ok(Some(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Err(e) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(e)));
                }
                Ok(None) => {}
            }
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            conn.read.reserve(READ_CHUNK);
            let polled =
                tokio_util::io::poll_read_buf(Pin::new(&mut conn.stream), cx, &mut conn.read);
            let read = match polled {
                Poll::Ready(r) => {
                    this.timer = None;
                    r
                }
                Poll::Pending => {
                    let wait = this.read_timeout;
                    let timer = this
                        .timer
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(wait)));
                    ready!(timer.as_mut().poll(cx));
                    // Logged with its connection when hyper reports it.
                    this.conn = None;
                    return Poll::Ready(Some(Err(Box::new(BodyFailure::TimedOut))));
                }
            };
            match read {
                Ok(0) if this.framing == Framing::UntilClose => {
                    this.framing = Framing::Done;
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Ok(0) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(Box::new(BodyFailure::Truncated))));
                }
                Ok(_) => {}
                Err(e) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(Box::new(BodyFailure::Recv(e)))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.framing == Framing::Done
    }

    fn size_hint(&self) -> SizeHint {
        match self.framing {
            Framing::Length(n) => SizeHint::with_exact(n),
            Framing::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Empty, Full};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncReadExt;
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
    }

    fn answer(pieces: &[&'static [u8]]) -> Answer {
        Answer {
            pieces: pieces.to_vec(),
            close: false,
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
                        while let Ok(Ok(n @ 1..)) =
                            tokio::time::timeout(settle, s.read(&mut buf)).await
                        {
                            received.lock().extend_from_slice(&buf[..n]);
                        }
                        let Some(ans) = answers.lock().next() else {
                            return;
                        };
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

    fn head<'a>(method: &'a Method, headers: &'a HeaderMap, host: &'a Authority) -> Head<'a> {
        Head {
            method,
            target: "/t?q=1",
            headers,
            host,
            client: "127.0.0.9".parse().unwrap(),
        }
    }

    fn empty() -> http_body_util::combinators::BoxBody<Bytes, BodyError> {
        Empty::new().map_err(|n| match n {}).boxed()
    }

    async fn get(up: &Upstream, method: Method) -> Result<(Response<()>, Bytes), String> {
        let headers = HeaderMap::new();
        let h = head(&method, &headers, &up.key);
        let resp = send(&up.key, timeouts(Duration::from_secs(1)), &h, empty())
            .await
            .map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((Response::from_parts(parts, ()), body))
    }

    /// POSTs `body` with `headers` and reads the whole response.
    async fn post(up: &Upstream, headers: &HeaderMap, body: &'static [u8]) {
        let method = Method::POST;
        let h = head(&method, headers, &up.key);
        let body = Full::new(Bytes::from_static(body))
            .map_err(|n| match n {})
            .boxed();
        let timeouts = timeouts(Duration::from_secs(1));
        let resp = send(&up.key, timeouts, &h, body).await.unwrap();
        resp.into_body().collect().await.unwrap();
    }

    /// Test timeouts: 1 s to connect, `read` for the response, nginx's 60 s
    /// for the rest.
    fn timeouts(read: Duration) -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(1),
            send: Duration::from_secs(60),
            read,
            client_body: Duration::from_secs(60),
        }
    }

    /// A `size`-byte request body and the Content-Length header for it.
    fn big_body(
        size: usize,
    ) -> (
        HeaderMap,
        http_body_util::combinators::BoxBody<Bytes, BodyError>,
    ) {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
        let body = Full::new(Bytes::from(vec![b'x'; size]))
            .map_err(|n| match n {})
            .boxed();
        (headers, body)
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
            },
            Answer {
                pieces: vec![b"HTTP/1.1 200 OK\r\n"],
                close: true,
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
        let headers = HeaderMap::new();
        let h = head(&Method::GET, &headers, &up.key);
        let read_timeout = Duration::from_millis(300);
        let resp = send(&up.key, timeouts(read_timeout), &h, empty())
            .await
            .unwrap();
        let start = std::time::Instant::now();
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

    #[tokio::test]
    async fn connect_errors_read_like_nginx() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let key: Authority = l.local_addr().unwrap().to_string().parse().unwrap();
        drop(l);
        let headers = HeaderMap::new();
        let h = head(&Method::GET, &headers, &key);
        let Err(e) = send(&key, timeouts(Duration::from_secs(1)), &h, empty()).await else {
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
        post(&up, &headers, b"hello").await;
        let got = String::from_utf8(up.received.lock().clone()).unwrap();
        assert_eq!(
            got,
            format!(
                "POST /t?q=1 HTTP/1.1\r\nhost: {}\r\nx-keep: kept\r\n\
                 x-forwarded-for: 1.2.3.4, 5.6.7.8, 127.0.0.9\r\ncontent-length: 5\r\n\r\nhello",
                up.key
            )
        );
        up.received.lock().clear();
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("2"));
        post(&up, &headers, b"ab").await;
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
        post(&up, &headers, b"hello").await;
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
        let start = std::time::Instant::now();
        let resp = send(&key, timeouts, &h, body).await.expect("the 401");
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
        let headers = HeaderMap::new();
        let timeouts = timeouts(Duration::from_secs(1));
        // Pool several connections: concurrent requests.
        let pool = |m: Method| {
            let key = key.clone();
            let headers = headers.clone();
            async move {
                let h = head(&m, &headers, &key);
                let r = send(&key, timeouts, &h, empty()).await.unwrap();
                r.into_body().collect().await.unwrap();
            }
        };
        tokio::join!(pool(Method::GET), pool(Method::GET), pool(Method::GET));
        let mut before = requests.load(Ordering::SeqCst);
        assert_eq!(before, 3, "three connections pooled");
        // A POST meets a connection the upstream drops: not sent again.
        let h = head(&Method::POST, &headers, &key);
        assert!(send(&key, timeouts, &h, empty()).await.is_err());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(requests.load(Ordering::SeqCst) - before, 1);
        before += 1;
        // A GET: once on a pooled connection (dropped), once more on a new
        // one (answered) — not once per pooled connection.
        let h = head(&Method::GET, &headers, &key);
        assert!(send(&key, timeouts, &h, empty()).await.is_ok());
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
        let h = head(&method, &headers, &key);
        let body = Slow {
            pieces: vec![b"aa", b"bb", b"cc", b"dd", b"ee"],
            pause: Duration::from_millis(150),
            timer: None,
        };
        let timeouts = timeouts(Duration::from_millis(300));
        let start = std::time::Instant::now();
        let resp = send(&key, timeouts, &h, body).await.expect("answered");
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
        let timeouts = Timeouts {
            send: Duration::from_millis(200),
            ..timeouts(Duration::from_secs(60))
        };
        let start = std::time::Instant::now();
        let resp = send(&key, timeouts, &h, body).await.expect("answered");
        assert_eq!(resp.status(), 200);
        assert!(
            start.elapsed() > Duration::from_millis(400),
            "the upload must outlast proxy_send_timeout for this test to mean anything: {:?}",
            start.elapsed()
        );
    }
}
