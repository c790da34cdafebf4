//! The sluice binary under test: [`Sluice`], built by [`SluiceBuilder`].
//!
//! Every process test starts sluice here: `Sluice::start(toml)` with a configuration whose
//! `[[servers]]` and `[admin]` tables have no `listen` (the harness adds them, see
//! [`super::config`]). The process runs in its own temporary directory, which is also its
//! working directory: relative paths in the configuration (`pid_file = "sluice.pid"`,
//! `access_log = "access.log"`) land there, next to `sluice.toml` and its stdout and stderr.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::Mutex;
use std::time::Duration;

use tempfile::TempDir;

use super::config::{TomlHoles, complete_toml, toml_holes};
use super::inproc::{Served, serve};
use super::ports::Port;
use super::spawn::{Process, StartError, Stop, read, with_ports};
use super::wait::within;

/// How long a reload or a log line may take to show in the error log.
const LOG_LIMIT: Duration = Duration::from_secs(10);

/// What [`Sluice::start`] needs beyond the configuration.
pub struct SluiceBuilder {
    toml: String,
    env: Vec<(String, String)>,
    relocate: Vec<String>,
    dirs: Vec<String>,
}

impl SluiceBuilder {
    /// A directory made in sluice's directory before it starts (`logs` for a configuration
    /// imported from nginx, whose `pid_file` and `access_log` are relative to nginx's prefix).
    pub fn dir(mut self, name: &str) -> SluiceBuilder {
        self.dirs.push(name.to_owned());
        self
    }

    /// An environment variable for the process (`SLUICE_WORKERS`, `RUST_LOG`).
    pub fn env(mut self, name: &str, value: &str) -> SluiceBuilder {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Moves `addr` (say `127.0.0.1:7060`), written literally in a configuration the test does
    /// not own (the shipped example), to a reserved port: every occurrence is replaced. The
    /// relocated addresses follow the completed servers in [`Sluice::addrs`].
    pub fn relocate(mut self, addr: &str) -> SluiceBuilder {
        self.relocate.push(addr.to_owned());
        self
    }

    /// Starts sluice on reserved ports and waits until it accepts on all of them; on a port
    /// found taken, again on others. Panics with sluice's output if it fails otherwise.
    pub fn start(self) -> Sluice {
        let holes = toml_holes(&self.toml);
        let n = self.addresses_needed(holes);
        let ((process, dir, text), mut ports) = with_ports("sluice", n, |ports| {
            let text = self.complete(holes, &addrs(ports));
            self.spawn(&text, ports).map(|(p, d)| (p, d, text))
        });
        let relocated = ports.split_off(holes.servers + usize::from(holes.admin));
        let admin = holes.admin.then(|| ports.pop()).flatten();
        Sluice {
            process,
            dir,
            servers: Mutex::new(ports),
            admin,
            relocated,
            text: Mutex::new(text),
        }
    }

    /// Serves the configuration in this process instead (see [`super::inproc`]): for the tests
    /// that read no error-log line and send no signal. Listeners bind port 0, unless there are
    /// several servers (sluice refuses two equal `listen` addresses) or relocated addresses,
    /// which get reserved ports. Panics if the configuration is refused.
    pub fn in_process(self) -> InProcess {
        assert!(
            self.env.is_empty(),
            "an in-process sluice shares the test binary's environment: start a process"
        );
        let holes = toml_holes(&self.toml);
        let n = self.addresses_needed(holes);
        if holes.servers <= 1 && self.relocate.is_empty() {
            let zero = SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
            let text = self.complete(holes, &vec![zero; n]);
            let served = serve("sluice.toml", &text).unwrap_or_else(|e| match e {
                StartError::AddrInUse(why) | StartError::Failed(why) => {
                    panic!("the in-process sluice did not start: {why}")
                }
            });
            return InProcess {
                served,
                _ports: Vec::new(),
            };
        }
        let (served, ports) = with_ports("the in-process sluice", n, |ports| {
            serve("sluice.toml", &self.complete(holes, &addrs(ports)))
        });
        InProcess {
            served,
            _ports: ports,
        }
    }

    /// How many addresses the configuration needs: its servers and admin without `listen`,
    /// and the relocated ones.
    fn addresses_needed(&self, holes: TomlHoles) -> usize {
        let n = holes.servers + usize::from(holes.admin) + self.relocate.len();
        assert!(
            n > 0,
            "a sluice configuration with no server: {}",
            self.toml
        );
        n
    }

    /// The configuration with `addrs` in it: the servers without `listen` first, then the
    /// admin listener, then the relocated addresses.
    fn complete(&self, holes: TomlHoles, addrs: &[SocketAddr]) -> String {
        let (servers, rest) = addrs.split_at(holes.servers);
        let (admin, relocated) = rest.split_at(usize::from(holes.admin));
        let mut text = complete_toml(&self.toml, servers, admin.first().copied());
        for (from, to) in self.relocate.iter().zip(relocated) {
            text = text.replace(from.as_str(), &to.to_string());
        }
        text
    }

    /// One attempt: a new directory, the configuration, the process.
    fn spawn(&self, text: &str, ports: &[Port]) -> Result<(Process, TempDir), StartError> {
        let dir = tempfile::Builder::new()
            .prefix("sluice-it-")
            .tempdir()
            .expect("temporary directory for sluice");
        for sub in &self.dirs {
            fs::create_dir_all(dir.path().join(sub)).expect("a directory for sluice");
        }
        let config = dir.path().join("sluice.toml");
        fs::write(&config, text).expect("write sluice.toml");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.arg("--config").arg(&config).current_dir(dir.path());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let numbers: Vec<u16> = ports.iter().map(Port::number).collect();
        let process = Process::start("sluice", cmd, dir.path(), &numbers, Stop::Kill, &[])
            .map_err(|e| with_config(e, text))?;
        Ok((process, dir))
    }
}

/// A failure report with the configuration it was about.
fn with_config(e: StartError, text: &str) -> StartError {
    let add = |out: String| format!("{out}\n--- sluice.toml ---\n{text}");
    match e {
        StartError::AddrInUse(out) => StartError::AddrInUse(add(out)),
        StartError::Failed(out) => StartError::Failed(add(out)),
    }
}

fn addrs(ports: &[Port]) -> Vec<SocketAddr> {
    ports.iter().map(Port::addr).collect()
}

/// A running `sluice --config DIR/sluice.toml`, killed on Drop (and if the test binary dies).
pub struct Sluice {
    // Field order is drop order: stop the process before deleting its directory.
    process: Process,
    dir: TempDir,
    /// The ports of the `[[servers]]` the harness completed, in order; grows when a reload
    /// adds servers.
    servers: Mutex<Vec<Port>>,
    admin: Option<Port>,
    relocated: Vec<Port>,
    /// The configuration as last written.
    text: Mutex<String>,
}

impl Sluice {
    /// Starts sluice with `toml` (see [`SluiceBuilder::start`]).
    pub fn start(toml: &str) -> Sluice {
        Sluice::builder(toml).start()
    }

    /// Serves `toml` in this process (see [`SluiceBuilder::in_process`]).
    pub fn in_process(toml: &str) -> InProcess {
        Sluice::builder(toml).in_process()
    }

    /// A start with more to say than the configuration.
    pub fn builder(toml: &str) -> SluiceBuilder {
        SluiceBuilder {
            toml: toml.to_owned(),
            env: Vec::new(),
            relocate: Vec::new(),
            dirs: Vec::new(),
        }
    }

    /// The first server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr_of(0)
    }

    /// Server `i`'s address: the completed `[[servers]]` in order, then the relocated ones.
    pub fn addr_of(&self, i: usize) -> SocketAddr {
        let all = self.addrs();
        *all.get(i)
            .unwrap_or_else(|| panic!("sluice has {} servers, not {}", all.len(), i + 1))
    }

    /// Every server's address, as [`Sluice::addr_of`] numbers them.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        let servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        servers
            .iter()
            .chain(&self.relocated)
            .map(Port::addr)
            .collect()
    }

    /// The `[admin]` listener's address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
            .as_ref()
            .map(Port::addr)
            .expect("the configuration has an [admin] table")
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The process's directory (and working directory).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("sluice.toml")
    }

    /// The configuration file as last written, listen addresses included.
    pub fn config_text(&self) -> String {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    // --- the error log (stderr) ---

    /// Everything sluice wrote to stderr (its error log) so far. A worker batches the lines of
    /// a busy moment, which may trail their responses by microseconds: this reads after a short
    /// settle ([`super::LOG_SETTLE`]).
    pub fn log(&self) -> String {
        std::thread::sleep(super::LOG_SETTLE);
        read(self.process.stderr_path())
    }

    /// The file sluice's stderr goes to, for tests that follow it as it grows.
    pub fn log_path(&self) -> PathBuf {
        self.process.stderr_path().to_owned()
    }

    /// Where the error log ends now: [`Sluice::wait_log_after`] looks past it.
    pub fn log_mark(&self) -> usize {
        self.log().len()
    }

    /// Waits until the error log after `mark` has a line for which `line` holds; returns that
    /// part of the log. Panics, with the log, after 10 s.
    pub async fn wait_log_after(&self, mark: usize, line: impl Fn(&str) -> bool) -> String {
        let found = within(LOG_LIMIT, async || {
            let log = read(self.process.stderr_path());
            let new = log.get(mark..).unwrap_or_default();
            new.lines().any(&line).then(|| new.to_owned())
        })
        .await;
        // The line is there; so are the others of its batch after the settle.
        match found {
            Some(_) => self.log().get(mark..).unwrap_or_default().to_owned(),
            None => panic!("expected log line not written; log:\n{}", self.log()),
        }
    }

    /// Waits until the error log has a line for which `line` holds; returns the whole log.
    pub async fn wait_log(&self, line: impl Fn(&str) -> bool) -> String {
        self.wait_log_after(0, line).await
    }

    // --- the access log ---

    /// What sluice wrote to stdout (`access_log = "stdout"`), after the settle.
    pub fn stdout(&self) -> String {
        std::thread::sleep(super::LOG_SETTLE);
        read(self.process.stdout_path())
    }

    /// The file `name` in sluice's directory (`access_log = "access.log"`), empty if missing.
    pub fn file(&self, name: &str) -> String {
        fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    /// Waits (5 s at most) until the file `name` in sluice's directory has `n` lines; its text.
    pub async fn wait_lines(&self, name: &str, n: usize) -> String {
        let path = self.dir.path().join(name);
        let found = within(Duration::from_secs(5), async || {
            let text = fs::read_to_string(&path).unwrap_or_default();
            (text.lines().count() >= n).then_some(text)
        })
        .await;
        found.unwrap_or_else(|| panic!("{} has fewer than {n} lines", path.display()))
    }

    // --- reload, signals, exit ---

    /// Replaces the configuration file (not signalled), as editors do: written aside, renamed
    /// over. Servers without `listen` keep this process's ports, in order; more servers than
    /// before get new reserved ports.
    pub fn rewrite(&self, toml: &str) {
        let holes = toml_holes(toml);
        let mut servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        while servers.len() < holes.servers {
            servers.push(Port::reserve());
        }
        let text = complete_toml(toml, &addrs(&servers), self.admin.as_ref().map(Port::addr));
        let tmp = self.dir.path().join("sluice.toml.new");
        fs::write(&tmp, &text).expect("write sluice.toml.new");
        fs::rename(&tmp, self.config_path()).expect("rename over sluice.toml");
        *self.text.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }

    /// Rewrites the configuration, sends SIGHUP, waits for the reload's outcome
    /// (`reconfigured` or `reload failed`) and returns the log lines it added.
    pub async fn reload(&self, toml: &str) -> String {
        self.rewrite(toml);
        let mark = self.log_mark();
        self.signal(libc::SIGHUP);
        self.wait_reload(mark).await
    }

    /// [`Sluice::reload`] through `sluice reload --pid-file PID_FILE` instead of a signal of
    /// the test's own. Panics if the command fails.
    pub async fn reload_by_command(&self, toml: &str, pid_file: &Path) -> String {
        self.rewrite(toml);
        let mark = self.log_mark();
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["reload", "--pid-file"])
            .arg(pid_file)
            .output()
            .expect("run sluice reload");
        assert!(out.status.success(), "sluice reload: {out:?}");
        self.wait_reload(mark).await
    }

    /// The log after `mark` once it says how a reload went.
    async fn wait_reload(&self, mark: usize) -> String {
        self.wait_log_after(mark, |l| {
            l.contains("reconfigured:") || l.contains("reload failed")
        })
        .await
    }

    /// Sends `signal` (`libc::SIGTERM`, …).
    pub fn signal(&self, signal: i32) {
        self.process.signal(signal);
    }

    /// Waits up to `limit` for the process to exit.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        self.process.wait_exit(limit).await
    }

    /// Still running (no panic, no exit).
    pub fn alive(&mut self) -> bool {
        self.process.exited().is_none()
    }
}

/// A sluice serving in the test process ([`SluiceBuilder::in_process`]): the addresses of a
/// [`Sluice`], none of its process.
pub struct InProcess {
    served: Served,
    /// Reserved ports the listeners are on (none when they bound port 0).
    _ports: Vec<Port>,
}

impl InProcess {
    /// The first server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr_of(0)
    }

    /// Server `i`'s address, numbered as [`Sluice::addr_of`] numbers them.
    pub fn addr_of(&self, i: usize) -> SocketAddr {
        self.served.addrs[i]
    }

    /// The `[admin]` listener's address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.served
            .admin
            .expect("the configuration has an [admin] table")
    }
}
