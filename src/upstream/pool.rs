//! Upstream connections, and the ones kept alive between requests: nginx's
//! `keepalive` cache, one per worker thread.
//!
//! Why per worker and lock-free: a request runs on its worker's
//! current-thread runtime from start to end, so the connection it takes
//! and gives back never crosses threads; a thread-local list needs no lock,
//! no channel and no task per connection. A connection is checked in by the
//! response body the moment its last byte is read (see `super::body`), and
//! one sweeper task per worker closes those that expired or that the
//! upstream closed, so they do not sit in CLOSE_WAIT.

use super::Error;
use bytes::BytesMut;
use http::uri::Authority;
use std::cell::RefCell;
use std::io;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::net::TcpStream;

/// Idle connections kept per upstream and worker thread.
const MAX_IDLE: usize = 512;
/// A connection idle for longer is closed, not reused (nginx's upstream
/// `keepalive_timeout` default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often each worker closes idle connections that expired or that the
/// upstream closed.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// Read buffer growth.
pub(super) const READ_CHUNK: usize = 8 * 1024;

/// One upstream connection and its buffers, reused with it.
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) read: BytesMut,
    pub(super) write: Vec<u8>,
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

    /// The list for `key`, made on its first check-in.
    fn list_or_new(&mut self, key: &Authority) -> &mut Vec<Idle> {
        let k = key.as_str().as_bytes();
        let at = match self
            .idle
            .iter()
            .position(|(a, _)| a.as_str().as_bytes() == k)
        {
            Some(at) => at,
            None => {
                self.idle.push((key.clone(), Vec::new()));
                self.idle.len() - 1
            }
        };
        &mut self.idle[at].1
    }
}

/// A kept-alive connection to `key` that is still fit for a request, if
/// this worker has one.
pub(super) fn checkout(key: &Authority) -> Option<Conn> {
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

/// Keeps `conn` for the next request to `key` (up to [`MAX_IDLE`]), and
/// starts this worker's sweeper the first time.
pub(super) fn checkin(key: &Authority, conn: Conn) {
    let start_sweeper = IDLE.with(|p| {
        let mut p = p.borrow_mut();
        let since = p.sweeps;
        let list = p.list_or_new(key);
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

/// A new connection to `upstream`, within `proxy_connect_timeout`.
pub(super) async fn connect(upstream: &Authority, timeout: Duration) -> Result<Conn, Error> {
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
