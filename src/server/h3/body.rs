//! A request body read from an HTTP/3 request stream, held to its
//! `Content-Length`: a body longer or shorter than declared is an error
//! (RFC 9114 §4.1.2: malformed), so the upstream never reads a request
//! other than the one sluice limited and logged.
//!
//! Until the body is first read (while `limit_req` delays the request),
//! its stream is watched ([`Watch`]): what the client sends meanwhile is
//! kept (up to [`EARLY_MAX`]), and a RESET_STREAM is seen at once, so that
//! a request the client cancelled is dropped and logged 499, never
//! forwarded — as nginx's reading handler does while it delays (nginx's
//! h3_limit_req.t, "reset stream").

use crate::body::BodyError;
use bytes::{Buf, Bytes};
use h3::server::RequestStream;
use hyper::body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

/// What the watch keeps of a body before it is read: QUIC's flow control
/// holds the rest back.
const EARLY_MAX: usize = 64 * 1024;

type Recv = RequestStream<super::quic::RecvHalf, Bytes>;

/// The stream and what was read of it before the body was.
struct Inner {
    recv: Recv,
    early: VecDeque<Bytes>,
    early_len: usize,
    /// The stream ended (FIN) while watched.
    ended: bool,
    /// The stream failed while watched (its error shows at the first read).
    failed: Option<h3::error::StreamError>,
    /// The body was read: the watch has nothing more to do.
    started: bool,
}

/// The receiving half of a request stream, as a body.
pub(super) struct QuicBody {
    inner: Arc<Mutex<Inner>>,
    /// Set when the body disagreed with its length: the stream is then
    /// reset as malformed (`H3_MESSAGE_ERROR`), not as cancelled.
    malformed: Arc<AtomicBool>,
    declared: Option<u64>,
    read: u64,
    done: bool,
}

/// Resolves when the client reset the stream before its body was read.
pub(super) struct Watch(Arc<Mutex<Inner>>);

/// A body that disagreed with its `Content-Length`.
#[derive(Debug, thiserror::Error)]
#[error("request body of {read} bytes or more, Content-Length {declared}")]
struct LengthMismatch {
    read: u64,
    declared: u64,
}

impl Inner {
    /// Reads what the stream has, into `early`, until it is full, ended
    /// or failed; Ready(true) once it was reset by the client.
    fn gather(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        while !self.started && !self.ended && self.failed.is_none() && self.early_len < EARLY_MAX {
            match self.recv.poll_recv_data(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Some(mut buf))) => {
                    let data = buf.copy_to_bytes(buf.remaining());
                    self.early_len += data.len();
                    self.early.push_back(data);
                }
                Poll::Ready(Ok(None)) => self.ended = true,
                Poll::Ready(Err(e)) => {
                    let reset = matches!(e, h3::error::StreamError::RemoteTerminate { .. });
                    self.failed = Some(e);
                    if reset {
                        return Poll::Ready(true);
                    }
                }
            }
        }
        Poll::Ready(false)
    }
}

impl QuicBody {
    /// The body, or `None` when the stream already ended with its head
    /// (no `Content-Length`, no DATA: a GET's) — then the upstream gets a
    /// request without a body, not an empty chunked one, as nginx sends it.
    pub(super) fn of(
        recv: Recv,
        declared: Option<u64>,
        malformed: Arc<AtomicBool>,
    ) -> Option<QuicBody> {
        let mut inner = Inner {
            recv,
            early: VecDeque::new(),
            early_len: 0,
            ended: false,
            failed: None,
            started: false,
        };
        let _ = inner.gather(&mut Context::from_waker(std::task::Waker::noop()));
        if declared.is_none() && inner.ended && inner.early.is_empty() {
            return None;
        }
        Some(QuicBody {
            inner: Arc::new(Mutex::new(inner)),
            malformed,
            declared,
            read: 0,
            done: false,
        })
    }

    pub(super) fn watch(&self) -> Watch {
        Watch(self.inner.clone())
    }

    fn mismatch(
        &mut self,
        inner: &mut Inner,
        declared: u64,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.done = true;
        self.malformed.store(true, Ordering::Relaxed);
        inner.recv.stop_sending(h3::error::Code::H3_MESSAGE_ERROR);
        let read = self.read;
        Poll::Ready(Some(Err(Box::new(LengthMismatch { read, declared }))))
    }

    /// One piece of data: counted against `Content-Length`.
    fn data(
        &mut self,
        inner: &mut Inner,
        data: Bytes,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.read += data.len() as u64;
        match self.declared {
            Some(d) if self.read > d => self.mismatch(inner, d),
            _ => Poll::Ready(Some(Ok(Frame::data(data)))),
        }
    }

    /// The stream's end: the body must be as long as declared.
    fn end(&mut self, inner: &mut Inner) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.declared {
            Some(d) if self.read != d => self.mismatch(inner, d),
            _ => {
                self.done = true;
                Poll::Ready(None)
            }
        }
    }
}

impl Watch {
    /// Completes when the client resets the stream before the body is
    /// read; never after (the body then sees it).
    pub(super) async fn reset(&self) {
        std::future::poll_fn(|cx| match self.0.lock().gather(cx) {
            Poll::Ready(true) => Poll::Ready(()),
            _ => Poll::Pending,
        })
        .await
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
        let inner = self.inner.clone();
        let mut inner = inner.lock();
        inner.started = true;
        if let Some(data) = inner.early.pop_front() {
            return self.data(&mut inner, data);
        }
        if let Some(e) = inner.failed.take() {
            self.done = true;
            return Poll::Ready(Some(Err(Box::new(e))));
        }
        if inner.ended {
            return self.end(&mut inner);
        }
        match inner.recv.poll_recv_data(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(mut buf))) => {
                let data = buf.copy_to_bytes(buf.remaining());
                self.data(&mut inner, data)
            }
            Poll::Ready(Ok(None)) => self.end(&mut inner),
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
