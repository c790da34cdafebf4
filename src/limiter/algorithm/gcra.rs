//! GCRA: the theoretical arrival time (TAT) of the next request is the only
//! state. With emission interval `T = period / count` and tolerance
//! `tau = burst * T`, a request at `now` passes when `TAT - now <= tau`,
//! and moves `TAT` to `max(TAT, now) + T`.
//!
//! `T` is rarely a whole number of milliseconds (10r/3s), so the TAT is
//! kept exactly as `last` ms plus `value`/`count` ms (`value < count`).
//! `TAT - now` in units of 1/`count` ms is then the token bucket's deficit
//! (see [`super::token`]): the two decide identically, as the article
//! measured, and only their state differs.

use super::token::check_deficit;
use super::{Cell, Check, Policy, mul_div};
use crate::limiter::bucket::ONE;

/// `max(TAT - now, 0)` in units of 1/`count` ms.
pub fn ahead(p: &Policy, cell: &Cell, now: u64) -> u64 {
    match cell.last.checked_sub(now) {
        Some(ms) => ms.saturating_mul(p.count).saturating_add(cell.value),
        None => 0,
    }
}

pub(super) fn check(p: &Policy, burst: u64, cell: &Cell, now: u64, pending: u64) -> Check {
    check_deficit(p, burst, ahead(p, cell, now), pending)
}

pub(super) fn charge(p: &Policy, cell: &mut Cell, now: u64) -> u64 {
    let d = ahead(p, cell, now) + p.period_ms;
    cell.last = now + d / p.count;
    cell.value = d % p.count;
    mul_div(d - p.period_ms, ONE, p.period_ms)
}

/// The TAT is not ahead of `now`.
pub(super) fn expired(cell: &Cell, now: u64) -> bool {
    cell.last < now || (cell.last == now && cell.value == 0)
}
