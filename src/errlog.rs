//! nginx's error log, through `tracing`.
//!
//! Lines look like nginx's so that the grep patterns, fail2ban filters and
//! habits of nginx users keep working:
//!
//! ```text
//! 2026/11/30 18:14:20 [error] 4323#4323: *18 limiting requests, excess: 5.998 by zone "z_b5", client: 127.0.0.1, server: , request: "GET /b5 HTTP/1.1", host: "x"
//! ```
//!
//! nginx has levels tracing lacks (`notice`, `alert`); an event carries its
//! nginx level in its target (`nginx::notice`), and [`NginxFormat`] prints
//! it. Filtering still works with `RUST_LOG` (notice and info are tracing's
//! INFO, alert is ERROR).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Filter, Layer as _};
use tracing_subscriber::registry::LookupSpan;

/// nginx's eight severities, least severe first. One enum for the lines
/// sluice writes and for the levels a configuration names
/// (`error_log_level`, `limit_req_log_level`, `limit_conn_log_level`), so
/// that a configured level is a line's severity without a conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Debug,
    Info,
    Notice,
    Warn,
    Error,
    /// nginx's `crit` (a `limit_conn_zone` with no room).
    Crit,
    Alert,
    /// nginx's `emerg`: a configuration that cannot be used.
    Emerg,
}

impl Severity {
    /// Every severity, least severe first.
    pub const ALL: [Severity; 8] = [
        Severity::Debug,
        Severity::Info,
        Severity::Notice,
        Severity::Warn,
        Severity::Error,
        Severity::Crit,
        Severity::Alert,
        Severity::Emerg,
    ];

    /// nginx's name of the level, as in `[error]`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Debug => "debug",
            Severity::Info => "info",
            Severity::Notice => "notice",
            Severity::Warn => "warn",
            Severity::Error => "error",
            Severity::Crit => "crit",
            Severity::Alert => "alert",
            Severity::Emerg => "emerg",
        }
    }

    /// The level nginx names `s`.
    pub fn from_name(s: &str) -> Option<Severity> {
        Severity::ALL.into_iter().find(|l| l.name() == s)
    }

    /// One level less severe: nginx logs a delay one level below the
    /// rejection of the same limit (`limit_req_log_level`), and `info` stays
    /// `info` (nginx's `delay_log_level`).
    pub fn lower(self) -> Severity {
        match self {
            Severity::Emerg => Severity::Alert,
            Severity::Alert => Severity::Crit,
            Severity::Crit => Severity::Error,
            Severity::Error => Severity::Warn,
            Severity::Warn => Severity::Notice,
            Severity::Notice | Severity::Info => Severity::Info,
            Severity::Debug => Severity::Debug,
        }
    }

    /// As [`rank`] numbers events: crit, alert and emerg share the top.
    fn rank(self) -> u8 {
        match self {
            Severity::Debug => 0,
            Severity::Info => 1,
            Severity::Notice => 2,
            Severity::Warn => 3,
            Severity::Error => 4,
            Severity::Crit | Severity::Alert | Severity::Emerg => 5,
        }
    }
}

/// Set when lines go straight to standard error (no `RUST_LOG`): a
/// rejection's line is then formatted into a reused buffer without
/// `tracing`'s dispatch — at 100 000 rejections a second, the line cost
/// more than the rest of the rejection.
static DIRECT: AtomicBool = AtomicBool::new(false);

/// Emit one error-log line at an nginx severity.
pub fn emit(sev: Severity, msg: fmt::Arguments<'_>) {
    if DIRECT.load(Ordering::Relaxed) {
        return emit_with(sev, |out| push_fmt(out, msg));
    }
    match sev {
        Severity::Emerg => tracing::error!(target: "nginx::emerg", "{msg}"),
        Severity::Alert => tracing::error!(target: "nginx::alert", "{msg}"),
        Severity::Crit => tracing::error!(target: "nginx::crit", "{msg}"),
        Severity::Error => tracing::error!(target: "nginx::error", "{msg}"),
        Severity::Warn => tracing::warn!(target: "nginx::warn", "{msg}"),
        Severity::Notice => tracing::info!(target: "nginx::notice", "{msg}"),
        Severity::Info => tracing::info!(target: "nginx::info", "{msg}"),
        Severity::Debug => tracing::debug!(target: "nginx::debug", "{msg}"),
    }
}

/// Emit one error-log line whose message `write` appends to the buffer.
pub fn emit_with(sev: Severity, write: impl FnOnce(&mut Vec<u8>)) {
    if !DIRECT.load(Ordering::Relaxed) {
        let mut msg = Vec::new();
        write(&mut msg);
        return emit(sev, format_args!("{}", String::from_utf8_lossy(&msg)));
    }
    if sev.rank() < THRESHOLD.load(Ordering::Relaxed) {
        return;
    }
    thread_local! {
        static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    LINE.with_borrow_mut(|line| {
        line.clear();
        push_prefix(line, sev.name());
        write(line);
        line.push(b'\n');
        crate::batch::write(&STDERR_OUT, line);
    });
}

/// Whole lines to stderr, batched with the error log's own (the access log
/// on stderr goes here, so the two keep their order).
pub fn write_lines(lines: &[u8]) {
    crate::batch::write(&STDERR_OUT, lines);
}

/// fd 2, as a destination of batched lines.
struct StderrOut;

impl crate::batch::Output for StderrOut {
    fn write_out(&self, bytes: &[u8]) {
        let _ = std::io::Write::write_all(&mut RawStderr, bytes);
    }
}

static STDERR_OUT: std::sync::LazyLock<std::sync::Arc<StderrOut>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(StderrOut));

/// Appends formatted text (a literal without formatting machinery).
pub fn push_fmt(out: &mut Vec<u8>, msg: fmt::Arguments<'_>) {
    match msg.as_str() {
        Some(s) => out.extend_from_slice(s.as_bytes()),
        None => {
            let _ = std::io::Write::write_fmt(out, msg);
        }
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
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                push_u64(out, o.into());
            }
        }
        v6 => push_fmt(out, format_args!("{v6}")),
    }
}

/// Appends an excess as nginx prints it (5998 → `5.998`).
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

/// `YYYY/MM/DD HH:MM:SS [level] PID#TID: `. The date is formatted once a
/// second per thread, from the coarse clock (nginx too prints a cached
/// time).
fn push_prefix(out: &mut Vec<u8>, level: &str) {
    thread_local! {
        static DATE: std::cell::RefCell<(u64, String)> = const {
            std::cell::RefCell::new((u64::MAX, String::new()))
        };
    }
    let now = Timestamp::coarse_now();
    DATE.with_borrow_mut(|d| {
        if d.0 != now.0 {
            *d = (now.0, now.to_string());
        }
        out.extend_from_slice(d.1.as_bytes());
    });
    out.extend_from_slice(b" [");
    out.extend_from_slice(level.as_bytes());
    out.extend_from_slice(b"] ");
    push_u64(out, pid().into());
    out.push(b'#');
    push_u64(out, thread_number());
    out.extend_from_slice(b": ");
}

/// nginx prints an excess of 5998 as `5.998`.
pub struct Excess(pub u64);

impl fmt::Display for Excess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// The `tracing` event format: `YYYY/MM/DD HH:MM:SS [level] PID#TID: message`.
pub struct NginxFormat;

impl<S, N> FormatEvent<S, N> for NginxFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let level = match meta.target().strip_prefix("nginx::") {
            Some(l) => l,
            None => match *meta.level() {
                tracing::Level::ERROR => "error",
                tracing::Level::WARN => "warn",
                tracing::Level::INFO => "info",
                _ => "debug",
            },
        };
        // The date changes once a second: format it once a second per thread.
        thread_local! {
            static DATE: std::cell::RefCell<(u64, String)> = const {
                std::cell::RefCell::new((u64::MAX, String::new()))
            };
        }
        let now = Timestamp::now();
        DATE.with(|d| {
            let mut d = d.borrow_mut();
            if d.0 != now.0 {
                *d = (now.0, now.to_string());
            }
            write!(writer, "{} [{level}] {}#{}: ", d.1, pid(), thread_number())
        })?;
        // The message is written as it was formatted (nginx's wording, no
        // re-escaping); other fields, if any, follow as `key=value`.
        let mut visit = Fields {
            writer: &mut writer,
            result: Ok(()),
        };
        event.record(&mut visit);
        visit.result?;
        writeln!(writer)
    }
}

struct Fields<'a, 'w> {
    writer: &'a mut Writer<'w>,
    result: fmt::Result,
}

impl tracing::field::Visit for Fields<'_, '_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        self.result = if field.name() == "message" {
            write!(self.writer, "{value:?}")
        } else {
            write!(self.writer, " {}={value:?}", field.name())
        };
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        self.result = if field.name() == "message" {
            self.writer.write_str(value)
        } else {
            write!(self.writer, " {}={value}", field.name())
        };
    }
}

/// Standard error written with one `write(2)` per line and no lock: lines
/// are formatted whole first, and a write of a line to a file or pipe is
/// not interleaved with another thread's (as nginx's workers write their
/// error log). `std::io::Stderr` serialises writers through a mutex.
struct RawStderr;

impl std::io::Write for RawStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // SAFETY: fd 2 stays open for the life of the process; `buf` is valid
        // for `buf.len()` bytes.
        let n = unsafe { libc::write(2, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The process id, read once (it is a system call).
fn pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

fn thread_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ID.with(|id| *id)
}

/// UTC wall-clock time as nginx prints it.
pub struct Timestamp(u64);

impl Timestamp {
    pub fn now() -> Timestamp {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Timestamp(secs)
    }

    /// The wall clock to the second, from `CLOCK_REALTIME_COARSE` (no
    /// hardware clock read).
    pub fn coarse_now() -> Timestamp {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write to.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } == 0 {
            Timestamp(ts.tv_sec.max(0) as u64)
        } else {
            Timestamp::now()
        }
    }

    /// The start of this second, in Unix milliseconds.
    pub fn unix_ms(&self) -> u64 {
        self.0 * 1000
    }

    pub fn from_ms(unix_ms: u64) -> Timestamp {
        Timestamp(unix_ms / 1000)
    }

    /// nginx's `$time_local`: `30/Nov/2026:18:14:20 +0000`.
    /// RFC 9110's IMF-fixdate, for a `Date` header:
    /// `Tue, 01 Dec 2026 06:51:26 GMT`.
    pub fn http_date(&self) -> String {
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
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

    pub fn clf(&self) -> String {
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
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

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

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

/// The least severe line written (`error_log_level`), as a rank of
/// [`rank`]; changed at run time by [`set_level`].
static THRESHOLD: AtomicU8 = AtomicU8::new(1);

/// An event's nginx severity as a number: debug 0, info 1, notice 2, warn 3,
/// error 4, alert and emerg 5.
fn rank(meta: &Metadata<'_>) -> u8 {
    match meta.target().strip_prefix("nginx::") {
        Some("debug") => 0,
        Some("info") => 1,
        Some("notice") => 2,
        Some("warn") => 3,
        Some("error") => 4,
        Some(_) => 5,
        None => match *meta.level() {
            tracing::Level::ERROR => 4,
            tracing::Level::WARN => 3,
            tracing::Level::INFO => 1,
            _ => 0,
        },
    }
}

/// Filters by [`THRESHOLD`], read at every event so that a reload can
/// change it (so no callsite caching).
struct Threshold;

impl<S> Filter<S> for Threshold {
    fn enabled(&self, meta: &Metadata<'_>, _: &tracing_subscriber::layer::Context<'_, S>) -> bool {
        rank(meta) >= THRESHOLD.load(Ordering::Relaxed)
    }

    fn callsite_enabled(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
}

/// Set the least severe line written (nginx's `error_log … LEVEL`). No
/// effect when `RUST_LOG` is set: the environment wins.
pub fn set_level(level: Severity) {
    THRESHOLD.store(level.rank(), Ordering::Relaxed);
}

/// Install the global subscriber at the default level (`info`).
pub fn init() {
    init_at(Severity::Info)
}

/// Install the global subscriber: nginx-format lines on stderr from
/// `level` up, or filtered by `RUST_LOG` when it is set.
pub fn init_at(level: Severity) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    set_level(level);
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(|| RawStderr)
        .event_format(NginxFormat);
    let _ = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(env) => tracing_subscriber::registry()
            .with(layer.with_filter(env))
            .try_init(),
        Err(_) => {
            let installed = tracing_subscriber::registry()
                .with(layer.with_filter(Threshold))
                .try_init();
            DIRECT.store(installed.is_ok(), Ordering::Relaxed);
            installed
        }
    };
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
        for ip in ["127.0.0.2", "10.200.0.255", "::1", "2001:db8::7"] {
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
    fn nginx_levels_rank_in_order() {
        for pair in Severity::ALL.windows(2) {
            assert!(pair[0].rank() <= pair[1].rank(), "{pair:?}");
            assert_eq!(Severity::from_name(pair[0].name()), Some(pair[0]));
        }
        assert_eq!(Severity::from_name("warning"), None);
        assert_eq!(Severity::Error.lower(), Severity::Warn);
        assert_eq!(Severity::Info.lower(), Severity::Info);
    }

    #[test]
    fn dates() {
        assert_eq!(Timestamp(0).to_string(), "1970/01/01 00:00:00");
        // 2026-11-30 18:14:20 UTC
        assert_eq!(Timestamp(1_796_062_460).to_string(), "2026/11/30 18:14:20");
    }
}
