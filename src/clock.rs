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

/// Milliseconds for the limiter.
#[derive(Clone, Copy)]
pub struct Clock {
    start: tokio::time::Instant,
    /// The Unix time in ms at `start` (at least [`Clock::BASE`]).
    base: u64,
}

impl Clock {
    /// The smallest base: keeps `now - 0` large on a machine whose clock
    /// says 1970.
    const BASE: u64 = 1_000_000_000;

    pub fn new() -> Clock {
        Clock {
            start: tokio::time::Instant::now(),
            base: unix_ms().max(Self::BASE),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.ms_at(tokio::time::Instant::now())
    }

    /// The limiter's milliseconds at `t` (a request's arrival: one clock
    /// read serves the limits, the access log and the latency metric).
    pub fn ms_at(&self, t: tokio::time::Instant) -> u64 {
        self.base + t.saturating_duration_since(self.start).as_millis() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
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
