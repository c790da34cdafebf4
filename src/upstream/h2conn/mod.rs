//! sluice's own HTTP/2 client connection, for `grpc_pass`.
//!
//! Why not the h2 crate (as before): a unary gRPC call through it cost
//! about a quarter of sluice's instructions — HPACK encoding with a
//! dynamic table and Huffman, decoding into `http` types field by field,
//! frames moved through several queues, a `Request` with a parsed `Uri`
//! built only to be taken apart again (issue #45: CPU per call against
//! nginx's `grpc_pass`). Here a call's head goes up as one HPACK block of
//! plain literals written straight from the proxied fields
//! ([`super::http2`]), and the response is decoded with the decoder the
//! client side already has ([`crate::http2::hpack`]).
//!
//! The shape: one task per connection ([`driver`]) owns the socket, reads
//! frames into the shared [`state::State`] and writes what it queued; the
//! calls hold [`Stream`]s and do their part (open, send, take) under the
//! same lock, waking the driver when there is something to write. What it
//! does, as RFC 9113 asks and as the h2 crate did for sluice:
//! - streams beyond the upstream's SETTINGS_MAX_CONCURRENT_STREAMS wait
//!   for one to end;
//! - flow control both ways: request DATA is framed as the upstream's
//!   windows allow (a call gives its next piece once the last is framed);
//!   what the upstream sends is given back to the stream's window only as
//!   the client side takes it (a stream holds at most 2 MB), to the
//!   connection's as it arrives (so a client that reads nothing stalls its
//!   own call, not the others sharing the connection);
//! - a call that lets go of its stream before the end resets it (CANCEL);
//! - the upstream's RST_STREAM fails that stream, its GOAWAY the streams
//!   above its last (and no new one goes on that connection);
//! - a malformed response head or trailers (RFC 9113 §8.3) resets the
//!   stream (PROTOCOL_ERROR); a broken connection-level rule (a window past
//!   2^31−1, a frame over 16 KB, a bad HPACK block) ends the connection
//!   with GOAWAY;
//! - floods: a header block of more than 128 frames or 128 KB, or more
//!   than 100 empty DATA frames in a row, end the connection
//!   (ENHANCE_YOUR_CALM); PINGs and SETTINGS are answered, but nothing is
//!   read while 512 KB of answers wait to be written;
//! - an upstream that takes nothing written to it for a minute loses the
//!   connection (new calls go to another); an ended one has five seconds
//!   to take its GOAWAY.

mod driver;
pub(crate) mod fields;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod fuzz;
mod state;
#[cfg(test)]
mod tests;

use self::state::State;
use bytes::Bytes;
use http::HeaderMap;
use parking_lot::Mutex;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite};

pub(crate) use self::fields::Head;

/// Streams one connection takes before another is opened: RFC 9113 §6.5.2
/// asks peers to allow at least 100 (an upstream that allows fewer is
/// honoured: a stream waits for one to end).
pub(super) const STREAMS_PER_CONNECTION: usize = 100;
/// The windows offered to the upstream, per stream and for the connection:
/// a stream buffers at most this much of a response its client does not
/// read (the connection's is given back as data arrives).
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;
/// The largest frame taken (the protocol's default, never raised).
const MAX_FRAME: usize = 16 * 1024;
/// The largest response head (or trailers) taken from an upstream: a gRPC
/// head is a few hundred bytes; a larger one is an upstream's error (nginx
/// would refuse it past `grpc_buffer_size`, 4k or 8k).
const MAX_HEADER_LIST: u32 = 64 * 1024;

/// How a stream or its connection failed.
#[derive(Clone, Debug)]
pub(crate) enum Failure {
    /// The stream was reset with this code: by the upstream, or by sluice
    /// for the upstream's fault on it (a malformed head).
    Reset(u32),
    /// The connection went away with this code: the upstream's GOAWAY that
    /// did not cover the stream, or sluice's for a connection-level fault.
    GoAway(u32),
    /// The socket failed.
    Io(Arc<std::io::Error>),
    /// The upstream closed the connection (or sluice did, unused).
    Closed,
}

impl Failure {
    /// The HTTP/2 error code, when the failure has one.
    pub(crate) fn reason(&self) -> Option<u32> {
        match self {
            Failure::Reset(c) | Failure::GoAway(c) => Some(*c),
            Failure::Io(_) | Failure::Closed => None,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Reset(c) => write!(f, "stream reset: {}", h2::Reason::from(*c)),
            Failure::GoAway(c) => write!(f, "connection gone away: {}", h2::Reason::from(*c)),
            Failure::Io(e) => write!(f, "{e}"),
            Failure::Closed => f.write_str("connection closed"),
        }
    }
}

impl std::error::Error for Failure {}

type Shared = Arc<Mutex<State>>;

/// A handle on one upstream connection (the pool keeps one).
pub(super) struct Connection {
    shared: Shared,
}

impl Connection {
    /// Starts HTTP/2 on `io` (the preface and settings go first): its
    /// driver runs as a task of this worker.
    pub(super) fn start<S>(io: S) -> Connection
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut state = State::new(STREAMS_PER_CONNECTION);
        state.handles = 1;
        let shared = Arc::new(Mutex::new(state));
        tokio::spawn(driver::Driver::new(io, shared.clone()).run());
        Connection { shared }
    }

    /// Whether it takes no new stream (GOAWAY, or it ended).
    pub(super) fn is_closed(&self) -> bool {
        self.shared.lock().refuses()
    }

    /// Opens a stream for a request whose head is `block` (HPACK), ended
    /// when `end`, once the upstream's concurrency limit allows it.
    pub(super) async fn open(&self, block: &[u8], end: bool) -> Result<Stream, Failure> {
        std::future::poll_fn(|cx| self.shared.lock().poll_open(cx)).await?;
        let mut state = self.shared.lock();
        if let Some(why) = &state.ended {
            return Err(why.clone());
        }
        if state.refuses() {
            return Err(Failure::GoAway(state::NO_ERROR));
        }
        let id = state.open(block, end);
        state.handles += 1;
        Ok(Stream {
            shared: self.shared.clone(),
            id,
        })
    }
}

impl Clone for Connection {
    fn clone(&self) -> Connection {
        self.shared.lock().handles += 1;
        Connection {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.handles -= 1;
        if state.finished() {
            state.wake_driver();
        }
    }
}

/// One call's stream. Dropped before both ways are over, it is reset
/// (CANCEL).
pub(crate) struct Stream {
    shared: Shared,
    id: u32,
}

impl Stream {
    pub(super) fn poll_head(&self, cx: &Context<'_>) -> Poll<Result<Head, Failure>> {
        self.shared.lock().poll_head(self.id, cx)
    }

    /// The next piece of the response body (`None`: the DATA is over).
    pub(super) fn poll_data(&self, cx: &Context<'_>) -> Poll<Option<Result<Bytes, Failure>>> {
        self.shared.lock().poll_data(self.id, cx)
    }

    pub(super) fn poll_trailers(
        &self,
        cx: &Context<'_>,
    ) -> Poll<Result<Option<HeaderMap>, Failure>> {
        self.shared.lock().poll_trailers(self.id, cx)
    }

    pub(super) fn is_end_stream(&self) -> bool {
        self.shared.lock().is_end_stream(self.id)
    }

    /// Ready when all the request body given so far is framed.
    pub(super) fn poll_room(&self, cx: &Context<'_>) -> Poll<Result<(), Failure>> {
        self.shared.lock().poll_room(self.id, cx)
    }

    pub(super) fn send_data(&self, data: Bytes, end: bool) -> Result<(), Failure> {
        self.shared.lock().send_data(self.id, data, end)
    }

    /// Sends the request's trailers, which end it.
    pub(super) fn send_trailers(&self, trailers: &HeaderMap) {
        let mut block = Vec::with_capacity(64);
        for (name, value) in trailers {
            crate::http2::hpack::encode(&mut block, name.as_str().as_bytes(), value.as_bytes());
        }
        self.shared.lock().send_trailers(self.id, block);
    }

    pub(super) fn reset(&self, code: u32) {
        self.shared.lock().reset(self.id, code);
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.forget(self.id);
        state.handles -= 1;
        if state.finished() {
            state.wake_driver();
        }
    }
}
