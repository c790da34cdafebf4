//! Zones in Redis (config/reference.md "Zones in Redis"), against a real `redis-server` each test starts.
//!
//! - The nginx vectors (nginx-limit-req.md §11 and §3) as one table that
//!   drives every backend: memory, Redis, and locations mixing both, in one
//!   slot or several; plus random sequences compared decision by decision.
//! - Every other algorithm: the Lua script is the Rust arithmetic, Redis
//!   decides as memory, keys expire once as new.
//! - Two sluice instances sharing a zone admit exactly what one would.
//! - Redis killed, frozen, or down at startup: each `on_error` policy, no
//!   request held past `timeout`, recovery without restart.
//! - `[redis]` configuration errors, located.
//!
//! # Layout
//! - [`vectors`]: the vector table on every layout of memory and Redis zones, and random
//!   sequences against the memory core.
//! - [`algorithms`]: every algorithm: the script against the pure functions on any state, and
//!   Redis against memory on random sequences and mixed locations.
//! - [`expiry`]: keys expire once as new, and then decide as new.
//! - [`article`]: the seed article's token-bucket single run through the proxy.
//! - [`script`]: the Lua script itself: keys, expiry, the server's clock, concurrency.
//! - [`instances`]: two instances sharing one zone.
//! - [`outages`]: Redis killed, frozen, down at startup; TLS to Redis.
//! - [`config`]: the `[redis]` table and its errors.
//! - [`cluster`]: zones in a Redis Cluster (3 masters + 3 replicas): as one Redis, atomic
//!   locations, a master killed under load.
//! - [`sentinel`]: zones on the master Redis Sentinel names: a forced failover and a killed
//!   master under load.
//! - [`failover`]: the load and the gap measurement both use.
//! - [`function`]: decisions by `FCALL` of the function library, and the fallbacks to
//!   `EVALSHA` (`FUNCTION FLUSH`, a server without functions).
//! - [`forgive`]: a key forgiven on one instance is admitted at once by another that cached its
//!   refusal: one Redis, a Cluster, Sentinel after a failover.

mod algorithms;
mod article;
mod cache;
mod cluster;
mod config;
mod expiry;
mod failover;
mod forgive;
mod function;
mod instances;
mod layouts;
mod outages;
mod script;
mod sentinel;
mod vectors;

use crate::support::{Port, RedisServer, Reply, Sluice, TlsFiles, client, eventually, request};
use sluice::limiter::redis::{TimeSource, key_slot};
use sluice::limiter::{
    self, Limit, MemoryZone, OnError, Outcome, Policy, Rate, RedisBackend, RedisConfig, RedisZone,
    Store, ZoneRef,
};
use std::sync::Arc;
use std::time::Duration;

/// sluice on `config`, with the error log at info (the Redis tests read its info lines).
fn start_sluice(config: &str) -> Sluice {
    Sluice::builder(config).env("RUST_LOG", "info").start()
}

/// `GET /` with the header `name: value`, from 127.0.0.1.
async fn get_with(s: &Sluice, name: &str, value: &str) -> Reply {
    request(s.addr(), client(1), "GET", "/", &[(name, value)]).await
}

const T0: u64 = 1_000_000_000;

const NODELAY: u64 = Limit::NODELAY;

fn backend(url: &str, time: TimeSource, prefix: &str, on_error: OnError) -> Arc<RedisBackend> {
    RedisBackend::with_time_source(
        RedisConfig {
            // generous: a loaded test machine must not turn into on_error
            timeout: Duration::from_secs(5),
            on_error,
            prefix: prefix.to_string(),
            ..RedisConfig::url(url)
        },
        time,
    )
    .unwrap()
}

/// A small deterministic generator (the tests must repeat exactly).
struct Lcg(u64);

impl Lcg {
    /// Uniform in `0..n`.
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }

    /// Uniform in `0..=n`, for any `n` (`next` takes 31 random bits).
    fn upto(&mut self, n: u64) -> u64 {
        let wide = (self.next(1 << 31) << 31) | self.next(1 << 31);
        wide % (n.saturating_add(1)).max(1)
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.next(xs.len() as u64) as usize]
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Two requests with key `key`: their statuses. Each must be answered well
/// within the timeout plus the proxy's own time.
async fn twice(s: &Sluice, key: &str) -> (u16, u16) {
    let a = get_with(s, "X-Key", key).await;
    let b = get_with(s, "X-Key", key).await;
    for r in [&a, &b] {
        assert!(
            r.elapsed < Duration::from_millis(1000),
            "a request took {:?}",
            r.elapsed
        );
    }
    (a.status, b.status)
}

fn key_in_redis(redis: &RedisServer, key: &str) -> bool {
    let mut c = redis.client();
    redis::cmd("EXISTS")
        .arg(format!("t:z:{{{}}}", hex(key.as_bytes())))
        .query::<i64>(&mut c)
        .unwrap()
        == 1
}
