//! The in-memory zone: per-key buckets bounded by the zone's `size`, with
//! nginx's expiry and LRU eviction (nginx-limit-req.md §6).
//!
//! Why this shape: nginx keeps one red-black tree and one LRU queue per zone
//! in shared memory. We keep the same two structures, but split the zone into
//! a few shards (by key hash) so that worker threads rarely contend, and store
//! nodes in a slab with `u32` links so that a state costs about 64 bytes
//! instead of nginx's 128. The zone's capacity is global (an atomic count);
//! each shard may hold up to a quarter more than its even share, so an uneven
//! hash spread does not evict early, and runs
//! nginx's expiry and forced-eviction rules on its own LRU list.
//!
//! Nothing here reads a clock: `now` comes in as an argument. A node and
//! what it costs are in `node`.

mod node;

use super::algorithm::{self, Cell, Check, Log, Policy, Standing, View};
use hashbrown::{HashMap, HashTable};
use node::{INLINE, LONG, Node, cost_of, key_of, log_cost, log_units};
/// A shard's lock. Critical sections are a few dozen nanoseconds and
/// workers are one per core, so a spin lock (whose unlock is a plain store,
/// not the compare-and-swap of a parking lock) wins; a thread that finds it
/// taken yields, so a lock holder preempted on a shared core is not spun
/// against for a whole time slice.
type Mutex<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of zone `size` budgeted per state: a `1m` zone holds 16384 states.
pub const BYTES_PER_STATE: u64 = 64;

const NIL: u32 = u32::MAX;
/// The log of a state that has none.
static NO_LOG: Log = Log::new();

/// A node held by an unfinished multi-limit decision (nginx's `count++`).
/// It cannot be expired or evicted until accounted or released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    shard: u32,
    slot: u32,
}

/// What accounting a held state stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    pub excess: u64,
    pub standing: Standing,
}

/// The answer of a lookup, nginx's `NGX_BUSY / NGX_OK / NGX_AGAIN / NGX_ERROR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Over the burst: nothing stored. `wait_ms` is the time until this key's
    /// next request would be accepted.
    Busy { excess: u64, wait_ms: u64 },
    /// Accepted and charged; where the key stands now.
    Charged { excess: u64, standing: Standing },
    /// Accepted but not charged yet; the node is held. `standing` is where
    /// the key would stand once charged.
    Held {
        excess: u64,
        standing: Standing,
        held: Held,
    },
    /// No memory for a new state even after forced eviction.
    NoMemory,
}

struct Shard {
    table: HashTable<u32>,
    nodes: Vec<Node>,
    /// Keys longer than [`INLINE`], by slot.
    long: HashMap<u32, Box<[u8]>>,
    /// A sliding-log zone's logs, by slot (empty for other algorithms).
    logs: Vec<Log>,
    free: u32,
    head: u32,
    tail: u32,
    len: usize,
    /// What the stored states cost, in states (see `Shard::cost`).
    units: usize,
    /// Hard limit of this shard's units (its even share plus slack).
    capacity: usize,
    /// Slots allocated on the first insert; the node slab grows by steps of
    /// a sixteenth of this past it.
    share: usize,
    evictions: u64,
    hasher: foldhash::fast::RandomState,
}

/// `size_of` a state (for the memory tests).
pub fn node_size() -> usize {
    std::mem::size_of::<Node>()
}

/// One zone's states.
pub struct MemoryZone {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
    capacity: usize,
    /// States stored over all shards, and their cost in states.
    totals: Totals,
}

#[derive(Default)]
struct Totals {
    len: AtomicUsize,
    units: AtomicUsize,
}

impl MemoryZone {
    /// A zone of `size` bytes (nginx's `zone=name:size`).
    pub fn with_size(size: u64) -> MemoryZone {
        MemoryZone::with_capacity((size / BYTES_PER_STATE).max(1) as usize)
    }

    /// How many keys (with keys of up to 16 bytes) a zone of `size` bytes
    /// holds under `p`: one state each, or for a sliding log also its log.
    pub fn keys_in(size: u64, p: &Policy) -> u64 {
        (size / BYTES_PER_STATE).max(1) / (1 + log_cost(p)) as u64
    }

    /// A zone holding at most `capacity` states.
    pub fn with_capacity(capacity: usize) -> MemoryZone {
        // Shards of at least 512 states, at most 16 of them.
        let mut shards = 1;
        while shards < 16 && capacity / (shards * 2) >= 512 {
            shards *= 2;
        }
        let share = capacity.div_ceil(shards);
        let hard = if shards == 1 {
            capacity
        } else {
            share + share / 4
        };
        let hasher = foldhash::fast::RandomState::default();
        let shards = (0..shards)
            .map(|_| Mutex::new(Shard::new(hard, share, hasher.clone())))
            .collect();
        MemoryZone {
            shards,
            hasher,
            capacity,
            totals: Totals::default(),
        }
    }

    /// The most states this zone holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// States currently stored.
    pub fn len(&self) -> usize {
        self.totals.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// States dropped by forced eviction so far.
    pub fn evictions(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().evictions).sum()
    }

    /// Bytes this zone's states occupy: nodes, hash tables, long keys.
    pub fn memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.nodes.capacity() * std::mem::size_of::<Node>()
                    + s.table.allocation_size()
                    + s.long.capacity() * (4 + 16 + 1)
                    + s.long.values().map(|k| k.len()).sum::<usize>()
                    + s.logs.capacity() * std::mem::size_of::<Log>()
                    + s.logs.iter().map(|l| 8 * l.capacity()).sum::<usize>()
            })
            .sum()
    }

    /// The stored cell of `key`, if any (for tests and diagnostics).
    pub fn peek(&self, key: &[u8]) -> Option<Cell> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shards[self.shard_of(hash)].lock();
        shard
            .find(hash, key)
            .map(|i| shard.nodes[i as usize].cell())
    }

    /// The stored sliding log of `key`, if any (for tests).
    pub fn peek_log(&self, key: &[u8]) -> Option<Log> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shards[self.shard_of(hash)].lock();
        let slot = shard.find(hash, key)? as usize;
        Some(shard.logs.get(slot).cloned().unwrap_or_default())
    }

    /// The stored state of `key`, if it has one: its cell and (for a
    /// sliding log) its log (the admin API describes it with
    /// [`super::inspect`]).
    pub fn inspect_raw(&self, key: &[u8]) -> Option<(Cell, Log)> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shards[self.shard_of(hash)].lock();
        let slot = shard.find(hash, key)?;
        let cell = shard.nodes[slot as usize].cell();
        let log = shard.logs.get(slot as usize).unwrap_or(&NO_LOG).clone();
        Some((cell, log))
    }

    /// Forget `key`: its next request starts afresh. A state held by a
    /// decision in progress is emptied instead of removed (the decision
    /// still owns its node). Whether it had a state.
    pub fn forget(&self, key: &[u8]) -> bool {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shards[self.shard_of(hash)].lock();
        let Some(slot) = shard.find(hash, key) else {
            return false;
        };
        if shard.nodes[slot as usize].count == 0 {
            shard.remove(slot, &self.totals);
        } else {
            shard.update(slot, |cell, log| {
                *cell = Cell::default();
                log.clear();
            });
        }
        true
    }

    fn shard_of(&self, hash: u64) -> usize {
        // High bits pick the shard; hashbrown uses the low and top-7 bits.
        ((hash >> 32) as usize) & (self.shards.len() - 1)
    }

    /// Where `key` lives: its shard and hash, for [`MemoryZone::lock`].
    pub fn locate(&self, key: &[u8]) -> (usize, u64) {
        let hash = self.hasher.hash_one(key);
        (self.shard_of(hash), hash)
    }

    /// Lock one shard. Decisions over several limits lock every shard they
    /// touch first, in a global order, so that they are atomic as in nginx
    /// (one worker decides a request without interruption).
    pub fn lock(&self, shard: usize) -> Locked<'_> {
        Locked {
            zone: self,
            shard: self.shards[shard].lock(),
            index: shard as u32,
        }
    }

    /// [`Locked::lookup`] on the shard of `key`.
    pub fn lookup(&self, key: &[u8], now: u64, p: &Policy, burst: u64, charge: bool) -> Lookup {
        let (si, hash) = self.locate(key);
        self.lock(si).lookup(hash, key, now, p, burst, charge)
    }

    /// [`Locked::account`] on the held node's shard.
    pub fn account(&self, held: Held, now: u64, p: &Policy, burst: u64) -> Stored {
        self.lock(held.shard as usize).account(held, now, p, burst)
    }

    /// [`Locked::release`] on the held node's shard.
    pub fn release(&self, held: Held) {
        self.lock(held.shard as usize).release(held)
    }
}

/// One locked shard of a zone.
pub struct Locked<'a> {
    zone: &'a MemoryZone,
    shard: spin::mutex::SpinMutexGuard<'a, Shard>,
    index: u32,
}

impl Locked<'_> {
    /// nginx's `ngx_http_limit_req_lookup`: find or create the state of `key`
    /// (with `hash` from [`MemoryZone::locate`]) and decide by the zone's
    /// algorithm. `burst` is in milli-requests. With `charge`, an accepted
    /// request is stored at once; without, the node is held for
    /// [`Locked::account`] or [`Locked::release`].
    pub fn lookup(
        &mut self,
        hash: u64,
        key: &[u8],
        now: u64,
        p: &Policy,
        burst: u64,
        charge: bool,
    ) -> Lookup {
        let si = self.index;
        let shard = &mut *self.shard;
        if let Some(slot) = shard.find(hash, key) {
            shard.touch(slot);
            // Requests holding this node (deciding another limit, e.g. one in
            // Redis) will each charge a request: count them as charged, so
            // that concurrent requests cannot all pass on the same state.
            // Within one atomic decision nobody else holds it (adds 0).
            let pending = u64::from(shard.nodes[slot as usize].count);
            if charge && pending == 0 {
                return shard.take(slot, p, burst, now);
            }
            let c = shard.check(slot, p, burst, now, pending);
            if !c.admit {
                return Lookup::Busy {
                    excess: c.excess,
                    wait_ms: c.wait_ms,
                };
            }
            if charge {
                let excess = shard.charge(slot, p, now);
                return Lookup::Charged {
                    excess,
                    standing: c.standing,
                };
            }
            shard.nodes[slot as usize].count += 1;
            return Lookup::Held {
                excess: c.excess,
                standing: c.standing,
                held: Held { shard: si, slot },
            };
        }
        self.insert(hash, key, now, p, burst, charge)
    }

    /// A key not stored: room for it (expiry, then forced eviction), then
    /// its first request.
    fn insert(
        &mut self,
        hash: u64,
        key: &[u8],
        now: u64,
        p: &Policy,
        burst: u64,
        charge: bool,
    ) -> Lookup {
        let (si, zone) = (self.index, self.zone);
        let shard = &mut *self.shard;
        let cost = cost_of(key.len()) + log_cost(p);
        let totals = &zone.totals;
        shard.expire(now, p, false, totals);
        let over_zone = || totals.units.load(Ordering::Relaxed) + cost > zone.capacity;
        if shard.units + cost > shard.capacity || over_zone() {
            shard.expire(now, p, true, totals);
            // After a forced eviction only this shard's hard limit refuses:
            // other shards inserting at the same time may have pushed the
            // zone total a few states over, which the next evictions absorb.
            while shard.units + cost > shard.capacity {
                let before = shard.units;
                shard.expire(now, p, true, totals);
                if shard.units == before {
                    return Lookup::NoMemory;
                }
            }
        }
        // A new state is the all-zero cell, which every algorithm reads as
        // a key never seen. A held one stays so until accounted, as in
        // nginx (whose held new node has `last = 0`: the whole clock has
        // elapsed when it is accounted, and it starts empty).
        let slot = shard.insert(hash, key, p, u32::from(!charge), totals);
        if charge {
            return shard.take(slot, p, burst, now);
        }
        let c = shard.check(slot, p, burst, now, 0);
        Lookup::Held {
            excess: c.excess,
            standing: c.standing,
            held: Held { shard: si, slot },
        }
    }

    /// nginx's accounting of an earlier limit once all limits passed: charge
    /// the held node at `now` and release it.
    pub fn account(&mut self, held: Held, now: u64, p: &Policy, burst: u64) -> Stored {
        debug_assert_eq!(held.shard, self.index);
        let shard = &mut *self.shard;
        let slot = held.slot;
        shard.nodes[slot as usize].count -= 1;
        let pending = u64::from(shard.nodes[slot as usize].count);
        let standing = shard.check(slot, p, burst, now, pending).standing;
        let excess = shard.charge(slot, p, now);
        Stored { excess, standing }
    }

    /// Release a held node without charging it (a later limit rejected).
    pub fn release(&mut self, held: Held) {
        debug_assert_eq!(held.shard, self.index);
        self.shard.nodes[held.slot as usize].count -= 1;
    }
}

/// States a shard's table has room for before it first grows.
const INITIAL_TABLE: usize = 1024;

impl Shard {
    fn new(capacity: usize, share: usize, hasher: foldhash::fast::RandomState) -> Shard {
        Shard {
            // Grown as states come, not sized for `size` at once: a zone of
            // "100000m" (a typo, or a hostile reload) must not take the
            // machine's memory before it holds anything (found by
            // fuzz/fuzz_targets/config.rs). nginx's zones are mapped, not
            // touched, too. Sized at the first insert, when the algorithm
            // (what a state costs) is known.
            table: HashTable::new(),
            share,
            nodes: Vec::new(),
            long: HashMap::new(),
            logs: Vec::new(),
            free: NIL,
            head: NIL,
            tail: NIL,
            len: 0,
            units: 0,
            capacity,
            evictions: 0,
            hasher,
        }
    }

    /// The algorithm's check of the state in `slot`.
    #[inline]
    fn check(&self, slot: u32, p: &Policy, burst: u64, now: u64, pending: u64) -> Check {
        let cell = self.nodes[slot as usize].cell();
        let view = View {
            cell: &cell,
            log: self.logs.get(slot as usize).unwrap_or(&NO_LOG),
        };
        algorithm::check(p, burst, view, now, pending)
    }

    /// Run `f` on the state in `slot` (its cell and its log, empty but for
    /// a sliding log), then store the cell.
    #[inline]
    fn update<R>(&mut self, slot: u32, f: impl FnOnce(&mut Cell, &mut Log) -> R) -> R {
        let node = &mut self.nodes[slot as usize];
        let mut cell = node.cell();
        let mut none = Log::new();
        let r = f(
            &mut cell,
            self.logs.get_mut(slot as usize).unwrap_or(&mut none),
        );
        node.store(cell);
        r
    }

    /// Store one request in `slot`; returns the excess stored.
    #[inline]
    fn charge(&mut self, slot: u32, p: &Policy, now: u64) -> u64 {
        self.update(slot, |cell, log| algorithm::charge(p, cell, log, now))
    }

    /// Check and, when admitted, charge the state in `slot` (a refusal
    /// leaves the cell as it was).
    #[inline]
    fn take(&mut self, slot: u32, p: &Policy, burst: u64, now: u64) -> Lookup {
        let c = self.update(slot, |cell, log| algorithm::take(p, burst, cell, log, now));
        if !c.admit {
            return Lookup::Busy {
                excess: c.excess,
                wait_ms: c.wait_ms,
            };
        }
        Lookup::Charged {
            excess: c.excess,
            standing: c.standing,
        }
    }

    /// What the state in `slot` costs against the zone's size, in states.
    fn cost(&self, slot: u32) -> usize {
        let log = self.logs.get(slot as usize).map_or(0, |l| l.capacity());
        cost_of(self.key(slot).len()) + log_units(log)
    }

    /// The key of the state in `slot`.
    fn key(&self, slot: u32) -> &[u8] {
        key_of(&self.nodes, &self.long, slot)
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let (nodes, long) = (&self.nodes, &self.long);
        self.table
            .find(hash, |&i| key_of(nodes, long, i) == key)
            .copied()
    }

    fn unlink(&mut self, slot: u32) {
        let (prev, next) = {
            let n = &self.nodes[slot as usize];
            (n.prev, n.next)
        };
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    fn push_head(&mut self, slot: u32) {
        let old = self.head;
        {
            let n = &mut self.nodes[slot as usize];
            n.prev = NIL;
            n.next = old;
        }
        match old {
            NIL => self.tail = slot,
            o => self.nodes[o as usize].prev = slot,
        }
        self.head = slot;
    }

    /// Move to the LRU head (nginx does this on every lookup, even a rejected one).
    fn touch(&mut self, slot: u32) {
        if self.head != slot {
            self.unlink(slot);
            self.push_head(slot);
        }
    }

    /// Store a new, all-zero state for `key` (held `count` times).
    fn insert(&mut self, hash: u64, key: &[u8], p: &Policy, count: u32, totals: &Totals) -> u32 {
        let mut inline = [0; INLINE];
        let len = if key.len() <= INLINE {
            inline[..key.len()].copy_from_slice(key);
            key.len() as u8
        } else {
            LONG
        };
        let node = Node {
            last: 0,
            value: 0,
            key: inline,
            len,
            packed: false,
            prev: NIL,
            next: NIL,
            count,
        };
        let slot = if self.free != NIL {
            let slot = self.free;
            self.free = self.nodes[slot as usize].next;
            self.nodes[slot as usize] = node;
            slot
        } else {
            if self.nodes.len() == self.nodes.capacity() {
                // The even share at once (nginx preallocates the whole zone)
                // up to a few thousand states, then small steps (at most
                // doubling, so a huge zone grows with use), never past the
                // hard limit. A state that costs more units (a sliding
                // log) takes fewer nodes.
                let per = 1 + log_cost(p);
                let (share, hard) = (self.share / per, self.capacity / per);
                let step = if self.nodes.is_empty() {
                    self.table.reserve(share.min(INITIAL_TABLE), |_| 0);
                    share.min(4 * INITIAL_TABLE)
                } else {
                    (share / 16).clamp(1, self.nodes.len())
                };
                let room = hard.saturating_sub(self.nodes.len());
                self.nodes.reserve_exact(step.min(room).max(1));
            }
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        if len == LONG {
            self.long.insert(slot, key.into());
        }
        let (nodes, long, hasher) = (&self.nodes, &self.long, &self.hasher);
        self.table
            .insert_unique(hash, slot, |&i| hasher.hash_one(key_of(nodes, long, i)));
        self.push_head(slot);
        if log_cost(p) != 0 {
            if self.logs.len() <= slot as usize {
                // As many logs as nodes, not a doubling Vec's slack.
                self.logs
                    .reserve_exact(self.nodes.capacity().saturating_sub(self.logs.len()));
                self.logs.resize_with(slot as usize + 1, Log::new);
            }
            self.logs[slot as usize] = Log::with_capacity(p.count as usize);
        }
        let cost = self.cost(slot);
        self.len += 1;
        self.units += cost;
        totals.len.fetch_add(1, Ordering::Relaxed);
        totals.units.fetch_add(cost, Ordering::Relaxed);
        slot
    }

    fn remove(&mut self, slot: u32, totals: &Totals) {
        let cost = self.cost(slot);
        if let Some(log) = self.logs.get_mut(slot as usize) {
            *log = Log::new();
        }
        self.unlink(slot);
        let hash = self.hasher.hash_one(self.key(slot));
        if let Ok(entry) = self.table.find_entry(hash, |&i| i == slot) {
            entry.remove();
        }
        self.long.remove(&slot);
        let n = &mut self.nodes[slot as usize];
        n.len = 0;
        n.next = self.free;
        self.free = slot;
        self.len -= 1;
        self.units -= cost;
        totals.len.fetch_sub(1, Ordering::Relaxed);
        totals.units.fetch_sub(cost, Ordering::Relaxed);
    }

    /// nginx's `ngx_http_limit_req_expire`: look at the LRU tail and remove
    /// up to two drained states idle for a minute; with `force`, first remove
    /// the tail whatever its state (an eviction).
    fn expire(&mut self, now: u64, p: &Policy, force: bool, totals: &Totals) {
        let mut n = u8::from(!force);
        while n < 3 {
            let slot = self.tail;
            if slot == NIL {
                return;
            }
            let node = &self.nodes[slot as usize];
            if node.count != 0 {
                return;
            }
            let view = View {
                cell: &node.cell(),
                log: self.logs.get(slot as usize).unwrap_or(&NO_LOG),
            };
            if n != 0 && !algorithm::expired(p, view, now) {
                return;
            }
            if n == 0 {
                self.evictions += 1;
            }
            n += 1;
            self.remove(slot, totals);
        }
    }
}
