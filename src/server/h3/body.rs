//! A request body read from an HTTP/3 request stream, held to its
//! `Content-Length`: a body longer or shorter than declared is an error
//! (RFC 9114 §4.1.2: malformed), so the upstream never reads a request
//! other than the one sluice limited and logged.

use crate::body::BodyError;
use bytes::{Buf, Bytes};
use h3::server::RequestStream;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

/// The receiving half of a request stream, as a body.
pub(super) struct QuicBody {
    recv: RequestStream<h3_quinn::RecvStream, Bytes>,
    /// `Content-Length`, if the request had one.
    /// Set when the body disagreed with its length: the stream is then
    /// reset as malformed (`H3_MESSAGE_ERROR`), not as cancelled.
    malformed: Arc<AtomicBool>,
    /// What [`QuicBody::of`] read to see whether the stream had ended.
    first: Option<Bytes>,
    declared: Option<u64>,
    read: u64,
    done: bool,
}

/// A body that disagreed with its `Content-Length`.
#[derive(Debug, thiserror::Error)]
#[error("request body of {read} bytes or more, Content-Length {declared}")]
struct LengthMismatch {
    read: u64,
    declared: u64,
}

impl QuicBody {
    /// The body, or `None` when the stream already ended with its head
    /// (no `Content-Length`, no DATA: a GET's) — then the upstream gets a
    /// request without a body, not an empty chunked one, as nginx sends it.
    pub(super) fn of(
        mut recv: RequestStream<h3_quinn::RecvStream, Bytes>,
        declared: Option<u64>,
        malformed: Arc<AtomicBool>,
    ) -> Option<QuicBody> {
        let mut first = None;
        if declared.is_none() {
            let mut cx = Context::from_waker(std::task::Waker::noop());
            match recv.poll_recv_data(&mut cx) {
                Poll::Ready(Ok(None)) => return None,
                Poll::Ready(Ok(Some(mut buf))) => first = Some(buf.copy_to_bytes(buf.remaining())),
                // An error shows again at the next read.
                _ => {}
            }
        }
        Some(QuicBody {
            recv,
            malformed,
            first,
            declared,
            read: 0,
            done: false,
        })
    }

    fn mismatch(&mut self, declared: u64) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.done = true;
        self.malformed.store(true, Ordering::Relaxed);
        self.recv.stop_sending(h3::error::Code::H3_MESSAGE_ERROR);
        let read = self.read;
        Poll::Ready(Some(Err(Box::new(LengthMismatch { read, declared }))))
    }
}

impl Body for QuicBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(data) = self.first.take() {
            self.read += data.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        match self.recv.poll_recv_data(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(mut buf))) => {
                let data = buf.copy_to_bytes(buf.remaining());
                self.read += data.len() as u64;
                match self.declared {
                    Some(d) if self.read > d => self.mismatch(d),
                    _ => Poll::Ready(Some(Ok(Frame::data(data)))),
                }
            }
            Poll::Ready(Ok(None)) => match self.declared {
                Some(d) if self.read != d => self.mismatch(d),
                _ => {
                    self.done = true;
                    Poll::Ready(None)
                }
            },
            Poll::Ready(Err(e)) => {
                self.done = true;
                Poll::Ready(Some(Err(Box::new(e))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        match self.declared {
            Some(n) => SizeHint::with_exact(n.saturating_sub(self.read)),
            None => SizeHint::default(),
        }
    }
}
