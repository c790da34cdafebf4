//! HTTP/2 to clients: hyper's HTTP/2 server on one client connection, each
//! stream a request through [`request::handle`], exactly as an HTTP/1.1
//! request (its limits, delays, logs and metrics). Each stream runs in its
//! own task on the connection's worker, so a delayed stream holds up no
//! other, and a rejected one ends alone: the connection stays.
//!
//! What the connection itself obeys, with nginx's defaults where nginx has
//! one:
//! - `SETTINGS_MAX_CONCURRENT_STREAMS` 128 (`http2_max_concurrent_streams`);
//!   a stream over it is refused (`REFUSED_STREAM`);
//! - header list: `SETTINGS_MAX_HEADER_LIST_SIZE` is the whole of
//!   `large_client_header_buffers` (4 × 8k: nginx's limit for one request's
//!   fields); a bigger list gets 431 (hyper's answer), one field longer
//!   than one buffer 400 and a `:path` longer than one buffer 414, as the
//!   same head over HTTP/1.1;
//! - rapid reset (CVE-2023-44487): streams reset before hyper accepted them
//!   (20, the h2 crate's limit), or reset before sluice answered them (more
//!   than [`CANCELLED_MAX`] and more than were answered), close the
//!   connection with `GOAWAY ENHANCE_YOUR_CALM`;
//! - `client_header_timeout` for a connection that opens no stream,
//!   `keepalive_timeout` for one whose streams are all done: a `GOAWAY`,
//!   then the close; `keepalive_timeout 0` allows one stream;
//!   `send_timeout` for a client that stops taking what is written;
//! - a stop (SIGTERM, a reload that removes the listener) sends `GOAWAY`
//!   and lets the open streams finish, within `shutdown_timeout`.
//!
//! A request reads as on HTTP/1.1: its `Host` header is `:authority`, its
//! cookies (split into several fields by HTTP/2 clients) are one `Cookie`
//! again (RFC 9113 §8.2.3, as nginx joins them). Responses lose their
//! connection-specific fields (hyper strips `Connection` and what it
//! names, `Keep-Alive`, `Transfer-Encoding`, `Upgrade`, `TE`); the
//! upstream side stays HTTP/1.1.

use super::Shared;
use crate::accesslog::{LoggedBody, Record};
use crate::body::Body;
use crate::conn::{Conn, ConnState, Expired};
use crate::errlog::{self, Severity};
use crate::request::{self, CloseConnection};
use crate::respond::{self, ErrorPages, Made};
use crate::vars::RequestVars;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, header};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use parking_lot::Mutex;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, Sleep};

/// The connection preface of a client with prior knowledge (RFC 9113 §3.4).
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// nginx's `http2_max_concurrent_streams`.
pub const MAX_CONCURRENT_STREAMS: u32 = 128;
/// A stream's receive window: nginx's `http2_body_preread_size`. What a
/// client may send of a body before sluice reads it.
pub const STREAM_WINDOW: u32 = 64 * 1024;
/// The connection's receive window: the most request body a connection
/// holds unread, all streams together.
pub const CONNECTION_WINDOW: u32 = 1024 * 1024;
/// What hyper holds of one stream's response beyond what the client's
/// window lets it send (hyper's default is 400 KB).
pub const SEND_BUFFER: usize = 64 * 1024;
/// Streams a client may reset before their answer, over the connection's
/// life, past the number it let be answered: a browser cancels a few, a
/// rapid-reset attack thousands (each one is a request sluice has begun).
pub const CANCELLED_MAX: u64 = 2 * MAX_CONCURRENT_STREAMS as u64;

/// `GOAWAY` (type 7) on stream 0, last stream 2^31-1 (the streams it has
/// begun are not known here), `ENHANCE_YOUR_CALM` (0xb).
const GOAWAY_CALM: [u8; 17] = [
    0, 0, 8, 7, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0x0b,
];

/// How a connection on a listener with `http2` opened.
pub(crate) enum Opening {
    /// With the preface: HTTP/2. The bytes read, preface included.
    H2(Vec<u8>),
    /// Anything else (nothing yet at a deadline or a stop, or the end):
    /// HTTP/1.1, whose head gate reads these bytes first.
    Http1(Vec<u8>),
}

/// Reads until the first bytes tell whether they are the preface: nearly
/// always the first read (an HTTP/1.1 method differs at its first or second
/// byte). Nothing is lost: what was read goes to whoever serves the
/// connection.
pub(crate) async fn opening<S: AsyncRead + Unpin>(
    stream: &mut S,
    deadline: Instant,
    stopping: &mut watch::Receiver<bool>,
) -> Opening {
    let mut read = Vec::new();
    loop {
        let n = read.len().min(PREFACE.len());
        if read[..n] != PREFACE[..n] {
            return Opening::Http1(read);
        }
        if n == PREFACE.len() {
            return Opening::H2(read);
        }
        let mut chunk = [0u8; 1024];
        tokio::select! {
            r = stream.read(&mut chunk) => match r {
                Ok(n) if n > 0 => read.extend_from_slice(&chunk[..n]),
                // The HTTP/1.1 path sees the end (or the error) again.
                _ => return Opening::Http1(read),
            },
            _ = tokio::time::sleep_until(deadline) => return Opening::Http1(read),
            _ = stopping.wait_for(|stop| *stop) => return Opening::Http1(read),
        }
    }
}

/// The streams of one connection, as its service and its timers see them.
struct Streams {
    /// Open now: accepted, and not yet answered to the end.
    open: AtomicU32,
    answered: AtomicU64,
    /// Reset (or abandoned) by the client before their answer.
    cancelled: AtomicU64,
    /// When the connection last had no open stream.
    idle_since: Mutex<Instant>,
    /// Too many cancelled: the connection ends with ENHANCE_YOUR_CALM.
    calm: AtomicBool,
    /// The connection's loop looks again (idle began or ended, calm).
    changed: Notify,
    /// For log lines: the connection's number, client and server.
    id: u64,
    client: IpAddr,
    server: String,
}

impl Streams {
    fn opened(&self) {
        if self.open.fetch_add(1, Ordering::Relaxed) == 0 {
            self.changed.notify_one();
        }
    }

    fn closed(&self, answered: bool) {
        if answered {
            self.answered.fetch_add(1, Ordering::Relaxed);
        } else {
            let cancelled = self.cancelled.fetch_add(1, Ordering::Relaxed) + 1;
            if cancelled > CANCELLED_MAX
                && cancelled > self.answered.load(Ordering::Relaxed)
                && !self.calm.swap(true, Ordering::Relaxed)
            {
                errlog::emit(
                    Severity::Info,
                    format_args!(
                        "*{} client reset {cancelled} streams before their response, closing \
                         the connection (ENHANCE_YOUR_CALM), client: {}, server: {}",
                        self.id, self.client, self.server
                    ),
                );
                self.changed.notify_one();
            }
        }
        if self.open.fetch_sub(1, Ordering::Relaxed) == 1 {
            *self.idle_since.lock() = Instant::now();
            self.changed.notify_one();
        }
    }

    fn begun(&self) -> u64 {
        self.answered.load(Ordering::Relaxed) + self.cancelled.load(Ordering::Relaxed)
    }

    /// When the connection is to go away for idling, if it has no stream:
    /// `client_header_timeout` after it opened if it never had one, else
    /// `keepalive_timeout` after its last one ended.
    fn idle_deadline(&self, state: &ConnState) -> Option<Instant> {
        if self.open.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let wait = if self.begun() == 0 {
            state.timeouts.client_header
        } else {
            state.timeouts.keepalive
        };
        Some(*self.idle_since.lock() + wait)
    }

    fn calm(&self) -> bool {
        self.calm.load(Ordering::Relaxed)
    }
}

/// One stream, counted open until dropped (with its response body, or
/// before it was answered: the client reset it, or the connection ended).
struct Stream {
    streams: Arc<Streams>,
    answered: bool,
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.streams.closed(self.answered);
    }
}

/// A stream's response body: the stream stays open until it ends; an
/// upstream body that broke off is logged (as on HTTP/1.1, where it ends
/// the connection; here hyper resets the stream alone).
struct StreamBody {
    inner: Body,
    stream: Option<Stream>,
}

impl hyper::body::Body for StreamBody {
    type Data = Bytes;
    type Error = crate::body::BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Err(e))) => {
                if let (Some(f), Some(s)) = (body_failure(&**e), &this.stream) {
                    let s = &s.streams;
                    errlog::emit(
                        Severity::Error,
                        format_args!("*{} {f}, client: {}, server: {}", s.id, s.client, s.server),
                    );
                }
                this.stream = None;
            }
            Poll::Ready(None) => this.stream = None,
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.stream = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The upstream body failure in a body error's chain, if that is what it is.
fn body_failure<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a crate::upstream::BodyFailure> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(f) = err.downcast_ref::<crate::upstream::BodyFailure>() {
            return Some(f);
        }
        cur = err.source();
    }
    None
}

/// Serve HTTP/2 on `stream`, whose first bytes were already read
/// (`read_ahead`, the preface among them; empty after ALPN), until the
/// client leaves, a timeout, a stop, or an error. The caller counts the
/// connection (worker_connections, metrics).
pub(crate) async fn serve_h2<S>(
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    stream: S,
    read_ahead: Vec<u8>,
    mut stopping: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (field_max, list_max, server) = {
        let config = shared.config();
        let s = config.server_at(conn.listen);
        let (n, size) = s.map_or(
            crate::http1::HeadRules::default().large_header_buffers,
            |s| s.head_rules.large_header_buffers,
        );
        let list = u32::try_from(n.saturating_mul(size)).unwrap_or(u32::MAX);
        (size, list, s.map_or_else(String::new, |s| s.name.clone()))
    };
    let streams = Arc::new(Streams {
        open: AtomicU32::new(0),
        answered: AtomicU64::new(0),
        cancelled: AtomicU64::new(0),
        idle_since: Mutex::new(Instant::now()),
        calm: AtomicBool::new(false),
        changed: Notify::new(),
        id: conn.id,
        client: conn.remote.ip(),
        server,
    });
    let io = H2Io {
        inner: stream,
        read_ahead,
        at: 0,
        state: conn.state.clone(),
        write_timer: None,
        streams: streams.clone(),
        unflushed: false,
    };
    let svc = H2Service {
        shared: shared.clone(),
        conn: conn.clone(),
        streams: streams.clone(),
        field_max,
    };
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_send_buf_size(SEND_BUFFER)
        .max_header_list_size(list_max);
    let served = std::pin::pin!(builder.serve_connection(TokioIo::new(io), svc));
    // (Its error is the client's doing, or a timeout, logged below.)
    let _ = drive(served, &streams, &conn.state, &mut stopping).await;
    closed(&streams, &conn.state);
}

/// hyper's connection, as [`serve_h2`] builds it.
type Served<S> = hyper::server::conn::http2::Connection<TokioIo<H2Io<S>>, H2Service, TokioExecutor>;

/// How long a connection told to go away (GOAWAY sent) with no stream
/// open may take to close by itself (hyper waits for the client's answer
/// to its ping) before it is dropped.
const GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Polls the connection to its end; tells it to go away (GOAWAY, open
/// streams finish) on a stop or an idle timeout, and drops it when it does
/// not close by itself.
async fn drive<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut served: Pin<&mut Served<S>>,
    streams: &Streams,
    state: &ConnState,
    stopping: &mut watch::Receiver<bool>,
) -> Result<(), hyper::Error> {
    let mut timer = std::pin::pin!(tokio::time::sleep_until(Instant::now()));
    // When the GOAWAY went: from then on, only the open streams finish.
    let mut going: Option<Instant> = None;
    let mut calm_until = None;
    loop {
        let open = streams.open.load(Ordering::Relaxed) > 0;
        if going.is_none() && state.timeouts.keepalive.is_zero() && (open || streams.begun() > 0) {
            // keepalive_timeout 0: one stream, as nginx.
            served.as_mut().graceful_shutdown();
            going = Some(Instant::now());
        }
        let wake = if streams.calm() {
            Some(*calm_until.get_or_insert_with(|| Instant::now() + GRACE))
        } else if let Some(went) = going {
            (!open).then(|| went.max(*streams.idle_since.lock()) + GRACE)
        } else {
            streams.idle_deadline(state)
        };
        if let Some(at) = wake {
            if timer.deadline() != at {
                timer.as_mut().reset(at);
            }
        }
        tokio::select! {
            r = served.as_mut() => return r,
            _ = stopping.wait_for(|stop| *stop), if going.is_none() => {
                served.as_mut().graceful_shutdown();
                going = Some(Instant::now());
            }
            _ = &mut timer, if wake.is_some() => {
                if streams.calm() || going.is_some() {
                    // It did not close by itself in time.
                    return Ok(());
                }
                // Idle for client_header_timeout or keepalive_timeout: as
                // nginx, a GOAWAY and the close, with no log line.
                served.as_mut().graceful_shutdown();
                going = Some(Instant::now());
            }
            _ = streams.changed.notified() => {}
        }
    }
}

/// The end of a connection: a `send_timeout` is logged as on HTTP/1.1.
fn closed(streams: &Streams, state: &ConnState) {
    if state.expired() == Some(Expired::Send) {
        errlog::emit(
            Severity::Info,
            format_args!(
                "*{} client timed out (110: Connection timed out) while sending response to \
                 client, client: {}, server: {}",
                streams.id, streams.client, streams.server
            ),
        );
    }
}

/// The service hyper calls for each stream.
struct H2Service {
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    streams: Arc<Streams>,
    /// One buffer of `large_client_header_buffers`: the longest field.
    field_max: usize,
}

type Answer = Result<Response<StreamBody>, CloseConnection>;

impl hyper::service::Service<Request<Incoming>> for H2Service {
    type Response = Response<StreamBody>;
    type Error = CloseConnection;
    type Future = Pin<Box<dyn std::future::Future<Output = Answer> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        self.streams.opened();
        let stream = Stream {
            streams: self.streams.clone(),
            answered: false,
        };
        let (shared, conn) = (self.shared.clone(), self.conn.clone());
        Box::pin(serve_stream(shared, conn, req, stream, self.field_max))
    }
}

/// One stream: a request as HTTP/1.1 would carry it, through
/// [`request::handle`]; dropped (and counted as cancelled) if the client
/// resets it first.
async fn serve_stream(
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    mut req: Request<Incoming>,
    mut stream: Stream,
    field_max: usize,
) -> Answer {
    let start = Instant::now();
    let resp = match too_large(&req, field_max) {
        Some(refusal) => Ok(refused(&shared, &conn, &req, refusal, start)),
        None => {
            as_http1(&mut req);
            request::handle(shared.env.clone(), conn, req, start).await
        }
    };
    let status = resp
        .as_ref()
        .map_or_else(|c| c.status, |r| r.status().as_u16());
    shared.env.metrics.response(status, start.elapsed());
    stream.answered = true;
    resp.map(|r| {
        r.map(|inner| StreamBody {
            inner,
            stream: Some(stream),
        })
    })
}

/// The request's fields as HTTP/1.1 carries them: `Host` is `:authority`
/// (which nginx takes for `$host`, `$http_host` and the server's name), and
/// the cookies HTTP/2 clients send one per field are one `Cookie`, joined
/// by `"; "` (RFC 9113 §8.2.3).
fn as_http1(req: &mut Request<Incoming>) {
    let authority = req
        .uri()
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok());
    let headers = req.headers_mut();
    if let Some(a) = authority {
        headers.insert(header::HOST, a);
    }
    if headers.get_all(header::COOKIE).iter().nth(1).is_some() {
        let mut joined = Vec::new();
        for v in headers.get_all(header::COOKIE) {
            if !joined.is_empty() {
                joined.extend_from_slice(b"; ");
            }
            joined.extend_from_slice(v.as_bytes());
        }
        if let Ok(v) = HeaderValue::from_bytes(&joined) {
            headers.insert(header::COOKIE, v);
        }
    }
}

/// A field longer than one `large_client_header_buffers` buffer, as
/// HTTP/1.1 refuses its line: 414 for the path, 400 for a header field
/// (nginx's HTTP/2 ends the whole connection for either).
fn too_large(req: &Request<Incoming>, max: usize) -> Option<(u16, &'static str)> {
    let path = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if path > max {
        return Some((414, "client sent too long URI"));
    }
    req.headers()
        .iter()
        .any(|(n, v)| n.as_str().len() + v.len() > max)
        .then_some((400, "client sent too large header field"))
}

/// The answer to a field [`too_large`] refused: its info line, the
/// server's error page, an access-log line.
fn refused(
    shared: &Shared,
    conn: &Conn,
    req: &Request<Incoming>,
    (status, why): (u16, &str),
    start: Instant,
) -> Response<Body> {
    let config = shared.config();
    let server = config.server_at(conn.listen);
    let name = server.map_or("", |s| s.name.as_str());
    errlog::emit(
        Severity::Info,
        format_args!(
            "*{} {why} while reading client request headers, client: {}, server: {name}",
            conn.id,
            conn.remote.ip()
        ),
    );
    let no_pages = ErrorPages::default();
    let pages = server.map_or(&no_pages, |s| &*s.error_pages);
    let resp = respond::error_response(pages, None, &Made::plain(status, why.to_string()));
    let Some(log) = server.and_then(|s| s.access_log.as_ref()) else {
        return resp;
    };
    let vars = RequestVars {
        remote: conn.remote,
        local: conn.local,
        server_name: name,
        method: req.method(),
        uri: req.uri(),
        version: req.version(),
        path: "",
        headers: req.headers(),
        raw_request_line: None,
    };
    let mut record = Record::new(log.clone(), &vars, conn.id, start);
    record.status = status;
    resp.map(|b| LoggedBody::wrap(b, record))
}

/// The client's stream for hyper: the bytes already read first, writes
/// bounded by `send_timeout`, and the `GOAWAY ENHANCE_YOUR_CALM` that ends
/// a connection whose client reset too many streams.
struct H2Io<S> {
    inner: S,
    read_ahead: Vec<u8>,
    at: usize,
    state: Arc<ConnState>,
    /// When a write started waiting (`send_timeout` runs from there).
    write_timer: Option<Pin<Box<Sleep>>>,
    streams: Arc<Streams>,
    /// hyper wrote bytes it has not flushed yet: it may be inside a frame.
    unflushed: bool,
}

impl<S: AsyncWrite + Unpin> H2Io<S> {
    /// Too many streams were reset: a GOAWAY if hyper's writes end on a
    /// frame's end (it flushes only whole frames), written once and as far
    /// as the socket takes it at once; then an error, which ends hyper's
    /// connection.
    fn calm(&mut self, cx: &mut Context<'_>) -> io::Error {
        if !self.unflushed {
            self.unflushed = true;
            let inner = Pin::new(&mut self.inner);
            if let Poll::Ready(Ok(n)) = inner.poll_write(cx, &GOAWAY_CALM) {
                if n == GOAWAY_CALM.len() {
                    let _ = Pin::new(&mut self.inner).poll_flush(cx);
                }
            }
        }
        io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the client reset too many streams",
        )
    }

    /// A pending write: fails once `send_timeout` passed without progress.
    fn poll_write_timer(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let send = self.state.timeouts.send;
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(send)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(self.state.expire(Expired::Send))
    }

    fn wrote(
        &mut self,
        r: Poll<io::Result<usize>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Ready(r) => {
                self.write_timer = None;
                if matches!(r, Ok(n) if n > 0) {
                    self.unflushed = true;
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_write_timer(cx).map(Err),
        }
    }
}

use std::future::Future as _;

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for H2Io<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.streams.calm() {
            return Poll::Ready(Err(this.calm(cx)));
        }
        if this.at < this.read_ahead.len() {
            let n = (this.read_ahead.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.read_ahead[this.at..this.at + n]);
            this.at += n;
            if this.at == this.read_ahead.len() {
                (this.read_ahead, this.at) = (Vec::new(), 0);
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for H2Io<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.streams.calm() {
            return Poll::Ready(Err(this.calm(cx)));
        }
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.wrote(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.streams.calm() {
            return Poll::Ready(Err(this.calm(cx)));
        }
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.wrote(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(Ok(())) => {
                this.write_timer = None;
                this.unflushed = false;
                if this.streams.calm() {
                    return Poll::Ready(Err(this.calm(cx)));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.poll_write_timer(cx).map(Err),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
