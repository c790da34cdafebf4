//! Running the process, the way nginx users expect:
//!
//! - signals: `SIGHUP` reloads the configuration, `SIGUSR1` reopens the
//!   access-log files, `SIGTERM`, `SIGINT` and `SIGQUIT` stop gracefully;
//! - `pid_file`: written at start, removed at exit; `sluice reload` (and
//!   `reopen`, `stop`) send the signal to the pid it names;
//! - `watch = true`: reload when the configuration file changes.
//!
//! [`run`] wires these to [`crate::server::Server::run`], which does the work.

use crate::config::Config;
use crate::config::{self, LoadError};
use crate::errlog::{self, Severity};
use crate::server::{Command, Server, Shared};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{self, UnboundedSender};

/// Why sluice could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Server(#[from] crate::server::ServerError),
    #[error("open() \"{path}\" failed ({source})")]
    PidFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot install signal handlers ({0})")]
    Signals(std::io::Error),
}

/// Serve `config`, loaded from the file at `path`, until a stop signal; reload on
/// SIGHUP (and file changes with `watch = true`).
pub async fn run(path: PathBuf, config: Config) -> Result<(), RunError> {
    // The pid file exists before any socket listens, so whoever sees the
    // port open can signal the process (removed again if binding fails).
    let _pid = match config.ops.pid_file.clone() {
        Some(p) => Some(PidFile::create(p)?),
        None => None,
    };
    // Redis connects in the background: sluice serves while it is down.
    config.start_backends();
    let proxy = Server::bind(config).await?;
    for a in proxy.local_addrs() {
        errlog::emit(Severity::Notice, format_args!("listening on {a}"));
    }
    if let Some(a) = proxy.admin_addr() {
        errlog::emit(
            Severity::Notice,
            format_args!("admin listening on {a} (/metrics, /healthz)"),
        );
    }
    let (tx, rx) = mpsc::unbounded_channel();
    forward_signals(tx.clone()).map_err(RunError::Signals)?;
    // Only when asked for: a watch on the directory wakes a thread at every
    // write there (an error log next to the configuration, say).
    let _watcher = proxy
        .shared()
        .config()
        .ops
        .watch
        .then(|| watch_file(&path, tx, proxy.shared()))
        .flatten();
    proxy.run(rx, move || config::load(&path)).await;
    errlog::emit(Severity::Notice, format_args!("exit"));
    Ok(())
}

/// Translate signals into commands, logging them as nginx does.
pub(crate) fn forward_signals(tx: UnboundedSender<Command>) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let table = [
        (
            SignalKind::hangup(),
            1,
            "SIGHUP",
            "reconfiguring",
            Command::Reload,
        ),
        (
            SignalKind::user_defined1(),
            10,
            "SIGUSR1",
            "reopening logs",
            Command::Reopen,
        ),
        (
            SignalKind::terminate(),
            15,
            "SIGTERM",
            "shutting down",
            Command::Stop,
        ),
        (
            SignalKind::interrupt(),
            2,
            "SIGINT",
            "shutting down",
            Command::Stop,
        ),
        (
            SignalKind::quit(),
            3,
            "SIGQUIT",
            "shutting down",
            Command::Stop,
        ),
    ];
    for (kind, number, name, what, cmd) in table {
        let mut s = signal(kind)?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while s.recv().await.is_some() {
                errlog::emit(
                    Severity::Notice,
                    format_args!("signal {number} ({name}) received, {what}"),
                );
                if tx.send(cmd).is_err() {
                    return;
                }
            }
        });
    }
    Ok(())
}

/// The pid file: written when created, removed when dropped (if it still
/// names this process).
pub(crate) struct PidFile {
    path: PathBuf,
}

impl PidFile {
    /// Refuses to replace the pid file of a running process (a second
    /// `sluice` started by mistake would otherwise take the first one's pid
    /// file, and remove it when it fails to bind).
    pub(crate) fn create(path: PathBuf) -> Result<PidFile, RunError> {
        if let Ok(pid) = read_pid(&path) {
            // SAFETY: kill with signal 0 only checks that the process exists.
            let alive = pid > 0 && unsafe { libc::kill(pid, 0) } == 0;
            if alive && pid != std::process::id() as i32 {
                return Err(RunError::PidFile {
                    path: path.display().to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        format!("process {pid} is running with this pid file"),
                    ),
                });
            }
        }
        std::fs::write(&path, format!("{}\n", std::process::id())).map_err(|source| {
            RunError::PidFile {
                path: path.display().to_string(),
                source,
            }
        })?;
        Ok(PidFile { path })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        if read_pid(&self.path).ok() == Some(std::process::id() as i32) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Signals `sluice reload|reopen|stop` can send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Reload,
    Reopen,
    Stop,
}

/// Why a signal could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("open() \"{path}\" failed ({source})")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid PID number \"{content}\" in \"{path}\"")]
    BadPid { path: String, content: String },
    #[error("kill({pid}, {signal}) failed ({source})")]
    Kill {
        pid: i32,
        signal: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(LoadError),
    #[error("{0} has no pid_file: pass --pid-file")]
    NoPidFile(String),
}

fn read_pid(path: &Path) -> Result<i32, SignalError> {
    let text = std::fs::read_to_string(path).map_err(|source| SignalError::Read {
        path: path.display().to_string(),
        source,
    })?;
    match text.trim().parse::<i32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(SignalError::BadPid {
            path: path.display().to_string(),
            content: text.trim().to_string(),
        }),
    }
}

/// The pid file named by a configuration file's `pid_file`.
pub fn pid_file_of(config: &Path) -> Result<PathBuf, SignalError> {
    let spec = config::load(config).map_err(SignalError::Config)?;
    spec.ops
        .pid_file
        .ok_or_else(|| SignalError::NoPidFile(config.display().to_string()))
}

/// Send `signal` to the process whose pid is in `pid_file` (nginx's `-s`).
pub fn send(pid_file: &Path, signal: Signal) -> Result<i32, SignalError> {
    let pid = read_pid(pid_file)?;
    let (number, name) = match signal {
        Signal::Reload => (libc::SIGHUP, "SIGHUP"),
        Signal::Reopen => (libc::SIGUSR1, "SIGUSR1"),
        Signal::Stop => (libc::SIGTERM, "SIGTERM"),
    };
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid, number) } != 0 {
        return Err(SignalError::Kill {
            pid,
            signal: name,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(pid)
}

/// How long the file must be quiet before a change reloads: editors and
/// `kubectl` write in several steps.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// Watch the configuration's directory (editors replace the file by
/// renaming, which a watch on the file itself would miss), and those of the
/// servers' certificates and keys at start (a renewal replaces them, often
/// through a symlink), and send [`Command::Reload`] when one of these
/// files' content changed and the running configuration still has `watch =
/// true` (a reload can turn it off; turning it on, or watching a
/// certificate a reload added, takes a restart). Events about other files
/// of the directories are dropped at once. Best effort: `None` if a
/// directory cannot be watched (logged).
pub(crate) fn watch_file(
    config: &Path,
    tx: UnboundedSender<Command>,
    shared: Arc<Shared>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let (files, dirs) = watched(config, &shared);
    let (raw_tx, raw_rx) = mpsc::unbounded_channel::<()>();
    let names: Vec<_> = files
        .iter()
        .filter_map(|f| f.file_name())
        .map(|n| n.to_os_string())
        .collect();
    let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        if let Ok(ev) = ev {
            let ours = ev
                .paths
                .iter()
                .any(|p| p.file_name().is_some_and(|n| names.iter().any(|w| w == n)));
            if ours && !matches!(ev.kind, notify::EventKind::Access(_)) {
                let _ = raw_tx.send(());
            }
        }
    })
    .and_then(|mut w| {
        for dir in &dirs {
            w.watch(dir, notify::RecursiveMode::NonRecursive)?;
        }
        Ok(w)
    });
    let dir = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join("\", \"");
    let watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            if shared.config().ops.watch {
                errlog::emit(
                    Severity::Alert,
                    format_args!("cannot watch \"{dir}\" ({e}); reload with SIGHUP"),
                );
            }
            return None;
        }
    };
    reload_on_change(files, raw_rx, tx, shared);
    Some(watcher)
}

/// The files `watch` follows: the configuration, and the servers'
/// certificates and keys; and their directories.
fn watched(config: &Path, shared: &Shared) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut files = vec![config.to_path_buf()];
    for s in &shared.config().servers {
        if let Some(t) = &s.tls {
            files.extend([t.cert_file.clone(), t.key_file.clone()]);
        }
    }
    // Servers may share a certificate: each file once.
    let mut seen = Vec::new();
    files.retain(|f| {
        let new = !seen.contains(f);
        if new {
            seen.push(f.clone());
        }
        new
    });
    let mut dirs: Vec<PathBuf> = Vec::new();
    for f in &files {
        let dir = match f.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    (files, dirs)
}

/// After each burst of events (once quiet for [`DEBOUNCE`]), reload if
/// one of `files` has new content and `watch` is still on.
fn reload_on_change(
    files: Vec<PathBuf>,
    mut raw_rx: mpsc::UnboundedReceiver<()>,
    tx: UnboundedSender<Command>,
    shared: Arc<Shared>,
) {
    let read = |files: &[PathBuf]| {
        let files = files.to_vec();
        // Off the threads that serve /healthz.
        async move {
            tokio::task::spawn_blocking(move || {
                files
                    .iter()
                    .map(|f| std::fs::read(f).ok())
                    .collect::<Vec<_>>()
            })
            .await
            .ok()
        }
    };
    let mut last: Vec<Option<Vec<u8>>> = files.iter().map(|f| std::fs::read(f).ok()).collect();
    tokio::spawn(async move {
        while raw_rx.recv().await.is_some() {
            // Wait for a quiet period.
            loop {
                match tokio::time::timeout(DEBOUNCE, raw_rx.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            let Some(now) = read(&files).await else {
                continue;
            };
            // A file missing while it is being replaced is no change yet.
            let changed = files
                .iter()
                .zip(now.iter().zip(&last))
                .find(|(_, (n, l))| n.is_some() && n != l)
                .map(|(f, _)| f.clone());
            let Some(changed) = changed else {
                continue;
            };
            if !shared.config().ops.watch {
                continue;
            }
            last = now;
            errlog::emit(
                Severity::Notice,
                format_args!("\"{}\" changed, reconfiguring", changed.display()),
            );
            if tx.send(Command::Reload).is_err() {
                return;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_keeps_its_pid_file() {
        let dir = std::env::temp_dir().join(format!("sluice-pid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pid");
        // pid 1 is always running.
        std::fs::write(&path, "1\n").unwrap();
        assert!(PidFile::create(path.clone()).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "1\n");
        // A stale one (no such process) is replaced, and removed on drop.
        std::fs::write(&path, "999999999\n").unwrap();
        let f = PidFile::create(path.clone()).unwrap();
        assert_eq!(read_pid(&path).unwrap(), std::process::id() as i32);
        drop(f);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
