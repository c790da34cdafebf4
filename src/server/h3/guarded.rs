//! The QUIC connection as h3 sees it: quinn's (through [`super::quic`]), with
//! every stream the client opens read by [`super::floods::Guard`] first.
//! A request stream's frames and the control stream's pass through
//! [`Frames`] (counted; those that mean nothing dropped); a unidirectional
//! stream's type is read here: the control stream goes on to h3, the QPACK
//! encoder and decoder streams stay here and are read to their end
//! (h3 0.0.8 holds them unread), a client's push stream ends the
//! connection (`H3_STREAM_CREATION_ERROR`, RFC 9114 §6.2.2), any other
//! type is counted and stopped.

use super::floods::{Closing, Flood, Guard, Role};
use super::framing::{self, DecoderStream, Frames};
use bytes::{Buf, Bytes};
use h3::error::Code;
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use super::quic::{self as glue, RecvHalf};

type SendHalf = glue::SendHalf<Bytes>;

/// Stream types of unidirectional streams (RFC 9114 §6.2, RFC 9204 §4.2).
const CONTROL: u64 = 0x0;
const PUSH: u64 = 0x1;
const ENCODER: u64 = 0x2;
const DECODER: u64 = 0x3;

/// What h3 gets for a stream the guard closed the connection over.
fn closing_error() -> StreamErrorIncoming {
    StreamErrorIncoming::ConnectionErrorIncoming {
        connection_error: ConnectionErrorIncoming::ApplicationClose {
            error_code: Code::H3_EXCESSIVE_LOAD.value(),
        },
    }
}

/// The connection h3 is built on.
pub(super) struct Guarded {
    inner: glue::Transport,
    guard: Arc<Guard>,
    /// Opens sluice's own streams, for h3 (which asks the connection as
    /// well as its opener).
    opener: Opener,
    /// Unidirectional streams whose type has not come yet.
    typing: Vec<Typing>,
    encoder: Option<Qpack>,
    decoder: Option<Qpack>,
}

impl Guarded {
    pub(super) fn new(inner: glue::Transport, guard: Arc<Guard>) -> Guarded {
        let opener = Opener {
            inner: quic::Connection::<Bytes>::opener(&inner),
            guard: guard.clone(),
        };
        Guarded {
            inner,
            guard,
            opener,
            typing: Vec::new(),
            encoder: None,
            decoder: None,
        }
    }

    /// A unidirectional stream whose type came: the control stream for h3,
    /// `None` for the others (kept, stopped, or the connection closed).
    fn typed(&mut self, ty: u64, stream: RecvHalf, seen: Bytes) -> Option<Recv> {
        let slot = match ty {
            CONTROL => return Some(Recv::control(stream, seen, self.guard.clone())),
            ENCODER => &mut self.encoder,
            DECODER => &mut self.decoder,
            PUSH => {
                self.guard.invalid(
                    Code::H3_STREAM_CREATION_ERROR,
                    "a push stream from the client",
                );
                return None;
            }
            _ => {
                let mut stream = stream;
                quic::RecvStream::stop_sending(&mut stream, Code::H3_STREAM_CREATION_ERROR.value());
                let _ = self.guard.spend(Flood::UniStream, 1);
                return None;
            }
        };
        if slot.is_some() {
            let why = if ty == ENCODER {
                "a second QPACK encoder stream"
            } else {
                "a second QPACK decoder stream"
            };
            self.guard.invalid(Code::H3_STREAM_CREATION_ERROR, why);
            return None;
        }
        let mut qpack = Qpack {
            stream,
            encoder: ty == ENCODER,
            decoder: DecoderStream::default(),
        };
        let type_len = framing::varint(&seen).map_or(seen.len(), |(_, n)| n);
        if qpack.read(&seen[type_len..], &self.guard).is_ok() {
            *slot = Some(qpack);
        }
        None
    }
}

impl quic::Connection<Bytes> for Guarded {
    type RecvStream = Recv;
    type OpenStreams = Opener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Recv, ConnectionErrorIncoming>> {
        loop {
            match quic::Connection::<Bytes>::poll_accept_recv(&mut self.inner, cx) {
                Poll::Ready(Ok(s)) => self.typing.push(Typing::new(s)),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => break,
            }
        }
        for qpack in [&mut self.encoder, &mut self.decoder] {
            if let Some(q) = qpack {
                if q.poll(cx, &self.guard).is_ready() {
                    *qpack = None;
                }
            }
        }
        let mut i = 0;
        while i < self.typing.len() {
            match self.typing[i].poll_type(cx) {
                Poll::Pending => i += 1,
                Poll::Ready(typed) => {
                    let Typing { stream, .. } = self.typing.swap_remove(i);
                    match typed {
                        Some((ty, seen)) => {
                            if let Some(recv) = self.typed(ty, stream, seen) {
                                return Poll::Ready(Ok(recv));
                            }
                        }
                        // Ended or reset before its type: tolerated (RFC
                        // 9114 §6.2), and counted.
                        None => {
                            let _ = self.guard.spend(Flood::UniStream, 1);
                        }
                    }
                }
            }
        }
        Poll::Pending
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Bidi, ConnectionErrorIncoming>> {
        let bidi = ready!(quic::Connection::<Bytes>::poll_accept_bidi(
            &mut self.inner,
            cx
        ))?;
        self.guard.opened();
        let (send, recv) = quic::BidiStream::split(bidi);
        Poll::Ready(Ok(Bidi {
            send,
            recv: Recv::request(recv, self.guard.clone()),
        }))
    }

    fn opener(&self) -> Opener {
        self.opener.clone()
    }
}

impl quic::OpenStreams<Bytes> for Guarded {
    type BidiStream = Bidi;
    type SendStream = SendHalf;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bidi, StreamErrorIncoming>> {
        self.opener.poll_open_bidi(cx)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<SendHalf, StreamErrorIncoming>> {
        self.opener.poll_open_send(cx)
    }

    fn close(&mut self, code: Code, reason: &[u8]) {
        quic::OpenStreams::<Bytes>::close(&mut self.opener, code, reason)
    }
}

/// Opens the server's streams (h3 opens its unidirectional ones).
#[derive(Clone)]
pub(super) struct Opener {
    inner: glue::Opener,
    guard: Arc<Guard>,
}

impl quic::OpenStreams<Bytes> for Opener {
    type BidiStream = Bidi;
    type SendStream = SendHalf;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bidi, StreamErrorIncoming>> {
        let bidi = ready!(quic::OpenStreams::<Bytes>::poll_open_bidi(
            &mut self.inner,
            cx
        ))?;
        Poll::Ready(Ok(Bidi::of(bidi, &self.guard)))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<SendHalf, StreamErrorIncoming>> {
        quic::OpenStreams::<Bytes>::poll_open_send(&mut self.inner, cx)
    }

    fn close(&mut self, code: Code, reason: &[u8]) {
        quic::OpenStreams::<Bytes>::close(&mut self.inner, code, reason)
    }
}

/// A request stream: quinn's sending half, the receiving half guarded.
pub(super) struct Bidi {
    send: SendHalf,
    recv: Recv,
}

impl Bidi {
    fn of(bidi: glue::Bidi<Bytes>, guard: &Arc<Guard>) -> Bidi {
        let (send, recv) = quic::BidiStream::split(bidi);
        Bidi {
            send,
            recv: Recv::request(recv, guard.clone()),
        }
    }
}

impl quic::BidiStream<Bytes> for Bidi {
    type SendStream = SendHalf;
    type RecvStream = Recv;

    fn split(self) -> (SendHalf, Recv) {
        (self.send, self.recv)
    }
}

impl quic::RecvStream for Bidi {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}

impl quic::SendStream<Bytes> for Bidi {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}

/// A client stream h3 reads, its frames counted on the way.
pub(super) struct Recv {
    inner: RecvHalf,
    role: Role,
    frames: Frames,
    out: VecDeque<Bytes>,
    guard: Arc<Guard>,
    ended: bool,
}

impl Recv {
    fn request(inner: RecvHalf, guard: Arc<Guard>) -> Recv {
        Recv {
            inner,
            role: Role::Request,
            frames: Frames::default(),
            out: VecDeque::new(),
            guard,
            ended: false,
        }
    }

    /// The control stream, of which `seen` was read: its type (given to h3
    /// as it came), then frames.
    fn control(inner: RecvHalf, seen: Bytes, guard: Arc<Guard>) -> Recv {
        let mut recv = Recv {
            role: Role::Control,
            ..Recv::request(inner, guard)
        };
        let type_len = framing::varint(&seen).map_or(seen.len(), |(_, n)| n);
        recv.out.push_back(seen.slice(..type_len));
        let rest = seen.slice(type_len..);
        if recv.feed(&rest).is_err() {
            recv.ended = true;
        }
        recv
    }

    fn feed(&mut self, chunk: &Bytes) -> Result<(), Closing> {
        let (guard, role) = (&self.guard, self.role);
        self.frames
            .feed(chunk, &mut self.out, &mut |h| guard.frame(role, h))
    }
}

impl quic::RecvStream for Recv {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Poll::Ready(Ok(Some(b)));
            }
            if self.ended {
                return match self.guard.closing() {
                    true => Poll::Ready(Err(closing_error())),
                    false => Poll::Ready(Ok(None)),
                };
            }
            match ready!(self.inner.poll_data(cx)) {
                Ok(Some(chunk)) => {
                    if self.feed(&chunk).is_err() {
                        self.out.clear();
                        self.ended = true;
                    }
                }
                Ok(None) => {
                    self.frames.end(&mut self.out);
                    self.ended = true;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

/// A unidirectional stream whose type is still coming.
struct Typing {
    stream: RecvHalf,
    seen: Vec<u8>,
}

impl Typing {
    fn new(stream: RecvHalf) -> Typing {
        Typing {
            stream,
            seen: Vec::new(),
        }
    }

    /// The type and the bytes read so far (the type first); `None` if the
    /// stream ended or failed before it.
    fn poll_type(&mut self, cx: &mut Context<'_>) -> Poll<Option<(u64, Bytes)>> {
        loop {
            if let Some((ty, _)) = framing::varint(&self.seen) {
                return Poll::Ready(Some((ty, Bytes::from(std::mem::take(&mut self.seen)))));
            }
            match ready!(quic::RecvStream::poll_data(&mut self.stream, cx)) {
                Ok(Some(chunk)) => self.seen.extend_from_slice(chunk.chunk()),
                Ok(None) | Err(_) => return Poll::Ready(None),
            }
        }
    }
}

/// A QPACK stream of the client's, read here to its end.
struct Qpack {
    stream: RecvHalf,
    encoder: bool,
    decoder: DecoderStream,
}

impl Qpack {
    /// Reads what came; Ready once the stream is done with (it ended,
    /// which closes the connection, or its bytes did).
    fn poll(&mut self, cx: &mut Context<'_>, guard: &Guard) -> Poll<()> {
        loop {
            match quic::RecvStream::poll_data(&mut self.stream, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Some(chunk))) => {
                    if self.read(&chunk, guard).is_err() {
                        return Poll::Ready(());
                    }
                }
                Poll::Ready(Ok(None))
                | Poll::Ready(Err(StreamErrorIncoming::StreamTerminated { .. })) => {
                    // RFC 9204 §4.2: closing either is a connection error.
                    let why = if self.encoder {
                        "the QPACK encoder stream was closed"
                    } else {
                        "the QPACK decoder stream was closed"
                    };
                    guard.invalid(Code::H3_CLOSED_CRITICAL_STREAM, why);
                    return Poll::Ready(());
                }
                // The connection is gone: h3 sees it too.
                Poll::Ready(Err(_)) => return Poll::Ready(()),
            }
        }
    }

    /// Judges `bytes`, counting the instructions that change nothing.
    fn read(&mut self, bytes: &[u8], guard: &Guard) -> Result<(), Closing> {
        let (read, code) = if self.encoder {
            (
                framing::encoder_instructions(bytes),
                Code::QPACK_ENCODER_STREAM_ERROR,
            )
        } else {
            (self.decoder.feed(bytes), Code::QPACK_DECODER_STREAM_ERROR)
        };
        match read {
            Ok(0) => Ok(()),
            Ok(n) => guard.spend(Flood::Qpack, n),
            Err(invalid) => {
                guard.invalid(code, invalid.0);
                Err(Closing)
            }
        }
    }
}
