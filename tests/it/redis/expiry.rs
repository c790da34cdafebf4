//! Keys expire once they are as new (`algorithm::expired`, plus the script's margin), and a key
//! that expired decides as one never seen. (The leaky bucket's rule, at least nginx's minute, is
//! in `script`.)

use super::algorithms::{MARGIN, NOW0, as_new_in, pttl, read_state, ttl_set_by, zone};
use super::*;
use sluice::limiter::Algorithm;

#[tokio::test]
async fn keys_expire_once_as_new_and_then_decide_as_new() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Caller, "x", OnError::Deny);
    let mut c = redis.client();
    // Periods short enough for the keys to expire within the test.
    let cases = [
        (Algorithm::TokenBucket, 2, 300, 1000),
        (Algorithm::Gcra, 3, 200, 2000),
        (Algorithm::FixedWindow, 3, 250, 0),
        (Algorithm::SlidingWindow, 3, 200, 0),
        (Algorithm::SlidingLog, 3, 300, 0),
    ];
    let now = NOW0 + 123;
    let mut stored = Vec::new();
    for (a, count, period, burst) in cases {
        let p = Policy::new(a, count, period).unwrap();
        let limit = |z| {
            [Limit {
                zone: z,
                burst,
                delay: NODELAY,
            }]
        };
        let (red, mem) = (
            limit(zone(a.name(), p, Some(&b))),
            limit(zone(a.name(), p, None)),
        );
        let key = format!("x:{}:{{6b}}", a.name());
        let mut ttl = 0..=0;
        for t in [now, now + 7] {
            let want = limiter::decide(&mem, t, |_| Some("k")).await;
            assert!(matches!(want, Outcome::Accepted { .. }), "{want:?}");
            let got;
            (got, ttl) = ttl_set_by(&mut c, &key, limiter::decide(&red, t, |_| Some("k"))).await;
            assert_eq!(got, want);
        }
        let s = read_state(&mut c, &key, a).expect("stored");
        let exact = as_new_in(&p, &s, now + 7, 10_000).expect("as new within 10 s");
        assert!(exact > 0, "{}: as new at once", a.name());
        assert!(
            ttl.contains(&(exact + MARGIN)),
            "{}: TTL {ttl:?}, as new in {exact} ms",
            a.name()
        );
        let ttl = *ttl.end();
        stored.push((a, key, red, mem, now + 7 + exact, ttl));
    }
    let longest = stored.iter().map(|s| s.5).max().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(longest + 50)).await;
    for (a, key, red, mem, as_new, _) in stored {
        let exists: i64 = redis::cmd("EXISTS").arg(&key).query(&mut c).unwrap();
        assert_eq!(exists, 0, "{}: the key expired", a.name());
        // Redis has nothing; the memory zone still holds the (as new) state; a new zone has
        // never seen the key: all three decide alike.
        let p = *mem[0].policy();
        let fresh = [Limit {
            zone: zone("fresh", p, None),
            burst: mem[0].burst,
            delay: NODELAY,
        }];
        let want = limiter::decide(&fresh, as_new, |_| Some("k")).await;
        assert_eq!(
            limiter::decide(&mem, as_new, |_| Some("k")).await,
            want,
            "{}",
            a.name()
        );
        assert_eq!(
            limiter::decide(&red, as_new, |_| Some("k")).await,
            want,
            "{}",
            a.name()
        );
        assert!(
            pttl(&mut c, &key) > 0,
            "{}: stored again, with a TTL",
            a.name()
        );
    }
}
