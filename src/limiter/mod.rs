//! The limiter: nginx's `limit_req` decision for one request.
//!
//! Layers, innermost first:
//! - [`bucket`]: the leaky-bucket arithmetic, pure functions of `now`.
//! - [`memory`]: a zone's per-key states with nginx's expiry and eviction.
//! - `protocol`: nginx's handling of several `limit_req` lines in one
//!   location (lookup order, which limit is charged when, release on a
//!   refusal, maximum delay), written once for both stores.
//! - [`redis`]: zones shared by several instances through Redis, the same
//!   arithmetic in one Lua script per decision.
//! - [`status`]: `$limit_req_status` and the per-zone counts of it.
//! - [`inspect`]: one key's state in an operator's words; [`top`]: the
//!   keys limited most, from a bounded sketch.
//! - this module: [`Store`], the seam a zone's states live behind, and the
//!   entry points [`evaluate`] and [`decide`].
//!
//! No clock here: the caller passes `now` in milliseconds (Redis zones use
//! the Redis server's clock). A rejection is an [`Outcome`], not an error.
//! [`evaluate`] is synchronous and serves locations whose zones are all in
//! memory; [`decide`] is the async entry point that also awaits Redis zones,
//! and goes straight to [`evaluate`] (no await) when none is involved.
//!
//! The store seam: a decision needs three operations on a zone — look a key
//! up (charging it or holding it), account a held key, release a held key.
//! The memory store does them under a shard lock. A remote store (Redis)
//! answers the same three questions; [`Store`] is an enum so that adding it
//! is a new variant here, not a change to the proxy, which only calls
//! [`decide`].
//!
//! The limiter imports nothing from the rest of the crate (what it reports,
//! it reports as values: [`redis::RedisEvent`]), so that it could be a crate
//! of its own.

pub mod algorithm;
pub mod bucket;
pub mod inspect;
pub mod memory;
mod protocol;
pub mod redis;
pub mod status;
pub mod top;

pub use algorithm::{Algorithm, Policy, Standing};
pub use bucket::{Bucket, Rate};
pub use memory::{Held, Locked, Lookup, MemoryZone, Stored};
pub use redis::{OnError, RedisBackend, RedisConfig, RedisZone, RejectCache};
pub use status::{DecisionCounts, LimitReqStatus};

use protocol::{AllLocked, Decision};
use std::sync::Arc;

/// Where a zone's states live.
pub enum Store {
    Memory(MemoryZone),
    /// In Redis; its synchronous operations below act on the zone's local
    /// in-memory fallback (`on_error = "local"`).
    Redis(RedisZone),
}

impl Store {
    /// The in-memory zone synchronous decisions use.
    pub fn memory(&self) -> &MemoryZone {
        match self {
            Store::Memory(m) => m,
            Store::Redis(r) => r.local(),
        }
    }

    pub fn is_redis(&self) -> bool {
        matches!(self, Store::Redis(_))
    }

    /// States currently tracked in this instance's memory (for a Redis zone:
    /// its local fallback).
    pub fn len(&self) -> usize {
        self.memory().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The runtime part of a zone that a decision needs: its name, policy
/// (algorithm and rate) and store. (The key template lives with the
/// configuration.) One per configuration generation; the store and the
/// counts may outlive it.
pub struct ZoneRef {
    pub name: Arc<str>,
    pub policy: Policy,
    pub store: Arc<Store>,
    /// Decisions by `$limit_req_status`, for metrics; kept across reloads.
    pub counts: Arc<DecisionCounts>,
    /// A Redis zone's rejection cache ([`redis::cache`]), of this
    /// generation only: it knows this generation's policy and widest
    /// limit. `None`: every decision asks Redis.
    pub reject_cache: Option<RejectCache>,
}

impl ZoneRef {
    pub fn new(name: impl Into<Arc<str>>, policy: Policy, store: Arc<Store>) -> ZoneRef {
        ZoneRef {
            name: name.into(),
            policy,
            store,
            counts: Default::default(),
            reject_cache: None,
        }
    }
}

/// One `limit_req` line: a zone with its burst and delay threshold.
pub struct Limit {
    pub zone: Arc<ZoneRef>,
    /// `burst*1000`.
    pub burst: u64,
    /// `delay*1000`; 0 delays every excess request; `u64::MAX` is `nodelay`.
    pub delay: u64,
}

impl Limit {
    pub const NODELAY: u64 = u64::MAX;

    /// The zone's policy: its algorithm and rate.
    pub fn policy(&self) -> &Policy {
        &self.zone.policy
    }

    /// Requests accepted at once from an empty state (`RateLimit-Policy` `q`).
    pub fn quota(&self) -> u64 {
        self.zone.policy.quota(self.burst)
    }

    /// The seconds [`Limit::quota`] is for (`RateLimit-Policy` `w`).
    pub fn quota_window_secs(&self) -> u64 {
        self.zone.policy.quota_window_secs(self.burst)
    }
}

/// The result of evaluating a location's limits for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every key was empty: nothing was counted (`$limit_req_status` is `-`).
    Unlimited,
    /// Accepted and charged. `delay_ms` is the largest delay over the limits;
    /// `limit` and `excess` belong to the limit that gave it (for the log).
    Accepted {
        delay_ms: u64,
        limit: usize,
        excess: u64,
        /// The limit with the fewest requests left after this one, and
        /// where the key stands against it (for `RateLimit` headers).
        tightest: (usize, Standing),
    },
    /// Over the burst of `limit`; nothing was charged.
    Rejected {
        limit: usize,
        excess: u64,
        /// Until a request from this key would be accepted by that limit.
        wait_ms: u64,
    },
    /// The zone of `limit` could not store a new state.
    NoMemory { limit: usize },
    /// The Redis zone of `limit` could not decide and `on_error = "deny"`:
    /// rejected, nothing charged.
    Unavailable { limit: usize },
}

/// The limits of one location, in configuration order.
pub type LimitSet = [Limit];

/// nginx's `ngx_http_limit_req_handler` decision for a request at `now`.
///
/// `key(i)` gives the evaluated key of limit `i`, `None` when it is empty or
/// too long (that limit is skipped). Limits are looked up in order; only the
/// last configured one is charged at lookup, earlier ones are held and then
/// charged in reverse order once all passed; a rejection charges nothing
/// (see `protocol`).
///
/// The decision is atomic, as in nginx where one worker decides a request
/// without interruption: every shard it touches is locked first, in a global
/// order (zone address, shard), and released at the end.
pub fn evaluate<K: AsRef<[u8]>>(
    limits: &LimitSet,
    now: u64,
    mut key: impl FnMut(usize) -> Option<K>,
) -> Outcome {
    match limits.len() {
        0 => Outcome::Unlimited,
        1 => match key(0) {
            Some(k) => evaluate_one(limits, now, k.as_ref()),
            None => Outcome::Unlimited,
        },
        n => {
            let keys: Vec<Option<K>> = (0..n).map(&mut key).collect();
            let Some(locks) = AllLocked::lock(limits, &keys) else {
                return Outcome::Unlimited;
            };
            let mut decision = Decision::new(limits, now, locks);
            decision.look_up(&keys, true);
            decision.finish()
        }
    }
}

/// The common case, one limit: one lock, no allocation.
fn evaluate_one(limits: &LimitSet, now: u64, key: &[u8]) -> Outcome {
    let l = &limits[0];
    let memory = l.zone.store.memory();
    match memory.lookup(key, now, &l.zone.policy, l.burst, true) {
        Lookup::Charged { excess, standing } => {
            protocol::accepted(limits, &[Some(Stored { excess, standing })])
        }
        refusal => protocol::refusal_of(0, refusal),
    }
}

/// nginx's decision for a request at `now`, for any mix of stores: the
/// async form of [`evaluate`]. A location whose zones are all in memory is
/// decided by [`evaluate`] directly, without awaiting anything; one with a
/// Redis zone evaluates its keys first, then awaits Redis (see [`redis`]).
pub async fn decide<K: AsRef<[u8]>>(
    limits: &LimitSet,
    now: u64,
    mut key: impl FnMut(usize) -> Option<K>,
) -> Outcome {
    if !limits.iter().any(|l| l.zone.store.is_redis()) {
        return evaluate(limits, now, key);
    }
    if limits.len() == 1 {
        // The common case: one key, no allocation (a refusal the rejection
        // cache answers costs no more than a lookup).
        let one = key(0);
        drop(key);
        return redis::decide(limits, now, std::slice::from_ref(&one)).await;
    }
    let keys: Vec<Option<K>> = (0..limits.len()).map(&mut key).collect();
    drop(key);
    redis::decide(limits, now, &keys).await
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod store_tests;

/// proptest's settings for sluice's property tests (here, in the lowest
/// layer, so that every layer's tests may use them): `cases` cases, and the
/// seed of any failure kept beside the test's source file
/// (`NAME.proptest-regressions`, replayed first on the next run), not in a
/// directory at the top of the repository.
#[cfg(test)]
pub(crate) fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, FileFailurePersistence};
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}
