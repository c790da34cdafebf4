//! The text of a rate: nginx's `Nr/s` and `Nr/m`, and a period, `Nr/h`,
//! `10r/10s`, `100r/5m`, `1r/500ms` (for window algorithms the period is
//! the window). A bare number is requests per second, as nginx reads it.
//! Read ([`parse_rate`]) and written back ([`rate_text`], [`period_text`])
//! here only, with one table of units, so that the configuration, `sluice
//! check`, the metrics and `sluice simulate` agree.

/// The units of a period, largest first: the name in a rate, its length,
/// and the word for it in prose.
const UNITS: [(&str, u64, &str); 5] = [
    ("d", 86_400_000, "day"),
    ("h", 3_600_000, "hour"),
    ("m", 60_000, "minute"),
    ("s", 1000, "second"),
    ("ms", 1, "ms"),
];

/// What the messages list as units.
const UNIT_NAMES: &str = "\"ms\", \"s\", \"m\", \"h\" or \"d\", as in \"10r/10s\" or \"100r/5m\"";

/// `(count, period_ms)` of a rate's text; the message is for the
/// configuration error (or the command line). A bad period gets its own
/// reason, since `"10r/0s"` looks right at a glance.
pub fn parse_rate(s: &str) -> Result<(u64, u64), String> {
    parse(s).map_err(
        |general| match s.split_once("r/").and_then(|(_, p)| period_problem(p)) {
            Some(why) => format!("invalid rate \"{s}\": {why}"),
            None => general,
        },
    )
}

fn parse(s: &str) -> Result<(u64, u64), String> {
    let invalid = || {
        format!(
            "invalid rate \"{s}\" (expected \"Nr/s\", \"Nr/m\", \"Nr/h\" or \"Nr/PERIOD\" such as \"10r/10s\" or \"100r/5m\", N a positive integer)"
        )
    };
    let (num, period) = match s.split_once("r/") {
        Some((n, p)) => (n, period_ms(p).ok_or_else(invalid)?),
        None => (s, 1000),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    let count: u64 = num.parse().map_err(|_| invalid())?;
    if count == 0 {
        return Err(invalid());
    }
    if count > super::MAX_COUNT || period > super::MAX_PERIOD_MS {
        return Err(format!(
            "rate \"{s}\" is out of range (at most {} requests per period, periods up to 1d)",
            super::MAX_COUNT
        ));
    }
    Ok((count, period))
}

/// A unit of [`UNITS`], optionally after a positive number.
fn period_ms(p: &str) -> Option<u64> {
    let digits = p.bytes().take_while(u8::is_ascii_digit).count();
    let (n, unit) = p.split_at(digits);
    let n: u64 = if n.is_empty() { 1 } else { n.parse().ok()? };
    let unit_ms = UNITS.iter().find(|u| u.0 == unit)?.1;
    match n.checked_mul(unit_ms)? {
        0 => None,
        ms => Some(ms),
    }
}

/// What is wrong with the period of a rate (the text after `r/`), if
/// anything the general message would not point at.
fn period_problem(p: &str) -> Option<String> {
    let digits = p.bytes().take_while(u8::is_ascii_digit).count();
    let (n, unit) = p.split_at(digits);
    let known = UNITS.iter().any(|u| u.0 == unit);
    match unit {
        "" if n.is_empty() => Some(format!("no period after \"r/\" (expected {UNIT_NAMES})")),
        "" => Some(format!(
            "the period \"{n}\" has no unit (expected {UNIT_NAMES})"
        )),
        _ if known && !n.is_empty() && n.bytes().all(|b| b == b'0') => Some(format!(
            "the period \"{p}\" is zero: it must be at least 1ms"
        )),
        _ if known => None,
        _ => Some(format!(
            "unknown period unit \"{unit}\" (expected {UNIT_NAMES})"
        )),
    }
}

/// `ms` in the largest unit that divides it: the count and the unit.
fn largest_unit(ms: u64) -> (u64, &'static (&'static str, u64, &'static str)) {
    let unit = UNITS
        .iter()
        .find(|u| ms % u.1 == 0)
        .unwrap_or(&UNITS[UNITS.len() - 1]);
    (ms / unit.1, unit)
}

/// A period as a rate writes it: `10s`, `1500ms`, `2h`, `1s`.
pub fn period_text(ms: u64) -> String {
    let (n, unit) = largest_unit(ms);
    format!("{n}{}", unit.0)
}

/// A rate as [`parse_rate`] reads it back: `2r/s`, `30r/m`, `1r/h`,
/// `10r/10s`, `100r/5m`, `1r/500ms` (a period of one unit without its
/// `1`, except milliseconds).
pub fn rate_text(count: u64, period_ms: u64) -> String {
    match largest_unit(period_ms) {
        (1, unit) if unit.1 != 1 => format!("{count}r/{}", unit.0),
        _ => format!("{count}r/{}", period_text(period_ms)),
    }
}

/// A period in words: "second", "10 seconds", "5 minutes", "hour",
/// "500 ms".
pub(super) fn period_words(ms: u64) -> String {
    match largest_unit(ms) {
        (n, unit) if unit.1 == 1 => format!("{n} ms"),
        (1, unit) => unit.2.to_string(),
        (n, unit) => format!("{n} {}s", unit.2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::{Algorithm, Policy};

    #[test]
    fn rates() {
        assert_eq!(parse_rate("2r/s"), Ok((2, 1000)));
        assert_eq!(parse_rate("30r/m"), Ok((30, 60_000)));
        assert_eq!(parse_rate("5"), Ok((5, 1000)));
        assert_eq!(parse_rate("10r/10s"), Ok((10, 10_000)));
        assert_eq!(parse_rate("100r/5m"), Ok((100, 300_000)));
        assert_eq!(parse_rate("7r/h"), Ok((7, 3_600_000)));
        assert_eq!(parse_rate("10r/h"), Ok((10, 3_600_000)));
        assert_eq!(parse_rate("1r/500ms"), Ok((1, 500)));
        for bad in [
            "0.5r/s", "0r/s", "r/s", "-1r/s", "", "1r/0s", "1r/x", "1r/", "1r/10", "1r/s ",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert!(parse_rate("1r/2d").unwrap_err().contains("out of range"));
    }

    /// nginx's rates, as the leaky bucket leaks them: truncated.
    #[test]
    fn nginx_rates_truncate() {
        let milli = |s| {
            let (n, period) = parse_rate(s).unwrap();
            Policy::new(Algorithm::LeakyBucket, n, period)
                .unwrap()
                .rate
                .milli()
        };
        assert_eq!(milli("2r/s"), 2000);
        assert_eq!(milli("1r/m"), 16);
        assert_eq!(milli("5"), 5000);
    }

    #[test]
    fn bad_periods_say_why() {
        for (bad, why) in [
            (
                "10r/0s",
                "invalid rate \"10r/0s\": the period \"0s\" is zero",
            ),
            ("1r/x", "invalid rate \"1r/x\": unknown period unit \"x\""),
            (
                "1r/10",
                "invalid rate \"1r/10\": the period \"10\" has no unit",
            ),
            ("1r/", "invalid rate \"1r/\": no period after \"r/\""),
            ("1r/2d", "rate \"1r/2d\" is out of range"),
            ("0r/s", "invalid rate \"0r/s\" (expected"),
        ] {
            let e = parse_rate(bad).unwrap_err();
            assert!(e.starts_with(why), "{bad}: {e}");
        }
    }

    #[test]
    fn rates_read_back() {
        for (count, period, text) in [
            (2, 1000, "2r/s"),
            (30, 60_000, "30r/m"),
            (1, 3_600_000, "1r/h"),
            (10, 10_000, "10r/10s"),
            (100, 300_000, "100r/5m"),
            (1, 500, "1r/500ms"),
            (3, 86_400_000, "3r/d"),
            (7, 1500, "7r/1500ms"),
            (1, 1, "1r/1ms"),
        ] {
            assert_eq!(rate_text(count, period), text);
            assert_eq!(parse_rate(text), Ok((count, period)), "{text}");
        }
        assert_eq!(period_text(10_000), "10s");
        assert_eq!(period_text(1_500), "1500ms");
        assert_eq!(period_text(1000), "1s");
        assert_eq!(period_words(1000), "second");
        assert_eq!(period_words(10_000), "10 seconds");
        assert_eq!(period_words(300_000), "5 minutes");
        assert_eq!(period_words(500), "500 ms");
        assert_eq!(period_words(1), "1 ms");
    }
}
