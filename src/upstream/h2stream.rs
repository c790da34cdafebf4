//! One call's stream on an HTTP/2 upstream connection: the request body
//! pumped up into it, the response body read from it.
//!
//! Why the two in one: hyper's client spawned a task per call to pipe the
//! request body (a task cell, a wake-up across tasks per frame, a third of
//! the client's cost per unary call). Here no task: [`Upload`] is polled by
//! whoever waits on the upstream — the call's future until the response
//! head, then [`Streamed`], the response body, each time it is polled. The
//! wake-ups of both directions (the client's next piece, the upstream's
//! window, its next frame) all go to that one task. What it costs: a
//! response body nobody polls pumps nothing up either; the client side
//! polls it whenever its stream has room, and a client that takes nothing
//! of the answers for a while has its own window to blame.
//!
//! Flow control is end to end: a piece of the request body goes into the
//! stream (framed as the upstream's windows open, [`super::h2conn`]), and
//! the next is asked for once it is all framed; what the
//! upstream sent is released to its window only as the client side takes
//! it, so a slow reader slows the upstream. A piece waiting for the window
//! is the upstream's wait, the one `grpc_send_timeout` bounds (nginx's: a
//! write that cannot proceed), even when the window shut while the body
//! waited on the client.

use super::UpstreamTimeouts;
use super::h2conn::{Failure, Stream};
use super::http2::Streams;
use super::sending::{Expired, Progress, Waits, Watched};
use crate::body::BodyError;
use crate::respond::grpc::{Code, GRPC_MESSAGE, GRPC_STATUS, percent_encode};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use sync_wrapper::SyncWrapper;
use tokio::time::Instant;

/// The request body on its way up the stream.
pub(super) struct Upload {
    body: Watched,
    /// A piece went into the stream: the next is asked for once it is all
    /// framed (the windows had room for it).
    sent: bool,
}

/// RST_STREAM's INTERNAL_ERROR: a client body that failed.
const INTERNAL_ERROR: u32 = 2;

impl Upload {
    pub(super) fn new(body: Watched) -> Upload {
        Upload { body, sent: false }
    }

    /// Sends what the body has while the upstream takes it; ready once it
    /// is over: all sent (END_STREAM or trailers), or given up (the
    /// upstream reset the stream: the response says how).
    pub(super) fn poll(&mut self, tx: &Stream, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.sent {
                if ready!(tx.poll_room(cx)).is_err() {
                    return Poll::Ready(());
                }
                self.sent = false;
            }
            let Some(data) = ready!(self.next(tx, cx)) else {
                return Poll::Ready(());
            };
            let end = self.body.is_end_stream();
            if tx.send_data(data, end).is_err() || end {
                return Poll::Ready(());
            }
            self.sent = true;
        }
    }

    /// The body's next piece of data; the trailers, its end or its failure
    /// sent on (`None`: the upload is over). A client's body that failed
    /// resets the stream with the reason under its error, else
    /// INTERNAL_ERROR, as hyper's client did.
    fn next(&mut self, tx: &Stream, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            let frame = match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => {
                    tx.reset(reason(&*e).unwrap_or(INTERNAL_ERROR));
                    return Poll::Ready(None);
                }
                None => {
                    let _ = tx.send_data(Bytes::new(), true);
                    return Poll::Ready(None);
                }
            };
            match frame.into_data() {
                Ok(data) => return Poll::Ready(Some(data)),
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        tx.send_trailers(&trailers);
                        return Poll::Ready(None);
                    }
                }
            }
        }
    }
}

/// The RST_STREAM (or GOAWAY) reason under an error, if any: an HTTP/2
/// client's reset as hyper's server reports it.
fn reason(e: &(dyn std::error::Error + 'static)) -> Option<u32> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(h2) = c.downcast_ref::<h2::Error>() {
            return h2.reason().map(u32::from);
        }
        cause = c.source();
    }
    None
}

/// A response body from an HTTP/2 upstream: frames (and trailers) as they
/// come, `grpc_read_timeout` between two of them, and `grpc_send_timeout`
/// while the upstream takes nothing of a request body still going (a
/// bidirectional call), which it pumps up meanwhile. Dropped before its
/// end, the stream is reset upstream (RST_STREAM CANCEL).
pub(crate) struct Streamed {
    recv: Stream,
    /// The request body while it still goes up (it is not `Sync`, this
    /// body must be: only ever reached through `&mut`).
    upload: Option<SyncWrapper<Upload>>,
    /// The DATA frames are over: trailers (or the end) next.
    data_done: bool,
    /// What is left of the response's `content-length`, if any.
    length: Option<u64>,
    timeouts: UpstreamTimeouts,
    progress: Arc<Progress>,
    waits: Waits,
    /// When the current wait for a frame runs out.
    read_due: Option<Instant>,
    /// The response is a gRPC call's (`application/grpc`): a connection
    /// that broke or timed out ends it with UNAVAILABLE or
    /// DEADLINE_EXCEEDED trailers, as a gRPC client understands it,
    /// rather than a reset (which it would read as INTERNAL).
    grpc: bool,
    /// It ended with such trailers.
    done: bool,
    /// The upstream's trailers went by.
    trailers: bool,
    /// The stream ended (its trailers, or its end without them).
    ended: bool,
    _streams: Streams,
}

/// How an HTTP/2 upstream's body broke off.
#[derive(Debug, thiserror::Error)]
pub enum StreamFailure {
    /// The upstream reset the stream (the reason goes on to the client's
    /// stream: hyper's server finds it under this error).
    #[error("upstream reset the stream ({0}) while reading upstream")]
    Reset(#[source] h2::Error),
    /// The connection broke (GOAWAY, closed).
    #[error("upstream prematurely closed connection ({0}) while reading upstream")]
    Closed(Failure),
    #[error("upstream timed out (110: Connection timed out) while reading upstream")]
    TimedOut,
    #[error("upstream timed out (110: Connection timed out) while sending request to upstream")]
    SendTimedOut,
    /// A gRPC call's body ended without trailers (no grpc-status).
    #[error("upstream ended the call without a grpc-status while reading upstream")]
    NoStatus,
}

/// The trailers that end a gRPC call whose upstream broke off:
/// DEADLINE_EXCEEDED for `grpc_read_timeout`, else UNAVAILABLE (gRPC's
/// code for a transient failure a client may retry), nginx's words as the
/// message.
fn unavailable(failure: &StreamFailure) -> HeaderMap {
    let code = match failure {
        StreamFailure::TimedOut | StreamFailure::SendTimedOut => Code::DeadlineExceeded,
        _ => Code::Unavailable,
    };
    let mut trailers = HeaderMap::with_capacity(2);
    trailers.insert(GRPC_STATUS, HeaderValue::from(u16::from(code.as_u8())));
    if let Ok(v) = HeaderValue::from_str(&percent_encode(&failure.to_string())) {
        trailers.insert(GRPC_MESSAGE, v);
    }
    trailers
}

/// What the stream gave: a frame, its end, or its error.
type Polled = Option<Result<Frame<Bytes>, Failure>>;

impl Streamed {
    /// The body of a response whose head is `headers`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        recv: Stream,
        upload: Option<Upload>,
        headers: &HeaderMap,
        length: Option<u64>,
        timeouts: UpstreamTimeouts,
        progress: Arc<Progress>,
        waits: Waits,
        streams: Streams,
    ) -> Streamed {
        // (A trailers-only answer has its status in the head: nothing to end.)
        let grpc = headers
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
            && !headers.contains_key(GRPC_STATUS);
        let length = length.or_else(|| recv.is_end_stream().then_some(0));
        Streamed {
            recv,
            upload: upload.map(SyncWrapper::new),
            data_done: false,
            length,
            timeouts,
            progress,
            waits,
            read_due: None,
            grpc,
            done: false,
            trailers: false,
            ended: false,
            _streams: streams,
        }
    }

    /// The stream's next frame: DATA (given back to the upstream's windows
    /// as it is handed on), then the trailers. An RST_STREAM NO_ERROR after
    /// the response's END_STREAM (RFC 9113 §8.1: the request need not go
    /// on) never shows here; before it, the response was cut short.
    fn poll_stream(&mut self, cx: &mut Context<'_>) -> Poll<Polled> {
        if !self.data_done {
            match ready!(self.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    if let Some(left) = self.length.as_mut() {
                        *left = left.saturating_sub(data.len() as u64);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => self.data_done = true,
            }
        }
        Poll::Ready(match ready!(self.recv.poll_trailers(cx)) {
            Ok(t) => t.map(|t| Ok(Frame::trailers(t))),
            Err(e) => Some(Err(e)),
        })
    }

    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(up) = self.upload.as_mut()
            && up.get_mut().poll(&self.recv, cx).is_ready()
        {
            self.upload = None;
        }
        let failure = match self.poll_stream(cx) {
            Poll::Ready(Some(Err(e))) => match e.reason() {
                // The upstream's own reset goes on as it is (NO_ERROR
                // before the end: the response broke off, as a close).
                Some(r) if r != 0 => StreamFailure::Reset(h2::Reason::from(r).into()),
                _ => StreamFailure::Closed(e),
            },
            // A gRPC call's body that ended with no status (END_STREAM on
            // DATA) is a broken call.
            Poll::Ready(None) if self.grpc && !self.trailers => StreamFailure::NoStatus,
            Poll::Ready(r) => {
                self.read_due = None;
                match &r {
                    Some(Ok(f)) if f.is_trailers() => (self.trailers, self.ended) = (true, true),
                    Some(_) => {}
                    None => self.ended = true,
                }
                return Poll::Ready(r.map(|f| f.map_err(BodyError::from)));
            }
            Poll::Pending => {
                let read = self.timeouts.proxy_read;
                let due = *self
                    .read_due
                    .get_or_insert_with(|| crate::clock::now() + read);
                let send = self.timeouts.proxy_send;
                let again = send.min(read);
                match ready!(self.waits.poll(cx, &self.progress, send, again, Some(due))) {
                    Expired::Read => StreamFailure::TimedOut,
                    Expired::Send => StreamFailure::SendTimedOut,
                }
            }
        };
        self.read_due = None;
        if !self.grpc || matches!(failure, StreamFailure::Reset(_)) {
            return Poll::Ready(Some(Err(failure.into())));
        }
        self.done = true;
        Poll::Ready(Some(Ok(Frame::trailers(unavailable(&failure)))))
    }

    /// (A gRPC call's body without its trailers yet is not over: polled
    /// once more, it ends with UNAVAILABLE's.)
    /// (Asked after every frame: the connection is asked, under its lock,
    /// only when the answer may be yes.)
    pub(crate) fn is_end_stream(&self) -> bool {
        self.done || self.ended || (!self.grpc && self.recv.is_end_stream())
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        match self.length {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}
