//! Response bodies as sluice passes them around: one boxed body type for
//! every response (made here, or an upstream's), and [`Watched`], the one
//! place where something happens as a body goes by and when it ends.
//!
//! Three things wait for a response body's end: the connection turns idle
//! (`keepalive_timeout` starts then), a request's access-log line is written
//! with the bytes sent, an HTTP/2 stream lets go of its `limit_conn`
//! counts. Each is a [`Watch`]; [`Watched`] polls the body and tells it.

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

/// What a body's progress means to whoever watches it. Every method has a
/// default that does nothing: a watcher whose `Drop` is the point (the body
/// ended, failed or was dropped: all the same to it) implements none.
pub(crate) trait Watch: Unpin {
    /// The body is about to be polled.
    fn polling(&mut self) {}
    /// A data frame of `len` bytes went by (the last one too).
    fn data(&mut self, _len: usize) {}
    /// The body's trailers went by (its last frame).
    fn trailers(&mut self, _trailers: &http::HeaderMap) {}
    /// A frame went by and the body goes on.
    fn more(&mut self) {}
    /// The body ended: its last frame went by, or none was left.
    fn ended(self)
    where
        Self: Sized,
    {
    }
    /// The body failed with `error`.
    fn failed(self, _error: &BodyError)
    where
        Self: Sized,
    {
    }
}

/// A response body and its watcher: the watcher hears of every frame, then
/// of the end or the failure, once; it is dropped then, or with the body.
pub struct Watched<W> {
    inner: Body,
    watch: Option<W>,
}

impl<W: Watch> Watched<W> {
    pub(crate) fn new(inner: Body, watch: W) -> Watched<W> {
        Watched {
            inner,
            watch: Some(watch),
        }
    }
}

impl<W: Watch> HttpBody for Watched<W> {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if let Some(w) = this.watch.as_mut() {
            w.polling();
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let Some(mut w) = this.watch.take() else {
            return polled;
        };
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    w.data(d.len());
                } else if let Some(t) = frame.trailers_ref() {
                    w.trailers(t);
                }
                if this.inner.is_end_stream() {
                    w.ended();
                } else {
                    w.more();
                    this.watch = Some(w);
                }
            }
            Poll::Ready(None) => w.ended(),
            Poll::Ready(Some(Err(e))) => w.failed(e),
            Poll::Pending => this.watch = Some(w),
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
