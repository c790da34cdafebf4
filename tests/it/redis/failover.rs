//! Load through a real sluice while a Redis server goes away: each round fires two requests
//! with a fresh client key at a `1r/m` zone (no burst), so Redis answers `(200, 429)` and
//! `on_error` answers something else: `deny` rejects the first request too, `allow` admits the
//! second. The gap is measured from the kill (or the forced failover) to the first round after
//! which every round is decided by Redis again.

use super::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// A sluice configuration with one Redis zone `z` (`1r/m`, no burst) keyed by `X-Key`, on the
/// `[redis]` lines `servers` (e.g. `cluster = [...]`), with `on_error = policy`.
pub(super) fn zone_config(servers: &str, policy: &str, prefix: &str) -> String {
    format!(
        r#"
limit_req_status = 429

[redis]
{servers}
timeout  = "200ms"
on_error = "{policy}"
prefix   = "{prefix}"

[zones.z]
key     = "$http_x_key"
size    = "1m"
rate    = "1r/m"
backend = "redis"

[[servers]]
[[servers.locations]]
path      = "/"
limit_req = {{ zone = "z" }}
return    = {{ status = 200, body = "ok\n" }}
"#
    )
}

/// One round: when it started (since the load began), its key, the two statuses.
#[derive(Clone, Debug)]
pub(super) struct Round {
    pub at: Duration,
    pub key: String,
    pub statuses: (u16, u16),
}

impl Round {
    pub fn by_redis(&self) -> bool {
        self.statuses == (200, 429)
    }
}

/// Rounds fired by `tasks` concurrent loops at `addr` until stopped; keys from `key(n)`.
pub(super) struct Load {
    stop: Arc<AtomicBool>,
    rounds: Arc<Mutex<Vec<Round>>>,
    tasks: tokio::task::JoinSet<()>,
    pub started: Instant,
}

impl Load {
    pub fn start(
        addr: std::net::SocketAddr,
        tasks: u64,
        key: impl Fn(u64) -> String + Send + Sync + 'static,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(Mutex::new(Vec::new()));
        let key = Arc::new(key);
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for t in 0..tasks {
            let (stop, rounds, key) = (stop.clone(), rounds.clone(), key.clone());
            set.spawn(async move {
                let mut n = t;
                while !stop.load(Ordering::Relaxed) {
                    let k = key(n);
                    n += tasks;
                    let at = started.elapsed();
                    let a = request(addr, client(1), "GET", "/", &[("X-Key", &k)]).await;
                    let b = request(addr, client(1), "GET", "/", &[("X-Key", &k)]).await;
                    let round = Round {
                        at,
                        key: k,
                        statuses: (a.status, b.status),
                    };
                    rounds.lock().unwrap().push(round);
                }
            });
        }
        Load {
            stop,
            rounds,
            tasks: set,
            started,
        }
    }

    /// The rounds so far, in the order they started.
    pub fn rounds(&self) -> Vec<Round> {
        let mut r = self.rounds.lock().unwrap().clone();
        r.sort_by_key(|r| r.at);
        r
    }

    /// Waits until the last `n` rounds that started after `from` were all decided by Redis,
    /// for at most `limit`.
    pub async fn wait_resumed(&self, from: Duration, n: usize, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let after: Vec<Round> = self.rounds().into_iter().filter(|r| r.at >= from).collect();
            if after.len() >= n && after[after.len() - n..].iter().all(Round::by_redis) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    pub async fn stop(mut self) -> Vec<Round> {
        self.stop.store(true, Ordering::Relaxed);
        while self.tasks.join_next().await.is_some() {}
        self.rounds()
    }
}

/// Rounds in a row decided by Redis (or lost writes) after which decisions count as resumed.
pub(super) const RESUMED_RUN: usize = 40;

/// What a load saw around an outage at `outage` (since the load started).
#[derive(Debug)]
pub(super) struct Gap {
    /// From the outage to the first of [`RESUMED_RUN`] rounds in a row decided by Redis.
    pub resumed_after: Duration,
    /// Rounds decided by `on_error` (or partly).
    pub fallback_rounds: usize,
    /// Of those, the rounds after decisions resumed: a call that outran its timeout on a busy
    /// machine opens the breaker for its 500 ms again.
    pub relapses: usize,
    /// Rounds admitted twice because the first request was written to the old master after the
    /// new one took over (a write the failover lost): only where `gap` was told to expect them.
    pub lost_writes: usize,
    pub rounds: usize,
    /// The rounds since the outage as runs of one kind: `+MS redis×N`, `+MS on_error×N`.
    pub timeline: String,
}

/// Checks the rounds of a load against `policy` around an outage at `outage`: before it every
/// round was decided by Redis; after it, every round is Redis's or what `policy` answers (no
/// other status, ever), except that rounds started before `lost_until` may be admitted twice
/// (a failover the old master survived loses what was written to it meanwhile); the gap is
/// measured.
pub(super) fn gap(
    rounds: &[Round],
    outage: Duration,
    lost_until: Option<Duration>,
    policy: &str,
    what: &str,
) -> Gap {
    let allowed: &[(u16, u16)] = match policy {
        "deny" => &[(200, 429), (429, 429), (429, 200)],
        "allow" => &[(200, 429), (200, 200)],
        _ => unreachable!(),
    };
    let before: Vec<&Round> = rounds.iter().filter(|r| r.at < outage).collect();
    assert!(!before.is_empty(), "{what}: no round before the outage");
    // Rounds that straddle the outage may see it; those that ended well before must not.
    let early = outage.saturating_sub(Duration::from_millis(500));
    let bad: Vec<&&Round> = before
        .iter()
        .filter(|r| r.at < early && !r.by_redis())
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: rounds before the outage not decided by Redis: {bad:?}"
    );
    let after: Vec<&Round> = rounds.iter().filter(|r| r.at >= outage).collect();
    let lost = |r: &Round| {
        r.statuses == (200, 200)
            && !allowed.contains(&r.statuses)
            && lost_until.is_some_and(|t| r.at <= t)
    };
    for r in after.iter().filter(|r| !lost(r)) {
        assert!(
            allowed.contains(&r.statuses),
            "{what}: a status on_error={policy} does not give: {r:?}"
        );
    }
    let fallback = |r: &Round| !r.by_redis() && !lost(r);
    let resumed_at = (0..after.len()).find(|&i| {
        after.len() - i >= RESUMED_RUN && !after[i..i + RESUMED_RUN].iter().any(|r| fallback(r))
    });
    let resumed_after = resumed_at.map_or(Duration::MAX, |i| after[i].at.saturating_sub(outage));
    Gap {
        resumed_after,
        fallback_rounds: after.iter().filter(|r| fallback(r)).count(),
        relapses: resumed_at.map_or(0, |i| after[i..].iter().filter(|r| fallback(r)).count()),
        lost_writes: after.iter().filter(|r| lost(r)).count(),
        rounds: after.len(),
        timeline: timeline(&after, outage),
    }
}

/// `after` (rounds since `outage`) as runs of rounds decided the same way, each with the time
/// its first round started.
fn timeline(after: &[&Round], outage: Duration) -> String {
    let mut runs: Vec<(Duration, bool, usize)> = Vec::new();
    for r in after {
        match runs.last_mut() {
            Some((_, by_redis, n)) if *by_redis == r.by_redis() => *n += 1,
            _ => runs.push((r.at - outage, r.by_redis(), 1)),
        }
    }
    runs.iter()
        .map(|(at, by_redis, n)| {
            let how = if *by_redis { "redis" } else { "on_error" };
            format!("+{}ms {how}×{n}", at.as_millis())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// sluice stayed up and wrote no panic.
pub(super) fn assert_healthy(s: &mut Sluice, what: &str) {
    assert!(s.alive(), "{what}: sluice died:\n{}", s.log());
    let log = s.log();
    assert!(!log.contains("panicked"), "{what}: a panic:\n{log}");
}

/// The Redis key of client key `key` in zone `z` under `prefix`.
pub(super) fn zone_key(prefix: &str, key: &str) -> String {
    format!("{prefix}:z:{{{}}}", hex(key.as_bytes()))
}
