//! The `limiter` fuzz target: one location's limits and a sequence of
//! requests through `crate::limiter::evaluate`, every decision checked
//! against nginx's arithmetic written out on its own.
//!
//! Why a second copy of the arithmetic: a check that called the limiter's
//! own step would share its mistakes; [`nginx_step`] is the leaky bucket as
//! nginx's source reads, so a disagreement is a finding.

use super::Reader;
use crate::limiter::bucket::{self, Bucket, Rate};
use crate::limiter::{
    Limit, MemoryZone, Outcome, Policy, Standing, Store, ZoneRef, algorithm, evaluate,
};
use std::sync::Arc;

const T0: u64 = 1_000_000_000;
/// Keys per limit in one input (few, so that they meet again).
const KEYS: u8 = 8;
/// Requests per input: the rate bound is checked over every pair.
const MAX_OPS: usize = 256;

/// One location's limits and a sequence of requests through
/// [`crate::limiter::evaluate`], with a fresh zone per limit (small ones,
/// so that expiry and eviction happen).
///
/// Input: byte 0 the number of limits (1–3); per limit its rate, burst,
/// delay and zone capacity; then per request a key (one of 8), which limits
/// see an empty key, and the time step (`now` never goes back).
///
/// Checked, per request: nginx's step on each state (`excess`, `last`),
/// exactly; an accepted request leaves every charged state at most its
/// burst, with nginx's delay, and `RateLimit` figures that hold (what is
/// left, and when one more is allowed); a rejection charges nothing, its
/// excess is over the burst, and its wait (`Retry-After`) is exactly when
/// that limit accepts again; over any interval of one state's life at most
/// burst + 1 + rate·t requests pass; the same sequence decides the same.
pub fn limiter(data: &[u8]) {
    let first = run_limiter(data);
    let second = run_limiter(data);
    assert_eq!(first, second, "the same requests decided differently");
}

struct FuzzLimit {
    limit: Limit,
    zone: Arc<ZoneRef>,
}

impl FuzzLimit {
    fn memory(&self) -> &MemoryZone {
        self.zone.store.memory()
    }

    /// The leaky bucket stored for `key`.
    fn peek(&self, key: &[u8]) -> Option<Bucket> {
        self.memory().peek(key).map(|c| algorithm::leaky_bucket(&c))
    }

    fn rate(&self) -> Rate {
        self.zone.policy.rate
    }

    /// Where a key that stored `excess` stands (the `RateLimit` figures).
    fn standing(&self, excess: u64) -> Standing {
        algorithm::leaky_standing(self.rate(), self.limit.burst, excess)
    }
}

fn fuzz_rate(r: &mut Reader<'_>) -> Rate {
    let kind = r.u8();
    let n = u64::from(r.u16());
    let rate = match kind % 4 {
        // What the configuration allows: Nr/s and Nr/m (0 is 1r/s below).
        0 | 1 => Rate::per_second(n % 1000),
        2 => Rate::per_minute(n),
        // Any rate at all, huge ones included.
        _ => Rate::from_milli(r.u64().max(16)),
    };
    rate.unwrap_or_else(|| Rate::per_second(1).expect("1r/s"))
}

/// Admission times per (limit, key), over the current life of the state.
type Admitted = Vec<Vec<Vec<u64>>>;

/// The limits an input describes, each request through them checked; the
/// outcomes, for [`limiter`] to compare two runs.
fn run_limiter(data: &[u8]) -> Vec<Outcome> {
    let mut r = Reader(data);
    let n = 1 + usize::from(r.u8() % 3);
    let limits: Vec<FuzzLimit> = (0..n).map(|i| fuzz_limit(&mut r, i)).collect();
    let set: Vec<Limit> = limits
        .iter()
        .map(|l| Limit {
            zone: l.zone.clone(),
            burst: l.limit.burst,
            delay: l.limit.delay,
        })
        .collect();
    check_time_to_leak(limits[0].rate(), u64::from(r.u32()));

    let mut now = T0;
    let mut outcomes = Vec::new();
    let mut admitted: Admitted = vec![vec![Vec::new(); usize::from(KEYS)]; n];
    while !r.is_empty() && outcomes.len() < MAX_OPS {
        let k = r.u8();
        let key = [k % KEYS];
        // High bits: which limits see an empty key.
        let empty = k >> 3;
        let step = r.u8();
        now += match step {
            0..=127 => u64::from(step),
            128..=249 => u64::from(step - 127) * 100,
            _ => u64::from(r.u32()),
        };
        let keyed: Vec<bool> = (0..n).map(|i| empty & (1 << i) == 0).collect();
        let before: Vec<Option<Bucket>> = limits.iter().map(|l| l.peek(&key)).collect();
        let outcome = evaluate(&set, now, |i| keyed[i].then_some(&key[..]));
        let after: Vec<Option<Bucket>> = limits.iter().map(|l| l.peek(&key)).collect();
        let request = Request {
            limits: &limits,
            keyed: &keyed,
            before: &before,
            after: &after,
            now,
        };
        check_outcome(&request, &outcome);
        if let Outcome::Accepted { .. } = outcome {
            check_rate_bound(&request, &mut admitted[..], key[0]);
        }
        forget_expired(&limits, &mut admitted);
        outcomes.push(outcome);
    }
    outcomes
}

/// Limit `i` of an input: its rate, burst, delay and zone capacity, read
/// in that order.
fn fuzz_limit(r: &mut Reader<'_>, i: usize) -> FuzzLimit {
    let rate = fuzz_rate(r);
    let b = r.u8();
    // The configuration's range: burst 0–4,000,000 requests.
    let burst = if b < 200 {
        u64::from(b % 20)
    } else {
        u64::from(r.u32() % 4_000_001)
    } * bucket::ONE;
    let delay = match r.u8() {
        0..=99 => 0,
        100..=199 => Limit::NODELAY,
        d => u64::from(d - 199) * bucket::ONE,
    };
    let c = r.u8();
    let capacity = if c < 200 {
        1 + usize::from(c % 16)
    } else {
        // Below 1024: one shard, whose eviction order does not
        // depend on the (random) hasher.
        1 + usize::from(r.u16()) % 1023
    };
    let zone = Arc::new(ZoneRef::new(
        format!("z{i}"),
        Policy::leaky(rate),
        Arc::new(Store::Memory(MemoryZone::with_capacity(capacity))),
    ));
    FuzzLimit {
        limit: Limit {
            zone: zone.clone(),
            burst,
            delay,
        },
        zone,
    }
}

/// Rate arithmetic on its own: `time_to_leak` is the least time that
/// leaks at least that much.
fn check_time_to_leak(rate: Rate, milli: u64) {
    let t = rate.time_to_leak(milli);
    if t != u64::MAX {
        assert!(rate.leaked(t) >= milli, "time_to_leak({milli}) at {rate:?}");
        assert!(
            t == 0 || rate.leaked(t - 1) < milli,
            "time_to_leak({milli}) at {rate:?}"
        );
    }
}

/// An accepted request at `request.now` for `key`: over any interval of a
/// state's life, at most burst + 1 + rate·t requests passed.
fn check_rate_bound(request: &Request<'_>, admitted: &mut [Vec<Vec<u64>>], key: u8) {
    let now = request.now;
    for (i, l) in request.limits.iter().enumerate() {
        if !request.keyed[i] {
            continue;
        }
        let times = &mut admitted[i][usize::from(key)];
        times.push(now);
        let rate = u128::from(l.rate().milli());
        let burst = u128::from(l.limit.burst);
        for (j, &t) in times.iter().enumerate() {
            let count = (times.len() - j) as u128;
            let span = u128::from(now - t);
            assert!(
                count * 1000 <= burst + 1000 + rate * span / 1000,
                "limit {i}: {count} admitted in {span} ms (burst {burst}, rate {rate})"
            );
        }
    }
}

/// A state that expired or was evicted starts a new life: its admission
/// times are forgotten.
fn forget_expired(limits: &[FuzzLimit], admitted: &mut Admitted) {
    for (i, l) in limits.iter().enumerate() {
        for k in 0..KEYS {
            if l.memory().peek(&[k]).is_none() {
                admitted[i][usize::from(k)].clear();
            }
        }
    }
}

/// One request as the checks see it: the limits, which of them had a key,
/// each one's state for that key before and after, and the time.
struct Request<'a> {
    limits: &'a [FuzzLimit],
    keyed: &'a [bool],
    before: &'a [Option<Bucket>],
    after: &'a [Option<Bucket>],
    now: u64,
}

impl Request<'_> {
    /// nginx's step of limit `i`, from the state before (a new state starts
    /// empty).
    fn stepped(&self, i: usize) -> Bucket {
        match self.before[i] {
            Some(b) => nginx_step(b, self.now, self.limits[i].rate()),
            None => Bucket {
                excess: 0,
                last: self.now,
            },
        }
    }
}

/// The per-request checks of [`limiter`].
fn check_outcome(request: &Request<'_>, outcome: &Outcome) {
    match *outcome {
        Outcome::Unlimited => assert!(request.keyed.iter().all(|k| !k), "unlimited with a key"),
        Outcome::Accepted {
            delay_ms,
            limit,
            excess,
            tightest,
        } => check_accepted(request, delay_ms, limit, excess, tightest),
        Outcome::Rejected {
            limit,
            excess,
            wait_ms,
        } => check_rejected(request, limit, excess, wait_ms),
        Outcome::NoMemory { limit } => {
            let Request { before, after, .. } = *request;
            assert!(request.keyed[limit]);
            assert!(before[limit].is_none(), "no memory for a state that exists");
            for i in 0..request.limits.len() {
                if i != limit && before[i].is_some() {
                    assert_eq!(before[i], after[i], "no memory, yet limit {i} was charged");
                }
            }
        }
        Outcome::Unavailable { .. } => panic!("no Redis here"),
    }
}

/// An acceptance: every keyed state took nginx's step and stays within its
/// burst, with `RateLimit` figures that hold; the delay is the largest, and
/// `limit` and `tightest` name the right limits.
fn check_accepted(
    request: &Request<'_>,
    delay_ms: u64,
    limit: usize,
    excess: u64,
    tightest: (usize, Standing),
) {
    let Request {
        limits,
        keyed,
        after,
        ..
    } = *request;
    let mut max_delay = 0;
    let mut least_left = None;
    for i in (0..limits.len()).filter(|&i| keyed[i]) {
        let l = &limits[i];
        let got = after[i].expect("an accepted request's state is stored");
        assert_eq!(got, request.stepped(i), "limit {i}: not nginx's step");
        assert!(
            got.excess <= l.limit.burst,
            "limit {i}: stored over the burst"
        );
        max_delay = max_delay.max(bucket::delay_ms(got.excess, l.limit.delay, l.rate()));
        let left = l.standing(got.excess).remaining;
        least_left = Some(least_left.map_or(left, |m: u64| m.min(left)));
        // RateLimit: `left` more at once now, one more after
        // next_unit_ms, not a millisecond earlier.
        let wait = l.standing(got.excess).reset_ms;
        assert_eq!(at_once(&l.limit, l.rate(), got.excess, 0), left);
        assert!(at_once(&l.limit, l.rate(), got.excess, wait) > left);
        assert!(wait > 0 && at_once(&l.limit, l.rate(), got.excess, wait - 1) == left);
    }
    assert!(keyed.iter().any(|&k| k), "accepted without a key");
    assert_eq!(delay_ms, max_delay, "not the largest delay");
    let l = &limits[limit];
    assert!(excess <= l.limit.burst);
    assert_eq!(delay_ms, bucket::delay_ms(excess, l.limit.delay, l.rate()));
    let (t, standing) = tightest;
    assert!(keyed[t], "tightest limit {t} has no key");
    let e = after[t].map(|b| b.excess);
    assert_eq!(Some(standing), e.map(|e| limits[t].standing(e)));
    assert_eq!(Some(standing.remaining), least_left);
}

/// A rejection: by an existing state over its burst after nginx's step,
/// charging nothing, with a `Retry-After` that is exactly when that limit
/// accepts again.
fn check_rejected(request: &Request<'_>, limit: usize, excess: u64, wait_ms: u64) {
    let Request {
        limits,
        before,
        after,
        now,
        ..
    } = *request;
    assert!(request.keyed[limit]);
    let l = &limits[limit];
    let b = before[limit].expect("a new state is never over its burst");
    assert_eq!(excess, nginx_step(b, now, l.rate()).excess);
    assert!(excess > l.limit.burst, "rejected at or under the burst");
    for i in 0..limits.len() {
        if before[i].is_some() {
            assert_eq!(before[i], after[i], "a rejection charged limit {i}");
        }
    }
    // Retry-After: accepted by this limit exactly `wait_ms` later.
    if let Some(then) = now.checked_add(wait_ms) {
        assert!(
            nginx_step(b, then, l.rate()).excess <= l.limit.burst,
            "still over"
        );
        assert!(
            wait_ms > 0 && nginx_step(b, then - 1, l.rate()).excess > l.limit.burst,
            "accepted earlier than wait_ms = {wait_ms}"
        );
    }
}

/// nginx's update of a state by one request at `now` (`now` never goes
/// back here), written out on its own rather than through
/// [`Bucket::step`], so that the check does not share a mistake with the
/// code: `excess - rate·ms/1000 + 1000`, at least 0, and `last` moves only
/// when time passed (the truncated fraction of a 0 ms step is not lost).
fn nginx_step(b: Bucket, now: u64, rate: Rate) -> Bucket {
    assert!(now >= b.last, "time went back");
    let ms = now - b.last;
    let leaked = u128::from(rate.milli()) * u128::from(ms) / 1000;
    let excess = (u128::from(b.excess) + 1000).saturating_sub(leaked);
    Bucket {
        excess: u64::try_from(excess).expect("an excess fits"),
        last: if ms == 0 { b.last } else { now },
    }
}

/// Requests `limit` accepts at once `t` ms after one stored `excess` at
/// `last = now` (each after the first steps 0 ms: +1000).
fn at_once(limit: &Limit, rate: Rate, excess: u64, t: u64) -> u64 {
    let b = Bucket { excess, last: T0 };
    let first = nginx_step(b, T0 + t, rate).excess;
    if first > limit.burst {
        0
    } else {
        (limit.burst - first) / bucket::ONE + 1
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// The limiter input decodes to the article's burst=5 example (10
    /// requests at once at 2r/s): the first passes, five are delayed by
    /// 500 ms steps, four are rejected.
    #[test]
    fn limiter_harness_decodes_the_article_example() {
        let mut input = vec![
            0, /* 2r/s */ 0, 2, 0, /* burst */ 5, /* delay 0 */ 0,
        ];
        input.extend([10, /* rate check */ 0, 0, 0, 0]);
        input.extend([0u8; 20]); // ten requests, key 0, no time step
        let got: Vec<(bool, u64)> = run_limiter(&input)
            .iter()
            .map(|o| match *o {
                Outcome::Accepted { delay_ms, .. } => (true, delay_ms),
                Outcome::Rejected { excess, .. } => (false, excess),
                o => panic!("{o:?}"),
            })
            .collect();
        let mut want = vec![(true, 0)];
        want.extend((1..=5).map(|i| (true, i * 500)));
        want.extend([(false, 6000); 4]);
        assert_eq!(got, want);
    }
}
