//! The fixed window and the article's sliding window counter.
//!
//! Windows are `period_ms` long and aligned to time 0 (the Unix epoch for
//! real requests), as the article's `floor(now / WINDOW)`, so every
//! instance sharing a zone through Redis agrees on the boundaries.
//!
//! Fixed window: `last` = the window's start, `value` = requests admitted
//! in it. Sliding window: the same, and `aux` = the previous window's
//! count; the estimate of the last `period` is
//! `prev * (1 - elapsed/period) + cur`, and a request passes while it is
//! below `count`. Multiplied through by `period`, the comparison is exact.

use super::{Cell, Check, Policy, Standing};
use crate::limiter::bucket::ONE;

fn start_of(p: &Policy, now: u64) -> u64 {
    now - now % p.period_ms
}

/// The current window's start and count at `now`. A stored window later
/// than `now` (the clock went back) stays the current one.
fn fixed_current(p: &Policy, cell: &Cell, now: u64) -> (u64, u64) {
    let ws = start_of(p, now);
    if cell.last >= ws {
        (cell.last, cell.value)
    } else {
        (ws, 0)
    }
}

pub(super) fn fixed_check(p: &Policy, cell: &Cell, now: u64, pending: u64) -> Check {
    let (ws, cur) = fixed_current(p, cell, now);
    let with = cur + pending + 1;
    let until_end = (ws + p.period_ms).saturating_sub(now);
    if with > p.count {
        return Check {
            admit: false,
            excess: (with - 1) * ONE,
            wait_ms: until_end,
            standing: Standing::default(),
        };
    }
    Check {
        admit: true,
        excess: (with - 1) * ONE,
        wait_ms: 0,
        standing: Standing {
            remaining: p.count - with,
            reset_ms: until_end,
        },
    }
}

pub(super) fn fixed_charge(p: &Policy, cell: &mut Cell, now: u64) -> u64 {
    let (ws, cur) = fixed_current(p, cell, now);
    *cell = Cell {
        last: ws,
        value: cur + 1,
        aux: 0,
    };
    cur * ONE
}

pub(super) fn fixed_expired(p: &Policy, cell: &Cell, now: u64) -> bool {
    cell.last + p.period_ms <= now
}

/// A sliding window's position at `now`.
#[derive(Clone, Copy, Debug)]
struct Slide {
    /// The current window's start.
    ws: u64,
    /// Milliseconds into it.
    into: u64,
    prev: u64,
    cur: u64,
}

fn slide(p: &Policy, cell: &Cell, now: u64) -> Slide {
    let ws = start_of(p, now);
    let (ws, prev, cur) = if cell.last > ws {
        (cell.last, cell.aux, cell.value)
    } else if cell.last == ws {
        (ws, cell.aux, cell.value)
    } else if cell.last + p.period_ms == ws {
        (ws, cell.value, 0)
    } else {
        (ws, 0, 0)
    };
    Slide {
        ws,
        into: now.saturating_sub(ws),
        prev,
        cur,
    }
}

impl Slide {
    /// `prev`'s weight still inside the last period, times `period`.
    fn carried(&self, p: &Policy) -> u128 {
        u128::from(self.prev) * u128::from(p.period_ms - self.into.min(p.period_ms))
    }

    /// Would a request pass with `extra` more counted in this window?
    fn admits(&self, p: &Policy, extra: u64) -> bool {
        let period = u128::from(p.period_ms);
        self.carried(p) + u128::from(self.cur + extra) * period < u128::from(p.count) * period
    }

    /// Milliseconds from `now` until a request passes, with `extra` more
    /// counted in this window.
    fn wait(&self, p: &Policy, now: u64, extra: u64) -> u64 {
        let (period, limit) = (u128::from(p.period_ms), u128::from(p.count));
        let c = u128::from(self.cur + extra);
        if c < limit {
            if self.prev == 0 {
                return 0;
            }
            // The smallest x with prev * (period - x) < (limit - c) * period.
            let prev = u128::from(self.prev);
            let x = match (prev * period).checked_sub((limit - c) * period) {
                None => 0,
                Some(num) => num / prev + 1,
            };
            if x < period {
                return (x as u64).saturating_sub(self.into);
            }
        }
        // The next window, where `c` is the previous count: the smallest x
        // with c * (period - x) < limit * period.
        let x = if c < limit {
            0
        } else {
            ((c - limit) * period / c + 1) as u64
        };
        (self.ws + p.period_ms + x).saturating_sub(now)
    }
}

/// The estimate with `with` requests in the current window, minus one
/// request, in milli-requests.
fn slide_excess(s: &Slide, p: &Policy, with: u64) -> u64 {
    let carried = s.carried(p) * u128::from(ONE) / u128::from(p.period_ms);
    carried as u64 + (with - 1) * ONE
}

pub(super) fn sliding_check(p: &Policy, cell: &Cell, now: u64, pending: u64) -> Check {
    let s = slide(p, cell, now);
    let excess = slide_excess(&s, p, s.cur + pending + 1);
    if !s.admits(p, pending) {
        return Check {
            admit: false,
            excess,
            wait_ms: s.wait(p, now, pending),
            standing: Standing::default(),
        };
    }
    let after = s.cur + pending + 1;
    let period = u128::from(p.period_ms);
    let room = (u128::from(p.count) * period).saturating_sub(s.carried(p));
    let remaining = (room.div_ceil(period) as u64).saturating_sub(after);
    Check {
        admit: true,
        excess,
        wait_ms: 0,
        standing: Standing {
            remaining,
            reset_ms: s.wait(p, now, pending + 1 + remaining),
        },
    }
}

pub(super) fn sliding_charge(p: &Policy, cell: &mut Cell, now: u64) -> u64 {
    let s = slide(p, cell, now);
    *cell = Cell {
        last: s.ws,
        value: s.cur + 1,
        aux: s.prev,
    };
    slide_excess(&s, p, s.cur + 1)
}

pub(super) fn sliding_expired(p: &Policy, cell: &Cell, now: u64) -> bool {
    cell.last + 2 * p.period_ms <= now
}
