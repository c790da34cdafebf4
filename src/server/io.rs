//! The client socket, read through the request-head gate
//! ([`crate::http1::Gate`]) and bounded by the connection's deadlines.
//!
//! "The server" below is what serves the HTTP/1.1 requests read here:
//! sluice's own loop ([`super::h1`], which takes whole heads from the gate),
//! or hyper's HTTP/1.1 server, kept behind `SLUICE_HTTP1_HYPER=1` for the
//! differential test (it reads the canonical bytes through `AsyncRead`).
//!
//! A server's own header timeout (hyper's `header_read_timeout`) cannot
//! express nginx's `client_header_timeout` and `keepalive_timeout`: it
//! starts whenever the connection waits for a request, so it also bounds
//! keep-alive idle time, with one value for both. [`TimedIo`] wraps the
//! socket instead and applies the right deadline for the connection's
//! [`Phase`] (see [`crate::conn_state`]). It also hands idle keep-alive
//! connections back to be parked, so that a waiting connection holds no
//! buffer but the bytes it sent.
//!
//! After an upgrade request the gate holds the bytes that follow until the
//! request is answered: a 101 ([`crate::conn_state::ConnState::switching`]) turns
//! the connection into a tunnel ([`TimedIo::start_tunnel`]: no gate, no
//! deadline, the tunnel keeps its own), any other answer lets the gate read
//! on once it has been sent.

use crate::conn_state::{ClientTimeouts, ConnState, Expired, Phase};
use crate::http1::{Fill, Gate, HeadRules, Refusal};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// How long a keep-alive connection stays with the server, idle, before it
/// is handed back to wait without the server's buffers ([`TimedIo::park_when_idle`]).
/// Under load a connection is never idle that long, so it is not re-created
/// per request.
pub(crate) const PARK_AFTER: Duration = Duration::from_secs(1);

impl ClientTimeouts {
    /// The shortest wait a read deadline can have (keep-alive, header, or
    /// the time an idle connection is parked after, if it may be).
    /// (Read by a busy connection's every poll of its timers: plain
    /// comparisons, inlined.)
    #[inline]
    pub(crate) fn soonest(&self, park: bool) -> Duration {
        let park = if park && self.keepalive > PARK_AFTER {
            PARK_AFTER
        } else {
            Duration::ZERO
        };
        let mut soonest = Duration::MAX;
        for d in [self.keepalive, self.client_header, park] {
            if !d.is_zero() && d < soonest {
                soonest = d;
            }
        }
        if soonest == Duration::MAX {
            Duration::from_secs(60)
        } else {
            soonest
        }
    }
}

/// A client socket whose reads and writes obey the connection's deadlines.
pub(crate) struct TimedIo<T> {
    pub(crate) inner: T,
    pub(crate) state: Arc<ConnState>,
    pub(crate) read_timer: crate::clock::Timer,
    /// When a write started waiting (`send_timeout` runs from there).
    pub(crate) write_timer: crate::conn_state::SendTimer,
    /// Hand an idle connection back instead of waiting in the server.
    pub(crate) park: bool,
    /// Hand back a connection waiting, outside the server, for a head it has
    /// sent nothing of, but not before then (its caller parks it; see
    /// [`TimedIo::park_silent`]).
    pub(crate) park_silent: Option<Instant>,
    /// It was handed back (the end of file the server saw was not the client's).
    pub(crate) parked: bool,
    /// The server is reading (parking applies only then).
    pub(crate) serving: bool,
    /// What the server may read: canonical requests only (see [`crate::http1`]).
    pub(crate) gate: Gate,
    /// The socket has ended.
    pub(crate) eof: bool,
    /// A head was refused: the server was given an end of file, the refusal is
    /// answered by the connection, which then closes.
    pub(crate) refused: bool,
    /// The connection switched protocols: bytes pass as they are.
    pub(crate) tunnel: bool,
}

/// What the socket gave, as far as the server is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Filled {
    /// Canonical bytes are ready.
    Data,
    /// The client ended the connection.
    Eof,
    /// A head was refused ([`TimedIo::take_refusal`]).
    Refused,
    /// Idle long enough to leave the server ([`TimedIo::park_when_idle`]).
    Parked,
    /// A whole head, with a gate that gives heads whole
    /// ([`crate::http1::Gate::whole_heads`]).
    Head,
}

thread_local! {
    /// Each worker reads into one buffer and keeps only what a connection
    /// needs: an idle connection holds no read buffer (as nginx frees its
    /// `client_header_buffer_size` buffer when a read finds nothing).
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; 16 * 1024].into_boxed_slice());
}

impl<T> TimedIo<T> {
    pub(crate) fn new(inner: T, state: Arc<ConnState>, rules: HeadRules) -> TimedIo<T> {
        TimedIo {
            inner,
            state,
            read_timer: crate::clock::Timer::at(crate::clock::now()),
            write_timer: crate::conn_state::SendTimer::default(),
            park: false,
            park_silent: None,
            parked: false,
            serving: false,
            gate: Gate::new(rules),
            eof: false,
            refused: false,
            tunnel: false,
        }
    }

    /// The connection switched protocols (its 101 is written): from now on
    /// reads and writes go straight to the socket, with no deadline. Returns
    /// the client's bytes to pass on first: `unread` (read by the server, not
    /// used),
    /// then what the gate held.
    pub(crate) fn start_tunnel(&mut self, unread: &[u8]) -> bytes::BytesMut {
        self.tunnel = true;
        self.write_timer.progress();
        let held = self.gate.tunnel();
        let mut first = bytes::BytesMut::with_capacity(unread.len() + held.len());
        first.extend_from_slice(unread);
        first.extend_from_slice(&held);
        first
    }

    /// The upgrade request the gate holds after was answered, and not with
    /// a switch: what follows it is the next request.
    fn answered_without_switch(&self) -> bool {
        !self.state.switching() && matches!(self.state.phase(), Phase::Idle { .. })
    }

    /// Once a connection has been idle for [`PARK_AFTER`], end it for the
    /// server ([`Filled::Parked`]; an end of file for hyper) instead of
    /// letting it wait for the next request: a waiting task and its buffers
    /// cost kilobytes per connection (hyper's 16 KB), nginx's less than
    /// 1 KB. The caller then parks the socket ([`TimedIo::take_parked`])
    /// and serves it again when the next request comes. Only done when the
    /// server certainly holds nothing: the last request had no body and the last
    /// bytes read ended its header, and the response is fully written.
    pub(crate) fn park_when_idle(&mut self, park: bool) {
        self.park = park;
    }

    /// A connection that has sent nothing of its next head (a new one, or
    /// one just resumed) is handed back too, [`PARK_AFTER`] into its
    /// `client_header_timeout`: [`TimedIo::next_head`] gives
    /// [`Filled::Parked`], and the caller parks the socket.
    ///
    /// Never sooner than [`PARK_AFTER`] from now: a connection resumed
    /// because its socket became readable may find nothing at its first
    /// read (tokio learns a new registration's readiness at its next turn),
    /// and a silent one resumed past its own parking time would otherwise
    /// be parked again at once, resumed again at once, and so on, a loop
    /// that keeps its worker busy and never reads the request.
    pub(crate) fn park_silent(&mut self, park: bool) {
        self.park_silent = park.then(|| crate::clock::now() + PARK_AFTER);
    }

    /// Whether the server's end was a parking (and resets it).
    pub(crate) fn take_parked(&mut self) -> bool {
        std::mem::take(&mut self.parked)
    }

    /// Bytes the server had read but not used: they are read again first.
    pub(crate) fn unread(&mut self, bytes: &[u8]) {
        self.gate.unread(bytes);
    }

    /// The server reads from now on (parking may end its connection).
    pub(crate) fn start_serving(&mut self) {
        self.serving = true;
    }

    /// The server is done with the connection.
    pub(crate) fn stop_serving(&mut self) {
        self.serving = false;
        self.gate.release();
    }

    /// The refused head, once the server has finished what came before it.
    pub(crate) fn take_refusal(&mut self) -> Option<Refusal> {
        self.gate.take_refusal()
    }

    /// The invalid header lines the last head dropped (nginx logs each).
    pub(crate) fn take_dropped(&mut self) -> Vec<Vec<u8>> {
        self.gate.take_dropped()
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// When this connection, idle, may be handed back: [`PARK_AFTER`] into
    /// its idle time, if the server certainly holds nothing of it.
    pub(crate) fn park_at(&self, idle_deadline: Instant) -> Option<Instant> {
        let keepalive = self.state.timeouts.keepalive;
        let quiet = self.park
            && keepalive > PARK_AFTER
            && self.serving
            && !self.write_timer.is_armed()
            && self.gate.idle()
            && !self.state.with_body.load(Ordering::Relaxed);
        quiet.then(|| idle_deadline - keepalive + PARK_AFTER)
    }

    /// When a connection waiting for a head it has sent nothing of may be
    /// handed back: [`PARK_AFTER`] into its `client_header_timeout`.
    fn park_silent_at(&self, header_deadline: Instant) -> Option<Instant> {
        let header = self.state.timeouts.client_header;
        let earliest = self.park_silent?;
        let quiet = header > PARK_AFTER && !self.serving && self.gate.idle();
        quiet.then(|| (header_deadline - header + PARK_AFTER).max(earliest))
    }

    /// Pending write: fail once `send_timeout` passed without progress.
    pub(crate) fn poll_write_timer(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        self.write_timer.poll_expired(cx, &self.state)
    }
}

impl<T: AsyncRead + Unpin> TimedIo<T> {
    /// Waits for the next whole head (or the end): sluice's own loop.
    pub(crate) async fn next_head(&mut self) -> io::Result<Filled> {
        std::future::poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// Reads the socket until the gate has canonical bytes for the server, the
    /// client ends, a head is refused, or a deadline passes.
    pub(crate) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Filled>> {
        loop {
            match self.gate.process() {
                Ok(Fill::Data) => {
                    // (0 from each new head on: the server may read a body ahead
                    // of the request's handler.)
                    let declared = self.gate.declared_body();
                    self.state.declared_body.store(declared, Ordering::Relaxed);
                    return Poll::Ready(Ok(Filled::Data));
                }
                Ok(Fill::Refused) => {
                    self.refused = true;
                    // The requests before it are answered first: a request
                    // the server still serves would be cut short by an end of file.
                    if self.serving && self.state.serving() {
                        *self.state.waiting_read.lock() = Some(cx.waker().clone());
                        if self.state.serving() {
                            return self.poll_timers(cx).map_ok(|()| Filled::Refused);
                        }
                    }
                    return Poll::Ready(Ok(Filled::Refused));
                }
                Ok(Fill::Held) => {
                    if self.answered_without_switch() {
                        self.gate.resume();
                        continue;
                    }
                    // Woken when the answer has been sent (ConnState::idle).
                    *self.state.waiting_read.lock() = Some(cx.waker().clone());
                    if self.answered_without_switch() {
                        self.gate.resume();
                        continue;
                    }
                    // (No parking: the gate is not idle.)
                    ready!(self.poll_timers(cx))?;
                    return Poll::Pending;
                }
                Ok(Fill::Head) => {
                    // (0 for the new request's body so far.)
                    let declared = self.gate.declared_body();
                    self.state.declared_body.store(declared, Ordering::Relaxed);
                    return Poll::Ready(Ok(Filled::Head));
                }
                // (A body's end is the loop's to see, through poll_body.)
                Ok(Fill::NeedInput | Fill::BodyEnd) => {}
                // (proxy::forward tells it from a client gone by the error.)
                Err(e) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
            }
            if self.eof {
                return Poll::Ready(Ok(Filled::Eof));
            }
            if self.poll_read_more(cx)?.is_pending() {
                ready!(self.poll_timers(cx))?;
                self.parked = true;
                return Poll::Ready(Ok(Filled::Parked));
            }
        }
    }

    /// One read of the socket into the gate (its end of file noted).
    fn poll_read_more(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
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
        match ready!(read)? {
            0 => self.eof = true,
            _ => self.state.received(),
        }
        Poll::Ready(Ok(()))
    }

    /// The current request's body data, as far as it has come (with a
    /// gate that gives heads whole), and whether that was the last of it;
    /// `None` once it has all been given. No deadline: the request keeps its
    /// own (`client_body_timeout`). Data is empty when only what a chunked
    /// body announced changed.
    pub(crate) fn poll_body(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Option<(bytes::BytesMut, bool)>>> {
        let before = self.gate.declared_body();
        loop {
            let fill = self.gate.process();
            let declared = self.gate.declared_body();
            self.state.declared_body.store(declared, Ordering::Relaxed);
            match fill {
                Ok(Fill::Data) => {
                    let data = std::mem::take(self.gate.output());
                    let last = self.gate.body_ending();
                    if last {
                        // (It says BodyEnd now: nothing else is held.)
                        let _ = self.gate.process();
                    }
                    return Poll::Ready(Ok(Some((data, last))));
                }
                Ok(Fill::NeedInput) if declared != before => {
                    return Poll::Ready(Ok(Some((bytes::BytesMut::new(), false))));
                }
                Ok(Fill::NeedInput) => {}
                Ok(_) => return Poll::Ready(Ok(None)),
                Err(e) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
            }
            if self.eof {
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
            ready!(self.poll_read_more(cx))?;
        }
    }

    /// Nothing to read: Pending until a deadline, an error when one has
    /// passed, Ok when an idle connection is to leave the server.
    pub(crate) fn poll_timers(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((deadline, why)) = self.state.read_deadline() else {
            // Busy: no deadline yet, but the server may not poll again once the
            // response ends. Keep the timer registered no later than any
            // deadline to come (it fires early and is moved, below), so
            // keepalive_timeout always starts.
            let soonest = self.state.timeouts.soonest(self.park);
            let latest = crate::clock::now() + soonest;
            if self.read_timer.deadline() > latest {
                self.read_timer.reset(latest);
            }
            while self.read_timer.poll(cx).is_ready() {
                self.read_timer.reset(crate::clock::now() + soonest);
            }
            return Poll::Pending;
        };
        let park_at = match why {
            Expired::Idle => self.park_at(deadline),
            Expired::Header => self.park_silent_at(deadline),
            Expired::Send => None,
        };
        let wake_at = park_at.map_or(deadline, |p| p.min(deadline));
        // The deadline moves later with every request; the timer is only
        // moved earlier here, and when it fires early it is set to the
        // current deadline then: one timer update per timeout period
        // instead of one per request.
        if self.read_timer.deadline() > wake_at {
            self.read_timer.reset(wake_at);
        }
        loop {
            ready!(self.read_timer.poll(cx));
            let now = crate::clock::now();
            if now >= deadline {
                return Poll::Ready(Err(self.state.expire(why)));
            }
            match park_at {
                // Idle and quiet long enough: the server lets the connection
                // go, the caller waits for the socket.
                Some(p) if now >= p => return Poll::Ready(Ok(())),
                Some(p) => self.read_timer.reset(p),
                None => self.read_timer.reset(deadline),
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
        if this.tunnel {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        if ready!(this.poll_fill(cx))? == Filled::Data {
            let out = this.gate.output();
            let n = out.len().min(buf.remaining());
            buf.put_slice(&out[..n]);
            this.gate.consumed(n);
        }
        // Anything else is an end of file for hyper (this is its reader).
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.tunnel {
            return Pin::new(&mut self.inner).poll_write(cx, buf);
        }
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(r) => {
                self.write_timer.progress();
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_write_timer(cx).map(Err),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.tunnel {
            return Pin::new(&mut self.inner).poll_flush(cx);
        }
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(r) => {
                self.write_timer.progress();
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
        if self.tunnel {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        }
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                self.write_timer.progress();
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_write_timer(cx).map(Err),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
#[path = "io_tests.rs"]
mod tests;
