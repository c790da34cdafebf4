//! Byte, number and time formatting shared by the error log, the access log
//! and the variables: nginx's renderings (`5.998`, `127.0.0.1`,
//! `2026/11/30 18:14:20`, `30/Nov/2026:18:14:20 +0000`, …).
//!
//! A leaf: it imports nothing from the crate, so that every module that
//! prints (errlog, vars, accesslog, the request path) can use it without
//! depending on another's configuration. The hot paths append to a reused
//! `Vec<u8>` (`push_*`), without `fmt` machinery where a literal or a number
//! will do. Reading the clock is not formatting: [`Timestamp`] is made from
//! a time given to it (the wall clock is read in `errlog`).

use std::fmt;

/// Appends formatted text (a literal without formatting machinery).
pub fn push_fmt(out: &mut Vec<u8>, msg: fmt::Arguments<'_>) {
    match msg.as_str() {
        Some(s) => out.extend_from_slice(s.as_bytes()),
        None => {
            let _ = std::io::Write::write_fmt(out, msg);
        }
    }
}

/// Whether nginx's access-log escaping (`ngx_http_log_escape`) writes `b`
/// as `\xHH`: `"`, `\` and bytes outside printable ASCII.
pub fn log_escapes(b: u8) -> bool {
    b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b)
}

/// Appends `b` as nginx's access-log escaping writes it (see
/// [`log_escapes`]).
pub fn push_log_escaped(out: &mut Vec<u8>, b: u8) {
    if log_escapes(b) {
        push_fmt(out, format_args!("\\x{b:02X}"));
    } else {
        out.push(b);
    }
}

/// Appends a number.
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends an address as nginx prints it.
pub fn push_ip(out: &mut Vec<u8>, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            // Written whole: at most 15 bytes, one copy (on every log line).
            let mut buf = [0u8; 15];
            let mut n = 0;
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    buf[n] = b'.';
                    n += 1;
                }
                if o >= 100 {
                    buf[n] = b'0' + o / 100;
                    n += 1;
                }
                if o >= 10 {
                    buf[n] = b'0' + o / 10 % 10;
                    n += 1;
                }
                buf[n] = b'0' + o % 10;
                n += 1;
            }
            out.extend_from_slice(&buf[..n]);
        }
        v6 => push_fmt(out, format_args!("{v6}")),
    }
}

/// Appends an excess as nginx prints it (5998 → `5.998`); also seconds with
/// milliseconds (`$request_time`), the same thousandths.
pub fn push_excess(out: &mut Vec<u8>, excess: u64) {
    push_u64(out, excess / 1000);
    let frac = excess % 1000;
    out.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

/// nginx prints an excess of 5998 as `5.998`.
pub struct Excess(pub u64);

impl fmt::Display for Excess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// A UTC wall-clock second, as nginx prints it.
pub struct Timestamp(u64);

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

impl Timestamp {
    /// The second `secs` after the Unix epoch.
    pub fn from_secs(secs: u64) -> Timestamp {
        Timestamp(secs)
    }

    /// The second that Unix millisecond `unix_ms` falls in.
    pub fn from_ms(unix_ms: u64) -> Timestamp {
        Timestamp(unix_ms / 1000)
    }

    /// Seconds since the Unix epoch.
    pub fn secs(&self) -> u64 {
        self.0
    }

    /// The start of this second, in Unix milliseconds.
    pub fn unix_ms(&self) -> u64 {
        self.0 * 1000
    }

    /// RFC 9110's IMF-fixdate, for a `Date` header:
    /// `Tue, 01 Dec 2026 06:51:26 GMT`.
    pub fn http_date(&self) -> String {
        const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        let days = self.0 / 86_400;
        let (y, m, d) = civil_from_days(days as i64);
        let rem = self.0 % 86_400;
        format!(
            "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
            DAYS[(days % 7) as usize],
            MONTHS[m as usize - 1],
            rem / 3600,
            rem / 60 % 60,
            rem % 60
        )
    }

    /// nginx's `$time_local`: `30/Nov/2026:18:14:20 +0000`.
    pub fn clf(&self) -> String {
        let (y, m, d) = civil_from_days((self.0 / 86_400) as i64);
        let rem = self.0 % 86_400;
        format!(
            "{d:02}/{}/{y:04}:{:02}:{:02}:{:02} +0000",
            MONTHS[m as usize - 1],
            rem / 3600,
            rem / 60 % 60,
            rem % 60
        )
    }

    /// nginx's `$time_iso8601`: `2026-11-30T18:14:20+00:00`.
    pub fn iso8601(&self) -> String {
        let (y, m, d) = civil_from_days((self.0 / 86_400) as i64);
        let rem = self.0 % 86_400;
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+00:00",
            rem / 3600,
            rem / 60 % 60,
            rem % 60
        )
    }
}

impl Timestamp {
    /// RFC 3164's `TIMESTAMP` as nginx sends it to syslog: `Dec  7 12:29:38`
    /// (the day padded with a space).
    pub fn push_syslog(&self, out: &mut Vec<u8>) {
        let (_, m, d) = civil_from_days((self.0 / 86_400) as i64);
        let rem = self.0 % 86_400;
        push_fmt(
            out,
            format_args!(
                "{} {d:2} {:02}:{:02}:{:02}",
                MONTHS[m as usize - 1],
                rem / 3600,
                rem / 60 % 60,
                rem % 60
            ),
        );
    }
}

/// The error log's date: `2026/11/30 18:14:20`.
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = (self.0 / 86_400) as i64;
        let rem = self.0 % 86_400;
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}/{m:02}/{d:02} {:02}:{:02}:{:02}",
            rem / 3600,
            rem / 60 % 60,
            rem % 60
        )
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excess_prints_like_nginx() {
        assert_eq!(Excess(5998).to_string(), "5.998");
        assert_eq!(Excess(1000).to_string(), "1.000");
        assert_eq!(Excess(1).to_string(), "0.001");
    }

    #[test]
    fn pushed_pieces_print_like_display() {
        let mut out = Vec::new();
        for e in [0, 1, 999, 1000, 5998, 123_456] {
            out.clear();
            push_excess(&mut out, e);
            assert_eq!(out, Excess(e).to_string().as_bytes());
        }
        for ip in [
            "127.0.0.2",
            "10.200.0.255",
            "0.9.99.100",
            "255.255.255.255",
            "::1",
            "2001:db8::7",
        ] {
            out.clear();
            push_ip(&mut out, ip.parse().unwrap());
            assert_eq!(out, ip.as_bytes());
        }
        out.clear();
        push_fmt(&mut out, format_args!("plain"));
        push_fmt(&mut out, format_args!(" {}", 42));
        assert_eq!(out, b"plain 42");
    }

    #[test]
    fn dates() {
        assert_eq!(Timestamp(0).to_string(), "1970/01/01 00:00:00");
        // 2026-11-30 18:14:20 UTC
        assert_eq!(Timestamp(1_796_062_460).to_string(), "2026/11/30 18:14:20");
        let t = Timestamp::from_ms(1_796_062_460_999);
        assert_eq!(t.clf(), "30/Nov/2026:18:14:20 +0000");
        assert_eq!(t.iso8601(), "2026-11-30T18:14:20+00:00");
        assert_eq!(t.http_date(), "Mon, 30 Nov 2026 18:14:20 GMT");
        assert_eq!(t.unix_ms(), 1_796_062_460_000);
    }
}
