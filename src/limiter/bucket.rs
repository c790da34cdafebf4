//! nginx's leaky-bucket arithmetic, as pure functions of `now`.
//!
//! Everything is in nginx's units: time in integer milliseconds, rates in
//! milli-requests per second, `excess` in milli-requests (1000 = one request
//! above the rate). Integer division truncates exactly where nginx truncates,
//! because the truncation is observable (1r/m is 16 milli-requests, a 1 ms
//! step at 30r/m leaks nothing).

/// One request, in milli-requests.
pub const ONE: u64 = 1000;

/// A leak rate in milli-requests per second; never zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rate(u64);

impl Rate {
    /// `n` requests per second (`Nr/s`).
    pub fn per_second(n: u64) -> Option<Rate> {
        Rate::from_milli(n.checked_mul(1000)?)
    }

    /// `n` requests per minute (`Nr/m`), truncated as nginx does: 1r/m = 16.
    pub fn per_minute(n: u64) -> Option<Rate> {
        Rate::from_milli(n.checked_mul(1000)? / 60)
    }

    /// A rate given directly in milli-requests per second.
    pub fn from_milli(milli: u64) -> Option<Rate> {
        (milli > 0).then_some(Rate(milli))
    }

    pub fn milli(self) -> u64 {
        self.0
    }

    /// Milli-requests leaked over `ms` milliseconds (truncated).
    pub fn leaked(self, ms: u64) -> u64 {
        match self.0.checked_mul(ms) {
            Some(v) => v / 1000,
            // Only after ages idle at huge rates; u128 division is slow.
            None => u64::try_from(u128::from(self.0) * u128::from(ms) / 1000).unwrap_or(u64::MAX),
        }
    }

    /// Milliseconds needed to leak `milli` milli-requests, rounded up: the
    /// smallest `ms` with `leaked(ms) >= milli`.
    pub fn time_to_leak(self, milli: u64) -> u64 {
        // u64 when it fits (always, for real bursts): a u128 division costs
        // more than the rest of a decision, which reports this every time.
        if let Some(v) = milli.checked_mul(1000) {
            return v.div_ceil(self.0);
        }
        let v = (u128::from(milli) * 1000).div_ceil(u128::from(self.0));
        u64::try_from(v).unwrap_or(u64::MAX)
    }
}

/// The stored state of one key: nginx's `excess` and `last`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    /// Milli-requests above the rate, as of `last`.
    pub excess: u64,
    /// Millisecond timestamp of the last credited update.
    pub last: u64,
}

/// nginx's elapsed time: `now - last`, where a clock that went back by less
/// than a minute counts as 0 and one that went back further as 1.
pub fn elapsed(now: u64, last: u64) -> u64 {
    let ms = now.wrapping_sub(last) as i64;
    if ms < -60_000 {
        1
    } else if ms < 0 {
        0
    } else {
        ms as u64
    }
}

/// What the bucket would hold if one more request were added at `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The excess including this request, clamped at 0.
    pub excess: u64,
    /// The elapsed milliseconds used (0 means `last` does not move).
    pub ms: u64,
}

impl Bucket {
    /// The excess this request would bring the bucket to.
    pub fn step(&self, now: u64, rate: Rate) -> Step {
        let ms = elapsed(now, self.last);
        let excess = (self.excess + ONE).saturating_sub(rate.leaked(ms));
        Step { excess, ms }
    }

    /// Store a step: excess always, `last` only when time was credited.
    pub fn commit(&mut self, step: Step, now: u64) {
        self.excess = step.excess;
        if step.ms != 0 {
            self.last = now;
        }
    }

    /// True when nginx's expiry may drop this state: idle for a minute and
    /// fully drained (no +1000 here: nothing is being added).
    pub fn expired(&self, now: u64, rate: Rate) -> bool {
        let ms = (now.wrapping_sub(self.last) as i64).unsigned_abs();
        ms >= 60_000 && self.excess <= rate.leaked(ms)
    }

    /// Milliseconds from `now` until a request from this key would be
    /// accepted (excess at most `burst`), given that it is not accepted now.
    pub fn wait_until_accepted(&self, now: u64, rate: Rate, burst: u64) -> u64 {
        let need = (self.excess + ONE).saturating_sub(burst);
        rate.time_to_leak(need)
            .saturating_sub(elapsed(now, self.last))
    }
}

/// nginx's delay for an accepted request: the time for the excess above the
/// delay threshold to leak. `threshold` is `delay*1000`, 0 without `delay=`,
/// and `u64::MAX` for `nodelay`.
pub fn delay_ms(excess: u64, threshold: u64, rate: Rate) -> u64 {
    if excess <= threshold {
        0
    } else {
        (excess - threshold) * 1000 / rate.milli()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_truncate_like_nginx() {
        assert_eq!(Rate::per_second(2).unwrap().milli(), 2000);
        assert_eq!(Rate::per_minute(30).unwrap().milli(), 500);
        assert_eq!(Rate::per_minute(1).unwrap().milli(), 16);
        assert_eq!(Rate::per_minute(7).unwrap().milli(), 116);
        assert_eq!(Rate::per_minute(100).unwrap().milli(), 1666);
        assert!(Rate::per_second(0).is_none());
    }

    #[test]
    fn delays_follow_the_formula() {
        let r = Rate::per_second(2).unwrap();
        assert_eq!(delay_ms(1000, 0, r), 500);
        assert_eq!(delay_ms(5000, 0, r), 2500);
        assert_eq!(delay_ms(3000, 2000, r), 500);
        assert_eq!(delay_ms(2000, 2000, r), 0);
        assert_eq!(delay_ms(1000, 0, Rate::per_minute(1).unwrap()), 62_500);
        assert_eq!(delay_ms(5000, u64::MAX, r), 0);
    }

    #[test]
    fn elapsed_handles_a_clock_going_back() {
        assert_eq!(elapsed(1000, 400), 600);
        assert_eq!(elapsed(1000, 1500), 0);
        assert_eq!(elapsed(1000, 70_000), 1);
    }

    #[test]
    fn thirty_per_minute_is_one_per_two_seconds() {
        // nginx-limit-req.md §11: 1999 ms after a pass, excess is 1 (0.001) and
        // the request is rejected without burst; 2000 ms is enough.
        let r = Rate::per_minute(30).unwrap();
        let b = Bucket {
            excess: 0,
            last: 1_000_000,
        };
        assert_eq!(b.step(1_001_999, r).excess, 1);
        assert_eq!(b.step(1_002_000, r).excess, 0);
        assert_eq!(b.step(1_001_000, r).excess, 500);
    }

    #[test]
    fn wait_until_accepted_is_exact() {
        let r = Rate::per_minute(30).unwrap();
        let b = Bucket {
            excess: 0,
            last: 10_000,
        };
        // burst 0: needs 1000 leaked = 2000 ms after `last`.
        assert_eq!(b.wait_until_accepted(10_000, r, 0), 2000);
        assert_eq!(b.wait_until_accepted(11_000, r, 0), 1000);
        // at that time the step is exactly at the limit
        assert_eq!(b.step(12_000, r).excess, 0);
        assert_eq!(b.step(11_999, r).excess, 1);
    }
}
