//! `redis-race`: the seed article's Redis experiment, with sluice's script,
//! and the cost of a Redis decision against a memory one.
//!
//! `redis-race race --url URL`: 50 threads × 4 requests at once on one
//! bucket of capacity 10, for two limits:
//! - the article's own: a token bucket of capacity 10 refilled at 1/s
//!   (`algorithm = "token_bucket"`, `rate = "1r/s"`, `burst = 9`);
//! - nginx's leaky bucket, `burst=9 nodelay` at 1r/m (nothing leaks during
//!   a run);
//!
//! each three ways:
//! - `atomic`: sluice's Lua script (`limit_req.lua`), one call per request;
//! - `read-compute-write`: read the state (HMGET + TIME), decide with the
//!   same Rust arithmetic the script mirrors, write it back (HSET): two
//!   round trips with a gap between them;
//! - `read, 1 ms, write`: the same with 1 ms between reading and writing.
//!
//! It prints the requests admitted per run; a correct limiter admits 10.
//! `scripts/redis-race.sh` starts a redis-server and runs it, and fails if
//! an atomic run admits anything but 10.
//!
//! `redis-race cost --url URL`: median time of one decision through
//! `limiter::decide`, memory zone against Redis zone, sequential and with
//! 64 concurrent tasks (the figures quoted in the README).

use clap::{Parser, Subcommand};
use sluice::limiter::algorithm::{self, Algorithm, Cell, Log, Policy, View};
use sluice::limiter::bucket::Rate;
use sluice::limiter::redis::{LEAKY_SCRIPT, SCRIPT, hash_fields};
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

/// One limit of capacity 10 raced on.
struct Case {
    policy: Policy,
    /// Milli-requests: burst 9, capacity 10.
    burst: u64,
    /// As the configuration says it.
    text: &'static str,
}

/// The article's token bucket, then nginx's leaky bucket.
fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    if let Some(policy) = Policy::new(Algorithm::TokenBucket, 1, 1000) {
        cases.push(Case {
            policy,
            burst: 9_000,
            text: "algorithm = \"token_bucket\", rate = \"1r/s\", burst = 9",
        });
    }
    if let Some(rate) = Rate::per_minute(1) {
        cases.push(Case {
            policy: Policy::leaky(rate),
            burst: 9_000,
            text: "algorithm = \"leaky_bucket\", rate = \"1r/m\", burst = 9, nodelay",
        });
    }
    cases
}

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
    case: &Case,
    key: &str,
) -> redis::RedisResult<bool> {
    let p = &case.policy;
    if variant == Variant::Atomic && p.algorithm == Algorithm::LeakyBucket {
        // leaky_bucket.lua, what sluice sends for leaky buckets only.
        let r: Vec<i64> = script
            .key(key)
            .arg("charge")
            .arg("")
            .arg(p.rate.milli())
            .arg(case.burst)
            .invoke(con)?;
        return Ok(r.first() == Some(&1));
    }
    if variant == Variant::Atomic {
        // limit_req.lua's calling convention (src/limiter/redis/script.rs).
        let r: Vec<i64> = script
            .key(key)
            .arg("charge")
            .arg("")
            .arg(p.algorithm.name())
            .arg(p.count)
            .arg(p.period_ms)
            .arg(case.burst)
            .arg(p.rate.milli())
            .invoke(con)?;
        return Ok(r.first() == Some(&1));
    }
    // Read: the state, in the script's fields, and the server's clock.
    let fields = hash_fields(p.algorithm);
    let (state, time): (Vec<Option<u64>>, (u64, u64)) = redis::pipe()
        .cmd("HMGET")
        .arg(key)
        .arg(fields)
        .cmd("TIME")
        .query(con)?;
    let now = time.0 * 1000 + time.1 / 1000;
    let at = |i: usize| state.get(i).copied().flatten().unwrap_or(0);
    let mut cell = Cell {
        last: at(0),
        value: at(1),
        aux: at(2),
    };
    let mut log = Log::new();
    let view = View {
        cell: &cell,
        log: &log,
    };
    if !algorithm::check(p, case.burst, view, now, 0).admit {
        return Ok(false);
    }
    if variant == Variant::ReadGapWrite {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Write.
    algorithm::charge(p, &mut cell, &mut log, now);
    let mut cmd = redis::cmd("HSET");
    cmd.arg(key);
    for (f, v) in fields.iter().zip([cell.last, cell.value, cell.aux]) {
        cmd.arg(*f).arg(v);
    }
    cmd.query::<()>(con)?;
    Ok(true)
}

/// `threads` threads, each with its connection, released at once, each
/// sending `requests` requests on `key`: how many were admitted.
fn one_run(
    client: &redis::Client,
    variant: Variant,
    case: &Case,
    key: &str,
    (threads, requests): (usize, usize),
) -> redis::RedisResult<usize> {
    // One connection per thread, opened before the start line.
    let mut cons = (0..threads)
        .map(|_| client.get_connection())
        .collect::<Result<Vec<_>, _>>()?;
    let barrier = Arc::new(Barrier::new(threads));
    std::thread::scope(|s| {
        let handles: Vec<_> = cons
            .iter_mut()
            .map(|con| {
                let barrier = barrier.clone();
                s.spawn(move || {
                    let script = redis::Script::new(match case.policy.algorithm {
                        Algorithm::LeakyBucket => LEAKY_SCRIPT,
                        _ => SCRIPT,
                    });
                    barrier.wait();
                    let mut admitted = 0;
                    for _ in 0..requests {
                        if request(con, &script, variant, case, key)? {
                            admitted += 1;
                        }
                    }
                    Ok::<usize, redis::RedisError>(admitted)
                })
            })
            .collect();
        let mut total = 0;
        for h in handles {
            match h.join() {
                Ok(n) => total += n?,
                Err(_) => {
                    return Err(redis::RedisError::from((
                        redis::ErrorKind::Client,
                        "a racing thread panicked",
                    )));
                }
            }
        }
        Ok(total)
    })
}

fn race(url: &str, runs: usize, threads: usize, requests: usize) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    println!(
        "{threads} threads x {requests} requests at once on one key; a correct limiter admits 10"
    );
    let tag = std::process::id();
    for (ci, case) in cases().iter().enumerate() {
        let alg = case.policy.algorithm.name();
        println!("capacity 10: {}", case.text);
        for variant in [Variant::Atomic, Variant::ReadWrite, Variant::ReadGapWrite] {
            let mut admitted = Vec::new();
            for run in 0..runs {
                // A hash tag, as sluice's keys have.
                let key = format!("race:{tag}:{ci}:{}:{{{run}}}", variant as u8);
                admitted.push(one_run(&client, variant, case, &key, (threads, requests))?);
            }
            let list: Vec<String> = admitted.iter().map(|n| n.to_string()).collect();
            println!(
                "{alg:<13} {:<30} admitted per run: {}",
                variant.name(),
                list.join(" ")
            );
        }
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
        // every decision goes to Redis: this measures the calls
        reject_cache: None,
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
            timeout: Duration::from_secs(5),
            on_error: OnError::Deny,
            prefix: format!("cost{}", std::process::id()),
            ..RedisConfig::url(url)
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
