//! The `sluice` command: parse arguments, set up logging, run.

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use sluice::config::Config;
use sluice::config::{self, LoadError};
use sluice::control;
use sluice::errlog::Severity;
use sluice::simulate::{self, Row, Scenario, Source};
use std::path::PathBuf;
use std::process::ExitCode;

/// `eprintln!` that cannot panic: a closed stderr (`sluice … 2>&1 | head`)
/// is no reason to crash.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// `print!` that cannot panic on a closed stdout.
macro_rules! tell_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

/// mimalloc: per-thread free lists; glibc's malloc showed up as lock
/// contention between worker threads in profiles (see scripts/benchmarks.md).
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
    /// Run the limiter's algorithms over a request sequence and compare
    /// what each admits (the seed article's table).
    Simulate(SimulateArgs),
    /// Translate an nginx.conf (and its includes) into sluice's TOML; what
    /// cannot be translated is reported on stderr and at the top of the
    /// output.
    ImportNginx(ImportArgs),
    /// Watch a running sluice through its admin listener: per zone passed,
    /// delayed and rejected requests per second, states, the most limited
    /// keys, upstream servers (refreshed in place; Ctrl-C to quit).
    Top(TopArgs),
    /// Write sluice's manual page (roff) to stdout:
    /// `sluice man > /usr/local/share/man/man1/sluice.1`; with a command,
    /// its own page (`sluice man check > …/sluice-check.1`).
    Man {
        /// One of the commands above.
        command: Option<String>,
    },
    /// Write a completion script for SHELL to stdout, e.g.
    /// `sluice completions bash > /etc/bash_completion.d/sluice`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `sluice import-nginx FILE [-o OUT.toml] [--backend URL] [--prefix DIR]`.
#[derive(clap::Args)]
struct ImportArgs {
    /// The nginx configuration file.
    file: PathBuf,
    /// Write the TOML here instead of stdout.
    #[arg(long, short, value_name = "OUT.toml")]
    output: Option<PathBuf>,
    /// The server that now serves what nginx served from files (root,
    /// try_files, index): such locations proxy to it (without it: 404).
    #[arg(long, value_name = "URL")]
    backend: Option<String>,
    /// nginx's prefix (`nginx -p`): relative log, pid and temporary paths
    /// are made absolute under it.
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
}

/// `sluice top [--admin ADDR | --config FILE] [--interval 2s] [--once]`.
#[derive(clap::Args)]
struct TopArgs {
    /// The admin listener's address (default 127.0.0.1:9090).
    #[arg(long, value_name = "ADDR", group = "where")]
    admin: Option<std::net::SocketAddr>,
    /// A configuration whose `[admin] listen` names it.
    #[arg(long, short, value_name = "FILE", group = "where")]
    config: Option<PathBuf>,
    /// Time between readings: 500ms, 2s, 1m.
    #[arg(long, default_value = "2s", value_parser = interval_arg)]
    interval: std::time::Duration,
    /// Print one screen without escape codes and exit (its rates are over
    /// one interval: two readings that far apart).
    #[arg(long)]
    once: bool,
}

fn interval_arg(s: &str) -> Result<std::time::Duration, String> {
    let (n, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |at| s.split_at(at));
    let n: u64 = n
        .parse()
        .map_err(|_| format!("\"{s}\" is not a duration (500ms, 2s, 1m)"))?;
    let ms = match unit {
        "ms" => n,
        "s" => n * 1000,
        "m" => n * 60_000,
        _ => return Err(format!("\"{s}\": the unit is ms, s or m")),
    };
    if ms == 0 {
        return Err("the interval must be above 0".into());
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// `sluice simulate (--scenario A|B | --trace FILE) [options]`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["scenario", "trace"])))]
struct SimulateArgs {
    /// The article's scenario: A (10 requests at 9.9 s, 10 at 10.1 s) or B
    /// (46 requests).
    #[arg(long, value_name = "A|B", value_parser = scenario_arg)]
    scenario: Option<Scenario>,
    /// Arrival times in seconds, one per line (decimals allowed, at most 3),
    /// optionally followed by a client key; `#` starts a comment.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// The limit, as a zone's `rate`: 10r/10s, 2r/s, 100r/5m, 5r/h.
    #[arg(long, default_value = "10r/10s", value_parser = rate_arg)]
    rate: (u64, u64),
    /// limit_req's burst for the buckets and the queue (windows take none):
    /// an empty bucket admits burst + 1 at once.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u64).range(0..=simulate::MAX_BURST))]
    burst: u64,
    /// Only this algorithm (repeatable; default: all): fixed_window,
    /// sliding_log, sliding_window, token_bucket, leaky_queue, gcra,
    /// leaky_bucket.
    #[arg(long = "algorithm", value_name = "NAME", value_parser = row_arg)]
    algorithms: Vec<Row>,
    /// `table` (aligned, for people) or `json`.
    #[arg(long, value_enum, default_value = "table")]
    format: SimFormat,
    /// Also draw admitted and rejected requests over time, one lane per
    /// algorithm, as SVG.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SimFormat {
    Table,
    Json,
}

fn scenario_arg(s: &str) -> Result<Scenario, String> {
    Scenario::from_name(s).ok_or_else(|| format!("unknown scenario \"{s}\" (expected A or B)"))
}

fn rate_arg(s: &str) -> Result<(u64, u64), String> {
    sluice::limiter::algorithm::parse_rate(s)
}

fn row_arg(s: &str) -> Result<Row, String> {
    Row::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Row::ALL.iter().map(|r| r.name()).collect();
        format!(
            "unknown algorithm \"{s}\" (expected one of: {})",
            names.join(", ")
        )
    })
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
        Some(Command::Simulate(args)) => simulate(args),
        Some(Command::ImportNginx(args)) => import_nginx(args),
        Some(Command::Top(args)) => top(args),
        Some(Command::Man { command }) => man(command.as_deref()),
        Some(Command::Completions { shell }) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "sluice", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        None => match cli.config {
            Some(config) => run(config),
            None => {
                say!("sluice: missing --config FILE (try `sluice --help`)");
                ExitCode::from(2)
            }
        },
    }
}

fn load(path: &std::path::Path) -> Result<config::Spec, ExitCode> {
    config::load(path).map_err(|e| {
        match e {
            LoadError::Invalid(errors) => {
                say!("{errors}");
                let n = errors.0.len();
                say!(
                    "sluice: {} has {n} error{}",
                    path.display(),
                    if n == 1 { "" } else { "s" }
                );
            }
            e => say!("sluice: {e}"),
        }
        ExitCode::from(1)
    })
}

fn check(path: &std::path::Path) -> ExitCode {
    match load(path) {
        Ok(spec) => {
            tell_raw!(
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
    // From here on the process's lines go where `error_log` says.
    sluice::errlog::set_main(runtime.error_log.clone());
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

/// `sluice top`: exit 1 when the admin listener cannot be found or read.
fn top(args: TopArgs) -> ExitCode {
    let admin = match (args.admin, &args.config) {
        (Some(a), _) => Ok(a),
        (None, Some(c)) => sluice::top::admin_of(c),
        (None, None) => Ok(std::net::SocketAddr::from(([127, 0, 0, 1], 9090))),
    };
    let run = admin.and_then(|admin| {
        let opts = sluice::top::Options {
            admin,
            interval: args.interval,
            once: args.once,
        };
        sluice::top::run(&opts, &mut std::io::stdout().lock())
    });
    match run {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("sluice top: {e}");
            ExitCode::from(1)
        }
    }
}

/// The manual page: the command's own help with its subcommands, as roff
/// (clap_mangen), so that it cannot disagree with `--help`.
fn man(command: Option<&str>) -> ExitCode {
    let cmd = <Cli as clap::CommandFactory>::command();
    let page = match command {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            // Named as the main page's SUBCOMMANDS section names it.
            Some(sub) => sub
                .clone()
                .name(format!("sluice-{name}"))
                .version(env!("CARGO_PKG_VERSION")),
            None => {
                say!("sluice: no command \"{name}\" (see `sluice --help`)");
                return ExitCode::from(2);
            }
        },
    };
    let mut out = Vec::new();
    let written = clap_mangen::Man::new(page)
        .render(&mut out)
        .and_then(|()| std::io::Write::write_all(&mut std::io::stdout(), &out));
    if let Err(e) = written {
        say!("sluice: writing the manual page: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
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
            say!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}

/// `sluice simulate`: exit 1 for an unreadable or bad trace (each problem
/// as `FILE:LINE: message`) or an unwritable plot, 2 for arguments that do
/// not fit together.
fn simulate(args: SimulateArgs) -> ExitCode {
    let name = args.trace.as_ref().map(|p| p.display().to_string());
    let (trace, source) = match (args.scenario, &name) {
        (Some(s), _) => (s.trace(), Source::Scenario(s)),
        (None, Some(file)) => match read_trace(file) {
            Ok(t) => (t, Source::File(file)),
            Err(code) => return code,
        },
        (None, None) => unreachable!("clap requires --scenario or --trace"),
    };
    let (count, period_ms) = args.rate;
    let setup = simulate::Setup {
        count,
        period_ms,
        burst: args.burst,
    };
    let all = args.algorithms.is_empty();
    let rows = if all {
        Row::ALL.to_vec()
    } else {
        args.algorithms
    };
    let report = match simulate::run(&trace, &setup, &rows) {
        // Asked for all, a rate nginx cannot run leaves its row out.
        Err(e @ simulate::SimError::TooSlowForLeakyBucket(_)) if all => {
            say!("sluice: leaving leaky_bucket out: {e}");
            let others: Vec<Row> = rows
                .into_iter()
                .filter(|&r| r != Row::LeakyBucket)
                .collect();
            simulate::run(&trace, &setup, &others)
        }
        r => r,
    };
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            say!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(path) = &args.plot {
        if let Err(e) = std::fs::write(path, simulate::svg(&report, &trace, source)) {
            say!("sluice: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    match args.format {
        SimFormat::Table => tell_raw!("{}", simulate::table(&report, &trace, source)),
        SimFormat::Json => tell_raw!("{}", simulate::json(&report, source)),
    }
    ExitCode::SUCCESS
}

/// `sluice import-nginx`: the reports on stderr, the TOML to stdout or
/// `-o`; exit 1 when the file cannot be read or translated.
fn import_nginx(args: ImportArgs) -> ExitCode {
    let out_dir = args.output.as_ref().map(|o| {
        o.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or(PathBuf::from("."), PathBuf::from)
    });
    let opts = sluice::import::Options {
        backend: args.backend,
        prefix: args.prefix,
        out_dir,
    };
    let t = match sluice::import::import(&args.file, &opts) {
        Ok(t) => t,
        Err(e) => {
            say!("sluice: {e}");
            return ExitCode::from(1);
        }
    };
    for n in &t.notices {
        say!("{n}");
    }
    for r in &t.reports {
        say!("{}", r.line());
    }
    match &args.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &t.toml) {
                say!("sluice: cannot write {}: {e}", path.display());
                return ExitCode::from(1);
            }
        }
        None => tell_raw!("{}", t.toml),
    }
    ExitCode::SUCCESS
}

fn read_trace(file: &str) -> Result<simulate::Trace, ExitCode> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        say!("sluice: cannot read {file}: {e}");
        ExitCode::from(1)
    })?;
    simulate::parse_trace(&text).map_err(|e| {
        match e.line {
            0 => say!("{file}: {}", e.message),
            line => say!("{file}:{line}: {}", e.message),
        }
        ExitCode::from(1)
    })
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
