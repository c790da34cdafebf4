//! The clock sluice reads, in one place.
//!
//! The limiter takes `now` as an argument in integer milliseconds (so it can
//! be tested exhaustively); this is where those milliseconds come from:
//! tokio's monotonic clock (so tests can pause it), offset like nginx's
//! `ngx_current_msec` so that a state with `last = 0` is always long
//! drained.

/// Milliseconds for the limiter.
#[derive(Clone, Copy)]
pub struct Clock {
    start: tokio::time::Instant,
}

impl Clock {
    /// nginx's clock counts from boot; a large base keeps `now - 0` large.
    const BASE: u64 = 1_000_000_000;

    pub fn new() -> Clock {
        Clock {
            start: tokio::time::Instant::now(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.ms_at(tokio::time::Instant::now())
    }

    /// The limiter's milliseconds at `t` (a request's arrival: one clock
    /// read serves the limits, the access log and the latency metric).
    pub fn ms_at(&self, t: tokio::time::Instant) -> u64 {
        Self::BASE + t.saturating_duration_since(self.start).as_millis() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
