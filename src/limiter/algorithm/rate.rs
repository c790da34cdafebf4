//! The text of a rate: nginx's `Nr/s` and `Nr/m`, and a period, `Nr/h`,
//! `10r/10s`, `100r/5m`, `1r/500ms` (for window algorithms the period is
//! the window). A bare number is requests per second, as nginx reads it.

/// `(count, period_ms)` of a rate's text; the message is for the
/// configuration error (or the command line).
pub fn parse_rate(s: &str) -> Result<(u64, u64), String> {
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

/// `s`, `m`, `h`, `d`, `ms`, each optionally after a positive number.
fn period_ms(p: &str) -> Option<u64> {
    let digits = p.bytes().take_while(u8::is_ascii_digit).count();
    let (n, unit) = p.split_at(digits);
    let n: u64 = if n.is_empty() { 1 } else { n.parse().ok()? };
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    match n.checked_mul(unit_ms)? {
        0 => None,
        ms => Some(ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("2r/s"), Ok((2, 1000)));
        assert_eq!(parse_rate("30r/m"), Ok((30, 60_000)));
        assert_eq!(parse_rate("5"), Ok((5, 1000)));
        assert_eq!(parse_rate("10r/10s"), Ok((10, 10_000)));
        assert_eq!(parse_rate("100r/5m"), Ok((100, 300_000)));
        assert_eq!(parse_rate("7r/h"), Ok((7, 3_600_000)));
        assert_eq!(parse_rate("1r/500ms"), Ok((1, 500)));
        for bad in [
            "0.5r/s", "0r/s", "r/s", "-1r/s", "", "1r/0s", "1r/x", "1r/", "1r/10", "1r/s ",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert!(parse_rate("1r/2d").unwrap_err().contains("out of range"));
    }
}
