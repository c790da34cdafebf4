//! Response bodies as sluice passes them around: one boxed body type for
//! every response (made here, or an upstream's), and [`UntilEnd`], which
//! holds a guard until a body has been sent.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

/// The body of every response sluice sends.
pub type Body = BoxBody<Bytes, BodyError>;

/// The error of a body sluice passes on (a client body that broke off or
/// grew too large, an upstream body that failed).
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

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

impl<B: HttpBody + Unpin, G: Unpin> HttpBody for UntilEnd<B, G> {
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
