//! Every algorithm through the memory store and nginx's multi-limit
//! protocol, against the pure algorithm run on one key at a time: the
//! store adds nothing to a decision (no eviction here), and `size` bounds
//! what the states occupy whatever the algorithm.

use super::algorithm::{self, Algorithm, Cell, Log, View};
use super::*;
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000;

fn zone(p: Policy, capacity: usize) -> Arc<ZoneRef> {
    Arc::new(ZoneRef::new(
        "z",
        p,
        Arc::new(Store::Memory(MemoryZone::with_capacity(capacity))),
    ))
}

/// The pure model of one key.
#[derive(Clone, Default)]
struct Model {
    cell: Cell,
    log: Log,
}

impl Model {
    fn check(&self, p: &Policy, burst: u64, now: u64) -> algorithm::Check {
        let view = View {
            cell: &self.cell,
            log: &self.log,
        };
        algorithm::check(p, burst, view, now, 0)
    }
}

fn policies() -> impl Strategy<Value = (Policy, u64)> {
    (
        prop::sample::select(Algorithm::ALL.to_vec()),
        1u64..12,
        prop::sample::select(vec![1000u64, 2500, 10_000, 60_000]),
        0u64..5,
    )
        .prop_filter_map("rate", |(a, n, period, burst)| {
            let burst = if a.is_window() { 0 } else { burst * 1000 };
            Some((Policy::new(a, n, period)?, burst))
        })
}

proptest! {
    #![proptest_config(crate::limiter::proptest_config(300))]

    /// One limit, several keys: the store's outcome is the model's.
    #[test]
    fn one_limit_is_the_algorithm((p, burst) in policies(),
                                  steps in prop::collection::vec((0u64..3_000, 0u8..3), 1..150)) {
        let z = zone(p, 1000);
        let limits = [Limit { zone: z, burst, delay: Limit::NODELAY }];
        let mut models = vec![Model::default(); 3];
        let mut now = T0;
        for (gap, k) in steps {
            now += gap;
            let m = &mut models[usize::from(k)];
            let want = m.check(&p, burst, now);
            let got = evaluate(&limits, now, |_| Some([k]));
            if want.admit {
                let excess = algorithm::charge(&p, &mut m.cell, &mut m.log, now);
                prop_assert_eq!(got, Outcome::Accepted {
                    delay_ms: 0,
                    limit: 0,
                    excess,
                    tightest: (0, want.standing),
                });
            } else {
                prop_assert_eq!(got, Outcome::Rejected { limit: 0, excess: want.excess, wait_ms: want.wait_ms });
            }
        }
    }

    /// Two limits of different algorithms on one location: accepted only
    /// when both accept, nothing charged on a refusal, the tightest
    /// standing reported.
    #[test]
    fn two_limits_charge_both_or_neither((a, ba) in policies(), (b, bb) in policies(),
                                        gaps in prop::collection::vec(0u64..2_000, 1..150)) {
        let limits = [
            Limit { zone: zone(a, 100), burst: ba, delay: Limit::NODELAY },
            Limit { zone: zone(b, 100), burst: bb, delay: Limit::NODELAY },
        ];
        let (mut ma, mut mb) = (Model::default(), Model::default());
        let mut now = T0;
        for gap in gaps {
            now += gap;
            let (ca, cb) = (ma.check(&a, ba, now), mb.check(&b, bb, now));
            let got = evaluate(&limits, now, |_| Some("k"));
            match got {
                Outcome::Accepted { tightest, .. } => {
                    prop_assert!(ca.admit && cb.admit);
                    algorithm::charge(&a, &mut ma.cell, &mut ma.log, now);
                    algorithm::charge(&b, &mut mb.cell, &mut mb.log, now);
                    let least = ca.standing.remaining.min(cb.standing.remaining);
                    prop_assert_eq!(tightest.1.remaining, least);
                }
                Outcome::Rejected { limit, wait_ms, .. } => {
                    let first = if !ca.admit { (0, ca) } else { (1, cb) };
                    prop_assert!(!(ca.admit && cb.admit));
                    prop_assert_eq!((limit, wait_ms), (first.0, first.1.wait_ms));
                }
                o => prop_assert!(false, "{:?}", o),
            }
        }
    }
}

/// Only nginx's leaky bucket delays: beside a token bucket on one location
/// the delay is the leaky bucket's.
#[test]
fn only_the_leaky_bucket_delays() {
    let leaky = zone(Policy::leaky(Rate::per_second(2).unwrap()), 10);
    let tb = zone(Policy::new(Algorithm::TokenBucket, 2, 1000).unwrap(), 10);
    let limits = [
        Limit {
            zone: tb,
            burst: 5000,
            delay: Limit::NODELAY,
        },
        Limit {
            zone: leaky,
            burst: 5000,
            delay: 0,
        },
    ];
    let delays: Vec<u64> = (0..6)
        .map(|_| match evaluate(&limits, T0, |_| Some("k")) {
            Outcome::Accepted { delay_ms, .. } => delay_ms,
            o => panic!("{o:?}"),
        })
        .collect();
    assert_eq!(delays, [0, 500, 1000, 1500, 2000, 2500]);
    assert!(matches!(
        evaluate(&limits, T0, |_| Some("k")),
        Outcome::Rejected { limit: 0, .. }
    ));
}

/// A sliding log holds up to `count` times per key, and the zone's size
/// pays for them: a 32k zone at 100 per period holds a few dozen keys,
/// evicts the least recent, and occupies no more than its size.
#[test]
fn sliding_logs_count_their_bytes_against_the_size() {
    let p = Policy::new(Algorithm::SlidingLog, 100, 60_000).unwrap();
    let m = MemoryZone::with_size(32 * 1024);
    for k in 0u32..200 {
        for i in 0u64..100 {
            let got = m.lookup(&k.to_be_bytes(), T0 + i, &p, 0, true);
            assert!(matches!(got, Lookup::Charged { .. }), "{got:?}");
        }
    }
    // 32k / 64 = 512 units; a key costs 1 + (32 + 800) / 64 = 14.
    assert_eq!(m.len(), 512 / 14);
    assert!(m.evictions() > 0);
    assert!(
        m.peek_log(&199u32.to_be_bytes())
            .is_some_and(|l| l.len() == 100)
    );
    assert!(
        m.peek(&0u32.to_be_bytes()).is_none(),
        "least recent evicted"
    );
    assert!(m.memory_bytes() <= 32 * 1024, "{} bytes", m.memory_bytes());
    // A full log refuses the 101st in the period, and frees a slot when
    // its oldest time leaves the window.
    let k = 199u32.to_be_bytes();
    assert!(matches!(
        m.lookup(&k, T0 + 1000, &p, 0, true),
        Lookup::Busy { wait_ms, .. } if wait_ms == 60_000 - 1000
    ));
    assert!(matches!(
        m.lookup(&k, T0 + 60_000, &p, 0, true),
        Lookup::Charged { .. }
    ));
}

/// States of every algorithm expire when they are as new, so a zone full
/// of idle keys takes new ones without forced eviction.
#[test]
fn idle_states_expire_without_eviction() {
    for a in Algorithm::ALL {
        let p = Policy::new(a, 1, 1000).unwrap();
        // Room for four states (a sliding log's costs two units).
        let m = MemoryZone::with_capacity(8);
        for k in 0u8..4 {
            m.lookup(&[k], T0, &p, 0, true);
        }
        assert_eq!(m.evictions(), 0, "{a:?}");
        // Long after (past nginx's minute for the leaky bucket).
        for k in 4u8..8 {
            let got = m.lookup(&[k], T0 + 120_000 + u64::from(k), &p, 0, true);
            assert!(matches!(got, Lookup::Charged { .. }), "{a:?}: {got:?}");
        }
        assert_eq!(m.evictions(), 0, "{a:?}");
        assert_eq!(m.len(), 4, "{a:?}");
    }
}
