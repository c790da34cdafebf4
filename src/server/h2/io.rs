//! The client's socket as hyper's HTTP/2 server reads and writes it.

use super::stream::Streams;
use crate::conn::{ConnState, Expired};
use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `GOAWAY` (type 7) on stream 0, last stream 2^31-1 (the streams it has
/// begun are not known here), `ENHANCE_YOUR_CALM` (0xb).
const GOAWAY_CALM: [u8; 17] = [
    0, 0, 8, 7, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0x0b,
];

/// The client's stream for hyper: the bytes already read first, writes
/// bounded by `send_timeout`, and the `GOAWAY ENHANCE_YOUR_CALM` that ends
/// a connection whose client reset too many streams.
pub(super) struct H2Io<S> {
    inner: S,
    read_ahead: Vec<u8>,
    at: usize,
    state: Arc<ConnState>,
    /// When a write started waiting (`send_timeout` runs from there).
    write_timer: Option<Pin<Box<Sleep>>>,
    streams: Arc<Streams>,
    /// hyper wrote bytes it has not flushed yet: it may be inside a frame.
    unflushed: bool,
}

impl<S> H2Io<S> {
    pub(super) fn new(
        inner: S,
        read_ahead: Vec<u8>,
        state: Arc<ConnState>,
        streams: Arc<Streams>,
    ) -> H2Io<S> {
        H2Io {
            inner,
            read_ahead,
            at: 0,
            state,
            write_timer: None,
            streams,
            unflushed: false,
        }
    }
}

impl<S: AsyncWrite + Unpin> H2Io<S> {
    /// Too many streams were reset: a GOAWAY if hyper's writes end on a
    /// frame's end (it flushes only whole frames), written once and as far
    /// as the socket takes it at once; then an error, which ends hyper's
    /// connection.
    fn calm(&mut self, cx: &mut Context<'_>) -> io::Error {
        if !self.unflushed {
            self.unflushed = true;
            let inner = Pin::new(&mut self.inner);
            if let Poll::Ready(Ok(n)) = inner.poll_write(cx, &GOAWAY_CALM) {
                if n == GOAWAY_CALM.len() {
                    let _ = Pin::new(&mut self.inner).poll_flush(cx);
                }
            }
        }
        io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the client reset too many streams",
        )
    }

    /// A pending write: fails once `send_timeout` passed without progress.
    fn poll_write_timer(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let send = self.state.timeouts.send;
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(send)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(self.state.expire(Expired::Send))
    }

    fn wrote(
        &mut self,
        r: Poll<io::Result<usize>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Ready(r) => {
                self.write_timer = None;
                if matches!(r, Ok(n) if n > 0) {
                    self.unflushed = true;
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_write_timer(cx).map(Err),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for H2Io<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.streams.calm() {
            return Poll::Ready(Err(this.calm(cx)));
        }
        if this.at < this.read_ahead.len() {
            let n = (this.read_ahead.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.read_ahead[this.at..this.at + n]);
            this.at += n;
            if this.at == this.read_ahead.len() {
                (this.read_ahead, this.at) = (Vec::new(), 0);
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for H2Io<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.streams.calm() {
            return Poll::Ready(Err(this.calm(cx)));
        }
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.wrote(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.streams.calm() {
            return Poll::Ready(Err(this.calm(cx)));
        }
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.wrote(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(Ok(())) => {
                this.write_timer = None;
                this.unflushed = false;
                if this.streams.calm() {
                    return Poll::Ready(Err(this.calm(cx)));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.poll_write_timer(cx).map(Err),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
