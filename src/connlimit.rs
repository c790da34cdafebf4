//! nginx's answer to floods: `limit_conn` (how many requests of one key are
//! being processed at once) and `worker_connections` (how many client
//! connections one worker keeps open).
//!
//! # limit_conn
//! Despite its name, nginx's `limit_conn` counts *requests being
//! processed*, not TCP connections: a request is counted from the preaccess
//! phase (after `limit_req`, so a request it rejects is never counted and
//! one it delays is counted only once its delay is over) until the request
//! is freed, after the last byte of its response. An idle keep-alive
//! connection holds nothing. The state per key is a counter; a key whose
//! counter reaches zero is forgotten at once (there is nothing to expire).
//!
//! A request is counted in every zone of its location's `limit_conn` list,
//! in order; the first zone that refuses (over its `conn`, or full) ends the
//! check and releases what the request already held, as nginx's
//! `ngx_http_limit_conn_cleanup_all` does, in dry run too: a request that
//! passes only because of dry run holds nothing.
//!
//! Counting is exact under any number of worker threads: one lock per zone
//! (nginx too takes its zone's mutex for each check and release), held for a
//! hash-map update. A [`Held`] releases its counts when dropped, so every
//! way a request ends (response done, client gone mid-body, error, a
//! handler dropped) releases them; [`Held::keep_until_sent`] keeps them
//! until the response body is finished.
//!
//! # Zone size
//! A zone holds as many keys as nginx's would in the same `size`: nginx
//! keeps one node per key (36 bytes + the key) in a slab allocator over
//! `size` bytes of shared memory, in 4 KB pages each cut into slots of one
//! power-of-two size. [`SlabModel`] reproduces that arithmetic (measured on
//! nginx 1.22: a 32k zone holds 383 keys of 10 bytes, 160 of 40 and 80 of
//! 100; a 64k zone 895 of 10), so a full zone rejects where nginx's does.
//! It counts whole pages per slot size and ignores fragmentation (nginx's
//! pages, freed only when empty, can hold fewer).
//!
//! # worker_connections
//! Each worker thread counts the client connections it has open
//! ([`WorkerSlot`]); once `worker_connections` are open, a new one is closed
//! as soon as it is accepted, before anything is allocated for it, and
//! nginx's alert `N worker_connections are not enough` is logged at most
//! once a second per worker (nginx logs it for every refused connection; a
//! flood must not turn into a flood of log lines). Every refusal is counted
//! in `sluice_connections_refused_total`.

use crate::body::Body;
use crate::vars::Template;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

/// nginx's default `limit_conn_status`.
pub const DEFAULT_STATUS: u16 = 503;

/// nginx keeps a node's key length in one byte: longer keys are not limited
/// (and logged).
pub const MAX_KEY_LEN: usize = 255;

/// `$limit_conn_status` values.
pub const PASSED: &str = "PASSED";
pub const REJECTED: &str = "REJECTED";
pub const REJECTED_DRY_RUN: &str = "REJECTED_DRY_RUN";

/// nginx 1.22's slab allocator as it holds a `limit_conn_zone`'s nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlabModel {
    /// Pages the zone's size gives.
    pages: usize,
    /// Slots taken in each node size class (64, 128, 256, 512 bytes), the
    /// zone's own fixed allocations included.
    used: [usize; 4],
}

impl SlabModel {
    const PAGE: usize = 4096;
    /// `ngx_slab_pool_t`, its slot heads and its statistics, before the
    /// page descriptors (64-bit).
    const HEADER: usize = 712;
    /// `ngx_slab_page_t`: one per page, before the pages.
    const PAGE_DESCRIPTOR: usize = 24;
    /// Slots per page of each class: pages of 64-byte slots keep their
    /// bitmap in the descriptor, larger ones too.
    const PER_PAGE: [usize; 4] = [64, 32, 16, 8];

    /// The model of an empty zone named `name` of `size` bytes.
    pub fn new(size: u64, name: &str) -> SlabModel {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let avail = size.saturating_sub(Self::HEADER);
        let mut pages = avail / (Self::PAGE + Self::PAGE_DESCRIPTOR);
        // The pages start at the first page boundary after the descriptors.
        let start =
            (Self::HEADER + pages * Self::PAGE_DESCRIPTOR).div_ceil(Self::PAGE) * Self::PAGE;
        pages = pages.min(size.saturating_sub(start) / Self::PAGE);
        let mut m = SlabModel {
            pages,
            used: [0; 4],
        };
        // What nginx allocates when it creates the zone: the tree (24 bytes,
        // in a page of 32-byte slots: `fixed_pages`), its sentinel node (40
        // bytes: a 64-byte slot) and the " in limit_conn_zone "NAME"" text
        // for its allocation-failure line.
        m.used[0] += 1;
        let log_ctx = " in limit_conn_zone \"\"".len() + 1 + name.len();
        if log_ctx > 32 {
            if let Some(c) = Self::class_of_bytes(log_ctx) {
                m.used[c] += 1;
            }
        }
        m
    }

    /// The page of 32-byte slots holding the tree (and a short log text).
    fn fixed_pages() -> usize {
        1
    }

    fn class_of_bytes(n: usize) -> Option<usize> {
        match n {
            0..=64 => Some(0),
            65..=128 => Some(1),
            129..=256 => Some(2),
            257..=512 => Some(3),
            _ => None,
        }
    }

    /// The slot class of a node for a key of `len` bytes (≤ [`MAX_KEY_LEN`]).
    fn class(len: usize) -> usize {
        // offsetof(ngx_rbtree_node_t, color) + offsetof(node, data) + len.
        Self::class_of_bytes(36 + len).unwrap_or(3)
    }

    fn pages_used(&self) -> usize {
        Self::fixed_pages()
            + self
                .used
                .iter()
                .zip(Self::PER_PAGE)
                .map(|(&n, per)| n.div_ceil(per))
                .sum::<usize>()
    }

    /// Take a slot for a key of `len` bytes, if the zone has room.
    pub fn alloc(&mut self, len: usize) -> bool {
        let c = Self::class(len);
        let per = Self::PER_PAGE[c];
        // A new page is needed when this class's pages are all full.
        if self.used[c] % per == 0 && self.pages_used() + 1 > self.pages {
            return false;
        }
        self.used[c] += 1;
        true
    }

    pub fn free(&mut self, len: usize) {
        let c = Self::class(len);
        self.used[c] = self.used[c].saturating_sub(1);
    }
}

/// A `[conn_zones.NAME]`: its key and the requests each key has in flight.
pub struct ConnZone {
    pub name: Arc<str>,
    pub key: Template,
    pub size: u64,
    table: Mutex<Table>,
    pub counts: ConnCounts,
}

struct Table {
    /// Requests in flight per key; a key at zero is removed.
    keys: HashMap<Box<[u8]>, u32, foldhash::fast::RandomState>,
    slab: SlabModel,
}

/// What [`ConnZone::acquire`] found.
#[derive(Debug)]
pub enum Acquire {
    /// Counted: the request holds a slot.
    Held(Slot),
    /// The key already has `conn` requests in flight.
    Over,
    /// A new key and no room for it (nginx: `ngx_slab_alloc() failed`).
    Full,
}

impl ConnZone {
    pub fn new(name: &str, key: Template, size: u64) -> ConnZone {
        ConnZone {
            name: name.into(),
            key,
            size,
            table: Mutex::new(Table {
                keys: HashMap::default(),
                slab: SlabModel::new(size, name),
            }),
            counts: ConnCounts::default(),
        }
    }

    /// Count one more request of `key` unless it has `conn` in flight.
    pub fn acquire(self: &Arc<Self>, key: &[u8], conn: u32) -> Acquire {
        let mut t = self.table.lock();
        if let Some(n) = t.keys.get_mut(key) {
            if *n >= conn {
                return Acquire::Over;
            }
            *n += 1;
        } else {
            if !t.slab.alloc(key.len()) {
                return Acquire::Full;
            }
            t.keys.insert(key.into(), 1);
        }
        drop(t);
        Acquire::Held(Slot {
            zone: self.clone(),
            key: key.into(),
        })
    }

    fn release(&self, key: &[u8]) {
        let mut t = self.table.lock();
        let gone = match t.keys.get_mut(key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => true,
            // Cannot happen: a slot exists only for a counted key.
            None => false,
        };
        if gone {
            t.keys.remove(key);
            t.slab.free(key.len());
            // A flood of distinct keys grows the map; give the memory back
            // once it is mostly empty.
            if t.keys.capacity() > 1024 && t.keys.len() < t.keys.capacity() / 8 {
                let want = t.keys.len() * 2;
                t.keys.shrink_to(want);
            }
        }
    }

    /// Requests in flight for `key`.
    #[cfg(test)]
    pub fn in_flight(&self, key: &[u8]) -> u32 {
        self.table.lock().keys.get(key).copied().unwrap_or(0)
    }

    /// Keys with requests in flight.
    pub fn keys(&self) -> usize {
        self.table.lock().keys.len()
    }
}

/// Decisions of one conn zone, for `/metrics`.
#[derive(Debug, Default)]
pub struct ConnCounts {
    pub passed: AtomicU64,
    pub rejected: AtomicU64,
    pub rejected_dry_run: AtomicU64,
    /// Rejections (dry run included) because the zone was full.
    pub full: AtomicU64,
}

impl ConnCounts {
    /// Start counting from zero (NGINX Plus's `DELETE` on a zone).
    pub fn reset(&self) {
        for c in [
            &self.passed,
            &self.rejected,
            &self.rejected_dry_run,
            &self.full,
        ] {
            c.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// One request counted in one zone; released on drop.
#[derive(Debug)]
pub struct Slot {
    zone: Arc<ConnZone>,
    key: Box<[u8]>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.zone.release(&self.key);
    }
}

impl std::fmt::Debug for ConnZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnZone")
            .field("name", &self.name)
            .finish()
    }
}

/// One `limit_conn` line of a location.
#[derive(Clone)]
pub struct ConnLimit {
    pub zone: Arc<ConnZone>,
    pub conn: u32,
}

/// Everything a request holds; released on drop.
#[derive(Debug, Default)]
pub struct Held(Vec<Slot>);

/// Let go when its response body ends (or is dropped).
impl crate::body::Watch for Held {}

/// A request's counts handed to HTTP/2 with its response (in its
/// extensions): the stream keeps them until its end was written to the
/// client, which only the connection can see (hyper buffers a body its
/// window holds up).
#[derive(Clone, Debug, Default)]
pub struct HeldUntilWritten(pub Arc<Mutex<Option<Held>>>);

impl Held {
    /// The response, holding these counts until its stream's end was
    /// written ([`HeldUntilWritten`]).
    pub fn keep_until_written(self, mut resp: http::Response<Body>) -> http::Response<Body> {
        if !self.0.is_empty() {
            let h = HeldUntilWritten(Arc::new(Mutex::new(Some(self))));
            resp.extensions_mut().insert(h);
        }
        resp
    }

    /// `resp` with its body keeping these counts until it is finished.
    pub fn keep_until_sent(self, resp: http::Response<Body>) -> http::Response<Body> {
        if self.0.is_empty() {
            return resp;
        }
        use http_body_util::BodyExt;
        resp.map(|body| crate::body::Watched::new(body, self).boxed())
    }
}

/// The outcome of a location's `limit_conn` list.
#[derive(Debug)]
pub enum Decision {
    /// No line applied (no lines, or every key empty): `$limit_conn_status`
    /// stays unset.
    Unlimited,
    Passed(Held),
    /// Line `limit` refused; `full`: because its zone had no room. Nothing
    /// is held.
    Rejected {
        limit: usize,
        full: bool,
    },
}

/// Check `limits` in order; `key(i)` is the key of line `i` (`None`: not
/// limited by it, as an empty or overlong key). Counts the decision in the
/// zones' [`ConnCounts`] (`dry_run`: a rejection lets the request through).
pub fn check<K: AsRef<[u8]>>(
    limits: &[ConnLimit],
    dry_run: bool,
    mut key: impl FnMut(usize) -> Option<K>,
) -> Decision {
    let mut held = Vec::new();
    for (i, l) in limits.iter().enumerate() {
        let Some(k) = key(i) else { continue };
        let full = match l.zone.acquire(k.as_ref(), l.conn) {
            Acquire::Held(s) => {
                held.push((i, s));
                continue;
            }
            Acquire::Over => false,
            Acquire::Full => true,
        };
        let c = &l.zone.counts;
        if full {
            c.full.fetch_add(1, Ordering::Relaxed);
        }
        if dry_run {
            c.rejected_dry_run.fetch_add(1, Ordering::Relaxed);
        } else {
            c.rejected.fetch_add(1, Ordering::Relaxed);
        }
        // `held` is dropped here: what was taken is given back.
        return Decision::Rejected { limit: i, full };
    }
    if held.is_empty() {
        return Decision::Unlimited;
    }
    for (i, _) in &held {
        limits[*i]
            .zone
            .counts
            .passed
            .fetch_add(1, Ordering::Relaxed);
    }
    Decision::Passed(Held(held.into_iter().map(|(_, s)| s).collect()))
}

/// One open client connection of this worker thread, counted against
/// `worker_connections` until dropped; and, once it is known, in the
/// count of connections of the protocol it speaks ([`WorkerSlot::counted_in`]).
/// The slot goes wherever the connection goes (parked, resumed, handed
/// from TLS to HTTP/2), so both counts end exactly when it closes.
#[derive(Debug)]
pub struct WorkerSlot {
    worker: Arc<WorkerCount>,
    protocol: Option<Arc<AtomicI64>>,
}

#[derive(Debug, Default)]
struct WorkerCount {
    open: AtomicUsize,
    /// The second of the last alert (its rate limit), 0 = never.
    last_alert_s: AtomicU64,
    /// The second of the last "reusing connections" warning, 0 = never.
    last_reuse_s: AtomicU64,
}

/// Whether `now_s` is a new second for the log line whose last second
/// `last` holds (and records it): nginx's once-a-second lines.
fn first_in_second(last: &AtomicU64, now_s: u64) -> bool {
    let now = now_s.max(1);
    last.swap(now, Ordering::Relaxed) != now
}

thread_local! {
    static WORKER: Arc<WorkerCount> = Arc::default();
}

/// Why [`WorkerSlot::take`] refused.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    /// Log the alert now: the first refusal of this second on this worker.
    pub alert: bool,
}

impl WorkerSlot {
    /// Count one more connection on this worker thread, unless it has
    /// `max` open. `now_s` is a clock in seconds, for the alert's rate
    /// limit.
    pub fn take(max: usize, now_s: u64) -> Result<WorkerSlot, Refused> {
        WORKER.with(|w| {
            // Only this thread takes slots: no race between load and add.
            if w.open.load(Ordering::Relaxed) >= max {
                return Err(Refused {
                    alert: first_in_second(&w.last_alert_s, now_s),
                });
            }
            w.open.fetch_add(1, Ordering::Relaxed);
            Ok(WorkerSlot {
                worker: w.clone(),
                protocol: None,
            })
        })
    }

    /// The connection speaks the protocol whose open connections `open`
    /// counts: counted there (and no longer in another) until it closes.
    /// Whether it was not counted there already.
    pub fn counted_in(&mut self, open: &Arc<AtomicI64>) -> bool {
        if self.protocol.as_ref().is_some_and(|p| Arc::ptr_eq(p, open)) {
            return false;
        }
        if let Some(before) = self.protocol.take() {
            before.fetch_sub(1, Ordering::Relaxed);
        }
        open.fetch_add(1, Ordering::Relaxed);
        self.protocol = Some(open.clone());
        true
    }

    /// Whether to log that this worker thread reuses connections now: the
    /// first time this second (nginx's `connections_reuse_time`).
    pub fn reuse_warning_due(now_s: u64) -> bool {
        WORKER.with(|w| first_in_second(&w.last_reuse_s, now_s))
    }

    /// Connections open on this worker thread now.
    pub fn open_here() -> usize {
        WORKER.with(|w| w.open.load(Ordering::Relaxed))
    }
}

/// A worker thread's count of open connections, readable from any thread:
/// the accept loops compare them to share new clients out evenly.
#[derive(Clone, Debug)]
pub struct WorkerLoad(Arc<WorkerCount>);

impl WorkerLoad {
    /// The calling thread's.
    pub fn here() -> WorkerLoad {
        WORKER.with(|w| WorkerLoad(w.clone()))
    }

    /// Its connections open now.
    pub fn open(&self) -> usize {
        self.0.open.load(Ordering::Relaxed)
    }
}

impl Drop for WorkerSlot {
    fn drop(&mut self) {
        self.worker.open.fetch_sub(1, Ordering::Relaxed);
        if let Some(open) = &self.protocol {
            open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;
