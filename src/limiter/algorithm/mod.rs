//! The algorithms a zone can limit with, as pure functions of `now`.
//!
//! nginx's leaky bucket ([`super::bucket`]) is the default; the others are
//! the seed article's: a token bucket ([`token`]), GCRA ([`gcra`]), a fixed
//! window and a sliding window counter ([`window`]), and a sliding log
//! ([`log`]). The article's queue-type leaky bucket ([`queue`]) is not a
//! zone algorithm (nginx's delaying leaky bucket is what a proxy can run),
//! only a row of `sluice simulate`.
//!
//! Why one shape for all of them: the stores (memory, Redis) and nginx's
//! multi-limit protocol do not care how a key's state decides, only that
//! one can ask it three things at `now` — would one more request pass
//! ([`check`]), store one ([`charge`]), and may the state be forgotten
//! ([`expired`]) — and get the same answer from either store. The state is
//! a [`Cell`] of three integers (plus, for the sliding log, the log of
//! admitted times), so a memory node stays small and a Redis hash is three
//! fields.
//!
//! Exact integer arithmetic everywhere, on milliseconds. A rate is `count`
//! requests per `period_ms`; the buckets count in *units* where one request
//! costs `period_ms` and `count` units come back every millisecond, so no
//! rate is ever rounded (nginx's leaky bucket keeps nginx's own truncated
//! milli-requests, on purpose).
//!
//! What every algorithm reports, in nginx's terms so that logs and
//! `$limit_req_status` read the same whatever the zone: `excess` is how
//! full the key is with this request, minus one request, in milli-requests
//! (a bucket that admits `burst + 1` at once rejects past `burst*1000`; a
//! window of `N` past `(N-1)*1000`); `wait_ms` is exactly the time until a
//! request from this key would be admitted; [`Standing`] is what the
//! `RateLimit` headers say after an admitted request.

pub mod gcra;
pub mod log;
pub mod queue;
mod rate;
pub mod token;
pub mod window;

use rate::period_words;
pub use rate::{parse_rate, period_text, rate_text};

use super::bucket::{self, Bucket, Rate};
use std::collections::VecDeque;

/// How a zone decides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// nginx's `limit_req`: a leaky bucket whose excess requests wait.
    #[default]
    LeakyBucket,
    /// Capacity `burst + 1`, refilled at the rate; never delays.
    TokenBucket,
    /// Generic cell rate algorithm: one timestamp per key; decides exactly
    /// as the token bucket.
    Gcra,
    /// At most `count` per calendar window of `period` (aligned to the Unix
    /// epoch); up to twice that across a window boundary.
    FixedWindow,
    /// The article's sliding window counter: the previous window's count,
    /// weighted by how much of it still overlaps the last `period`, plus
    /// the current window's.
    SlidingWindow,
    /// The times of the admitted requests of the last `period`: exact.
    SlidingLog,
}

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::LeakyBucket,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ];

    /// The name in the configuration (`algorithm = "..."`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::LeakyBucket => "leaky_bucket",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::Gcra => "gcra",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::SlidingLog => "sliding_log",
        }
    }

    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Only nginx's leaky bucket delays (`delay`, and `nodelay` matters).
    pub fn delays(self) -> bool {
        self == Algorithm::LeakyBucket
    }

    /// Window algorithms count requests per period and take no `burst`.
    pub fn is_window(self) -> bool {
        matches!(
            self,
            Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog
        )
    }
}

/// A zone's limit: `count` requests per `period_ms` (`rate = "10r/10s"`),
/// applied by `algorithm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    pub algorithm: Algorithm,
    pub count: u64,
    pub period_ms: u64,
    /// nginx's rate in milli-requests per second, truncated as nginx does
    /// (1r/m is 16): what the leaky bucket leaks. For the other algorithms
    /// only a description (at least 1).
    pub rate: Rate,
}

/// The most requests a rate may name per period, and the longest period:
/// a bucket's units ((burst + 1) × period) then stay below 2^53, exact in a
/// double (Redis's Lua). One product does not: a sliding window's count ×
/// period (up to 8.6e16), which Rust computes in u128 and the Lua script by
/// long multiplication.
pub const MAX_COUNT: u64 = 1_000_000_000;
pub const MAX_PERIOD_MS: u64 = 86_400_000;

impl Policy {
    /// `count` requests per `period_ms` by `algorithm`; `None` when either
    /// is zero or too large, or the leaky bucket's truncated rate is zero
    /// (below one request per 1000 s).
    pub fn new(algorithm: Algorithm, count: u64, period_ms: u64) -> Option<Policy> {
        if count == 0 || count > MAX_COUNT || period_ms == 0 || period_ms > MAX_PERIOD_MS {
            return None;
        }
        let milli = count * 1_000_000 / period_ms;
        let rate = match algorithm {
            Algorithm::LeakyBucket => Rate::from_milli(milli)?,
            _ => Rate::from_milli(milli.max(1))?,
        };
        Some(Policy {
            algorithm,
            count,
            period_ms,
            rate,
        })
    }

    /// nginx's leaky bucket at `rate`, read back as `Nr/s` or (a rate
    /// nginx truncated) `Nr/m`.
    pub fn leaky(rate: Rate) -> Policy {
        let milli = rate.milli();
        let (count, period_ms) = if milli % 1000 == 0 {
            (milli / 1000, 1000)
        } else {
            // (In u128: `milli * 60` passes u64 for the largest rates;
            // the quotient is below `milli`.)
            let per_minute = (u128::from(milli) * 60 + 500) / 1000;
            (u64::try_from(per_minute).unwrap_or(u64::MAX), 60_000)
        };
        Policy {
            algorithm: Algorithm::LeakyBucket,
            count,
            period_ms,
            rate,
        }
    }

    /// The rate in words: "2 requests per second", "10 requests per 10
    /// seconds".
    pub fn describe(&self) -> String {
        let n = self.count;
        let s = if n == 1 { "" } else { "s" };
        format!("{n} request{s} per {}", period_words(self.period_ms))
    }

    /// The most requests admitted at once from an empty state
    /// (`RateLimit-Policy` `q`): `burst + 1` for a bucket, `count` for a
    /// window.
    pub fn quota(&self, burst: u64) -> u64 {
        if self.algorithm.is_window() {
            self.count
        } else {
            burst / bucket::ONE + 1
        }
    }

    /// The seconds that quota is for (`RateLimit-Policy` `w`): the window,
    /// or the time a full bucket takes to empty, rounded up (never more
    /// permissive than the rate).
    pub fn quota_window_secs(&self, burst: u64) -> u64 {
        let ms = match self.algorithm {
            Algorithm::LeakyBucket => (self.quota(burst) * 1_000_000).div_ceil(self.rate.milli()),
            a if a.is_window() => self.period_ms,
            _ => (self.quota(burst) * self.period_ms).div_ceil(self.count),
        };
        ms.div_ceil(1000).max(1)
    }
}

/// A key's stored state: three integers whose meaning is the algorithm's
/// (see each module). The default is a key never seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cell {
    pub last: u64,
    pub value: u64,
    pub aux: u64,
}

/// The admitted times of a sliding-log key, oldest first.
pub type Log = VecDeque<u64>;

/// Where a key stands after an admitted request (the `RateLimit` header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// Requests this key could still make at once.
    pub remaining: u64,
    /// Milliseconds until it could make one more than that.
    pub reset_ms: u64,
}

/// The answer to "would one more request pass at `now`?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    pub admit: bool,
    /// With this request (see the module doc).
    pub excess: u64,
    /// Admitted: 0. Refused: until a request from this key is admitted.
    pub wait_ms: u64,
    /// Admitted: where the key stands once this request is stored.
    pub standing: Standing,
}

/// A key's state as the algorithms see it: the cell, and the log of a
/// sliding-log zone (empty for the others).
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    pub cell: &'a Cell,
    pub log: &'a Log,
}

/// Would one more request pass at `now`, with `pending` requests of other
/// decisions already counted against the key (held, not yet stored)?
/// `burst` is in milli-requests (`burst*1000`), as in [`super::Limit`].
#[inline]
pub fn check(p: &Policy, burst: u64, state: View<'_>, now: u64, pending: u64) -> Check {
    match p.algorithm {
        Algorithm::LeakyBucket => leaky_check(p.rate, burst, state.cell, now, pending),
        Algorithm::TokenBucket => token::check(p, burst, state.cell, now, pending),
        Algorithm::Gcra => gcra::check(p, burst, state.cell, now, pending),
        Algorithm::FixedWindow => window::fixed_check(p, state.cell, now, pending),
        Algorithm::SlidingWindow => window::sliding_check(p, state.cell, now, pending),
        Algorithm::SlidingLog => log::check(p, state.log, now, pending),
    }
}

/// Store one request at `now` (no check: nginx's accounting, after a
/// [`check`] passed). Returns the excess stored.
#[inline]
pub fn charge(p: &Policy, cell: &mut Cell, log: &mut Log, now: u64) -> u64 {
    match p.algorithm {
        Algorithm::LeakyBucket => {
            let mut b = leaky_bucket(cell);
            let step = b.step(now, p.rate);
            b.commit(step, now);
            *cell = leaky_cell(b);
            step.excess
        }
        Algorithm::TokenBucket => token::charge(p, cell, now),
        Algorithm::Gcra => gcra::charge(p, cell, now),
        Algorithm::FixedWindow => window::fixed_charge(p, cell, now),
        Algorithm::SlidingWindow => window::sliding_charge(p, cell, now),
        Algorithm::SlidingLog => log::charge(p, log, now),
    }
}

/// [`check`], then [`charge`] when admitted (`pending` 0): what a lookup
/// that charges does, in one step for the leaky bucket (the hot path).
#[inline]
pub fn take(p: &Policy, burst: u64, cell: &mut Cell, log: &mut Log, now: u64) -> Check {
    if p.algorithm == Algorithm::LeakyBucket {
        let mut b = leaky_bucket(cell);
        let step = b.step(now, p.rate);
        if step.excess > burst {
            return leaky_check(p.rate, burst, cell, now, 0);
        }
        b.commit(step, now);
        *cell = leaky_cell(b);
        return Check {
            admit: true,
            excess: step.excess,
            wait_ms: 0,
            standing: leaky_standing(p.rate, burst, step.excess),
        };
    }
    let c = check(p, burst, View { cell, log }, now, 0);
    if c.admit {
        let stored = charge(p, cell, log, now);
        return Check {
            excess: stored,
            ..c
        };
    }
    c
}

/// True when the state may be forgotten at `now`: a request would find it
/// as if it were new. nginx's leaky bucket also waits a minute idle.
pub fn expired(p: &Policy, state: View<'_>, now: u64) -> bool {
    match p.algorithm {
        Algorithm::LeakyBucket => leaky_bucket(state.cell).expired(now, p.rate),
        Algorithm::TokenBucket => token::expired(p, state.cell, now),
        Algorithm::Gcra => gcra::expired(state.cell, now),
        Algorithm::FixedWindow => window::fixed_expired(p, state.cell, now),
        Algorithm::SlidingWindow => window::sliding_expired(p, state.cell, now),
        Algorithm::SlidingLog => log::expired(p, state.log, now),
    }
}

/// A leaky bucket's cell: `value` is nginx's `excess`, `last` its `last`.
#[inline]
pub fn leaky_bucket(cell: &Cell) -> Bucket {
    Bucket {
        excess: cell.value,
        last: cell.last,
    }
}

#[inline]
fn leaky_cell(b: Bucket) -> Cell {
    Cell {
        last: b.last,
        value: b.excess,
        aux: 0,
    }
}

/// nginx's lookup: the excess with this request (and `pending` held ones)
/// must not pass the burst.
#[inline]
fn leaky_check(rate: Rate, burst: u64, cell: &Cell, now: u64, pending: u64) -> Check {
    let b = leaky_bucket(cell);
    let step = b.step(now, rate);
    let pending = pending * bucket::ONE;
    if step.excess + pending > burst {
        let wait_ms = Bucket {
            excess: b.excess + pending,
            ..b
        }
        .wait_until_accepted(now, rate, burst);
        return Check {
            admit: false,
            excess: step.excess + pending,
            wait_ms,
            standing: Standing::default(),
        };
    }
    Check {
        admit: true,
        excess: step.excess,
        wait_ms: 0,
        standing: leaky_standing(rate, burst, step.excess),
    }
}

/// The leaky bucket's standing after a request stored `excess`: `r` is
/// what the burst still holds, `t` the time for the content to leak down
/// by one more request.
#[inline]
pub fn leaky_standing(rate: Rate, burst: u64, excess: u64) -> Standing {
    let remaining = burst.saturating_sub(excess) / bucket::ONE;
    let target = burst - remaining * bucket::ONE;
    Standing {
        remaining,
        reset_ms: rate.time_to_leak((excess + bucket::ONE).saturating_sub(target)),
    }
}

/// `a * b / c` rounded down.
fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    let v = u128::from(a) * u128::from(b) / u128::from(c);
    u64::try_from(v).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
