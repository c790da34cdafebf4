//! `redis-race`: the seed article's Redis experiment, with sluice's script,
//! and the cost of a Redis decision against a memory one.
//!
//! `redis-race race --url URL`: 50 threads × 4 requests at once on one
//! bucket of capacity 10 (burst=9 nodelay at 1r/m, so nothing leaks during
//! a run), three ways:
//! - `atomic`: sluice's Lua script (`limit_req.lua`), one call per request;
//! - `read-write`: read the state (HMGET + TIME), compute with the same
//!   nginx arithmetic in Rust, write it back (HSET): three round trips;
//! - `read-1ms-write`: the same with 1 ms between reading and writing.
//!
//! It prints the requests admitted per run; a correct limiter admits 10.
//! `scripts/redis-race.sh` starts a redis-server and runs it.
//!
//! `redis-race cost --url URL`: median time of one decision through
//! `limiter::decide`, memory zone against Redis zone, sequential and with
//! 64 concurrent tasks (the figures quoted in the README).

use clap::{Parser, Subcommand};
use sluice::limiter::bucket::{Bucket, Rate};
use sluice::limiter::redis::SCRIPT;
use sluice::limiter::{
    self, Limit, MemoryZone, OnError, Outcome, RedisBackend, RedisConfig, RedisZone, Store, ZoneRef,
};
use std::sync::{Arc, Barrier};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Parser)]
#[command(about = "The seed article's Redis race, and the cost of a Redis decision")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Atomic script against read-compute-write, 50 threads × 4 requests.
    Race {
        #[arg(long)]
        url: String,
        /// Runs of each variant.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        #[arg(long, default_value_t = 50)]
        threads: usize,
        #[arg(long, default_value_t = 4)]
        requests: usize,
    },
    /// Median time per decision, memory against Redis.
    Cost {
        #[arg(long)]
        url: String,
        /// Decisions per measurement.
        #[arg(long, default_value_t = 20_000)]
        n: usize,
        /// Concurrent tasks for the concurrent measurement.
        #[arg(long, default_value_t = 64)]
        tasks: usize,
    },
}

/// Capacity 10: burst=9, at 1r/m (16 milli-requests per second).
const BURST: u64 = 9_000;
const RATE_MILLI: u64 = 16;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Atomic,
    ReadWrite,
    ReadGapWrite,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Atomic => "atomic (sluice's Lua script)",
            Variant::ReadWrite => "read-compute-write",
            Variant::ReadGapWrite => "read, 1 ms, write",
        }
    }
}

/// One request against `key`; true if admitted.
fn request(
    con: &mut redis::Connection,
    script: &redis::Script,
    variant: Variant,
    key: &str,
) -> redis::RedisResult<bool> {
    if variant == Variant::Atomic {
        let r: Vec<i64> = script
            .key(key)
            .arg("charge")
            .arg("")
            .arg(RATE_MILLI)
            .arg(BURST)
            .invoke(con)?;
        return Ok(r[0] == 1);
    }
    // Read: the state and the server's clock.
    let (state, time): ((Option<u64>, Option<u64>), (u64, u64)) = redis::pipe()
        .cmd("HMGET")
        .arg(key)
        .arg("e")
        .arg("l")
        .cmd("TIME")
        .query(con)?;
    let now = time.0 * 1000 + time.1 / 1000;
    let rate = Rate::from_milli(RATE_MILLI).expect("positive");
    let (excess, moved) = match state {
        (Some(e), Some(l)) => {
            let step = Bucket { excess: e, last: l }.step(now, rate);
            (step.excess, step.ms != 0)
        }
        _ => (0, true),
    };
    if excess > BURST {
        return Ok(false);
    }
    if variant == Variant::ReadGapWrite {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Write.
    let mut cmd = redis::cmd("HSET");
    cmd.arg(key).arg("e").arg(excess);
    if moved {
        cmd.arg("l").arg(now);
    }
    cmd.query::<()>(con)?;
    Ok(true)
}

fn race(url: &str, runs: usize, threads: usize, requests: usize) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    println!(
        "{threads} threads x {requests} requests at once, capacity 10 (burst=9 nodelay, 1r/m); a correct limiter admits 10"
    );
    let tag = std::process::id();
    for variant in [Variant::Atomic, Variant::ReadWrite, Variant::ReadGapWrite] {
        let mut admitted = Vec::new();
        for run in 0..runs {
            let key = format!("race:{tag}:{}:{run}", variant as u8);
            // One connection per thread, opened before the start line.
            let mut cons = (0..threads)
                .map(|_| client.get_connection())
                .collect::<Result<Vec<_>, _>>()?;
            let barrier = Arc::new(Barrier::new(threads));
            let total: usize = std::thread::scope(|s| {
                let handles: Vec<_> = cons
                    .iter_mut()
                    .map(|con| {
                        let barrier = barrier.clone();
                        let key = key.clone();
                        s.spawn(move || {
                            let script = redis::Script::new(SCRIPT);
                            barrier.wait();
                            (0..requests)
                                .filter(|_| {
                                    request(con, &script, variant, &key).expect("redis request")
                                })
                                .count()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            admitted.push(total);
        }
        let list: Vec<String> = admitted.iter().map(|n| n.to_string()).collect();
        println!(
            "{:<30} admitted per run: {}",
            variant.name(),
            list.join(" ")
        );
    }
    Ok(())
}

fn zone(name: &str, store: Store) -> Arc<ZoneRef> {
    Arc::new(ZoneRef {
        name: name.into(),
        // fast enough that nearly every decision passes
        policy: sluice::limiter::Policy::leaky(Rate::per_second(1_000_000).unwrap()),
        store: Arc::new(store),
        counts: Default::default(),
    })
}

fn median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

async fn measure(limits: Arc<Vec<Limit>>, n: usize, tasks: usize) -> (Vec<Duration>, Duration) {
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for t in 0..tasks {
        let limits = limits.clone();
        let per = n / tasks;
        set.spawn(async move {
            let mut times = Vec::with_capacity(per);
            for i in 0..per {
                let key = ((t * per + i) % 1000) as u32;
                let t0 = Instant::now();
                let o = limiter::decide(&limits, 1_000_000_000, |_| Some(key.to_be_bytes())).await;
                times.push(t0.elapsed());
                assert!(
                    !matches!(o, Outcome::Unavailable { .. }),
                    "Redis did not answer"
                );
            }
            times
        });
    }
    let mut all = Vec::with_capacity(n);
    while let Some(r) = set.join_next().await {
        all.extend(r.unwrap());
    }
    (all, start.elapsed())
}

async fn cost(url: &str, n: usize, tasks: usize) {
    let backend = RedisBackend::new(
        RedisConfig {
            url: url.to_string(),
            timeout: Duration::from_secs(5),
            on_error: OnError::Deny,
            prefix: format!("cost{}", std::process::id()),
            ..Default::default()
        },
        sluice::limiter::redis::ignore_events(),
    )
    .expect("redis url");
    let mem = Arc::new(vec![Limit {
        zone: zone("m", Store::Memory(MemoryZone::with_size(1 << 20))),
        burst: 5000,
        delay: Limit::NODELAY,
    }]);
    let red = Arc::new(vec![Limit {
        zone: zone("r", Store::Redis(RedisZone::new(backend, "r", 1 << 20))),
        burst: 5000,
        delay: Limit::NODELAY,
    }]);
    // warm up: connection, script cache, keys
    measure(red.clone(), 2000, 1).await;
    measure(mem.clone(), 2000, 1).await;
    println!("{n} decisions each, 1000 keys, one limit_req (burst=5 nodelay)");
    println!(
        "{:<8} {:<12} {:>12} {:>12} {:>14}",
        "store", "tasks", "median", "p99", "decisions/s"
    );
    for (name, limits) in [("memory", &mem), ("redis", &red)] {
        for t in [1, tasks] {
            let (times, total) = measure(limits.clone(), n, t).await;
            let (med, p99) = median(times);
            println!(
                "{name:<8} {t:<12} {:>9.2} µs {:>9.2} µs {:>14.0}",
                med.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6,
                n as f64 / total.as_secs_f64()
            );
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Race {
            url,
            runs,
            threads,
            requests,
        } => {
            if let Err(e) = race(&url, runs, threads, requests) {
                eprintln!("redis-race: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
        Cmd::Cost { url, n, tasks } => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(cost(&url, n, tasks));
        }
    }
    std::process::ExitCode::SUCCESS
}
