//! The rejection cache (`[redis] reject_cache`) against Redis itself: several instances on one
//! Redis, with their caches and without, given the same requests, decide the same, request for
//! request; with the caches Redis is asked fewer times, by exactly the cache's hits.
//!
//! - [`instances_decide_the_same_with_and_without_the_cache`]: the limiter of three instances
//!   (each its own connection and cache) on the script's caller clock ([`TimeSource::Caller`]),
//!   so every decision is repeatable to the millisecond: outcome, limit, excess, wait and
//!   standing compared for every algorithm, on locations where the cached zone's limit is the
//!   widest, a narrower one, the first or the second limit.
//! - [`proxies_answer_the_same_with_and_without_the_cache`]: two in-process sluices per side
//!   on Redis's own clock, each request sent to both sides at once: status, `Retry-After` and
//!   `RateLimit` headers compared; the hits in `/metrics`.
//! - [`a_flood_of_refused_keys_keeps_the_cache_bounded`]: a zone's cache under many keys.

use super::algorithms::NOW0;
use super::function::calls;
use super::*;
use crate::support::InProcess;
use sluice::limiter::{Algorithm, RejectCache};

/// The script calls `redis` ran: successful `FCALL`s and `EVALSHA`s, and the `EVAL`s that
/// follow a `NOSCRIPT` (the failed `EVALSHA`s) to load the script.
fn script_calls(redis: &RedisServer) -> u64 {
    let mut c = redis.client();
    ["fcall", "evalsha", "eval"]
        .iter()
        .map(|cmd| calls(&mut c, cmd))
        .sum()
}

/// The policy of the cached zone for `a`, its widest and a narrower `burst*1000` (windows
/// take none): limits that requests a few hundred ms apart cross and recover from.
fn policy_of(a: Algorithm) -> (Policy, u64, u64) {
    let (count, period, widest, narrow) = match a {
        Algorithm::LeakyBucket => (2, 1000, 3000, 0),
        Algorithm::TokenBucket => (2, 1000, 2000, 0),
        Algorithm::Gcra => (3, 2000, 2000, 1000),
        Algorithm::FixedWindow => (3, 1000, 0, 0),
        Algorithm::SlidingWindow => (4, 2000, 0, 0),
        Algorithm::SlidingLog => (3, 1500, 0, 0),
    };
    (Policy::new(a, count, period).unwrap(), widest, narrow)
}

/// A Redis zone `name` through `b`, with a rejection cache when `cache`.
fn cached_zone(
    name: &str,
    (policy, widest): (Policy, u64),
    b: &Arc<RedisBackend>,
    cache: bool,
) -> Arc<ZoneRef> {
    let store = Store::Redis(RedisZone::new(b.clone(), name, 1 << 20));
    Arc::new(ZoneRef {
        reject_cache: cache.then(|| RejectCache::with_size(1 << 20, policy, widest)),
        ..ZoneRef::new(name, policy, Arc::new(store))
    })
}

/// One instance: its own connection, zones and caches; its locations, in which `z` is the
/// zone of algorithm `a`, `g` a leaky bucket in Redis and `m` one in this instance's memory:
/// `[z widest, delay 0]`, `[z narrower]`, `[g, z]` (z second: never answered from the
/// cache), `[z, g]`, `[m, z]` (z answered once m passed) and `[z, m]`.
struct Instance {
    locations: Vec<Vec<Limit>>,
    zones: Vec<Arc<ZoneRef>>,
}

impl Instance {
    fn new(url: &str, a: Algorithm, cache: bool) -> Instance {
        let b = backend(url, TimeSource::Caller, "c", OnError::Deny);
        let (p, widest, narrow) = policy_of(a);
        let z = cached_zone("z", (p, widest), &b, cache);
        let g = cached_zone(
            "g",
            (Policy::new(Algorithm::LeakyBucket, 1, 1000).unwrap(), 1000),
            &b,
            cache,
        );
        let m = Arc::new(ZoneRef::new(
            "m",
            Policy::new(Algorithm::LeakyBucket, 5, 1000).unwrap(),
            Arc::new(Store::Memory(MemoryZone::with_size(1 << 20))),
        ));
        let limit = |zone: &Arc<ZoneRef>, burst, delay| Limit {
            zone: zone.clone(),
            burst,
            delay,
        };
        let locations = vec![
            vec![limit(&z, widest, 0)],
            vec![limit(&z, narrow, NODELAY)],
            vec![limit(&g, 1000, NODELAY), limit(&z, widest, NODELAY)],
            vec![limit(&z, widest, NODELAY), limit(&g, 1000, NODELAY)],
            vec![limit(&m, 4000, NODELAY), limit(&z, widest, NODELAY)],
            vec![limit(&z, widest, NODELAY), limit(&m, 4000, NODELAY)],
        ];
        Instance {
            locations,
            zones: vec![z, g],
        }
    }

    fn hits(&self) -> u64 {
        self.zones
            .iter()
            .map(|z| match &*z.store {
                Store::Redis(r) => r
                    .stats
                    .cache_hits
                    .load(std::sync::atomic::Ordering::Relaxed),
                Store::Memory(_) => 0,
            })
            .sum()
    }
}

/// Per algorithm, 600 requests spread over three instances, six locations and three keys,
/// in bursts that cross the limits and pauses (up to 2.5 s) that let them recover: the instances with
/// caches decide exactly as those without (every field of the outcome), and Redis answered
/// them `hits` fewer times.
#[tokio::test]
async fn instances_decide_the_same_with_and_without_the_cache() {
    let (with_redis, without_redis) = (RedisServer::start(), RedisServer::start());
    let mut rng = Lcg(0xcac4e);
    for a in Algorithm::ALL {
        let with: Vec<Instance> = (0..3)
            .map(|_| Instance::new(&with_redis.url(), a, true))
            .collect();
        let without: Vec<Instance> = (0..3)
            .map(|_| Instance::new(&without_redis.url(), a, false))
            .collect();
        let calls = (script_calls(&with_redis), script_calls(&without_redis));
        let (mut now, mut rejected, mut by_memory) = (NOW0 + rng.upto(5000), 0, 0);
        let steps = 600;
        for step in 0..steps {
            // Bursts of about 30 requests within a few ms, then a pause.
            now += if rng.next(30) == 0 {
                rng.pick(&[300, 499, 500, 1000, 1500, 1700, 2500])
            } else {
                rng.pick(&[0, 0, 1, 2, 5, 30])
            };
            let (i, loc) = (rng.next(3) as usize, rng.next(6) as usize);
            let key = rng.pick(&["a", "b", "c"]);
            let want = limiter::decide(&without[i].locations[loc], now, |_| Some(key)).await;
            let got = limiter::decide(&with[i].locations[loc], now, |_| Some(key)).await;
            assert_eq!(
                got,
                want,
                "{} step {step}: instance {i}, location {loc}, key {key}",
                a.name()
            );
            rejected += usize::from(matches!(want, Outcome::Rejected { .. }));
            // `[m, z]` refused by m: decided before any call.
            by_memory += u64::from(loc == 4 && matches!(want, Outcome::Rejected { limit: 0, .. }));
        }
        let hits: u64 = with.iter().map(Instance::hits).sum();
        let asked = (
            script_calls(&with_redis) - calls.0,
            script_calls(&without_redis) - calls.1,
        );
        eprintln!(
            "{}: {rejected} of {steps} refused, {hits} from the cache",
            a.name()
        );
        assert!(
            rejected > steps / 4 && hits > rejected as u64 / 3,
            "{}: the schedule must refuse often ({rejected}) and the cache answer many ({hits})",
            a.name()
        );
        let calls = steps as u64 - by_memory;
        assert_eq!(asked.1, calls, "{}: one call per decision", a.name());
        assert_eq!(asked.0, calls - hits, "{}: a call for every miss", a.name());
    }
}

fn proxy_config(redis_url: &str, cache: bool) -> String {
    format!(
        r#"
limit_req_status = 429
ratelimit_headers = "draft"

[admin]

[redis]
url          = "{redis_url}"
timeout      = "2s"
on_error     = "deny"
reject_cache = {cache}

[zones.leaky]
key     = "$http_x_key"
size    = "1m"
rate    = "1r/s"
backend = "redis"

[zones.gcra]
key       = "$http_x_key"
size      = "1m"
rate      = "1r/s"
algorithm = "gcra"
backend   = "redis"

[[servers]]
[[servers.locations]]
path      = "/leaky"
limit_req = {{ zone = "leaky", burst = 2, nodelay = true }}
return    = {{ status = 200, body = "ok\n" }}

[[servers.locations]]
path      = "/gcra"
limit_req = {{ zone = "gcra", burst = 2 }}
return    = {{ status = 200, body = "ok\n" }}
"#
    )
}

/// What a client sees of a decision.
fn seen(r: &Reply) -> (u16, Option<String>, Option<String>, Option<String>) {
    let h = |n| r.header(n).map(str::to_string);
    (
        r.status,
        h("retry-after"),
        h("ratelimit"),
        h("ratelimit-policy"),
    )
}

/// Two sluices with caches and two without, each pair on its own Redis, on Redis's clock:
/// three rounds of bursts over both instances of a side (each request sent to both sides at
/// once), a pause of 1.1 s between rounds (one request leaks). Every answer is the same on
/// both sides; the cached side asked Redis less, and counts its hits in `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn proxies_answer_the_same_with_and_without_the_cache() {
    let (with_redis, without_redis) = (RedisServer::start(), RedisServer::start());
    let with = [0, 1].map(|_| Sluice::in_process(&proxy_config(&with_redis.url(), true)));
    let without = [0, 1].map(|_| Sluice::in_process(&proxy_config(&without_redis.url(), false)));
    let (mut n, mut limited) = (0, 0);
    for round in 0..3 {
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        for j in 0..8 {
            for (path, key) in [("/leaky", "k1"), ("/gcra", "k1"), ("/leaky", "k2")] {
                let i = (j + round) % 2;
                let ask = |addr| async move {
                    request(addr, client(1), "GET", path, &[("X-Key", key)]).await
                };
                let (a, b) = tokio::join!(ask(with[i].addr()), ask(without[i].addr()));
                assert_eq!(
                    seen(&a),
                    seen(&b),
                    "round {round}, request {j}: {path} {key}"
                );
                n += 1;
                limited += usize::from(b.status == 429);
            }
        }
    }
    assert!(
        limited > n / 2,
        "the bursts must cross the limits: {limited} of {n}"
    );
    let (asked_with, asked_without) = (script_calls(&with_redis), script_calls(&without_redis));
    assert_eq!(
        asked_without, n as u64,
        "one call per request without the cache"
    );
    let metrics = |s: &InProcess| {
        let admin = s.admin_addr();
        async move {
            request(admin, client(1), "GET", "/metrics", &[])
                .await
                .body_text()
        }
    };
    let mut hits = 0;
    for s in &with {
        let text = metrics(s).await;
        for zone in ["leaky", "gcra"] {
            let line = format!("sluice_limit_req_cache_hits_total{{zone=\"{zone}\"}} ");
            let v = text
                .lines()
                .find_map(|l| l.strip_prefix(line.as_str()))
                .unwrap_or_else(|| panic!("no {line:?} in\n{text}"));
            hits += v.trim().parse::<u64>().unwrap();
        }
    }
    assert!(hits > 0, "the cache answered no request");
    assert_eq!(asked_with, asked_without - hits, "a call for every miss");
    let text = metrics(&without[0]).await;
    assert!(
        !text.contains("sluice_limit_req_cache_hits_total{"),
        "no cache, no series:\n{text}"
    );
}

/// 20,000 keys refused in a zone whose cache holds 256 (`size = 32k`): it never holds more,
/// and the keys refused last are still answered from it.
#[tokio::test]
async fn a_flood_of_refused_keys_keeps_the_cache_bounded() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Caller, "f", OnError::Deny);
    let p = Policy::new(Algorithm::LeakyBucket, 1, 60_000).unwrap();
    let store = Store::Redis(RedisZone::new(b.clone(), "f", 32 * 1024));
    let zone = Arc::new(ZoneRef {
        reject_cache: Some(RejectCache::with_size(32 * 1024, p, 0)),
        ..ZoneRef::new("f", p, Arc::new(store))
    });
    let cache = zone.reject_cache.as_ref().unwrap();
    assert_eq!(cache.capacity(), 256);
    let limits = [Limit {
        zone: zone.clone(),
        burst: 0,
        delay: NODELAY,
    }];
    let keys: Vec<String> = (0..20_000).map(|i| format!("flood-{i}")).collect();
    // One pipeline charges every key once (as a request would), then each is refused.
    let mut c = redis.client();
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("HSET")
            .arg(format!("f:f:{{{}}}", hex(k.as_bytes())))
            .arg("l")
            .arg(T0)
            .arg("e")
            .arg(0)
            .ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    for (i, k) in keys.iter().enumerate() {
        let o = limiter::decide(&limits, T0 + 1, |_| Some(k.as_str())).await;
        assert!(matches!(o, Outcome::Rejected { .. }), "{k}: {o:?}");
        if i % 1000 == 0 {
            assert!(cache.len() <= cache.capacity(), "{} entries", cache.len());
        }
    }
    assert_eq!(cache.len(), cache.capacity());
    let before = script_calls(&redis);
    for k in &keys[keys.len() - 100..] {
        let o = limiter::decide(&limits, T0 + 2, |_| Some(k.as_str())).await;
        assert!(matches!(o, Outcome::Rejected { .. }), "{k}: {o:?}");
    }
    let asked = script_calls(&redis) - before;
    assert_eq!(asked, 0, "the newest keys are answered from the cache");
}
