//! nginx's error log, through `tracing`.
//!
//! Lines look like nginx's so that the grep patterns, fail2ban filters and
//! habits of nginx users keep working:
//!
//! ```text
//! 2026/11/30 18:14:20 [error] 4323#4323: *18 limiting requests, excess: 5.998 by zone "z_b5", client: 127.0.0.1, server: , request: "GET /b5 HTTP/1.1", host: "x"
//! ```
//!
//! Where lines go is nginx's `error_log` ([`target`]): files, stderr and
//! [`syslog`], each from its own level up. The top level's list is the
//! process's log ([`set_main`]); a server's or location's own list takes
//! the lines about the requests it serves ([`scope`], [`set_request_log`]),
//! as nginx's `error_log` inside `server` and `location`.
//!
//! nginx has levels tracing lacks (`notice`, `alert`); an event carries its
//! nginx level in its target (`nginx::notice`), and [`NginxFormat`] prints
//! it. Filtering still works with `RUST_LOG` (notice and info are tracing's
//! INFO, alert is ERROR).

/// The formatting the log lines are made of; re-exported so that callers
/// writing a line piece by piece (`emit_with`) find it beside `emit_with`.
pub use crate::fmt::{Excess, Timestamp, push_excess, push_fmt, push_ip, push_u64};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Filter, Layer as _};
use tracing_subscriber::registry::LookupSpan;

pub mod syslog;
mod target;

pub use target::{Dest, ErrorLog, Sink, Sinks, TargetSpec};

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

    /// RFC 5424's number of the severity: emerg 0 … debug 7.
    pub fn syslog(self) -> u8 {
        7 - self as u8
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

/// Set when lines go straight to their `error_log` targets (no
/// `RUST_LOG`): a rejection's line is then formatted into the batch without
/// `tracing`'s dispatch — at 100 000 rejections a second, the line cost
/// more than the rest of the rejection. With `RUST_LOG`, every line goes
/// through `tracing` to stderr, filtered by it, whatever `error_log` says.
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

/// Set once a log writes debug lines (a configuration named `debug`
/// somewhere): until then a debug line costs a request one load.
static DEBUG_SOMEWHERE: AtomicBool = AtomicBool::new(false);

/// Emit one error-log line whose message `write` appends to the buffer.
pub fn emit_with(sev: Severity, write: impl FnOnce(&mut Vec<u8>)) {
    if !DIRECT.load(Ordering::Relaxed) {
        let mut msg = Vec::new();
        write(&mut msg);
        return emit(sev, format_args!("{}", String::from_utf8_lossy(&msg)));
    }
    if sev == Severity::Debug && !DEBUG_SOMEWHERE.load(Ordering::Relaxed) {
        return;
    }
    // In one pass, into the batch (see `batch::write_with`), of the
    // request's log or the process's.
    with_log(|log| log.write(sev, |line| push_prefix(line, sev.name()), write));
}

/// Whether a line of `sev` would be written here (a request's log, or the
/// process's): a debug line that takes work to gather asks first.
pub fn enabled(sev: Severity) -> bool {
    if !DIRECT.load(Ordering::Relaxed) {
        return sev.rank() >= THRESHOLD.load(Ordering::Relaxed);
    }
    if sev == Severity::Debug && !DEBUG_SOMEWHERE.load(Ordering::Relaxed) {
        return false;
    }
    with_log(|log| log.wants(sev))
}

/// Runs `f` on the log of the request being served on this task, or else
/// the process's.
fn with_log<R>(f: impl FnOnce(&ErrorLog) -> R) -> R {
    if !SCOPES.load(Ordering::Relaxed) {
        return with_main(f);
    }
    match REQUEST_LOG.try_with(|slot| slot.borrow().clone()) {
        Ok(Some(log)) => f(&log),
        _ => with_main(f),
    }
}

/// Set once a request ran in a [`scope`]: until then no task has a
/// request's log, and a line goes to the process's without asking.
static SCOPES: AtomicBool = AtomicBool::new(false);

/// A request is about to run in a [`scope`].
fn note_scopes() {
    if !SCOPES.load(Ordering::Relaxed) {
        SCOPES.store(true, Ordering::Relaxed);
    }
}

/// Whether a debug line could be written anywhere: callers that would
/// format one ask this first (one load, inlined).
#[inline]
pub fn debug_possible() -> bool {
    !DIRECT.load(Ordering::Relaxed) || DEBUG_SOMEWHERE.load(Ordering::Relaxed)
}

/// Bumped after each [`set_main`], so that a thread knows its copy of the
/// process's log is stale.
static MAIN_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Runs `f` on the process's log, from this thread's copy: a rejection's
/// line costs an atomic load rather than an `ArcSwap` load.
fn with_main<R>(f: impl FnOnce(&ErrorLog) -> R) -> R {
    thread_local! {
        static HERE: std::cell::RefCell<(u64, Option<std::sync::Arc<ErrorLog>>)> =
            const { std::cell::RefCell::new((0, None)) };
    }
    let generation = MAIN_GENERATION.load(Ordering::Acquire);
    HERE.with(|here| {
        // (Borrowed already only if a line were written while writing
        // one: that one reads the shared log.)
        let Ok(mut h) = here.try_borrow_mut() else {
            return f(&MAIN.load());
        };
        if h.0 != generation {
            *h = (generation, None);
        }
        f(h.1.get_or_insert_with(|| MAIN.load_full()))
    })
}

/// The process's error log: the top level's `error_log` (stderr at `info`
/// until a configuration says otherwise).
static MAIN: std::sync::LazyLock<arc_swap::ArcSwap<ErrorLog>> =
    std::sync::LazyLock::new(|| arc_swap::ArcSwap::from_pointee(ErrorLog::stderr(Severity::Info)));

/// From now on, the process's lines (and those of requests whose server
/// and location have no `error_log` of their own) go to `log`.
pub fn set_main(log: std::sync::Arc<ErrorLog>) {
    set_level(log.min());
    MAIN.store(log);
    MAIN_GENERATION.fetch_add(1, Ordering::Release);
}

tokio::task_local! {
    /// The error log of the request this task serves, once its server or
    /// location is known.
    static REQUEST_LOG: std::cell::RefCell<Option<std::sync::Arc<ErrorLog>>>;
}

/// Runs `fut` as a request's task: its lines go to the log
/// [`set_request_log`] names (the process's until then), also while it is
/// dropped (a client gone while delayed: the 499 line).
pub async fn scope<F: std::future::Future>(fut: F) -> F::Output {
    note_scopes();
    REQUEST_LOG.scope(std::cell::RefCell::new(None), fut).await
}

/// Whether this task runs in a [`scope`].
pub fn in_scope() -> bool {
    REQUEST_LOG.try_with(|_| ()).is_ok()
}

/// The lines of the request this task serves go to `log` from now on (its
/// server's, then its location's). No effect outside [`scope`].
pub fn set_request_log(log: &std::sync::Arc<ErrorLog>) {
    let _ = REQUEST_LOG.try_with(|slot| *slot.borrow_mut() = Some(log.clone()));
}

/// `YYYY/MM/DD HH:MM:SS [level] PID#TID: `. The prefix is formatted once a
/// second (and level) per thread, from the coarse clock (nginx too prints a
/// cached time); the process and thread numbers never change on a thread.
fn push_prefix(out: &mut Vec<u8>, level: &'static str) {
    thread_local! {
        /// The second, the level and their prefix.
        static PREFIX: std::cell::RefCell<(u64, &'static str, Vec<u8>)> = const {
            std::cell::RefCell::new((u64::MAX, "", Vec::new()))
        };
    }
    let now = Timestamp::coarse_now();
    PREFIX.with_borrow_mut(|(secs, lvl, prefix)| {
        if *secs != now.secs() || *lvl != level {
            prefix.clear();
            push_fmt(prefix, format_args!("{now}"));
            prefix.extend_from_slice(b" [");
            prefix.extend_from_slice(level.as_bytes());
            prefix.extend_from_slice(b"] ");
            push_u64(prefix, pid().into());
            prefix.push(b'#');
            push_u64(prefix, thread_number());
            prefix.extend_from_slice(b": ");
            (*secs, *lvl) = (now.secs(), level);
        }
        out.extend_from_slice(prefix);
    });
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
            if d.0 != now.secs() {
                *d = (now.secs(), now.to_string());
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
pub(crate) struct RawStderr;

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

/// The wall clock (read by [`crate::clock`]) as the logs' timestamps.
impl Timestamp {
    pub fn now() -> Timestamp {
        Timestamp::from_secs(crate::clock::unix_secs())
    }

    /// The wall clock to the second, without a hardware clock read.
    pub fn coarse_now() -> Timestamp {
        Timestamp::from_secs(crate::clock::coarse_unix_secs())
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    crate::clock::unix_ms()
}

/// The least severe line the process's log writes (the top level's
/// `error_log`), as a rank of [`rank`]: other crates' events below it are
/// turned away before they are formatted; changed by [`set_main`].
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

/// An event's nginx severity (see [`rank`]).
fn severity(meta: &Metadata<'_>) -> Severity {
    match meta.target().strip_prefix("nginx::") {
        Some(l) => Severity::from_name(l).unwrap_or(Severity::Error),
        None => match *meta.level() {
            tracing::Level::ERROR => Severity::Error,
            tracing::Level::WARN => Severity::Warn,
            tracing::Level::INFO => Severity::Info,
            _ => Severity::Debug,
        },
    }
}

/// `tracing`'s lines (other crates' events, formatted by [`NginxFormat`])
/// into the process's error log, at the event's severity.
struct ToMain;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ToMain {
    type Writer = MainWriter;

    fn make_writer(&'a self) -> MainWriter {
        MainWriter(Severity::Info)
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> MainWriter {
        MainWriter(severity(meta))
    }
}

/// One formatted event (one `write_all` of a whole line) at a severity.
struct MainWriter(Severity);

impl std::io::Write for MainWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = buf.strip_suffix(b"\n").unwrap_or(buf);
        MAIN.load().write_formatted(self.0, line);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Filters by [`THRESHOLD`], read at every event so that a reload can
/// change it (so no callsite caching).
///
/// The redis crate's own log records (its Cluster client logs every failed
/// reconnection attempt, many a second while a node is down) are left out:
/// sluice reports Redis failures itself, at most once a second per zone.
/// `RUST_LOG=redis=warn` shows them.
struct Threshold;

impl<S> Filter<S> for Threshold {
    fn enabled(&self, meta: &Metadata<'_>, _: &tracing_subscriber::layer::Context<'_, S>) -> bool {
        rank(meta) >= THRESHOLD.load(Ordering::Relaxed) && !meta.target().starts_with("redis::")
    }

    fn callsite_enabled(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    /// The most verbose level that can pass: tracing's global level check
    /// then turns away, before any dispatch, the `trace` and `debug` spans
    /// and events of the crates below (h2 opens dozens of spans per
    /// request; each one created and closed in the registry cost an HTTP/2
    /// request 64 000 instructions, half of all it cost). [`set_level`]
    /// has tracing read it again.
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(match THRESHOLD.load(Ordering::Relaxed) {
            0 => LevelFilter::TRACE,
            _ => LevelFilter::INFO,
        })
    }
}

/// Set the least severe line written (nginx's `error_log … LEVEL`). No
/// effect when `RUST_LOG` is set: the environment wins.
fn set_level(level: Severity) {
    let before = THRESHOLD.swap(level.rank(), Ordering::Relaxed);
    if before != level.rank() {
        // (Threshold's max_level_hint changed: tracing's global level is
        // recomputed from it. The `log` crate's records keep the level
        // they had when the subscriber was installed.)
        tracing::callsite::rebuild_interest_cache();
    }
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
    set_main(std::sync::Arc::new(ErrorLog::stderr(level)));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(|| RawStderr)
        .event_format(NginxFormat);
    let _ = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(env) => tracing_subscriber::registry()
            .with(layer.with_filter(env))
            .try_init(),
        Err(_) => {
            // Other crates' events go to the process's log, at their level.
            let layer = tracing_subscriber::fmt::layer()
                .with_writer(ToMain)
                .event_format(NginxFormat);
            let installed = tracing_subscriber::registry()
                .with(layer.with_filter(Threshold))
                .try_init();
            DIRECT.store(installed.is_ok(), Ordering::Relaxed);
            installed
        }
    };
}

/// An OS error as nginx prints errno: `111: Connection refused`, `104:
/// Connection reset by peer` (std's " (os error N)" suffix moved to the
/// front); any other error as it displays.
pub(crate) fn os_error(e: &std::io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(code) => {
            let suffix = format!(" (os error {code})");
            format!("{code}: {}", text.strip_suffix(&suffix).unwrap_or(&text))
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_read_as_nginx_prints_errno() {
        let refused = std::io::Error::from_raw_os_error(111);
        assert_eq!(os_error(&refused), "111: Connection refused");
        let other = std::io::Error::other("no route");
        assert_eq!(os_error(&other), "no route");
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

    /// tracing's global level follows the threshold: `trace` and `debug`
    /// callsites of other crates are turned away unless the level is debug.
    #[test]
    fn the_level_hint_follows_the_threshold() {
        let hint = || Filter::<tracing_subscriber::Registry>::max_level_hint(&Threshold);
        let before = THRESHOLD.load(Ordering::Relaxed);
        THRESHOLD.store(Severity::Debug.rank(), Ordering::Relaxed);
        assert_eq!(hint(), Some(LevelFilter::TRACE));
        for sev in [Severity::Info, Severity::Warn, Severity::Emerg] {
            THRESHOLD.store(sev.rank(), Ordering::Relaxed);
            assert_eq!(hint(), Some(LevelFilter::INFO), "{sev:?}");
        }
        THRESHOLD.store(before, Ordering::Relaxed);
    }
}
