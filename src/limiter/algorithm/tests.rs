//! The article's scenarios, and properties every algorithm must keep.

use super::*;
use proptest::prelude::*;

fn policy(a: Algorithm, count: u64, period_ms: u64) -> Policy {
    Policy::new(a, count, period_ms).unwrap()
}

/// One key's state, driven as a store drives it: check, then charge.
#[derive(Clone, Default)]
struct Key {
    cell: Cell,
    log: Log,
}

impl Key {
    fn check(&self, p: &Policy, burst: u64, now: u64) -> Check {
        let view = View {
            cell: &self.cell,
            log: &self.log,
        };
        check(p, burst, view, now, 0)
    }

    fn offer(&mut self, p: &Policy, burst: u64, now: u64) -> Check {
        let c = self.check(p, burst, now);
        if c.admit {
            let stored = charge(p, &mut self.cell, &mut self.log, now);
            assert_eq!(stored, c.excess, "{p:?} at {now}");
        }
        c
    }
}

fn scenario_a() -> Vec<u64> {
    let mut v = vec![9_900; 10];
    v.extend([10_100; 10]);
    v
}

fn scenario_b() -> Vec<u64> {
    let mut v: Vec<u64> = (0..16).map(|i| i * 500).collect();
    v.extend([9_900; 10]);
    v.extend([10_100; 10]);
    v.extend((0..10).map(|i| 15_000 + i * 500));
    v
}

fn allowed(a: Algorithm, times: &[u64]) -> usize {
    // The article's limit: 10 per 10 s, capacity 10 (burst 9).
    let p = policy(a, 10, 10_000);
    let mut k = Key::default();
    times
        .iter()
        .filter(|&&t| k.offer(&p, 9_000, t).admit)
        .count()
}

fn queue_allowed(times: &[u64]) -> (usize, u64) {
    let mut q = queue::Queue::new(policy(Algorithm::LeakyBucket, 10, 10_000), 9_000);
    let waits: Vec<u64> = times.iter().filter_map(|&t| q.offer(t)).collect();
    let longest = waits.iter().max().copied().unwrap_or(0) / q.units_per_ms();
    (waits.len(), longest)
}

#[test]
fn the_articles_scenario_a() {
    let t = scenario_a();
    assert_eq!(allowed(Algorithm::FixedWindow, &t), 20);
    assert_eq!(allowed(Algorithm::SlidingLog, &t), 10);
    assert_eq!(allowed(Algorithm::SlidingWindow, &t), 11);
    assert_eq!(allowed(Algorithm::TokenBucket, &t), 10);
    assert_eq!(allowed(Algorithm::Gcra, &t), 10);
    assert_eq!(queue_allowed(&t).0, 11);
}

#[test]
fn the_articles_scenario_b() {
    let t = scenario_b();
    assert_eq!(t.len(), 46);
    assert_eq!(allowed(Algorithm::FixedWindow, &t), 20);
    assert_eq!(allowed(Algorithm::SlidingLog, &t), 20);
    assert_eq!(allowed(Algorithm::SlidingWindow, &t), 20);
    assert_eq!(allowed(Algorithm::TokenBucket, &t), 29);
    assert_eq!(allowed(Algorithm::Gcra, &t), 29);
    assert_eq!(queue_allowed(&t), (30, 10_000));
}

#[test]
fn the_articles_single_run() {
    // Capacity 10 at 1/s: 12 calls in a row, then one 2.1 s later, as
    // (allowed, remaining, retry after in seconds).
    let p = policy(Algorithm::TokenBucket, 1, 1000);
    let mut k = Key::default();
    let seen = |c: Check| {
        (
            u8::from(c.admit),
            c.standing.remaining,
            c.wait_ms.div_ceil(1000),
        )
    };
    let t0 = 1_700_000_000_000;
    let got: Vec<_> = (0..12).map(|i| seen(k.offer(&p, 9_000, t0 + i))).collect();
    assert_eq!(got[9..], [(1, 0, 0), (0, 0, 1), (0, 0, 1)]);
    assert_eq!(seen(k.offer(&p, 9_000, t0 + 11 + 2_100)), (1, 1, 0));
}

#[test]
fn quota_headers_map_naturally() {
    let tb = policy(Algorithm::TokenBucket, 10, 10_000);
    assert_eq!((tb.quota(9_000), tb.quota_window_secs(9_000)), (10, 10));
    let fw = policy(Algorithm::FixedWindow, 100, 300_000);
    assert_eq!((fw.quota(0), fw.quota_window_secs(0)), (100, 300));
    let lb = Policy::leaky(Rate::per_second(2).unwrap());
    assert_eq!((lb.quota(5_000), lb.quota_window_secs(5_000)), (6, 3));
}

#[test]
fn rates_are_exact_or_refused() {
    assert_eq!(policy(Algorithm::LeakyBucket, 1, 60_000).rate.milli(), 16);
    assert_eq!(
        policy(Algorithm::LeakyBucket, 10, 10_000).rate.milli(),
        1000
    );
    assert!(Policy::new(Algorithm::LeakyBucket, 1, 3_600_000).is_none());
    assert!(Policy::new(Algorithm::Gcra, 1, 3_600_000).is_some());
    assert!(Policy::new(Algorithm::Gcra, 0, 1000).is_none());
    assert!(Policy::new(Algorithm::Gcra, 1, 0).is_none());
}

fn any_policy() -> impl Strategy<Value = (Policy, u64)> {
    (
        prop::sample::select(Algorithm::ALL.to_vec()),
        1u64..20,
        prop::sample::select(vec![1u64, 7, 1000, 3000, 10_000, 60_000]),
        0u64..6,
    )
        .prop_filter_map("rate", |(a, n, period, burst)| {
            let burst = if a.is_window() { 0 } else { burst * 1000 };
            Some((Policy::new(a, n, period)?, burst))
        })
}

/// Arrival gaps: bursts at one instant and pauses of every size.
fn gaps() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(
        prop_oneof![Just(0u64), 0u64..50, 0u64..5_000, 0u64..200_000],
        1..120,
    )
}

proptest! {
    #![proptest_config(crate::limiter::proptest_config(400))]

    /// The article: "token bucket and GCRA agree request for request".
    #[test]
    fn token_bucket_and_gcra_agree(n in 1u64..50, period in 1u64..100_000,
                                   burst in 0u64..20, gaps in gaps()) {
        let tb = policy(Algorithm::TokenBucket, n, period);
        let gcra = policy(Algorithm::Gcra, n, period);
        let (mut a, mut b) = (Key::default(), Key::default());
        let mut now = 1_700_000_000_000;
        for g in gaps {
            now += g;
            prop_assert_eq!(a.offer(&tb, burst * 1000, now), b.offer(&gcra, burst * 1000, now));
        }
    }

    /// `wait_ms` is exact: admitted at `now + wait_ms`, refused a
    /// millisecond earlier; and a refusal stores nothing.
    #[test]
    fn waits_are_exact((p, burst) in any_policy(), gaps in gaps()) {
        let mut k = Key::default();
        let mut now = 1_700_000_000_000;
        for g in gaps {
            now += g;
            let c = k.offer(&p, burst, now);
            if !c.admit {
                prop_assert!(c.wait_ms > 0);
                prop_assert!(k.check(&p, burst, now + c.wait_ms).admit, "{:?}", c);
                prop_assert!(!k.check(&p, burst, now + c.wait_ms - 1).admit, "{:?}", c);
            }
        }
    }

    /// `Standing` is exact: `remaining` more pass at once now, not one
    /// more; at least one more than that passes `reset_ms` later, and not
    /// a millisecond earlier (a window gives back all of it at once).
    #[test]
    fn standings_are_exact((p, burst) in any_policy(), gaps in gaps()) {
        let mut k = Key::default();
        let mut now = 1_700_000_000_000;
        for g in gaps {
            now += g;
            let c = k.offer(&p, burst, now);
            if !c.admit {
                continue;
            }
            let s = c.standing;
            prop_assert_eq!(at_once(&k, &p, burst, now, s.remaining + 1), s.remaining);
            let then = now + s.reset_ms;
            prop_assert!(at_once(&k, &p, burst, then, s.remaining + 1) == s.remaining + 1);
            if s.reset_ms > 0 {
                prop_assert!(at_once(&k, &p, burst, then - 1, s.remaining + 1) <= s.remaining);
            }
        }
    }

    /// A state is forgotten only when a request would find it as new
    /// (nginx's leaky bucket has its own rule, kept: a minute idle and an
    /// excess no larger than what leaked, without this request's 1000).
    #[test]
    fn expired_states_are_as_new((p, burst) in any_policy(), gaps in gaps(), later in 0u64..400_000) {
        prop_assume!(p.algorithm != Algorithm::LeakyBucket);
        let mut k = Key::default();
        let mut now = 1_700_000_000_000;
        for g in gaps {
            now += g;
            k.offer(&p, burst, now);
        }
        let then = now + later;
        let view = View { cell: &k.cell, log: &k.log };
        if expired(&p, view, then) {
            let fresh = Key::default();
            let n = p.quota(burst) + 1;
            prop_assert_eq!(at_once(&k, &p, burst, then, n), at_once(&fresh, &p, burst, then, n));
        }
    }
}

/// How many of `most` requests at `now` pass, on a copy of the state.
fn at_once(k: &Key, p: &Policy, burst: u64, now: u64, most: u64) -> u64 {
    let mut k = k.clone();
    (0..most).filter(|_| k.offer(p, burst, now).admit).count() as u64
}
