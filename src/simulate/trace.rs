//! What `sluice simulate` runs on: the article's two scenarios, or a trace
//! file of arrival times (seconds, decimals allowed) with an optional
//! client key after each.
//!
//! Times become integer milliseconds by reading the decimal text itself,
//! never through a float: `9.9` is exactly 9900 ms, as the limiter sees
//! real requests. More than three decimals are refused unless the extra
//! digits are zeros (`1.500000` is fine, `1.0005` is not): the limiter
//! decides on whole milliseconds, and rounding a trace silently could
//! change its decisions.

use std::collections::HashMap;

/// The latest arrival time accepted (about 31,700 years): every sum of
/// times, periods and waits stays far inside 64 bits.
pub const MAX_TIME_MS: u64 = 1_000_000_000_000_000;

/// One request: when it arrives and whose it is (an index into
/// [`Trace::keys`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub at_ms: u64,
    pub key: usize,
}

/// A request sequence in input order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    pub arrivals: Vec<Arrival>,
    /// The client keys in order of first appearance; `""` is the key of
    /// lines without one.
    pub keys: Vec<String>,
    /// The source line of each arrival (1-based).
    pub lines: Vec<usize>,
}

/// A trace line that is not `SECONDS [KEY]`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}: {message}")]
pub struct TraceError {
    /// 1-based; 0 when the whole trace is at fault (no request in it).
    pub line: usize,
    pub message: String,
}

/// The article's scenarios (10 requests per 10 s, capacity 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// 10 requests at 9.9 s and 10 at 10.1 s: a burst across a window
    /// boundary.
    A,
    /// 16 requests every 0.5 s from 0 s, 10 at 9.9 s, 10 at 10.1 s, then 10
    /// every 0.5 s from 15 s: 46 requests.
    B,
}

impl Scenario {
    pub fn from_name(name: &str) -> Option<Scenario> {
        match name {
            "A" | "a" => Some(Scenario::A),
            "B" | "b" => Some(Scenario::B),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scenario::A => "A",
            Scenario::B => "B",
        }
    }

    /// The arrival times, in ms.
    pub fn times(self) -> Vec<u64> {
        let mut v = Vec::new();
        if self == Scenario::B {
            v.extend((0..16).map(|i| i * 500));
        }
        v.extend([9_900; 10]);
        v.extend([10_100; 10]);
        if self == Scenario::B {
            v.extend((0..10).map(|i| 15_000 + i * 500));
        }
        v
    }

    /// The scenario as a one-key trace (line `i + 1` is request `i`).
    pub fn trace(self) -> Trace {
        let times = self.times();
        Trace {
            lines: (1..=times.len()).collect(),
            arrivals: times
                .into_iter()
                .map(|at_ms| Arrival { at_ms, key: 0 })
                .collect(),
            keys: vec![String::new()],
        }
    }
}

/// Parse a trace file's text: one `SECONDS [KEY]` per line, `#` starts a
/// comment, blank lines are skipped.
pub fn parse_trace(text: &str) -> Result<Trace, TraceError> {
    let mut trace = Trace {
        arrivals: Vec::new(),
        keys: Vec::new(),
        lines: Vec::new(),
    };
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split_once('#').map_or(raw, |(before, _)| before);
        let mut fields = content.split_whitespace();
        let Some(time) = fields.next() else { continue };
        let key = fields.next().unwrap_or("");
        if let Some(extra) = fields.next() {
            return Err(TraceError {
                line,
                message: format!(
                    "unexpected \"{extra}\" (expected SECONDS and an optional KEY, then nothing or a # comment)"
                ),
            });
        }
        let at_ms = parse_seconds(time).map_err(|message| TraceError { line, message })?;
        let next = index.len();
        let key = *index.entry(key.to_string()).or_insert_with(|| {
            trace.keys.push(key.to_string());
            next
        });
        trace.arrivals.push(Arrival { at_ms, key });
        trace.lines.push(line);
    }
    if trace.arrivals.is_empty() {
        return Err(TraceError {
            line: 0,
            message: "no request in the trace (expected one arrival time in seconds per line)"
                .to_string(),
        });
    }
    Ok(trace)
}

/// Seconds as decimal text (`12`, `9.9`, `0.125`, `.5`) → exact ms.
pub fn parse_seconds(s: &str) -> Result<u64, String> {
    let invalid = || {
        format!(
            "invalid time \"{s}\" (expected seconds such as 12, 9.9 or 0.125, at most 3 decimals)"
        )
    };
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
        return Err(invalid());
    }
    let (ms_digits, rest) = frac.split_at(frac.len().min(3));
    if rest.bytes().any(|b| b != b'0') {
        return Err(format!(
            "time \"{s}\" has more than 3 decimals (times are whole milliseconds)"
        ));
    }
    let too_late = || {
        format!(
            "time \"{s}\" is too large (at most {} s)",
            MAX_TIME_MS / 1000
        )
    };
    let secs: u64 = match whole {
        "" => 0,
        w => w.parse().map_err(|_| too_late())?,
    };
    // "9.9" → 900: the decimals padded to three digits.
    let ms = ms_digits
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |acc, b| acc * 10 + u64::from(b - b'0'));
    secs.checked_mul(1000)
        .and_then(|v| v.checked_add(ms))
        .filter(|&v| v <= MAX_TIME_MS)
        .ok_or_else(too_late)
}
