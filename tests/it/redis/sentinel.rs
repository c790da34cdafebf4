//! Zones on the master Redis Sentinel names (`[redis] sentinel = [...]`, `master_name`): a
//! master, its replica and three sentinels started by the test; a forced failover (`SENTINEL
//! FAILOVER`) and a killed master, each under load through a real sluice process. Decisions
//! continue on the new master (the keys written after the failover are there, decided by
//! `FCALL`), `on_error` answers in the gap, the gap is measured and printed.

use super::failover::{Load, RESUMED_RUN, Round, assert_healthy, gap, zone_config, zone_key};
use super::function::calls;
use super::*;
use crate::support::{MASTER_NAME, RedisSentinels, wait_for};

fn servers(s: &RedisSentinels) -> String {
    let urls = s
        .urls()
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!("sentinel = [{urls}]\nmaster_name = \"{MASTER_NAME}\"")
}

/// Load through sluice (`policy`), then `outage` (which returns what it did), then the load
/// until decisions are back in Redis; checks the gap and that the keys written last are on the
/// master the sentinels name now, a different one.
async fn failover_under_load(
    policy: &str,
    outage: impl FnOnce(&mut RedisSentinels) -> &'static str,
) {
    let mut setup = RedisSentinels::start();
    let before = setup.master();
    let prefix = format!("s{policy}");
    let mut s = start_sluice(&zone_config(&servers(&setup), policy, &prefix));
    s.wait_log(|l| l.contains("is reachable")).await;
    let run = format!("{policy}-{}", std::process::id());
    let load = Load::start(s.addr(), 2, move |n| format!("{run}-{n}"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let at = load.started.elapsed();
    let how = outage(&mut setup);
    // The failover is done when the sentinels name another master; decisions must then be
    // back in Redis, on it.
    wait_for(
        "the sentinels name a new master",
        Duration::from_secs(30),
        || (setup.master() != before).then_some(()),
    );
    let switched = load.started.elapsed();
    let after = setup.master();
    // Then sluice writes there: the key of the latest round is on the new master.
    let on_new = |r: &Round| -> bool {
        setup.servers[after].query::<i64>(&["EXISTS", &zone_key(&prefix, &r.key)]) == 1
    };
    let moved = wait_for(
        "sluice writes to the new master",
        Duration::from_secs(30),
        || {
            let latest = load
                .rounds()
                .into_iter()
                .rev()
                .find(|r| r.by_redis() && r.at > switched)?;
            on_new(&latest).then_some(latest.at)
        },
    );
    let resumed = load
        .wait_resumed(moved, RESUMED_RUN, Duration::from_secs(45))
        .await;
    let rounds = load.stop().await;
    let what = format!("sentinel, {how}, on_error={policy}");
    println!(
        "{what}: the sentinels named the new master {} ms after it, sluice wrote there {} ms after it",
        (switched - at).as_millis(),
        (moved - at).as_millis()
    );
    assert!(
        resumed,
        "{what}: decisions did not resume in Redis:\n{}\n{}",
        s.log(),
        setup.logs()
    );
    let g = gap(&rounds, at, Some(moved), policy, &what);
    println!(
        "{what}: decided in Redis again {} ms after it ({} of {} rounds since by on_error, {} \
         admitted twice: their first write went to the old master)",
        g.resumed_after.as_millis(),
        g.fallback_rounds,
        g.rounds,
        g.lost_writes
    );
    assert!(g.resumed_after < Duration::from_secs(20), "{what}: {g:?}");
    assert!(
        moved - at < Duration::from_secs(20),
        "{what}: writes moved late"
    );
    assert_healthy(&mut s, &what);
    assert_eq!(setup.role(after), "master");
    let last = rounds.last().unwrap();
    assert!(on_new(last), "{what}: {last:?} is on the new master");
    // It had the function library from its master: decisions there went by FCALL.
    let fcalls = calls(&mut setup.servers[after].client(), "fcall");
    assert!(fcalls > 0, "{what}: no FCALL on the new master");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_forced_failover_under_load() {
    failover_under_load("deny", |setup| {
        let s = &setup.sentinels[0];
        let _: () = s.query(&["SENTINEL", "FAILOVER", MASTER_NAME]);
        "forced failover"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_master_killed_under_load() {
    failover_under_load("allow", |setup| {
        let m = setup.master();
        setup.servers[m].kill();
        "master killed"
    })
    .await;
}
