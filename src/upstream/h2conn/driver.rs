//! The task of one upstream HTTP/2 connection: it writes what the state
//! queued and reads frames into it, until the connection is over (the
//! upstream closed it or broke it, or sluice no longer holds it: then a
//! GOAWAY and the close).

use super::Failure;
use super::Shared;
use super::state::{self, MAX_FRAME, OUT_HIGH, READ_PAUSE};
use bytes::{Buf, BytesMut};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite};

pub(super) struct Driver<S> {
    io: S,
    shared: Shared,
    read: BytesMut,
    write: BytesMut,
    /// Written but not flushed (TLS holds a record until flushed).
    unflushed: bool,
}

/// How far one round got.
enum Round {
    /// Something moved: go round again.
    Again,
    /// Waiting on the socket or the calls.
    Wait,
    /// The connection is over.
    Done,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Driver<S> {
    pub(super) fn new(io: S, shared: Shared) -> Driver<S> {
        Driver {
            io,
            shared,
            read: BytesMut::with_capacity(16 * 1024),
            write: BytesMut::with_capacity(16 * 1024),
            unflushed: false,
        }
    }

    pub(super) async fn run(mut self) {
        std::future::poll_fn(|cx| self.poll(cx)).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut self.io).await;
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let wrote = match self.poll_write(cx) {
                Round::Done => return Poll::Ready(()),
                r => r,
            };
            let read = match self.poll_read(cx) {
                Round::Done => return Poll::Ready(()),
                r => r,
            };
            if matches!((wrote, read), (Round::Wait, Round::Wait)) {
                return Poll::Pending;
            }
        }
    }

    /// Takes what the state queued and writes it; `Done` once the
    /// connection is over and all is written.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Round {
        let finished = {
            let mut state = self.shared.lock();
            match &state.driver {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => state.driver = Some(cx.waker().clone()),
            }
            if state.finished() {
                state.close();
            }
            if self.write.is_empty() && !state.out.is_empty() {
                std::mem::swap(&mut self.write, &mut state.out);
                state.pump_blocked();
            }
            state.ended.is_some()
        };
        let mut moved = false;
        while !self.write.is_empty() {
            match Pin::new(&mut self.io).poll_write(cx, &self.write) {
                Poll::Ready(Ok(0)) => return self.broken(Failure::Closed),
                Poll::Ready(Ok(n)) => {
                    self.write.advance(n);
                    self.unflushed = true;
                    moved = true;
                }
                Poll::Ready(Err(e)) => return self.broken(Failure::Io(Arc::new(e))),
                Poll::Pending => return if moved { Round::Again } else { Round::Wait },
            }
        }
        self.write.clear();
        if self.unflushed {
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return self.broken(Failure::Io(Arc::new(e))),
                Poll::Pending => return Round::Wait,
            }
        }
        if finished && self.shared.lock().out.is_empty() {
            return Round::Done;
        }
        let more = !self.shared.lock().out.is_empty();
        if moved || more {
            Round::Again
        } else {
            Round::Wait
        }
    }

    /// Reads what the upstream sent and hands each whole frame to the
    /// state (not while too much waits to be written).
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Round {
        if self.shared.lock().out.len() + self.write.len() > READ_PAUSE {
            return Round::Wait;
        }
        self.read.reserve(MAX_FRAME + 9);
        match tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.read) {
            Poll::Pending => Round::Wait,
            Poll::Ready(Ok(0)) => self.broken(Failure::Closed),
            Poll::Ready(Err(e)) => self.broken(Failure::Io(Arc::new(e))),
            Poll::Ready(Ok(_)) => {
                let mut state = self.shared.lock();
                while self.read.len() >= 9 {
                    let h = &self.read[..9];
                    let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    let (kind, flags) = (h[3], h[4]);
                    let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & !(1 << 31);
                    if len > MAX_FRAME {
                        state.error(state::FRAME_SIZE_ERROR);
                        break;
                    }
                    if self.read.len() < 9 + len {
                        break;
                    }
                    self.read.advance(9);
                    let payload = self.read.split_to(len);
                    state.frame(kind, flags, id, payload);
                    if state.ended.is_some() {
                        break;
                    }
                }
                if state.out.len() < OUT_HIGH {
                    state.pump_blocked();
                }
                Round::Again
            }
        }
    }

    /// The socket broke: every stream fails with `why`.
    fn broken(&mut self, why: Failure) -> Round {
        self.shared.lock().end(why);
        Round::Done
    }
}
