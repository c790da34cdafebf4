//! The sliding log: the times of the requests admitted in the last
//! `period_ms`, oldest first. A time `t` counts while `t > now - period`
//! (the article drops `t <= now - WINDOW`). Exact, at the price of up to
//! `count` times per key; stores count those bytes against their size.

use super::{Check, Log, Policy, Standing};
use crate::limiter::bucket::ONE;

/// Index of the first time still inside the last period at `now`.
fn first_live(p: &Policy, log: &Log, now: u64) -> usize {
    log.partition_point(|&t| t + p.period_ms <= now)
}

pub(super) fn check(p: &Policy, log: &Log, now: u64, pending: u64) -> Check {
    let first = first_live(p, log, now);
    let live = (log.len() - first) as u64;
    let with = live + pending + 1;
    if with > p.count {
        // `with - count` of the live times must leave the window.
        let m = (with - p.count) as usize;
        let wait_ms = match log.get(first + m - 1) {
            Some(&t) => (t + p.period_ms).saturating_sub(now),
            None => p.period_ms,
        };
        return Check {
            admit: false,
            excess: (with - 1) * ONE,
            wait_ms,
            standing: Standing::default(),
        };
    }
    // One more than `remaining`: the oldest live time (this request's own
    // if there is none) must leave.
    let oldest = log.get(first).copied().unwrap_or(now).min(now);
    Check {
        admit: true,
        excess: (with - 1) * ONE,
        wait_ms: 0,
        standing: Standing {
            remaining: p.count - with,
            reset_ms: (oldest + p.period_ms).saturating_sub(now),
        },
    }
}

/// Drop the times that left the window, then log `now` (kept in order if
/// the clock went back). The log never holds more than `count` times.
pub(super) fn charge(p: &Policy, log: &mut Log, now: u64) -> u64 {
    let first = first_live(p, log, now);
    log.drain(..first);
    if log.len() as u64 >= p.count {
        log.pop_front();
    }
    let t = log.back().map_or(now, |&b| b.max(now));
    log.push_back(t);
    (log.len() as u64 - 1) * ONE
}

pub(super) fn expired(p: &Policy, log: &Log, now: u64) -> bool {
    log.back().is_none_or(|&t| t + p.period_ms <= now)
}
