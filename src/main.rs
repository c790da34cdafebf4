//! The `sluice` command: parse arguments, set up logging, run.

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use sluice::config::{self, LoadError, LogLevel};
use sluice::control;
use sluice::errlog::Severity;
use sluice::runtime::Runtime;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc: per-thread free lists; glibc's malloc showed up as lock
/// contention between worker threads in profiles (see README, Performance).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    sluice::errlog::init_at(spec.ops.error_log_level.unwrap_or(LogLevel::Info));
    match serve(path, spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            sluice::errlog::emit(Severity::Emerg, format_args!("{e:#}"));
            ExitCode::from(1)
        }
    }
}

fn serve(path: PathBuf, spec: config::Spec) -> anyhow::Result<()> {
    let runtime = Runtime::build(spec, None)?;
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
