//! The clocks sluice reads, in one place (`clippy.toml` disallows
//! `std::time::Instant::now` and `SystemTime::now` everywhere else).
//!
//! - Monotonic time is tokio's ([`tokio::time::Instant`]), so that tests can
//!   pause it. The limiter takes `now` as an argument in integer
//!   milliseconds (so it can be tested exhaustively); [`Clock`] is where
//!   those milliseconds come from: monotonic, counted from the Unix time at
//!   the clock's creation, so that window algorithms' windows fall on
//!   multiples of their period since the epoch (as in Redis, on `TIME`)
//!   and a state with `last = 0` is always long drained (nginx's
//!   `ngx_current_msec` is large too).
//! - Wall-clock time, for the logs' timestamps and `Date`, is read by
//!   [`unix_secs`], [`unix_ms`] and [`coarse_unix_secs`].
//! - [`now`] is nginx's cached time (`ngx_current_msec`, updated once per
//!   turn of its event loop): within one poll of a connection's task
//!   ([`Fresh`]) the clock is read once, at the first [`now`], and every
//!   later [`now`] of that poll (the request's start, its deadlines, its
//!   latency, the access log) is that reading. A rejected request took
//!   five clock reads and their arithmetic before (issue #44).
//! - [`Timer`] is a tokio timer polled only when it may have fired, for
//!   the deadlines that a connection looks at on every request.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;

/// Milliseconds for the limiter.
#[derive(Clone, Copy)]
pub struct Clock {
    start: Instant,
    /// The Unix time in ms at `start` (at least [`Clock::BASE`]).
    base: u64,
}

impl Clock {
    /// The smallest base: keeps `now - 0` large on a machine whose clock
    /// says 1970.
    const BASE: u64 = 1_000_000_000;

    pub fn new() -> Clock {
        Clock {
            start: now(),
            base: unix_ms().max(Self::BASE),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.ms_at(now())
    }

    /// The limiter's milliseconds at `t` (a request's arrival: one clock
    /// read serves the limits, the access log and the latency metric).
    pub fn ms_at(&self, t: Instant) -> u64 {
        self.base + t.saturating_duration_since(self.start).as_millis() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// What [`now`] gives on this thread.
#[derive(Clone, Copy)]
enum Cached {
    /// Outside a [`Fresh`] poll: every [`now`] reads the clock.
    Off,
    /// In a [`Fresh`] poll that has not read it yet.
    Unread,
    /// In a [`Fresh`] poll, which read it then.
    At(Instant),
}

thread_local! {
    static NOW: Cell<Cached> = const { Cell::new(Cached::Off) };
}

/// The monotonic time: read once per poll of a [`Fresh`] future (nginx's
/// cached time), read afresh everywhere else. Never older than the poll it
/// is read in, so never older than any timer that poll sees fired (tokio's
/// timer driver runs between polls, not within one). tokio's clock: paused
/// in tests, it is the paused time.
#[inline]
pub fn now() -> Instant {
    NOW.try_with(|c| match c.get() {
        Cached::At(t) => t,
        Cached::Unread => {
            let t = Instant::now();
            c.set(Cached::At(t));
            t
        }
        Cached::Off => Instant::now(),
    })
    .unwrap_or_else(|_| Instant::now())
}

/// How long since `t`, by [`now`] (zero if `t` is later).
#[inline]
pub fn since(t: Instant) -> std::time::Duration {
    now().saturating_duration_since(t)
}

/// A future (a connection's task, an HTTP/2 stream's) whose every poll
/// shares one clock read: [`now`] is cached from its first call in a poll
/// to the poll's end, and forgotten then, so that the next poll (a
/// wake-up: a socket became ready, a timer fired) sees the time of that
/// wake-up. Not tokio's `on_thread_unpark`: the current-thread scheduler
/// does not call it on the turns where it only yields (under load, most of
/// them), and a limiter must never see time stand still. As with nginx,
/// requests served in one wake-up (pipelined ones) share its time; tokio's
/// cooperative budget ends a task's poll after at most 128 reads.
pub struct Fresh<F>(F);

impl<F> Fresh<F> {
    pub fn new(inner: F) -> Fresh<F> {
        Fresh(inner)
    }
}

impl<F: Future> Future for Fresh<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        /// Puts back what [`now`] gave around this poll (a `Fresh` inside
        /// another, or none), also when the inner future panics.
        struct Restore(Cached);
        impl Drop for Restore {
            fn drop(&mut self) {
                let _ = NOW.try_with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(
            NOW.try_with(|c| c.replace(Cached::Unread))
                .unwrap_or(Cached::Off),
        );
        // SAFETY: structural pinning of the one field: `Fresh` never moves
        // it out, has no `Drop` and is `Unpin` only when `F` is.
        let inner = unsafe { self.map_unchecked_mut(|f| &mut f.0) };
        inner.poll(cx)
    }
}

/// A tokio timer for a deadline looked at far more often than it passes
/// (a connection's read deadline: on every request): polling a `Sleep`
/// (tokio's budget, its driver, the waker's registration) cost about 185
/// instructions, three times per proxied request. Once a poll has left
/// this task's waker with the timer, the timer wakes the task when it
/// fires; until [`now`] reaches its deadline it cannot have fired (its
/// driver fires it only once its own clock, read before this poll, is
/// past the deadline), so a poll with the same waker before then is
/// answered Pending without asking tokio.
pub struct Timer {
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// Which waker a Pending poll of `sleep` registered (its data and
    /// vtable, as `Waker::will_wake` compares them; not a clone: an HTTP/2
    /// stream's task polls a pooled upstream connection's timer once, and
    /// the clone cost more than it saved). The timer holds that waker until
    /// it fires, so no other waker can take its address meanwhile. `None`
    /// when `sleep` has fired, was moved, or has not been polled since.
    armed: Option<(usize, usize)>,
}

/// A waker's identity, as `Waker::will_wake` compares it.
fn identity(w: &Waker) -> (usize, usize) {
    (w.data() as usize, std::ptr::from_ref(w.vtable()) as usize)
}

impl Timer {
    pub fn at(deadline: Instant) -> Timer {
        Timer {
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            armed: None,
        }
    }

    pub fn deadline(&self) -> Instant {
        self.sleep.deadline()
    }

    pub fn reset(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
        self.armed = None;
    }

    /// Ready once the deadline has passed (and the timer fired).
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let waker = identity(cx.waker());
        if self.armed == Some(waker) && now() < self.sleep.deadline() {
            return Poll::Pending;
        }
        // Out of budget, `Sleep` answers Pending without registering the
        // waker (it asks the scheduler to poll the task again instead).
        let registers = tokio::task::coop::has_budget_remaining();
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.armed = None;
                Poll::Ready(())
            }
            Poll::Pending => {
                if registers {
                    self.armed = Some(waker);
                }
                Poll::Pending
            }
        }
    }
}

/// A timeout for each of a series of waits, taken only when a wait begins
/// (a ready read or write costs no clock read and no timer), and kept
/// across the waits: registered once, and moved only when it fires before
/// the wait it serves is over (each wait's deadline is later than the one
/// before). An upstream connection keeps one for `proxy_read_timeout`, a
/// client connection one for `send_timeout`: a timer made and dropped per
/// response was a timer-wheel insertion, a removal and a clock read more
/// per request. While the connection is idle the timer may fire once,
/// waking the task that used it last for nothing.
#[derive(Default)]
pub struct WaitTimer {
    timer: Option<Timer>,
    /// The current wait's end.
    deadline: Option<Instant>,
}

impl WaitTimer {
    /// Something waits: ready once `timeout` has passed since this wait began
    /// (the first call after [`WaitTimer::done`]).
    pub fn poll_expired(
        &mut self,
        cx: &mut std::task::Context<'_>,
        timeout: Duration,
    ) -> std::task::Poll<()> {
        let deadline = *self.deadline.get_or_insert_with(|| now() + timeout);
        let timer = self.timer.get_or_insert_with(|| Timer::at(deadline));
        if timer.deadline() > deadline {
            timer.reset(deadline);
        }
        while timer.poll(cx).is_ready() {
            if now() >= deadline {
                return std::task::Poll::Ready(());
            }
            timer.reset(deadline);
        }
        std::task::Poll::Pending
    }

    /// The wait is over: the next one starts its own timeout.
    pub fn done(&mut self) {
        self.deadline = None;
    }

    /// A wait is going on.
    pub fn waiting(&self) -> bool {
        self.deadline.is_some()
    }

    /// `fut`, or `None` if it waits longer than `timeout`.
    pub async fn within<F: std::future::Future>(
        &mut self,
        timeout: Duration,
        fut: F,
    ) -> Option<F::Output> {
        let mut fut = std::pin::pin!(fut);
        let out = std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(out) = fut.as_mut().poll(cx) {
                return std::task::Poll::Ready(Some(out));
            }
            self.poll_expired(cx, timeout).map(|()| None)
        })
        .await;
        self.done();
        out
    }
}

/// Seconds since the Unix epoch.
#[allow(clippy::disallowed_methods)] // the one place that reads it
pub fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Milliseconds since the Unix epoch.
#[allow(clippy::disallowed_methods)] // the one place that reads it
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Seconds since the Unix epoch from `CLOCK_REALTIME_COARSE` (no hardware
/// clock read: the clock of the last tick, good to the second).
pub fn coarse_unix_secs() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } == 0 {
        ts.tv_sec.max(0) as u64
    } else {
        unix_secs()
    }
}

#[cfg(test)]
mod unix_aligned {
    use super::*;

    /// The limiter's milliseconds are Unix milliseconds (so windows fall
    /// where Redis's `TIME` puts them), moving with the monotonic clock.
    #[tokio::test(start_paused = true)]
    async fn limiter_milliseconds_are_unix_milliseconds() {
        let c = Clock::new();
        let (ours, unix) = (c.now_ms(), unix_ms());
        assert!(ours.abs_diff(unix) < 1000, "{ours} against {unix}");
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        assert_eq!(c.now_ms() - ours, 10_000);
    }
}

#[cfg(test)]
mod cached {
    use super::*;
    use std::time::Duration;

    const STEP: Duration = Duration::from_secs(10);

    /// Within a poll of a [`Fresh`] future the clock is read once, though
    /// it moves; the next poll reads it again; outside, every [`now`] is
    /// the clock's.
    #[tokio::test(start_paused = true)]
    async fn one_reading_per_poll_of_a_fresh_future() {
        let mut seen = Vec::new();
        let fresh = Fresh::new(std::future::poll_fn(|cx| {
            let first = now();
            // (advance moves the paused clock at its first poll.)
            let _ = std::pin::pin!(tokio::time::advance(STEP)).poll(cx);
            seen.push((first, now(), Instant::now()));
            if seen.len() == 2 {
                return Poll::Ready(());
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }));
        fresh.await;
        let (first, later, clock) = seen[0];
        assert_eq!(later, first, "one reading within a poll");
        assert_eq!(clock, first + STEP);
        assert_eq!(seen[1].0, clock, "the next poll reads the clock again");
        assert_eq!(seen[1].1, clock);
        let before = now();
        tokio::time::advance(STEP).await;
        assert_eq!(now(), before + STEP, "outside a Fresh poll, the clock");
        assert_eq!(since(before), STEP);
    }

    /// A `Fresh` inside another leaves the outer poll's reading as it was.
    #[tokio::test(start_paused = true)]
    async fn an_inner_fresh_restores_the_outer_reading() {
        let outer = Fresh::new(async {
            let first = now();
            let inner = Fresh::new(async {
                let _ = std::pin::pin!(tokio::time::advance(STEP))
                    .poll(&mut Context::from_waker(Waker::noop()));
                now()
            });
            let inner = std::pin::pin!(inner).poll(&mut Context::from_waker(Waker::noop()));
            (first, inner, now())
        });
        let (first, inner, after) = outer.await;
        assert_eq!(inner, Poll::Ready(first + STEP));
        assert_eq!(after, first);
    }

    /// Polled before its deadline with the waker it holds, a timer answers
    /// without tokio; with another waker it registers that one; it is
    /// ready once its deadline has passed.
    #[tokio::test(start_paused = true)]
    async fn a_timer_wakes_the_last_waker_at_its_deadline() {
        let start = now();
        let mut timer = Timer::at(start + STEP);
        let mut noop = Context::from_waker(Waker::noop());
        assert!(timer.poll(&mut noop).is_pending());
        assert!(timer.armed.is_some());
        tokio::time::advance(STEP / 2).await;
        assert!(timer.poll(&mut noop).is_pending());
        // This task's waker is not the no-op one: were it not registered,
        // the timer would wake nobody and the bound below would end it.
        let fired = tokio::time::timeout(STEP * 2, std::future::poll_fn(|cx| timer.poll(cx)));
        assert_eq!(fired.await, Ok(()));
        assert_eq!(now(), start + STEP);
        timer.reset(now() + STEP);
        assert!(timer.armed.is_none());
        std::future::poll_fn(|cx| timer.poll(cx)).await;
        assert_eq!(now(), start + STEP * 2);
    }
}
