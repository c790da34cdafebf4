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
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{Instant, Sleep};

/// How long an upstream that takes nothing written to it keeps the
/// connection (its calls have their own `grpc_send_timeout`; this frees
/// the connection for the calls after them).
const WRITE_STALL: Duration = Duration::from_secs(60);
/// How long a connection that ended has to take its GOAWAY and close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

pub(super) struct Driver<S> {
    io: S,
    shared: Shared,
    read: BytesMut,
    write: BytesMut,
    /// Written but not flushed (TLS holds a record until flushed).
    unflushed: bool,
    /// Since when the socket took nothing of what waits to be written.
    stalled: Option<Instant>,
    /// The connection ended: the GOAWAY is written by then, or not at all.
    closing: Option<Instant>,
    /// The timer for either.
    timer: Option<Pin<Box<Sleep>>>,
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
            stalled: None,
            closing: None,
            timer: None,
        }
    }

    pub(super) async fn run(mut self) {
        std::future::poll_fn(|cx| self.poll(cx)).await;
        let shutdown = tokio::io::AsyncWriteExt::shutdown(&mut self.io);
        let _ = tokio::time::timeout(CLOSE_WAIT, shutdown).await;
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
                if self.expired(cx) {
                    let timed_out = std::io::Error::from(std::io::ErrorKind::TimedOut);
                    self.shared.lock().end(Failure::Io(Arc::new(timed_out)));
                    return Poll::Ready(());
                }
                return Poll::Pending;
            }
        }
    }

    /// Whether the write stalled too long, or the close did; the timer
    /// armed (only then) otherwise.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        let due = match (self.closing, self.stalled) {
            (Some(at), _) => at + CLOSE_WAIT,
            (None, Some(since)) => since + WRITE_STALL,
            (None, None) => {
                self.timer = None;
                return false;
            }
        };
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        if timer.deadline() != due {
            timer.as_mut().reset(due);
        }
        timer.as_mut().poll(cx).is_ready()
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
        if finished && self.closing.is_none() {
            self.closing = Some(crate::clock::now());
        }
        let mut moved = false;
        while !self.write.is_empty() {
            match Pin::new(&mut self.io).poll_write(cx, &self.write) {
                Poll::Ready(Ok(0)) => return self.broken(Failure::Closed),
                Poll::Ready(Ok(n)) => {
                    self.write.advance(n);
                    self.unflushed = true;
                    self.stalled = None;
                    moved = true;
                }
                Poll::Ready(Err(e)) => return self.broken(Failure::Io(Arc::new(e))),
                Poll::Pending if moved => return Round::Again,
                Poll::Pending => {
                    self.stalled.get_or_insert_with(crate::clock::now);
                    return Round::Wait;
                }
            }
        }
        self.write.clear();
        if self.unflushed {
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return self.broken(Failure::Io(Arc::new(e))),
                // (TLS: a record the socket has no room for yet.)
                Poll::Pending => {
                    self.stalled.get_or_insert_with(crate::clock::now);
                    return Round::Wait;
                }
            }
        }
        self.stalled = None;
        let more = !self.shared.lock().out.is_empty();
        if finished && !more {
            return Round::Done;
        }
        if moved || more {
            Round::Again
        } else {
            Round::Wait
        }
    }

    /// Reads what the upstream sent and hands each whole frame to the
    /// state (not while too much waits to be written).
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Round {
        {
            let state = self.shared.lock();
            if state.ended.is_some() || state.out.len() + self.write.len() > READ_PAUSE {
                return Round::Wait;
            }
        }
        // Room for a whole frame: nothing read is kept past its frame (the
        // state copies what it holds), so the buffer is reused in place.
        self.read.reserve(MAX_FRAME + 9);
        match tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.read) {
            Poll::Pending => Round::Wait,
            Poll::Ready(Ok(0)) => self.broken(Failure::Closed),
            Poll::Ready(Err(e)) => self.broken(Failure::Io(Arc::new(e))),
            Poll::Ready(Ok(_)) => {
                let mut state = self.shared.lock();
                let mut at = 0;
                while let Some(h) = self.read.get(at..at + 9) {
                    let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    let (kind, flags) = (h[3], h[4]);
                    let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & !(1 << 31);
                    if len > MAX_FRAME {
                        state.error(state::FRAME_SIZE_ERROR);
                        break;
                    }
                    let Some(payload) = self.read.get(at + 9..at + 9 + len) else {
                        break;
                    };
                    state.frame(kind, flags, id, payload);
                    at += 9 + len;
                    if state.ended.is_some() {
                        break;
                    }
                }
                self.read.advance(at);
                if state.ended.is_some() {
                    // Nothing more is read: what is left is the GOAWAY to write.
                    self.read = BytesMut::new();
                    return Round::Wait;
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
