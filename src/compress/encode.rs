//! The encoded body: the response's body through gzip (flate2 over
//! zlib-rs), zstd or brotli, as it arrives.
//!
//! How it flows, and why:
//! - Each data frame is fed to the encoder in `gzip_buffers`-sized pieces;
//!   once the output holds the buffers' total (`number × size`), it is
//!   handed on before more is fed. So the memory a response holds is the
//!   encoder's state, one piece's output and the frame being read, whatever
//!   the body's size; and a client that reads slowly stops the polling (the
//!   writers poll only when they can write), never making it pile up.
//! - When the body has nothing more right now (its poll is pending), what
//!   was fed since the last flush is flushed (zlib's `Z_SYNC_FLUSH`, zstd's
//!   and brotli's flush) and handed on: a response that streams (events,
//!   long polls, a slow backend) reaches the client as it comes, as nginx's
//!   unbuffered proxying flushes each read; a response that arrives faster
//!   than it is sent is compressed in large blocks.
//! - At the end the stream is finished (gzip's trailer, zstd's and
//!   brotli's last block), then the body's trailers, if it had any.

use super::{Coding, Compression, Ratio};
use crate::body::{Body, BodyError};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame};
use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// One of the three encoders, writing into a `Vec` that is emptied as
/// its bytes are handed on.
enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
    Br(Box<brotli::CompressorWriter<Vec<u8>>>),
}

/// brotli's window: ngx_brotli's default (`brotli_window 512k`).
const BROTLI_LGWIN: u32 = 19;

impl Encoder {
    fn new(coding: Coding, c: &Compression) -> std::io::Result<Encoder> {
        Ok(match coding {
            Coding::Gzip => {
                let level = flate2::Compression::new(c.gzip_level);
                Encoder::Gzip(flate2::write::GzEncoder::new(Vec::new(), level))
            }
            Coding::Zstd => {
                Encoder::Zstd(zstd::stream::write::Encoder::new(Vec::new(), c.zstd_level)?)
            }
            Coding::Br => Encoder::Br(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                4096,
                c.brotli_level,
                BROTLI_LGWIN,
            ))),
        })
    }

    fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.write_all(data),
            Encoder::Zstd(e) => e.write_all(data),
            Encoder::Br(e) => e.write_all(data),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
            Encoder::Br(e) => e.flush(),
        }
    }

    /// The output so far.
    fn out(&mut self) -> &mut Vec<u8> {
        match self {
            Encoder::Gzip(e) => e.get_mut(),
            Encoder::Zstd(e) => e.get_mut(),
            Encoder::Br(e) => e.get_mut(),
        }
    }

    /// The end of the stream: the rest of the output.
    fn finish(self) -> std::io::Result<Vec<u8>> {
        match self {
            Encoder::Gzip(e) => e.finish(),
            Encoder::Zstd(e) => e.finish(),
            Encoder::Br(e) => Ok(e.into_inner()),
        }
    }
}

/// The body, encoded (see the module's documentation).
pub(super) struct Encoded {
    inner: Body,
    /// `None` once finished (or failed).
    encoder: Option<Encoder>,
    /// The part of the last data frame not yet fed.
    pending: Bytes,
    /// Fed since the last flush.
    unflushed: bool,
    /// The body's trailers, sent after the last data.
    trailers: Option<http::HeaderMap>,
    /// Bytes fed to a piece, and held before handing on.
    piece: usize,
    hold: usize,
    zin: u64,
    zout: u64,
    ratio: Arc<Ratio>,
    /// gzip's header and trailer, which nginx's ratio leaves out.
    framing: u64,
}

impl Encoded {
    /// `inner` encoded with `coding` under `c`, its ratio into `ratio`.
    pub(super) fn body(inner: Body, coding: Coding, c: &Compression, ratio: Arc<Ratio>) -> Body {
        let (number, size) = c.buffers;
        let encoder = match Encoder::new(coding, c) {
            Ok(e) => e,
            // (zstd's context could not be made: sent as it is would be
            // wrong under `Content-Encoding`, so the body fails.)
            Err(e) => return failed(e),
        };
        Encoded {
            inner,
            encoder: Some(encoder),
            pending: Bytes::new(),
            unflushed: false,
            trailers: None,
            piece: size.max(1),
            hold: (number * size).max(1),
            zin: 0,
            zout: 0,
            ratio,
            framing: if coding == Coding::Gzip { 18 } else { 0 },
        }
        .boxed()
    }

    /// Feeds what is pending until the output holds `hold` bytes: the
    /// output to hand on then, if any.
    fn feed(&mut self) -> std::io::Result<Option<Bytes>> {
        let Some(enc) = self.encoder.as_mut() else {
            return Ok(None);
        };
        while !self.pending.is_empty() {
            let n = self.piece.min(self.pending.len());
            let piece = self.pending.split_to(n);
            enc.write(&piece)?;
            self.zin += n as u64;
            self.unflushed = true;
            if enc.out().len() >= self.hold {
                return Ok(Some(self.take()));
            }
        }
        Ok(None)
    }

    /// The output so far, handed on.
    fn take(&mut self) -> Bytes {
        let out = match self.encoder.as_mut() {
            Some(enc) => std::mem::take(enc.out()),
            None => Vec::new(),
        };
        self.zout += out.len() as u64;
        Bytes::from(out)
    }

    /// The stream's end: the last of the output.
    fn finish(&mut self) -> std::io::Result<Bytes> {
        let Some(enc) = self.encoder.take() else {
            return Ok(Bytes::new());
        };
        let out = enc.finish()?;
        self.zout += out.len() as u64;
        let zout = self.zout.saturating_sub(self.framing);
        self.ratio.set(self.zin, zout);
        Ok(Bytes::from(out))
    }

    /// Nothing more from the body for now: what was fed since the last
    /// flush, flushed.
    fn flushed(&mut self) -> std::io::Result<Option<Bytes>> {
        if self.unflushed {
            if let Some(enc) = self.encoder.as_mut() {
                enc.flush()?;
            }
            self.unflushed = false;
        }
        let out = self.take();
        Ok((!out.is_empty()).then_some(out))
    }
}

/// A body that fails at once with `e`.
fn failed(e: std::io::Error) -> Body {
    let e: BodyError = Box::new(e);
    http_body_util::StreamBody::new(OneError(Some(e))).boxed()
}

/// A stream of one error.
struct OneError(Option<BodyError>);

impl futures_core::Stream for OneError {
    type Item = Result<Frame<Bytes>, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.0.take().map(Err))
    }
}

fn data(b: Bytes) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
    Poll::Ready(Some(Ok(Frame::data(b))))
}

impl HttpBody for Encoded {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        loop {
            if this.encoder.is_none() {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            if let Some(out) = this.feed()? {
                return data(out);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(d) => this.pending = d,
                    Err(frame) => {
                        this.trailers = frame.into_trailers().ok();
                        let last = this.finish()?;
                        return data(last);
                    }
                },
                Poll::Ready(None) => {
                    let last = this.finish()?;
                    return data(last);
                }
                Poll::Ready(Some(Err(e))) => {
                    this.encoder = None;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Pending => {
                    return match this.flushed()? {
                        Some(out) => data(out),
                        None => Poll::Pending,
                    };
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.encoder.is_none() && self.trailers.is_none()
    }
}
