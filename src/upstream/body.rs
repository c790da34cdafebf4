//! The upstream's response body, framed as its head said: a length, chunks
//! (decoded: the client's side re-frames them itself), or everything until
//! the upstream closes.
//!
//! Why the body owns the connection: the moment its last byte is read, the
//! connection goes back to this worker's idle list (see `super::pool`), with
//! no task or channel between; dropped before that (the client left, an
//! error), the connection closes, since what is left of the body would be
//! read as the next response. The decoder never takes a byte past the
//! body's end for the same reason.

use super::pool::{Conn, Key, READ_CHUNK, checkin};
use crate::body::BodyError;
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

/// Digits only (no sign, no spaces), in `radix`; `None` if empty, other or
/// too large.
pub(super) fn parse_number(digits: &[u8], radix: u32) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(|&b| (b as char).is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, radix).ok()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Framing {
    /// This many bytes left.
    Length(u64),
    Chunked(Chunk),
    /// Everything until the upstream closes.
    UntilClose,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk: bytes left.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
}

/// The upstream's response body. When its last byte is read, the connection
/// goes back to this worker's idle list (if the upstream allows); dropped
/// before that, the connection closes.
pub struct UpstreamBody {
    pub(super) conn: Option<Conn>,
    pub(super) key: Key,
    pub(super) framing: Framing,
    pub(super) keep: bool,
    /// nginx's `proxy_read_timeout` between two reads of the body (the
    /// connection's timer).
    pub(super) read_timeout: Duration,
    /// An HTTP/2 upstream's body instead (`grpc_pass`): its stream, not a
    /// connection of this pool's.
    pub(super) http2: Option<Box<super::h2stream::Streamed>>,
}

/// Why a response body broke off (the client connection is then closed:
/// its response cannot be completed).
#[derive(Debug, thiserror::Error)]
pub enum BodyFailure {
    #[error("upstream prematurely closed connection while reading upstream")]
    Truncated,
    #[error("upstream timed out (110: Connection timed out) while reading upstream")]
    TimedOut,
    #[error("upstream sent invalid chunked response while reading upstream")]
    InvalidChunked,
    #[error("recv() failed ({}) while reading upstream", crate::errlog::os_error(.0))]
    Recv(io::Error),
}

impl UpstreamBody {
    /// The body of an HTTP/2 upstream's response.
    pub(super) fn http2(key: Key, body: super::h2stream::Streamed) -> UpstreamBody {
        UpstreamBody {
            conn: None,
            key,
            framing: Framing::UntilClose,
            keep: false,
            read_timeout: Duration::ZERO,
            http2: Some(Box::new(body)),
        }
    }

    /// Once the body is done, its connection is checked in (if the
    /// upstream allows and sent nothing past the body) or closed.
    pub(super) fn finish_if_done(&mut self) {
        if matches!(self.framing, Framing::Length(0)) {
            self.framing = Framing::Done;
        }
        if self.framing == Framing::Done {
            if let Some(conn) = self.conn.take() {
                if self.keep && conn.read.is_empty() {
                    checkin(&self.key, conn);
                }
            }
        }
    }

    /// The next piece of body out of the buffer, or `None` if more must
    /// be read first.
    fn take(&mut self) -> Result<Option<Bytes>, BodyError> {
        match self.conn.as_mut() {
            Some(conn) => take_body(&mut self.framing, &mut conn.read),
            None => Ok(None),
        }
    }
}

/// The next piece of body framed by `framing` out of `buf` (advancing both),
/// or `None` if more must be read first or the body is done. Never takes a
/// byte past the body's end: what follows stays in `buf`. A free function,
/// not a method of [`UpstreamBody`], so that it can be exercised on bytes
/// alone (the fuzz target `upstream`, see the `fuzzing` module).
pub(crate) fn take_body(
    framing: &mut Framing,
    buf: &mut BytesMut,
) -> Result<Option<Bytes>, BodyError> {
    loop {
        match framing {
            Framing::Done | Framing::Length(0) => return Ok(None),
            Framing::Length(left) => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = (*left).min(buf.len() as u64) as usize;
                *left -= n as u64;
                return Ok(Some(buf.split_to(n).freeze()));
            }
            Framing::UntilClose => {
                if buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(buf.split().freeze()));
            }
            Framing::Chunked(Chunk::Data(left)) => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = (*left).min(buf.len() as u64) as usize;
                *left -= n as u64;
                if *left == 0 {
                    *framing = Framing::Chunked(Chunk::DataEnd);
                }
                return Ok(Some(buf.split_to(n).freeze()));
            }
            Framing::Chunked(state) => match chunk_line(*state, buf)? {
                Some(next) => *framing = next,
                None => return Ok(None),
            },
        }
    }
}

/// One line of chunked framing (a size line, the end of a chunk's data, a
/// trailer line) off the front of `buf` in `state`: the framing after it,
/// or `None` if the line is not all there yet.
fn chunk_line(state: Chunk, buf: &mut BytesMut) -> Result<Option<Framing>, BodyError> {
    // Lines end in CRLF, or a bare LF (nginx accepts both).
    let Some(end) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > 4096 {
            return Err(Box::new(BodyFailure::InvalidChunked));
        }
        return Ok(None);
    };
    let line = buf.split_to(end + 1);
    let line = line[..end].strip_suffix(b"\r").unwrap_or(&line[..end]);
    let next = match state {
        Chunk::Size => {
            let size = line.split(|&b| b == b';').next().unwrap_or(b"");
            let size = parse_number(size.trim_ascii(), 16)
                .ok_or_else(|| Box::new(BodyFailure::InvalidChunked) as BodyError)?;
            if size == 0 {
                Chunk::Trailers
            } else {
                Chunk::Data(size)
            }
        }
        Chunk::DataEnd if line.is_empty() => Chunk::Size,
        Chunk::DataEnd => {
            return Err(Box::new(BodyFailure::InvalidChunked));
        }
        Chunk::Trailers if line.is_empty() => return Ok(Some(Framing::Done)),
        Chunk::Trailers => Chunk::Trailers,
        Chunk::Data(_) => unreachable!("handled by take_body"),
    };
    Ok(Some(Framing::Chunked(next)))
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if let Some(h2) = this.http2.as_mut() {
            return h2.poll_frame(cx);
        }
        loop {
            let taken = this.take();
            this.finish_if_done();
            match taken {
                Ok(Some(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Err(e) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(e)));
                }
                Ok(None) => {}
            }
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            conn.read.reserve(READ_CHUNK);
            let polled =
                tokio_util::io::poll_read_buf(Pin::new(&mut conn.stream), cx, &mut conn.read);
            let read = match polled {
                Poll::Ready(r) => {
                    conn.timer.done();
                    r
                }
                Poll::Pending => {
                    ready!(conn.timer.poll_expired(cx, this.read_timeout));
                    // Logged with its connection when hyper reports it.
                    this.conn = None;
                    return Poll::Ready(Some(Err(Box::new(BodyFailure::TimedOut))));
                }
            };
            match read {
                Ok(0) if this.framing == Framing::UntilClose => {
                    this.framing = Framing::Done;
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Ok(0) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(Box::new(BodyFailure::Truncated))));
                }
                Ok(_) => {}
                Err(e) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(Box::new(BodyFailure::Recv(e)))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.http2 {
            Some(h2) => h2.is_end_stream(),
            None => self.framing == Framing::Done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        if let Some(h2) = &self.http2 {
            return h2.size_hint();
        }
        match self.framing {
            Framing::Length(n) => SizeHint::with_exact(n),
            Framing::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
