//! sluice's own HTTP/1.1 server loop: each request head is parsed once, by
//! the gate ([`crate::http1`]: nginx's rules), and handed to
//! [`request::handle`] as it stands; the response is written here.
//!
//! Why not hyper's HTTP/1.1 server: the gate already reads every head with
//! nginx's rules, and hyper then parsed the gate's canonical copy again,
//! built its own state for it and re-encoded the answer: about 8 000
//! instructions a request on top of sluice's own work (issue #31's
//! callgrind counts), more than nginx spends on a whole rejection. The
//! loop is the rest of what hyper did for a client connection, no more:
//! - [`request`]: the request from the canonical head (which is, by
//!   construction, what hyper would have read), keep-alive and
//!   `Expect: 100-continue` as the head asks;
//! - the body: read from the socket only when the request asks for it,
//!   through a [`Pipe`] (`100 Continue` is written then);
//! - [`response`]: the head as clients have always been sent it, and the
//!   body framed by length, chunks or the connection's end;
//! - after it: the next (pipelined) head, a tunnel after a 101, or the
//!   connection's end. A body the request left unread is skipped if it has
//!   all arrived, else the connection closes (it cannot be reused).
//!
//! Timeouts stay in [`TimedIo`] (the head and keep-alive deadlines, the
//! parking of idle connections, `send_timeout` on every write);
//! `client_body_timeout` is the request's (it reads the body whole).

mod request;
mod response;

use super::Shared;
use super::conn::{ClientStream, Ended, ServerSide, log_dropped_headers};
use super::io::{Filled, TimedIo};
use crate::body::Watched;
use crate::client_body::Pipe;
use crate::clock;
use crate::conn_state::{Conn, Idle};
use crate::request::{self as phases, Reply};
use bytes::Bytes;
use hyper::body::Body as _;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// For the `h1loop` fuzz target: the request head the loop makes of a head.
#[cfg(any(test, feature = "fuzzing"))]
pub fn read(head: crate::http1::Head) -> Option<phases::RequestHead> {
    request::read(head).map(|e| e.head)
}
pub(crate) use response::date_value;
#[cfg(any(test, feature = "fuzzing"))]
pub use response::{Asked, Framing, Length, encode};

/// What ended a connection's requests with an error (logged by the
/// connection if it was an upstream body that broke off).
pub(crate) type Failed = Box<dyn std::error::Error + Send + Sync>;

/// Output is written once this much is waiting (or when the body waits).
const FLUSH_AT: usize = 16 * 1024;

/// The connection's requests, one after another, until it closes, is to be
/// parked, or becomes a tunnel.
pub(super) async fn serve_requests<S: ClientStream>(
    shared: &Arc<Shared>,
    conn: &Arc<Conn>,
    side: &ServerSide,
    mut io: TimedIo<S>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
    can_park: bool,
) -> (TimedIo<S>, Ended) {
    let keepalive = !side.timeouts.keepalive.is_zero();
    // One wait for the stop, for the connection's whole life (not one
    // registration a request).
    let mut told = stopping.clone();
    let mut stop = std::pin::pin!(stopping.wait_for(|stop| *stop));
    loop {
        let next = tokio::select! {
            biased;
            next = io.next_head() => next,
            _ = &mut stop => return (io, Ended::Served(Ok(()))),
        };
        match next {
            Ok(Filled::Head) => {}
            // Nothing sent of a next head for a while: parked.
            Ok(Filled::Parked) if can_park && io.gate.idle() => return (io, Ended::Park),
            _ => return (io, Ended::Served(Ok(()))),
        }
        log_dropped_headers(&mut io, conn.id, conn.remote, &side.name);
        // (From now on an idle connection may be parked: see TimedIo.)
        io.start_serving();
        let Some(head) = io.gate.take_head() else {
            return (io, Ended::Served(Ok(())));
        };
        let Some(mut exchange) = request::read(head) else {
            // The gate's canonical head always reads; never reached.
            return (io, Ended::Served(Ok(())));
        };
        exchange.keep_alive &= keepalive;
        let served = serve_one(shared, conn, &mut io, exchange, &told).await;
        match served {
            Ok(After::Next) => {}
            Ok(After::Close) => {
                let _ = io.shutdown().await;
                return (io, Ended::Served(Ok(())));
            }
            Ok(After::Tunnel(t)) => {
                let first = io.start_tunnel(&[]);
                let stop = super::conn::stopped(&mut told);
                Box::pin(phases::tunnel::run(
                    t,
                    &mut io,
                    first,
                    &shared.env.metrics,
                    stop,
                ))
                .await;
                return (io, Ended::Served(Ok(())));
            }
            Err(e) => return (io, Ended::Served(Err(e))),
        }
    }
}

/// What comes after a request.
enum After {
    Next,
    Close,
    Tunnel(Box<phases::tunnel::Tunnel>),
}

/// One request: handled (its body fed as it asks), its response written.
async fn serve_one<S: ClientStream>(
    shared: &Arc<Shared>,
    conn: &Arc<Conn>,
    io: &mut TimedIo<S>,
    exchange: request::Exchange,
    stopping: &tokio::sync::watch::Receiver<bool>,
) -> Result<After, Failed> {
    let request::Exchange {
        head,
        body,
        pipe,
        asked,
        mut keep_alive,
        expect_continue,
        chunked,
    } = exchange;
    let state = conn.state.clone();
    state.busy_with(pipe.is_some());
    let start = clock::now();
    shared.env.metrics.request(crate::metrics::Protocol::Http1);
    let mut feed = Feed {
        eager: pipe.is_some() && !expect_continue,
        pipe,
        failed: false,
        chunked,
        expect_continue,
    };
    // Boxed: the connection's task keeps no room for a request's future
    // (about 3 KB) while it waits, and awaiting moves a pointer. (Written
    // into its box, not moved there: a move copies all 3 KB.)
    let fut = Box::write(
        Box::new_uninit(),
        phases::handle(shared.env.clone(), conn.clone(), (head, body), start),
    );
    let fut = Box::into_pin(fut);
    let Some(handled) = drive(fut, io, &mut feed).await else {
        // The client left: the request was dropped where it stood (nginx's 499).
        return Ok(After::Close);
    };
    let status = handled.as_ref().map_or_else(|c| c.status, Reply::status);
    shared.env.metrics.response(status, clock::since(start));
    let Ok(reply) = handled else {
        // The request's answer is to close, unanswered.
        drop(Idle(state));
        return Ok(After::Close);
    };
    if *stopping.borrow() {
        keep_alive = false;
    }
    let resp = match reply {
        Reply::Response(resp) => resp,
        Reply::Rejected(r) => {
            let last = write_rejected(io, r, asked, &mut keep_alive, Idle(state)).await?;
            return Ok(after(io, &mut feed, last, keep_alive));
        }
    };
    let (mut parts, body) = resp.into_parts();
    let body = Watched::new(body, Idle(state));
    let length = if body.is_end_stream() {
        response::Length::None
    } else {
        body.size_hint()
            .exact()
            .map_or(response::Length::Unknown, response::Length::Known)
    };
    let mut out = Vec::new();
    let written = response::encode(&mut parts, length, asked, &mut keep_alive, &mut out);
    if parts.status == http::StatusCode::SWITCHING_PROTOCOLS {
        write_all(io, &mut out).await?;
        drop(body);
        if let Some(t) = phases::tunnel::taken(&conn.state) {
            return Ok(After::Tunnel(t));
        }
        return Ok(After::Close);
    }
    send_body(io, body, written.framing.clone(), out, &mut feed).await?;
    Ok(after(io, &mut feed, written.last, keep_alive))
}

/// Writes a rendered rejection; whether the connection ends after it.
async fn write_rejected<S: ClientStream>(
    io: &mut TimedIo<S>,
    r: phases::Rejected,
    asked: response::Asked,
    keep_alive: &mut bool,
    idle: Idle,
) -> io::Result<bool> {
    let mut out = Vec::new();
    let last = response::encode_rejected(&r, asked, keep_alive, &mut out);
    // (The body went into the output whole: done, as a response's whose
    // body ended; with HEAD, nothing of it is sent.)
    let sent = if asked.head { 0 } else { r.body_len() as u64 };
    r.done(sent);
    drop(idle);
    write_all(io, &mut out).await?;
    Ok(last)
}

/// What follows a response that was written (`last`: it ends the
/// connection): a body the request left unread is skipped, if it can be.
fn after<S: ClientStream>(
    io: &mut TimedIo<S>,
    feed: &mut Feed,
    last: bool,
    keep_alive: bool,
) -> After {
    if feed.pipe.is_some() && skip_rest(io, feed) {
        feed.pipe = None;
    }
    // (The gate may hold the next head already, and be in its body.)
    if last || !keep_alive || feed.pipe.is_some() {
        return After::Close;
    }
    After::Next
}

/// Runs the request to its answer, feeding its body as it asks; meanwhile,
/// with no body to read, watches the socket as hyper did: a client that
/// leaves (its end of file, a reset) drops the request where it stands
/// (`None`); a next head that arrives waits in the gate.
async fn drive<S: ClientStream, F: Future>(
    fut: F,
    io: &mut TimedIo<S>,
    feed: &mut Feed,
) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut watching = true;
    std::future::poll_fn(|cx| {
        loop {
            // The socket first, as hyper looked at it: a request whose
            // client is already gone is never started.
            if watching && feed.pipe.is_none() && !feed.failed {
                match io.poll_fill(cx) {
                    Poll::Pending => {}
                    Poll::Ready(Ok(Filled::Eof) | Err(_)) => return Poll::Ready(None),
                    Poll::Ready(Ok(_)) => watching = false,
                }
            }
            // A body's first data is read before it is asked for (unless
            // the client waits for `100 Continue`), as hyper read it.
            if feed.eager && feed.poll_eager(io, cx).is_ready() {
                continue;
            }
            if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(r));
            }
            // The request waits: for its body, if it asked for it.
            if feed.poll(io, cx).is_ready() {
                continue;
            }
            return Poll::Pending;
        }
    })
    .await
}

/// A body the request left unread, skipped as hyper's server did (the
/// clients of the path this loop replaced keep their connections alike):
/// what has come of a body by length, without waiting; of a chunked body,
/// one more step (a chunk's data, or its end) after the one read ahead.
/// Whether the body has ended (else the connection closes after the
/// response, without saying so first).
fn skip_rest<S: ClientStream>(io: &mut TimedIo<S>, feed: &Feed) -> bool {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut steps = 1;
    loop {
        match io.poll_body(&mut cx) {
            Poll::Ready(Ok(None)) => return true,
            Poll::Ready(Ok(Some((_, last)))) if !feed.chunked => {
                if last {
                    return true;
                }
            }
            // (Only a size line read.)
            Poll::Ready(Ok(Some((data, false)))) if data.is_empty() => {}
            Poll::Ready(Ok(Some((_, last)))) => {
                steps -= 1;
                if last {
                    return steps >= 1;
                }
                if steps == 0 {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// The request body's feed from the socket.
struct Feed {
    pipe: Option<Pipe>,
    /// The first data is still to be read ahead.
    eager: bool,
    /// The body broke off (the client's socket, or its chunked framing).
    failed: bool,
    /// The body is chunked (else it has a length).
    chunked: bool,
    /// `100 Continue` is owed before the first read.
    expect_continue: bool,
}

impl Feed {
    /// Reads for the body if its reader waits: `Ready` once something was
    /// given to it (poll the reader again), `Pending` otherwise.
    fn poll<S: ClientStream>(&mut self, io: &mut TimedIo<S>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(pipe) = &self.pipe else {
            return Poll::Pending;
        };
        if !pipe.wanted() {
            return Poll::Pending;
        }
        if self.expect_continue {
            const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
            // (Small enough for one write; a full socket waits, and the
            // next poll tries the whole line again.)
            match Pin::new(&mut *io).poll_write(cx, CONTINUE) {
                Poll::Ready(Ok(n)) if n == CONTINUE.len() => self.expect_continue = false,
                Poll::Ready(Ok(_)) | Poll::Ready(Err(_)) => {
                    pipe.end(Err(io::Error::from(io::ErrorKind::WriteZero)));
                    self.pipe = None;
                    return Poll::Ready(());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        self.read(io, cx)
    }

    /// Reads the body's first data before the request asks (see `drive`).
    fn poll_eager<S: ClientStream>(
        &mut self,
        io: &mut TimedIo<S>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        if self.pipe.is_none() {
            self.eager = false;
            return Poll::Pending;
        }
        ready!(self.read(io, cx));
        self.eager = false;
        Poll::Ready(())
    }

    /// One read for the body, handed to its reader.
    fn read<S: ClientStream>(&mut self, io: &mut TimedIo<S>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(pipe) = &self.pipe else {
            return Poll::Pending;
        };
        match ready!(io.poll_body(cx)) {
            // Only a chunk size announced: the reader looks at it.
            Ok(Some((data, false))) if data.is_empty() => pipe.nudge(),
            Ok(Some((data, last))) => {
                pipe.send(data.freeze());
                if last {
                    pipe.end(Ok(()));
                    self.pipe = None;
                }
            }
            Ok(None) => {
                pipe.end(Ok(()));
                self.pipe = None;
            }
            Err(e) => {
                pipe.end(Err(e));
                self.pipe = None;
                self.failed = true;
            }
        }
        Poll::Ready(())
    }
}

/// Writes the response body after its head (`out`), framed as the head
/// said; feeds the request body meanwhile if it is still read.
async fn send_body<S: ClientStream>(
    io: &mut TimedIo<S>,
    mut body: Watched<Idle>,
    framing: response::Framing,
    mut out: Vec<u8>,
    feed: &mut Feed,
) -> Result<(), Failed> {
    let mut left = match framing {
        response::Framing::Length(0) => {
            // Nothing of the body is sent (HEAD, 204, 304, or empty).
            write_all(io, &mut out).await?;
            return Ok(());
        }
        response::Framing::Length(n) => Some(n),
        _ => None,
    };
    loop {
        let frame = std::future::poll_fn(|cx| {
            match Pin::new(&mut body).poll_frame(cx) {
                Poll::Ready(f) => return Poll::Ready(Some(f)),
                Poll::Pending if !out.is_empty() => return Poll::Ready(None),
                Poll::Pending => {}
            }
            while feed.poll(io, cx).is_ready() {}
            Poll::Pending
        })
        .await;
        match frame {
            // The body waits: what is ready goes out meanwhile.
            None => write_all(io, &mut out).await?,
            Some(None) => break,
            Some(Some(Err(e))) => {
                // What was sent of it goes out (nginx sends what it has).
                let _ = write_all(io, &mut out).await;
                return Err(e);
            }
            Some(Some(Ok(frame))) => {
                let frame = match frame.into_data() {
                    Ok(data) => {
                        put_data(&mut out, &framing, &mut left, data);
                        None
                    }
                    Err(frame) => frame.into_trailers().ok(),
                };
                if let Some(trailers) = frame {
                    end_chunked(&mut out, &framing, Some(&trailers));
                    write_all(io, &mut out).await?;
                    return Ok(());
                }
                if out.len() >= FLUSH_AT {
                    write_all(io, &mut out).await?;
                }
                if left == Some(0) {
                    break;
                }
            }
        }
    }
    if left.is_some_and(|n| n > 0) {
        let _ = write_all(io, &mut out).await;
        return Err(Box::new(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "response body ended before its length",
        )));
    }
    end_chunked(&mut out, &framing, None);
    write_all(io, &mut out).await?;
    Ok(())
}

/// A data frame, as the framing wants it.
fn put_data(out: &mut Vec<u8>, framing: &response::Framing, left: &mut Option<u64>, data: Bytes) {
    if data.is_empty() {
        return;
    }
    match framing {
        response::Framing::Chunked(_) => {
            use std::io::Write;
            let _ = write!(out, "{:X}\r\n", data.len());
            out.extend_from_slice(&data);
            out.extend_from_slice(b"\r\n");
        }
        response::Framing::Length(_) => {
            let n = left.unwrap_or(0);
            let take = usize::try_from(n).unwrap_or(usize::MAX).min(data.len());
            out.extend_from_slice(&data[..take]);
            *left = Some(n - take as u64);
        }
        response::Framing::Close => out.extend_from_slice(&data),
    }
}

/// The last chunk (with the trailer fields the head announced, if any).
fn end_chunked(out: &mut Vec<u8>, framing: &response::Framing, trailers: Option<&http::HeaderMap>) {
    let response::Framing::Chunked(allowed) = framing else {
        return;
    };
    out.extend_from_slice(b"0\r\n");
    if let (Some(allowed), Some(trailers)) = (allowed, trailers) {
        for (name, value) in trailers {
            if allowed.contains(name) {
                out.extend_from_slice(name.as_str().as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes and empties `out` (`send_timeout` is the connection's: see
/// [`TimedIo`]).
async fn write_all<S: ClientStream>(io: &mut TimedIo<S>, out: &mut Vec<u8>) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    io.write_all(out).await?;
    out.clear();
    Ok(())
}
