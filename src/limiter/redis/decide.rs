//! The decision for a location with at least one Redis limit: nginx's
//! multi-limit protocol ([`crate::limiter::protocol`]) with the Redis limits
//! answered in batches, one script call per slot group.
//!
//! 1. The memory limits are looked up and held (not charged), up to the
//!    first that refuses.
//! 2. The Redis limits before that point, grouped by backend and slot in the
//!    order of their first limit: every group but the last is checked
//!    (`check`), the last is charged if nothing refused (`charge`). A busy
//!    group rejects at once; a failed call gives the decision to `on_error`.
//! 3. On acceptance the held memory limits are charged, then the checked
//!    groups (`account`), newest first; on a memory refusal every hold is
//!    released.
//!
//! The rejection cache (`cache`): every refusal Redis sends is remembered
//! by the refused zone's cache, and before any call the first keyed Redis
//! limit (the first key of the first call, which the script would look up
//! first) is asked of its zone's cache: a known refusal is this decision's,
//! with no call. When that limit is the location's first keyed limit, this
//! happens before step 1 (nothing else is looked up, as in nginx, and
//! nothing is allocated); else after the memory limits before it passed.
//! Only the first Redis limit: a later one refuses only if every earlier
//! one passes, which only Redis knows.

use super::cache::{Refusal, Seen};
use super::script::{Mode, Reply, ScriptKey, TimeSource};
use super::{CallError, OnError, RedisBackend, RedisZone, key_slot};
use crate::limiter::protocol::{Decision, EachLocked, Holds};
use crate::limiter::{Limit, LimitSet, Outcome, Store, evaluate};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::time::Instant;

fn redis_zone(limit: &Limit) -> Option<&RedisZone> {
    match &*limit.zone.store {
        Store::Redis(r) => Some(r),
        Store::Memory(_) => None,
    }
}

/// Limits of one location that one script call decides: same backend, same slot.
struct Group<'a> {
    backend: &'a Arc<RedisBackend>,
    slot: u16,
    /// Limit indexes, in configuration order.
    limits: Vec<usize>,
    /// The script's keys, parallel to `limits`.
    keys: Vec<ScriptKey>,
}

/// The decision for a location with at least one Redis limit. `keys[i]` is
/// limit `i`'s evaluated key (`None`: skipped).
pub(in crate::limiter) async fn decide<K: AsRef<[u8]>>(
    limits: &LimitSet,
    now: u64,
    keys: &[Option<K>],
) -> Outcome {
    if keys.iter().all(Option::is_none) {
        return Outcome::Unlimited;
    }
    // A backend known to be down: no call, on_error at once.
    if let Some(b) = backend_down(limits, keys) {
        return fallback(limits, now, keys, b.config.on_error);
    }
    // A refusal of the first keyed limit this instance knows of.
    let first = first_redis(limits, keys, limits.len());
    let asked = first.filter(|&i| keys[..i].iter().all(Option::is_none));
    if let Some(refused) = asked.and_then(|i| cached(limits, keys, i, now)) {
        return refused;
    }
    // 1. The memory limits. The decision releases their holds if this future
    //    is dropped while awaiting Redis (the client went away), so a held
    //    state never stays pinned.
    let mut d = Decision::new(limits, now, EachLocked);
    d.look_up(keys, false);

    // 2. The Redis limits before the first memory refusal: a refusal this
    //    instance knows of, or the calls.
    let upto = d.refused_at().unwrap_or(limits.len());
    let later = first_redis(limits, keys, upto).filter(|&i| Some(i) != asked);
    if let Some(refused) = later.and_then(|i| cached(limits, keys, i, now)) {
        return d.reject(refused);
    }
    let groups = groups(limits, keys, upto);
    let deadline = groups
        .iter()
        .map(|g| Instant::now() + g.backend.config.timeout)
        .min()
        .unwrap_or_else(Instant::now);
    let charge_last = d.refused_at().is_none();
    let mut d = match check(d, &groups, keys, charge_last, deadline).await {
        Ok(d) => d,
        Err(outcome) => return outcome,
    };

    // 3. Accepted unless a memory limit refused: charge the held memory
    //    limits, then the checked Redis groups (each store on its own clock;
    //    the order between stores changes no outcome).
    if let Some(refused) = d.settle() {
        return refused;
    }
    account(&mut d, &groups, now, deadline).await;
    d.outcome()
}

/// The backend of a keyed Redis limit whose breaker is open, if any.
fn backend_down<'a, K>(limits: &'a LimitSet, keys: &[Option<K>]) -> Option<&'a RedisBackend> {
    limits.iter().zip(keys).find_map(|(l, k)| {
        let r = redis_zone(l)?;
        (k.is_some() && r.backend.breaker_open()).then_some(&*r.backend)
    })
}

/// The first Redis limit before `upto` with a key.
fn first_redis<K>(limits: &LimitSet, keys: &[Option<K>], upto: usize) -> Option<usize> {
    (0..upto).find(|&i| keys[i].is_some() && redis_zone(&limits[i]).is_some())
}

/// Limit `i`'s refusal (a keyed Redis limit), when its zone's cache knows
/// that Redis refuses its key at `now`.
fn cached<K: AsRef<[u8]>>(
    limits: &LimitSet,
    keys: &[Option<K>],
    i: usize,
    now: u64,
) -> Option<Outcome> {
    let l = &limits[i];
    let zone = redis_zone(l)?;
    let key = keys[i].as_ref()?.as_ref();
    let cache = l.zone.reject_cache.as_ref()?;
    let epoch = zone.backend.cache_epoch()?;
    let (excess, wait_ms) = cache.refusal(key, l.burst, now, epoch)?;
    zone.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
    Some(Outcome::Rejected {
        limit: i,
        excess,
        wait_ms,
    })
}

/// Redis refused `limit`'s `key` (`refusal`), in a call sent after local
/// time `now` in the caches' `epoch` (`None`: caches not in use): tell the
/// zone's cache.
fn remember<K: AsRef<[u8]>>(
    limit: &Limit,
    key: &Option<K>,
    refusal: Refusal,
    (now, epoch): (u64, Option<u64>),
    backend: &RedisBackend,
) {
    if let (Some(cache), Some(key), Some(epoch)) = (&limit.zone.reject_cache, key, epoch) {
        let seen = Seen {
            local: now,
            epoch,
            drift: backend.time_source() == TimeSource::Server,
        };
        cache.remember(key.as_ref(), refusal, seen);
    }
}

/// The Redis limits before `upto` with a key, grouped by backend and slot
/// in the order of their first limit.
fn groups<'a, K: AsRef<[u8]>>(
    limits: &'a LimitSet,
    keys: &[Option<K>],
    upto: usize,
) -> Vec<Group<'a>> {
    let mut groups: Vec<Group> = Vec::new();
    for (i, l) in limits.iter().enumerate().take(upto) {
        let (Some(r), Some(k)) = (redis_zone(l), &keys[i]) else {
            continue;
        };
        let rk = r.redis_key(k.as_ref());
        let slot = key_slot(&rk);
        let entry = ScriptKey {
            key: rk,
            policy: l.zone.policy,
            burst: l.burst,
        };
        match groups
            .iter_mut()
            .find(|g| Arc::ptr_eq(g.backend, &r.backend) && g.slot == slot)
        {
            Some(g) => {
                g.limits.push(i);
                g.keys.push(entry);
            }
            None => groups.push(Group {
                backend: &r.backend,
                slot,
                limits: vec![i],
                keys: vec![entry],
            }),
        }
    }
    groups
}

/// Step 2: one call per group, in order; the last group is charged when
/// `charge_last`, the others checked. `Err` is the decision: a rejection by
/// a busy group, or `on_error`'s after a failed call (every hold released).
async fn check<'a, S: Holds, K: AsRef<[u8]>>(
    mut d: Decision<'a, S>,
    groups: &[Group<'_>],
    keys: &[Option<K>],
    charge_last: bool,
    deadline: Instant,
) -> Result<Decision<'a, S>, Outcome> {
    let last = groups.len().wrapping_sub(1);
    for (gi, g) in groups.iter().enumerate() {
        let mode = if gi == last && charge_last {
            Mode::Charge
        } else {
            Mode::Check
        };
        let epoch = g.backend.cache_epoch();
        match g.backend.call(mode, &g.keys, d.now(), deadline).await {
            Ok(Reply::Accepted(stored)) => {
                g.backend.record_success();
                for (&i, s) in g.limits.iter().zip(stored) {
                    d.passed(i, s);
                }
            }
            Ok(Reply::Busy {
                index,
                excess,
                wait_ms,
                at,
                cell,
            }) => {
                g.backend.record_success();
                let limit = g.limits[index];
                let refusal = Refusal {
                    excess,
                    wait_ms,
                    at,
                    cell,
                };
                let when = (d.now(), epoch);
                remember(&d.limits()[limit], &keys[limit], refusal, when, g.backend);
                return Err(d.reject(Outcome::Rejected {
                    limit,
                    excess,
                    wait_ms,
                }));
            }
            Err(e) => {
                // Nothing was charged in Redis by this decision yet (but a
                // timed-out "charge" may still have run there). The holds go
                // before the fallback decides with the same memory zones.
                failed(g, d.limits(), &e);
                let (limits, now) = (d.limits(), d.now());
                d.release_all();
                return Err(fallback(limits, now, keys, g.backend.config.on_error));
            }
        }
    }
    Ok(d)
}

/// Step 3 for Redis: charge the checked groups (all but the last, which was
/// charged), newest first.
async fn account<S: Holds>(
    d: &mut Decision<'_, S>,
    groups: &[Group<'_>],
    now: u64,
    deadline: Instant,
) {
    for g in groups.iter().rev().skip(1) {
        match g.backend.call(Mode::Account, &g.keys, now, deadline).await {
            Ok(Reply::Accepted(stored)) => {
                for (&i, s) in g.limits.iter().zip(stored) {
                    d.passed(i, s);
                }
            }
            Ok(Reply::Busy { .. }) => {} // account never answers busy
            // Those limits stay uncharged for this request; their checked
            // excess still gives the delay.
            Err(e) => failed(g, d.limits(), &e),
        }
    }
}

/// A call for `g` failed: open the breaker, count and report it per zone.
fn failed(g: &Group<'_>, limits: &LimitSet, e: &CallError) {
    g.backend.record_failure();
    for &i in &g.limits {
        if let Some(r) = redis_zone(&limits[i]) {
            r.report(e);
        }
    }
}

/// The decision when Redis cannot make it.
fn fallback<K: AsRef<[u8]>>(
    limits: &LimitSet,
    now: u64,
    keys: &[Option<K>],
    policy: OnError,
) -> Outcome {
    for (l, k) in limits.iter().zip(keys) {
        if let (Some(r), Some(_)) = (redis_zone(l), k) {
            r.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
    }
    match policy {
        // Redis zones delegate their synchronous operations to their local
        // in-memory zone: `evaluate` is the per-instance decision.
        OnError::Local => evaluate(limits, now, |i| keys[i].as_ref().map(|k| k.as_ref())),
        OnError::Allow => evaluate(limits, now, |i| {
            if redis_zone(&limits[i]).is_some() {
                None
            } else {
                keys[i].as_ref().map(|k| k.as_ref())
            }
        }),
        OnError::Deny => {
            let limit = limits
                .iter()
                .zip(keys)
                .position(|(l, k)| redis_zone(l).is_some() && k.is_some())
                .unwrap_or(0);
            Outcome::Unavailable { limit }
        }
    }
}
