//! One key's state as an operator reads it (the admin API's key lookup):
//! the algorithm's stored numbers by name, whether a request would pass
//! now, how many at once, and when the next one would if not.
//!
//! Pure, like the algorithms: the state and `now` come in as arguments, so
//! a memory zone and a Redis zone (whose state is read with Redis's clock)
//! describe a key the same way.

use super::algorithm::{self, Algorithm, Cell, Log, Policy, View};

/// One key's state at `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyState {
    pub algorithm: Algorithm,
    /// The stored numbers, named as the Redis hash fields are (leaky
    /// bucket `excess` in milli-requests and `last`; token bucket `last`,
    /// `deficit`; GCRA `tat`, `frac`; windows `window`, `count`, `prev`;
    /// the sliding log `entries`).
    pub fields: Vec<(&'static str, u64)>,
    /// A request from this key now would pass.
    pub admits_now: bool,
    /// Requests it could make at once now (0 when refused).
    pub remaining: u64,
    /// Milliseconds until a request from it is admitted (0: now).
    pub next_admit_ms: u64,
    /// Milliseconds since its last admitted request, where the state
    /// keeps that time (leaky and token buckets, the sliding log).
    pub last_admitted_ms_ago: Option<u64>,
}

impl KeyState {
    /// A sentence: "admits now, 3 requests at once" or "over its limit:
    /// admits again in 1.250 s".
    pub fn summary(&self) -> String {
        if self.admits_now {
            let n = self.remaining;
            format!(
                "admits now, {n} request{} at once",
                if n == 1 { "" } else { "s" }
            )
        } else {
            let ms = self.next_admit_ms;
            format!(
                "over its limit: admits again in {}.{:03} s",
                ms / 1000,
                ms % 1000
            )
        }
    }
}

/// The state `cell` (and `log`, for a sliding log) of a key of a zone
/// limited by `p` with `burst` (milli-requests), at `now`.
pub fn inspect(p: &Policy, burst: u64, cell: &Cell, log: &Log, now: u64) -> KeyState {
    let c = algorithm::check(p, burst, View { cell, log }, now, 0);
    let fields = match p.algorithm {
        Algorithm::LeakyBucket => vec![("excess", cell.value), ("last", cell.last)],
        Algorithm::TokenBucket => vec![("last", cell.last), ("deficit", cell.value)],
        Algorithm::Gcra => vec![("tat", cell.last), ("frac", cell.value)],
        Algorithm::FixedWindow => vec![("window", cell.last), ("count", cell.value)],
        Algorithm::SlidingWindow => vec![
            ("window", cell.last),
            ("count", cell.value),
            ("prev", cell.aux),
        ],
        Algorithm::SlidingLog => vec![("entries", log.len() as u64)],
    };
    let last = match p.algorithm {
        Algorithm::LeakyBucket | Algorithm::TokenBucket if *cell != Cell::default() => {
            Some(cell.last)
        }
        Algorithm::SlidingLog => log.back().copied(),
        _ => None,
    };
    KeyState {
        algorithm: p.algorithm,
        fields,
        admits_now: c.admit,
        // The standing is after this request: one more before it.
        remaining: if c.admit { c.standing.remaining + 1 } else { 0 },
        next_admit_ms: c.wait_ms,
        last_admitted_ms_ago: last.map(|l| now.saturating_sub(l)),
    }
}

/// A key never seen (or forgotten): what a first request finds.
pub fn fresh(p: &Policy, burst: u64, now: u64) -> KeyState {
    KeyState {
        last_admitted_ms_ago: None,
        ..inspect(p, burst, &Cell::default(), &Log::new(), now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(a: Algorithm) -> Policy {
        Policy::new(a, 2, 1000).unwrap()
    }

    #[test]
    fn a_fresh_key_admits_burst_plus_one() {
        let p = policy(Algorithm::LeakyBucket);
        let s = fresh(&p, 3000, 10_000);
        assert!(s.admits_now);
        assert_eq!(s.remaining, 4);
        assert_eq!(s.next_admit_ms, 0);
        assert_eq!(s.summary(), "admits now, 4 requests at once");
    }

    #[test]
    fn a_full_leaky_bucket_says_when_it_admits_again() {
        let p = policy(Algorithm::LeakyBucket);
        let (mut cell, mut log) = (Cell::default(), Log::new());
        // burst 1: two at once, the third at 2 r/s waits 500 ms.
        for _ in 0..2 {
            assert!(algorithm::take(&p, 1000, &mut cell, &mut log, 10_000).admit);
        }
        let s = inspect(&p, 1000, &cell, &log, 10_000);
        assert!(!s.admits_now);
        assert_eq!(s.remaining, 0);
        assert_eq!(s.next_admit_ms, 500);
        assert_eq!(s.fields, vec![("excess", 1000), ("last", 10_000)]);
        assert_eq!(s.last_admitted_ms_ago, Some(0));
        assert_eq!(s.summary(), "over its limit: admits again in 0.500 s");
        let later = inspect(&p, 1000, &cell, &log, 10_500);
        assert!(later.admits_now);
        assert_eq!(later.last_admitted_ms_ago, Some(500));
    }

    #[test]
    fn every_algorithm_agrees_with_its_own_check() {
        for a in Algorithm::ALL {
            let p = policy(a);
            let burst = if a.is_window() { 0 } else { 1000 };
            let (mut cell, mut log) = (Cell::default(), Log::new());
            let mut admitted = 0;
            while algorithm::take(&p, burst, &mut cell, &mut log, 5_000).admit {
                admitted += 1;
            }
            assert_eq!(admitted, 2, "{a:?}");
            let s = inspect(&p, burst, &cell, &log, 5_000);
            assert!(!s.admits_now, "{a:?}");
            assert!(s.next_admit_ms > 0, "{a:?}");
            let at = 5_000 + s.next_admit_ms;
            let c = algorithm::check(
                &p,
                burst,
                View {
                    cell: &cell,
                    log: &log,
                },
                at,
                0,
            );
            assert!(c.admit, "{a:?} admits at its next_admit_ms");
            let before = at - 1;
            let c = algorithm::check(
                &p,
                burst,
                View {
                    cell: &cell,
                    log: &log,
                },
                before,
                0,
            );
            assert!(!c.admit, "{a:?} not a millisecond before");
        }
    }
}
