//! The nginx vectors (nginx-limit-req.md §11 and §3) as one table that drives every backend:
//! memory, Redis, and locations mixing both, in one slot or several; plus random sequences
//! compared decision by decision with the memory core.

use super::layouts::{Layout, same_everywhere};
use super::*;

/// A sequence of decisions on one location: its zones, its limits, and per
/// step the time offset, the key of each limit, and nginx's outcome.
struct Vector {
    name: &'static str,
    /// (name, rate in milli-requests per second)
    zones: &'static [(&'static str, u64)],
    /// (zone index, burst, delay) — as in nginx, `delay` in requests;
    /// `NODELAY` for nodelay.
    limits: &'static [(usize, u64, u64)],
    steps: Vec<(u64, Vec<Option<&'static str>>, Outcome)>,
}

/// The vectors state delay, limit and excess; `tightest` (for RateLimit
/// headers) is compared across stores by the random-sequence test instead.
fn pass(delay_ms: u64, limit: usize, excess: u64) -> Outcome {
    Outcome::Accepted {
        delay_ms,
        limit,
        excess,
        tightest: (0, Default::default()),
    }
}

fn without_tightest(o: Outcome) -> Outcome {
    match o {
        Outcome::Accepted {
            delay_ms,
            limit,
            excess,
            ..
        } => pass(delay_ms, limit, excess),
        o => o,
    }
}

fn reject(limit: usize, excess: u64, wait_ms: u64) -> Outcome {
    Outcome::Rejected {
        limit,
        excess,
        wait_ms,
    }
}

fn k(s: &'static str) -> Vec<Option<&'static str>> {
    vec![Some(s)]
}

fn ten_at_once(name: &'static str, burst: u64, delay: u64, want: Vec<Outcome>) -> Vector {
    Vector {
        name,
        zones: &[("z", 2000)],
        limits: match (burst, delay) {
            (0, 0) => &[(0, 0, 0)],
            (5, 0) => &[(0, 5, 0)],
            (5, NODELAY) => &[(0, 5, NODELAY)],
            (5, 2) => &[(0, 5, 2)],
            _ => unreachable!(),
        },
        steps: want.into_iter().map(|o| (0, k("k"), o)).collect(),
    }
}

/// nginx-limit-req.md §11 and §3, with the excess and the wait each
/// outcome carries.
fn vectors() -> Vec<Vector> {
    let mut v = Vec::new();
    // rate=2r/s, 10 requests in the same millisecond
    let mut no_burst = vec![pass(0, 0, 0)];
    no_burst.extend((0..9).map(|_| reject(0, 1000, 500)));
    v.push(ten_at_once("no burst", 0, 0, no_burst));
    let mut burst5: Vec<Outcome> = (0..6).map(|i| pass(i * 500, 0, i * 1000)).collect();
    burst5.extend((0..4).map(|_| reject(0, 6000, 500)));
    v.push(ten_at_once("burst=5", 5, 0, burst5));
    let mut nodelay: Vec<Outcome> = (0..6).map(|i| pass(0, 0, i * 1000)).collect();
    nodelay.extend((0..4).map(|_| reject(0, 6000, 500)));
    v.push(ten_at_once("burst=5 nodelay", 5, NODELAY, nodelay));
    let mut delay2: Vec<Outcome> = (0..6)
        .map(|i: u64| pass(i.saturating_sub(2) * 500, 0, i * 1000))
        .collect();
    delay2.extend((0..4).map(|_| reject(0, 6000, 500)));
    v.push(ten_at_once("burst=5 delay=2", 5, 2, delay2));

    // rate=30r/m, no burst
    v.push(Vector {
        name: "30r/m: 1.0 s apart, 2.0 s apart, 1999 ms",
        zones: &[("z", 500)],
        limits: &[(0, 0, 0)],
        steps: vec![
            (0, k("a"), pass(0, 0, 0)),
            (1000, k("a"), reject(0, 500, 1000)),
            (2000, k("a"), pass(0, 0, 0)),
            (10_000, k("b"), pass(0, 0, 0)),
            (12_000, k("b"), pass(0, 0, 0)),
            (14_000, k("b"), pass(0, 0, 0)),
            (20_000, k("c"), pass(0, 0, 0)),
            (21_999, k("c"), reject(0, 1, 1)),
        ],
    });
    // A millisecond at 30r/m leaks nothing: the fraction is lost as `last` moves.
    v.push(Vector {
        name: "30r/m: 1 ms steps leak nothing",
        zones: &[("z", 500)],
        limits: &[(0, 5, NODELAY)],
        steps: (0..6)
            .map(|i| (i, k("a"), pass(0, 0, i * 1000)))
            .chain([(6, k("a"), reject(0, 6000, 2000 - 1))])
            .collect(),
    });
    // 6r/m: Retry-After is the time until acceptance.
    v.push(Vector {
        name: "6r/m: wait until accepted",
        zones: &[("z", 100)],
        limits: &[(0, 0, 0)],
        steps: vec![
            (0, k("k"), pass(0, 0, 0)),
            (10, k("k"), reject(0, 999, 9990)),
            (9_999, k("k"), reject(0, 1, 1)),
            (10_000, k("k"), pass(0, 0, 0)),
        ],
    });
    // The two-limit observation: z_a 2r/s burst=3 nodelay, z_b 1r/s burst=3.
    let mut two = vec![(0, vec![Some("k"); 2], pass(0, 1, 0))];
    for d in [1000, 2000, 3000] {
        two.push((0, vec![Some("k"); 2], pass(d, 1, d)));
    }
    for _ in 4..10 {
        two.push((0, vec![Some("k"); 2], reject(0, 4000, 500)));
    }
    v.push(Vector {
        name: "two limits: delayed by z_b, rejected by z_a",
        zones: &[("z_a", 2000), ("z_b", 1000)],
        limits: &[(0, 3, NODELAY), (1, 3, 0)],
        steps: two,
    });
    // A rejection by a later limit charges no earlier one: after it, z_a
    // (burst=10, delaying) is still empty.
    let mut later = vec![(0, vec![Some("k"); 2], pass(0, 1, 0))];
    for _ in 0..4 {
        later.push((0, vec![Some("k"); 2], reject(1, 1000, 500)));
    }
    later.push((500, vec![Some("k"); 2], pass(0, 1, 0)));
    later.push((500, vec![Some("k"); 2], reject(1, 1000, 500)));
    later.push((1000, vec![Some("k"); 2], pass(0, 1, 0)));
    v.push(Vector {
        name: "a later rejection charges nothing",
        zones: &[("z_a", 2000), ("z_b", 2000)],
        limits: &[(0, 10, 0), (1, 0, 0)],
        steps: later,
    });
    // Equal delays: the later limit is named.
    v.push(Vector {
        name: "the largest delay wins strictly",
        zones: &[("z_a", 2000), ("z_b", 2000)],
        limits: &[(0, 5, 0), (1, 5, 0)],
        steps: vec![
            (0, vec![Some("k"); 2], pass(0, 1, 0)),
            (0, vec![Some("k"); 2], pass(500, 1, 1000)),
        ],
    });
    // z_a is slower: its delay is larger and it is named.
    v.push(Vector {
        name: "the earlier limit gives the delay",
        zones: &[("z_a", 1000), ("z_b", 2000)],
        limits: &[(0, 5, 0), (1, 5, 0)],
        steps: vec![
            (0, vec![Some("k"); 2], pass(0, 1, 0)),
            (0, vec![Some("k"); 2], pass(1000, 0, 1000)),
            (0, vec![Some("k"); 2], pass(2000, 0, 2000)),
        ],
    });
    // Empty keys skip their limit; all empty: no decision.
    v.push(Vector {
        name: "empty keys",
        zones: &[("z_a", 2000), ("z_b", 2000)],
        limits: &[(0, 0, 0), (1, 0, 0)],
        steps: vec![
            (0, vec![None, None], Outcome::Unlimited),
            (0, vec![Some("k"), None], pass(0, 1, 0)),
            (0, vec![Some("k"), None], reject(0, 1000, 500)),
            (0, vec![None, Some("k")], pass(0, 1, 0)),
            (0, vec![None, Some("k")], reject(1, 1000, 500)),
        ],
    });
    v
}

fn build(v: &Vector, layout: Layout, b: Option<&Arc<RedisBackend>>) -> Vec<Limit> {
    let zones: Vec<Arc<ZoneRef>> = v
        .zones
        .iter()
        .enumerate()
        .map(|(i, (name, rate))| {
            let store = if layout.redis(i) {
                Store::Redis(RedisZone::new(b.unwrap().clone(), name, 1 << 20))
            } else {
                Store::Memory(MemoryZone::with_size(1 << 20))
            };
            Arc::new(ZoneRef {
                name: (*name).into(),
                policy: Policy::leaky(Rate::from_milli(*rate).unwrap()),
                store: Arc::new(store),
                counts: Default::default(),
                reject_cache: None,
            })
        })
        .collect();
    v.limits
        .iter()
        .map(|&(z, burst, delay)| Limit {
            zone: zones[z].clone(),
            burst: burst * 1000,
            delay: if delay == NODELAY {
                delay
            } else {
                delay * 1000
            },
        })
        .collect()
}

async fn run_vectors(layout: Layout) {
    let redis = (layout != Layout::Memory).then(RedisServer::start);
    for (n, v) in vectors().iter().enumerate() {
        let b = redis.as_ref().map(|r| {
            backend(
                &r.url(),
                TimeSource::Caller,
                &format!("v{n}"),
                OnError::Deny,
            )
        });
        let limits = build(v, layout, b.as_ref());
        for (step, (t, keys, want)) in v.steps.iter().enumerate() {
            let keys: Vec<Option<String>> = keys
                .iter()
                .enumerate()
                .map(|(i, key)| {
                    key.map(|key| match layout {
                        Layout::RedisSplitSlots => format!("{key}#{i}"),
                        _ => key.to_string(),
                    })
                })
                .collect();
            let got = without_tightest(limiter::decide(&limits, T0 + t, |i| keys[i].clone()).await);
            assert_eq!(
                &got, want,
                "{layout:?}: vector \"{}\", step {step} (t+{t} ms)",
                v.name
            );
        }
    }
}

#[tokio::test]
async fn vectors_memory() {
    run_vectors(Layout::Memory).await;
}

#[tokio::test]
async fn vectors_redis() {
    run_vectors(Layout::Redis).await;
}

#[tokio::test]
async fn vectors_mixed_memory_then_redis() {
    run_vectors(Layout::MemoryThenRedis).await;
}

#[tokio::test]
async fn vectors_mixed_redis_then_memory() {
    run_vectors(Layout::RedisThenMemory).await;
}

#[tokio::test]
async fn vectors_redis_in_several_slots() {
    let s = |i: usize| key_slot(format!("x:{{{}}}", hex(format!("k#{i}").as_bytes())).as_bytes());
    assert_ne!(s(0), s(1), "the split keys must fall in different slots");
    run_vectors(Layout::RedisSplitSlots).await;
}

/// Random locations and request sequences: every layout decides exactly as
/// the memory core, request by request.
#[tokio::test]
async fn random_sequences_match_the_memory_core() {
    let redis = RedisServer::start();
    let mut rng = Lcg(0x5eed);
    for case in 0..12 {
        let nzones = 1 + rng.next(3) as usize;
        let zones: Vec<(&'static str, u64)> = (0..nzones)
            .map(|i| {
                let rate = [16, 100, 500, 1000, 2000, 1666, 116][rng.next(7) as usize];
                (["z0", "z1", "z2"][i], rate)
            })
            .collect();
        let limits: Vec<(usize, u64, u64)> = (0..nzones)
            .map(|z| {
                let burst = rng.next(6);
                let delay = match rng.next(3) {
                    0 => 0,
                    1 => NODELAY,
                    _ => 1 + rng.next(4),
                };
                (z, burst, delay)
            })
            .collect();
        let v = Vector {
            name: "random",
            zones: Box::leak(zones.into_boxed_slice()),
            limits: Box::leak(limits.into_boxed_slice()),
            steps: vec![],
        };
        let layouts = [
            Layout::Redis,
            Layout::MemoryThenRedis,
            Layout::RedisThenMemory,
            Layout::RedisSplitSlots,
        ];
        let mem = build(&v, Layout::Memory, None);
        let mem_split = build(&v, Layout::Memory, None);
        let others: Vec<(Layout, Vec<Limit>)> = layouts
            .iter()
            .map(|&l| {
                let b = backend(
                    &redis.url(),
                    TimeSource::Caller,
                    &format!("r{case}{l:?}"),
                    OnError::Deny,
                );
                (l, build(&v, l, Some(&b)))
            })
            .collect();
        let mut now = T0;
        for step in 0..150 {
            now += [0, 0, 1, 7, 120, 499, 500, 2000][rng.next(8) as usize];
            let key = ["a", "b", "c"][rng.next(3) as usize];
            let keys: Vec<Option<String>> = (0..nzones)
                .map(|_| (rng.next(8) != 0).then(|| key.to_string()))
                .collect();
            let what = format!(
                "case {case} step {step}: zones {:?} limits {:?}",
                v.zones, v.limits
            );
            same_everywhere(&mem, &mem_split, &others, &keys, now, &what).await;
        }
    }
}
