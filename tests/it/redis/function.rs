//! The scripts as a Redis 7 function library (`FCALL`), and the fallbacks to `EVALSHA`: the
//! decisions go by `FCALL` once the library is loaded; `FUNCTION FLUSH` between requests costs
//! no decision and the library comes back; a server without `FUNCTION` and `FCALL` (renamed
//! away: what Redis < 7 answers) decides the same through `EVALSHA`. Every decision is compared
//! with the same location in memory, so a fallback that went wrong shows as a different outcome
//! or as `Unavailable` (`on_error = deny`).

use super::algorithms::zone;
use super::*;
use sluice::limiter::Algorithm;

/// Successful calls of `command` (`fcall`, `evalsha`, `eval`) in `INFO commandstats`.
pub(super) fn calls(c: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    let prefix = format!("cmdstat_{command}:");
    let Some(line) = info.lines().find(|l| l.starts_with(&prefix)) else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .map_or(0, |v| v.parse().unwrap())
    };
    field("calls") - field("failed_calls")
}

/// Whether the server holds the library `name`.
pub(super) fn has_library(c: &mut redis::Connection, name: &str) -> bool {
    let list: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(name)
        .query(c)
        .unwrap();
    !list.is_empty()
}

/// A leaky-bucket location (the leaky function) and a GCRA + token-bucket one (the general
/// function), on `b` or in memory.
fn locations(b: Option<&Arc<RedisBackend>>) -> [Vec<Limit>; 2] {
    let limit = |name: &str, policy, burst| Limit {
        zone: zone(name, policy, b),
        burst,
        delay: NODELAY,
    };
    [
        vec![limit(
            "lb",
            Policy::leaky(Rate::from_milli(2000).unwrap()),
            3000,
        )],
        vec![
            limit("g", Policy::new(Algorithm::Gcra, 5, 1000).unwrap(), 2000),
            limit(
                "tb",
                Policy::new(Algorithm::TokenBucket, 3, 1000).unwrap(),
                1000,
            ),
        ],
    ]
}

/// Drives `steps` requests over both locations on Redis and in memory, the same outcome each
/// time (keys of their own, named after `seed`); `between(step)` runs before each.
async fn same_as_memory(
    b: &Arc<RedisBackend>,
    seed: u64,
    steps: usize,
    mut between: impl FnMut(usize),
) {
    let (on_redis, in_memory) = (locations(Some(b)), locations(None));
    let mut rng = Lcg(seed);
    let mut now = T0;
    for step in 0..steps {
        between(step);
        now += rng.pick(&[0, 0, 1, 100, 300, 1000]);
        let key = format!("{seed:x}-{}", rng.next(8));
        let which = rng.next(2) as usize;
        let a = limiter::decide(&in_memory[which], now, |_| Some(key.clone())).await;
        let r = limiter::decide(&on_redis[which], now, |_| Some(key.clone())).await;
        assert_eq!(r, a, "step {step}: location {which}, key {key} at {now}");
    }
}

/// Waits until the backend has loaded its library on `redis`.
async fn loaded(redis: &RedisServer, b: &Arc<RedisBackend>) {
    let name = b.function_library().to_string();
    eventually(
        "the function library loaded",
        Duration::from_secs(5),
        async || has_library(&mut redis.client(), &name).then_some(()),
    )
    .await;
}

#[tokio::test]
async fn decisions_go_by_fcall() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Caller, "f", OnError::Deny);
    // The first decision starts the load (and goes by EVALSHA meanwhile).
    same_as_memory(&b, 0xf1, 1, |_| {}).await;
    loaded(&redis, &b).await;
    let mut c = redis.client();
    let before = (calls(&mut c, "fcall"), calls(&mut c, "evalsha"));
    same_as_memory(&b, 0xf2, 200, |_| {}).await;
    let after = (calls(&mut c, "fcall"), calls(&mut c, "evalsha"));
    assert!(after.0 - before.0 >= 200, "FCALLs: {before:?} → {after:?}");
    assert_eq!(after.1, before.1, "no EVALSHA once loaded");
    assert_eq!(b.failures(), 0);
}

#[tokio::test]
async fn function_flush_between_requests_costs_no_decision() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Caller, "f", OnError::Deny);
    same_as_memory(&b, 0xf3, 1, |_| {}).await;
    loaded(&redis, &b).await;
    let mut c = redis.client();
    // Every 50 requests the library (and the scripts) vanish, as after a restart.
    same_as_memory(&b, 0xf4, 300, |step| {
        if step % 50 == 25 {
            let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut c).unwrap();
            let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
        }
    })
    .await;
    assert_eq!(b.failures(), 0, "no call failed");
    assert!(
        calls(&mut c, "eval") > 0,
        "the calls that found no function went by EVAL"
    );
    loaded(&redis, &b).await;
    let fcalls = calls(&mut c, "fcall");
    same_as_memory(&b, 0xf5, 20, |_| {}).await;
    assert!(
        calls(&mut c, "fcall") >= fcalls + 20,
        "FCALL again after reloading"
    );
}

#[tokio::test]
async fn without_functions_decisions_go_by_evalsha() {
    // What a Redis < 7 answers: unknown commands.
    let redis = RedisServer::start_with(&[
        "--rename-command",
        "FUNCTION",
        "",
        "--rename-command",
        "FCALL",
        "",
    ]);
    let b = backend(&redis.url(), TimeSource::Caller, "f", OnError::Deny);
    let mut c = redis.client();
    let unknown = redis::cmd("FCALL").arg("x").arg(0).query::<()>(&mut c);
    assert!(unknown.is_err(), "FCALL is renamed away");
    same_as_memory(&b, 0xf6, 300, |_| {}).await;
    assert_eq!(b.failures(), 0);
    assert_eq!(calls(&mut c, "fcall"), 0);
    assert!(calls(&mut c, "evalsha") >= 290, "decided by EVALSHA");
}
