//! The limiter: nginx's `limit_req` decision for one request.
//!
//! Layers, innermost first:
//! - [`bucket`]: the leaky-bucket arithmetic, pure functions of `now`.
//! - [`memory`]: a zone's per-key states with nginx's expiry and eviction.
//! - [`redis`]: zones shared by several instances through Redis, the same
//!   arithmetic in one Lua script per decision.
//! - this module: [`Store`], the seam a zone's states live behind, and
//!   [`evaluate`], nginx's handling of several `limit_req` lines in one
//!   location (lookup order, which limit is charged when, maximum delay).
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
//! [`LimitSet::decide`].

pub mod bucket;
pub mod memory;
pub mod redis;

pub use bucket::{Bucket, Rate};
pub use memory::{Held, Lookup, MemoryZone};
pub use redis::{OnError, RedisBackend, RedisConfig, RedisZone};

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
    fn memory(&self) -> &MemoryZone {
        match self {
            Store::Memory(m) => m,
            Store::Redis(r) => r.local(),
        }
    }

    fn lookup(&self, key: &[u8], now: u64, rate: Rate, burst: u64, charge: bool) -> Lookup {
        self.memory().lookup(key, now, rate, burst, charge)
    }

    fn account(&self, held: Held, now: u64, rate: Rate) -> u64 {
        self.memory().account(held, now, rate)
    }

    fn release(&self, held: Held) {
        self.memory().release(held)
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

/// The runtime part of a zone that a decision needs: its name, rate and store.
/// (The key template lives with the configuration.)
pub struct ZoneRef {
    pub name: Arc<str>,
    pub rate: Rate,
    pub store: Arc<Store>,
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
/// charged in reverse order once all passed; a rejection charges nothing.
pub fn evaluate<K: AsRef<[u8]>>(
    limits: &LimitSet,
    now: u64,
    mut key: impl FnMut(usize) -> Option<K>,
) -> Outcome {
    let n = limits.len();
    let mut held: Vec<Option<Held>> = Vec::new();
    let mut any = false;
    // (index where the loop stopped, excess there) when accepted
    let mut stop: Option<(usize, u64)> = None;

    for (i, limit) in limits.iter().enumerate() {
        let Some(k) = key(i) else {
            held.push(None);
            continue;
        };
        any = true;
        let z = &limit.zone;
        match z
            .store
            .lookup(k.as_ref(), now, z.rate, limit.burst, i == n - 1)
        {
            Lookup::Held { held: h, .. } => held.push(Some(h)),
            Lookup::Charged { excess } => {
                stop = Some((i, excess));
                break;
            }
            Lookup::Busy { excess, wait_ms } => {
                release(limits, &held);
                return Outcome::Rejected {
                    limit: i,
                    excess,
                    wait_ms,
                };
            }
            Lookup::NoMemory => {
                release(limits, &held);
                return Outcome::NoMemory { limit: i };
            }
        }
    }
    if !any {
        return Outcome::Unlimited;
    }

    // Loop ended with the last limit skipped: start from excess 0 there.
    let (at, excess) = stop.unwrap_or((n - 1, 0));
    let mut best = (
        bucket::delay_ms(excess, limits[at].delay, limits[at].zone.rate),
        at,
        excess,
    );
    for j in (0..at).rev() {
        let Some(h) = held[j] else { continue };
        let limit = &limits[j];
        let excess = limit.zone.store.account(h, now, limit.zone.rate);
        let delay = bucket::delay_ms(excess, limit.delay, limit.zone.rate);
        if delay > best.0 {
            best = (delay, j, excess);
        }
    }
    Outcome::Accepted {
        delay_ms: best.0,
        limit: best.1,
        excess: best.2,
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
    let keys: Vec<Option<K>> = (0..limits.len()).map(&mut key).collect();
    drop(key);
    redis::decide(limits, now, &keys).await
}

fn release(limits: &LimitSet, held: &[Option<Held>]) {
    for (j, h) in held.iter().enumerate() {
        if let Some(h) = h {
            limits[j].zone.store.release(*h);
        }
    }
}

#[cfg(test)]
mod tests;
