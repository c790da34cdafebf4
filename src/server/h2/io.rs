//! The client's socket as hyper's HTTP/2 server reads and writes it: every
//! byte read goes through [`Inbound`] (the request gate and the frame
//! budgets) first.

use super::stream::Streams;
use crate::conn_state::ConnState;
use crate::errlog::{self, Severity};
use crate::http1::HeadRules;
use crate::http2::{Abort, Inbound, inbound};
use crate::request::Env;
use crate::server::refuse;
use bytes::Buf;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How much one read asks for.
const READ: usize = 16 * 1024;

/// The client's stream for hyper: the bytes already read first, every
/// frame through the [`Inbound`] gate, writes bounded by `send_timeout`,
/// and the `GOAWAY` that ends a connection the gate (or too many reset
/// streams) condemned.
pub(super) struct H2Io<S> {
    inner: S,
    read_ahead: Vec<u8>,
    inbound: Inbound,
    state: Arc<ConnState>,
    /// When a write started waiting (`send_timeout` runs from there).
    write_timer: crate::conn_state::SendTimer,
    streams: Arc<Streams>,
    env: Arc<Env>,
    /// hyper wrote bytes it has not flushed yet: it may be inside a frame.
    unflushed: bool,
    /// The gate ended the connection: the GOAWAY's code, once logged.
    aborted: Option<u32>,
    /// Where hyper's writes are in its frames.
    outbound: Outbound,
}

/// The frames hyper writes, followed as they go out, for the ends of
/// streams: what a stream holds is let go once its end is written
/// ([`Streams::written`]).
#[derive(Default)]
struct Outbound {
    head: [u8; 9],
    /// Bytes of the current frame's head written so far.
    have: usize,
    /// Bytes of its payload still to be written.
    left: usize,
}

impl Outbound {
    /// `bytes` were written: calls `out` with each frame now out whole
    /// (its kind, flags and stream).
    fn wrote(&mut self, mut bytes: &[u8], out: &mut impl FnMut(u8, u8, u32)) {
        while !bytes.is_empty() {
            if self.left > 0 {
                let n = self.left.min(bytes.len());
                self.left -= n;
                bytes = &bytes[n..];
            } else {
                let n = (9 - self.have).min(bytes.len());
                self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have < 9 {
                    return;
                }
                self.have = 0;
                let h = self.head;
                self.left = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
            }
            if self.left == 0 && self.have == 0 {
                let h = self.head;
                let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                out(h[3], h[4], stream);
            }
        }
    }
}

impl<S> H2Io<S> {
    pub(super) fn new(
        inner: S,
        read_ahead: Vec<u8>,
        (state, streams, env): (Arc<ConnState>, Arc<Streams>, Arc<Env>),
        rules: HeadRules,
    ) -> H2Io<S> {
        H2Io {
            inner,
            read_ahead,
            inbound: Inbound::new(rules),
            state,
            write_timer: crate::conn_state::SendTimer::default(),
            streams,
            env,
            unflushed: false,
            aborted: None,
            outbound: Outbound::default(),
        }
    }

    /// The gate condemned the connection: one info line, the metric.
    fn condemned(&mut self, abort: &Abort) {
        let s = &self.streams;
        match abort {
            Abort::Flood { kind, count } => {
                self.env.metrics.h2_flood(kind.label());
                errlog::emit(
                    Severity::Info,
                    format_args!(
                        "*{} http2 flood detected: {count} {} frames, closing the connection \
                         (ENHANCE_YOUR_CALM), client: {}, server: {}",
                        s.id,
                        kind.frame_name(),
                        s.client,
                        s.server
                    ),
                );
            }
            Abort::Field(why) => errlog::emit(
                Severity::Info,
                format_args!(
                    "*{} client sent {why} while processing HTTP/2 connection, client: {}, \
                     server: {}",
                    s.id, s.client, s.server
                ),
            ),
            Abort::Compression(why) | Abort::Protocol(why) => errlog::emit(
                Severity::Info,
                format_args!(
                    "*{} client sent invalid HTTP/2 frames ({why}), closing the connection, \
                     client: {}, server: {}",
                    s.id, s.client, s.server
                ),
            ),
        }
        self.aborted = Some(abort.code());
    }
}

impl<S: AsyncWrite + Unpin> H2Io<S> {
    /// The connection must end with a GOAWAY of `code`: written if hyper's
    /// writes end on a frame's end (it flushes only whole frames), once and
    /// as far as the socket takes it at once; then an error, which ends
    /// hyper's connection.
    fn go_away(&mut self, cx: &mut Context<'_>, code: u32) -> io::Error {
        if !self.unflushed {
            self.unflushed = true;
            let frame = inbound::goaway(self.inbound.last_stream(), code);
            let inner = Pin::new(&mut self.inner);
            if let Poll::Ready(Ok(n)) = inner.poll_write(cx, &frame) {
                if n == frame.len() {
                    let _ = Pin::new(&mut self.inner).poll_flush(cx);
                }
            }
        }
        io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the connection was condemned",
        )
    }

    /// Why hyper may go no further: too many streams reset (code 0xb), or
    /// the gate's verdict.
    fn condemned_code(&self) -> Option<u32> {
        self.aborted.or(self.streams.calm().then_some(0xb))
    }

    /// A pending write: fails once `send_timeout` passed without progress.
    fn poll_write_timer(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        self.write_timer.poll_expired(cx, &self.state)
    }

    fn wrote<'b>(
        &mut self,
        r: Poll<io::Result<usize>>,
        bufs: impl IntoIterator<Item = &'b [u8]>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Ready(r) => {
                self.write_timer.progress();
                if let Ok(n) = r {
                    if n > 0 {
                        self.unflushed = true;
                        let (streams, inbound) = (&self.streams, &mut self.inbound);
                        // Frames that serve requests raise the budgets; a
                        // stream's end lets go what it held.
                        let mut frame = |kind: u8, flags: u8, stream: u32| {
                            if kind <= 1 {
                                inbound.served();
                            }
                            let ends = kind <= 1 && flags & 0x1 != 0 || kind == 3;
                            if ends && stream != 0 {
                                streams.written(stream);
                            }
                        };
                        let mut left = n;
                        for b in bufs {
                            let b = &b[..left.min(b.len())];
                            self.outbound.wrote(b, &mut frame);
                            left -= b.len();
                            if left == 0 {
                                break;
                            }
                        }
                    }
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_write_timer(cx).map(Err),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> H2Io<S> {
    /// Reads more of the client's bytes into the gate and moves them on;
    /// Ready(false) at the end of the stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        if !self.read_ahead.is_empty() {
            let ahead = std::mem::take(&mut self.read_ahead);
            self.inbound.input().extend_from_slice(&ahead);
        } else {
            let input = self.inbound.input();
            input.reserve(READ);
            let read = tokio_util::io::poll_read_buf(Pin::new(&mut self.inner), cx, input);
            let Poll::Ready(n) = read else {
                // Waiting for a client with no stream open: an idle
                // connection holds no buffer of ours (the next read takes
                // one again). A busy one keeps its buffer between reads.
                if self.streams.open() == 0 && self.inbound.idle() {
                    self.inbound.release();
                }
                return Poll::Pending;
            };
            if n? == 0 {
                return Poll::Ready(Ok(false));
            }
        }
        let r = self.inbound.process();
        let refused = self.inbound.take_refused();
        if !refused.is_empty() {
            self.streams.refused(refused);
        }
        for line in self.inbound.take_notices() {
            let s = &self.streams;
            refuse::log_refusal(&line, s.id, s.client, "");
        }
        if let Err(abort) = r {
            self.condemned(&abort);
        }
        Poll::Ready(Ok(true))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for H2Io<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            let out = this.inbound.output();
            if !out.is_empty() {
                let n = out.len().min(buf.remaining());
                buf.put_slice(&out[..n]);
                out.advance(n);
                if this.inbound.idle() {
                    this.inbound.release();
                }
                return Poll::Ready(Ok(()));
            }
            if let Some(code) = this.condemned_code() {
                return Poll::Ready(Err(this.go_away(cx, code)));
            }
            if !ready!(this.poll_fill(cx))? {
                return Poll::Ready(Ok(()));
            }
            if this.inbound.idle() {
                this.inbound.release();
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for H2Io<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some(code) = this.condemned_code() {
            return Poll::Ready(Err(this.go_away(cx, code)));
        }
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.wrote(r, [buf], cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some(code) = this.condemned_code() {
            return Poll::Ready(Err(this.go_away(cx, code)));
        }
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.wrote(r, bufs.iter().map(|b| &**b), cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(Ok(())) => {
                this.write_timer.progress();
                this.unflushed = false;
                if let Some(code) = this.condemned_code() {
                    return Poll::Ready(Err(this.go_away(cx, code)));
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

#[cfg(test)]
mod tests {
    use super::Outbound;

    fn frame(kind: u8, flags: u8, stream: u32, len: usize) -> Vec<u8> {
        let l = (len as u32).to_be_bytes();
        let mut f = vec![l[1], l[2], l[3], kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.resize(9 + len, 0);
        f
    }

    /// Frames are found however the writes cut them.
    #[test]
    fn stream_ends_are_seen_across_any_cut() {
        let mut bytes = frame(1, 0x4, 1, 20); // HEADERS, not the end
        bytes.extend(frame(0, 0, 1, 100)); // DATA
        bytes.extend(frame(0, 0x1, 1, 5)); // DATA, END_STREAM
        bytes.extend(frame(1, 0x5, 3, 7)); // HEADERS, END_STREAM
        bytes.extend(frame(6, 0, 0, 8)); // PING
        bytes.extend(frame(3, 0, 5, 4)); // RST_STREAM
        for cut in 1..bytes.len() {
            let mut o = Outbound::default();
            let mut ended = Vec::new();
            for piece in bytes.chunks(cut) {
                o.wrote(piece, &mut |kind, flags, s| ended.push((kind, flags, s)));
            }
            let want = [
                (1, 4, 1),
                (0, 0, 1),
                (0, 1, 1),
                (1, 5, 3),
                (6, 0, 0),
                (3, 0, 5),
            ];
            assert_eq!(ended, want, "cut {cut}");
        }
        // Not before its last byte.
        let mut o = Outbound::default();
        let mut ended = Vec::new();
        let end = frame(0, 0x1, 7, 5);
        o.wrote(&end[..end.len() - 1], &mut |_, _, s| ended.push(s));
        assert!(ended.is_empty());
        o.wrote(&end[end.len() - 1..], &mut |_, _, s| ended.push(s));
        assert_eq!(ended, [7]);
    }
}
