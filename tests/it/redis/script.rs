//! The Lua script on a real Redis: its keys and expiry on the server's clock, the state of a
//! slow zone kept until drained, concurrent decisions on a memory-then-Redis location, and keys
//! left by another algorithm.

use super::*;
use sluice::limiter::Algorithm;

#[tokio::test]
async fn the_server_clock_keys_and_expiry() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Server, "sluice", OnError::Deny);
    let zone = Arc::new(ZoneRef {
        name: "z".into(),
        policy: Policy::leaky(Rate::per_second(2).unwrap()),
        store: Arc::new(Store::Redis(RedisZone::new(b.clone(), "z", 1 << 20))),
        counts: Default::default(),
        reject_cache: None,
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
        policy: Policy::leaky(Rate::per_minute(1).unwrap()),
        store: Arc::new(Store::Redis(RedisZone::new(b, "slow", 1 << 20))),
        counts: Default::default(),
        reject_cache: None,
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
        Policy::leaky(Rate::per_second(2).unwrap()),
        Arc::new(Store::Memory(MemoryZone::with_size(1 << 20))),
    ));
    let red = Arc::new(ZoneRef::new(
        "r",
        Policy::leaky(Rate::per_second(2).unwrap()),
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

/// A zone whose algorithm changed across a reload keeps its name, so its keys: a key of the
/// other kind (a sliding log's list for a bucket, a bucket's hash for a sliding log, another
/// bucket's fields) decides as new, not as a Redis error.
#[tokio::test]
async fn a_key_left_by_another_algorithm_decides_as_new() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Caller, "t", OnError::Deny);
    let mut c = redis.client();
    let key = "t:z:{6b}";
    for (a, burst, left) in [
        (Algorithm::TokenBucket, 4000, "list"),
        (Algorithm::SlidingLog, 0, "leaky hash"),
        (Algorithm::Gcra, 4000, "leaky hash"),
        // The leaky bucket's own script (leaky_bucket.lua) too.
        (Algorithm::LeakyBucket, 4000, "list"),
    ] {
        let _: () = redis::cmd("DEL").arg(key).query(&mut c).unwrap();
        let _: () = if left == "list" {
            redis::cmd("RPUSH").arg(key).arg(T0).arg(T0).query(&mut c)
        } else {
            redis::cmd("HSET")
                .arg(key)
                .arg("e")
                .arg(5000)
                .arg("l")
                .arg(T0)
                .query(&mut c)
        }
        .unwrap();
        let zone = ZoneRef::new(
            "z",
            Policy::new(a, 5, 1000).unwrap(),
            Arc::new(Store::Redis(RedisZone::new(b.clone(), "z", 1 << 20))),
        );
        let limits = [Limit {
            zone: Arc::new(zone),
            burst,
            delay: NODELAY,
        }];
        let o = limiter::decide(&limits, T0, |_| Some("k")).await;
        // 5 at once from new: 4 left.
        assert!(
            matches!(o, Outcome::Accepted { tightest: (0, s), .. } if s.remaining == 4),
            "{} over a {left}: {o:?}",
            a.name()
        );
    }
}
