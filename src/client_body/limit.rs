//! `client_max_body_size` on a body as it streams: for bodies without a
//! Content-Length, or lying about it, and for chunked bodies whose chunk
//! sizes announce too much before their bytes come.

use super::ClientBody;
use crate::body::BodyError;
use crate::conn_state::ConnState;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

/// The request body, cut off with an error once it exceeds
/// `client_max_body_size` (for bodies without a Content-Length, or lying
/// about it). [`BodyLimit::exceeded`] tells the proxy to answer 413.
pub struct LimitedBody {
    inner: ClientBody,
    max: u64,
    seen: u64,
    flag: BodyLimit,
    /// Its connection, to see what a chunked body announces before its
    /// bytes come.
    conn: Option<Arc<ConnState>>,
}

/// Shared with the proxy: did the body go over the limit, and how far.
#[derive(Clone, Default)]
pub struct BodyLimit(Arc<(AtomicBool, AtomicU64)>);

impl BodyLimit {
    pub fn exceeded(&self) -> bool {
        self.0.0.load(Ordering::Relaxed)
    }

    /// Bytes received when the limit was found exceeded.
    pub fn received(&self) -> u64 {
        self.0.1.load(Ordering::Relaxed)
    }
}

/// The body exceeded `client_max_body_size`.
#[derive(Debug, thiserror::Error)]
#[error("client intended to send too large body: more than {max} bytes")]
pub struct TooLarge {
    pub max: u64,
}

impl LimitedBody {
    /// `max` 0: unlimited, as nginx. With `conn`, a chunked body is also
    /// refused as soon as its chunk sizes announce more than `max`.
    pub fn new(
        inner: ClientBody,
        max: u64,
        conn: Option<Arc<ConnState>>,
    ) -> (LimitedBody, BodyLimit) {
        let flag = BodyLimit::default();
        (
            LimitedBody {
                inner,
                max,
                seen: 0,
                flag: flag.clone(),
                conn,
            },
            flag,
        )
    }

    fn too_large(&mut self, size: u64) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.flag.0.1.store(size, Ordering::Relaxed);
        self.flag.0.0.store(true, Ordering::Relaxed);
        Poll::Ready(Some(Err(Box::new(TooLarge { max: self.max }))))
    }
}

impl Body for LimitedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let declared = this
            .conn
            .as_ref()
            .map_or(0, |c| c.declared_body.load(Ordering::Relaxed));
        if this.max > 0 && declared > this.max {
            return this.too_large(declared);
        }
        match ready!(polled) {
            Some(Ok(frame)) => {
                if let Some(d) = frame.data_ref() {
                    this.seen += d.len() as u64;
                    if this.max > 0 && this.seen > this.max {
                        return this.too_large(this.seen);
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
