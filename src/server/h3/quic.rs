//! h3's transport traits over quinn, written here rather than taken from
//! h3-quinn for one thing h3-quinn cannot give: a request stream's
//! STOP_SENDING. A client cancels a request (RFC 9114 §4.1.1) with
//! STOP_SENDING on the response and RESET_STREAM on the request; once a
//! GET was all sent, only the STOP_SENDING reaches the server (a reset
//! after the FIN changes nothing). h3 keeps the stream inside its
//! `RequestStream` and offers no way to hear that frame, and h3-quinn keeps
//! quinn's stream to itself; so the streams are accepted here, and each
//! request stream's [`quinn::SendStream::stopped`] is kept in [`Stops`]
//! by its id, for the request's task to take ([`Stops::take`]): a
//! cancelled request is dropped at once — its `limit_conn` count, its
//! delay, its upstream request — as nginx finalizes it with 499 and as
//! an HTTP/2 RST_STREAM drops it.
//!
//! Everything else is the plain mapping of h3's traits onto quinn's
//! streams: reads are quinn's chunks (no copy), writes go out as h3
//! frames them.

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio_util::sync::ReusableBoxFuture;

/// Resolves when the client no longer reads the response: its
/// STOP_SENDING, or the connection lost. Never when the response was
/// read to its end.
pub(super) type Stopped = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// Request streams sluice may reset on one connection before it asks the
/// client to go (GOAWAY; the open streams finish). quinn keeps a small
/// entry (its wake-up for `stopped`) for each stream that was watched and
/// then reset rather than finished, until the connection ends; this bounds
/// them. 1000: nginx's `keepalive_requests`, after which nginx sends every
/// HTTP/3 connection GOAWAY; here only a connection whose requests end in
/// resets (its client's or sluice's) meets it.
pub(super) const ABORTED_MAX: u32 = 1000;

/// The request streams' [`Stopped`] not yet taken, by stream id: an entry
/// leaves when its request's task takes it, or when h3 drops the stream
/// (a head that never came), so it holds the streams open, no more. (The
/// streams that end without their whole answer are counted by the
/// connection's guard, `floods::Guard`, which hears how each ended.)
#[derive(Default)]
pub(super) struct Stops {
    waiting: Mutex<HashMap<u64, Stopped>>,
}

impl Stops {
    /// The [`Stopped`] of request stream `id`, once.
    pub(super) fn take(&self, id: StreamId) -> Option<Stopped> {
        self.waiting.lock().remove(&id.into_inner())
    }

    fn watch(&self, send: &quinn::SendStream) {
        let stopped = send.stopped();
        let stopped: Stopped = Box::pin(async move {
            // Read to its end: nothing to cancel, ever. Stopped, or the
            // connection lost: no one reads the answer.
            if let Ok(None) = stopped.await {
                std::future::pending::<()>().await;
            }
        });
        self.waiting.lock().insert(u64::from(send.id()), stopped);
    }
}

type Accepted<T> = Result<T, quinn::ConnectionError>;

/// One QUIC connection as h3 uses it.
pub(super) struct Transport {
    conn: quinn::Connection,
    stops: Arc<Stops>,
    bidi: ReusableBoxFuture<'static, Accepted<(quinn::SendStream, quinn::RecvStream)>>,
    uni: ReusableBoxFuture<'static, Accepted<quinn::RecvStream>>,
    opener: Opener,
}

impl Transport {
    pub(super) fn new(conn: quinn::Connection, stops: Arc<Stops>) -> Transport {
        let (c1, c2) = (conn.clone(), conn.clone());
        Transport {
            bidi: ReusableBoxFuture::new(async move { c1.accept_bi().await }),
            uni: ReusableBoxFuture::new(async move { c2.accept_uni().await }),
            opener: Opener::new(conn.clone()),
            conn,
            stops,
        }
    }
}

impl<B: Buf> quic::Connection<B> for Transport {
    type RecvStream = RecvHalf;
    type OpenStreams = Opener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<RecvHalf, ConnectionErrorIncoming>> {
        let accepted = ready!(self.uni.poll(cx));
        let conn = self.conn.clone();
        self.uni.set(async move { conn.accept_uni().await });
        Poll::Ready(accepted.map(RecvHalf::new).map_err(connection_error))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Bidi<B>, ConnectionErrorIncoming>> {
        let accepted = ready!(self.bidi.poll(cx));
        let conn = self.conn.clone();
        self.bidi.set(async move { conn.accept_bi().await });
        let (send, recv) = accepted.map_err(connection_error)?;
        self.stops.watch(&send);
        let send = SendHalf::new(send, Some(self.stops.clone()));
        Poll::Ready(Ok(Bidi {
            send,
            recv: RecvHalf::new(recv),
        }))
    }

    fn opener(&self) -> Opener {
        self.opener.clone()
    }
}

impl<B: Buf> quic::OpenStreams<B> for Transport {
    type BidiStream = Bidi<B>;
    type SendStream = SendHalf<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Bidi<B>, StreamErrorIncoming>> {
        self.opener.poll_open_bidi(cx)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<SendHalf<B>, StreamErrorIncoming>> {
        self.opener.poll_open_send(cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<B>::close(&mut self.opener, code, reason);
    }
}

type Opening<T> = Option<Pin<Box<dyn Future<Output = Accepted<T>> + Send + Sync>>>;

/// Opens the server's own streams (h3's control stream; a server never
/// opens a bidirectional one, but the trait has it).
pub(super) struct Opener {
    conn: quinn::Connection,
    bidi: Opening<(quinn::SendStream, quinn::RecvStream)>,
    uni: Opening<quinn::SendStream>,
}

impl Opener {
    fn new(conn: quinn::Connection) -> Opener {
        Opener {
            conn,
            bidi: None,
            uni: None,
        }
    }
}

impl Clone for Opener {
    fn clone(&self) -> Opener {
        Opener::new(self.conn.clone())
    }
}

impl<B: Buf> quic::OpenStreams<B> for Opener {
    type BidiStream = Bidi<B>;
    type SendStream = SendHalf<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Bidi<B>, StreamErrorIncoming>> {
        let conn = self.conn.clone();
        let opening = self
            .bidi
            .get_or_insert_with(|| Box::pin(async move { conn.open_bi().await }));
        let opened = ready!(opening.as_mut().poll(cx));
        self.bidi = None;
        let (send, recv) = opened.map_err(|e| StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(e),
        })?;
        Poll::Ready(Ok(Bidi {
            send: SendHalf::new(send, None),
            recv: RecvHalf::new(recv),
        }))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<SendHalf<B>, StreamErrorIncoming>> {
        let conn = self.conn.clone();
        let opening = self
            .uni
            .get_or_insert_with(|| Box::pin(async move { conn.open_uni().await }));
        let opened = ready!(opening.as_mut().poll(cx));
        self.uni = None;
        let send = opened.map_err(|e| StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(e),
        })?;
        Poll::Ready(Ok(SendHalf::new(send, None)))
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        let code = quinn::VarInt::from_u64(code.value()).unwrap_or(quinn::VarInt::MAX);
        self.conn.close(code, reason);
    }
}

/// A request stream: both halves.
pub(super) struct Bidi<B: Buf> {
    send: SendHalf<B>,
    recv: RecvHalf,
}

impl<B: Buf> quic::BidiStream<B> for Bidi<B> {
    type SendStream = SendHalf<B>;
    type RecvStream = RecvHalf;

    fn split(self) -> (SendHalf<B>, RecvHalf) {
        (self.send, self.recv)
    }
}

impl<B: Buf> quic::RecvStream for Bidi<B> {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code);
    }

    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}

impl<B: Buf> quic::SendStream<B> for Bidi<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code);
    }

    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}

impl<B: Buf> quic::SendStreamUnframed<B> for Bidi<B> {
    fn poll_send<D: Buf>(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut D,
    ) -> Poll<Result<usize, StreamErrorIncoming>> {
        self.send.poll_send(cx, buf)
    }
}

/// A stream's receiving half.
pub(super) struct RecvHalf(quinn::RecvStream);

impl RecvHalf {
    fn new(stream: quinn::RecvStream) -> RecvHalf {
        RecvHalf(stream)
    }
}

impl quic::RecvStream for RecvHalf {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        // quinn's read_chunk is cancel-safe: a new one each poll loses
        // nothing (its wake-up is the stream's).
        let read = std::pin::pin!(self.0.read_chunk(usize::MAX, true));
        match ready!(read.poll(cx)) {
            Ok(chunk) => Poll::Ready(Ok(chunk.map(|c| c.bytes))),
            Err(e) => Poll::Ready(Err(read_error(e))),
        }
    }

    fn stop_sending(&mut self, error_code: u64) {
        let _ = self
            .0
            .stop(quinn::VarInt::from_u64(error_code).unwrap_or(quinn::VarInt::MAX));
    }

    fn recv_id(&self) -> StreamId {
        stream_id(self.0.id())
    }
}

/// A stream's sending half: what h3 framed, written out.
pub(super) struct SendHalf<B: Buf> {
    stream: quinn::SendStream,
    writing: Option<WriteBuf<B>>,
    /// The request streams' watch list, which this one leaves when dropped.
    stops: Option<Arc<Stops>>,
}

impl<B: Buf> SendHalf<B> {
    fn new(stream: quinn::SendStream, stops: Option<Arc<Stops>>) -> SendHalf<B> {
        SendHalf {
            stream,
            writing: None,
            stops,
        }
    }
}

impl<B: Buf> Drop for SendHalf<B> {
    fn drop(&mut self) {
        if let Some(stops) = &self.stops {
            stops.waiting.lock().remove(&u64::from(self.stream.id()));
        }
    }
}

impl<B: Buf> quic::SendStream<B> for SendHalf<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if let Some(data) = self.writing.as_mut() {
            while data.has_remaining() {
                let written = ready!(Pin::new(&mut self.stream).poll_write(cx, data.chunk()))
                    .map_err(write_error)?;
                data.advance(written);
            }
        }
        self.writing = None;
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.writing.is_some() {
            // h3 waits for poll_ready before the next frame: a second one
            // here is a misuse, answered as an error rather than a panic.
            return Err(StreamErrorIncoming::Unknown(
                "a frame sent before the last one was written".into(),
            ));
        }
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        Poll::Ready(
            self.stream
                .finish()
                .map_err(|e| StreamErrorIncoming::Unknown(Box::new(e))),
        )
    }

    fn reset(&mut self, reset_code: u64) {
        let _ = self
            .stream
            .reset(quinn::VarInt::from_u64(reset_code).unwrap_or(quinn::VarInt::MAX));
    }

    fn send_id(&self) -> StreamId {
        stream_id(self.stream.id())
    }
}

impl<B: Buf> quic::SendStreamUnframed<B> for SendHalf<B> {
    fn poll_send<D: Buf>(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut D,
    ) -> Poll<Result<usize, StreamErrorIncoming>> {
        if self.writing.is_some() {
            return Poll::Ready(Err(StreamErrorIncoming::Unknown(
                "data sent past a frame not yet written".into(),
            )));
        }
        let written =
            ready!(Pin::new(&mut self.stream).poll_write(cx, buf.chunk())).map_err(write_error)?;
        buf.advance(written);
        Poll::Ready(Ok(written))
    }
}

/// quinn's stream id as h3's: the same number, a QUIC varint (below
/// 2^62) in both.
fn stream_id(id: quinn::StreamId) -> StreamId {
    const VARINT_MAX: u64 = (1 << 62) - 1;
    StreamId::try_from(u64::from(id) & VARINT_MAX).expect("a varint is a stream id")
}

fn connection_error(e: quinn::ConnectionError) -> ConnectionErrorIncoming {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => ConnectionErrorIncoming::ApplicationClose {
            error_code: c.error_code.into_inner(),
        },
        quinn::ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        e => ConnectionErrorIncoming::Undefined(Arc::new(e)),
    }
}

fn read_error(e: quinn::ReadError) -> StreamErrorIncoming {
    match e {
        quinn::ReadError::Reset(code) => StreamErrorIncoming::StreamTerminated {
            error_code: code.into_inner(),
        },
        quinn::ReadError::ConnectionLost(e) => StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(e),
        },
        e => StreamErrorIncoming::Unknown(Box::new(e)),
    }
}

fn write_error(e: quinn::WriteError) -> StreamErrorIncoming {
    match e {
        quinn::WriteError::Stopped(code) => StreamErrorIncoming::StreamTerminated {
            error_code: code.into_inner(),
        },
        quinn::WriteError::ConnectionLost(e) => StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(e),
        },
        e => StreamErrorIncoming::Unknown(Box::new(e)),
    }
}
