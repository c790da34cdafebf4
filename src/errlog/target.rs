//! Where log lines go: nginx's `error_log` targets (a file, `stderr`,
//! `syslog:…`, each from its own level up) and the destinations both logs
//! write to ([`Sink`], shared by every target and level that names one, and
//! kept open across a reload through [`Sinks`]).
//!
//! As nginx, every target of an `error_log` list gets each line at or above
//! its level: `error_log = ["f.log warn", "f.log"]` writes an error twice
//! to `f.log` (nginx's `error_log.t`, "file_low").

use super::Severity;
use super::syslog::{self, Params};
use crate::fmt::Timestamp;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A destination of whole lines (or, for syslog, of framed messages).
pub enum Sink {
    Stdout,
    /// fd 2. One sink for the process ([`stderr`]), so that access and
    /// error lines on stderr share one batch and keep their order.
    Stderr,
    File {
        path: PathBuf,
        file: Mutex<std::fs::File>,
    },
    Syslog(syslog::Peer),
}

impl Sink {
    fn open(path: &Path) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    }

    /// Reopen the file (after log rotation), connect a syslog socket again.
    pub fn reopen(&self) -> std::io::Result<()> {
        match self {
            Sink::File { path, file } => *file.lock() = Sink::open(path)?,
            Sink::Syslog(peer) => peer.reopen(),
            Sink::Stdout | Sink::Stderr => {}
        }
        Ok(())
    }
}

impl crate::batch::Output for Sink {
    fn write_out(&self, lines: &[u8]) {
        // One write per batch of whole lines: lines from several threads
        // never interleave.
        let _ = match self {
            Sink::Stdout => std::io::stdout().lock().write_all(lines),
            Sink::Stderr => super::RawStderr.write_all(lines),
            Sink::File { file, .. } => file.lock().write_all(lines),
            Sink::Syslog(peer) => {
                peer.send_frames(lines);
                Ok(())
            }
        };
    }
}

/// The process's standard error, as a sink.
pub fn stderr() -> Arc<Sink> {
    static STDERR: std::sync::LazyLock<Arc<Sink>> =
        std::sync::LazyLock::new(|| Arc::new(Sink::Stderr));
    STDERR.clone()
}

/// The sinks of one configuration, one per distinct destination, so that
/// several levels logging to one file (or syslog server) share it.
#[derive(Default)]
pub struct Sinks(HashMap<String, Arc<Sink>>);

impl Sinks {
    /// The sink for `target` (`"stdout"`, `"stderr"`, a path, or a syslog
    /// server's [`syslog::Server::key`]), opening it if needed; sinks of
    /// `previous` are reused.
    pub fn get(&mut self, target: &str, previous: Option<&Sinks>) -> std::io::Result<Arc<Sink>> {
        self.get_with(target, previous, || match target {
            "stdout" => Ok(Sink::Stdout),
            path => Ok(Sink::File {
                path: PathBuf::from(path),
                file: Mutex::new(Sink::open(Path::new(path))?),
            }),
        })
    }

    /// The sink of a syslog server.
    pub fn syslog(
        &mut self,
        server: &syslog::Server,
        previous: Option<&Sinks>,
    ) -> std::io::Result<Arc<Sink>> {
        self.get_with(&server.key(), previous, || {
            syslog::Peer::open(server).map(Sink::Syslog)
        })
    }

    fn get_with(
        &mut self,
        key: &str,
        previous: Option<&Sinks>,
        open: impl FnOnce() -> std::io::Result<Sink>,
    ) -> std::io::Result<Arc<Sink>> {
        if key == "stderr" {
            return Ok(stderr());
        }
        if let Some(s) = self.0.get(key) {
            return Ok(s.clone());
        }
        let sink = match previous.and_then(|p| p.0.get(key)) {
            Some(s) => s.clone(),
            None => Arc::new(open()?),
        };
        self.0.insert(key.to_string(), sink.clone());
        Ok(sink)
    }

    /// Reopen every file and syslog socket (USR1, `sluice reopen`).
    pub fn reopen_all(&self) -> std::io::Result<()> {
        for s in self.0.values() {
            s.reopen()?;
        }
        Ok(())
    }
}

/// One `error_log` entry as written: `"TARGET [LEVEL]"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetSpec {
    pub dest: Dest,
    /// The least severe line written (nginx's default: `error`).
    pub level: Severity,
}

/// Where an `error_log` entry writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dest {
    Stderr,
    File(PathBuf),
    Syslog(Params),
}

impl TargetSpec {
    /// nginx's `error_log` arguments: `stderr`, `syslog:…` or a path, then
    /// an optional level.
    pub fn parse(s: &str) -> Result<TargetSpec, String> {
        let mut words = s.split_whitespace();
        let target = words.next().ok_or("\"error_log\" needs a target")?;
        let level = match words.next() {
            None => Severity::Error,
            Some(l) => {
                Severity::from_name(l).ok_or_else(|| format!("invalid log level \"{l}\""))?
            }
        };
        if let Some(extra) = words.next() {
            return Err(format!(
                "\"error_log\" takes a target and one level, not \"{extra}\""
            ));
        }
        let dest = match target {
            "stderr" => Dest::Stderr,
            t if t.starts_with("memory:") => {
                return Err("\"memory:\" error logs are not supported".into());
            }
            t => match t.strip_prefix("syslog:") {
                Some(args) => Dest::Syslog(Params::parse(args)?),
                None => Dest::File(PathBuf::from(t)),
            },
        };
        Ok(TargetSpec { dest, level })
    }
}

impl std::fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.dest {
            Dest::Stderr => write!(f, "stderr")?,
            Dest::File(p) => write!(f, "{}", p.display())?,
            Dest::Syslog(p) => write!(f, "syslog:{}", p.to_nginx())?,
        }
        write!(f, " {}", self.level.name())
    }
}

/// A compiled error log: the targets of one level's `error_log` list.
pub struct ErrorLog {
    /// The least severe level any target writes.
    min: Severity,
    /// The sink of the only target, when there is one and it is no
    /// syslog server: a line is formatted straight into its batch.
    single: Option<Arc<Sink>>,
    targets: Vec<Target>,
}

struct Target {
    level: Severity,
    sink: Arc<Sink>,
    syslog: Option<Params>,
}

impl ErrorLog {
    /// `specs`' targets, their sinks from `sinks`.
    pub fn open(
        specs: &[TargetSpec],
        sinks: &mut Sinks,
        previous: Option<&Sinks>,
    ) -> std::io::Result<ErrorLog> {
        let mut targets = Vec::new();
        for t in specs {
            let (sink, syslog) = match &t.dest {
                Dest::Stderr => (stderr(), None),
                Dest::File(p) => (sinks.get(&p.to_string_lossy(), previous)?, None),
                Dest::Syslog(params) => (
                    sinks.syslog(&params.server, previous)?,
                    Some(params.clone()),
                ),
            };
            targets.push(Target {
                level: t.level,
                sink,
                syslog,
            });
        }
        Ok(ErrorLog::of(targets))
    }

    /// Lines from `level` up, to stderr (no `error_log`).
    pub fn stderr(level: Severity) -> ErrorLog {
        ErrorLog::of(vec![Target {
            level,
            sink: stderr(),
            syslog: None,
        }])
    }

    fn of(targets: Vec<Target>) -> ErrorLog {
        let min = targets.iter().map(|t| t.level).min();
        if min == Some(Severity::Debug) {
            super::DEBUG_SOMEWHERE.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let single = match targets.as_slice() {
            [t] if t.syslog.is_none() => Some(t.sink.clone()),
            _ => None,
        };
        ErrorLog {
            min: min.unwrap_or(Severity::Emerg),
            single,
            targets,
        }
    }

    /// The least severe level written anywhere.
    pub fn min(&self) -> Severity {
        self.min
    }

    /// Whether a line of `sev` is written at all.
    pub fn wants(&self, sev: Severity) -> bool {
        sev >= self.min
    }

    /// Writes one line of `sev`: `prefix` appends nginx's
    /// `DATE [LEVEL] PID#TID: `, `write` the message. Formatted in place
    /// when one file or stderr takes it (the common case, and the hottest:
    /// a rejection's line), else once and copied to each target.
    pub(super) fn write(
        &self,
        sev: Severity,
        prefix: impl Fn(&mut Vec<u8>),
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        if sev < self.min {
            return;
        }
        if let Some(sink) = &self.single {
            return crate::batch::write_with(sink, |line| {
                prefix(line);
                write(line);
                line.push(b'\n');
            });
        }
        let mut hit = self.targets.iter().filter(|t| sev >= t.level);
        let (Some(first), second) = (hit.next(), hit.next()) else {
            return;
        };
        if second.is_none() && first.syslog.is_none() {
            return crate::batch::write_with(&first.sink, |line| {
                prefix(line);
                write(line);
                line.push(b'\n');
            });
        }
        thread_local! {
            static MSG: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        MSG.with_borrow_mut(|msg| {
            msg.clear();
            prefix(msg);
            write(msg);
            self.write_formatted(sev, msg);
        });
    }

    /// Writes a line already formatted (without its newline) to each
    /// target that takes `sev`.
    pub(super) fn write_formatted(&self, sev: Severity, msg: &[u8]) {
        let now = Timestamp::coarse_now();
        for t in self.targets.iter().filter(|t| sev >= t.level) {
            crate::batch::write_with(&t.sink, |line| match &t.syslog {
                Some(p) => syslog::push_frame(line, |out| {
                    p.push_header(out, sev.syslog(), &now);
                    out.extend_from_slice(msg);
                }),
                None => {
                    line.extend_from_slice(msg);
                    line.push(b'\n');
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_as_nginx_arguments() {
        let t = TargetSpec::parse("/var/log/sluice/error.log warn").unwrap();
        assert_eq!(t.dest, Dest::File("/var/log/sluice/error.log".into()));
        assert_eq!(t.level, Severity::Warn);
        let t = TargetSpec::parse("stderr").unwrap();
        assert_eq!((t.dest, t.level), (Dest::Stderr, Severity::Error));
        let t = TargetSpec::parse("syslog:server=unix:/dev/log,tag=edge debug").unwrap();
        assert_eq!(t.level, Severity::Debug);
        assert_eq!(t.to_string(), "syslog:server=unix:/dev/log,tag=edge debug");
        for (bad, why) in [
            ("", "needs a target"),
            ("f.log loud", "invalid log level \"loud\""),
            ("f.log warn error", "one level"),
            ("memory:32m debug", "not supported"),
            ("syslog:tag=x", "no syslog server"),
        ] {
            let e = TargetSpec::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// nginx's `error_log.t`: a file named twice gets a line once per
    /// entry that takes it (low: warn and error both take an error; high:
    /// emerg does not).
    #[test]
    fn each_entry_writes_what_its_level_takes() {
        let dir = std::env::temp_dir().join(format!("sluice-errlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut sinks = Sinks::default();
        for (name, levels, lines) in [
            ("low", ["warn", "error"], 2),
            ("dup", ["error", "error"], 2),
            ("high", ["emerg", "error"], 1),
        ] {
            let path = dir.join(format!("{name}.log"));
            let specs: Vec<TargetSpec> = levels
                .iter()
                .map(|l| TargetSpec::parse(&format!("{} {l}", path.display())).unwrap())
                .collect();
            let log = ErrorLog::open(&specs, &mut sinks, None).unwrap();
            log.write(
                Severity::Error,
                |o| o.extend_from_slice(b"P "),
                |o| o.extend_from_slice(b"msg"),
            );
            log.write(Severity::Info, |_| {}, |o| o.extend_from_slice(b"no"));
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text, "P msg\n".repeat(lines), "{name}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
