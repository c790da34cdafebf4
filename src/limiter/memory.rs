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
//! Nothing here reads a clock: `now` comes in as an argument.

use super::bucket::{Bucket, Rate};
use hashbrown::HashTable;
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
const INLINE: usize = 16;

/// The largest excess a state can hold: burst is capped so that
/// `burst*1000 + 1000` fits (see config: burst ≤ 4,000,000).
pub const MAX_EXCESS: u64 = u32::MAX as u64;

/// A key stored compactly: IPv4/IPv6 addresses (`$binary_remote_addr`, 4 or
/// 16 bytes) and other short keys inline, longer keys behind one thin pointer.
#[derive(Clone, Debug)]
enum NodeKey {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<Box<[u8]>>),
}

impl NodeKey {
    fn new(key: &[u8]) -> NodeKey {
        if key.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..key.len()].copy_from_slice(key);
            NodeKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            NodeKey::Heap(Box::new(key.into()))
        }
    }

    /// What this key costs against the zone's size, in states: a long key
    /// on the heap costs its bytes too, so `size` bounds memory whatever the
    /// keys (nginx counts each state as 80 bytes plus its key).
    fn cost(&self) -> usize {
        cost_of(self.as_bytes().len())
    }

    fn heap_bytes(&self) -> usize {
        match self {
            NodeKey::Inline { .. } => 0,
            NodeKey::Heap(b) => 16 + b.len(),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            NodeKey::Inline { len, bytes } => &bytes[..*len as usize],
            NodeKey::Heap(b) => &b[..],
        }
    }
}

/// One state: 48 bytes on 64-bit (nginx: 128).
struct Node {
    key: NodeKey,
    /// nginx's `last`.
    last: u64,
    /// nginx's `excess`, in milli-requests.
    excess: u32,
    /// LRU links (towards the head = more recent, towards the tail = older);
    /// `next` doubles as the free-list link of an empty slot.
    prev: u32,
    next: u32,
    /// Requests holding this node between lookup and accounting.
    count: u32,
}

impl Node {
    fn bucket(&self) -> Bucket {
        Bucket {
            excess: u64::from(self.excess),
            last: self.last,
        }
    }

    fn store(&mut self, b: Bucket) {
        self.excess = b.excess.min(MAX_EXCESS) as u32;
        self.last = b.last;
    }
}

fn cost_of(key_len: usize) -> usize {
    if key_len <= INLINE {
        1
    } else {
        1 + (16 + key_len).div_ceil(BYTES_PER_STATE as usize)
    }
}

/// A node held by an unfinished multi-limit decision (nginx's `count++`).
/// It cannot be expired or evicted until accounted or released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    shard: u32,
    slot: u32,
}

/// The answer of a lookup, nginx's `NGX_BUSY / NGX_OK / NGX_AGAIN / NGX_ERROR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Over the burst: nothing stored. `wait_ms` is the time until this key's
    /// next request would be accepted.
    Busy { excess: u64, wait_ms: u64 },
    /// Accepted and charged.
    Charged { excess: u64 },
    /// Accepted but not charged yet; the node is held.
    Held { excess: u64, held: Held },
    /// No memory for a new state even after forced eviction.
    NoMemory,
}

struct Shard {
    table: HashTable<u32>,
    nodes: Vec<Node>,
    free: u32,
    head: u32,
    tail: u32,
    len: usize,
    /// What the stored states cost, in states (see `NodeKey::cost`).
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
                    + s.nodes.iter().map(|n| n.key.heap_bytes()).sum::<usize>()
            })
            .sum()
    }

    /// The stored bucket of `key`, if any (for tests and diagnostics).
    pub fn peek(&self, key: &[u8]) -> Option<Bucket> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shards[self.shard_of(hash)].lock();
        shard
            .find(hash, key)
            .map(|i| shard.nodes[i as usize].bucket())
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
    pub fn lookup(&self, key: &[u8], now: u64, rate: Rate, burst: u64, charge: bool) -> Lookup {
        let (si, hash) = self.locate(key);
        self.lock(si).lookup(hash, key, now, rate, burst, charge)
    }

    /// [`Locked::account`] on the held node's shard.
    pub fn account(&self, held: Held, now: u64, rate: Rate) -> u64 {
        self.lock(held.shard as usize).account(held, now, rate)
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
    /// (with `hash` from [`MemoryZone::locate`]) and decide. `burst` is in
    /// milli-requests. With `charge`, an accepted request is stored at once;
    /// without, the node is held for [`Locked::account`] or [`Locked::release`].
    pub fn lookup(
        &mut self,
        hash: u64,
        key: &[u8],
        now: u64,
        rate: Rate,
        burst: u64,
        charge: bool,
    ) -> Lookup {
        let si = self.index;
        let zone = self.zone;
        let shard = &mut *self.shard;
        if let Some(slot) = shard.find(hash, key) {
            shard.touch(slot);
            let node = &mut shard.nodes[slot as usize];
            let mut bucket = node.bucket();
            let step = bucket.step(now, rate);
            // Requests holding this node (deciding another limit, e.g. one in
            // Redis) will each charge a request: count them as charged, so
            // that concurrent requests cannot all pass on the same state.
            // Within one atomic decision nobody else holds it (adds 0).
            let pending = u64::from(node.count) * super::bucket::ONE;
            if step.excess + pending > burst {
                let wait_ms = Bucket {
                    excess: bucket.excess + pending,
                    ..bucket
                }
                .wait_until_accepted(now, rate, burst);
                return Lookup::Busy {
                    excess: step.excess + pending,
                    wait_ms,
                };
            }
            if charge {
                bucket.commit(step, now);
                node.store(bucket);
                return Lookup::Charged {
                    excess: step.excess,
                };
            }
            node.count += 1;
            return Lookup::Held {
                excess: step.excess,
                held: Held { shard: si, slot },
            };
        }

        let cost = cost_of(key.len());
        let totals = &zone.totals;
        shard.expire(now, rate, false, totals);
        let over_zone = || totals.units.load(Ordering::Relaxed) + cost > zone.capacity;
        if shard.units + cost > shard.capacity || over_zone() {
            shard.expire(now, rate, true, totals);
            // After a forced eviction only this shard's hard limit refuses:
            // other shards inserting at the same time may have pushed the
            // zone total a few states over, which the next evictions absorb.
            while shard.units + cost > shard.capacity {
                let before = shard.units;
                shard.expire(now, rate, true, totals);
                if shard.units == before {
                    return Lookup::NoMemory;
                }
            }
        }
        // A held new node gets `last = 0`, as in nginx: when it is accounted,
        // the whole clock has elapsed and it starts empty.
        let bucket = Bucket {
            excess: 0,
            last: if charge { now } else { 0 },
        };
        let slot = shard.insert(hash, key, bucket, u32::from(!charge), totals);
        if charge {
            Lookup::Charged { excess: 0 }
        } else {
            Lookup::Held {
                excess: 0,
                held: Held { shard: si, slot },
            }
        }
    }

    /// nginx's accounting of an earlier limit once all limits passed: charge
    /// the held node at `now` and release it. Returns the stored excess.
    pub fn account(&mut self, held: Held, now: u64, rate: Rate) -> u64 {
        debug_assert_eq!(held.shard, self.index);
        let node = &mut self.shard.nodes[held.slot as usize];
        let mut bucket = node.bucket();
        let step = bucket.step(now, rate);
        bucket.commit(step, now);
        node.store(bucket);
        node.count -= 1;
        step.excess
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
            // touched, too.
            table: HashTable::with_capacity(capacity.min(INITIAL_TABLE)),
            share,
            nodes: Vec::new(),
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

    fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let nodes = &self.nodes;
        self.table
            .find(hash, |&i| nodes[i as usize].key.as_bytes() == key)
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

    fn insert(
        &mut self,
        hash: u64,
        key: &[u8],
        bucket: Bucket,
        count: u32,
        totals: &Totals,
    ) -> u32 {
        let mut node = Node {
            key: NodeKey::new(key),
            last: 0,
            excess: 0,
            prev: NIL,
            next: NIL,
            count,
        };
        node.store(bucket);
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
                // hard limit.
                let step = if self.nodes.is_empty() {
                    self.share.min(4 * INITIAL_TABLE)
                } else {
                    (self.share / 16).clamp(1, self.nodes.len())
                };
                let room = self.capacity - self.nodes.len();
                self.nodes.reserve_exact(step.min(room).max(1));
            }
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.table.insert_unique(hash, slot, |&i| {
            hasher.hash_one(nodes[i as usize].key.as_bytes())
        });
        self.push_head(slot);
        let cost = self.nodes[slot as usize].key.cost();
        self.len += 1;
        self.units += cost;
        totals.len.fetch_add(1, Ordering::Relaxed);
        totals.units.fetch_add(cost, Ordering::Relaxed);
        slot
    }

    fn remove(&mut self, slot: u32, totals: &Totals) {
        let cost = self.nodes[slot as usize].key.cost();
        self.unlink(slot);
        let hash = self
            .hasher
            .hash_one(self.nodes[slot as usize].key.as_bytes());
        if let Ok(entry) = self.table.find_entry(hash, |&i| i == slot) {
            entry.remove();
        }
        let n = &mut self.nodes[slot as usize];
        n.key = NodeKey::Inline {
            len: 0,
            bytes: [0; INLINE],
        };
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
    fn expire(&mut self, now: u64, rate: Rate, force: bool, totals: &Totals) {
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
            if n != 0 && !node.bucket().expired(now, rate) {
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
