//! One client connection as its reader and its requests share it: its
//! timeouts and phase (header, busy, idle), which timeout ended it, and what
//! a chunked body being read has announced.
//!
//! nginx's directives:
//! - `client_header_timeout`: a new connection must deliver a request header
//!   within it (a client that connects and sends nothing is dropped), and a
//!   header that has begun must be complete within it;
//! - `keepalive_timeout`: how long a connection may sit idle between
//!   requests;
//! - `send_timeout`: how long the client may take to accept more of a
//!   response (no progress in writing for that long closes the connection).
//!
//! The reader ([`crate::server::io::TimedIo`]) applies the deadline of the
//! connection's [`Phase`]; the service marks a request [`ConnState::busy`]
//! when hyper hands it over, and the response body marks the connection idle
//! when it ends ([`crate::body::Watched`] by [`Idle`]).

use parking_lot::Mutex;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// The timeouts of one client connection, from its server's configuration
/// (the upstream side's are [`crate::upstream::UpstreamTimeouts`]).
#[derive(Clone, Copy, Debug)]
pub struct ClientTimeouts {
    /// `client_header_timeout`.
    pub client_header: Duration,
    /// `keepalive_timeout`.
    pub keepalive: Duration,
    /// `send_timeout`: a write of the response to the client may stall
    /// this long.
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

/// The phase of a connection, shared by its I/O and its service.
pub struct ConnState {
    pub(crate) phase: Mutex<Phase>,
    pub(crate) timeouts: ClientTimeouts,
    pub(crate) expired: Mutex<Option<Expired>>,
    /// The request being (or last) served came with a body.
    pub(crate) with_body: AtomicBool,
    /// A read that waits for the request being served to end (a refused
    /// pipelined head is answered then): woken by [`ConnState::idle`].
    pub(crate) waiting_read: Mutex<Option<std::task::Waker>>,
    /// What the chunked body being read has announced (see
    /// [`crate::client_body::LimitedBody`]).
    pub(crate) declared_body: AtomicU64,
    /// The request being served is answered 101: the connection becomes a
    /// tunnel once the answer is written (see [`crate::http1::Gate`]), with
    /// this (the request layer's tunnel, opaque here) for its other side.
    pub(crate) switching: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

impl ConnState {
    /// A new connection: its header is due within `client_header_timeout`.
    #[cfg(test)]
    pub fn new(timeouts: ClientTimeouts) -> Arc<ConnState> {
        ConnState::until(timeouts, crate::clock::now() + timeouts.client_header)
    }

    /// A connection whose header is due by `deadline` (one that was parked
    /// before it sent anything keeps the deadline of its accept).
    pub fn until(timeouts: ClientTimeouts, deadline: Instant) -> Arc<ConnState> {
        Arc::new(ConnState {
            phase: Mutex::new(Phase::Header { deadline }),
            timeouts,
            expired: Mutex::new(None),
            with_body: AtomicBool::new(false),
            waiting_read: Mutex::new(None),
            declared_body: AtomicU64::new(0),
            switching: Mutex::new(None),
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
    #[cfg(test)]
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
                deadline: crate::clock::now() + self.timeouts.keepalive,
            };
        }
        drop(p);
        if let Some(w) = self.waiting_read.lock().take() {
            w.wake();
        }
    }

    /// The request being served switches protocols (its 101 is on the
    /// way); `tunnel` is for the connection to take once it is written.
    pub fn switch(&self, tunnel: Box<dyn std::any::Any + Send>) {
        *self.switching.lock() = Some(tunnel);
    }

    /// A switch is on the way and not yet taken.
    pub fn switching(&self) -> bool {
        self.switching.lock().is_some()
    }

    /// What [`ConnState::switch`] left for the connection.
    pub fn take_switch(&self) -> Option<Box<dyn std::any::Any + Send>> {
        self.switching.lock().take()
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
    pub(crate) fn received(&self) {
        let mut p = self.phase.lock();
        if let Phase::Idle { .. } = *p {
            *p = Phase::Header {
                deadline: crate::clock::now() + self.timeouts.client_header,
            };
        }
    }

    pub(crate) fn read_deadline(&self) -> Option<(Instant, Expired)> {
        match *self.phase.lock() {
            Phase::Header { deadline } => Some((deadline, Expired::Header)),
            Phase::Idle { deadline } => Some((deadline, Expired::Idle)),
            Phase::Busy => None,
        }
    }

    pub(crate) fn expire(&self, why: Expired) -> io::Error {
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

/// Marks its connection idle when dropped: with its response body, once
/// that ended (see [`crate::body::Watched`]).
pub struct Idle(pub Arc<ConnState>);

impl crate::body::Watch for Idle {}

impl Drop for Idle {
    fn drop(&mut self) {
        self.0.idle();
    }
}
/// One client connection.
pub(crate) struct Conn {
    pub(crate) id: u64,
    /// Its peer: the client, or the load balancer before it.
    pub(crate) remote: SocketAddr,
    pub(crate) local: SocketAddr,
    /// What its PROXY protocol header named (`listen … proxy_protocol`;
    /// `None` elsewhere, and for headers naming no addresses). Boxed: a
    /// connection without one carries a pointer's room.
    pub(crate) proxy: Option<Box<crate::proxy_protocol::Addresses>>,
    /// The configured `listen` of its server.
    pub(crate) listen: SocketAddr,
    /// Its phase and what its reader saw.
    pub(crate) state: Arc<ConnState>,
    /// What its TLS handshake settled, if it speaks TLS.
    pub(crate) tls: Option<Arc<crate::tls::Session>>,
    /// It spoke plain HTTP to an `ssl` address: its requests get 400.
    pub(crate) plain_on_https: bool,
}

/// `send_timeout` over one connection's writes: a wait starts when a write
/// cannot go on and ends when one makes progress; when a wait lasts
/// `send_timeout` the connection expires (`Expired::Send`), as nginx's
/// `ngx_add_timer(wev, send_timeout)` on an incomplete write. The timer is
/// kept across waits (each wait's end is later than the one before: it is
/// only moved when it fires early), not made and dropped per blocked write;
/// it may fire once after a wait ended, waking the task for nothing. The
/// HTTP/1.1 and HTTP/2 connections share it.
#[derive(Default)]
pub(crate) struct SendTimer(crate::clock::WaitTimer);

impl SendTimer {
    /// A write is pending: Ready with the connection's error once
    /// `send_timeout` passed since this wait began (now, if none had).
    pub(crate) fn poll_expired(
        &mut self,
        cx: &mut std::task::Context<'_>,
        state: &ConnState,
    ) -> std::task::Poll<io::Error> {
        let send = state.timeouts.send;
        self.0
            .poll_expired(cx, send)
            .map(|()| state.expire(Expired::Send))
    }

    /// A write made progress (or none is pending): the wait is over.
    pub(crate) fn progress(&mut self) {
        self.0.done();
    }

    pub(crate) fn is_armed(&self) -> bool {
        self.0.waiting()
    }
}
