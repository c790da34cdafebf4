//! The client's socket as hyper's HTTP/2 server reads and writes it: every
//! byte read goes through [`Inbound`] (the request gate and the frame
//! budgets) first; every frame written is followed (the ends of streams,
//! the ledger that lets an idle connection be parked).

use super::CONNECTION_WINDOW;
use super::frames::{Outbound, Sent, Waking};
use super::stream::Streams;
use crate::conn_state::{Conn, ConnState};
use crate::errlog::{self, Severity};
use crate::http1::HeadRules;
use crate::http2::ledger::Replay;
use crate::http2::{Abort, Inbound, inbound};
use crate::request::Env;
use crate::server::Shared;
use crate::server::refuse;
use bytes::{Buf, BytesMut};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How much one read asks for.
const READ: usize = 16 * 1024;

/// The client's stream for hyper: the bytes already read first, every
/// frame through the [`Inbound`] gate, writes bounded by `send_timeout`,
/// the `GOAWAY` that ends a connection the gate (or too many reset
/// streams) condemned, and what parking needs (see [`super`]).
pub(super) struct H2Io<S> {
    inner: S,
    read_ahead: Vec<u8>,
    inbound: Inbound,
    state: Arc<ConnState>,
    /// When a write started waiting (`send_timeout` runs from there).
    write_timer: crate::conn_state::SendTimer,
    streams: Arc<Streams>,
    env: Arc<Env>,
    /// For the access-log lines of streams the gate reset.
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    /// hyper wrote bytes it has not flushed yet: it may be inside a frame.
    unflushed: bool,
    /// hyper's last write or flush is waiting for the socket.
    write_pending: bool,
    /// The gate ended the connection: the GOAWAY's code, once logged.
    aborted: Option<u32>,
    /// Where the written bytes are in hyper's frames.
    outbound: Outbound,
    /// Whole frames to write before hyper's next bytes: the gate's own
    /// answers, and after a park what the client is to see of hyper's
    /// first frames.
    ahead: BytesMut,
    /// `ahead` went out but is not flushed yet.
    ahead_unflushed: bool,
    /// Started afresh after a park: hyper's first frames are sifted.
    waking: Option<Waking>,
    /// Parked: what wakes hyper's fresh connection in step.
    replay: Option<Replay>,
    /// Last told to [`Streams::quiet`].
    quiet: bool,
    /// Streams the client reset that sluice still has: hyper reads
    /// nothing more until they are gone (see [`H2Io::poll_hyper_read`]).
    resetting: Vec<u32>,
}

impl<S> H2Io<S> {
    pub(super) fn new(
        inner: S,
        read_ahead: Vec<u8>,
        (shared, conn, streams): (Arc<Shared>, Arc<Conn>, Arc<Streams>),
        rules: HeadRules,
    ) -> H2Io<S> {
        let (state, env) = (conn.state.clone(), shared.env.clone());
        H2Io {
            inner,
            read_ahead,
            inbound: Inbound::new(rules),
            state,
            write_timer: crate::conn_state::SendTimer::default(),
            streams,
            env,
            shared,
            conn,
            unflushed: false,
            write_pending: false,
            aborted: None,
            outbound: Outbound::default(),
            ahead: BytesMut::new(),
            ahead_unflushed: false,
            waking: None,
            replay: None,
            quiet: false,
            resetting: Vec::new(),
        }
    }

    /// The same connection on another socket (`()` while it waits in the
    /// idle set): the old one back.
    /// (Boxed both ways: it lives in a box wherever it goes.)
    #[allow(clippy::boxed_local)]
    pub(super) fn swap_socket<T>(self: Box<Self>, socket: T) -> (S, Box<H2Io<T>>) {
        let io = *self;
        let moved = H2Io {
            inner: socket,
            read_ahead: io.read_ahead,
            inbound: io.inbound,
            state: io.state,
            write_timer: io.write_timer,
            streams: io.streams,
            env: io.env,
            shared: io.shared,
            conn: io.conn,
            unflushed: io.unflushed,
            write_pending: io.write_pending,
            aborted: io.aborted,
            outbound: io.outbound,
            ahead: io.ahead,
            ahead_unflushed: io.ahead_unflushed,
            waking: io.waking,
            replay: io.replay,
            quiet: io.quiet,
            resetting: io.resetting,
        };
        (io.inner, Box::new(moved))
    }

    /// The `GOAWAY` a parked connection gets before its close: NO_ERROR,
    /// naming the last stream the client opened.
    pub(super) fn goodbye(&self) -> [u8; 17] {
        inbound::goaway(self.inbound.last_stream(), 0)
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
        if !self.unflushed && self.ahead.is_empty() {
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

    /// `bytes` reached the socket: each frame now out whole raises the
    /// budgets (DATA and HEADERS), lets go what its stream held (its end),
    /// and goes in the ledger.
    fn sent(&mut self, bytes: &[u8]) {
        let (streams, inbound) = (&self.streams, &mut self.inbound);
        self.outbound.wrote(bytes, &mut |f: Sent| {
            if f.kind <= 1 {
                inbound.served();
            }
            let ends = f.kind <= 1 && f.flags & 0x1 != 0 || f.kind == 3;
            if ends && f.stream != 0 {
                streams.written(f.stream);
            }
            inbound
                .ledger()
                .server_frame(f.kind, f.flags, f.stream, f.len, f.lead());
        });
    }

    fn wrote<'b>(
        &mut self,
        r: Poll<io::Result<usize>>,
        bufs: impl IntoIterator<Item = &'b [u8]>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        self.write_pending = r.is_pending();
        match r {
            Poll::Ready(r) => {
                self.write_timer.progress();
                if let Ok(n) = r {
                    if n > 0 {
                        self.unflushed = true;
                        let mut left = n;
                        for b in bufs {
                            let b = &b[..left.min(b.len())];
                            self.sent(b);
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

    /// The gate's answers join `ahead` when they can go between hyper's
    /// frames (`ahead` holds only whole frames).
    fn queue_answers(&mut self) {
        if self.inbound.answers().is_empty() {
            return;
        }
        if self.ahead.is_empty() && !self.outbound.at_boundary() {
            return;
        }
        let answers = std::mem::take(self.inbound.answers());
        self.ahead.extend_from_slice(&answers);
    }

    /// Writes `ahead` out; Ready once it is all written.
    fn poll_ahead(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.ahead.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.ahead) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.write_timer.progress();
                    let bytes = self.ahead.split_to(n);
                    self.sent(&bytes);
                    self.ahead_unflushed = true;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return self.poll_write_timer(cx).map(Err),
            }
        }
        self.ahead = BytesMut::new();
        Poll::Ready(Ok(()))
    }

    /// While waking: hyper's frames the client is to see go `ahead`, as
    /// far as its window (opened by `granted` more) lets them; woken once
    /// in step.
    fn sift(&mut self, granted: u64) {
        if let Some(waking) = &mut self.waking {
            waking.grant(granted);
            waking.sift(&mut self.ahead);
            if waking.done(self.inbound.deficit()) {
                self.waking = None;
            }
        }
    }

    /// Sends what the gate answered by itself while hyper reads (hyper may
    /// have nothing to write): its frames, then a flush.
    fn send_answers(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        self.queue_answers();
        if let Poll::Ready(r) = self.poll_ahead(cx) {
            r?;
            if self.ahead_unflushed {
                if let Poll::Ready(r) = Pin::new(&mut self.inner).poll_flush(cx) {
                    r?;
                    self.ahead_unflushed = false;
                }
            }
        }
        Ok(())
    }

    /// Whether the connection may be parked now, told to [`Streams`] when
    /// it changes.
    fn tell_quiet(&mut self) {
        let quiet = self.read_ahead.is_empty()
            && self.ahead.is_empty()
            && !self.ahead_unflushed
            && self.waking.as_ref().is_none_or(Waking::settled)
            && !self.unflushed
            && !self.write_pending
            && self.aborted.is_none()
            && self.outbound.at_boundary()
            && self.inbound.parkable(CONNECTION_WINDOW);
        if quiet != self.quiet {
            self.quiet = quiet;
            self.streams.quiet(quiet);
        }
    }

    /// hyper's write of `bufs`, sifted while the connection wakes.
    fn poll_hyper_write<'b>(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'b>],
    ) -> Poll<io::Result<usize>> {
        if let Some(code) = self.condemned_code() {
            return Poll::Ready(Err(self.go_away(cx, code)));
        }
        if self.poll_ahead(cx)?.is_pending() {
            self.write_pending = true;
            return Poll::Pending;
        }
        self.queue_answers();
        if let Some(waking) = &mut self.waking {
            let mut n = 0;
            for b in bufs {
                waking.take(b);
                n += b.len();
            }
            self.sift(0);
            self.unflushed = true;
            self.write_pending = false;
            let _ = self.poll_ahead(cx)?;
            return Poll::Ready(Ok(n));
        }
        let r = match bufs {
            [one] => Pin::new(&mut self.inner).poll_write(cx, one),
            _ => Pin::new(&mut self.inner).poll_write_vectored(cx, bufs),
        };
        let r = self.wrote(r, bufs.iter().map(|b| &**b), cx);
        self.queue_answers();
        r
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> H2Io<S> {
    /// Reads more of the client's bytes into the gate and moves them on;
    /// Ready(false) at the end of the stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        if self.inbound.stopped() {
            // What follows a client's RST_STREAM, already read.
        } else if !self.read_ahead.is_empty() {
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
        for _ in 0..self.inbound.take_resets() {
            refuse::reset_logged(&self.shared, &self.conn);
        }
        for stream in self.inbound.take_client_resets() {
            if self.streams.reset_by_client(stream) {
                self.resetting.push(stream);
            }
        }
        if let Err(abort) = r {
            self.condemned(&abort);
        }
        let granted = self.inbound.take_granted();
        self.sift(granted);
        self.send_answers(cx)?;
        Poll::Ready(Ok(true))
    }

    fn poll_hyper_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let out = self.inbound.output();
            if !out.is_empty() {
                let n = out.len().min(buf.remaining());
                buf.put_slice(&out[..n]);
                out.advance(n);
                if self.inbound.idle() {
                    self.inbound.release();
                }
                return Poll::Ready(Ok(()));
            }
            if let Some(code) = self.condemned_code() {
                return Poll::Ready(Err(self.go_away(cx, code)));
            }
            if self.waking.as_mut().is_some_and(Waking::hold_reads) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            // hyper has the client's RST_STREAM: the frames after it (a
            // new stream, judged by limit_conn) wait until the stream's
            // request and body are dropped, and what they held with them.
            if !self.resetting.is_empty() {
                ready!(self.streams.poll_gone(cx, &mut self.resetting));
            }
            if !ready!(self.poll_fill(cx))? {
                return Poll::Ready(Ok(()));
            }
            if self.inbound.idle() {
                self.inbound.release();
            }
        }
    }

    /// Parks the connection (hyper's has been let go): true if it can be
    /// woken in step later (see [`super`]); its buffers are given back.
    pub(super) fn park(&mut self) -> bool {
        if !self.quiet {
            return false;
        }
        self.replay = self.inbound.park(CONNECTION_WINDOW);
        self.waking = None;
        self.ahead = BytesMut::new();
        self.read_ahead = Vec::new();
        self.quiet = false;
        self.streams.quiet(false);
        self.replay.is_some()
    }

    /// Parked, waits for the client: true when it spoke (the connection
    /// wakes with what it sent); false when the connection is to end: the
    /// client left, or a stop or `until` came (then a `GOAWAY` went).
    pub(super) async fn parked(
        &mut self,
        until: Option<tokio::time::Instant>,
        stopping: &mut tokio::sync::watch::Receiver<bool>,
    ) -> bool {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut first = [0u8; 128];
        let far = crate::clock::now() + std::time::Duration::from_secs(86_400);
        let read = tokio::select! {
            r = self.inner.read(&mut first) => r,
            _ = tokio::time::sleep_until(until.unwrap_or(far)) => Err(io::ErrorKind::TimedOut.into()),
            _ = stopping.wait_for(|stop| *stop) => Err(io::ErrorKind::Interrupted.into()),
        };
        match read {
            Ok(0) => false,
            Ok(n) => {
                self.wake(&first[..n]);
                true
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) =>
            {
                // As hyper's graceful close, without its PING: nothing is open.
                let goaway = self.goodbye();
                let send = self.state.timeouts.send;
                let bye = async {
                    self.inner.write_all(&goaway).await?;
                    self.inner.flush().await?;
                    self.inner.shutdown().await
                };
                let _ = tokio::time::timeout(send, bye).await;
                false
            }
            Err(_) => false,
        }
    }

    /// The client spoke to a parked connection: hyper's fresh connection
    /// reads the replay first, then `first`; the client is told its window.
    pub(super) fn wake(&mut self, first: &[u8]) {
        if let Some(replay) = self.replay.take() {
            self.inbound.output().extend_from_slice(&replay.to_hyper);
            if let Some(frame) = replay.to_client {
                self.ahead.extend_from_slice(&frame);
            }
            let raises = CONNECTION_WINDOW > crate::http2::ledger::INITIAL_WINDOW as u32;
            let credit = self.inbound.ledger().send_window();
            self.waking = Some(Waking::new(raises, credit));
        }
        self.read_ahead = first.to_vec();
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for H2Io<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let r = this.poll_hyper_read(cx, buf);
        this.tell_quiet();
        r
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for H2Io<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let r = this.poll_hyper_write(cx, &[io::IoSlice::new(buf)]);
        this.tell_quiet();
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let r = this.poll_hyper_write(cx, bufs);
        this.tell_quiet();
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let r = this.poll_hyper_flush(cx);
        this.write_pending = r.is_pending();
        this.tell_quiet();
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> H2Io<S> {
    fn poll_hyper_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.poll_ahead(cx)?.is_pending() {
            return Poll::Pending;
        }
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(Ok(())) => {
                self.write_timer.progress();
                self.unflushed = false;
                self.ahead_unflushed = false;
                if let Some(code) = self.condemned_code() {
                    return Poll::Ready(Err(self.go_away(cx, code)));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.poll_write_timer(cx).map(Err),
        }
    }
}

/// An [`H2Io`] lent to one hyper connection: when hyper's connection is
/// dropped (to park), it comes back `home`.
pub(super) struct Lent<S> {
    io: Option<Box<H2Io<S>>>,
    home: Home<S>,
}

/// Where a lent [`H2Io`] comes back.
pub(super) type Home<S> = Arc<parking_lot::Mutex<Option<Box<H2Io<S>>>>>;

impl<S> Lent<S> {
    pub(super) fn new(io: Box<H2Io<S>>, home: Home<S>) -> Lent<S> {
        Lent { io: Some(io), home }
    }

    fn io(&mut self) -> io::Result<&mut Box<H2Io<S>>> {
        self.io
            .as_mut()
            .ok_or_else(|| io::ErrorKind::NotConnected.into())
    }
}

impl<S> Drop for Lent<S> {
    fn drop(&mut self) {
        *self.home.lock() = self.io.take();
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Lent<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut **self.io()?).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lent<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut **self.io()?).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut **self.io()?).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.as_ref().is_some_and(|io| io.is_write_vectored())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut **self.io()?).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut **self.io()?).poll_shutdown(cx)
    }
}
