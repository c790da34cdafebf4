//! Every algorithm in Redis is the Rust arithmetic (src/limiter/algorithm/), exactly:
//! - the script against the pure functions on random stored states, from ordinary to the
//!   largest a configuration allows (where a double's 53 bits no longer hold the products):
//!   decision, excess, wait, remaining, reset, the state it stores, and its expiry;
//! - the memory store against the Redis store, request by request, on random sequences for
//!   each algorithm and on locations mixing algorithms and stores, in one slot or several.

use super::layouts::{Layout, same_everywhere};
use super::*;
use sluice::limiter::Stored;
use sluice::limiter::algorithm::{self, Algorithm, Cell, Log, View};
use sluice::limiter::redis::{Mode, Reply, ScriptKey, hash_fields};
use std::ops::RangeInclusive;
use tokio::time::Instant;

/// Real Unix milliseconds (2026-01-01): the script's times are as large as in production.
pub(super) const NOW0: u64 = 1_767_225_600_000;

/// What the script keeps a state past the moment it is as new (`MARGIN` in limit_req.lua).
pub(super) const MARGIN: u64 = 1000;

/// A key's state as the pure functions see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct State {
    pub cell: Cell,
    pub log: Log,
}

impl State {
    pub fn view(&self) -> View<'_> {
        View {
            cell: &self.cell,
            log: &self.log,
        }
    }
}

/// Replace `key` with `s`, in the script's layout.
fn write_state(c: &mut redis::Connection, key: &str, a: Algorithm, s: &State) {
    let _: () = redis::cmd("DEL").arg(key).query(c).unwrap();
    if a == Algorithm::SlidingLog {
        if !s.log.is_empty() {
            let times: Vec<u64> = s.log.iter().copied().collect();
            let _: () = redis::cmd("RPUSH").arg(key).arg(times).query(c).unwrap();
        }
        return;
    }
    let values = [s.cell.last, s.cell.value, s.cell.aux];
    let mut cmd = redis::cmd("HSET");
    cmd.arg(key);
    for (f, v) in hash_fields(a).iter().zip(values) {
        cmd.arg(*f).arg(v);
    }
    let _: () = cmd.query(c).unwrap();
}

/// `key` as the script left it (`None`: no key).
pub(super) fn read_state(c: &mut redis::Connection, key: &str, a: Algorithm) -> Option<State> {
    let exists: i64 = redis::cmd("EXISTS").arg(key).query(c).unwrap();
    if exists == 0 {
        return None;
    }
    if a == Algorithm::SlidingLog {
        let times: Vec<u64> = redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query(c)
            .unwrap();
        return Some(State {
            log: times.into(),
            ..State::default()
        });
    }
    let v: Vec<Option<u64>> = redis::cmd("HMGET")
        .arg(key)
        .arg(hash_fields(a))
        .query(c)
        .unwrap();
    let at = |i: usize| v.get(i).copied().flatten().unwrap_or(0);
    Some(State {
        cell: Cell {
            last: at(0),
            value: at(1),
            aux: at(2),
        },
        log: Log::new(),
    })
}

pub(super) fn pttl(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(c).unwrap()
}

/// The first millisecond from `now` (at most `limit` later) at which `s` is as new.
pub(super) fn as_new_in(p: &Policy, s: &State, now: u64, limit: u64) -> Option<u64> {
    (0..=limit).find(|&dt| algorithm::expired(p, s.view(), now + dt))
}

/// A policy and burst for `a`: from the article's to the largest a configuration allows.
fn random_policy(rng: &mut Lcg, a: Algorithm) -> (Policy, u64) {
    loop {
        let count = rng.pick(&[1, 2, 3, 7, 10, 100, 1000, 1_000_000, 1_000_000_000]);
        let period = rng.pick(&[1, 7, 500, 1000, 3000, 10_000, 60_000, 3_600_000, 86_400_000]);
        if a == Algorithm::SlidingLog && count > 40 {
            continue; // a log holds `count` times: keep the lists short
        }
        let burst = if a.is_window() {
            0
        } else {
            rng.pick(&[0, 1000, 5000, 9000, 4_000_000_000])
        };
        if let Some(p) = Policy::new(a, count, period) {
            return (p, burst);
        }
    }
}

/// A state a key could be in at `now` for `p`: fresh, mid-way, full, a little past full
/// (accounted past its limit), stale, or ahead of `now` (the clock went back).
fn random_state(rng: &mut Lcg, p: &Policy, burst: u64, now: u64) -> State {
    let period = p.period_ms;
    let near = |rng: &mut Lcg| match rng.next(4) {
        0 => now + rng.upto(100), // ahead: the clock went back
        _ => now - rng.upto(3 * period),
    };
    let cap = (burst / 1000 + 1) * period;
    let start = now - now % period;
    let window = |rng: &mut Lcg| match rng.next(5) {
        0 => start + period, // ahead: the clock went back
        1 => start - period,
        2 => start.saturating_sub(2 * period + rng.upto(period)),
        _ => start,
    };
    let counted = |rng: &mut Lcg| rng.upto(p.count + 2);
    let mut s = State::default();
    match p.algorithm {
        Algorithm::LeakyBucket => {
            s.cell.last = match rng.next(4) {
                0 => now + rng.upto(120_000),
                1 => now - 60_000 - rng.upto(600_000),
                _ => now - rng.upto(5000),
            };
            s.cell.value = rng.upto(burst + 2000);
        }
        Algorithm::TokenBucket => {
            s.cell.last = near(rng);
            s.cell.value = rng.upto(cap + 2 * period);
        }
        Algorithm::Gcra => {
            let ahead = rng.upto(cap + 2 * period);
            s.cell.last = (now + ahead / p.count).saturating_sub(rng.upto(2) * period);
            s.cell.value = ahead % p.count;
        }
        Algorithm::FixedWindow => {
            s.cell.last = window(rng);
            s.cell.value = counted(rng);
        }
        Algorithm::SlidingWindow => {
            s.cell.last = window(rng);
            s.cell.value = counted(rng);
            s.cell.aux = counted(rng);
        }
        Algorithm::SlidingLog => {
            let n = rng.upto(p.count);
            let mut times: Vec<u64> = (0..n).map(|_| now + 10 - rng.upto(2 * period)).collect();
            times.sort();
            s.log = times.into();
        }
    }
    s
}

/// What the script answers for one key, computed by the pure functions; and the state the
/// key is in afterwards. A refusal carries the time and the stored cell (the fields the
/// algorithm keeps, the others 0; all 0 for a sliding log): what the rejection cache
/// decides from.
fn expected(mode: Mode, p: &Policy, burst: u64, s: &State, now: u64) -> (Reply, State) {
    let c = algorithm::check(p, burst, s.view(), now, 0);
    let kept = hash_fields(p.algorithm).len();
    let field = |i: usize, v: u64| if i < kept { v } else { 0 };
    let busy = Reply::Busy {
        index: 0,
        excess: c.excess,
        wait_ms: c.wait_ms,
        at: now,
        cell: Cell {
            last: field(0, s.cell.last),
            value: field(1, s.cell.value),
            aux: field(2, s.cell.aux),
        },
    };
    let standing = if c.admit {
        c.standing
    } else {
        Default::default()
    };
    match mode {
        Mode::Check if c.admit => (Reply::Accepted(vec![stored(c.excess, standing)]), s.clone()),
        Mode::Check | Mode::Charge if !c.admit => (busy, s.clone()),
        _ => {
            let mut after = s.clone();
            let excess = algorithm::charge(p, &mut after.cell, &mut after.log, now);
            (Reply::Accepted(vec![stored(excess, standing)]), after)
        }
    }
}

fn stored(excess: u64, standing: sluice::limiter::Standing) -> Stored {
    Stored { excess, standing }
}

/// Redis's clock, in ms.
fn redis_ms(c: &mut redis::Connection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(c).unwrap();
    secs * 1000 + micros / 1000
}

/// The exact bounds of the TTL a call gave `key`: Redis's clock is read before `call`, and
/// again after `key`'s PTTL; the TTL set lies between PTTL and PTTL plus the ms that passed.
pub(super) async fn ttl_set_by<T>(
    c: &mut redis::Connection,
    key: &str,
    call: impl Future<Output = T>,
) -> (T, RangeInclusive<u64>) {
    let before = redis_ms(c);
    let out = call.await;
    let left = pttl(c, key);
    let after = redis_ms(c);
    let left = u64::try_from(left).unwrap_or(0);
    (out, left..=left + (after - before))
}

/// The TTL a store set is the time until the state is as new, plus the margin (the leaky
/// bucket: until a request finds it empty, plus a second, at least a minute).
fn assert_expiry(p: &Policy, s: &State, now: u64, ttl: RangeInclusive<u64>, what: &str) {
    assert!(*ttl.start() > 0, "{what}: no TTL");
    if p.algorithm == Algorithm::LeakyBucket {
        let want = ((s.cell.value + 1000) * 1000 / p.rate.milli() + 1001).max(60_000);
        assert!(ttl.contains(&want), "{what}: TTL {ttl:?}, want {want}");
        return;
    }
    // As new exactly MARGIN before the key goes: not before `lo`, by `hi`.
    // The TTL set is at least MARGIN, though PTTL, read a ms later, may say less.
    let (lo, hi) = (ttl.start().saturating_sub(MARGIN), ttl.end() - MARGIN);
    assert!(
        lo == 0 || !algorithm::expired(p, s.view(), now + lo - 1),
        "{what}: TTL {ttl:?}, but as new earlier"
    );
    assert!(
        algorithm::expired(p, s.view(), now + hi),
        "{what}: TTL {ttl:?}, not yet as new then"
    );
}

/// The script on states written by the test, against the pure functions: every mode, every
/// algorithm, policies up to the largest allowed (1e9 requests per day, burst 4e6).
#[tokio::test]
async fn the_script_is_the_rust_arithmetic_on_any_state() {
    let redis = RedisServer::start();
    let b = backend(&redis.url(), TimeSource::Caller, "s", OnError::Deny);
    let mut c = redis.client();
    let mut rng = Lcg(0xa1905);
    let deadline = || Instant::now() + Duration::from_secs(5);
    for a in Algorithm::ALL {
        let key = format!("s:{}:{{6b}}", a.name());
        for case in 0..400 {
            let (p, burst) = random_policy(&mut rng, a);
            let now = NOW0 + rng.upto(86_400_000);
            let s = random_state(&mut rng, &p, burst, now);
            let what = format!(
                "{} case {case}: {p:?} burst {burst} at {now}, {s:?}",
                a.name()
            );
            let sk = [ScriptKey {
                key: key.clone().into_bytes(),
                policy: p,
                burst,
            }];
            write_state(&mut c, &key, a, &s);
            let stored_state = read_state(&mut c, &key, a);
            for mode in [Mode::Check, rng.pick(&[Mode::Charge, Mode::Account])] {
                write_state(&mut c, &key, a, &s);
                let (want, after) = expected(mode, &p, burst, &s, now);
                let (got, ttl) = ttl_set_by(&mut c, &key, b.call(mode, &sk, now, deadline())).await;
                assert_eq!(got.unwrap(), want, "{what}, {mode:?}");
                let left = read_state(&mut c, &key, a);
                if after == s {
                    assert_eq!(left, stored_state, "{what}, {mode:?}: changed nothing");
                } else {
                    assert_eq!(left, Some(after.clone()), "{what}, {mode:?}: stored");
                    assert_expiry(&p, &after, now, ttl, &format!("{what}, {mode:?}"));
                }
            }
        }
    }
}

/// A zone of `policy` in memory, or in Redis through `b`.
pub(super) fn zone(name: &str, policy: Policy, b: Option<&Arc<RedisBackend>>) -> Arc<ZoneRef> {
    let store = match b {
        Some(b) => Store::Redis(RedisZone::new(b.clone(), name, 1 << 20)),
        None => Store::Memory(MemoryZone::with_size(1 << 20)),
    };
    Arc::new(ZoneRef::new(name, policy, Arc::new(store)))
}

/// Gaps between requests for `p`: none, a millisecond, around one request's time, a
/// fraction of the period, a period or two.
fn gap(rng: &mut Lcg, p: &Policy) -> u64 {
    let unit = (p.period_ms / p.count).max(1);
    match rng.next(10) {
        0..=2 => 0,
        3 => 1,
        4 => rng.upto(unit),
        5 => unit,
        6 => rng.upto(3 * unit),
        7 => rng.upto(p.period_ms / 2),
        8 => p.period_ms,
        _ => rng.upto(2 * p.period_ms + 1),
    }
}

/// A policy fit for request sequences: limits that random requests reach.
fn sequence_policy(rng: &mut Lcg, a: Algorithm) -> (Policy, u64) {
    loop {
        let count = rng.pick(&[1, 2, 3, 5, 10, 100]);
        let period = rng.pick(&[7, 500, 1000, 3000, 10_000, 60_000]);
        let burst = if a.is_window() {
            0
        } else {
            1000 * rng.upto(10)
        };
        if let Some(p) = Policy::new(a, count, period) {
            return (p, burst);
        }
    }
}

/// Per algorithm, 2400 requests over 8 random policies and 3 keys: the Redis zone answers
/// exactly what the memory zone does (decision, excess, wait, delay, tightest standing).
#[tokio::test]
async fn memory_and_redis_agree_on_every_algorithm() {
    let redis = RedisServer::start();
    let mut rng = Lcg(0x5ee0);
    for a in Algorithm::ALL {
        for case in 0..8 {
            let (p, burst) = sequence_policy(&mut rng, a);
            let b = backend(
                &redis.url(),
                TimeSource::Caller,
                &format!("q{case}"),
                OnError::Deny,
            );
            let delay = rng.pick(&[0, 2000, NODELAY]);
            let limit = |z| Limit {
                zone: z,
                burst,
                delay,
            };
            let mem = [limit(zone(a.name(), p, None))];
            let red = [limit(zone(a.name(), p, Some(&b)))];
            let mut now = NOW0 + rng.upto(p.period_ms);
            for step in 0..300 {
                now += gap(&mut rng, &p);
                let key = rng.pick(&["a", "b", "c"]);
                let want = limiter::decide(&mem, now, |_| Some(key)).await;
                let got = limiter::decide(&red, now, |_| Some(key)).await;
                assert_eq!(
                    got,
                    want,
                    "{} case {case} step {step}: {p:?} burst {burst}",
                    a.name()
                );
            }
        }
    }
}

/// Locations of two or three limits, each zone of a random algorithm, on every layout: the
/// same outcomes as the same location in memory, request by request.
#[tokio::test]
async fn mixed_locations_agree_with_memory() {
    let redis = RedisServer::start();
    let mut rng = Lcg(0x313ed);
    let layouts = [
        Layout::Redis,
        Layout::MemoryThenRedis,
        Layout::RedisThenMemory,
        Layout::RedisSplitSlots,
    ];
    for case in 0..16 {
        let n = 2 + rng.next(2) as usize;
        let spec: Vec<(Policy, u64, u64)> = (0..n)
            .map(|_| {
                let a = rng.pick(&Algorithm::ALL);
                let (p, burst) = sequence_policy(&mut rng, a);
                (p, burst, rng.pick(&[0, 1000, NODELAY]))
            })
            .collect();
        let build = |layout: Layout| {
            let b = backend(
                &redis.url(),
                TimeSource::Caller,
                &format!("m{case}{layout:?}"),
                OnError::Deny,
            );
            let limits: Vec<Limit> = spec
                .iter()
                .enumerate()
                .map(|(i, &(p, burst, delay))| Limit {
                    zone: zone(&format!("z{i}"), p, layout.redis(i).then_some(&b)),
                    burst,
                    delay,
                })
                .collect();
            limits
        };
        let (mem, mem_split) = (build(Layout::Memory), build(Layout::Memory));
        let others: Vec<(Layout, Vec<Limit>)> = layouts.iter().map(|&l| (l, build(l))).collect();
        let shortest = spec.iter().map(|s| s.0.period_ms).min().unwrap_or(1000);
        let mut now = NOW0;
        for step in 0..200 {
            let by = rng.next(n as u64) as usize;
            now += gap(&mut rng, &spec[by].0).min(2 * shortest + 1);
            let key = rng.pick(&["a", "b"]);
            let keys: Vec<Option<String>> = (0..n)
                .map(|_| (rng.next(8) != 0).then(|| key.to_string()))
                .collect();
            let what = format!("case {case} step {step}: {spec:?}");
            same_everywhere(&mem, &mem_split, &others, &keys, now, &what).await;
        }
    }
}
