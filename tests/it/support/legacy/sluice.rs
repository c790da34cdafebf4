//! The sluice binary under test.

use std::fs::{self, File};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use super::process::{Child, Stop};

/// A running `sluice --config FILE`, with stderr (where sluice writes its nginx-format error-log
/// lines) and stdout captured to files. Killed on Drop.
pub struct Sluice {
    // Field order is drop order: stop the process before deleting its directory.
    child: Child,
    dir: TempDir,
    ports: Vec<u16>,
    config: PathBuf,
}

impl Sluice {
    /// Writes `toml` to a temporary `sluice.toml`, starts the binary built by cargo for this test
    /// run, and waits until every port in `ports` accepts connections. Panics with the
    /// configuration and sluice's stderr if it exits or does not listen.
    pub fn start(toml: &str, ports: &[u16]) -> Sluice {
        Sluice::start_with_env(toml, ports, &[])
    }

    /// [`Sluice::start`] with extra environment variables (`SLUICE_WORKERS`).
    pub fn start_with_env(toml: &str, ports: &[u16], env: &[(&str, &str)]) -> Sluice {
        assert!(
            !ports.is_empty(),
            "Sluice::start needs the listen ports to wait for"
        );
        let dir = tempfile::Builder::new()
            .prefix("sluice-it-")
            .tempdir()
            .expect("temporary directory for sluice");
        let config = dir.path().join("sluice.toml");
        fs::write(&config, toml).expect("write sluice.toml");
        let out = File::create(dir.path().join("stdout.log")).expect("create stdout.log");
        let err = File::create(dir.path().join("stderr.log")).expect("create stderr.log");

        let bin = env!("CARGO_BIN_EXE_sluice");
        let mut cmd = Command::new(bin);
        cmd.arg("--config")
            .arg(&config)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = Child::spawn("sluice", cmd, Stop::Kill);
        if let Err(why) = child.wait_for_ports(ports, Duration::from_secs(20)) {
            drop(child);
            panic!(
                "sluice ({bin}) did not start: {why}\n--- sluice.toml ---\n{toml}\n--- stderr \
                 ---\n{}\n--- stdout ---\n{}",
                read(&dir.path().join("stderr.log")),
                read(&dir.path().join("stdout.log")),
            );
        }
        Sluice {
            child,
            dir,
            ports: ports.to_vec(),
            config,
        }
    }

    /// `127.0.0.1:` the first port given to [`Sluice::start`].
    pub fn addr(&self) -> SocketAddr {
        self.addr_of(self.ports[0])
    }

    /// `127.0.0.1:port`.
    pub fn addr_of(&self, port: u16) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, port))
    }

    /// Everything sluice wrote to stderr so far (its error log). A worker
    /// batches the lines of a busy moment, which may trail their responses
    /// by microseconds: this reads after a short settle.
    pub fn log(&self) -> String {
        std::thread::sleep(crate::support::LOG_SETTLE);
        read(&self.dir.path().join("stderr.log"))
    }

    /// Everything sluice wrote to stdout so far.
    /// What sluice wrote to stdout (access logs), after lines batched by a
    /// worker have had time to be written (see `LOG_SETTLE`).
    pub fn stdout(&self) -> String {
        std::thread::sleep(crate::support::LOG_SETTLE);
        read(&self.dir.path().join("stdout.log"))
    }

    /// The file sluice's stderr (its error log) goes to, for tests that follow it as it grows.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("stderr.log")
    }

    pub fn config_path(&self) -> &Path {
        &self.config
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

fn read(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| format!("(cannot read {}: {e})", p.display()))
}
