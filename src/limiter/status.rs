//! `$limit_req_status`: what a decision is called in logs, error pages and
//! metrics, and the per-zone counts of each.
//!
//! An enum rather than nginx's strings, so that the metrics count it by
//! index instead of parsing the string back; `-` (no limit counted the
//! request) is `None` wherever a status is optional.

use super::Outcome;
use std::sync::atomic::{AtomicU64, Ordering};

/// nginx's `$limit_req_status` of a request that a limit counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LimitReqStatus {
    Passed,
    Delayed,
    Rejected,
    DelayedDryRun,
    RejectedDryRun,
}

impl LimitReqStatus {
    /// Every status, in the order of [`DecisionCounts`] and the metrics.
    pub const ALL: [LimitReqStatus; 5] = [
        LimitReqStatus::Passed,
        LimitReqStatus::Delayed,
        LimitReqStatus::Rejected,
        LimitReqStatus::DelayedDryRun,
        LimitReqStatus::RejectedDryRun,
    ];

    /// The status of `outcome` in a location with `limit_req_dry_run` =
    /// `dry_run`; `None` (`-`) when every key was empty. A rejection for want
    /// of memory or of Redis is `REJECTED` too, as in nginx.
    pub fn of(outcome: &Outcome, dry_run: bool) -> Option<LimitReqStatus> {
        Some(match (outcome, dry_run) {
            (Outcome::Unlimited, _) => return None,
            (Outcome::Accepted { delay_ms: 0, .. }, _) => LimitReqStatus::Passed,
            (Outcome::Accepted { .. }, false) => LimitReqStatus::Delayed,
            (Outcome::Accepted { .. }, true) => LimitReqStatus::DelayedDryRun,
            (_, false) => LimitReqStatus::Rejected,
            (_, true) => LimitReqStatus::RejectedDryRun,
        })
    }

    /// nginx's spelling, as `$limit_req_status` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitReqStatus::Passed => "PASSED",
            LimitReqStatus::Delayed => "DELAYED",
            LimitReqStatus::Rejected => "REJECTED",
            LimitReqStatus::DelayedDryRun => "DELAYED_DRY_RUN",
            LimitReqStatus::RejectedDryRun => "REJECTED_DRY_RUN",
        }
    }

    /// The metric label value (NGINX Plus's lowercase names).
    pub fn label(self) -> &'static str {
        match self {
            LimitReqStatus::Passed => "passed",
            LimitReqStatus::Delayed => "delayed",
            LimitReqStatus::Rejected => "rejected",
            LimitReqStatus::DelayedDryRun => "delayed_dry_run",
            LimitReqStatus::RejectedDryRun => "rejected_dry_run",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How many decisions a zone made, by `$limit_req_status` (NGINX Plus's
/// `limit_reqs` counters): one relaxed atomic add per request.
#[derive(Debug, Default)]
pub struct DecisionCounts([AtomicU64; 5]);

impl DecisionCounts {
    /// Count one decision.
    pub fn record(&self, status: LimitReqStatus) {
        self.0[status.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Start counting from zero (NGINX Plus's `DELETE` on a zone).
    pub fn reset(&self) {
        for c in &self.0 {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// The decisions counted with `status`.
    pub fn get(&self, status: LimitReqStatus) -> u64 {
        self.0[status.index()].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_named_as_in_nginx() {
        let accepted = |delay_ms| Outcome::Accepted {
            delay_ms,
            limit: 0,
            excess: 0,
            tightest: (0, Default::default()),
        };
        let rejected = Outcome::Rejected {
            limit: 0,
            excess: 0,
            wait_ms: 0,
        };
        let name = |o: &Outcome, dry| LimitReqStatus::of(o, dry).map_or("-", |s| s.as_str());
        for dry in [false, true] {
            assert_eq!(name(&Outcome::Unlimited, dry), "-");
            assert_eq!(name(&accepted(0), dry), "PASSED");
        }
        assert_eq!(name(&accepted(5), false), "DELAYED");
        assert_eq!(name(&accepted(5), true), "DELAYED_DRY_RUN");
        for o in [
            rejected,
            Outcome::NoMemory { limit: 0 },
            Outcome::Unavailable { limit: 0 },
        ] {
            assert_eq!(name(&o, false), "REJECTED");
            assert_eq!(name(&o, true), "REJECTED_DRY_RUN");
        }
        for (i, s) in LimitReqStatus::ALL.into_iter().enumerate() {
            assert_eq!(s.index(), i);
            assert_eq!(s.label(), s.as_str().to_ascii_lowercase());
        }
    }
}
