//! The streams of one HTTP/2 connection: each one a request through
//! [`request::handle`], counted open until its response ends, and counted
//! cancelled when the client resets it before its answer.

use super::super::Shared;
use super::CANCELLED_MAX;
use crate::body::{BodyError, Watch, Watched};
use crate::client_body::ClientBody;
use crate::conn_state::{Conn, ConnState};
use crate::connlimit::{Held, HeldUntilWritten};
use crate::errlog::{self, Severity};
use crate::http1::Refusal;
use crate::http2::inbound::Refused;
use crate::http2::request as stand_in;
use crate::request::{self, CloseConnection};
use crate::server::refuse;
use http::{HeaderValue, Request, Response, header};
use hyper::body::Incoming;
use parking_lot::Mutex;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use tokio::sync::Notify;
use tokio::time::Instant;

/// The streams of one connection, as its service and its timers see them.
pub(super) struct Streams {
    /// Open now: accepted, and not yet answered to the end.
    open: AtomicU32,
    answered: AtomicU64,
    /// Reset (or abandoned) by the client before their answer.
    cancelled: AtomicU64,
    /// When the connection last had no open stream.
    idle_since: Mutex<Instant>,
    /// Too many cancelled: the connection ends with ENHANCE_YOUR_CALM.
    calm: AtomicBool,
    /// The connection has ended: the streams it drops are not the client's
    /// resets.
    ended: AtomicBool,
    /// Streams whose last frame hyper took without asking for the next
    /// yet: they wait for the client (its window, or its socket).
    owed: AtomicU32,
    /// When a stream last got on while some waited for the client.
    progress: Mutex<Instant>,
    /// The connection's loop looks again (idle began or ended, calm, a
    /// stream began to wait for the client).
    pub(super) changed: Notify,
    /// Requests the gate refused, until their streams are served.
    refused: Mutex<Vec<Refused>>,
    /// What streams whose bodies ended hold (their `limit_conn` counts)
    /// until their end is written to the client ([`Streams::written`]).
    holding: Mutex<Vec<(u32, Held)>>,
    holding_any: AtomicBool,
    /// The streams whose request or response body sluice still has, by
    /// id, and the connection's reads waiting for some of them to go
    /// ([`Streams::poll_gone`]): the client reset them.
    live: Mutex<(Vec<u32>, Option<Waker>)>,
    /// Since when the connection's socket has had nothing in flight (see
    /// [`super::io::H2Io`]): it may be parked.
    quiet_since: Mutex<Option<Instant>>,
    /// For log lines: the connection's number, client and server.
    pub(super) id: u64,
    pub(super) client: IpAddr,
    pub(super) server: String,
}

impl Streams {
    pub(super) fn new(id: u64, client: IpAddr, server: String) -> Streams {
        Streams {
            open: AtomicU32::new(0),
            answered: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            idle_since: Mutex::new(crate::clock::now()),
            calm: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            owed: AtomicU32::new(0),
            progress: Mutex::new(crate::clock::now()),
            changed: Notify::new(),
            refused: Mutex::new(Vec::new()),
            holding: Mutex::new(Vec::new()),
            holding_any: AtomicBool::new(false),
            live: Mutex::new((Vec::new(), None)),
            quiet_since: Mutex::new(None),
            id,
            client,
            server,
        }
    }

    /// The gate refused these requests: their streams come to the service
    /// as stand-ins.
    pub(super) fn refused(&self, refused: Vec<Refused>) {
        self.refused.lock().extend(refused);
    }

    /// The refusal a stand-in request stands for.
    fn take_refused(&self, token: u64) -> Option<Refusal> {
        let mut list = self.refused.lock();
        let i = list.iter().position(|r| r.token == token)?;
        Some(list.swap_remove(i).refusal)
    }

    pub(super) fn open(&self) -> u32 {
        self.open.load(Ordering::Relaxed)
    }

    pub(super) fn idle_since(&self) -> Instant {
        *self.idle_since.lock()
    }

    fn opened(&self) {
        if self.open.fetch_add(1, Ordering::Relaxed) == 0 {
            self.changed.notify_one();
        }
    }

    fn closed(&self, answered: bool) {
        if answered {
            self.answered.fetch_add(1, Ordering::Relaxed);
        } else if !self.ended.load(Ordering::Relaxed) {
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
            *self.idle_since.lock() = crate::clock::now();
            self.changed.notify_one();
        }
    }

    pub(super) fn begun(&self) -> u64 {
        self.answered.load(Ordering::Relaxed) + self.cancelled.load(Ordering::Relaxed)
    }

    /// When the connection is to go away for idling, if it has no stream:
    /// `client_header_timeout` after it opened if it never had one, else
    /// `keepalive_timeout` after its last one ended.
    pub(super) fn idle_deadline(&self, state: &ConnState) -> Option<Instant> {
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

    /// The socket has nothing in flight (`quiet`), or again has.
    pub(super) fn quiet(&self, quiet: bool) {
        *self.quiet_since.lock() = quiet.then(crate::clock::now);
        if quiet {
            self.changed.notify_one();
        }
    }

    /// When the connection may be parked: nothing in flight on its socket,
    /// no stream open, nothing held for one, since `PARK_AFTER`.
    pub(super) fn park_at(&self, after: std::time::Duration) -> Option<Instant> {
        let since = (*self.quiet_since.lock())?;
        if self.open() > 0 || self.holding_any.load(Ordering::Acquire) {
            return None;
        }
        if !self.refused.lock().is_empty() {
            return None;
        }
        Some(since.max(self.idle_since()) + after)
    }

    pub(super) fn calm(&self) -> bool {
        self.calm.load(Ordering::Relaxed)
    }

    /// The connection is over (its streams are dropped after it).
    pub(super) fn end(&self) {
        self.ended.store(true, Ordering::Relaxed);
        self.holding.lock().clear();
    }

    /// `stream`'s body ended: `held` is kept until its end is written.
    fn hold(&self, stream: u32, held: Held) {
        self.holding.lock().push((stream, held));
        self.holding_any.store(true, Ordering::Release);
    }

    /// The end of `stream` (END_STREAM or RST_STREAM) was written to the
    /// client: what it held is let go.
    pub(super) fn written(&self, stream: u32) {
        if !self.holding_any.load(Ordering::Acquire) {
            return;
        }
        let mut holding = self.holding.lock();
        holding.retain(|(s, _)| *s != stream);
        self.holding_any
            .store(!holding.is_empty(), Ordering::Release);
    }

    /// The client reset `stream` (its RST_STREAM is with hyper): what it
    /// held until its end was written goes now, as nginx frees a request
    /// its client reset. True if its request or body is still sluice's:
    /// hyper drops it on the reset, from the stream's own task.
    pub(super) fn reset_by_client(&self, stream: u32) -> bool {
        self.written(stream);
        self.live.lock().0.contains(&stream)
    }

    /// Ready once none of `streams` is still sluice's (what one held when
    /// its body ended as it went is let go too); the waiting connection is
    /// woken when one goes.
    pub(super) fn poll_gone(&self, cx: &mut Context<'_>, streams: &mut Vec<u32>) -> Poll<()> {
        let mut gone = Vec::new();
        let pending = {
            let mut live = self.live.lock();
            streams.retain(|s| {
                let still = live.0.contains(s);
                if !still {
                    gone.push(*s);
                }
                still
            });
            live.1 = (!streams.is_empty()).then(|| cx.waker().clone());
            !streams.is_empty()
        };
        for s in gone {
            self.written(s);
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }

    fn live(&self, stream: u32) {
        self.live.lock().0.push(stream);
    }

    fn gone(&self, stream: u32) {
        let waker = {
            let mut live = self.live.lock();
            if let Some(i) = live.0.iter().position(|s| *s == stream) {
                live.0.swap_remove(i);
            }
            live.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Since when no stream got on while some waited for the client (a
    /// client that takes nothing for `send_timeout` is timed out, as on
    /// HTTP/1.1: nginx times out a stream its window holds up the same way).
    pub(super) fn stalled_since(&self) -> Option<Instant> {
        (self.owed.load(Ordering::Relaxed) > 0).then(|| *self.progress.lock())
    }

    fn owe(&self) {
        if self.owed.fetch_add(1, Ordering::Relaxed) == 0 {
            *self.progress.lock() = crate::clock::now();
            self.changed.notify_one();
        }
    }

    fn repaid(&self) {
        self.owed.fetch_sub(1, Ordering::Relaxed);
        *self.progress.lock() = crate::clock::now();
    }
}

/// One stream, counted open until dropped (with its response body, or
/// before it was answered: the client reset it, or the connection ended).
struct Stream {
    streams: Arc<Streams>,
    answered: bool,
    /// hyper took a frame of its body and has not asked for the next.
    owed: bool,
}

impl Stream {
    fn owe(&mut self, owed: bool) {
        match (self.owed, owed) {
            (false, true) => self.streams.owe(),
            (true, false) => self.streams.repaid(),
            _ => {}
        }
        self.owed = owed;
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.owe(false);
        self.streams.closed(self.answered);
    }
}

/// A stream's id while sluice has its request or its response body: the
/// connection's reads wait for it to go once the client reset the stream
/// ([`Streams::poll_gone`]). The last field of what holds it, so that it
/// goes after the rest (the request's counts, the upstream's connection).
struct Live {
    streams: Arc<Streams>,
    id: u32,
}

impl Live {
    fn new(streams: &Arc<Streams>, id: u32) -> Live {
        streams.live(id);
        Live {
            streams: streams.clone(),
            id,
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.streams.gone(self.id);
    }
}

/// A stream's future, as hyper polls it: its request, then its [`Live`].
pub(super) struct Serving {
    fut: Pin<Box<dyn std::future::Future<Output = Answer> + Send>>,
    _live: Option<Live>,
}

impl std::future::Future for Serving {
    type Output = Answer;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        self.fut.as_mut().poll(cx)
    }
}

/// A stream's response body: the stream stays open until it ends; an
/// upstream body that broke off is logged (as on HTTP/1.1, where it ends
/// the connection; here hyper resets the stream alone).
pub(super) type StreamBody = Watched<StreamEnd>;

/// What a stream's response body tells its stream.
///
/// What the request holds (its `limit_conn` counts) is let go when the
/// stream's end was written to the client, as nginx lets go when its last
/// byte was sent, and not when hyper buffered the body: a client whose
/// window holds the body up keeps its count.
pub(super) struct StreamEnd {
    /// The request's counts and its stream's id: held by the streams with the
    /// connection when the body ends, until that end is written.
    held: Option<(u32, Held)>,
    stream: Stream,
    _live: Option<Live>,
}

impl Watch for StreamEnd {
    fn polling(&mut self) {
        self.stream.owe(false);
    }

    fn more(&mut self) {
        // hyper took a frame and has not asked for the next yet.
        self.stream.owe(true);
    }

    /// What the stream held waits for its end to be written.
    fn ended(mut self) {
        if let Some((id, held)) = self.held.take() {
            self.stream.streams.hold(id, held);
        }
    }

    fn failed(self, error: &BodyError) {
        if let Some(f) = body_failure(&**error) {
            let s = &self.stream.streams;
            errlog::emit(
                Severity::Error,
                format_args!("*{} {f}, client: {}, server: {}", s.id, s.client, s.server),
            );
        }
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

/// The service hyper calls for each stream.
pub(super) struct H2Service {
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    streams: Arc<Streams>,
}

impl H2Service {
    pub(super) fn new(shared: Arc<Shared>, conn: Arc<Conn>, streams: Arc<Streams>) -> H2Service {
        H2Service {
            shared,
            conn,
            streams,
        }
    }
}

pub(super) type Answer = Result<Response<StreamBody>, CloseConnection>;

impl hyper::service::Service<Request<Incoming>> for H2Service {
    type Response = Response<StreamBody>;
    type Error = CloseConnection;
    type Future = Serving;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        self.streams.opened();
        // (A head the gate refused comes as its stand-in: counted too.)
        self.shared
            .env
            .metrics
            .request(crate::metrics::Protocol::Http2);
        let id = stream_id(&mut req);
        let stream = Stream {
            streams: self.streams.clone(),
            answered: false,
            owed: false,
        };
        let (shared, conn) = (self.shared.clone(), self.conn.clone());
        // Written into its box, not moved there: a move copies the whole
        // future (about 6 KB) per stream.
        let fut = Box::write(
            Box::new_uninit(),
            serve_stream(shared, conn, (req, id), stream),
        );
        Serving {
            fut: Box::into_pin(fut),
            _live: id.map(|id| Live::new(&self.streams, id)),
        }
    }
}

/// One stream: a request as HTTP/1.1 would carry it, through
/// [`request::handle`], or the answer to a request the gate refused;
/// dropped (and counted as cancelled) if the client resets it first.
async fn serve_stream(
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    (mut req, id): (Request<Incoming>, Option<u32>),
    mut stream: Stream,
) -> Answer {
    let start = crate::clock::now();
    let resp = if req.method().as_str() == stand_in::STAND_IN_METHOD {
        let token = req.uri().path().trim_start_matches('/').parse().ok();
        let refusal = token.and_then(|t| stream.streams.take_refused(t));
        Ok(refuse::refused_stream(&shared, &conn, refusal, start))
    } else {
        as_http1(&mut req);
        let (head, body) = req.into_parts();
        let req = (head.into(), ClientBody::Hyper(body));
        let resp = request::handle(shared.env.clone(), conn, req, start).await;
        let mut resp = resp.map(request::Reply::into_response);
        // hyper writes only a header map (see `upstream::UpstreamFields`).
        if let Ok(r) = &mut resp {
            crate::upstream::into_header_map(r);
        }
        resp
    };
    let status = resp
        .as_ref()
        .map_or_else(|c| c.status, |r| r.status().as_u16());
    shared
        .env
        .metrics
        .response(status, crate::clock::since(start));
    stream.answered = true;
    resp.map(|mut r| {
        let held = r
            .extensions_mut()
            .remove::<HeldUntilWritten>()
            .and_then(|h| h.0.lock().take());
        let held = id.zip(held);
        let live = id.map(|id| Live::new(&stream.streams, id));
        let end = StreamEnd {
            held,
            stream,
            _live: live,
        };
        r.map(|inner| Watched::new(inner, end))
    })
}

/// The stream's id, from the last field the gate added
/// ([`stand_in::STREAM_FIELD`]); every such field is removed.
fn stream_id(req: &mut Request<Incoming>) -> Option<u32> {
    let mut last = None;
    if let http::header::Entry::Occupied(e) = req.headers_mut().entry(stand_in::STREAM_FIELD) {
        for v in e.remove_entry_mult().1 {
            last = Some(v);
        }
    }
    last?.to_str().ok()?.parse().ok()
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
