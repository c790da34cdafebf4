//! Decision cost and memory per state: sluice's limiter against governor on
//! the same workloads (`cargo bench --bench limiter`).
//!
//! - hot key: one key decided over and over;
//! - 1M keys: a decision for a random key out of 1 000 000;
//! - bytes per state at 1M keys, counted by a global allocator;
//! - the cost of recording a rejection in a zone's most-limited-keys
//!   sketch (`top_keys`).
//!
//! governor is a baseline only: it is GCRA (its burst is one less than
//! nginx's) and cannot delay. Both are given a rate that never rejects, so
//! the work measured is the decision and its store update.

use criterion::{Criterion, criterion_group};
use governor::{Quota, RateLimiter};
use sluice::limiter::{Limit, MemoryZone, Outcome, Rate, Store, ZoneRef, evaluate};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;

mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const KEYS: usize = 1_000_000;

fn sluice_limit(capacity: usize) -> [Limit; 1] {
    [Limit {
        zone: Arc::new(ZoneRef {
            name: "z".into(),
            policy: sluice::limiter::Policy::leaky(Rate::per_second(1_000_000).unwrap()),
            store: Arc::new(Store::Memory(MemoryZone::with_capacity(capacity))),
            counts: Default::default(),
            reject_cache: None,
        }),
        burst: 1_000_000_000,
        delay: Limit::NODELAY,
    }]
}

fn keys() -> Vec<[u8; 4]> {
    // A fixed pseudo-random sequence (xorshift), so runs are comparable.
    let mut x: u32 = 0x9e37_79b9;
    (0..KEYS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x.to_be_bytes()
        })
        .collect()
}

fn decisions(c: &mut Criterion) {
    let keys = keys();
    let mut g = c.benchmark_group("decision");

    let limits = sluice_limit(KEYS);
    let mut now = 1_000_000_000u64;
    g.bench_function("sluice/hot_key", |b| {
        b.iter(|| {
            now += 1;
            let o = evaluate(&limits, now, |_| Some(black_box(b"hot")));
            debug_assert!(matches!(o, Outcome::Accepted { .. }));
            black_box(o)
        })
    });
    let quota = Quota::per_second(NonZeroU32::new(1_000_000).unwrap())
        .allow_burst(NonZeroU32::new(1_000_000).unwrap());
    let gov = RateLimiter::hashmap(quota);
    g.bench_function("governor/hot_key", |b| {
        b.iter(|| black_box(gov.check_key(black_box(&[1u8, 2, 3, 4]))))
    });

    let limits = sluice_limit(KEYS);
    for k in &keys {
        evaluate(&limits, now, |_| Some(k));
    }
    let mut i = 0;
    g.bench_function("sluice/1M_keys", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            now += 1;
            black_box(evaluate(&limits, now, |_| Some(&keys[i])))
        })
    });
    let gov = RateLimiter::hashmap(quota);
    for k in &keys {
        let _ = gov.check_key(k);
    }
    let mut i = 0;
    g.bench_function("governor/1M_keys", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            black_box(gov.check_key(&keys[i]))
        })
    });
    g.finish();
}

/// Bytes per state with 1M IPv4 keys stored.
fn memory() {
    let keys = keys();
    let before = counting::live();
    let limits = sluice_limit(KEYS);
    for k in &keys {
        evaluate(&limits, 1_000_000_000, |_| Some(k));
    }
    let m = limits[0].zone.store.memory();
    let sluice = (counting::live() - before) as f64 / m.len() as f64;
    let states = m.len();
    drop(limits);

    let before = counting::live();
    let quota = Quota::per_second(NonZeroU32::new(10).unwrap());
    let gov = RateLimiter::hashmap(quota);
    for k in &keys {
        let _ = gov.check_key(k);
    }
    let governor = (counting::live() - before) as f64 / gov.len() as f64;
    println!(
        "memory at 1M IPv4 keys: sluice {sluice:.1} bytes/state ({states} states), \
         governor (hashmap) {governor:.1} bytes/state, nginx 128 bytes/state"
    );
}

/// The most-limited-keys sketch on the reject path (`[admin] top_keys`,
/// default 10): one record per rejected request, for a hot key (a flood
/// from one client) and for keys spread over 1M (a flood from many).
fn top_keys(c: &mut Criterion) {
    use sluice::limiter::top::{Event, TopKeys};
    let keys = keys();
    let mut g = c.benchmark_group("top_keys");
    let top = TopKeys::new(10, 60_000);
    let mut now = 0u64;
    g.bench_function("record/hot_key", |b| {
        b.iter(|| {
            now += 1;
            top.record(black_box(b"\x7f\0\0\x02"), Event::Rejected, now)
        })
    });
    let top = TopKeys::new(10, 60_000);
    let mut i = 0;
    g.bench_function("record/1M_keys", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            now += 1;
            top.record(black_box(&keys[i]), Event::Rejected, now)
        })
    });
    g.finish();
}

criterion_group!(benches, decisions, top_keys);

fn main() {
    memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
