//! What a client connection is allowed, with nginx's directives:
//!
//! - `client_header_timeout`: a new connection must deliver a request header
//!   within it (a client that connects and sends nothing is dropped), and a
//!   header that has begun must be complete within it;
//! - `keepalive_timeout`: how long a connection may sit idle between
//!   requests;
//! - `send_timeout`: how long the client may take to accept more of a
//!   response (no progress in writing for that long closes the connection);
//! - `client_max_body_size`: larger request bodies get 413.
//!
//! hyper's own `header_read_timeout` cannot express the first two: it starts
//! whenever the connection waits for a request, so it also bounds keep-alive
//! idle time, with one value for both. [`TimedIo`] wraps the socket instead
//! and applies the right deadline for the connection's [`Phase`]: the
//! service marks a request [`ConnState::busy`] when hyper hands it over, and
//! the response body marks the connection idle when it ends
//! ([`UntilEnd`] with [`Idle`]).

use crate::http1::{Fill, Gate, HeadRules, Refusal};
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use parking_lot::Mutex;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The timeouts of one connection, from its server's configuration.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub client_header: Duration,
    pub keepalive: Duration,
    pub send: Duration,
}

/// Where a connection is in its request cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for (the rest of) a request header, until the deadline.
    Header { deadline: Instant },
    /// Idle between requests, until the deadline.
    Idle { deadline: Instant },
    /// A request is being handled: no read deadline (a request body may
    /// stream slowly, a delayed request may wait).
    Busy,
}

/// Why a connection was closed by a timeout, for the error log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expired {
    Header,
    Idle,
    Send,
}

/// How long a keep-alive connection stays in hyper, idle, before it is
/// handed back to wait without hyper's buffers ([`TimedIo::park_when_idle`]).
/// Under load a connection is never idle that long, so it is not re-created
/// per request.
pub const PARK_AFTER: Duration = Duration::from_secs(1);

impl Timeouts {
    /// The shortest wait a read deadline can have (keep-alive, header, or
    /// the time an idle connection is parked after, if it may be).
    fn soonest(&self, park: bool) -> Duration {
        let park = if park && self.keepalive > PARK_AFTER {
            PARK_AFTER
        } else {
            Duration::ZERO
        };
        [self.keepalive, self.client_header, park]
            .into_iter()
            .filter(|d| !d.is_zero())
            .min()
            .unwrap_or(Duration::from_secs(60))
    }
}

/// The phase of a connection, shared by its I/O and its service.
pub struct ConnState {
    phase: Mutex<Phase>,
    timeouts: Timeouts,
    expired: Mutex<Option<Expired>>,
    /// The request being (or last) served came with a body.
    with_body: AtomicBool,
    /// A read that waits for the request being served to end (a refused
    /// pipelined head is answered then): woken by [`ConnState::idle`].
    waiting_read: Mutex<Option<std::task::Waker>>,
    /// What the chunked body being read has announced (see
    /// [`LimitedBody`]).
    declared_body: AtomicU64,
}

impl ConnState {
    /// A new connection: its header is due within `client_header_timeout`.
    pub fn new(timeouts: Timeouts) -> Arc<ConnState> {
        Arc::new(ConnState {
            phase: Mutex::new(Phase::Header {
                deadline: Instant::now() + timeouts.client_header,
            }),
            timeouts,
            expired: Mutex::new(None),
            with_body: AtomicBool::new(false),
            waiting_read: Mutex::new(None),
            declared_body: AtomicU64::new(0),
        })
    }

    /// A request header arrived and is being handled.
    pub fn busy(&self) {
        *self.phase.lock() = Phase::Busy;
    }

    /// As [`ConnState::busy`], saying whether the request has a body (a
    /// connection is only parked after a request without one: see
    /// [`TimedIo::park_when_idle`]).
    pub fn busy_with(&self, body: bool) {
        self.with_body.store(body, Ordering::Relaxed);
        self.busy();
    }

    /// When an idle connection's `keepalive_timeout` runs out.
    pub fn idle_deadline(&self) -> Option<Instant> {
        match *self.phase.lock() {
            Phase::Idle { deadline } => Some(deadline),
            _ => None,
        }
    }

    /// The response is done: idle until `keepalive_timeout`.
    pub fn idle(&self) {
        let mut p = self.phase.lock();
        if *p == Phase::Busy {
            *p = Phase::Idle {
                deadline: Instant::now() + self.timeouts.keepalive,
            };
        }
        drop(p);
        if let Some(w) = self.waiting_read.lock().take() {
            w.wake();
        }
    }

    /// A request is being served (hyper holds it).
    pub fn serving(&self) -> bool {
        *self.phase.lock() == Phase::Busy
    }

    pub fn phase(&self) -> Phase {
        *self.phase.lock()
    }

    /// Which timeout closed the connection, if one did.
    pub fn expired(&self) -> Option<Expired> {
        *self.expired.lock()
    }

    /// Bytes arrived: an idle connection starts a header.
    fn received(&self) {
        let mut p = self.phase.lock();
        if let Phase::Idle { .. } = *p {
            *p = Phase::Header {
                deadline: Instant::now() + self.timeouts.client_header,
            };
        }
    }

    fn read_deadline(&self) -> Option<(Instant, Expired)> {
        match *self.phase.lock() {
            Phase::Header { deadline } => Some((deadline, Expired::Header)),
            Phase::Idle { deadline } => Some((deadline, Expired::Idle)),
            Phase::Busy => None,
        }
    }

    fn expire(&self, why: Expired) -> io::Error {
        *self.expired.lock() = Some(why);
        io::Error::new(
            io::ErrorKind::TimedOut,
            match why {
                Expired::Header => "client timed out while reading client request headers",
                Expired::Idle => "keep-alive connection idle for keepalive_timeout",
                Expired::Send => "client timed out while sending response to client",
            },
        )
    }
}

/// A client socket whose reads and writes obey the connection's deadlines.
pub struct TimedIo<T> {
    inner: T,
    state: Arc<ConnState>,
    read_timer: Pin<Box<Sleep>>,
    /// When a write started waiting (`send_timeout` runs from there).
    write_timer: Option<Pin<Box<Sleep>>>,
    /// Hand an idle connection back instead of waiting in hyper.
    park: bool,
    /// It was handed back (the end of file hyper saw was not the client's).
    parked: bool,
    /// hyper is reading (parking applies only then).
    in_hyper: bool,
    /// What hyper may read: canonical requests only (see [`crate::http1`]).
    gate: Gate,
    /// The socket has ended.
    eof: bool,
    /// A head was refused: hyper was given an end of file, the refusal is
    /// answered by the connection, which then closes.
    refused: bool,
}

/// What the socket gave, as far as hyper is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filled {
    /// Canonical bytes are ready.
    Data,
    /// The client ended the connection.
    Eof,
    /// A head was refused ([`TimedIo::take_refusal`]).
    Refused,
    /// Idle long enough to leave hyper ([`TimedIo::park_when_idle`]).
    Parked,
}

thread_local! {
    /// Each worker reads into one buffer and keeps only what a connection
    /// needs: an idle connection holds no read buffer (as nginx frees its
    /// `client_header_buffer_size` buffer when a read finds nothing).
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; 16 * 1024].into_boxed_slice());
}

impl<T> TimedIo<T> {
    pub fn new(inner: T, state: Arc<ConnState>, rules: HeadRules) -> TimedIo<T> {
        TimedIo {
            inner,
            state,
            read_timer: Box::pin(tokio::time::sleep_until(Instant::now())),
            write_timer: None,
            park: false,
            parked: false,
            in_hyper: false,
            gate: Gate::new(rules),
            eof: false,
            refused: false,
        }
    }

    /// Once a connection has been idle for [`PARK_AFTER`], end it for hyper
    /// (an end of file) instead of letting it wait for the next request:
    /// hyper holds 16 KB of buffers per connection while it waits, nginx
    /// less than 1 KB. The caller then waits for the
    /// socket itself ([`TimedIo::take_parked`]) and starts a new hyper
    /// connection when the next request comes. Only done when hyper
    /// certainly holds nothing: the last request had no body and the last
    /// bytes read ended its header, and the response is fully written.
    pub fn park_when_idle(&mut self, park: bool) {
        self.park = park;
    }

    /// Whether hyper's end of file was a parking (and resets it).
    pub fn take_parked(&mut self) -> bool {
        std::mem::take(&mut self.parked)
    }

    /// Bytes hyper had read but not used: they are read again first.
    pub fn unread(&mut self, bytes: &[u8]) {
        self.gate.unread(bytes);
    }

    /// hyper reads from now on (parking may end its connection).
    pub fn enter_hyper(&mut self) {
        self.in_hyper = true;
    }

    pub fn leave_hyper(&mut self) {
        self.in_hyper = false;
        self.gate.release();
    }

    /// The refused head, once hyper has finished what came before it.
    pub fn take_refusal(&mut self) -> Option<Refusal> {
        self.gate.take_refusal()
    }

    /// The invalid header lines the last head dropped (nginx logs each).
    pub fn take_dropped(&mut self) -> Vec<Vec<u8>> {
        self.gate.take_dropped()
    }

    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// When this connection, idle, may be handed back: [`PARK_AFTER`] into
    /// its idle time, if hyper certainly holds nothing of it.
    fn park_at(&self, idle_deadline: Instant) -> Option<Instant> {
        let keepalive = self.state.timeouts.keepalive;
        let quiet = self.park
            && keepalive > PARK_AFTER
            && self.in_hyper
            && self.write_timer.is_none()
            && self.gate.idle()
            && !self.state.with_body.load(Ordering::Relaxed);
        quiet.then(|| idle_deadline - keepalive + PARK_AFTER)
    }

    /// Pending write: fail once `send_timeout` passed without progress.
    fn poll_write_timer(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let send = self.state.timeouts.send;
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(send)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(self.state.expire(Expired::Send))
    }
}

use std::future::Future as _;

impl<T: AsyncRead + Unpin> TimedIo<T> {
    /// Waits, without hyper, for the next whole head (or the end).
    pub async fn next_head(&mut self) -> io::Result<Filled> {
        std::future::poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// Reads the socket until the gate has canonical bytes for hyper, the
    /// client ends, a head is refused, or a deadline passes.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Filled>> {
        loop {
            match self.gate.process() {
                Ok(Fill::Data) => {
                    // (0 from each new head on: hyper may read a body ahead
                    // of the request's handler.)
                    let declared = self.gate.declared_body();
                    self.state.declared_body.store(declared, Ordering::Relaxed);
                    return Poll::Ready(Ok(Filled::Data));
                }
                Ok(Fill::Refused) => {
                    self.refused = true;
                    // The requests before it are answered first: a request
                    // hyper still serves would be cut short by an end of file.
                    if self.in_hyper && self.state.serving() {
                        *self.state.waiting_read.lock() = Some(cx.waker().clone());
                        if self.state.serving() {
                            return self.poll_timers(cx).map_ok(|()| Filled::Refused);
                        }
                    }
                    return Poll::Ready(Ok(Filled::Refused));
                }
                Ok(Fill::NeedInput) => {}
                // (proxy::forward tells it from a client gone by the error.)
                Err(e) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
            }
            if self.eof {
                return Poll::Ready(Ok(Filled::Eof));
            }
            let want = self.gate.want();
            let (inner, gate) = (&mut self.inner, &mut self.gate);
            let read = SCRATCH.with_borrow_mut(|scratch| {
                let len = want.min(scratch.len());
                let mut rb = ReadBuf::new(&mut scratch[..len]);
                Pin::new(inner).poll_read(cx, &mut rb).map_ok(|()| {
                    gate.input().extend_from_slice(rb.filled());
                    rb.filled().len()
                })
            });
            match read {
                Poll::Ready(Ok(0)) => self.eof = true,
                Poll::Ready(Ok(_)) => self.state.received(),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    ready!(self.poll_timers(cx))?;
                    self.parked = true;
                    return Poll::Ready(Ok(Filled::Parked));
                }
            }
        }
    }

    /// Nothing to read: Pending until a deadline, an error when one has
    /// passed, Ok when an idle connection is to leave hyper.
    fn poll_timers(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((deadline, why)) = self.state.read_deadline() else {
            // Busy: no deadline yet, but hyper may not poll again once the
            // response ends. Keep the timer registered no later than any
            // deadline to come (it fires early and is moved, below), so
            // keepalive_timeout always starts.
            let soonest = self.state.timeouts.soonest(self.park);
            let latest = Instant::now() + soonest;
            if self.read_timer.deadline() > latest {
                self.read_timer.as_mut().reset(latest);
            }
            while self.read_timer.as_mut().poll(cx).is_ready() {
                self.read_timer.as_mut().reset(Instant::now() + soonest);
            }
            return Poll::Pending;
        };
        let park_at = match why {
            Expired::Idle => self.park_at(deadline),
            _ => None,
        };
        let wake_at = park_at.map_or(deadline, |p| p.min(deadline));
        // The deadline moves later with every request; the timer is only
        // moved earlier here, and when it fires early it is set to the
        // current deadline then: one timer update per timeout period
        // instead of one per request.
        if self.read_timer.deadline() > wake_at {
            self.read_timer.as_mut().reset(wake_at);
        }
        loop {
            ready!(self.read_timer.as_mut().poll(cx));
            let now = Instant::now();
            if now >= deadline {
                return Poll::Ready(Err(self.state.expire(why)));
            }
            match park_at {
                // Idle and quiet long enough: an end of file for hyper, the
                // caller waits for the socket.
                Some(p) if now >= p => return Poll::Ready(Ok(())),
                Some(p) => self.read_timer.as_mut().reset(p),
                None => self.read_timer.as_mut().reset(deadline),
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if ready!(this.poll_fill(cx))? == Filled::Data {
            let out = this.gate.output();
            let n = out.len().min(buf.remaining());
            buf.put_slice(&out[..n]);
            this.gate.consumed(n);
        }
        // Anything else is an end of file for hyper.
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(r) => {
                self.write_timer = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_write_timer(cx).map(Err),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(r) => {
                self.write_timer = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_write_timer(cx).map(Err),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.parked || self.refused {
            // Handed back, not closed: the client keeps its connection (or
            // is answered its refusal first).
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                self.write_timer = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_write_timer(cx).map(Err),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A response body that keeps `G` until it ends (its last frame, or an
/// error) or is dropped; `G`'s own `Drop` is the point: the connection turns
/// idle ([`Idle`]: `keepalive_timeout` starts then), a request's limit_conn
/// counts are released ([`crate::connlimit::Held`]).
pub struct UntilEnd<B, G> {
    inner: B,
    guard: Option<G>,
}

impl<B, G> UntilEnd<B, G> {
    pub fn new(inner: B, guard: G) -> UntilEnd<B, G> {
        UntilEnd {
            inner,
            guard: Some(guard),
        }
    }
}

impl<B: Body + Unpin, G: Unpin> Body for UntilEnd<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => this.guard = None,
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.guard = None,
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

/// Marks its connection idle when dropped (see [`UntilEnd`]).
pub struct Idle(pub Arc<ConnState>);

impl Drop for Idle {
    fn drop(&mut self) {
        self.0.idle();
    }
}

/// The request body, cut off with an error once it exceeds
/// `client_max_body_size` (for bodies without a Content-Length, or lying
/// about it). [`BodyLimit::exceeded`] tells the proxy to answer 413.
pub struct LimitedBody {
    inner: Incoming,
    max: u64,
    seen: u64,
    flag: BodyLimit,
    /// Its connection, to see what a chunked body announces before its
    /// bytes come.
    conn: Option<Arc<ConnState>>,
}

/// Shared with the proxy: did the body go over the limit, and how far.
#[derive(Clone, Default)]
pub struct BodyLimit(Arc<(AtomicBool, AtomicU64)>);

impl BodyLimit {
    pub fn exceeded(&self) -> bool {
        self.0.0.load(Ordering::Relaxed)
    }

    /// Bytes received when the limit was found exceeded.
    pub fn received(&self) -> u64 {
        self.0.1.load(Ordering::Relaxed)
    }
}

/// The body exceeded `client_max_body_size`.
#[derive(Debug, thiserror::Error)]
#[error("client intended to send too large body: more than {max} bytes")]
pub struct TooLarge {
    pub max: u64,
}

/// The error type of a [`LimitedBody`].
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

impl LimitedBody {
    /// `max` 0: unlimited, as nginx. With `conn`, a chunked body is also
    /// refused as soon as its chunk sizes announce more than `max`.
    pub fn new(
        inner: Incoming,
        max: u64,
        conn: Option<Arc<ConnState>>,
    ) -> (LimitedBody, BodyLimit) {
        let flag = BodyLimit::default();
        (
            LimitedBody {
                inner,
                max,
                seen: 0,
                flag: flag.clone(),
                conn,
            },
            flag,
        )
    }

    fn too_large(&mut self, size: u64) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.flag.0.1.store(size, Ordering::Relaxed);
        self.flag.0.0.store(true, Ordering::Relaxed);
        Poll::Ready(Some(Err(Box::new(TooLarge { max: self.max }))))
    }
}

impl Body for LimitedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let declared = this
            .conn
            .as_ref()
            .map_or(0, |c| c.declared_body.load(Ordering::Relaxed));
        if this.max > 0 && declared > this.max {
            return this.too_large(declared);
        }
        match ready!(polled) {
            Some(Ok(frame)) => {
                if let Some(d) = frame.data_ref() {
                    this.seen += d.len() as u64;
                    if this.max > 0 && this.seen > this.max {
                        return this.too_large(this.seen);
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => Poll::Ready(Some(Err(Box::new(e)))),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn timeouts() -> Timeouts {
        Timeouts {
            client_header: Duration::from_secs(5),
            keepalive: Duration::from_secs(20),
            send: Duration::from_secs(7),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn silent_client_times_out_after_client_header_timeout() {
        let (a, _b) = tokio::io::duplex(64);
        let state = ConnState::new(timeouts());
        let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
        let start = Instant::now();
        let mut buf = [0u8; 8];
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert_eq!(state.expired(), Some(Expired::Header));
    }

    /// An idle connection is handed back (an end of file, `take_parked`)
    /// PARK_AFTER into its idle time, but only when hyper certainly holds
    /// nothing: the last bytes ended a header and the request had no body.
    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_parked_only_when_quiet() {
        for (sent, reads, body, parks) in [
            (&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..], 1, false, true),
            (&b"GET / HTTP/1.1\nHost: x\n\n"[..], 1, false, true),
            (
                &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab"[..],
                2,
                true,
                false,
            ),
            (
                &b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /next HT"[..],
                1,
                false,
                false,
            ),
        ] {
            let (a, mut b) = tokio::io::duplex(256);
            let state = ConnState::new(timeouts());
            let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
            io.park_when_idle(true);
            io.enter_hyper();
            b.write_all(sent).await.unwrap();
            let mut buf = [0u8; 64];
            for _ in 0..reads {
                assert!(io.read(&mut buf).await.unwrap() > 0);
            }
            state.busy_with(body);
            state.idle();
            let start = Instant::now();
            let r = io.read(&mut buf).await;
            if parks {
                assert_eq!(r.unwrap(), 0, "{sent:?}");
                assert!(io.take_parked());
                assert_eq!(start.elapsed(), PARK_AFTER);
                assert_eq!(state.idle_deadline(), Some(start + timeouts().keepalive));
            } else {
                assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut, "{sent:?}");
                assert!(!io.take_parked());
                assert_eq!(start.elapsed(), timeouts().keepalive);
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn idle_uses_keepalive_then_header_timeout() {
        let (a, mut b) = tokio::io::duplex(64);
        let state = ConnState::new(timeouts());
        let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
        state.busy();
        // Busy: no deadline even after a long wait.
        let mut buf = [0u8; 8];
        let r = tokio::time::timeout(Duration::from_secs(100), io.read(&mut buf)).await;
        assert!(r.is_err(), "a busy connection has no read deadline");
        state.idle();
        let start = Instant::now();
        tokio::time::sleep(Duration::from_secs(19)).await;
        // A head begins: the gate keeps it (hyper gets nothing until it is
        // whole), and client_header_timeout runs from its first byte.
        b.write_all(b"GE").await.unwrap();
        let err = io.read(&mut buf).await.unwrap_err();
        assert!(matches!(state.phase(), Phase::Header { .. }));
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), Duration::from_secs(19 + 5));
        assert_eq!(state.expired(), Some(Expired::Header));

        let state = ConnState::new(timeouts());
        let (a, _b) = tokio::io::duplex(64);
        let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
        state.busy();
        state.idle();
        let start = Instant::now();
        io.read(&mut buf).await.unwrap_err();
        assert_eq!(start.elapsed(), Duration::from_secs(20));
        assert_eq!(state.expired(), Some(Expired::Idle));
    }

    /// hyper polls for the next request while a response is still being
    /// written, and may not poll again once it ends: the keep-alive timeout
    /// must start anyway, with nobody reading.
    #[tokio::test(start_paused = true)]
    async fn a_read_parked_while_busy_still_sees_keepalive_expire() {
        struct Flag(std::sync::atomic::AtomicBool);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let (a, _b) = tokio::io::duplex(64);
        let state = ConnState::new(timeouts());
        let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
        state.busy();
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = std::task::Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut buf = [0u8; 8];
        let mut rb = ReadBuf::new(&mut buf);
        assert!(Pin::new(&mut io).poll_read(&mut cx, &mut rb).is_pending());
        // The response ends 3 s later; nobody polls the read again.
        tokio::time::sleep(Duration::from_secs(3)).await;
        state.idle();
        let start = Instant::now();
        let mut woken_at = None;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if flag.0.swap(false, Ordering::SeqCst) {
                // Woken (maybe early): poll as hyper would.
                match Pin::new(&mut io).poll_read(&mut cx, &mut rb) {
                    Poll::Ready(Err(e)) => {
                        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
                        woken_at = Some(start.elapsed());
                        break;
                    }
                    Poll::Pending => {}
                    Poll::Ready(Ok(())) => panic!("no data was sent"),
                }
            }
        }
        let at = woken_at.expect("the parked read was never woken");
        assert!(
            at >= Duration::from_secs(20) && at <= Duration::from_millis(20_500),
            "{at:?}"
        );
        assert_eq!(state.expired(), Some(Expired::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn stalled_writes_time_out_after_send_timeout() {
        let (a, _b) = tokio::io::duplex(4);
        let state = ConnState::new(timeouts());
        let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
        let start = Instant::now();
        let err = io.write_all(b"more than four bytes").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), Duration::from_secs(7));
        assert_eq!(state.expired(), Some(Expired::Send));
    }
}
