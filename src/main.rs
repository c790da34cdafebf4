//! The `sluice` command: parse arguments, set up logging, run.

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use sluice::config::{self, LoadError};
use sluice::proxy::Proxy;
use sluice::runtime::Runtime;
use std::path::PathBuf;
use std::process::ExitCode;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Check { config }) => check(&config),
        Some(Command::Run { config }) => run(config),
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
    sluice::errlog::init();
    let spec = match load(&path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match serve(spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn serve(spec: config::Spec) -> anyhow::Result<()> {
    let runtime = Runtime::build(spec, None)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(async move {
        runtime.start_backends();
        let proxy = Proxy::bind(runtime).await?;
        for a in proxy.local_addrs() {
            tracing::info!(target: "nginx::notice", "listening on {a}");
        }
        proxy.serve(shutdown_signal()).await;
        tracing::info!(target: "nginx::notice", "exiting");
        Ok(())
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
