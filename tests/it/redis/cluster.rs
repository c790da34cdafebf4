//! Zones in a Redis Cluster (`[redis] cluster = [...]`) of 3 masters and 3 replicas started by
//! the test: the same decisions as one Redis with keys on every master, `SCRIPT FLUSH` and
//! `FUNCTION FLUSH` on the nodes in the middle (the library is loaded again on every master, and
//! every master decides by `FCALL`), two zones of one location in
//! one atomic call, and a master killed under load through real sluice processes.

use super::algorithms::zone;
use super::failover::{Load, RESUMED_RUN, assert_healthy, gap, zone_config, zone_key};
use super::function::{calls, has_library};
use super::*;
use crate::support::RedisCluster;
use sluice::limiter::Algorithm;
use sluice::limiter::redis::{RedisServers, hash_fields};

fn cluster_backend(cluster: &RedisCluster, prefix: &str) -> Arc<RedisBackend> {
    RedisBackend::with_time_source(
        RedisConfig {
            servers: RedisServers::Cluster(cluster.seeds()),
            timeout: Duration::from_secs(5),
            on_error: OnError::Deny,
            prefix: prefix.to_string(),
            ..Default::default()
        },
        TimeSource::Caller,
    )
    .unwrap()
}

/// A location with two Redis zones of different algorithms (one call of the general script).
fn location(b: &Arc<RedisBackend>) -> Vec<Limit> {
    vec![
        Limit {
            zone: zone(
                "z1",
                Policy::leaky(Rate::from_milli(2000).unwrap()),
                Some(b),
            ),
            burst: 3000,
            delay: NODELAY,
        },
        Limit {
            zone: zone(
                "z2",
                Policy::new(Algorithm::Gcra, 5, 1000).unwrap(),
                Some(b),
            ),
            burst: 2000,
            delay: NODELAY,
        },
    ]
}

/// One request schedule on a cluster zone and on a single-Redis zone: the same outcome for
/// every request, keys on every master, and the script loaded again after `SCRIPT FLUSH` on
/// every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_decides_as_one_redis() {
    let cluster = RedisCluster::start();
    let single = RedisServer::start();
    let b = cluster_backend(&cluster, "same");
    let on_cluster = location(&b);
    let on_single = location(&backend(
        &single.url(),
        TimeSource::Caller,
        "same",
        OnError::Deny,
    ));
    let mut rng = Lcg(0xc105);
    let mut now = T0;
    for step in 0..600 {
        if step == 300 {
            for n in &cluster.nodes {
                let _: () = n.query(&["SCRIPT", "FLUSH"]);
            }
            // Functions replicate: flushed on a master, gone from its replica too.
            for m in cluster.masters() {
                let _: () = cluster.nodes[m].query(&["FUNCTION", "FLUSH"]);
            }
        }
        now += rng.pick(&[0, 0, 1, 50, 250, 500, 1000]);
        let key = format!("client-{}", rng.next(48));
        let keys = [Some(key.clone()), (rng.next(6) != 0).then(|| key.clone())];
        let a = limiter::decide(&on_single, now, |i| keys[i].clone()).await;
        let b = limiter::decide(&on_cluster, now, |i| keys[i].clone()).await;
        assert_eq!(a, b, "step {step}: key {key} at {now}");
    }
    for m in cluster.masters() {
        let keys: i64 = cluster.nodes[m].query(&["DBSIZE"]);
        assert!(keys > 0, "master {} holds no key", cluster.nodes[m].port());
    }
    // The library went to every master, again after FUNCTION FLUSH, and each decides by FCALL.
    let library = b.function_library().to_string();
    let fcalls = |c: &RedisCluster| -> Vec<u64> {
        c.masters()
            .into_iter()
            .map(|m| calls(&mut c.nodes[m].client(), "fcall"))
            .collect()
    };
    eventually(
        "the library back on every master",
        Duration::from_secs(10),
        async || {
            let back = cluster
                .masters()
                .into_iter()
                .all(|m| has_library(&mut cluster.nodes[m].client(), &library));
            back.then_some(())
        },
    )
    .await;
    let before = fcalls(&cluster);
    for step in 0..60 {
        let key = format!("again-{step}");
        let o = limiter::decide(&on_cluster, now, |_| Some(key.clone())).await;
        assert!(matches!(o, Outcome::Accepted { .. }), "{o:?}");
    }
    let after = fcalls(&cluster);
    assert!(
        before.iter().zip(&after).all(|(b, a)| a > b),
        "FCALLs on every master: {before:?} → {after:?}"
    );
}

/// Two Redis zones in one location: 60 simultaneous requests of one client admit exactly the
/// tighter burst + 1, and the looser zone is charged for exactly those (one script call over
/// both keys, in the slot of the client key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_two_zones_of_a_location_stay_atomic() {
    let cluster = RedisCluster::start();
    let b = cluster_backend(&cluster, "atomic");
    let rate = Rate::from_milli(16).unwrap(); // 1r/m
    let limits = Arc::new(vec![
        Limit {
            zone: zone("loose", Policy::leaky(rate), Some(&b)),
            burst: 5000,
            delay: NODELAY,
        },
        Limit {
            zone: zone("tight", Policy::leaky(rate), Some(&b)),
            burst: 2000,
            delay: NODELAY,
        },
    ]);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..60 {
        let limits = limits.clone();
        tasks.spawn(async move { limiter::decide(&limits, T0, |_| Some("hot")).await });
    }
    let (mut accepted, mut rejected) = (0, 0);
    while let Some(o) = tasks.join_next().await {
        match o.unwrap() {
            Outcome::Accepted { .. } => accepted += 1,
            Outcome::Rejected { limit: 1, .. } => rejected += 1,
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    assert_eq!((accepted, rejected), (3, 57), "tight burst=2 admits 3");
    let loose = format!("atomic:loose:{{{}}}", hex(b"hot"));
    let tight = format!("atomic:tight:{{{}}}", hex(b"hot"));
    assert_eq!(key_slot(loose.as_bytes()), key_slot(tight.as_bytes()));
    let owner = &cluster.nodes[cluster.owner_of(key_slot(loose.as_bytes()))];
    let excess = hash_fields(Algorithm::LeakyBucket)[1];
    let e: i64 = owner.query(&["HGET", &loose, excess]);
    assert_eq!(
        e, 2000,
        "the loose zone was charged for the 3 accepted requests only"
    );
}

/// A master killed (SIGKILL) while two sluice processes (`on_error` deny and allow) decide keys
/// in its slots: each answers what its `on_error` says in the gap and nothing else, decides in
/// Redis again once the replica is promoted (the bound is measured and printed), writes the new
/// keys to the promoted replica, and neither dies nor panics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_master_killed_under_load() {
    let mut cluster = RedisCluster::start();
    let seeds = cluster
        .seeds()
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let servers = format!("cluster = [{seeds}]");
    let owners = cluster.slot_owners();
    let victim = owners[usize::from(key_slot(zone_key("k", "x").as_bytes()))];
    let heir = cluster.replica_of(victim);
    // Fresh keys whose slot the victim owns, numbered by the load.
    let victim_slots: Arc<Vec<bool>> = Arc::new(owners.iter().map(|&o| o == victim).collect());
    let keys = move |run: &'static str| {
        let slots = victim_slots.clone();
        move |n: u64| {
            (n * 1000..)
                .map(|i| format!("{run}-{i}"))
                .find(|k| slots[usize::from(key_slot(zone_key("k", k).as_bytes()))])
                .unwrap()
        }
    };
    let mut sluices = Vec::new();
    let mut loads = Vec::new();
    for policy in ["deny", "allow"] {
        let s = start_sluice(&zone_config(&servers, policy, &format!("k{policy}")));
        loads.push(Load::start(s.addr(), 2, keys(policy)));
        sluices.push((policy, s));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The decisions go by FCALL, and the replica has the library from its master: once promoted
    // it decides by FCALL at once.
    let fcalls = |c: &RedisCluster, i: usize| calls(&mut c.nodes[i].client(), "fcall");
    assert!(fcalls(&cluster, victim) > 0, "the master decides by FCALL");
    let function_list: Vec<redis::Value> = cluster.nodes[heir].query(&["FUNCTION", "LIST"]);
    assert_eq!(function_list.len(), 1, "the replica has the library");
    let killed_at: Vec<Duration> = loads.iter().map(|l| l.started.elapsed()).collect();
    cluster.nodes[victim].kill();
    for (load, at) in loads.iter().zip(&killed_at) {
        let resumed = load
            .wait_resumed(*at, RESUMED_RUN, Duration::from_secs(45))
            .await;
        assert!(
            resumed,
            "decisions did not resume in Redis:\n{}",
            cluster.logs()
        );
    }
    assert!(
        fcalls(&cluster, heir) > 0,
        "the promoted replica decides by FCALL"
    );
    for (((policy, s), load), at) in sluices.iter_mut().zip(loads).zip(killed_at) {
        // The load ends decided by Redis (a relapse since, a call slower than the timeout on a
        // busy machine, has passed).
        let settled = load
            .wait_resumed(at, RESUMED_RUN, Duration::from_secs(10))
            .await;
        assert!(
            settled,
            "{policy}: decisions left Redis again:\n{}",
            s.log()
        );
        let rounds = load.stop().await;
        let what = format!("cluster, master killed, on_error={policy}");
        let g = gap(&rounds, at, None, policy, &what);
        println!(
            "{what}: decided in Redis again {} ms after the kill ({} of {} rounds since by \
             on_error, {} of them after it): {}",
            g.resumed_after.as_millis(),
            g.fallback_rounds,
            g.rounds,
            g.relapses,
            g.timeline
        );
        assert!(
            g.resumed_after < Duration::from_secs(15),
            "{what}: {g:?}\nsluice's log:\n{}",
            s.log()
        );
        assert!(g.fallback_rounds > 0, "{what}: the kill went unnoticed");
        assert_healthy(s, &what);
        // The last keys went to the promoted replica.
        let last = rounds.last().unwrap();
        let slot = key_slot(zone_key(&format!("k{policy}"), &last.key).as_bytes());
        assert_eq!(
            cluster.owner_of(slot),
            heir,
            "{what}: the replica owns the slots now"
        );
        let exists: i64 =
            cluster.nodes[heir].query(&["EXISTS", &zone_key(&format!("k{policy}"), &last.key)]);
        assert_eq!(exists, 1, "{what}: {last:?} is on the promoted replica");
    }
}
