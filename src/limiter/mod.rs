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
pub mod status;

pub use bucket::{Bucket, Rate};
pub use memory::{Held, Locked, Lookup, MemoryZone};
pub use redis::{OnError, RedisBackend, RedisConfig, RedisZone};
pub use status::{DecisionCounts, LimitReqStatus};

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

/// The runtime part of a zone that a decision needs: its name, rate and store.
/// (The key template lives with the configuration.)
pub struct ZoneRef {
    pub name: Arc<str>,
    pub rate: Rate,
    pub store: Arc<Store>,
    /// Decisions by `$limit_req_status`, for metrics; kept across reloads.
    pub counts: Arc<DecisionCounts>,
}

impl ZoneRef {
    pub fn new(name: impl Into<Arc<str>>, rate: Rate, store: Arc<Store>) -> ZoneRef {
        ZoneRef {
            name: name.into(),
            rate,
            store,
            counts: Default::default(),
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

    /// Requests this limit would still accept at once, given the excess
    /// stored by an accepted request (its `RateLimit` `r`).
    pub fn remaining(&self, stored_excess: u64) -> u64 {
        self.burst.saturating_sub(stored_excess) / bucket::ONE
    }

    /// Requests accepted at once from an empty bucket (`RateLimit-Policy` `q`).
    pub fn quota(&self) -> u64 {
        self.burst / bucket::ONE + 1
    }

    /// Milliseconds until this limit accepts one more request at once than
    /// it does after a request stored `stored_excess` (`RateLimit` `t`):
    /// the content must leak down to `burst - remaining*1000 - 1000`.
    pub fn next_unit_ms(&self, stored_excess: u64) -> u64 {
        let left = self.remaining(stored_excess);
        let target = self.burst - left * bucket::ONE;
        self.zone
            .rate
            .time_to_leak((stored_excess + bucket::ONE).saturating_sub(target))
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
        /// The limit with the fewest requests left after this one, and its
        /// stored excess (for `RateLimit` headers).
        tightest: (usize, u64),
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
///
/// The decision is atomic, as in nginx where one worker decides a request
/// without interruption: every shard it touches is locked first, in a global
/// order (zone address, shard), and released at the end.
pub fn evaluate<K: AsRef<[u8]>>(
    limits: &LimitSet,
    now: u64,
    mut key: impl FnMut(usize) -> Option<K>,
) -> Outcome {
    let n = limits.len();
    if n == 0 {
        return Outcome::Unlimited;
    }
    if n == 1 {
        // The common case: one lock, no allocation.
        let Some(k) = key(0) else {
            return Outcome::Unlimited;
        };
        let l = &limits[0];
        return match l
            .zone
            .store
            .memory()
            .lookup(k.as_ref(), now, l.zone.rate, l.burst, true)
        {
            Lookup::Charged { excess } => Outcome::Accepted {
                delay_ms: bucket::delay_ms(excess, l.delay, l.zone.rate),
                limit: 0,
                excess,
                tightest: (0, excess),
            },
            Lookup::Busy { excess, wait_ms } => Outcome::Rejected {
                limit: 0,
                excess,
                wait_ms,
            },
            Lookup::NoMemory => Outcome::NoMemory { limit: 0 },
            Lookup::Held { .. } => unreachable!("the last limit is charged at lookup"),
        };
    }

    // Keys, their shards, and the shards to lock in global order.
    let keys: Vec<Option<K>> = (0..n).map(&mut key).collect();
    let mut spots: Vec<Option<(usize, u64)>> = Vec::with_capacity(n);
    let mut order: Vec<(usize, usize, &MemoryZone)> = Vec::with_capacity(n);
    for (i, k) in keys.iter().enumerate() {
        let Some(k) = k else {
            spots.push(None);
            continue;
        };
        let m = limits[i].zone.store.memory();
        let (shard, hash) = m.locate(k.as_ref());
        let id = (m as *const MemoryZone as usize, shard);
        if !order.iter().any(|o| (o.0, o.1) == id) {
            order.push((id.0, id.1, m));
        }
        spots.push(Some((shard, hash)));
    }
    if order.is_empty() {
        return Outcome::Unlimited;
    }
    order.sort_by_key(|o| (o.0, o.1));
    let mut locks: Vec<Locked<'_>> = order.iter().map(|o| o.2.lock(o.1)).collect();
    let lock_of = |i: usize, shard: usize| {
        let id = limits[i].zone.store.memory() as *const MemoryZone as usize;
        order
            .iter()
            .position(|o| o.0 == id && o.1 == shard)
            .expect("every keyed limit's shard is locked")
    };

    let mut held: Vec<Option<(usize, Held)>> = Vec::with_capacity(n);
    // (index where the loop stopped, excess there) when accepted
    let mut stop: Option<(usize, u64)> = None;
    for (i, limit) in limits.iter().enumerate() {
        let (Some(k), Some((shard, hash))) = (&keys[i], spots[i]) else {
            held.push(None);
            continue;
        };
        let g = lock_of(i, shard);
        let z = &limit.zone;
        match locks[g].lookup(hash, k.as_ref(), now, z.rate, limit.burst, i == n - 1) {
            Lookup::Held { held: h, .. } => held.push(Some((g, h))),
            Lookup::Charged { excess } => {
                stop = Some((i, excess));
                break;
            }
            Lookup::Busy { excess, wait_ms } => {
                release(&mut locks, &held);
                return Outcome::Rejected {
                    limit: i,
                    excess,
                    wait_ms,
                };
            }
            Lookup::NoMemory => {
                release(&mut locks, &held);
                return Outcome::NoMemory { limit: i };
            }
        }
    }

    // Accepted: charge the held limits in reverse order, at the same `now`.
    let mut excess: Vec<Option<u64>> = vec![None; n];
    excess[n - 1] = stop.map(|(_, e)| e);
    for j in (0..n - 1).rev() {
        if let Some((g, h)) = held[j] {
            excess[j] = Some(locks[g].account(h, now, limits[j].zone.rate));
        }
    }
    accepted(limits, &excess)
}

/// The outcome of an accepted request from the excess each limit stored
/// (`None`: key empty, not charged). nginx's delay: start from the last
/// limit (excess 0 if it was skipped), then earlier ones in reverse order; a
/// strictly larger delay replaces it, with its limit and excess for the log.
/// `tightest`: the limit with the fewest requests left, last limit first.
pub(crate) fn accepted(limits: &LimitSet, excess: &[Option<u64>]) -> Outcome {
    let at = limits.len() - 1;
    let e = excess[at].unwrap_or(0);
    let mut best = (
        bucket::delay_ms(e, limits[at].delay, limits[at].zone.rate),
        at,
        e,
    );
    let mut tightest = excess[at].map(|e| (limits[at].remaining(e), at, e));
    for j in (0..at).rev() {
        let Some(e) = excess[j] else { continue };
        let d = bucket::delay_ms(e, limits[j].delay, limits[j].zone.rate);
        if d > best.0 {
            best = (d, j, e);
        }
        let left = limits[j].remaining(e);
        if tightest.is_none_or(|t| left < t.0) {
            tightest = Some((left, j, e));
        }
    }
    Outcome::Accepted {
        delay_ms: best.0,
        limit: best.1,
        excess: best.2,
        tightest: tightest.map_or((at, e), |t| (t.1, t.2)),
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

fn release(locks: &mut [Locked<'_>], held: &[Option<(usize, Held)>]) {
    for (g, h) in held.iter().flatten() {
        locks[*g].release(*h);
    }
}

#[cfg(test)]
mod tests;
