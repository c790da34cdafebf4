//! The article's queue-type leaky bucket (`LeakyBucketQueue`): up to
//! `burst + 1` requests wait in a queue, and one is processed every
//! `period / count`. Not a zone algorithm (a proxy that queues is nginx's
//! delaying leaky bucket, which sluice runs); `sluice simulate` shows it
//! beside nginx's to show where the two differ.
//!
//! Exact: times are kept in units of 1/`count` ms, in which the interval
//! is `period_ms`.

use super::Policy;
use crate::limiter::bucket::ONE;
use std::collections::VecDeque;

pub struct Queue {
    policy: Policy,
    capacity: u64,
    /// When the next request can start processing (units).
    next_free: u64,
    /// Processing start of each accepted request not started yet (units).
    waiting: VecDeque<u64>,
}

impl Queue {
    pub fn new(policy: Policy, burst: u64) -> Queue {
        Queue {
            policy,
            capacity: burst / ONE + 1,
            next_free: 0,
            waiting: VecDeque::new(),
        }
    }

    /// A request arriving at `now` (ms, not before earlier arrivals):
    /// `Some(wait)` until it is processed, exactly, in units of 1/`count`
    /// ms ([`Queue::units_per_ms`]), or `None` when the queue is full.
    pub fn offer(&mut self, now: u64) -> Option<u64> {
        let now_u = now.saturating_mul(self.policy.count);
        // The article counts the requests whose start is after `now`.
        while self.waiting.front().is_some_and(|&t| t <= now_u) {
            self.waiting.pop_front();
        }
        if self.waiting.len() as u64 >= self.capacity {
            return None;
        }
        let start = now_u.max(self.next_free);
        self.next_free = start + self.policy.period_ms;
        if start > now_u {
            self.waiting.push_back(start);
        }
        Some(start - now_u)
    }

    /// Units of [`Queue::offer`]'s wait per millisecond.
    pub fn units_per_ms(&self) -> u64 {
        self.policy.count
    }
}
