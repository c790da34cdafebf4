//! `sluice simulate`: the limiter's own algorithms run over a request
//! sequence, side by side, as the seed article compares them.
//!
//! Nothing here decides: every admission comes from the code a zone runs
//! ([`algorithm::take`]: check, then charge when admitted; one [`Cell`] and
//! [`Log`] per client key), or, for the article's queue, from
//! [`algorithm::queue::Queue`]. This module only feeds them the arrivals in
//! time order and measures what came out: how many were admitted, the most
//! admitted within any window `[t, t + period)`, and for the two queueing
//! rows when each request was processed and how long it waited.

mod plot;
mod render;
mod trace;

pub use crate::limiter::algorithm::period_text;
pub use plot::svg;
pub use render::{Source, json, seconds, table};
pub use trace::{Arrival, MAX_TIME_MS, Scenario, Trace, TraceError, parse_seconds, parse_trace};

use crate::limiter::algorithm::{self, Algorithm, Cell, Log, Policy, queue::Queue};
use crate::limiter::bucket::{self, ONE};

/// A row of the comparison: the article's six, in its order, then nginx's
/// leaky bucket as sluice runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Row {
    FixedWindow,
    SlidingLog,
    SlidingWindow,
    TokenBucket,
    /// The article's queue-type leaky bucket: capacity `burst + 1` waiting,
    /// one request processed every `period / count`.
    LeakyQueue,
    Gcra,
    /// nginx's leaky bucket with `burst` and no `nodelay`: an admitted
    /// request is delayed by its excess.
    LeakyBucket,
}

impl Row {
    pub const ALL: [Row; 7] = [
        Row::FixedWindow,
        Row::SlidingLog,
        Row::SlidingWindow,
        Row::TokenBucket,
        Row::LeakyQueue,
        Row::Gcra,
        Row::LeakyBucket,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Row::LeakyQueue => "leaky_queue",
            r => r.algorithm().map_or("", Algorithm::name),
        }
    }

    pub fn from_name(name: &str) -> Option<Row> {
        Row::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The zone algorithm this row runs (`None`: the article's queue).
    pub fn algorithm(self) -> Option<Algorithm> {
        match self {
            Row::FixedWindow => Some(Algorithm::FixedWindow),
            Row::SlidingLog => Some(Algorithm::SlidingLog),
            Row::SlidingWindow => Some(Algorithm::SlidingWindow),
            Row::TokenBucket => Some(Algorithm::TokenBucket),
            Row::LeakyQueue => None,
            Row::Gcra => Some(Algorithm::Gcra),
            Row::LeakyBucket => Some(Algorithm::LeakyBucket),
        }
    }

    /// The rows whose admitted requests wait before they are processed.
    pub fn queues(self) -> bool {
        matches!(self, Row::LeakyQueue | Row::LeakyBucket)
    }
}

/// The limit simulated: `count` per `period_ms`, and `burst` (requests)
/// for the buckets and the queue (windows take none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    pub count: u64,
    pub period_ms: u64,
    pub burst: u64,
}

/// The largest `--burst`, as `limit_req`'s.
pub const MAX_BURST: u64 = 4_000_000;

/// What one row did with the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub row: Row,
    /// Admitted or not, in input order.
    pub decisions: Vec<bool>,
    pub allowed: usize,
    /// The most admitted arrivals of one key within any `[t, t + period)`.
    pub max_in_window: u64,
    /// The same over all keys together (what the backend received).
    pub max_in_window_all_keys: u64,
    /// Queueing rows only (`None` elsewhere).
    pub queue: Option<Queueing>,
}

/// When a queueing row's admitted requests were processed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queueing {
    /// Per request in input order: the wait before it was processed, in ms
    /// rounded up (`None`: rejected).
    pub waits_ms: Vec<Option<u64>>,
    pub max_wait_ms: u64,
    /// The most requests of one key processed within any window.
    pub max_processed_in_window: u64,
    /// Processing times, exactly, in units of 1/`count` ms since the
    /// trace's [`Report::origin_ms`] (`None`: rejected).
    pub done_units: Vec<Option<u64>>,
}

/// A simulation: the rows asked for, in [`Row::ALL`]'s order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub setup: Setup,
    /// The start of the window holding the first arrival: times in the
    /// plot and in [`Queueing::done_units`] count from it.
    pub origin_ms: u64,
    pub requests: usize,
    pub keys: usize,
    pub outcomes: Vec<Outcome>,
    /// The requests (input indices) that nginx's leaky bucket and the
    /// article's queue decided differently, when both rows ran.
    pub bucket_vs_queue: Option<Vec<usize>>,
}

/// Why a simulation cannot run (bad arguments for this trace).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("rate {0} is out of range (at most {max} requests per period, periods up to 1d)", max = algorithm::MAX_COUNT)]
    Rate(String),
    #[error(
        "rate {0} is too slow for leaky_bucket: nginx's rate would be 0 (it needs at least 1 request per 1000 s)"
    )]
    TooSlowForLeakyBucket(String),
    #[error("burst {0} is out of range (0 to {MAX_BURST})")]
    Burst(u64),
    #[error("the trace spans {0} ms: too long at this rate for exact arithmetic")]
    TooLong(u64),
}

impl Setup {
    /// `count` requests per `period`, as `rate = "..."` writes it.
    pub fn rate_text(&self) -> String {
        algorithm::rate_text(self.count, self.period_ms)
    }

    fn policy(&self, row: Row) -> Result<Policy, SimError> {
        // The queue reads only count and period: any algorithm's policy
        // carries them, the token bucket's for every valid rate.
        let alg = row.algorithm().unwrap_or(Algorithm::TokenBucket);
        Policy::new(alg, self.count, self.period_ms).ok_or_else(|| {
            if Policy::new(Algorithm::TokenBucket, self.count, self.period_ms).is_some() {
                SimError::TooSlowForLeakyBucket(self.rate_text())
            } else {
                SimError::Rate(self.rate_text())
            }
        })
    }

    fn burst_milli(&self, row: Row) -> u64 {
        match row.algorithm() {
            Some(a) if a.is_window() => 0,
            _ => self.burst * ONE,
        }
    }
}

/// Run `rows` (any order, repeats ignored) over `trace`.
pub fn run(trace: &Trace, setup: &Setup, rows: &[Row]) -> Result<Report, SimError> {
    if setup.burst > MAX_BURST {
        return Err(SimError::Burst(setup.burst));
    }
    // Count and period in range (every row's policy then exists but
    // perhaps nginx's), before any arithmetic on them.
    setup.policy(Row::TokenBucket)?;
    let period = setup.period_ms;
    let first = trace.arrivals.iter().map(|a| a.at_ms).min().unwrap_or(0);
    let last = trace.arrivals.iter().map(|a| a.at_ms).max().unwrap_or(0);
    let origin_ms = first - first % period;
    // Every processing time, in units of 1/count ms since the origin, must
    // fit: the last arrival plus the longest wait (a full queue is
    // `(burst + 1) * period` units; nginx's truncated rate can make its
    // delays longer, never twice as long).
    let span = last - origin_ms;
    let longest_wait = (setup.burst + 2) * period * 4;
    let fits = (span + period)
        .checked_mul(setup.count)
        .and_then(|u| u.checked_add(longest_wait));
    if fits.is_none() {
        return Err(SimError::TooLong(span));
    }
    let mut order: Vec<usize> = (0..trace.arrivals.len()).collect();
    // Stable: requests at the same instant keep their input order.
    order.sort_by_key(|&i| trace.arrivals[i].at_ms);
    let clock = Clock::new(origin_ms, period);
    let mut wanted = rows.to_vec();
    wanted.sort();
    wanted.dedup();
    let mut outcomes = Vec::new();
    for row in wanted {
        let policy = setup.policy(row)?;
        let run = Run {
            trace,
            order: &order,
            clock,
            policy,
            burst: setup.burst_milli(row),
        };
        let decided = match row {
            Row::LeakyQueue => run.queue(),
            _ => run.limiter(row == Row::LeakyBucket),
        };
        outcomes.push(measure(trace, clock, setup, row, decided));
    }
    let decisions_of = |row| outcomes.iter().find(|o| o.row == row).map(|o| &o.decisions);
    let bucket_vs_queue = match (
        decisions_of(Row::LeakyBucket),
        decisions_of(Row::LeakyQueue),
    ) {
        (Some(b), Some(q)) => Some((0..b.len()).filter(|&i| b[i] != q[i]).collect()),
        _ => None,
    };
    Ok(Report {
        setup: *setup,
        origin_ms,
        requests: trace.arrivals.len(),
        keys: trace.keys.len(),
        outcomes,
        bucket_vs_queue,
    })
}

/// The time the algorithms are shown: a trace's ms moved so that its first
/// window starts at `base`. `base` is a multiple of the period (windows
/// fall where they would on the trace's own clock) and far from 0, because
/// a never-seen key is [`Cell::default`] and the stores meet one only at
/// real times: nginx's leaky bucket at `last = 0` would still hold the
/// excess it had not leaked by `now` near 0.
#[derive(Clone, Copy, Debug)]
struct Clock {
    origin_ms: u64,
    base: u64,
}

impl Clock {
    fn new(origin_ms: u64, period: u64) -> Clock {
        Clock {
            origin_ms,
            base: 1_000_000_000u64.div_ceil(period) * period,
        }
    }

    /// Milliseconds since the origin.
    fn rel(&self, at_ms: u64) -> u64 {
        at_ms - self.origin_ms
    }

    fn now(&self, at_ms: u64) -> u64 {
        self.base + self.rel(at_ms)
    }
}

/// One row's run over the trace in time order.
struct Run<'a> {
    trace: &'a Trace,
    order: &'a [usize],
    clock: Clock,
    policy: Policy,
    burst: u64,
}

/// Per request in input order: admitted, and for queueing rows when it was
/// processed (units of 1/count ms since the origin).
type Decided = (Vec<bool>, Option<Vec<Option<u64>>>);

impl Run<'_> {
    /// A zone algorithm, driven as a store drives it: check with nothing
    /// pending, charge when admitted. With `delays`, nginx's delay of an
    /// admitted request (`burst` without `nodelay`: threshold 0).
    fn limiter(&self, delays: bool) -> Decided {
        let n = self.trace.arrivals.len();
        let mut states: Vec<(Cell, Log)> = vec![Default::default(); self.trace.keys.len()];
        let mut decisions = vec![false; n];
        let mut done = delays.then(|| vec![None; n]);
        for &i in self.order {
            let a = self.trace.arrivals[i];
            let now = self.clock.now(a.at_ms);
            let (cell, log) = &mut states[a.key];
            let c = algorithm::take(&self.policy, self.burst, cell, log, now);
            if c.admit {
                decisions[i] = true;
                if let Some(done) = &mut done {
                    let delay = bucket::delay_ms(c.excess, 0, self.policy.rate);
                    done[i] = Some((self.clock.rel(a.at_ms) + delay) * self.policy.count);
                }
            }
        }
        (decisions, done)
    }

    /// The article's queue, one per key.
    fn queue(&self) -> Decided {
        let n = self.trace.arrivals.len();
        let mut queues: Vec<Queue> = (0..self.trace.keys.len())
            .map(|_| Queue::new(self.policy, self.burst))
            .collect();
        let mut decisions = vec![false; n];
        let mut done = vec![None; n];
        for &i in self.order {
            let a = self.trace.arrivals[i];
            // The queue starts empty at 0 and keeps no cell: relative time
            // keeps its units (ms × count) small.
            let rel = self.clock.rel(a.at_ms);
            if let Some(wait) = queues[a.key].offer(rel) {
                decisions[i] = true;
                done[i] = Some(rel * self.policy.count + wait);
            }
        }
        (decisions, Some(done))
    }
}

fn measure(
    trace: &Trace,
    clock: Clock,
    setup: &Setup,
    row: Row,
    (decisions, done): Decided,
) -> Outcome {
    let count = setup.count;
    let window = setup.period_ms * count;
    let arrived = |i: usize| clock.rel(trace.arrivals[i].at_ms) * count;
    let queue = done.map(|done_units| {
        let waits_ms: Vec<Option<u64>> = (0..decisions.len())
            .map(|i| done_units[i].map(|d| (d - arrived(i)).div_ceil(count)))
            .collect();
        Queueing {
            max_wait_ms: waits_ms.iter().flatten().copied().max().unwrap_or(0),
            waits_ms,
            max_processed_in_window: max_in_window(trace, window, |i| done_units[i]).0,
            done_units,
        }
    });
    let (max_in_window, max_in_window_all_keys) =
        max_in_window(trace, window, |i| decisions[i].then(|| arrived(i)));
    Outcome {
        row,
        allowed: decisions.iter().filter(|&&d| d).count(),
        decisions,
        max_in_window,
        max_in_window_all_keys,
        queue,
    }
}

/// The most times (`time_of(i)`, `None` to skip request `i`) within any
/// `[t, t + window)`: for the busiest key, and for all keys together.
fn max_in_window(trace: &Trace, window: u64, time_of: impl Fn(usize) -> Option<u64>) -> (u64, u64) {
    let mut per_key: Vec<Vec<u64>> = vec![Vec::new(); trace.keys.len()];
    let mut all = Vec::new();
    for (i, a) in trace.arrivals.iter().enumerate() {
        if let Some(t) = time_of(i) {
            per_key[a.key].push(t);
            all.push(t);
        }
    }
    let busiest = per_key.iter_mut().map(|t| most_within(t, window)).max();
    (busiest.unwrap_or(0), most_within(&mut all, window))
}

/// The most of `times` within any `[t, t + window)`: some window that
/// holds the most starts at one of them.
fn most_within(times: &mut [u64], window: u64) -> u64 {
    times.sort_unstable();
    let mut most = 0;
    let mut end = 0;
    for start in 0..times.len() {
        while end < times.len() && times[end] < times[start] + window {
            end += 1;
        }
        most = most.max(end - start);
    }
    most as u64
}

#[cfg(test)]
mod tests;
