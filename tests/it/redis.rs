//! Zones in Redis (SPEC §5), against a real `redis-server` each test starts.
//!
//! - The nginx vectors (nginx-limit-req.md §11 and §3) as one table that
//!   drives every backend: memory, Redis, and locations mixing both, in one
//!   slot or several; plus random sequences compared decision by decision.
//! - Two sluice processes sharing a zone admit exactly what one would.
//! - Redis killed, frozen, or down at startup: each `on_error` policy, no
//!   request held past `timeout`, recovery without restart.
//! - `[redis]` configuration errors, located.

#[path = "redis_support.rs"]
mod support;

use sluice::limiter::redis::{TimeSource, key_slot};
use sluice::limiter::{
    self, Limit, MemoryZone, OnError, Outcome, Rate, RedisBackend, RedisConfig, RedisZone, Store,
    ZoneRef,
};
use std::sync::Arc;
use std::time::Duration;
use support::{RedisServer, Sluice, TlsFiles, get, get_async, poll};

const T0: u64 = 1_000_000_000;
const NODELAY: u64 = Limit::NODELAY;

// === the vectors ===

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
        tightest: (0, 0),
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

/// Where each zone of a vector lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Memory,
    Redis,
    /// Even zones in memory, odd in Redis.
    MemoryThenRedis,
    /// Even zones in Redis, odd in memory.
    RedisThenMemory,
    /// All in Redis, each limit's key different so that they fall in
    /// different slots (one script call per limit, nginx's hold protocol).
    RedisSplitSlots,
}

impl Layout {
    fn redis(self, zone: usize) -> bool {
        match self {
            Layout::Memory => false,
            Layout::Redis | Layout::RedisSplitSlots => true,
            Layout::MemoryThenRedis => zone % 2 == 1,
            Layout::RedisThenMemory => zone % 2 == 0,
        }
    }
}

fn backend(url: &str, time: TimeSource, prefix: &str, on_error: OnError) -> Arc<RedisBackend> {
    RedisBackend::with_time_source(
        RedisConfig {
            url: url.to_string(),
            // generous: a loaded test machine must not turn into on_error
            timeout: Duration::from_secs(5),
            on_error,
            prefix: prefix.to_string(),
            ..Default::default()
        },
        time,
    )
    .unwrap()
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
                rate: Rate::from_milli(*rate).unwrap(),
                store: Arc::new(store),
                counts: Default::default(),
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

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A small deterministic generator (the tests must repeat exactly).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
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
            let split: Vec<Option<String>> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| k.as_ref().map(|k| format!("{k}#{i}")))
                .collect();
            let want = limiter::decide(&mem, now, |i| keys[i].clone()).await;
            let want_split = limiter::decide(&mem_split, now, |i| split[i].clone()).await;
            for (layout, limits) in &others {
                let (keys, want) = match layout {
                    Layout::RedisSplitSlots => (&split, &want_split),
                    _ => (&keys, &want),
                };
                let got = limiter::decide(limits, now, |i| keys[i].clone()).await;
                assert_eq!(
                    &got, want,
                    "case {case} step {step} {layout:?}: zones {:?} limits {:?} keys {keys:?}",
                    v.zones, v.limits
                );
            }
        }
    }
}

// === the script on the server's clock ===

#[tokio::test]
async fn the_server_clock_keys_and_expiry() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Server, "sluice", OnError::Deny);
    let zone = Arc::new(ZoneRef {
        name: "z".into(),
        rate: Rate::per_second(2).unwrap(),
        store: Arc::new(Store::Redis(RedisZone::new(b.clone(), "z", 1 << 20))),
        counts: Default::default(),
    });
    let limits = [Limit {
        zone,
        burst: 5000,
        delay: NODELAY,
    }];
    let ip = [127u8, 0, 0, 1];
    let mut passed = 0;
    for _ in 0..10 {
        match limiter::decide(&limits, 0, |_| Some(ip)).await {
            Outcome::Accepted { .. } => passed += 1,
            Outcome::Rejected { wait_ms, .. } => assert!(wait_ms <= 500, "{wait_ms}"),
            o => panic!("{o:?}"),
        }
    }
    assert_eq!(passed, 6, "burst=5 admits 6 at once");

    let mut c = redis.client();
    let key = "sluice:z:{7f000001}";
    let e: u64 = redis::cmd("HGET").arg(key).arg("e").query(&mut c).unwrap();
    assert!((4900..=5000).contains(&e), "stored excess {e}");
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(&mut c).unwrap();
    assert!(
        (55_000..=60_000).contains(&ttl),
        "at least nginx's minute: {ttl}"
    );

    // EVALSHA after SCRIPT FLUSH: the script is loaded again (NOSCRIPT).
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
    let o = limiter::decide(&limits, 0, |_| Some(ip)).await;
    assert!(matches!(o, Outcome::Rejected { .. }), "{o:?}");
}

#[tokio::test]
async fn slow_zones_keep_their_state_until_it_has_drained() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Caller, "p", OnError::Deny);
    // 1r/m (16 milli-req/s), burst 5: after 6 requests the excess is 5000;
    // a request finds it empty after (5000+1000)*1000/16 = 375 s.
    let zone = Arc::new(ZoneRef {
        name: "slow".into(),
        rate: Rate::per_minute(1).unwrap(),
        store: Arc::new(Store::Redis(RedisZone::new(b, "slow", 1 << 20))),
        counts: Default::default(),
    });
    let limits = [Limit {
        zone,
        burst: 5000,
        delay: NODELAY,
    }];
    for _ in 0..6 {
        limiter::decide(&limits, T0, |_| Some("k")).await;
    }
    let mut c = redis.client();
    let ttl: i64 = redis::cmd("PTTL").arg("p:slow:{6b}").query(&mut c).unwrap();
    assert!((375_000..=376_001).contains(&ttl), "{ttl}");
}

// === several instances ===

fn shared_zone_config(redis_url: &str, backend: &str) -> String {
    format!(
        r#"
limit_req_status = 429

[redis]
url = "{redis_url}"
timeout = "2s"
on_error = "deny"

[zones.shared]
key     = "$http_x_run"
size    = "1m"
rate    = "1r/m"
backend = "{backend}"

[[servers]]
listen = "127.0.0.1:{{PORT}}"

[[servers.locations]]
path      = "/"
limit_req = {{ zone = "shared", burst = 9, nodelay = true }}
return    = {{ status = 200, body = "ok\n" }}
"#
    )
}

/// 50 concurrent clients × 4 requests spread over the instances; the
/// statuses seen.
async fn race(addrs: &[std::net::SocketAddr], run: &str) -> (usize, usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..50usize {
        let addrs = addrs.to_vec();
        let run = run.to_string();
        tasks.spawn(async move {
            let mut seen = Vec::new();
            for j in 0..4 {
                let addr = addrs[(c + j) % addrs.len()];
                seen.push(get_async(addr, "/", &[("X-Run", &run)]).await.status);
            }
            seen
        });
    }
    let mut ok = 0;
    let mut limited = 0;
    while let Some(r) = tasks.join_next().await {
        for s in r.unwrap() {
            match s {
                200 => ok += 1,
                429 => limited += 1,
                other => panic!("unexpected status {other}"),
            }
        }
    }
    (ok, limited)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_admit_exactly_what_one_would() {
    let redis = RedisServer::start();
    let config = shared_zone_config(&redis.url(), "redis");
    let a = Sluice::start(&config);
    let b = Sluice::start(&config);
    for run in 1..=3 {
        let (ok, limited) = race(&[a.addr, b.addr], &format!("run-{run}")).await;
        assert_eq!(
            (ok, limited),
            (10, 190),
            "run {run}: burst=9 nodelay admits 10 in total"
        );
    }
    // The control: the same zone in memory admits 10 per instance.
    let config = shared_zone_config(&redis.url(), "memory");
    let a = Sluice::start(&config);
    let b = Sluice::start(&config);
    assert_eq!(race(&[a.addr, b.addr], "control").await, (20, 180));
}

// === failures ===

fn policy_config(redis_url: &str, policy: &str) -> String {
    format!(
        r#"
limit_req_status = 429

[redis]
url      = "{redis_url}"
timeout  = "50ms"
on_error = "{policy}"
prefix   = "t"

[zones.z]
key     = "$http_x_key"
size    = "1m"
rate    = "1r/m"
backend = "redis"

[[servers]]
listen = "127.0.0.1:{{PORT}}"

[[servers.locations]]
path      = "/"
limit_req = {{ zone = "z" }}
return    = {{ status = 200, body = "ok\n" }}
"#
    )
}

/// Two requests with key `key`: their statuses. Each must be answered well
/// within the timeout plus the proxy's own time.
fn twice(s: &Sluice, key: &str) -> (u16, u16) {
    let a = get(s.addr, "/", &[("X-Key", key)]);
    let b = get(s.addr, "/", &[("X-Key", key)]);
    for r in [&a, &b] {
        assert!(
            r.took < Duration::from_millis(1000),
            "a request took {:?}",
            r.took
        );
    }
    (a.status, b.status)
}

fn key_in_redis(redis: &RedisServer, key: &str) -> bool {
    let mut c = redis.client();
    redis::cmd("EXISTS")
        .arg(format!("t:z:{{{}}}", hex(key.as_bytes())))
        .query::<i64>(&mut c)
        .unwrap()
        == 1
}

/// Limited through Redis, then Redis killed (each policy), then frozen (each
/// request still bounded by the timeout), then back on the same port.
fn outage(policy: &str) {
    let mut redis = RedisServer::start();
    let mut s = Sluice::start(&policy_config(&redis.url(), policy));
    assert_eq!(twice(&s, "before"), (200, 429));
    assert!(key_in_redis(&redis, "before"));
    // Retry-After from the Redis bucket: 1r/m leaks one request in 62.5 s.
    let r = get(s.addr, "/", &[("X-Key", "before")]);
    assert_eq!((r.status, r.header("retry-after")), (429, Some("63")));

    redis.kill();
    let during = match policy {
        // fail open: even the key limited in Redis passes
        "allow" => {
            assert_eq!(twice(&s, "before"), (200, 200));
            assert_eq!(twice(&s, "new"), (200, 200));
            "allow"
        }
        // fail closed, without Retry-After (no bucket to compute it from)
        "deny" => {
            let r = get(s.addr, "/", &[("X-Key", "new")]);
            assert_eq!(r.status, 429);
            assert_eq!(r.header("retry-after"), None);
            assert_eq!(twice(&s, "new"), (429, 429));
            "deny"
        }
        // per-instance limiting: a fresh bucket here, then limited
        "local" => {
            assert_eq!(twice(&s, "before"), (200, 429));
            assert_eq!(twice(&s, "new"), (200, 429));
            "local"
        }
        _ => unreachable!(),
    };
    assert!(s.alive(), "sluice died:\n{}", s.log());
    let log = s.log();
    assert!(
        log.contains("redis error in limit_req zone \"z\"")
            && log.contains(&format!("on_error={during}")),
        "the failure is logged:\n{log}"
    );

    redis.restart();
    // Recovery without restart: requests are decided in Redis again.
    let mut n = 0;
    poll("decisions in Redis again", Duration::from_secs(20), || {
        n += 1;
        let key = format!("after-{n}");
        let _ = get(s.addr, "/", &[("X-Key", &key)]);
        key_in_redis(&redis, &key).then_some(())
    });
    assert_eq!(twice(&s, "fresh"), (200, 429));
    assert!(s.log().contains("answers again"), "{}", s.log());

    // A Redis that accepts connections but does not answer: each request is
    // decided by on_error within the timeout, never held.
    redis.signal("-STOP");
    for i in 0..5 {
        let r = get(s.addr, "/", &[("X-Key", &format!("frozen-{i}"))]);
        assert!(r.took < Duration::from_millis(500), "{:?}", r.took);
        let want = if policy == "deny" { 429 } else { 200 };
        assert_eq!(r.status, want, "{policy} while frozen");
    }
    redis.signal("-CONT");
    assert!(s.alive());
}

#[test]
fn outage_allow() {
    outage("allow");
}

#[test]
fn outage_deny() {
    outage("deny");
}

#[test]
fn outage_local() {
    outage("local");
}

#[test]
fn starts_while_redis_is_down_and_connects_later() {
    // A port with nothing on it yet.
    let port = support::free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let s = Sluice::start(&policy_config(&url, "local"));
    let r = get(s.addr, "/", &[("X-Key", "a")]);
    assert_eq!(r.status, 200);
    assert!(r.took < Duration::from_millis(1000), "{:?}", r.took);
    poll("the startup warning", Duration::from_secs(10), || {
        s.log().contains("is not reachable yet").then_some(())
    });

    // Now start Redis on that port.
    let redis = RedisServer::start_on(port);
    let mut n = 0;
    poll("sluice to use Redis", Duration::from_secs(20), || {
        n += 1;
        let key = format!("late-{n}");
        let _ = get(s.addr, "/", &[("X-Key", &key)]);
        key_in_redis(&redis, &key).then_some(())
    });
}

// === TLS ===

fn tls_config(port: u16, certs: &TlsFiles, with_ca: bool) -> String {
    let p = |f: &str| certs.dir.path().join(f).display().to_string();
    let ca = if with_ca {
        format!("tls_ca = \"{}\"", p("ca.crt"))
    } else {
        String::new()
    };
    format!(
        r#"
limit_req_status = 429

[redis]
url      = "rediss://127.0.0.1:{port}"
timeout  = "300ms"
on_error = "deny"
prefix   = "t"
{ca}
tls_cert = "{cert}"
tls_key  = "{key}"

[zones.z]
key     = "$http_x_key"
size    = "1m"
rate    = "1r/m"
backend = "redis"

[[servers]]
listen = "127.0.0.1:{{PORT}}"

[[servers.locations]]
path      = "/"
limit_req = {{ zone = "z" }}
return    = {{ status = 200, body = "ok\n" }}
"#,
        cert = p("client.crt"),
        key = p("client.key"),
    )
}

#[test]
fn rediss_with_a_private_ca_and_a_client_certificate() {
    let certs = TlsFiles::generate();
    let tls_port = support::free_port();
    let redis = RedisServer::start_tls(&certs, tls_port);
    let s = Sluice::start(&tls_config(tls_port, &certs, true));
    assert_eq!(twice(&s, "tls"), (200, 429));
    assert!(key_in_redis(&redis, "tls"), "the state is in Redis");

    // Without the CA, the server's certificate is not trusted: no decision
    // from Redis, on_error = "deny" answers.
    let s = Sluice::start(&tls_config(tls_port, &certs, false));
    assert_eq!(twice(&s, "untrusted"), (429, 429));
    assert!(!key_in_redis(&redis, "untrusted"));
    poll(
        "the TLS failure in the log",
        Duration::from_secs(10),
        || {
            s.log()
                .contains("redis error in limit_req zone")
                .then_some(())
        },
    );
}

// === configuration ===

/// As `load` reports them: the TLS files named are read too.
fn config_errors(text: &str) -> Vec<String> {
    match sluice::config::load_text("t.toml", text) {
        Ok(_) => vec![],
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

const SERVER: &str = r#"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/"
return = { status = 200 }
"#;

#[test]
fn config_redis_table_and_backend() {
    let ok = format!(
        r#"[redis]
url = "redis://127.0.0.1:6379/2"
timeout = "20ms"
on_error = "local"
prefix = "app"
[zones.r]
key = "$remote_addr"
size = "1m"
backend = "redis"
[zones.m]
key = "$remote_addr"
size = "1m"
{SERVER}"#
    );
    let spec = sluice::config::parse_str("t.toml", &ok).unwrap();
    let r = spec.redis.as_ref().unwrap();
    assert_eq!(r.timeout, Duration::from_millis(20));
    assert_eq!(r.on_error, OnError::Local);
    assert_eq!(r.prefix, "app");
    assert_eq!(spec.zones[0].backend, sluice::config::Backend::Redis);
    assert_eq!(spec.zones[1].backend, sluice::config::Backend::Memory);

    // defaults
    let spec = sluice::config::parse_str(
        "t.toml",
        &format!("[redis]\nurl = \"redis://h:1\"\n{SERVER}"),
    )
    .unwrap();
    let r = spec.redis.unwrap();
    assert_eq!(
        (r.timeout, r.on_error, r.prefix.as_str()),
        (Duration::from_millis(50), OnError::Allow, "sluice")
    );
}

#[test]
fn config_redis_errors_are_located() {
    let text = format!(
        r#"[zones.r]
key = "$remote_addr"
size = "1m"
backend = "redis"
[zones.x]
key = "$remote_addr"
size = "1m"
backend = "etcd"
{SERVER}"#
    );
    assert_eq!(
        config_errors(&text),
        [
            "t.toml:4:11: zone \"r\" has backend = \"redis\" but there is no [redis] table (add [redis] with url = \"redis://HOST:PORT\")",
            "t.toml:8:11: invalid backend \"etcd\" (expected \"memory\" or \"redis\")",
        ]
    );

    let text = format!(
        r#"[redis]
url = "http://h:6380"
timeout = "0ms"
on_error = "maybe"
prefix = "a{{b}}"
bogus = 1
{SERVER}"#
    );
    let e = config_errors(&text);
    assert_eq!(e.len(), 5, "{e:#?}");
    assert!(
        e[0].starts_with("t.toml:2:7: invalid redis url \"http://h:6380\""),
        "{e:?}"
    );
    assert_eq!(e[1], "t.toml:3:11: \"timeout\" must be at least 1ms");
    assert_eq!(
        e[2],
        "t.toml:4:12: invalid on_error \"maybe\" (expected \"allow\", \"deny\" or \"local\")"
    );
    assert!(
        e[3].starts_with("t.toml:5:10: invalid prefix \"a{b}\""),
        "{e:?}"
    );
    assert!(
        e[4].starts_with("t.toml:6:1: unknown key \"bogus\" in [redis]"),
        "{e:?}"
    );

    let e = config_errors(&format!(
        "[redis]\nurl = \"redis://h:1\"\ntls_ca = \"/nonexistent/ca.pem\"\n{SERVER}"
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("t.toml:3:10: \"tls_ca\": cannot read \"/nonexistent/ca.pem\""),
        "{e:?}"
    );
    let ca = tempfile::NamedTempFile::new().unwrap();
    let e = config_errors(&format!(
        "[redis]\nurl = \"redis://h:1\"\ntls_ca = \"{}\"\n{SERVER}",
        ca.path().display()
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("t.toml:3:10: \"tls_ca\" needs a rediss:// url"),
        "{e:?}"
    );

    let e = config_errors(&format!("[redis]\ntimeout = \"1s\"\n{SERVER}"));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("t.toml:1:1: [redis] must have a \"url\""),
        "{e:?}"
    );
}

/// A location with a memory limit before a Redis one: requests decided at
/// the same time (each waiting for Redis while holding the memory state)
/// must not all pass the memory limit. 2r/s without burst in memory, a
/// generous Redis limit: of ten simultaneous requests one passes, as with
/// memory zones only (and nginx).
#[tokio::test]
async fn concurrent_requests_on_a_memory_then_redis_location() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Server, "mix", OnError::Deny);
    let mem = Arc::new(ZoneRef::new(
        "m",
        Rate::per_second(2).unwrap(),
        Arc::new(Store::Memory(MemoryZone::with_size(1 << 20))),
    ));
    let red = Arc::new(ZoneRef::new(
        "r",
        Rate::per_second(2).unwrap(),
        Arc::new(Store::Redis(RedisZone::new(b, "r", 1 << 20))),
    ));
    let limits = Arc::new(vec![
        Limit {
            zone: mem,
            burst: 0,
            delay: 0,
        },
        Limit {
            zone: red,
            burst: 100_000,
            delay: NODELAY,
        },
    ]);
    let now = 1_000_000_000;
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let limits = limits.clone();
            tokio::spawn(async move { limiter::decide(&limits, now, |_| Some(b"k")).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    let passed = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Accepted { .. }))
        .count();
    assert_eq!(passed, 1, "{outcomes:?}");
    for o in &outcomes {
        if let Outcome::Rejected { limit, .. } = o {
            assert_eq!(*limit, 0, "rejected by the memory limit: {outcomes:?}");
        }
    }
}
