//! Child processes that stop by themselves.
//!
//! A [`Child`] owns a spawned server. Dropping it stops the process (SIGTERM and a short grace
//! period for nginx, whose master must take its worker down with it; SIGKILL otherwise). On Linux
//! the child also gets a parent-death signal, so a test binary killed from outside (a CI timeout,
//! Ctrl-C) does not leave servers behind holding ports.

use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use tokio::time::Instant;

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

unsafe extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

/// How a child is stopped on Drop.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// SIGTERM, wait up to the given time for the process to exit, then SIGKILL. For nginx: its
    /// master answers SIGTERM by stopping its worker, SIGKILL would orphan the worker.
    TermThenKill(Duration),
    /// SIGKILL at once.
    Kill,
}

/// A spawned server process, stopped on Drop.
pub struct Child {
    name: String,
    child: std::process::Child,
    stop: Stop,
}

impl Child {
    /// Spawns `cmd`. `name` is used in panic messages. The child receives `death_signal` if the
    /// thread that spawned it (the test's thread) goes away without dropping it.
    pub fn spawn(name: &str, mut cmd: Command, stop: Stop) -> Child {
        let death_signal = match stop {
            Stop::TermThenKill(_) => SIGTERM,
            Stop::Kill => SIGKILL,
        };
        set_parent_death_signal(&mut cmd, death_signal);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
        Child {
            name: name.to_owned(),
            child,
            stop,
        }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has already exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until every port on 127.0.0.1 accepts a TCP connection. Err (with the reason) if
    /// the process exits first or `limit` passes. The probe connections send nothing, so they
    /// are never counted by a limiter.
    pub fn wait_for_ports(&mut self, ports: &[u16], limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        let mut waiting: Vec<u16> = ports.to_vec();
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
            if start.elapsed() > limit {
                return Err(format!(
                    "{} (pid {}) is not listening on 127.0.0.1 port(s) {waiting:?} after {limit:?}",
                    self.name,
                    self.id()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: i32) {
        let pid = i32::try_from(self.child.id()).expect("pid fits in i32");
        // SAFETY: kill(2) with the pid of our own, not yet reaped, child.
        unsafe {
            kill(pid, sig);
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        if let Stop::TermThenKill(grace) = self.stop {
            self.signal(SIGTERM);
            let start = Instant::now();
            while start.elapsed() < grace {
                if self.exited().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(target_os = "linux")]
fn set_parent_death_signal(cmd: &mut Command, sig: i32) {
    use std::os::unix::process::CommandExt;

    const PR_SET_PDEATHSIG: i32 = 1;
    unsafe extern "C" {
        fn prctl(option: i32, ...) -> i32;
    }
    let sig = libc_ulong(sig);
    // SAFETY: prctl(2) is async-signal-safe and touches only the calling (forked) process.
    unsafe {
        cmd.pre_exec(move || {
            prctl(PR_SET_PDEATHSIG, sig);
            Ok(())
        });
    }
}

#[cfg(target_os = "linux")]
fn libc_ulong(sig: i32) -> std::ffi::c_ulong {
    std::ffi::c_ulong::try_from(sig).expect("signal numbers are positive")
}

#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_cmd: &mut Command, _sig: i32) {}
