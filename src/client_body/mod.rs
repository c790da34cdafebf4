//! The request body from the client: cut off at `client_max_body_size`
//! ([`LimitedBody`], in [`limit`]) and read whole before anything is sent
//! upstream ([`read_whole`]: nginx's `proxy_request_buffering on`, its
//! default).
//!
//! Why read it whole: until the last byte of a body has arrived, sluice does not know that
//! nginx would accept the request — a chunked body can still break nginx's
//! grammar, a body can outgrow `client_max_body_size`, the client can leave.
//! Streaming it would show the upstream the head and the start of a request
//! nginx never forwards. So the body is kept, in memory up to
//! `client_body_buffer_size` (nginx's 16k) and beyond that in an unlinked
//! temporary file under `client_body_temp_path`, and the upstream gets it
//! with a `Content-Length` (as nginx sends it) once it is whole.
//! `proxy_request_buffering = false` streams instead, as nginx's `off`.
//!
//! The file is written and read with plain blocking calls on the worker
//! thread, as nginx does: they go to the page cache.

mod limit;
mod pipe;

pub use limit::LimitedBody;
pub use pipe::ClientBody;
pub(crate) use pipe::Pipe;

use crate::body::BodyError;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum ReadError {
    /// The client sent nothing for `client_body_timeout`.
    Timeout,
    /// The body failed: too large, broken framing, or the client left.
    Body(BodyError),
    /// The temporary file could not be written.
    File(std::io::Error),
}

/// A whole request body, ready to be sent as often as needed.
pub struct Buffered {
    memory: Bytes,
    /// All of `memory`, to send it again ([`Buffered::rewind`]).
    whole_memory: Bytes,
    file: Option<std::fs::File>,
    len: u64,
    /// Bytes of the file not yet sent.
    file_left: u64,
}

/// Reads `body` to its end: `in_memory` bytes at most in memory, the rest in
/// a temporary file in `temp_dir`; each wait for more at most `timeout`.
pub async fn read_whole<B>(
    mut body: B,
    in_memory: usize,
    temp_dir: &Path,
    timeout: Duration,
) -> Result<Buffered, ReadError>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    let mut memory = BytesMut::new();
    let mut file: Option<std::fs::File> = None;
    let mut len: u64 = 0;
    loop {
        let frame = match tokio::time::timeout(timeout, body.frame()).await {
            Err(_) => return Err(ReadError::Timeout),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(ReadError::Body(e)),
            Ok(Some(Ok(frame))) => frame,
        };
        // Trailers are not forwarded (nginx forwards none).
        let Ok(data) = frame.into_data() else {
            continue;
        };
        len += data.len() as u64;
        match &mut file {
            Some(f) => f.write_all(&data).map_err(ReadError::File)?,
            None if memory.len() + data.len() <= in_memory => memory.extend_from_slice(&data),
            None => {
                let mut f = tempfile::tempfile_in(temp_dir).map_err(ReadError::File)?;
                f.write_all(&data).map_err(ReadError::File)?;
                file = Some(f);
            }
        }
    }
    let file_left = len - memory.len() as u64;
    if let Some(f) = &mut file {
        f.rewind().map_err(ReadError::File)?;
    }
    let memory = memory.freeze();
    Ok(Buffered {
        whole_memory: memory.clone(),
        memory,
        file,
        len,
        file_left,
    })
}

impl Buffered {
    /// From the start again, to send it to another upstream server
    /// (`proxy_next_upstream`).
    pub fn rewind(&mut self) -> std::io::Result<()> {
        self.memory = self.whole_memory.clone();
        if let Some(f) = &mut self.file {
            f.rewind()?;
        }
        self.file_left = self.len - self.memory.len() as u64;
        Ok(())
    }
}

impl Body for Buffered {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if !this.memory.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(std::mem::take(&mut this.memory)))));
        }
        let Some(f) = this.file.as_mut().filter(|_| this.file_left > 0) else {
            return Poll::Ready(None);
        };
        let n = this.file_left.min(64 * 1024) as usize;
        let mut buf = vec![0; n];
        match f.read_exact(&mut buf) {
            Ok(()) => {
                this.file_left -= n as u64;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
            }
            Err(e) => Poll::Ready(Some(Err(Box::new(e)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.memory.is_empty() && self.file_left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.memory.len() as u64 + self.file_left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use std::collections::VecDeque;

    /// A body of given pieces, then its end; `None` pieces never come.
    struct Pieces(VecDeque<Option<Result<&'static [u8], &'static str>>>);

    impl Body for Pieces {
        type Data = Bytes;
        type Error = BodyError;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
            if matches!(self.0.front(), Some(None)) {
                return Poll::Pending;
            }
            match self.0.pop_front() {
                None => Poll::Ready(None),
                Some(None) => Poll::Pending,
                Some(Some(Ok(b))) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b))))),
                Some(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            }
        }
    }

    fn full(b: Vec<u8>) -> impl Body<Data = Bytes, Error = BodyError> + Unpin {
        Full::new(Bytes::from(b)).map_err(|never| match never {})
    }

    async fn collect(b: Buffered) -> (Vec<u8>, Option<u64>) {
        let exact = b.size_hint().exact();
        (b.collect().await.unwrap().to_bytes().to_vec(), exact)
    }

    #[tokio::test]
    async fn small_bodies_stay_in_memory_large_ones_go_to_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let t = Duration::from_secs(1);
        let b = read_whole(full(b"hello".to_vec()), 16, dir.path(), t)
            .await
            .unwrap();
        assert!(b.file.is_none());
        assert_eq!(collect(b).await, (b"hello".to_vec(), Some(5)));

        let big = vec![7u8; 200_000];
        let b = read_whole(full(big.clone()), 16 * 1024, dir.path(), t)
            .await
            .unwrap();
        assert!(b.file.is_some());
        assert_eq!(b.len, 200_000);
        assert_eq!(collect(b).await, (big, Some(200_000)));
        // The file was unlinked: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let pieces = Pieces(VecDeque::from([Some(Ok(&b"ab"[..])), Some(Ok(&b"cd"[..]))]));
        let b = read_whole(pieces, 3, dir.path(), t).await.unwrap();
        assert_eq!(collect(b).await, (b"abcd".to_vec(), Some(4)));
    }

    #[tokio::test]
    async fn a_failing_body_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let pieces = Pieces(VecDeque::from([Some(Ok(&b"ab"[..])), Some(Err("broken"))]));
        let r = read_whole(pieces, 16, dir.path(), Duration::from_secs(1)).await;
        assert!(matches!(r, Err(ReadError::Body(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_client_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let pieces = Pieces(VecDeque::from([Some(Ok(&b"ab"[..])), None]));
        let start = tokio::time::Instant::now();
        let r = read_whole(pieces, 16, dir.path(), Duration::from_secs(3)).await;
        assert!(matches!(r, Err(ReadError::Timeout)));
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }
}
