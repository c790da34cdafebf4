//! The article's token bucket, in exact integers.
//!
//! Capacity `burst + 1` tokens; one request takes one; `count` tokens come
//! back every `period_ms`. In units where a token is `period_ms` and
//! `count` units come back each millisecond, nothing is ever rounded.
//!
//! The cell keeps what the bucket is missing rather than what it holds, so
//! that the state of a key never seen (all zero) is a full bucket:
//! `value` = the missing units as of `last` (ms).

use super::{Cell, Check, Policy, Standing, mul_div};
use crate::limiter::bucket::ONE;

/// The bucket's capacity in units: `burst + 1` requests.
pub fn capacity(p: &Policy, burst: u64) -> u64 {
    (burst / ONE + 1) * p.period_ms
}

/// The units missing at `now`.
pub fn deficit(p: &Policy, cell: &Cell, now: u64) -> u64 {
    let refill = now.saturating_sub(cell.last).saturating_mul(p.count);
    cell.value.saturating_sub(refill)
}

pub(super) fn check(p: &Policy, burst: u64, cell: &Cell, now: u64, pending: u64) -> Check {
    check_deficit(p, burst, deficit(p, cell, now), pending)
}

/// The decision for a bucket missing `d` units, with `pending` requests
/// held by other decisions: shared with GCRA, whose `tat - now` is the same
/// quantity.
pub(super) fn check_deficit(p: &Policy, burst: u64, d: u64, pending: u64) -> Check {
    let cost = p.period_ms;
    let cap = capacity(p, burst);
    let with = d + (pending + 1) * cost;
    let excess = mul_div(with - cost, ONE, cost);
    if with > cap {
        return Check {
            admit: false,
            excess,
            wait_ms: (with - cap).div_ceil(p.count),
            standing: Standing::default(),
        };
    }
    let remaining = (cap - with) / cost;
    // One more than `remaining` needs the deficit down to
    // cap - (remaining + 1) * cost, which is below `with`.
    let need = with - (cap - (remaining + 1) * cost);
    Check {
        admit: true,
        excess,
        wait_ms: 0,
        standing: Standing {
            remaining,
            reset_ms: need.div_ceil(p.count),
        },
    }
}

pub(super) fn charge(p: &Policy, cell: &mut Cell, now: u64) -> u64 {
    let d = deficit(p, cell, now) + p.period_ms;
    // A clock that went back credits nothing, now or later.
    cell.last = cell.last.max(now);
    cell.value = d;
    mul_div(d - p.period_ms, ONE, p.period_ms)
}

/// Full again: a request would find it as new.
pub(super) fn expired(p: &Policy, cell: &Cell, now: u64) -> bool {
    deficit(p, cell, now) == 0
}
