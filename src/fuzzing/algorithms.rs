//! The `algorithms` fuzz target: every algorithm of a zone through the
//! memory store, each decision checked against the pure algorithm (the
//! store must add nothing but forgetting), and against bounds that hold
//! whatever the arithmetic: no more admitted over any interval than the
//! algorithm promises, a `Retry-After` that is exactly when the key is
//! admitted again, and `RateLimit` figures that hold.

use super::Reader;
use crate::limiter::algorithm::{self, Algorithm, Cell, Log, View};
use crate::limiter::{Lookup, MemoryZone, Policy};

const T0: u64 = 1_700_000_000_000;
const KEYS: u8 = 4;
const MAX_OPS: usize = 300;

/// Input: the algorithm, count (1–16), period (one of a few), burst
/// (0–9, buckets only), zone capacity; then per request a key and a time
/// step (`now` never goes back).
pub fn algorithms(data: &[u8]) {
    let mut r = Reader(data);
    let algorithm = Algorithm::ALL[usize::from(r.u8()) % Algorithm::ALL.len()];
    let count = u64::from(r.u8() % 16) + 1;
    let period = [1, 7, 1000, 2500, 10_000, 60_000][usize::from(r.u8()) % 6];
    let Some(p) = Policy::new(algorithm, count, period) else {
        return; // a leaky bucket too slow for nginx's unit
    };
    let burst = if algorithm.is_window() {
        0
    } else {
        u64::from(r.u8() % 10) * 1000
    };
    // Room for every key (a sliding log of 16 costs 4 states): states are
    // forgotten only by expiry, when as new, so the bounds below hold.
    let zone = MemoryZone::with_capacity(16 + usize::from(r.u8() % 48));
    let mut keys: Vec<Key> = (0..KEYS).map(|_| Key::default()).collect();
    let mut now = T0;
    for _ in 0..MAX_OPS {
        if r.is_empty() {
            break;
        }
        let k = r.u8() % KEYS;
        let step = r.u8();
        now += match step {
            0..=127 => u64::from(step),
            128..=249 => u64::from(step - 127) * 100,
            _ => u64::from(r.u16()) * 10,
        };
        let key = &mut keys[usize::from(k)];
        key.forget_if_dropped(&zone, &[k]);
        let want = key.check(&p, burst, now);
        match zone.lookup(&[k], now, &p, burst, true) {
            Lookup::Charged { excess, standing } => {
                assert!(want.admit, "admitted, the algorithm refuses: {want:?}");
                assert_eq!(standing, want.standing);
                key.check_standing(&p, burst, now, want);
                let stored = key.charge(&p, now);
                assert_eq!(excess, stored, "stored excess");
                key.admitted.push(now);
                key.check_bound(&p, burst);
            }
            Lookup::Busy { excess, wait_ms } => {
                assert!(!want.admit, "refused, the algorithm admits");
                assert_eq!((excess, wait_ms), (want.excess, want.wait_ms));
                assert!(wait_ms > 0, "refused with no wait");
                assert!(key.check(&p, burst, now + wait_ms).admit, "still refused");
                assert!(
                    !key.check(&p, burst, now + wait_ms - 1).admit,
                    "admitted earlier"
                );
            }
            Lookup::NoMemory => panic!("no memory in a zone with room for every key"),
            Lookup::Held { .. } => unreachable!("charge = true never holds"),
        }
    }
}

/// One key as the algorithm sees it, and the times it was admitted.
#[derive(Default)]
struct Key {
    cell: Cell,
    log: Log,
    admitted: Vec<u64>,
}

impl Key {
    fn check(&self, p: &Policy, burst: u64, now: u64) -> algorithm::Check {
        let view = View {
            cell: &self.cell,
            log: &self.log,
        };
        algorithm::check(p, burst, view, now, 0)
    }

    fn charge(&mut self, p: &Policy, now: u64) -> u64 {
        algorithm::charge(p, &mut self.cell, &mut self.log, now)
    }

    /// The store may forget a state it found expired: the model then starts
    /// over too. The admitted times stay: the bounds hold across.
    fn forget_if_dropped(&mut self, zone: &MemoryZone, key: &[u8]) {
        if zone.peek(key).is_none() {
            self.cell = Cell::default();
            self.log.clear();
        }
    }

    /// `remaining` more pass at once, not one more; at least one more
    /// than that passes `reset_ms` later, and not a millisecond earlier.
    fn check_standing(&self, p: &Policy, burst: u64, now: u64, c: algorithm::Check) {
        let mut k = Key {
            cell: self.cell,
            log: self.log.clone(),
            admitted: Vec::new(),
        };
        k.charge(p, now);
        let s = c.standing;
        assert_eq!(k.at_once(p, burst, now, s.remaining + 1), s.remaining);
        let then = now + s.reset_ms;
        assert_eq!(k.at_once(p, burst, then, s.remaining + 1), s.remaining + 1);
        if s.reset_ms > 0 {
            assert!(k.at_once(p, burst, then - 1, s.remaining + 1) <= s.remaining);
        }
    }

    fn at_once(&self, p: &Policy, burst: u64, now: u64, most: u64) -> u64 {
        let mut k = Key {
            cell: self.cell,
            log: self.log.clone(),
            admitted: Vec::new(),
        };
        (0..most)
            .filter(|_| {
                let ok = k.check(p, burst, now).admit;
                if ok {
                    k.charge(p, now);
                }
                ok
            })
            .count() as u64
    }

    /// What the algorithm promises over any interval, with the latest
    /// admission as its end.
    fn check_bound(&self, p: &Policy, burst: u64) {
        let Some(&end) = self.admitted.last() else {
            return;
        };
        for (i, &start) in self.admitted.iter().enumerate() {
            let n = (self.admitted.len() - i) as u64;
            let t = end - start;
            let most = bound(p, burst, t);
            assert!(n <= most, "{n} admitted in {t} ms, at most {most}");
        }
    }
}

/// The most requests an algorithm admits within `t` ms (both ends
/// included). nginx's expiry forgets a leaky bucket up to one request
/// early (it compares the excess without this request's 1000).
fn bound(p: &Policy, burst: u64, t: u64) -> u64 {
    let q = p.quota(burst);
    match p.algorithm {
        Algorithm::LeakyBucket => q + p.rate.milli() * t / 1_000_000 + 1,
        Algorithm::TokenBucket | Algorithm::Gcra => q + p.count * t / p.period_ms,
        // A window of count per period: t ms span at most t/period + 1
        // windows (+1 for a boundary inside).
        Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
            p.count * (t / p.period_ms + 2)
        }
    }
}
