//! `grpc_send_timeout` over HTTP/2, and when `grpc_read_timeout` starts.
//!
//! nginx's two timeouts, as its upstream module arms them (measured with
//! nginx 1.22's `grpc_pass`): the send timeout runs while a write of the
//! request to the upstream cannot proceed ("upstream timed out … while
//! sending request to upstream", 504), and the read timeout for the
//! response head is armed once the request is all sent. A client-streaming
//! call may upload for longer than the read timeout, and an upstream that
//! stops taking the body (a window of 0, a socket it no longer reads) is
//! cut after the send timeout, not the read timeout.
//!
//! Why a watch on the body rather than a timer on a write: the HTTP/2
//! client ([`super::h2stream::Upload`]) asks the body for its next frame
//! only when the upstream's flow-control window and the stream's send
//! buffer have room for it. So a body that yielded a frame and has not been
//! asked for the next one is waiting on the upstream — that wait is the send
//! timeout's — while a body that answered Pending waits on the client
//! (`client_body_timeout`'s business, not the upstream's). [`Watched`]
//! records which, and since when, in a [`Progress`] the waits for the
//! response read: one atomic word, no wake-up per frame. So a wait looks
//! again (within the shorter timeout) while the body may still move: a
//! timeout that a move starts is still seen at its exact end.

use super::http2::Outgoing;
use crate::body::BodyError;
use crate::clock::{self, Timer};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// Where the request body is, and since when: shared by the body that
/// writes it and the waits for the response.
pub(super) struct Progress {
    base: Instant,
    /// A tag in the top two bits, nanoseconds since `base` below.
    word: AtomicU64,
}

/// What [`Progress`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// The body waits on the client for its next piece.
    Client,
    /// The body gave a piece (or has yet to give its first) and waits for
    /// the upstream to take it, since then.
    Upstream(Instant),
    /// All of the request was given, at that time.
    Sent(Instant),
}

const CLIENT: u64 = 0;
const UPSTREAM: u64 = 1 << 62;
const SENT: u64 = 2 << 62;
const TAG: u64 = 3 << 62;

impl Progress {
    /// A request about to go: all sent already if it has no body, else
    /// waiting on the upstream to take its first piece.
    pub(super) fn new(no_body: bool) -> Arc<Progress> {
        let p = Progress {
            base: clock::now(),
            word: AtomicU64::new(if no_body { SENT } else { UPSTREAM }),
        };
        Arc::new(p)
    }

    fn set(&self, tag: u64) {
        let nanos = clock::since(self.base).as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX) & !TAG;
        self.word.store(tag | nanos, Ordering::Relaxed);
    }

    pub(super) fn state(&self) -> State {
        let word = self.word.load(Ordering::Relaxed);
        let at = self.base + Duration::from_nanos(word & !TAG);
        match word & TAG {
            UPSTREAM => State::Upstream(at),
            SENT => State::Sent(at),
            _ => State::Client,
        }
    }
}

/// The request body as the HTTP/2 client takes it, telling [`Progress`]
/// where it is.
pub(crate) struct Watched {
    inner: Outgoing,
    progress: Arc<Progress>,
}

impl Watched {
    pub(super) fn new(inner: Outgoing, progress: Arc<Progress>) -> Watched {
        Watched { inner, progress }
    }
}

impl Body for Watched {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let tag = match &polled {
            // A data frame that ends the body goes with END_STREAM, and
            // nothing more is asked for.
            Poll::Ready(Some(Ok(f))) if f.is_data() && !self.inner.is_end_stream() => UPSTREAM,
            Poll::Ready(Some(Ok(_)) | None) => SENT,
            Poll::Ready(Some(Err(_))) | Poll::Pending => CLIENT,
        };
        self.progress.set(tag);
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Which wait ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expired {
    /// The upstream took nothing of the body for the send timeout.
    Send,
    /// The read timeout (or the call's deadline) passed.
    Read,
}

/// One timer for the send timeout and a read deadline together, kept
/// across the waits of one response.
#[derive(Default)]
pub(super) struct Waits {
    timer: Option<Timer>,
}

impl Waits {
    /// Ready with what ran out first: the body's stall on the upstream
    /// (longer than `send`), or `read_due` when there is one. Until the
    /// body is all sent it may move at any time without waking this wait
    /// (see the module's doc), so the wait looks again within `look_again`
    /// (no longer than the shortest timeout a move could start): a
    /// deadline that a move sets is then seen when it comes.
    pub(super) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        progress: &Progress,
        send: Duration,
        look_again: Duration,
        read_due: Option<Instant>,
    ) -> Poll<Expired> {
        loop {
            let now = clock::now();
            let state = progress.state();
            let stall = match state {
                State::Upstream(since) => Some(since + send),
                State::Client | State::Sent(_) => None,
            };
            let due = match (stall, read_due) {
                (Some(s), Some(r)) if s <= r => Some((s, Expired::Send)),
                (Some(s), None) => Some((s, Expired::Send)),
                (_, Some(r)) => Some((r, Expired::Read)),
                (None, None) => None,
            };
            if let Some((at, what)) = due
                && now >= at
            {
                return Poll::Ready(what);
            }
            let recheck = (!matches!(state, State::Sent(_))).then(|| match &self.timer {
                Some(t) if t.deadline() > now && t.deadline() <= now + look_again => t.deadline(),
                _ => now + look_again,
            });
            let at = match (due.map(|(at, _)| at), recheck) {
                (Some(at), Some(r)) => at.min(r),
                (Some(at), None) | (None, Some(at)) => at,
                (None, None) => return Poll::Pending,
            };
            let timer = match &mut self.timer {
                Some(t) => {
                    if t.deadline() != at {
                        t.reset(at);
                    }
                    t
                }
                none => none.insert(Timer::at(at)),
            };
            std::task::ready!(timer.poll(cx));
        }
    }
}

/// The request's head and body on their way, and the response head awaited
/// as nginx awaits it: the send timeout while the upstream takes nothing of
/// the body, the read timeout from when the request was all sent, and a
/// gRPC call's `deadline` over both. (`waits`' timer goes on to the
/// response body's waits: one timer a call.)
pub(super) async fn response_head<T>(
    exchange: impl Future<Output = Result<T, super::Error>>,
    progress: &Progress,
    timeouts: &super::UpstreamTimeouts,
    deadline: Option<Instant>,
    waits: &mut Waits,
) -> Result<T, super::Error> {
    let mut exchange = std::pin::pin!(exchange);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = exchange.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        let read_due = match progress.state() {
            State::Sent(at) => Some(at + timeouts.proxy_read),
            State::Client | State::Upstream(_) => None,
        };
        let read_due = match (read_due, deadline) {
            (Some(r), Some(d)) => Some(r.min(d)),
            (r, d) => r.or(d),
        };
        let (send, read) = (timeouts.proxy_send, timeouts.proxy_read);
        waits
            .poll(cx, progress, send, send.min(read), read_due)
            .map(|expired| {
                Err(match expired {
                    Expired::Send => super::Error::SendTimeout,
                    Expired::Read => super::Error::ReadTimeout,
                })
            })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::{Error, UpstreamTimeouts};

    const SEND: Duration = Duration::from_secs(3);
    const READ: Duration = Duration::from_secs(5);

    fn timeouts() -> UpstreamTimeouts {
        UpstreamTimeouts {
            proxy_connect: Duration::from_secs(1),
            proxy_send: SEND,
            proxy_read: READ,
            client_body: Duration::from_secs(60),
        }
    }

    /// The head wait on an exchange that never answers, with `moves` applied
    /// to the progress at their times (ms from the start): its error and when.
    async fn head_wait(moves: &[(u64, u64)], deadline_ms: Option<u64>) -> (Error, u64) {
        let start = Instant::now();
        let progress = Progress::new(false);
        let deadline = deadline_ms.map(|ms| start + Duration::from_millis(ms));
        let timeouts = timeouts();
        let mut waits = Waits::default();
        let waiting = response_head(
            std::future::pending::<Result<(), Error>>(),
            &progress,
            &timeouts,
            deadline,
            &mut waits,
        );
        let mover = async {
            for &(at, tag) in moves {
                tokio::time::sleep_until(start + Duration::from_millis(at)).await;
                progress.set(tag);
            }
            std::future::pending::<()>().await
        };
        let e = tokio::select! {
            r = waiting => r.expect_err("never answered"),
            () = mover => unreachable!(),
        };
        let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        (e, ms)
    }

    fn is_send(e: &Error) -> bool {
        matches!(e, Error::SendTimeout)
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_never_taken_times_out_sending() {
        let (e, ms) = head_wait(&[], None).await;
        assert!(is_send(&e) && ms == 3000, "{e:?} at {ms}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_read_timeout_starts_when_all_is_sent() {
        // Pieces taken, the client slow, then all sent at 9.5 s: read 5 s later.
        let moves = [
            (1000, CLIENT),
            (2900, UPSTREAM),
            (4000, CLIENT),
            (9500, SENT),
        ];
        let (e, ms) = head_wait(&moves, None).await;
        assert!(
            matches!(e, Error::ReadTimeout) && ms == 14_500,
            "{e:?} at {ms}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stall_that_starts_while_waiting_on_the_client_is_seen_at_its_end() {
        // Every time a stall may begin (to the millisecond, over 12 s), it is
        // cut exactly `SEND` after it began.
        for begin in (1..12_000).step_by(397) {
            let (e, ms) = head_wait(&[(0, CLIENT), (begin, UPSTREAM)], None).await;
            assert!(is_send(&e) && ms == begin + 3000, "{begin}: {e:?} at {ms}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_is_over_both() {
        let (e, ms) = head_wait(&[(0, CLIENT)], Some(7_000)).await;
        assert!(
            matches!(e, Error::ReadTimeout) && ms == 7000,
            "{e:?} at {ms}"
        );
        let (e, ms) = head_wait(&[(100, SENT)], Some(2_000)).await;
        assert!(
            matches!(e, Error::ReadTimeout) && ms == 2000,
            "{e:?} at {ms}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_wait_takes_the_earlier_of_stall_and_read() {
        let progress = Progress::new(false);
        let start = Instant::now();
        let mut waits = Waits::default();
        let due = start + READ;
        let what = std::future::poll_fn(|cx| waits.poll(cx, &progress, SEND, SEND, Some(due)));
        assert_eq!(what.await, Expired::Send);
        assert_eq!(start.elapsed(), SEND);
        progress.set(CLIENT);
        let what = std::future::poll_fn(|cx| waits.poll(cx, &progress, SEND, SEND, Some(due)));
        assert_eq!(what.await, Expired::Read);
        assert_eq!(start.elapsed(), READ);
    }
}
