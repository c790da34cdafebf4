//! nginx's protocol for the several `limit_req` lines of one location
//! (`ngx_http_limit_req_handler` and `ngx_http_limit_req_account`), written
//! once for every store.
//!
//! A decision looks every limit with a key up in configuration order. A
//! limit that accepts is charged at once (nginx: the last one) or held (the
//! others: its state is pinned, nothing stored). The first limit that
//! refuses ends the lookups; the held states are then released and nothing
//! is charged anywhere. When every limit accepted, the held states are
//! charged in reverse order at the same `now`, and the largest delay wins
//! ([`accepted`]).
//!
//! [`Decision`] is that protocol's state for one request: the holds and
//! excess of each limit and the first refusal. The stores drive it: the
//! memory path ([`super::evaluate`]) with every shard locked at once, the
//! Redis path ([`super::redis`]) with its memory limits held while it awaits
//! Redis (whose limits answer as a batch per slot, and report into the same
//! decision). What differs between them is only where the states live:
//! [`Holds`].

use super::memory::{Held, Locked, Lookup, MemoryZone, Stored};
use super::{Limit, LimitSet, Outcome, Standing, bucket};

/// Where a decision's memory states live: a lookup, and the accounting or
/// release of a state it held.
pub(crate) trait Holds {
    /// nginx's lookup of limit `i` (key `key`): `None` when this store does
    /// not decide that limit (a Redis limit, decided by its own calls).
    fn lookup(
        &mut self,
        i: usize,
        limit: &Limit,
        key: &[u8],
        now: u64,
        charge: bool,
    ) -> Option<Lookup>;
    /// Charge the state limit `i` held at `now`; returns what it stored.
    fn account(&mut self, i: usize, limit: &Limit, held: Held, now: u64) -> Stored;
    /// Give the state limit `i` held back, uncharged.
    fn release(&mut self, i: usize, limit: &Limit, held: Held);
}

/// One request's decision over a location's limits, in progress. States it
/// still holds when dropped (a refusal, or the future of a Redis decision
/// dropped while awaiting) are released.
pub(crate) struct Decision<'a, S: Holds> {
    limits: &'a LimitSet,
    now: u64,
    store: S,
    /// Per limit: the state held until the decision ends.
    held: Vec<Option<Held>>,
    /// Per limit: the excess it stored, or would store (held, checked),
    /// and where the key stands.
    excess: Vec<Option<Stored>>,
    /// The first limit that refused, and the outcome it gives.
    refused: Option<(usize, Outcome)>,
}

impl<'a, S: Holds> Decision<'a, S> {
    pub(crate) fn new(limits: &'a LimitSet, now: u64, store: S) -> Decision<'a, S> {
        let n = limits.len();
        Decision {
            limits,
            now,
            store,
            held: vec![None; n],
            excess: vec![None; n],
            refused: None,
        }
    }

    /// Look up, in order, every limit with a key that the store decides,
    /// until one refuses. With `charge_last`, the last configured limit is
    /// charged at lookup (nginx); otherwise every limit is held (the Redis
    /// path, whose own limits are still to be decided).
    pub(crate) fn look_up<K: AsRef<[u8]>>(&mut self, keys: &[Option<K>], charge_last: bool) {
        let last = self.limits.len().saturating_sub(1);
        for (i, key) in keys.iter().enumerate() {
            let Some(key) = key else { continue };
            let charge = charge_last && i == last;
            let limit = &self.limits[i];
            let Some(answer) = self.store.lookup(i, limit, key.as_ref(), self.now, charge) else {
                continue;
            };
            match answer {
                Lookup::Charged { excess, standing } => {
                    self.excess[i] = Some(Stored { excess, standing })
                }
                Lookup::Held {
                    excess,
                    standing,
                    held,
                } => {
                    self.held[i] = Some(held);
                    self.excess[i] = Some(Stored { excess, standing });
                }
                refusal => {
                    self.refused = Some((i, refusal_of(i, refusal)));
                    return;
                }
            }
        }
    }

    pub(crate) fn limits(&self) -> &'a LimitSet {
        self.limits
    }

    /// The time the decision is made at.
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// The first limit that refused so far: limits after it need no lookup.
    pub(crate) fn refused_at(&self) -> Option<usize> {
        self.refused.as_ref().map(|r| r.0)
    }

    /// Limit `i` accepted, decided by another store.
    pub(crate) fn passed(&mut self, i: usize, stored: Stored) {
        self.excess[i] = Some(stored);
    }

    /// Another store refused: release every hold; the decision is `outcome`.
    pub(crate) fn reject(mut self, outcome: Outcome) -> Outcome {
        self.release_all();
        outcome
    }

    /// Give back every state still held, uncharged.
    pub(crate) fn release_all(&mut self) {
        for (i, (limit, held)) in self.limits.iter().zip(&mut self.held).enumerate() {
            if let Some(h) = held.take() {
                self.store.release(i, limit, h);
            }
        }
    }

    /// End the lookups: on a refusal, release every hold and return its
    /// outcome; otherwise charge the held states, newest first.
    pub(crate) fn settle(&mut self) -> Option<Outcome> {
        if let Some((_, outcome)) = self.refused {
            self.release_all();
            return Some(outcome);
        }
        for i in (0..self.limits.len()).rev() {
            if let Some(h) = self.held[i].take() {
                let limit = &self.limits[i];
                self.excess[i] = Some(self.store.account(i, limit, h, self.now));
            }
        }
        None
    }

    /// The outcome of an accepted request, once every limit is charged.
    pub(crate) fn outcome(&self) -> Outcome {
        accepted(self.limits, &self.excess)
    }

    /// [`Decision::settle`], then the outcome.
    pub(crate) fn finish(mut self) -> Outcome {
        self.settle().unwrap_or_else(|| self.outcome())
    }
}

impl<S: Holds> Drop for Decision<'_, S> {
    fn drop(&mut self) {
        self.release_all();
    }
}

/// The outcome of limit `i` refusing with `lookup` (busy, or no memory).
pub(crate) fn refusal_of(i: usize, lookup: Lookup) -> Outcome {
    match lookup {
        Lookup::Busy { excess, wait_ms } => Outcome::Rejected {
            limit: i,
            excess,
            wait_ms,
        },
        _ => Outcome::NoMemory { limit: i },
    }
}

/// The outcome of an accepted request from what each limit stored
/// (`None`: key empty, not charged). nginx's delay: start from the last
/// limit (excess 0 if it was skipped), then earlier ones in reverse order; a
/// strictly larger delay replaces it, with its limit and excess for the log.
/// Only leaky-bucket limits delay. `tightest`: the limit with the fewest
/// requests left, last limit first.
pub(crate) fn accepted(limits: &LimitSet, stored: &[Option<Stored>]) -> Outcome {
    let delay = |l: &Limit, e: u64| {
        if l.zone.policy.algorithm.delays() {
            bucket::delay_ms(e, l.delay, l.zone.policy.rate)
        } else {
            0
        }
    };
    let at = limits.len() - 1;
    let e = stored[at].map_or(0, |s| s.excess);
    let mut best = (delay(&limits[at], e), at, e);
    let mut tightest = stored[at].map(|s| (at, s.standing));
    for j in (0..at).rev() {
        let Some(s) = stored[j] else { continue };
        let d = delay(&limits[j], s.excess);
        if d > best.0 {
            best = (d, j, s.excess);
        }
        if tightest.is_none_or(|t| s.standing.remaining < t.1.remaining) {
            tightest = Some((j, s.standing));
        }
    }
    Outcome::Accepted {
        delay_ms: best.0,
        limit: best.1,
        excess: best.2,
        tightest: tightest.unwrap_or((at, Standing::default())),
    }
}

/// Memory zones, each operation locking its own shard: the Redis path,
/// which holds memory states across its awaits, and decides only the
/// memory limits here.
pub(crate) struct EachLocked;

impl Holds for EachLocked {
    fn lookup(
        &mut self,
        _: usize,
        limit: &Limit,
        key: &[u8],
        now: u64,
        charge: bool,
    ) -> Option<Lookup> {
        let super::Store::Memory(m) = &*limit.zone.store else {
            return None;
        };
        Some(m.lookup(key, now, &limit.zone.policy, limit.burst, charge))
    }

    fn account(&mut self, _: usize, limit: &Limit, held: Held, now: u64) -> Stored {
        let m = limit.zone.store.memory();
        m.account(held, now, &limit.zone.policy, limit.burst)
    }

    fn release(&mut self, _: usize, limit: &Limit, held: Held) {
        limit.zone.store.memory().release(held)
    }
}

/// Every shard a decision touches, locked first in one global order (zone
/// address, shard) and unlocked when dropped: the decision is atomic, as in
/// nginx, where one worker decides a request without interruption. Redis
/// zones act on their local in-memory zone here (`on_error = "local"`).
pub(crate) struct AllLocked<'z> {
    locks: Vec<Locked<'z>>,
    /// Per limit: (its lock, its shard, its key's hash); `None`: no key.
    spots: Vec<Option<(usize, usize, u64)>>,
}

impl<'z> AllLocked<'z> {
    /// Lock the shards of `keys`; `None` when no limit has a key.
    pub(crate) fn lock<K: AsRef<[u8]>>(
        limits: &'z LimitSet,
        keys: &[Option<K>],
    ) -> Option<AllLocked<'z>> {
        // (zone address, shard, zone) of every shard touched, once each.
        let mut zones: Vec<(usize, usize, &'z MemoryZone)> = Vec::with_capacity(keys.len());
        // First the zone's address in place of the lock, then the lock.
        let mut spots = Vec::with_capacity(keys.len());
        for (limit, key) in limits.iter().zip(keys) {
            let Some(key) = key else {
                spots.push(None);
                continue;
            };
            let m = limit.zone.store.memory();
            let (shard, hash) = m.locate(key.as_ref());
            if !zones.iter().any(|z| (z.0, z.1) == (zone_id(m), shard)) {
                zones.push((zone_id(m), shard, m));
            }
            spots.push(Some((zone_id(m), shard, hash)));
        }
        if zones.is_empty() {
            return None;
        }
        zones.sort_by_key(|z| (z.0, z.1));
        for spot in spots.iter_mut().flatten() {
            // Every spot's shard is in `zones`: the position always exists.
            spot.0 = zones
                .iter()
                .position(|z| (z.0, z.1) == (spot.0, spot.1))
                .unwrap_or(0);
        }
        let locks = zones.iter().map(|z| z.2.lock(z.1)).collect();
        Some(AllLocked { locks, spots })
    }

    /// The locked shard of limit `i`'s key (only limits with a key hold).
    fn lock_of(&mut self, i: usize) -> &mut Locked<'z> {
        let g = self.spots[i].map_or(0, |s| s.0);
        &mut self.locks[g]
    }
}

/// A zone's identity in the global lock order: its address.
fn zone_id(m: &MemoryZone) -> usize {
    m as *const MemoryZone as usize
}

impl Holds for AllLocked<'_> {
    fn lookup(
        &mut self,
        i: usize,
        limit: &Limit,
        key: &[u8],
        now: u64,
        charge: bool,
    ) -> Option<Lookup> {
        let (g, _, hash) = self.spots[i]?;
        let (p, burst) = (&limit.zone.policy, limit.burst);
        Some(self.locks[g].lookup(hash, key, now, p, burst, charge))
    }

    fn account(&mut self, i: usize, limit: &Limit, held: Held, now: u64) -> Stored {
        let (p, burst) = (&limit.zone.policy, limit.burst);
        self.lock_of(i).account(held, now, p, burst)
    }

    fn release(&mut self, i: usize, _: &Limit, held: Held) {
        self.lock_of(i).release(held)
    }
}
