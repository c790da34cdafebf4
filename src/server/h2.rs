//! HTTP/2 to clients: hyper's HTTP/2 server on one client connection, each
//! stream a request through [`crate::request::handle`], exactly as an HTTP/1.1
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
//!   than one buffer (`:authority`, the `Host` it becomes, too) 400 and a
//!   `:path` longer than one buffer 414, as the same head over HTTP/1.1;
//! - rapid reset (CVE-2023-44487): streams reset before hyper accepted them
//!   (20, the h2 crate's limit), or reset before sluice answered them (more
//!   than [`CANCELLED_MAX`] and more than were answered), close the
//!   connection with `GOAWAY ENHANCE_YOUR_CALM`;
//! - `client_header_timeout` for a connection that opens no stream,
//!   `keepalive_timeout` for one whose streams are all done: a `GOAWAY`,
//!   then the close; `keepalive_timeout 0` allows one stream;
//!   `send_timeout` for a client that stops taking what is written: its
//!   socket full, or its windows shut while no stream gets on;
//! - a stop (SIGTERM, a reload that removes the listener) sends `GOAWAY`
//!   and lets the open streams finish, within `shutdown_timeout`.
//!
//! A connection comes here from [`super::conn`]: on TLS when ALPN chose
//! `h2`; on a plain address with `http2` when its first bytes are the
//! preface ([`opening`]; any other goes on as HTTP/1.1, bytes and all).
//!
//! Every byte the client sends goes through [`crate::http2::Inbound`] first
//! ([`io`]): request heads are judged by the HTTP/1.1 gate and handed to
//! hyper canonical, or refused on their stream alone; floods of any frame
//! kind are cut with `GOAWAY ENHANCE_YOUR_CALM`. A request reads as on
//! HTTP/1.1: its `Host` header is `:authority` (the gate refuses a `Host`
//! field beside it, as nginx), its cookies (split into several fields by
//! HTTP/2 clients) are one `Cookie` again (RFC 9113 §8.2.3, as nginx joins
//! them). Responses lose their connection-specific fields (hyper strips
//! `Connection` and what it names, `Keep-Alive`, `Transfer-Encoding`,
//! `Upgrade`, `TE`); the upstream side stays HTTP/1.1.
//!
//! An idle connection is parked: hyper's connection holds the h2 crate's
//! buffers (16 KB to write, 8 KB to read, 4 KB of HPACK) for its life, so
//! once a connection has had nothing in flight for [`PARK_AFTER`] (no
//! stream, every SETTINGS and PING answered: [`crate::http2::ledger`]),
//! hyper's connection is dropped and its [`H2Io`] comes back ([`Lent`]);
//! the socket waits without a buffer. When the client speaks again, a
//! fresh hyper connection reads a replay of what the client and the old
//! one agreed first (its settings, the windows), and the first frames it
//! writes that would restate them are kept from the client
//! (`frames::Waking`). A parked connection keeps its idle deadline and
//! its stop: a `GOAWAY`, then the close. On a plain address it leaves its
//! task for its accept loop's idle set, as an idle HTTP/1.1 connection
//! does ([`parked`]); a TLS one waits in its task.

mod frames;
mod io;
mod parked;
mod stream;

pub(crate) use self::parked::{Parked, Parking, closing, resume};

use self::io::{H2Io, Lent};
use self::stream::{H2Service, Streams};
use super::Shared;
use super::conn::ClientStream;
use crate::conn_state::{Conn, ConnState, Expired};
use crate::errlog::{self, Severity};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::watch;
use tokio::time::Instant;

/// The connection preface of a client with prior knowledge (RFC 9113 §3.4).
pub(crate) use crate::http2::inbound::PREFACE;

/// nginx's `http2_max_concurrent_streams`.
pub(crate) const MAX_CONCURRENT_STREAMS: u32 = 128;
/// A stream's receive window: nginx's `http2_body_preread_size`. What a
/// client may send of a body before sluice reads it.
pub(crate) const STREAM_WINDOW: u32 = 64 * 1024;
/// The connection's receive window: the most request body a connection
/// holds unread, all streams together.
pub(crate) const CONNECTION_WINDOW: u32 = 1024 * 1024;
/// What hyper holds of one stream's response beyond what the client's
/// window lets it send (hyper's default is 400 KB).
pub(crate) const SEND_BUFFER: usize = 64 * 1024;
/// Streams a client may reset before their answer, over the connection's
/// life, past the number it let be answered: a browser cancels a few, a
/// rapid-reset attack thousands (each one is a request sluice has begun).
pub(crate) const CANCELLED_MAX: u64 = 2 * MAX_CONCURRENT_STREAMS as u64;

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

/// Serve HTTP/2 on `stream`, whose first bytes were already read
/// (`read_ahead`, the preface among them; empty after ALPN), until the
/// client leaves, a timeout, a stop, or an error, or until it is parked in
/// its accept loop's idle set ([`Parking`]). It counts the connection
/// closed when it closes.
pub(crate) async fn serve_h2<S: ClientStream>(
    shared: &Arc<Shared>,
    conn: Arc<Conn>,
    (stream, read_ahead): (S, Vec<u8>),
    stopping: watch::Receiver<bool>,
    (head_rules, server): (crate::http1::HeadRules, String),
    parking: Parking,
) {
    // The gate (crate::http2) holds a head to large_client_header_buffers,
    // and so does hyper, which advertises it: a canonical head a few bytes
    // longer than the client's (`:authority` for `host`) gets hyper's 431,
    // the gate's answer to a list over the bound.
    let (n, field_max) = head_rules.large_header_buffers;
    let list_max = u32::try_from(n.saturating_mul(field_max)).unwrap_or(u32::MAX);
    let streams = Arc::new(Streams::new(conn.id, conn.remote.ip(), server));
    let parts = (shared.clone(), conn.clone(), streams.clone());
    // Boxed: it moves between hyper's connection and the parked loop, and
    // is all a parked connection holds besides its socket.
    let io = Box::new(H2Io::new(stream, read_ahead, parts, head_rules));
    let this = This {
        shared: shared.clone(),
        conn,
        streams,
        list_max,
    };
    serve(this, io, stopping, parking).await;
}

/// What one connection's loop works with.
pub(crate) struct This {
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    streams: Arc<Streams>,
    list_max: u32,
}

/// hyper's connections one after another on `io`, parked between them,
/// until the connection ends or waits in the idle set.
async fn serve<S: ClientStream>(
    this: This,
    mut io: Box<H2Io<S>>,
    mut stopping: watch::Receiver<bool>,
    mut parking: Parking,
) {
    let (shared, conn, streams) = (&this.shared, &this.conn, &this.streams);
    let home = Arc::new(parking_lot::Mutex::new(None));
    loop {
        let svc = H2Service::new(shared.clone(), conn.clone(), streams.clone());
        let lent = Lent::new(io, home.clone());
        let hyper = builder(this.list_max).serve_connection(TokioIo::new(lent), svc);
        let mut served = Box::pin(hyper);
        // (Its error is the client's doing, or a timeout, logged below.)
        let drove = drive(served.as_mut(), streams, &conn.state, &mut stopping).await;
        drop(served);
        let back = home.lock().take();
        let (Drove::Park, Some(parked)) = (drove, back) else {
            break;
        };
        io = parked;
        if !io.park() {
            break;
        }
        // Plain: the socket waits in the accept loop's idle set, the task
        // ends. TLS (rustls' state is the stream's) waits here.
        io = match parking.wait_in_idle_set(&this, io) {
            Ok(()) => return,
            Err(io) => io,
        };
        shared.env.metrics.h2_parked(1);
        let woke = io
            .parked(streams.idle_deadline(&conn.state), &mut stopping)
            .await;
        shared.env.metrics.h2_parked(-1);
        if !woke {
            break;
        }
    }
    streams.end();
    closed(streams, &conn.state);
    shared.env.metrics.connection_closed();
}

/// hyper's HTTP/2 server, as nginx's defaults have it (`list_max`: the
/// header list's bound).
fn builder(list_max: u32) -> hyper::server::conn::http2::Builder<FreshExecutor> {
    let mut builder = hyper::server::conn::http2::Builder::new(FreshExecutor);
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_send_buf_size(SEND_BUFFER)
        .max_header_list_size(list_max);
    builder
}

/// hyper's connection, as [`serve_h2`] builds it.
type Served<S> = hyper::server::conn::http2::Connection<TokioIo<Lent<S>>, H2Service, FreshExecutor>;

/// hyper's tasks (each stream's) on the connection's worker, as
/// `TokioExecutor` spawns them, with one clock read per wake-up
/// ([`crate::clock::Fresh`]) as the connection's own task.
#[derive(Clone, Copy)]
struct FreshExecutor;

impl<F> hyper::rt::Executor<F> for FreshExecutor
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        tokio::spawn(crate::clock::Fresh::new(fut));
    }
}

/// How long a connection stays quiet (no stream, nothing in flight)
/// before it is parked: long enough that a client fetching a page's
/// resources one after another does not pay a restart for each.
pub(crate) const PARK_AFTER: Duration = Duration::from_millis(250);

/// How [`drive`] ended.
enum Drove {
    /// The connection is over.
    Ended,
    /// Quiet for [`PARK_AFTER`]: let hyper's connection go.
    Park,
}

/// How long an idle connection told to go away may take to close by itself
/// (hyper waits for the client's answer to its ping) before it is dropped:
/// nginx closes at once, but a prompt client gets hyper's last GOAWAY.
const IDLE_GRACE: Duration = Duration::from_millis(200);

/// How long a connection whose client reset too many streams may take to
/// end before it is dropped (it ends at hyper's next read or write).
const CALM_GRACE: Duration = Duration::from_secs(1);

/// Polls the connection to its end; tells it to go away (GOAWAY, open
/// streams finish) on a stop or an idle timeout, and drops it when it does
/// not close by itself: soon when it was idle, `send_timeout` after its
/// last stream otherwise (hyper may still be sending that stream's end).
async fn drive<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut served: Pin<&mut Served<S>>,
    streams: &Streams,
    state: &ConnState,
    stopping: &mut watch::Receiver<bool>,
) -> Drove {
    let mut timer = std::pin::pin!(tokio::time::sleep_until(crate::clock::now()));
    // When the GOAWAY went, and how long the connection may stay once no
    // stream is open.
    let mut going: Option<(Instant, Duration)> = None;
    let mut calm_until = None;
    loop {
        let open = streams.open() > 0;
        if going.is_none() && state.timeouts.keepalive.is_zero() && (open || streams.begun() > 0) {
            // keepalive_timeout 0: one stream, as nginx.
            served.as_mut().graceful_shutdown();
            going = Some((crate::clock::now(), state.timeouts.send));
        }
        if let Some((_, grace)) = going.as_mut().filter(|_| open) {
            // A stream came as the GOAWAY went: its end may still be on its way.
            *grace = state.timeouts.send;
        }
        let idle = if streams.calm() {
            Some(*calm_until.get_or_insert_with(|| crate::clock::now() + CALM_GRACE))
        } else if let Some((went, grace)) = going {
            (!open).then(|| went.max(streams.idle_since()) + grace)
        } else {
            streams.idle_deadline(state)
        };
        // No stream got on for send_timeout while some waited for the client.
        let send = state.timeouts.send;
        let stalled = streams
            .stalled_since()
            .filter(|_| !send.is_zero())
            .map(|p| p + send);
        let park = streams
            .park_at(PARK_AFTER)
            .filter(|_| going.is_none() && !streams.calm() && !state.timeouts.keepalive.is_zero());
        let wake = [idle, stalled, park].into_iter().flatten().min();
        if let Some(at) = wake {
            if timer.deadline() != at {
                timer.as_mut().reset(at);
            }
        }
        tokio::select! {
            _ = served.as_mut() => return Drove::Ended,
            _ = stopping.wait_for(|stop| *stop), if going.is_none() => {
                served.as_mut().graceful_shutdown();
                going = Some((crate::clock::now(), state.timeouts.send));
            }
            _ = &mut timer, if wake.is_some() => {
                let now = crate::clock::now();
                if stalled.is_some_and(|at| now >= at) {
                    let _ = state.expire(Expired::Send);
                    return Drove::Ended;
                }
                if park.is_some_and(|at| now >= at) && idle.is_none_or(|at| now < at) {
                    return Drove::Park;
                }
                if idle.is_none_or(|at| now < at) {
                    continue;
                }
                if streams.calm() || going.is_some() {
                    // It did not close by itself in time.
                    return Drove::Ended;
                }
                // Idle for client_header_timeout or keepalive_timeout: as
                // nginx, a GOAWAY and the close, with no log line.
                served.as_mut().graceful_shutdown();
                going = Some((crate::clock::now(), IDLE_GRACE));
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
