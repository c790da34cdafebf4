//! A tunnel: the client's connection and the upstream's, joined both ways
//! after the upstream answered an upgrade request (WebSocket, …) with `101
//! Switching Protocols`, as nginx's `ngx_http_upstream_upgrade`.
//!
//! A tunnel is made when the 101 is read ([`respond`]), travels with the
//! client's 101 through the request's last phases (its access-log record,
//! [`log_at_close`]; its limit_conn counts, [`hand_over`]), is left with the
//! connection ([`crate::conn_state::ConnState::switch`]), and runs once the 101 is
//! written ([`run`]). Its rules:
//! - idle limit: no byte either way for `proxy_read_timeout` closes both
//!   sides (nginx re-arms its upstream read timer on every event of the
//!   tunnel, so it is an idle limit for both directions, logged as
//!   `upstream timed out … while proxying upgraded connection`);
//! - a write that makes no progress for `send_timeout` (to the client) or
//!   `proxy_send_timeout` (to the upstream) closes both;
//! - the bytes each side sent right after the handshake (the client's after
//!   its request, the upstream's after its head) are passed on first;
//! - half-close: an end of file from one side is passed on (the other's
//!   write side is shut down) once everything before it was written, and
//!   the other direction goes on until it ends too. nginx 1.22 closes both
//!   at the first end of file; passing it on loses nothing a protocol still
//!   sends after its peer stopped writing;
//! - the access-log line is written when the tunnel closes: status 101,
//!   `$request_time` and `$upstream_response_time` its whole life,
//!   `$body_bytes_sent` the bytes the client received through it (nginx
//!   counts them so); limit_conn counts are held as long as it is open
//!   (nginx frees them with the request);
//! - a graceful stop closes it at `shutdown_timeout`'s deadline (`stop`).

use crate::accesslog::Record;
use crate::body::Body;
use crate::conn_state::ConnState;
use crate::connlimit::Held;
use crate::errlog::{self, Severity};
use crate::metrics::Metrics;
use crate::upstream::{Duplex, Switched};
use bytes::{Buf, BytesMut};
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A tunnel's timeouts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `proxy_read_timeout`: no byte either way for this long closes it.
    pub(crate) idle: Duration,
    /// `send_timeout`: a write to the client may stall this long.
    pub(crate) to_client: Duration,
    /// `proxy_send_timeout`: a write to the upstream may stall this long.
    pub(crate) to_upstream: Duration,
}

/// Everything a tunnel needs besides the client's connection.
pub(crate) struct Tunnel {
    upstream: Switched,
    limits: Limits,
    /// The access-log line, written when it closes (or, if it never runs,
    /// when it is dropped).
    record: Option<Record>,
    /// limit_conn counts, released when it closes.
    held: Held,
    /// The connection's number and the context of its error-log lines
    /// (`, client: …, upstream: …, host: …`).
    conn: u64,
    context: Vec<u8>,
    /// When the 101 was read: `$upstream_response_time` runs on to the
    /// close, as nginx's does.
    switched_at: Instant,
}

impl Tunnel {
    pub(crate) fn new(upstream: Switched, limits: Limits, conn: u64, context: Vec<u8>) -> Tunnel {
        Tunnel {
            upstream,
            limits,
            record: None,
            held: Held::default(),
            conn,
            context,
            switched_at: Instant::now(),
        }
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        // Never run: the 101 could not be written.
        if let Some(r) = self.record.take() {
            r.write(0);
        }
    }
}

/// The tunnel of a 101 on its way through the request's phases (in the
/// response's extensions, which must be `Clone`).
#[derive(Clone)]
struct Handoff(Arc<Mutex<Option<Tunnel>>>);

/// The client's 101: the upstream's head (its `Upgrade`, its
/// `Sec-WebSocket-Accept`, …) with `Connection: upgrade` (as nginx's header
/// filter writes it), no body, and the tunnel to run once it is written.
pub(crate) fn respond(head: Response<()>, tunnel: Tunnel) -> Response<Body> {
    let (mut parts, ()) = head.into_parts();
    parts.status = StatusCode::SWITCHING_PROTOCOLS;
    parts
        .headers
        .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    parts
        .extensions
        .insert(Handoff(Arc::new(Mutex::new(Some(tunnel)))));
    let body = http_body_util::Empty::new().map_err(|e| match e {}).boxed();
    Response::from_parts(parts, body)
}

/// A tunnel's access-log line is written when it closes: `record` goes with
/// it if `resp` is a tunnel's 101, and comes back otherwise.
pub(crate) fn log_at_close(resp: &Response<Body>, record: Record) -> Option<Record> {
    let Some(h) = resp.extensions().get::<Handoff>() else {
        return Some(record);
    };
    match h.0.lock().as_mut() {
        Some(t) => {
            t.record = Some(record);
            None
        }
        None => Some(record),
    }
}

/// The end of a request's handling: a tunnel's 101 leaves its tunnel (and
/// `held`, the request's limit_conn counts) with the connection, which runs
/// it once the 101 is written; any other response keeps `held` until its
/// body has been sent (on HTTP/2, until its stream's end was written).
#[inline]
pub(crate) fn hand_over(
    mut resp: Response<Body>,
    held: Held,
    conn: &ConnState,
    version: http::Version,
) -> Response<Body> {
    let tunnel = resp
        .extensions_mut()
        .remove::<Handoff>()
        .and_then(|h| h.0.lock().take());
    match tunnel {
        Some(mut t) => {
            t.held = held;
            conn.switch(Box::new(t));
            resp
        }
        None if version == http::Version::HTTP_2 => held.keep_until_written(resp),
        None => held.keep_until_sent(resp),
    }
}

/// The tunnel [`hand_over`] left with the connection, if its request was
/// answered 101.
pub(crate) fn taken(conn: &ConnState) -> Option<Box<Tunnel>> {
    conn.take_switch()?.downcast::<Tunnel>().ok()
}

/// Why a tunnel closed.
#[derive(Debug)]
enum End {
    /// Both sides ended (each end of file passed on).
    Closed,
    /// No byte either way for the idle limit.
    Idle,
    /// A graceful stop reached its deadline.
    Stopped,
    /// One side failed: which, and how.
    Failed(Side, Failure),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Client,
    Upstream,
}

#[derive(Debug)]
enum Failure {
    Read(io::Error),
    Write(io::Error),
    /// A write made no progress for its timeout.
    Stalled,
}

/// Runs `tunnel` between `client` (whose bytes `first` are passed on
/// before any read) and its upstream until both sides have ended, one
/// fails, it is idle too long, or `stop` completes; then closes both, and
/// writes its access-log line and, if it did not just end, nginx's info line.
pub(crate) async fn run<C>(
    mut tunnel: Box<Tunnel>,
    client: &mut C,
    first: BytesMut,
    metrics: &Metrics,
    stop: impl Future<Output = ()>,
) where
    C: AsyncRead + AsyncWrite + Unpin,
{
    metrics.tunnel_opened();
    let limits = tunnel.limits;
    let early = std::mem::take(&mut tunnel.upstream.early);
    let mut up = Pipe::new(first, limits.to_upstream);
    let mut down = Pipe::new(early, limits.to_client);
    let io: &mut dyn Duplex = &mut *tunnel.upstream.io;
    let end = join(client, io, (&mut up, &mut down), limits.idle, metrics, stop).await;
    metrics.tunnel_closed();
    if let Some(mut r) = tunnel.record.take() {
        let life = tunnel.switched_at.elapsed().as_millis() as u64;
        if let Some(last) = r.upstream.last_mut() {
            last.ms += life;
        }
        r.write(down.bytes);
    }
    log_end(&tunnel, &end);
}

/// Both directions until the tunnel ends.
async fn join<C>(
    client: &mut C,
    upstream: &mut dyn Duplex,
    (up, down): (&mut Pipe, &mut Pipe),
    idle: Duration,
    metrics: &Metrics,
    stop: impl Future<Output = ()>,
) -> End
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let mut stop = std::pin::pin!(stop);
    let mut last = Instant::now();
    let mut timer = Box::pin(tokio::time::sleep_until(last + idle));
    let (mut counted_up, mut counted_down) = (0, 0);
    std::future::poll_fn(|cx| {
        let ups = up.poll(cx, client, upstream);
        let downs = down.poll(cx, upstream, client);
        metrics.tunnel_bytes(down.bytes - counted_down, up.bytes - counted_up);
        (counted_up, counted_down) = (up.bytes, down.bytes);
        if let Poll::Ready(Err((at, f))) = ups {
            let side = if at == Stage::Reading {
                Side::Client
            } else {
                Side::Upstream
            };
            return Poll::Ready(End::Failed(side, f));
        }
        if let Poll::Ready(Err((at, f))) = downs {
            let side = if at == Stage::Reading {
                Side::Upstream
            } else {
                Side::Client
            };
            return Poll::Ready(End::Failed(side, f));
        }
        if ups.is_ready() && downs.is_ready() {
            return Poll::Ready(End::Closed);
        }
        if stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(End::Stopped);
        }
        if std::mem::take(&mut up.active) | std::mem::take(&mut down.active) {
            last = Instant::now();
        }
        // The timer moves only when it fires early (one reset per idle
        // period, not one per read).
        while timer.as_mut().poll(cx).is_ready() {
            if Instant::now() >= last + idle {
                return Poll::Ready(End::Idle);
            }
            timer.as_mut().reset(last + idle);
        }
        Poll::Pending
    })
    .await
}

/// nginx's info line for a tunnel that did not just end.
fn log_end(tunnel: &Tunnel, end: &End) {
    let (who, what) = match end {
        End::Closed | End::Stopped => return,
        End::Idle | End::Failed(Side::Upstream, Failure::Stalled) => (
            "upstream timed out",
            "110: Connection timed out".to_string(),
        ),
        End::Failed(Side::Client, Failure::Stalled) => {
            ("client timed out", "110: Connection timed out".to_string())
        }
        End::Failed(_, Failure::Read(e)) => ("recv() failed", errlog::os_error(e)),
        End::Failed(_, Failure::Write(e)) => ("send() failed", errlog::os_error(e)),
    };
    errlog::emit_with(Severity::Info, |out| {
        out.push(b'*');
        errlog::push_u64(out, tunnel.conn);
        out.push(b' ');
        errlog::push_fmt(
            out,
            format_args!("{who} ({what}) while proxying upgraded connection"),
        );
        out.extend_from_slice(&tunnel.context);
    });
}

/// Where a direction failed: reading its source or writing its sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Reading,
    Writing,
}

/// Reads go into one buffer per worker and are written on at once; only
/// what the other side could not take yet is kept, so an idle tunnel holds
/// no buffer.
const READ_CHUNK: usize = 16 * 1024;

thread_local! {
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; READ_CHUNK].into_boxed_slice());
}

/// Reads a direction makes in one poll before letting the other (and other
/// connections) run.
const READS_PER_POLL: usize = 16;

/// One direction of a tunnel: bytes read from one side, written to the
/// other, and the end of file passed on.
struct Pipe {
    /// Read and not yet written (the other side was slow).
    held: BytesMut,
    /// The source ended: pass it on once `held` is written.
    eof: bool,
    /// The end was passed on: this direction is done.
    done: bool,
    /// Written since the last flush.
    need_flush: bool,
    /// Bytes written to the sink.
    bytes: u64,
    /// Bytes moved (or the end came) since the tunnel last looked.
    active: bool,
    /// A write is waiting: it fails when this fires.
    stall: Option<Pin<Box<Sleep>>>,
    stall_limit: Duration,
}

type Polled = Poll<Result<(), (Stage, Failure)>>;

impl Pipe {
    fn new(first: BytesMut, stall_limit: Duration) -> Pipe {
        Pipe {
            held: first,
            eof: false,
            done: false,
            need_flush: false,
            bytes: 0,
            active: false,
            stall: None,
            stall_limit,
        }
    }

    /// Moves bytes from `from` to `to` as far as they go: Ready(Ok) once the
    /// end of `from` was passed on to `to`.
    fn poll<R, W>(&mut self, cx: &mut Context<'_>, from: &mut R, to: &mut W) -> Polled
    where
        R: AsyncRead + Unpin + ?Sized,
        W: AsyncWrite + Unpin + ?Sized,
    {
        for _ in 0..READS_PER_POLL {
            if self.done {
                return Poll::Ready(Ok(()));
            }
            while !self.held.is_empty() {
                match Pin::new(&mut *to).poll_write(cx, &self.held) {
                    Poll::Ready(Ok(0)) => {
                        let e = io::Error::from(io::ErrorKind::WriteZero);
                        return Poll::Ready(Err((Stage::Writing, Failure::Write(e))));
                    }
                    Poll::Ready(Ok(n)) => {
                        self.held.advance(n);
                        self.wrote(n);
                    }
                    Poll::Ready(Err(e)) => {
                        return Poll::Ready(Err((Stage::Writing, Failure::Write(e))));
                    }
                    Poll::Pending => return self.stalled(cx),
                }
            }
            if self.eof {
                // Everything before the end is written: pass the end on (a
                // sink already gone has nothing more to be told).
                if Pin::new(&mut *to).poll_shutdown(cx).is_pending() {
                    return self.stalled(cx);
                }
                self.done = true;
                return Poll::Ready(Ok(()));
            }
            match self.read_on(cx, from, to) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending if self.need_flush => match Pin::new(&mut *to).poll_flush(cx) {
                    Poll::Ready(Ok(())) => {
                        self.need_flush = false;
                        self.stall = None;
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(e)) => {
                        return Poll::Ready(Err((Stage::Writing, Failure::Write(e))));
                    }
                    Poll::Pending => return self.stalled(cx),
                },
                Poll::Pending => return Poll::Pending,
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// One read from `from`, written on to `to` at once; what `to` does not
    /// take is held. Ready(Ok) when something (or the end) was read.
    fn read_on<R, W>(&mut self, cx: &mut Context<'_>, from: &mut R, to: &mut W) -> Polled
    where
        R: AsyncRead + Unpin + ?Sized,
        W: AsyncWrite + Unpin + ?Sized,
    {
        SCRATCH.with_borrow_mut(|scratch| {
            let mut rb = ReadBuf::new(&mut scratch[..]);
            match Pin::new(&mut *from).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(Err((Stage::Reading, Failure::Read(e))));
                }
                Poll::Ready(Ok(())) => {}
            }
            let data = rb.filled();
            self.active = true;
            if data.is_empty() {
                self.eof = true;
                return Poll::Ready(Ok(()));
            }
            match Pin::new(&mut *to).poll_write(cx, data) {
                Poll::Ready(Ok(n)) => {
                    self.wrote(n);
                    self.held.extend_from_slice(&data[n..]);
                }
                Poll::Pending => self.held.extend_from_slice(data),
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(Err((Stage::Writing, Failure::Write(e))));
                }
            }
            Poll::Ready(Ok(()))
        })
    }

    fn wrote(&mut self, n: usize) {
        self.bytes += n as u64;
        self.need_flush = true;
        self.active = true;
        self.stall = None;
        if self.held.is_empty() && self.held.capacity() > 0 {
            // Nothing waits: the buffer goes back.
            self.held = BytesMut::new();
        }
    }

    /// The sink takes nothing for now: fail once it has taken nothing for
    /// the stall limit.
    fn stalled(&mut self, cx: &mut Context<'_>) -> Polled {
        let limit = self.stall_limit;
        let timer = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err((Stage::Writing, Failure::Stalled))),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests;
