//! An HTTP/1.1 request body as sluice's own connection loop hands it to the
//! request: the loop reads the socket only when the request asks for more
//! (so a body nobody reads is never read, and `Expect: 100-continue` is
//! answered only then, as hyper does), and passes the data on through a
//! [`Pipe`] shared by both.
//!
//! Both ends live in the connection's task (the loop polls the request's
//! future, then feeds the pipe if it asked), but the reader still leaves
//! its waker, so a body moved elsewhere would still be woken.

use crate::body::BodyError;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// What both ends of a request body share.
#[derive(Default)]
struct Slot {
    /// Data read and not yet taken.
    data: Option<Bytes>,
    /// The body ended (`Ok`) or broke off.
    end: Option<Result<(), Arc<std::io::Error>>>,
    /// The reader asked for more and found nothing.
    wanted: bool,
    /// The reader is gone.
    dropped: bool,
    waker: Option<Waker>,
}

/// The connection loop's end of a request body.
#[derive(Clone)]
pub(crate) struct Pipe(Arc<Mutex<Slot>>);

/// The request's end: an [`hyper::body::Body`].
pub(crate) struct PipeBody {
    slot: Arc<Mutex<Slot>>,
    /// What a `Content-Length` left to come (`None`: chunked).
    left: Option<u64>,
}

impl Pipe {
    /// A body of `length` bytes (`None`: chunked), and its reader's end.
    pub(crate) fn new(length: Option<u64>) -> (Pipe, PipeBody) {
        let slot = Arc::new(Mutex::new(Slot::default()));
        let body = PipeBody {
            slot: slot.clone(),
            left: length,
        };
        (Pipe(slot), body)
    }

    /// The reader is waiting for data, and the last was taken.
    pub(crate) fn wanted(&self) -> bool {
        let s = self.0.lock();
        s.wanted && s.data.is_none() && s.end.is_none() && !s.dropped
    }

    /// Wakes the reader with nothing new to read (what a chunked body
    /// announced changed: see [`crate::client_body::LimitedBody`]).
    pub(crate) fn nudge(&self) {
        self.with_woken(|s| s.wanted = false);
    }

    /// Data for the reader.
    pub(crate) fn send(&self, data: Bytes) {
        self.with_woken(|s| {
            s.wanted = false;
            match &mut s.data {
                Some(d) => {
                    let mut joined = Vec::with_capacity(d.len() + data.len());
                    joined.extend_from_slice(d);
                    joined.extend_from_slice(&data);
                    *d = joined.into();
                }
                None => s.data = Some(data),
            }
        });
    }

    /// The body ended (`Ok`), or the client broke it off.
    pub(crate) fn end(&self, how: Result<(), std::io::Error>) {
        self.with_woken(|s| s.end = Some(how.map_err(Arc::new)));
    }

    fn with_woken(&self, f: impl FnOnce(&mut Slot)) {
        let waker = {
            let mut s = self.0.lock();
            f(&mut s);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A body that broke off, as the request sees it (the client's socket
/// error, or the chunked framing nginx refuses: see
/// [`crate::request`]'s `invalid_chunked`).
#[derive(Debug)]
pub(crate) struct BrokenBody(pub(crate) Arc<std::io::Error>);

impl std::fmt::Display for BrokenBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "request body: {}", self.0)
    }
}

impl std::error::Error for BrokenBody {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl Body for PipeBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let mut s = self.slot.lock();
        if let Some(d) = s.data.take() {
            drop(s);
            if let Some(left) = self.left.as_mut() {
                *left = left.saturating_sub(d.len() as u64);
            }
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        match &s.end {
            Some(Ok(())) => Poll::Ready(None),
            Some(Err(e)) => Poll::Ready(Some(Err(Box::new(BrokenBody(e.clone()))))),
            None => {
                s.wanted = true;
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.left == Some(0)
    }

    fn size_hint(&self) -> SizeHint {
        match self.left {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

impl Drop for PipeBody {
    fn drop(&mut self) {
        self.slot.lock().dropped = true;
    }
}

/// A request's body however its connection reads it: hyper's (HTTP/2),
/// sluice's own HTTP/1.1 loop's, or another protocol's stream (HTTP/3's,
/// boxed: only its connections know its type).
pub enum ClientBody {
    Hyper(hyper::body::Incoming),
    Pipe(PipeBody),
    Stream(Pin<Box<dyn Body<Data = Bytes, Error = BodyError> + Send>>),
    /// No body (no `Content-Length`, or 0, and not chunked).
    Empty,
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            ClientBody::Hyper(b) => Pin::new(b)
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(|e| Box::new(e) as BodyError))),
            ClientBody::Pipe(b) => Pin::new(b).poll_frame(cx),
            ClientBody::Stream(b) => b.as_mut().poll_frame(cx),
            ClientBody::Empty => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientBody::Hyper(b) => b.is_end_stream(),
            ClientBody::Pipe(b) => b.is_end_stream(),
            ClientBody::Stream(b) => b.is_end_stream(),
            ClientBody::Empty => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientBody::Hyper(b) => b.size_hint(),
            ClientBody::Pipe(b) => b.size_hint(),
            ClientBody::Stream(b) => b.size_hint(),
            ClientBody::Empty => SizeHint::with_exact(0),
        }
    }
}
