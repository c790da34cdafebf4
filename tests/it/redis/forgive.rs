//! A key forgiven on one instance (`DELETE /api/sluice/limit_reqs/ZONE/keys/KEY`) is admitted at
//! once by every instance sharing the zone, though each had its refusal in its rejection cache:
//! the deletion is published on Redis and every instance's subscriber forgets the key. Two
//! in-process sluices on one Redis, on a Redis Cluster (the subscribers listen to a replica of
//! another master than the key's: `PUBLISH` reaches every node) and behind Sentinel after a
//! forced failover (the subscribers follow the master).
//!
//! The bound: after the `DELETE` answers, the other instance has heard it within 1 s
//! ([`HEARD_WITHIN`]; on this machine a few milliseconds), and its very next request is admitted.

use crate::admin_api::{TOKEN, api, config, hits, json, token_file};
use crate::support::{
    InProcess, MASTER_NAME, RedisCluster, RedisSentinels, RedisServer, Sluice, eventually, wait_for,
};
use sluice::limiter::redis::key_slot;
use std::time::{Duration, Instant};

/// How long after the `DELETE` answered the other instance must have heard it.
const HEARD_WITHIN: Duration = Duration::from_secs(1);
/// The forgiven key: client 2 (127.0.0.2) of zone `z`, whose Redis key is [`REDIS_KEY`].
const KEY: &str = "/api/sluice/limit_reqs/z/keys/127.0.0.2";
const REDIS_KEY: &[u8] = b"sluice:z:{7f000002}";
const CHANNEL: &str = "sluice:forget:sluice";

/// Two instances `a` and `b` on the `[redis]` servers `servers`, zone `z` in Redis (1r/m, burst
/// 1, nodelay), the rejection cache on (the default), writes with [`TOKEN`].
struct Pair {
    a: InProcess,
    b: InProcess,
    _token: tempfile::NamedTempFile,
}

fn pair(servers: &str) -> Pair {
    let token = token_file();
    let admin = format!("token_file = \"{}\"", token.path().display());
    let toml = config(&admin, "backend = \"redis\"") + "[redis]\n" + servers + "\n";
    Pair {
        a: Sluice::in_process(&toml),
        b: Sluice::in_process(&toml),
        _token: token,
    }
}

/// `name{zone="z"}` in `s`'s `/metrics`.
async fn metric(s: &InProcess, name: &str) -> u64 {
    let text = api(s, "GET", "/metrics", None).await.body_text();
    let head = format!("{name}{{zone=\"z\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(head.as_str()))
        .unwrap_or_else(|| panic!("no {head:?} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Client 2 over its limit through `a`, then refused by each instance from its own cache (each
/// cache is used once its subscriber is subscribed; until then, or while a failover is under
/// way, a request may be decided by Redis or `on_error`).
async fn refused_from_both_caches(p: &Pair) {
    eventually(
        "client 2 refused through a",
        Duration::from_secs(5),
        async || (hits(p.a.addr(), 2, "/z", 1).await == [429]).then_some(()),
    )
    .await;
    for s in [&p.a, &p.b] {
        let before = metric(s, "sluice_limit_req_cache_hits_total").await;
        let what = "a refusal answered from the instance's cache";
        eventually(what, Duration::from_secs(10), async || {
            hits(s.addr(), 2, "/z", 1).await;
            let now = metric(s, "sluice_limit_req_cache_hits_total").await;
            (now > before).then_some(())
        })
        .await;
    }
}

/// `DELETE` on `a`; `b` hears it within [`HEARD_WITHIN`] and admits client 2 at once, and so
/// does `a`; then the key is limited again. Returns how long `b` took to hear it.
async fn forgiven_on_a_admitted_on_b(p: &Pair) -> Duration {
    let heard = metric(&p.b, "sluice_limit_req_invalidations_total").await;
    let r = api(&p.a, "DELETE", KEY, Some(TOKEN)).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body_text().contains("\"forgotten\": true"), "{r:?}");
    let sent = Instant::now();
    eventually("b hears of the forgiven key", HEARD_WITHIN, async || {
        let now = metric(&p.b, "sluice_limit_req_invalidations_total").await;
        (now > heard).then_some(())
    })
    .await;
    let took = sent.elapsed();
    assert_eq!(
        hits(p.b.addr(), 2, "/z", 1).await,
        [200],
        "b admits at once"
    );
    assert_eq!(hits(p.a.addr(), 2, "/z", 1).await, [200], "and a (burst 1)");
    assert_eq!(
        hits(p.b.addr(), 2, "/z", 1).await,
        [429],
        "then limited again"
    );
    took
}

#[tokio::test]
async fn a_key_forgiven_on_one_instance_is_admitted_by_another() {
    let redis = RedisServer::start();
    let p = pair(&format!("url = \"{}\"", redis.url()));
    refused_from_both_caches(&p).await;
    let took = forgiven_on_a_admitted_on_b(&p).await;
    println!("one redis: b heard of the forgiven key {took:?} after the DELETE answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_forgiven_in_a_cluster_reaches_every_instance() {
    let cluster = RedisCluster::start();
    // The subscribers listen to the first seed: a replica of another master than the key's.
    let owner = cluster.owner_of(key_slot(REDIS_KEY));
    let other = cluster.masters().into_iter().find(|&m| m != owner).unwrap();
    let first = cluster.replica_of(other);
    let head = cluster.nodes[first].url();
    let mut seeds = vec![head.clone()];
    seeds.extend(cluster.seeds().into_iter().filter(|u| *u != head));
    let list = seeds.iter().map(|u| format!("\"{u}\"")).collect::<Vec<_>>();
    let p = pair(&format!("cluster = [{}]", list.join(", ")));
    refused_from_both_caches(&p).await;
    let numsub: (String, u64) = cluster.nodes[first].query(&["PUBSUB", "NUMSUB", CHANNEL]);
    assert_eq!(numsub.1, 2, "both instances listen to the first seed");

    // The key's state, looked up in the Cluster from either instance.
    for s in [&p.a, &p.b] {
        let k = json(s, KEY).await;
        assert_eq!(
            (&k["known"], &k["algorithm"]),
            (&true.into(), &"leaky_bucket".into())
        );
        assert_eq!(k["limits"][0]["admits_now"], false, "{k}");
        let excess = k["limits"][0]["state"]["excess"].as_u64().unwrap();
        assert!((1000..=2000).contains(&excess), "{k}");
    }
    let took = forgiven_on_a_admitted_on_b(&p).await;
    println!("cluster: b heard of the forgiven key {took:?} after the DELETE answered");
    let k = json(&p.b, KEY).await;
    assert_eq!(k["known"], true, "charged again after the forgiveness: {k}");
    let owner_has: u64 = cluster.nodes[owner].query(&["EXISTS", "sluice:z:{7f000002}"]);
    assert_eq!(owner_has, 1, "on the master of its slot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_forgiven_after_a_sentinel_failover_reaches_every_instance() {
    let setup = RedisSentinels::start();
    let before = setup.master();
    let urls = setup
        .urls()
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect::<Vec<_>>();
    let p = pair(&format!(
        "sentinel = [{}]\nmaster_name = \"{MASTER_NAME}\"",
        urls.join(", ")
    ));
    refused_from_both_caches(&p).await;
    let _: String = setup.sentinels[0].query(&["SENTINEL", "FAILOVER", MASTER_NAME]);
    let after = wait_for(
        "the sentinels name a new master",
        Duration::from_secs(30),
        || {
            let m = setup.master();
            (m != before).then_some(m)
        },
    );
    // Both subscribers move to the new master (the old one, now a replica, would still hear
    // PUBLISH through replication: this is what tells that they follow).
    wait_for(
        "both instances subscribe to the new master",
        Duration::from_secs(20),
        || {
            let n: (String, u64) = setup.servers[after].query(&["PUBSUB", "NUMSUB", CHANNEL]);
            (n.1 == 2).then_some(())
        },
    );
    refused_from_both_caches(&p).await;
    let took = forgiven_on_a_admitted_on_b(&p).await;
    println!("sentinel: b heard of the forgiven key {took:?} after the DELETE answered");
}

/// The subscriber of a real sluice process through a Redis outage: one line when it is lost,
/// one when it is back (the backoff's attempts in between say nothing), subscribed again on
/// the restarted Redis, no panic.
#[tokio::test]
async fn the_subscriber_reconnects_and_logs_once_per_outage() {
    let mut redis = RedisServer::start();
    let toml = format!(
        r#"
[redis]
url    = "{}"
prefix = "o"
[zones.z]
key     = "$http_x_key"
size    = "1m"
rate    = "1r/m"
backend = "redis"
[[servers]]
[[servers.locations]]
path      = "/"
limit_req = {{ zone = "z" }}
return    = {{ status = 200 }}
"#,
        redis.url()
    );
    let mut s = super::start_sluice(&toml);
    let subscribed = |redis: &RedisServer| {
        let n: (String, u64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("sluice:forget:o")
            .query(&mut redis.client())
            .unwrap();
        n.1
    };
    wait_for("sluice subscribes", Duration::from_secs(10), || {
        (subscribed(&redis) == 1).then_some(())
    });
    let lost = |l: &str| l.contains("not subscribed to forgiven keys");
    let back = |l: &str| l.contains("subscribed to forgiven keys again");
    redis.kill();
    s.wait_log(lost).await;
    // Attempts at 0.1, 0.3, 0.7, 1.5 and 3.1 s: none of them logs.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    redis.restart();
    let log = s.wait_log(back).await;
    wait_for("sluice subscribes again", Duration::from_secs(10), || {
        (subscribed(&redis) == 1).then_some(())
    });
    assert_eq!(log.lines().filter(|l| lost(l)).count(), 1, "{log}");
    assert_eq!(log.lines().filter(|l| back(l)).count(), 1, "{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(s.alive(), "{log}");
}
