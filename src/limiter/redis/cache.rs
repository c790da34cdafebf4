//! The rejection cache of a Redis zone (`[redis] reject_cache`): while
//! Redis says a key is over its limit, this instance rejects that key
//! itself, with the decision Redis would make, without a round trip.
//!
//! Why it can be exact: a refusal stores nothing, in every algorithm of the
//! script, and while a key is refused by the zone's widest limit (the
//! largest `burst` any `limit_req` line gives the zone) no request can be
//! admitted for it, on any instance, so its stored state cannot change
//! until the time that limit admits again. The script's refusal carries
//! that state (the key's cell) and the time it decided at; until then
//! every decision about the key is the algorithm's own arithmetic on that
//! cell ([`algorithm::check`], which the Redis tests hold equal to the
//! script), at the time Redis would decide at. A sliding log is not sent
//! back, but a refused log is full and stays so until its oldest time
//! leaves, which is when it admits: its excess is constant and its wait is
//! that time minus now.
//!
//! Time: entries are kept on the instance's own monotonic milliseconds (a
//! decision's `now`). A refusal decided at Redis time `at` for a call made
//! at local time `local` (never later than the call was sent) maps a later
//! local time `t` to `at + (t - local)`: never earlier than Redis's clock
//! at that instant, so the cache's state is never less drained than
//! Redis's, and a refusal it computes is one Redis makes too. With the
//! server's clock the entry is also given up a thousandth of its length
//! early (1000 ppm, twice the largest NTP slew), against the two clocks
//! running at different rates. The exceptions are in
//! config/operations.md ("The rejection cache").
//!
//! Failures: an entry records the backend's count of failed calls when its
//! call was made (its epoch), and is not used once another call failed: a
//! Redis that restarted has lost the state the entry describes (a failed
//! call is how this instance learns of it).
//!
//! Memory: a fixed number of entries (the zone's `size` at
//! [`BYTES_PER_ENTRY`] each) in shards of their own lock, picked by the
//! key's hash. A full shard replaces an expired entry near its clock hand,
//! else the entry at the hand (the oldest slot written): a flood of new
//! keys recycles entries, it never grows the cache. A hit is one hash, one
//! lock and one comparison of the key: no allocation.

use crate::limiter::algorithm::{self, Algorithm, Cell, Log, Policy, View};
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// See `memory`: a short critical section, a spin lock that yields.
type Mutex<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;

/// Bytes of a zone's `size` budgeted per entry: the entry, its index slot
/// and a short key's allocation. A `1m` zone caches 8192 refused keys.
pub const BYTES_PER_ENTRY: u64 = 128;

/// Entries a full shard looks at, from its hand, for an expired one.
const SCAN: usize = 8;

static NO_LOG: Log = Log::new();

/// What Redis answered when it refused a key: the script's refusal
/// (see [`super::Reply::Busy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub excess: u64,
    pub wait_ms: u64,
    /// The time the script decided at.
    pub at: u64,
    /// The key's stored cell (unused for a sliding log).
    pub cell: Cell,
}

/// When and how a refusal was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The decision's local time (the call was sent after it).
    pub local: u64,
    /// The backend's failed calls before the call was sent.
    pub epoch: u64,
    /// Redis decided on its own clock (not the caller's): give the entry up
    /// early by the clock-rate bound.
    pub drift: bool,
}

/// A refused key's state, frozen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frozen {
    /// The key's cell, as of Redis time `at`.
    Cell(Cell),
    /// A full sliding log: refused with `excess` until Redis time `admit_at`.
    Full { excess: u64, admit_at: u64 },
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    frozen: Frozen,
    /// Redis time of the refusal, and the local time standing for it.
    at: u64,
    local: u64,
    /// Local time from which the entry is not used.
    until: u64,
    epoch: u64,
}

struct Slot {
    hash: u64,
    key: Box<[u8]>,
    entry: Entry,
}

struct Shard {
    table: HashTable<u32>,
    slots: Vec<Slot>,
    capacity: usize,
    /// The next slot a full shard replaces.
    hand: usize,
}

/// The rejection cache of one Redis zone, for one configuration generation.
pub struct RejectCache {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
    policy: Policy,
    /// `burst*1000` of the zone's widest limit.
    widest: u64,
    capacity: usize,
}

impl RejectCache {
    /// The cache of a zone of `size` bytes deciding by `policy`, whose
    /// widest `limit_req` line has `widest` (`burst*1000`).
    pub fn with_size(size: u64, policy: Policy, widest: u64) -> RejectCache {
        RejectCache::with_capacity((size / BYTES_PER_ENTRY).max(1) as usize, policy, widest)
    }

    /// A cache of at most `capacity` entries.
    pub fn with_capacity(capacity: usize, policy: Policy, widest: u64) -> RejectCache {
        let mut shards = 1;
        while shards < 16 && capacity / (shards * 2) >= 256 {
            shards *= 2;
        }
        let per = capacity / shards;
        let shards = (0..shards)
            .map(|i| {
                // The remainder goes to the first shards: exactly `capacity`.
                let capacity = per + usize::from(i < capacity % shards);
                Mutex::new(Shard {
                    table: HashTable::new(),
                    slots: Vec::new(),
                    capacity,
                    hand: 0,
                })
            })
            .collect();
        RejectCache {
            shards,
            hasher: foldhash::fast::RandomState::default(),
            policy,
            widest,
            capacity,
        }
    }

    /// `burst*1000` of the zone's widest limit.
    pub fn widest(&self) -> u64 {
        self.widest
    }

    /// The most entries kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Entries kept now (expired ones included, until replaced).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().slots.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        // The high bits pick the shard; the table uses the whole hash.
        &self.shards[(hash >> 48) as usize % self.shards.len()]
    }

    /// Redis refused `key` with `r`, as `seen`. Nothing is kept when the
    /// widest limit would admit the key already.
    pub fn remember(&self, key: &[u8], r: Refusal, seen: Seen) {
        let Some((frozen, span)) = self.frozen(r) else {
            return;
        };
        let margin = if seen.drift { span.div_ceil(1000) } else { 0 };
        if span <= margin {
            return;
        }
        let entry = Entry {
            frozen,
            at: r.at,
            local: seen.local,
            until: seen.local + (span - margin),
            epoch: seen.epoch,
        };
        let hash = self.hasher.hash_one(key);
        self.shard(hash).lock().put(hash, key, entry, seen.local);
    }

    /// The state to keep for refusal `r`, and for how long after `r.at` it
    /// stays as it is (until the widest limit admits).
    fn frozen(&self, r: Refusal) -> Option<(Frozen, u64)> {
        if self.policy.algorithm == Algorithm::SlidingLog {
            let admit_at = r.at + r.wait_ms;
            let full = Frozen::Full {
                excess: r.excess,
                admit_at,
            };
            return Some((full, r.wait_ms));
        }
        let view = View {
            cell: &r.cell,
            log: &NO_LOG,
        };
        let c = algorithm::check(&self.policy, self.widest, view, r.at, 0);
        (!c.admit && c.wait_ms > 0).then_some((Frozen::Cell(r.cell), c.wait_ms))
    }

    /// Forget `key`'s refusal (the admin API forgave the key): its next
    /// request asks Redis.
    pub fn forget(&self, key: &[u8]) {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let slots = &shard.slots;
        if let Some(&i) = shard.table.find(hash, |&i| *slots[i as usize].key == *key) {
            shard.slots[i as usize].entry.until = 0;
        }
    }

    /// Redis's refusal of `key` under a limit of `burst` (`burst*1000`, at
    /// most the widest) at local time `now`, as `(excess, wait_ms)`; `None`
    /// when the cache does not know that Redis refuses it. `epoch`: the
    /// backend's failed calls now.
    pub fn refusal(&self, key: &[u8], burst: u64, now: u64, epoch: u64) -> Option<(u64, u64)> {
        let hash = self.hasher.hash_one(key);
        let entry = {
            let shard = self.shard(hash).lock();
            let &i = shard
                .table
                .find(hash, |&i| *shard.slots[i as usize].key == *key)?;
            shard.slots[i as usize].entry
        };
        if now < entry.local || now >= entry.until || burst > self.widest || epoch != entry.epoch {
            return None;
        }
        let t = entry.at + (now - entry.local);
        match entry.frozen {
            Frozen::Full { excess, admit_at } => (t < admit_at).then(|| (excess, admit_at - t)),
            Frozen::Cell(cell) => {
                let view = View {
                    cell: &cell,
                    log: &NO_LOG,
                };
                let c = algorithm::check(&self.policy, burst, view, t, 0);
                (!c.admit).then_some((c.excess, c.wait_ms))
            }
        }
    }
}

impl Shard {
    /// Keep `entry` for `key`: in its slot, a free one, or a replaced one.
    fn put(&mut self, hash: u64, key: &[u8], entry: Entry, now: u64) {
        let slots = &self.slots;
        if let Some(&i) = self.table.find(hash, |&i| *slots[i as usize].key == *key) {
            self.slots[i as usize].entry = entry;
            return;
        }
        let slot = Slot {
            hash,
            key: key.into(),
            entry,
        };
        let i = if self.slots.len() < self.capacity {
            self.slots.push(slot);
            self.slots.len() - 1
        } else {
            let i = self.victim(now);
            let old = slots[i].hash;
            if let Ok(e) = self.table.find_entry(old, |&j| j as usize == i) {
                e.remove();
            }
            self.slots[i] = slot;
            self.hand = (i + 1) % self.capacity;
            i
        };
        let slots = &self.slots;
        self.table
            .insert_unique(hash, i as u32, |&j| slots[j as usize].hash);
    }

    /// The slot a full shard gives up: an expired one near the hand, else
    /// the hand's.
    fn victim(&self, now: u64) -> usize {
        (0..SCAN.min(self.capacity))
            .map(|k| (self.hand + k) % self.capacity)
            .find(|&i| now >= self.slots[i].entry.until)
            .unwrap_or(self.hand)
    }
}

#[cfg(test)]
mod tests;
