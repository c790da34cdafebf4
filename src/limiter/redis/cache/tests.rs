//! The cache against the algorithms it stands in for: whatever state a key
//! was refused in, every answer until the widest limit admits is the
//! algorithm's own at the same time; none after. Then its bounds.

use super::*;
use crate::limiter::algorithm::Check;
use proptest::prelude::*;

fn policy(a: Algorithm, count: u64, period_ms: u64) -> Policy {
    Policy::new(a, count, period_ms).unwrap()
}

/// A key as the memory store keeps it.
#[derive(Default)]
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
        algorithm::check(p, burst, view, now, 0)
    }

    fn offer(&mut self, p: &Policy, burst: u64, now: u64) -> Check {
        algorithm::take(p, burst, &mut self.cell, &mut self.log, now)
    }
}

/// Seen at local time `local`, no failure so far.
fn seen(local: u64, drift: bool) -> Seen {
    Seen {
        local,
        epoch: 0,
        drift,
    }
}

/// Redis's refusal `c` of key `k` at `at`, as the script sends it.
fn refusal(k: &Key, c: &Check, at: u64) -> Refusal {
    Refusal {
        excess: c.excess,
        wait_ms: c.wait_ms,
        at,
        cell: k.cell,
    }
}

fn any_policy() -> impl Strategy<Value = (Policy, u64, u64)> {
    (
        prop::sample::select(Algorithm::ALL.to_vec()),
        1u64..20,
        prop::sample::select(vec![1u64, 7, 1000, 3000, 10_000, 60_000]),
        0u64..6,
        0u64..6,
    )
        .prop_filter_map("rate", |(a, n, period, widest, narrow)| {
            let (widest, narrow) = if a.is_window() {
                (0, 0)
            } else {
                (widest * 1000, narrow.min(widest) * 1000)
            };
            Some((Policy::new(a, n, period)?, widest, narrow))
        })
}

/// Arrival gaps: bursts at one instant and pauses of every size.
fn gaps() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(
        prop_oneof![Just(0u64), 0u64..50, 0u64..5_000, 0u64..200_000],
        1..80,
    )
}

/// What the cache must answer at `t`: the algorithm's refusal, or nothing.
fn expected(k: &Key, p: &Policy, burst: u64, t: u64) -> Option<(u64, u64)> {
    let c = k.check(p, burst, t);
    (!c.admit).then_some((c.excess, c.wait_ms))
}

proptest! {
    #![proptest_config(crate::limiter::proptest_config(300))]

    /// Every refusal of the widest limit, remembered on a local clock
    /// `offset` away from Redis's: until that limit admits, the cache
    /// answers exactly what the algorithm answers at the same Redis time,
    /// for the widest and a narrower limit; from then on, nothing.
    #[test]
    fn answers_are_the_algorithms_until_the_widest_limit_admits(
        (p, widest, narrow) in any_policy(),
        gaps in gaps(),
        offset in 0u64..1_000_000_000,
        probe in 0u64..1_000_000,
    ) {
        let cache = RejectCache::with_capacity(64, p, widest);
        let mut k = Key::default();
        let mut now = 1_700_000_000_000;
        for g in gaps {
            now += g;
            let c = k.offer(&p, widest, now);
            if c.admit {
                continue;
            }
            let local = offset + now / 3;
            cache.remember(b"k", refusal(&k, &c, now), seen(local, false));
            let w = c.wait_ms;
            let mut ds = vec![0, 1, w / 2, w.saturating_sub(1), w, w + 1, probe % (w + 1)];
            ds.dedup();
            for d in ds {
                for burst in [widest, narrow] {
                    let want = if d < w { expected(&k, &p, burst, now + d) } else { None };
                    prop_assert_eq!(cache.refusal(b"k", burst, local + d, 0), want,
                        "{:?} widest {} burst {} at +{}", p, widest, burst, d);
                }
            }
            prop_assert_eq!(cache.refusal(b"other", widest, local, 0), None);
            prop_assert_eq!(cache.refusal(b"k", widest, local.wrapping_sub(1), 0), None,
                "a decision older than the refusal");
            prop_assert_eq!(cache.refusal(b"k", widest + 1000, local, 0), None,
                "a limit wider than the widest");
        }
    }
}

/// With the server's clock an entry ends a thousandth of its length early
/// (rounded up); with the caller's, exactly when the key admits.
#[test]
fn redis_time_ends_entries_early_by_the_drift_bound() {
    let p = policy(Algorithm::LeakyBucket, 1, 1000);
    let mut k = Key::default();
    let t0 = 5_000_000;
    k.offer(&p, 0, t0);
    let c = k.offer(&p, 0, t0);
    assert_eq!((c.admit, c.wait_ms), (false, 1000));
    for (drift, last) in [(false, 999), (true, 998)] {
        let cache = RejectCache::with_capacity(8, p, 0);
        cache.remember(b"k", refusal(&k, &c, t0), seen(70, drift));
        assert_eq!(cache.refusal(b"k", 0, 70, 0), Some((1000, 1000)));
        assert_eq!(
            cache.refusal(b"k", 0, 70 + last, 0),
            Some((1000 - last, 1000 - last))
        );
        assert_eq!(
            cache.refusal(b"k", 0, 70 + last + 1, 0),
            None,
            "drift {drift}"
        );
    }
}

/// A refusal by a narrower limit while the widest would admit is not kept:
/// a request under the widest limit may change the state at any time.
#[test]
fn a_refusal_the_widest_limit_would_admit_is_not_kept() {
    let p = policy(Algorithm::TokenBucket, 1, 1000);
    let mut k = Key::default();
    k.offer(&p, 2000, 10_000);
    let c = k.check(&p, 0, 10_000);
    assert!(!c.admit);
    let cache = RejectCache::with_capacity(8, p, 2000);
    cache.remember(b"k", refusal(&k, &c, 10_000), seen(10_000, false));
    assert!(cache.is_empty());
    // Once the widest refuses too, a narrower limit's answer comes from it.
    k.offer(&p, 2000, 10_000);
    k.offer(&p, 2000, 10_000);
    let wide = k.check(&p, 2000, 10_000);
    assert!(!wide.admit);
    cache.remember(b"k", refusal(&k, &wide, 10_000), seen(10_000, false));
    assert_eq!(
        cache.refusal(b"k", 0, 10_000, 0),
        Some((k.check(&p, 0, 10_000).excess, 3000))
    );
}

/// A sliding log is refused at the same excess until its oldest time
/// leaves, whatever the log holds (it is not sent back).
#[test]
fn a_full_sliding_log_refuses_until_its_oldest_time_leaves() {
    let p = policy(Algorithm::SlidingLog, 3, 10_000);
    let mut k = Key::default();
    for t in [100_000, 102_000, 105_000] {
        assert!(k.offer(&p, 0, t).admit);
    }
    let c = k.offer(&p, 0, 106_000);
    assert_eq!((c.admit, c.excess, c.wait_ms), (false, 3000, 4000));
    let cache = RejectCache::with_capacity(8, p, 0);
    cache.remember(b"k", refusal(&k, &c, 106_000), seen(1, false));
    assert_eq!(cache.refusal(b"k", 0, 1, 0), Some((3000, 4000)));
    assert_eq!(cache.refusal(b"k", 0, 4000, 0), Some((3000, 1)));
    assert_eq!(cache.refusal(b"k", 0, 4001, 0), None);
}

fn refused_leaky(cache: &RejectCache, key: &[u8], local: u64, wait_ms: u64) {
    let r = Refusal {
        excess: 1000,
        wait_ms,
        at: local,
        // burst 0 at 1r/s, charged at `local - (1000 - wait_ms)`.
        cell: Cell {
            last: local - (1000 - wait_ms),
            value: 0,
            aux: 0,
        },
    };
    cache.remember(key, r, seen(local, false));
}

/// A flood of new keys recycles entries: the cache never holds more than
/// its capacity, the oldest entries go, the newest stay.
#[test]
fn a_full_cache_stays_bounded_under_many_keys() {
    let p = policy(Algorithm::LeakyBucket, 1, 1000);
    let cache = RejectCache::with_size(1 << 20, p, 0);
    assert_eq!(cache.capacity(), 8192);
    assert_eq!(cache.shards.len(), 16);
    let key = |i: u64| i.to_be_bytes();
    let n = 200_000u64;
    for i in 0..n {
        refused_leaky(&cache, &key(i), 1_000_000, 1000);
        if i % 20_000 == 0 {
            assert!(cache.len() <= cache.capacity());
        }
    }
    assert_eq!(cache.len(), cache.capacity(), "full, not more");
    assert_eq!(cache.refusal(&key(0), 0, 1_000_000, 0), None, "evicted");
    let recent = (n - 1000..n)
        .filter(|&i| cache.refusal(&key(i), 0, 1_000_000, 0).is_some())
        .count();
    assert!(recent > 900, "the newest keys stay: {recent} of 1000");
    for s in cache.shards.iter() {
        let s = s.lock();
        assert!(s.slots.len() <= s.capacity);
        assert_eq!(s.table.len(), s.slots.len(), "one index per entry");
    }
}

/// A full shard replaces expired entries before live ones.
#[test]
fn expired_entries_are_replaced_first() {
    let p = policy(Algorithm::LeakyBucket, 1, 1000);
    let cache = RejectCache::with_capacity(4, p, 0);
    assert_eq!(cache.shards.len(), 1);
    refused_leaky(&cache, b"a", 10_000, 1000);
    refused_leaky(&cache, b"b", 10_000, 1000);
    refused_leaky(&cache, b"c", 10_000, 100);
    refused_leaky(&cache, b"d", 10_000, 100);
    // c and d have expired by 10_500; e and f take their places.
    refused_leaky(&cache, b"e", 10_500, 1000);
    refused_leaky(&cache, b"f", 10_500, 1000);
    assert_eq!(cache.len(), 4);
    for k in [b"a", b"b", b"e", b"f"] {
        assert!(cache.refusal(k, 0, 10_600, 0).is_some(), "{k:?}");
    }
    // Nothing expired: the hand's entry goes.
    refused_leaky(&cache, b"g", 10_600, 1000);
    assert_eq!(cache.len(), 4);
    let kept = [b"a", b"b", b"e", b"f", b"g"]
        .iter()
        .filter(|k| cache.refusal(&k[..], 0, 10_700, 0).is_some())
        .count();
    assert_eq!(kept, 4);
}

/// A key refused again is updated in place, not added twice.
#[test]
fn a_key_refused_again_keeps_one_entry() {
    let p = policy(Algorithm::LeakyBucket, 1, 1000);
    let cache = RejectCache::with_capacity(4, p, 0);
    refused_leaky(&cache, b"a", 10_000, 100);
    refused_leaky(&cache, b"a", 10_050, 1000);
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.refusal(b"a", 0, 10_500, 0), Some((550, 550)));
}

/// After a failed call (a Redis that may have restarted empty), the
/// entries made before it are not used; a refusal seen since is.
#[test]
fn a_failed_call_retires_the_entries_made_before_it() {
    let p = policy(Algorithm::LeakyBucket, 1, 1000);
    let cache = RejectCache::with_capacity(4, p, 0);
    refused_leaky(&cache, b"a", 10_000, 1000);
    assert!(cache.refusal(b"a", 0, 10_100, 0).is_some());
    assert_eq!(cache.refusal(b"a", 0, 10_100, 1), None);
    let r = Refusal {
        excess: 1000,
        wait_ms: 1000,
        at: 10_200,
        cell: Cell {
            last: 10_200,
            value: 0,
            aux: 0,
        },
    };
    let after = Seen {
        local: 10_200,
        epoch: 1,
        drift: false,
    };
    cache.remember(b"a", r, after);
    assert_eq!(cache.refusal(b"a", 0, 10_300, 1), Some((900, 900)));
}
