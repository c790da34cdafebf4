//! The keys a zone limits most, for the admin API's `top`: a space-saving
//! sketch (Metwally, Agrawal, El Abbadi, "Efficient computation of frequent
//! and top-k elements in data streams", 2005) of fixed size per zone.
//!
//! Why this shape: an exact count per key is a second zone's worth of
//! memory and a flood of new keys would grow it; space-saving keeps `m`
//! counters, and a key seen more than 1/m of the time is never missed.
//! When a new key arrives and the counters are full, it takes the smallest
//! counter's place and inherits its count as its `error`: a key's true
//! count lies in `[count - error, count]`.
//!
//! The sketch is split into shards by key hash (each key in exactly one,
//! so the shards' union is the whole sketch) to keep worker threads apart,
//! and each shard keeps two windows of `window_ms`, the current and the one
//! before, so that `top` reports the last one to two windows and old floods
//! fade. Nothing reads a clock: `now` comes in, in milliseconds. Only
//! rejections and delays are recorded, so a zone whose traffic passes pays
//! nothing.

use std::hash::BuildHasher;

/// A shard's lock: held for a scan of a few dozen counters.
type Mutex<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;

const SHARDS: usize = 8;

/// What happened to a request of the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Rejected,
    Delayed,
}

/// One key of [`TopKeys::top`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopKey {
    pub key: Vec<u8>,
    /// Rejections and delays counted for it, perhaps over by `error`.
    pub count: u64,
    /// The most `count` may be over.
    pub error: u64,
    /// Rejections and delays seen since it holds a counter (exact, and
    /// at most `count`).
    pub rejected: u64,
    pub delayed: u64,
}

/// One window's counters. The scan on every record reads only `hashes`
/// and `counts` (contiguous); a key's bytes are compared only when its
/// hash matches, and copied only when it takes a counter.
#[derive(Default)]
struct Window {
    hashes: Vec<u64>,
    counts: Vec<u64>,
    entries: Vec<TopKey>,
}

impl Window {
    fn clear(&mut self) {
        self.hashes.clear();
        self.counts.clear();
        self.entries.clear();
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let mut from = 0;
        while let Some(i) = self.hashes[from..].iter().position(|&h| h == hash) {
            if self.entries[from + i].key == key {
                return Some(from + i);
            }
            from += i + 1;
        }
        None
    }

    fn remove(&mut self, key: &[u8]) {
        while let Some(i) = self.entries.iter().position(|e| e.key == key) {
            self.hashes.swap_remove(i);
            self.counts.swap_remove(i);
            self.entries.swap_remove(i);
        }
    }
}

#[derive(Default)]
struct Sketch {
    /// `now / window_ms` of `current`.
    epoch: u64,
    current: Window,
    previous: Window,
}

/// A zone's most limited keys.
pub struct TopKeys {
    shards: Box<[Mutex<Sketch>]>,
    per_shard: usize,
    window_ms: u64,
    k: usize,
    hasher: foldhash::fast::FixedState,
}

impl TopKeys {
    /// A sketch able to report the top `k` keys (0: off, records nothing)
    /// over windows of `window_ms`.
    pub fn new(k: usize, window_ms: u64) -> TopKeys {
        let shards = if k == 0 { 0 } else { SHARDS };
        TopKeys {
            shards: (0..shards).map(|_| Mutex::new(Sketch::default())).collect(),
            // Each shard holds more than its share of k, so that an
            // uneven spread of the top keys over shards loses none.
            per_shard: (2 * k).max(8),
            window_ms: window_ms.max(1),
            k,
            hasher: foldhash::fast::FixedState::with_seed(0x5eed),
        }
    }

    /// The `k` it was made for (0: off).
    pub fn k(&self) -> usize {
        self.k
    }

    /// The counters it holds at most: its memory is this many keys.
    pub fn capacity(&self) -> usize {
        self.shards.len() * self.per_shard * 2
    }

    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }

    /// Count `event` for `key` at `now`.
    pub fn record(&self, key: &[u8], event: Event, now: u64) {
        if self.shards.is_empty() {
            return;
        }
        let hash = self.hasher.hash_one(key);
        let shard = (hash >> 32) as usize % self.shards.len();
        let mut s = self.shards[shard].lock();
        s.rotate(now / self.window_ms);
        let w = &mut s.current;
        let i = match w.find(hash, key) {
            Some(i) => i,
            None if w.entries.len() < self.per_shard => {
                w.hashes.push(hash);
                w.counts.push(0);
                w.entries.push(TopKey {
                    key: key.to_vec(),
                    count: 0,
                    error: 0,
                    rejected: 0,
                    delayed: 0,
                });
                w.entries.len() - 1
            }
            None => {
                // The smallest counter gives its place (the first of equals).
                let (mut min, mut at) = (u64::MAX, 0);
                for (i, &c) in w.counts.iter().enumerate() {
                    if c < min {
                        (min, at) = (c, i);
                    }
                }
                let e = &mut w.entries[at];
                e.key.clear();
                e.key.extend_from_slice(key);
                (e.error, e.rejected, e.delayed) = (min, 0, 0);
                w.hashes[at] = hash;
                at
            }
        };
        w.counts[i] += 1;
        let e = &mut w.entries[i];
        e.count = w.counts[i];
        match event {
            Event::Rejected => e.rejected += 1,
            Event::Delayed => e.delayed += 1,
        }
    }

    /// The `k` keys with the highest counts over the current and the
    /// previous window at `now`, highest first.
    pub fn top(&self, k: usize, now: u64) -> Vec<TopKey> {
        let epoch = now / self.window_ms;
        let mut all: Vec<TopKey> = Vec::new();
        for shard in self.shards.iter() {
            let s = shard.lock();
            let windows: [&[TopKey]; 2] = match epoch.checked_sub(s.epoch) {
                Some(0) => [&s.current.entries, &s.previous.entries],
                Some(1) => [&s.current.entries, &[]],
                _ => [&[], &[]],
            };
            let start = all.len();
            for e in windows.into_iter().flatten() {
                match all[start..].iter_mut().find(|a| a.key == e.key) {
                    Some(a) => {
                        a.count += e.count;
                        a.error += e.error;
                        a.rejected += e.rejected;
                        a.delayed += e.delayed;
                    }
                    None => all.push(e.clone()),
                }
            }
        }
        all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        all.truncate(k);
        all
    }

    /// Forget `key` (the admin API forgave it).
    pub fn forget(&self, key: &[u8]) {
        for shard in self.shards.iter() {
            let mut s = shard.lock();
            s.current.remove(key);
            s.previous.remove(key);
        }
    }
}

impl Sketch {
    /// Move to window `epoch`: the current window becomes the previous
    /// one if it is the one just before, else both are emptied.
    fn rotate(&mut self, epoch: u64) {
        if epoch == self.epoch {
            return;
        }
        if epoch == self.epoch + 1 {
            std::mem::swap(&mut self.current, &mut self.previous);
        } else {
            self.previous.clear();
        }
        self.current.clear();
        self.epoch = epoch;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn off_records_nothing() {
        let t = TopKeys::new(0, 60_000);
        t.record(b"a", Event::Rejected, 0);
        assert!(t.top(10, 0).is_empty());
        assert_eq!(t.capacity(), 0);
    }

    #[test]
    fn counts_rejections_and_delays_apart() {
        let t = TopKeys::new(3, 60_000);
        for _ in 0..5 {
            t.record(b"a", Event::Rejected, 1_000);
        }
        t.record(b"a", Event::Delayed, 1_000);
        t.record(b"b", Event::Delayed, 1_000);
        let top = t.top(3, 2_000);
        assert_eq!(top.len(), 2);
        assert_eq!((&top[0].key[..], top[0].count), (&b"a"[..], 6));
        assert_eq!((top[0].rejected, top[0].delayed, top[0].error), (5, 1, 0));
        assert_eq!((&top[1].key[..], top[1].count), (&b"b"[..], 1));
    }

    #[test]
    fn windows_fade() {
        let t = TopKeys::new(3, 1_000);
        t.record(b"old", Event::Rejected, 500);
        t.record(b"new", Event::Rejected, 1_500);
        // In the next window, the previous one still counts.
        let names = |v: Vec<TopKey>| v.into_iter().map(|e| e.key).collect::<Vec<_>>();
        assert_eq!(names(t.top(5, 1_600)).len(), 2);
        // Two windows on, the first is gone; three on, everything.
        assert_eq!(names(t.top(5, 2_100)), vec![b"new".to_vec()]);
        assert!(t.top(5, 3_100).is_empty());
    }

    #[test]
    fn forgotten_keys_leave_the_list() {
        let t = TopKeys::new(3, 60_000);
        t.record(b"a", Event::Rejected, 0);
        t.record(b"b", Event::Rejected, 0);
        t.forget(b"a");
        assert_eq!(t.top(5, 0).len(), 1);
    }

    proptest! {
        #![proptest_config(crate::limiter::proptest_config(200))]

        /// Space-saving's guarantees over any stream: every reported count
        /// is within its error of the truth, and a key with more than
        /// n / m events (m counters in its shard) is reported.
        #[test]
        fn counts_are_within_their_error(stream in proptest::collection::vec(0u8..40, 1..600)) {
            let t = TopKeys::new(2, 60_000);
            let mut truth = [0u64; 40];
            for &k in &stream {
                truth[k as usize] += 1;
                t.record(&[k], Event::Rejected, 0);
            }
            let top = t.top(usize::MAX, 0);
            for e in &top {
                let real = truth[e.key[0] as usize];
                prop_assert!(e.count >= real && e.count - e.error <= real, "{e:?} real {real}");
            }
            // A shard of 8 counters misses no key above a ninth of its stream.
            let n = stream.len() as u64;
            for (k, &c) in truth.iter().enumerate() {
                if c * 8 > n {
                    prop_assert!(top.iter().any(|e| e.key == [k as u8]), "key {k} seen {c} of {n}");
                }
            }
        }
    }
}
