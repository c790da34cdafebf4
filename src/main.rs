//! The `sluice` command: parse arguments, set up logging, run.

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use sluice::config::Config;
use sluice::config::{self, LoadError};
use sluice::control;
use sluice::errlog::Severity;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc: per-thread free lists; glibc's malloc showed up as lock
/// contention between worker threads in profiles (see README, Performance).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc v3's options, by their index in its `mi_option_e` (the
/// libmimalloc-sys 0.1.49 that Cargo.toml pins exactly).
mod mi {
    pub const PURGE_DELAY: std::ffi::c_int = 15;
    pub const ALLOW_THP: std::ffi::c_int = 43;
    unsafe extern "C" {
        pub fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
        #[cfg(test)]
        pub fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
    }
}

/// Give memory back after a flood (scripts/bench-memory.sh): mimalloc
/// purges freed pages only after `purge_delay` (1 s) and only when it next
/// collects, which an idle proxy never does, so RSS stayed at 3× its value
/// before 2000 idle connections came and went. 10 ms: back within 11% of
/// it (100 ms: 55% above), while under load a page freed and reused within
/// 10 ms is not purged (0 cost one madvise per 6 proxied requests; 10, one
/// per 110).
/// Transparent huge pages make RSS grow in 2 MB steps for a proxy's many
/// small objects. The `MIMALLOC_*` environment variables still win.
///
/// Run as an early ELF constructor: mimalloc reserves its first arena
/// before `main`, with the options it had then.
extern "C" fn tune_allocator() {
    for (var, option, value) in [
        (c"MIMALLOC_PURGE_DELAY", mi::PURGE_DELAY, 10),
        (c"MIMALLOC_ALLOW_THP", mi::ALLOW_THP, 0),
    ] {
        // SAFETY: getenv of a C string; setting a documented mimalloc
        // option, which touches no allocated memory.
        unsafe {
            if libc::getenv(var.as_ptr()).is_null() {
                mi::mi_option_set(option, value);
            }
        }
    }
}

/// Priority 101: before constructors without one (mimalloc's own).
#[used]
#[unsafe(link_section = ".init_array.00101")]
static TUNE_ALLOCATOR: extern "C" fn() = tune_allocator;

/// A reverse proxy with nginx's limit_req.
#[derive(Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    /// Configuration file (TOML).
    #[arg(long, short)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy (the default).
    Run {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Parse and validate a configuration, print a summary (like `nginx -t`).
    Check {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Tell a running sluice to reload its configuration (SIGHUP).
    Reload(Target),
    /// Tell a running sluice to reopen its access-log files (SIGUSR1).
    Reopen(Target),
    /// Tell a running sluice to stop gracefully (SIGTERM).
    Stop(Target),
}

/// Which running sluice: by its pid file, or the `pid_file` of its config.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct Target {
    /// The pid file the running process wrote.
    #[arg(long)]
    pid_file: Option<PathBuf>,
    /// A configuration whose `pid_file` names it.
    #[arg(long, short)]
    config: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Check { config }) => check(&config),
        Some(Command::Run { config }) => run(config),
        Some(Command::Reload(t)) => signal(t, control::Signal::Reload),
        Some(Command::Reopen(t)) => signal(t, control::Signal::Reopen),
        Some(Command::Stop(t)) => signal(t, control::Signal::Stop),
        None => match cli.config {
            Some(config) => run(config),
            None => {
                eprintln!("sluice: missing --config FILE (try `sluice --help`)");
                ExitCode::from(2)
            }
        },
    }
}

fn load(path: &std::path::Path) -> Result<config::Spec, ExitCode> {
    config::load(path).map_err(|e| {
        match e {
            LoadError::Invalid(errors) => {
                eprintln!("{errors}");
                let n = errors.0.len();
                eprintln!(
                    "sluice: {} has {n} error{}",
                    path.display(),
                    if n == 1 { "" } else { "s" }
                );
            }
            e => eprintln!("sluice: {e}"),
        }
        ExitCode::from(1)
    })
}

fn check(path: &std::path::Path) -> ExitCode {
    match load(path) {
        Ok(spec) => {
            print!(
                "{}",
                sluice::check::summary(&path.display().to_string(), &spec)
            );
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

fn run(path: PathBuf) -> ExitCode {
    let spec = match load(&path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    sluice::errlog::init_at(spec.ops.error_log_level.unwrap_or(Severity::Info));
    match serve(path, spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            sluice::errlog::emit(Severity::Emerg, format_args!("{e:#}"));
            ExitCode::from(1)
        }
    }
}

fn serve(path: PathBuf, spec: config::Spec) -> anyhow::Result<()> {
    let runtime = Config::compile(spec, None)?;
    // Signals, reloads and the admin listener; client connections are served
    // by the proxy's own worker threads (one per CPU).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(control::run(path, runtime))?;
    Ok(())
}

fn signal(target: Target, signal: control::Signal) -> ExitCode {
    let pid_file = match (target.pid_file, target.config) {
        (Some(p), _) => Ok(p),
        (None, Some(c)) => control::pid_file_of(&c),
        (None, None) => unreachable!("clap requires one"),
    };
    match pid_file.and_then(|p| control::send(&p, signal)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    /// The constructor ran before anything read the options (mimalloc's
    /// defaults are 1000 ms and on). The indices themselves are those of
    /// the libmimalloc-sys version Cargo.toml pins exactly.
    #[test]
    fn allocator_is_tuned_before_main() {
        // SAFETY: reading options.
        let (delay, thp) = unsafe {
            (
                super::mi::mi_option_get(super::mi::PURGE_DELAY),
                super::mi::mi_option_get(super::mi::ALLOW_THP),
            )
        };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(delay, 10);
        }
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
            assert_eq!(thp, 0);
        }
    }
}
