//! The one process spawner: sluice, nginx and redis-server all start here.
//!
//! A [`Process`] is stopped on Drop (SIGTERM and a grace period where the program needs it, as
//! nginx's master does to take its worker down; SIGKILL otherwise), and also when the test binary
//! dies from outside (a CI timeout, Ctrl-C): every child is forked by one keeper thread that lives
//! as long as the test binary, and asks the kernel for a parent-death signal (`PR_SET_PDEATHSIG`
//! fires when the forking *thread* ends, so forking from a test's own thread would kill a child
//! that outlives it). stdout and stderr go to files next to the process, read on failure.
//!
//! [`Process::start`] waits until the child accepts connections on every one of its ports, or
//! exits; an exit with "Address already in use" in its output is [`StartError::AddrInUse`], which
//! [`with_ports`] answers by retrying on new ports.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::ports::Port;
use super::wait::within;

/// How long a child may take to listen on its ports.
const START_LIMIT: Duration = Duration::from_secs(20);

/// How a child is stopped on Drop.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// SIGTERM, up to this long for the process to exit, then SIGKILL. For nginx: its master
    /// answers SIGTERM by stopping its worker, SIGKILL would orphan the worker.
    TermThenKill(Duration),
    /// SIGKILL at once.
    Kill,
}

/// Why a child did not come up.
#[derive(Debug)]
pub enum StartError {
    /// It exited because one of its ports was taken: worth another try on other ports.
    AddrInUse(String),
    /// Anything else, with the child's output: a test failure.
    Failed(String),
}

/// A running child process, stopped on Drop.
pub struct Process {
    name: String,
    child: Child,
    stop: Stop,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Process {
    /// Starts `cmd` with stdout and stderr going to `dir/{name}.stdout` and `dir/{name}.stderr`,
    /// and waits until every port in `ports` on 127.0.0.1 accepts a connection. `logs` are more
    /// files the child writes its errors to (nginx's error log), looked at when it fails.
    pub fn start(
        name: &str,
        mut cmd: Command,
        dir: &Path,
        ports: &[u16],
        stop: Stop,
        logs: &[PathBuf],
    ) -> Result<Process, StartError> {
        let stdout = dir.join(format!("{name}.stdout"));
        let stderr = dir.join(format!("{name}.stderr"));
        let open =
            |p: &Path| File::create(p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        cmd.stdin(Stdio::null())
            .stdout(open(&stdout))
            .stderr(open(&stderr));
        let death_signal = match stop {
            Stop::TermThenKill(_) => libc::SIGTERM,
            Stop::Kill => libc::SIGKILL,
        };
        let child =
            keeper_spawn(cmd, death_signal).unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let mut process = Process {
            name: name.to_owned(),
            child,
            stop,
            stdout,
            stderr,
        };
        match process.wait_for_ports(ports) {
            Ok(()) => Ok(process),
            Err(why) => {
                let _ = process.child.kill();
                let _ = process.child.wait();
                let mut output = format!(
                    "{why}\n--- stderr ---\n{}\n--- stdout ---\n{}",
                    read(&process.stderr),
                    read(&process.stdout)
                );
                for log in logs {
                    output.push_str(&format!("\n--- {} ---\n{}", log.display(), read(log)));
                }
                // Stopped above: nothing left for Drop to do.
                process.stop = Stop::Kill;
                if output.contains("Address already in use") {
                    Err(StartError::AddrInUse(output))
                } else {
                    Err(StartError::Failed(output))
                }
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file the child's stdout goes to.
    pub fn stdout_path(&self) -> &Path {
        &self.stdout
    }

    /// The file the child's stderr goes to.
    pub fn stderr_path(&self) -> &Path {
        &self.stderr
    }

    /// The exit status if the process has already exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits up to `limit` for the process to exit.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        within(limit, async || self.exited()).await
    }

    /// Sends `signal` (`libc::SIGHUP`, …). Panics if the process is gone.
    pub fn signal(&self, signal: i32) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits in pid_t");
        // SAFETY: kill(2) on our own child, which is not reaped before Drop.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(
            rc,
            0,
            "kill({pid}, {signal}) on {}: {}",
            self.name,
            std::io::Error::last_os_error()
        );
    }

    /// SIGKILL now, and reap: as in a crash.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Polls until every port accepts, or the process exits, or [`START_LIMIT`] passes. The
    /// probe connections send nothing, so a limiter never counts them.
    fn wait_for_ports(&mut self, ports: &[u16]) -> Result<(), String> {
        let start = Instant::now();
        let mut waiting = ports.to_vec();
        loop {
            waiting.retain(|&port| {
                let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
                TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
            });
            if let Some(status) = self.exited() {
                return Err(format!(
                    "{} exited ({status}) before listening on 127.0.0.1 port(s) {ports:?}",
                    self.name
                ));
            }
            if waiting.is_empty() {
                return Ok(());
            }
            if start.elapsed() > START_LIMIT {
                return Err(format!(
                    "{} (pid {}) is not listening on 127.0.0.1 port(s) {waiting:?} after \
                     {START_LIMIT:?}",
                    self.name,
                    self.pid()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        if let Stop::TermThenKill(grace) = self.stop {
            // SAFETY: as in `signal`; the result does not matter, SIGKILL follows.
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, libc::SIGCONT);
                libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
            }
            let start = Instant::now();
            while start.elapsed() < grace {
                if self.exited().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.kill();
    }
}

/// Starts a server on `n` fresh ports: `attempt` is called with them and starts it; when the
/// server found one of them taken ([`StartError::AddrInUse`]), it is called again with new ones.
/// The ports are returned with the server: their reservations must live as long as it does.
pub fn with_ports<T>(
    what: &str,
    n: usize,
    mut attempt: impl FnMut(&[Port]) -> Result<T, StartError>,
) -> (T, Vec<Port>) {
    const ATTEMPTS: usize = 5;
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        let ports: Vec<Port> = (0..n).map(|_| Port::reserve()).collect();
        match attempt(&ports) {
            Ok(server) => return (server, ports),
            Err(StartError::AddrInUse(output)) => last = output,
            Err(StartError::Failed(output)) => panic!("{what} did not start: {output}"),
        }
    }
    panic!("{what} found its ports taken {ATTEMPTS} times; the last time:\n{last}")
}

/// A request to the keeper thread: the command to spawn and where to send the result.
type Job = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from the keeper thread (see the module comment), with `death_signal` for when
/// the test binary dies.
fn keeper_spawn(mut cmd: Command, death_signal: i32) -> std::io::Result<Child> {
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("spawn-keeper".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the spawn keeper thread");
        Mutex::new(tx)
    });
    set_parent_death_signal(&mut cmd, death_signal);
    let (tx, rx) = mpsc::channel();
    keeper
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, tx))
        .expect("the spawn keeper thread is running");
    rx.recv().expect("the spawn keeper thread answers")
}

/// `prctl(PR_SET_PDEATHSIG)` in the forked child, before exec. If the parent is already gone
/// by then (the signal would never come), the child stops itself at once.
fn set_parent_death_signal(cmd: &mut Command, signal: i32) {
    // SAFETY: getpid() has no preconditions.
    let parent = unsafe { libc::getpid() };
    let sig = libc::c_ulong::try_from(signal).expect("signal numbers are positive");
    // SAFETY: prctl(2), getppid(2) and raise(3) are async-signal-safe and touch only the
    // forked child.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::raise(signal);
            }
            Ok(())
        });
    }
}

/// A file's content, or why it cannot be read (for failure reports).
pub fn read(p: &Path) -> String {
    std::fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| format!("(cannot read {}: {e})", p.display()))
}

/// A system program the tests run for real: `$ENV_VAR` if set (which must be an executable
/// file), else `name` on `PATH`, else the first of `usual` (`/usr/sbin` is often missing from a
/// non-root `PATH`). `None` when there is none: the caller panics with its own reason, since
/// tests that need nginx or HAProxy are never skipped.
pub fn system_binary(name: &str, env_var: &str, usual: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env_var) {
        let p = PathBuf::from(p);
        assert!(
            is_executable(&p),
            "{env_var}={} is not an executable file",
            p.display()
        );
        return Some(p);
    }
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .collect()
        })
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(usual.iter().map(PathBuf::from))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
