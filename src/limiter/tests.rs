//! The worked examples of nginx-limit-req.md §11 and §3, and properties of the
//! bucket that must hold for any sequence of requests.

use super::*;
use proptest::prelude::*;

const T0: u64 = 1_000_000_000;

fn zone(name: &str, rate: Rate, capacity: usize) -> Arc<ZoneRef> {
    Arc::new(ZoneRef {
        name: name.into(),
        policy: Policy::leaky(rate),
        store: Arc::new(Store::Memory(MemoryZone::with_capacity(capacity))),
        counts: Default::default(),
        reject_cache: None,
    })
}

fn limit(z: &Arc<ZoneRef>, burst: u64, delay: u64) -> Limit {
    Limit {
        zone: z.clone(),
        burst: burst * 1000,
        delay: if delay == Limit::NODELAY {
            delay
        } else {
            delay * 1000
        },
    }
}

/// Where a key that stored `excess` stands against leaky-bucket limit `l`.
fn standing(l: &Limit, excess: u64) -> Standing {
    algorithm::leaky_standing(l.zone.policy.rate, l.burst, excess)
}

fn r2() -> Rate {
    Rate::per_second(2).unwrap()
}

/// What a request gets, in the terms of the §11 table.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Pass,
    Delay(u64),
    Reject(u64),
}

fn run(limits: &[Limit], key: &str, now: u64) -> Seen {
    match evaluate(limits, now, |_| Some(key.as_bytes())) {
        Outcome::Accepted { delay_ms: 0, .. } => Seen::Pass,
        Outcome::Accepted { delay_ms, .. } => Seen::Delay(delay_ms),
        Outcome::Rejected { excess, .. } => Seen::Reject(excess),
        o => panic!("unexpected {o:?}"),
    }
}

fn ten_at_once(burst: u64, delay: u64) -> Vec<Seen> {
    let z = zone("z", r2(), 1000);
    let limits = [limit(&z, burst, delay)];
    (0..10).map(|_| run(&limits, "k", T0)).collect()
}

#[test]
fn worked_example_no_burst() {
    use Seen::*;
    let got = ten_at_once(0, 0);
    assert_eq!(got[0], Pass);
    for s in &got[1..] {
        assert_eq!(*s, Reject(1000));
    }
}

#[test]
fn worked_example_burst5() {
    use Seen::*;
    let got = ten_at_once(5, 0);
    let want = [
        Pass,
        Delay(500),
        Delay(1000),
        Delay(1500),
        Delay(2000),
        Delay(2500),
        Reject(6000),
        Reject(6000),
        Reject(6000),
        Reject(6000),
    ];
    assert_eq!(got, want);
}

#[test]
fn worked_example_burst5_nodelay() {
    use Seen::*;
    let got = ten_at_once(5, Limit::NODELAY);
    assert_eq!(&got[..6], &[Pass, Pass, Pass, Pass, Pass, Pass]);
    assert_eq!(
        &got[6..],
        &[Reject(6000), Reject(6000), Reject(6000), Reject(6000)]
    );
}

#[test]
fn worked_example_burst5_delay2() {
    use Seen::*;
    let got = ten_at_once(5, 2);
    let want = [
        Pass,
        Pass,
        Pass,
        Delay(500),
        Delay(1000),
        Delay(1500),
        Reject(6000),
        Reject(6000),
        Reject(6000),
        Reject(6000),
    ];
    assert_eq!(got, want);
}

#[test]
fn thirty_per_minute_without_burst() {
    let z = zone("z", Rate::per_minute(30).unwrap(), 100);
    let limits = [limit(&z, 0, 0)];
    // 1.0 s apart: pass, reject (0.500, state unchanged), pass
    assert_eq!(run(&limits, "a", T0), Seen::Pass);
    assert_eq!(run(&limits, "a", T0 + 1000), Seen::Reject(500));
    assert_eq!(run(&limits, "a", T0 + 2000), Seen::Pass);
    // 2.0 s apart: all pass
    for i in 0..3 {
        assert_eq!(run(&limits, "b", T0 + i * 2000), Seen::Pass);
    }
    // 1999 ms: excess 0.001, rejected
    assert_eq!(run(&limits, "c", T0), Seen::Pass);
    assert_eq!(run(&limits, "c", T0 + 1999), Seen::Reject(1));
}

#[test]
fn a_millisecond_at_thirty_per_minute_leaks_nothing() {
    // The fraction lost when `last` moves: 500 milli-req/s over 1 ms is 0.
    let z = zone("z", Rate::per_minute(30).unwrap(), 100);
    let limits = [limit(&z, 5, Limit::NODELAY)];
    let Store::Memory(m) = &*z.store else {
        unreachable!()
    };
    for i in 0..4 {
        run(&limits, "a", T0 + i);
    }
    assert_eq!(m.peek(b"a").unwrap().value, 3000);
}

/// nginx-limit-req.md §3: `z_a` 2r/s burst=3 nodelay, then `z_b` 1r/s
/// burst=3; 10 simultaneous requests: 2–4 delayed 1000/2000/3000 ms by z_b,
/// the rest rejected by z_a at excess 4.000.
#[test]
fn two_limits_observation() {
    let za = zone("z_a", r2(), 100);
    let zb = zone("z_b", Rate::per_second(1).unwrap(), 100);
    let limits = [limit(&za, 3, Limit::NODELAY), limit(&zb, 3, 0)];
    let got: Vec<Outcome> = (0..10)
        .map(|_| evaluate(&limits, T0, |_| Some("k")))
        .collect();
    assert_eq!(
        got[0],
        Outcome::Accepted {
            delay_ms: 0,
            limit: 1,
            excess: 0,
            tightest: (1, standing(&limits[1], 0)),
        }
    );
    for (i, d) in [(1, 1000), (2, 2000), (3, 3000)] {
        assert_eq!(
            got[i],
            Outcome::Accepted {
                delay_ms: d,
                limit: 1,
                excess: d,
                tightest: (1, standing(&limits[1], d)),
            }
        );
    }
    for o in &got[4..] {
        assert!(
            matches!(
                o,
                Outcome::Rejected {
                    limit: 0,
                    excess: 4000,
                    ..
                }
            ),
            "{o:?}"
        );
    }
    // A rejection by z_a charged nothing anywhere.
    let Store::Memory(a) = &*za.store else {
        unreachable!()
    };
    let Store::Memory(b) = &*zb.store else {
        unreachable!()
    };
    assert_eq!(a.peek(b"k").unwrap().value, 3000);
    assert_eq!(b.peek(b"k").unwrap().value, 3000);
}

#[test]
fn rejection_by_a_later_limit_charges_nothing() {
    let za = zone("z_a", r2(), 100);
    let zb = zone("z_b", r2(), 100);
    let limits = [limit(&za, 10, Limit::NODELAY), limit(&zb, 0, 0)];
    assert!(matches!(
        evaluate(&limits, T0, |_| Some("k")),
        Outcome::Accepted { delay_ms: 0, .. }
    ));
    assert!(matches!(
        evaluate(&limits, T0, |_| Some("k")),
        Outcome::Rejected { limit: 1, .. }
    ));
    let Store::Memory(a) = &*za.store else {
        unreachable!()
    };
    // first request: held new node accounted from last = 0 → excess 0
    assert_eq!(a.peek(b"k").unwrap().value, 0);
}

#[test]
fn the_largest_delay_wins_strictly() {
    // Equal delays keep the later-evaluated (last) limit in the log.
    let za = zone("z_a", r2(), 100);
    let zb = zone("z_b", r2(), 100);
    let limits = [limit(&za, 5, 0), limit(&zb, 5, 0)];
    evaluate(&limits, T0, |_| Some("k"));
    // z_a's held new node stored 0 (last = 0); z_b's charged new node 0.
    match evaluate(&limits, T0, |_| Some("k")) {
        Outcome::Accepted {
            delay_ms, limit, ..
        } => {
            assert_eq!(delay_ms, 500);
            assert_eq!(limit, 1);
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn empty_keys_skip_their_limit() {
    let za = zone("z_a", r2(), 100);
    let zb = zone("z_b", r2(), 100);
    let limits = [limit(&za, 0, 0), limit(&zb, 0, 0)];
    assert_eq!(evaluate(&limits, T0, |_| None::<&[u8]>), Outcome::Unlimited);
    // Last key empty: the first limit is held, then charged by accounting.
    let keys = |i: usize| (i == 0).then_some("k");
    assert!(matches!(
        evaluate(&limits, T0, keys),
        Outcome::Accepted { delay_ms: 0, .. }
    ));
    assert!(matches!(
        evaluate(&limits, T0, keys),
        Outcome::Rejected {
            limit: 0,
            excess: 1000,
            ..
        }
    ));
}

#[test]
fn retry_wait_is_until_acceptance() {
    let z = zone("z", Rate::per_minute(6).unwrap(), 100);
    let limits = [limit(&z, 0, 0)];
    assert_eq!(run(&limits, "k", T0), Seen::Pass);
    match evaluate(&limits, T0 + 10, |_| Some("k")) {
        Outcome::Rejected { wait_ms, .. } => assert_eq!(wait_ms, 10_000 - 10),
        o => panic!("{o:?}"),
    }
    assert!(matches!(run(&limits, "k", T0 + 9_999), Seen::Reject(_)));
    assert_eq!(run(&limits, "k", T0 + 10_000), Seen::Pass);
}

#[test]
fn expiry_removes_at_most_two_idle_drained_states() {
    let m = MemoryZone::with_capacity(100);
    let r = r2();
    for k in 0..5u8 {
        m.lookup(&[k], T0, &Policy::leaky(r), 0, true);
    }
    assert_eq!(m.len(), 5);
    // 59.999 s later nothing is old enough
    m.lookup(b"new1", T0 + 59_999, &Policy::leaky(r), 0, true);
    assert_eq!(m.len(), 6);
    // a minute later: each new state removes two of the idle ones
    m.lookup(b"new2", T0 + 60_000, &Policy::leaky(r), 0, true);
    assert_eq!(m.len(), 5);
    m.lookup(b"new3", T0 + 60_000, &Policy::leaky(r), 0, true);
    assert_eq!(m.len(), 4);
    assert!(m.peek(&[0]).is_none() && m.peek(&[3]).is_none());
    assert!(m.peek(&[4]).is_some());
    assert_eq!(m.evictions(), 0);
}

#[test]
fn expiry_keeps_states_with_excess() {
    let m = MemoryZone::with_capacity(100);
    let r = Rate::per_minute(1).unwrap(); // 16 milli-req/s: 1000 needs 62.5 s
    m.lookup(b"a", T0, &Policy::leaky(r), 5000, true);
    m.lookup(b"a", T0, &Policy::leaky(r), 5000, true); // excess 1000
    m.lookup(b"b", T0 + 61_000, &Policy::leaky(r), 0, true);
    assert!(m.peek(b"a").is_some(), "976 of 1000 leaked: kept");
    m.lookup(b"c", T0 + 62_500, &Policy::leaky(r), 0, true);
    assert!(m.peek(b"a").is_none(), "fully leaked: expired");
}

#[test]
fn a_full_zone_evicts_its_least_recent_state() {
    let m = MemoryZone::with_capacity(3);
    let r = r2();
    for k in [b"a", b"b", b"c"] {
        m.lookup(k, T0, &Policy::leaky(r), 5000, true);
    }
    // touch "a" (even a rejected lookup moves it to the LRU head)
    m.lookup(b"a", T0, &Policy::leaky(r), 5000, true);
    m.lookup(b"d", T0, &Policy::leaky(r), 5000, true);
    assert!(m.peek(b"b").is_none(), "b was the least recently used");
    assert!(m.peek(b"a").is_some() && m.peek(b"c").is_some() && m.peek(b"d").is_some());
    assert_eq!(m.evictions(), 1);
    assert_eq!(m.len(), 3);
}

#[test]
fn held_states_are_never_evicted() {
    let m = MemoryZone::with_capacity(1);
    let r = r2();
    let Lookup::Held { held, .. } = m.lookup(b"a", T0, &Policy::leaky(r), 0, false) else {
        panic!()
    };
    assert_eq!(
        m.lookup(b"b", T0, &Policy::leaky(r), 0, true),
        Lookup::NoMemory
    );
    m.account(held, T0, &Policy::leaky(r), 0);
    assert!(matches!(
        m.lookup(b"b", T0, &Policy::leaky(r), 0, true),
        Lookup::Charged { .. }
    ));
    assert!(m.peek(b"a").is_none());
}

#[test]
fn zone_size_gives_capacity() {
    assert_eq!(MemoryZone::with_size(1024 * 1024).capacity(), 16_384);
    assert_eq!(MemoryZone::with_size(32 * 1024).capacity(), 512);
}

proptest! {
    #![proptest_config(crate::limiter::proptest_config(512))]

    /// From a fresh key exactly burst+1 requests pass at one instant.
    #[test]
    fn burst_plus_one_at_one_instant(burst in 0u64..50, rate in 1u64..100, per_min in any::<bool>(), nodelay in any::<bool>()) {
        let rate = if per_min { Rate::per_minute(rate) } else { Rate::per_second(rate) };
        let Some(rate) = rate else { return Ok(()) };
        let z = zone("z", rate, 10);
        let limits = [limit(&z, burst, if nodelay { Limit::NODELAY } else { 0 })];
        let passed = (0..burst + 10)
            .filter(|_| matches!(evaluate(&limits, T0, |_| Some("k")), Outcome::Accepted { .. }))
            .count() as u64;
        prop_assert_eq!(passed, burst + 1);
    }

    /// Over any interval of t ms, at most burst + 1 + rate·t/1000 are admitted.
    #[test]
    fn admissions_are_bounded_by_the_rate(
        burst in 0u64..10,
        rate_milli in 16u64..5000,
        gaps in proptest::collection::vec(0u64..700, 1..200),
    ) {
        let rate = Rate::from_milli(rate_milli).unwrap();
        let z = zone("z", rate, 10);
        let limits = [limit(&z, burst, Limit::NODELAY)];
        let mut now = T0;
        let mut admitted = Vec::new();
        for g in gaps {
            now += g;
            if matches!(evaluate(&limits, now, |_| Some("k")), Outcome::Accepted { .. }) {
                admitted.push(now);
            }
        }
        for i in 0..admitted.len() {
            for j in i..admitted.len() {
                let t = admitted[j] - admitted[i];
                let count = (j - i + 1) as u64;
                // admitted in [t_i, t_j]: bounded by burst+1 plus what leaked
                prop_assert!(
                    count * 1000 <= (burst + 1) * 1000 + rate_milli * t / 1000,
                    "{} admitted in {} ms (burst {}, rate {})", count, t, burst, rate_milli
                );
            }
        }
    }
}

#[test]
fn a_state_is_48_bytes() {
    assert_eq!(memory::node_size(), 48);
}

/// nginx needs 128 bytes per state; sluice's budget is 64 (issue: at least
/// 16k IPv4 states per 1m). Fill a 1m zone with distinct IPv4 keys and count
/// what its structures occupy.
#[test]
fn a_1m_zone_holds_16k_ipv4_states_in_64_bytes_each() {
    let m = MemoryZone::with_size(1 << 20);
    let r = r2();
    let mut stored = 0;
    for i in 0..m.capacity() as u32 {
        // Fill without expiry or eviction: every key gets excess.
        if matches!(
            m.lookup(&i.to_be_bytes(), T0, &Policy::leaky(r), 0, true),
            Lookup::Charged { .. }
        ) {
            stored += 1;
        }
    }
    assert_eq!(m.len(), 16_384);
    assert_eq!(stored, 16_384);
    assert_eq!(m.evictions(), 0);
    let per_state = m.memory_bytes() as f64 / m.len() as f64;
    assert!(per_state <= 64.0, "{per_state:.2} bytes per state");
    eprintln!(
        "1m zone: {} IPv4 states, {per_state:.2} bytes each",
        m.len()
    );
}

#[test]
fn quota_arithmetic() {
    let z = zone("z", r2(), 10);
    let l = limit(&z, 5, Limit::NODELAY);
    assert_eq!(l.quota(), 6);
    let st = |l: &Limit, e| {
        let s = standing(l, e);
        (s.remaining, s.reset_ms)
    };
    // After the first request of a fresh key: 5 more at once, six at once
    // again after 500 ms.
    assert_eq!(st(&l, 0), (5, 500));
    // After the sixth (excess 5000): none left; one more after 500 ms.
    assert_eq!(st(&l, 5000), (0, 500));
    assert_eq!(st(&l, 2500), (2, 250));
    let no_burst = limit(&z, 0, 0);
    assert_eq!(no_burst.quota(), 1);
    assert_eq!(st(&no_burst, 0), (0, 500));
}

/// nginx decides a request's limits without interruption; so does sluice,
/// even with requests decided on several threads at once: the two-limit
/// observation holds under concurrency, every rejection by z_a.
#[test]
fn multi_limit_decisions_are_atomic_across_threads() {
    for _ in 0..50 {
        let za = zone("z_a", r2(), 100);
        let zb = zone("z_b", Rate::per_second(1).unwrap(), 100);
        let limits = Arc::new([limit(&za, 3, Limit::NODELAY), limit(&zb, 3, 0)]);
        let barrier = Arc::new(std::sync::Barrier::new(10));
        let outcomes: Vec<Outcome> = (0..10)
            .map(|_| {
                let (limits, barrier) = (limits.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    evaluate(&limits[..], T0, |_| Some("k"))
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let accepted = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Accepted { .. }))
            .count();
        assert_eq!(accepted, 4, "{outcomes:?}");
        for o in &outcomes {
            if let Outcome::Rejected { limit, excess, .. } = o {
                assert_eq!((*limit, *excess), (0, 4000), "{outcomes:?}");
            }
        }
    }
}

/// A state held by a request still deciding (another limit in Redis, say)
/// counts as charged for other requests: they cannot all pass on the state
/// it had before (burst 0: the second is rejected while the first holds).
#[test]
fn held_states_count_as_charged_for_other_requests() {
    let m = MemoryZone::with_capacity(100);
    let r = r2();
    m.lookup(b"k", T0, &Policy::leaky(r), 0, true);
    // 600 ms later one request may pass; it holds the state…
    let Lookup::Held { held, .. } = m.lookup(b"k", T0 + 600, &Policy::leaky(r), 0, false) else {
        panic!("the first passes")
    };
    // …and a concurrent one sees it as charged.
    assert!(matches!(
        m.lookup(b"k", T0 + 600, &Policy::leaky(r), 0, false),
        Lookup::Busy { excess: 1000, .. }
    ));
    m.release(held);
    assert!(matches!(
        m.lookup(b"k", T0 + 600, &Policy::leaky(r), 0, true),
        Lookup::Charged { excess: 0, .. }
    ));
}

/// `size` bounds memory whatever the keys: a long key costs its bytes.
#[test]
fn long_keys_cost_their_bytes_against_the_size() {
    let m = MemoryZone::with_capacity(512); // a 32k zone
    let r = r2();
    for i in 0..2000u32 {
        let key = format!("{i:08}{}", "x".repeat(4000));
        assert!(matches!(
            m.lookup(key.as_bytes(), T0, &Policy::leaky(r), 5000, true),
            Lookup::Charged { .. }
        ));
    }
    // 4 KB keys cost 64 states each: 8 of them fill 512.
    assert!(m.len() <= 8, "{} long keys kept", m.len());
    assert!(
        m.memory_bytes() < 512 * 64 + 64 * 1024,
        "{} bytes",
        m.memory_bytes()
    );
    assert!(m.evictions() > 0);
}

/// A huge `size` costs nothing until states come (found by the config
/// fuzzer: a "10000000000m" zone took 7 GB at start, and growing).
#[test]
fn a_huge_zone_allocates_as_it_fills() {
    let m = MemoryZone::with_size(1 << 50);
    assert!(
        m.memory_bytes() < 4 << 20,
        "{} bytes before any state",
        m.memory_bytes()
    );
    let r = r2();
    for i in 0..10_000u32 {
        m.lookup(&i.to_be_bytes(), T0, &Policy::leaky(r), 0, true);
    }
    assert_eq!(m.len(), 10_000);
}
