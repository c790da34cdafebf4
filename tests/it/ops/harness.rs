//! A small harness for the operating tests: the sluice binary in a temporary
//! directory (so its config can be rewritten and signalled), a raw HTTP/1.1
//! client, free ports.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Ports come from the shared harness, so no two tests of this binary get the same one.
pub use crate::support::legacy::free_port;

pub fn addr(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// `sluice --config DIR/sluice.toml`, stderr captured, killed on drop.
pub struct Sluice {
    child: Child,
    dir: tempfile::TempDir,
}

impl Sluice {
    /// Start with `toml` (`{dir}` in it is replaced by the temporary
    /// directory) and wait until `port` accepts connections.
    pub fn start(toml: &str, port: u16) -> Sluice {
        let dir = tempfile::Builder::new()
            .prefix("sluice-ops-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("sluice.toml"), fill(toml, dir.path())).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("--config")
            .arg(dir.path().join("sluice.toml"))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("stdout.log")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let s = Sluice { child, dir };
        s.wait_listening(port);
        s
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("sluice.toml")
    }

    /// Replace the configuration file (not yet signalled).
    pub fn rewrite(&self, toml: &str) {
        let tmp = self.dir.path().join("sluice.toml.new");
        std::fs::write(&tmp, fill(toml, self.dir.path())).unwrap();
        std::fs::rename(&tmp, self.config_path()).unwrap();
    }

    /// Everything written to stderr (the error log) so far.
    pub fn log(&self) -> String {
        std::thread::sleep(crate::support::LOG_SETTLE);
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    pub fn kill(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} failed");
    }

    /// Rewrite the configuration, send SIGHUP, wait for the reload's outcome
    /// (`reconfigured` or `reload failed`) and return the log lines it added.
    pub async fn reload(&self, toml: &str) -> String {
        self.rewrite(toml);
        self.signal_and_wait("HUP").await
    }

    /// Send `signal` and wait for the next reload outcome in the log.
    pub async fn signal_and_wait(&self, signal: &str) -> String {
        let before = self.log().len();
        self.kill(signal);
        self.wait_log_after(before, |l| {
            l.contains("reconfigured:") || l.contains("reload failed")
        })
        .await
    }

    /// Wait (10 s at most) until the log written after byte `from` has a line
    /// matching `pred`; returns that part of the log.
    pub async fn wait_log_after(&self, from: usize, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let log = self.log();
            let new = log.get(from..).unwrap_or("").to_string();
            if new.lines().any(&pred) {
                return new;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "expected log line not written; log:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait up to `limit` for the process to exit.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    fn wait_listening(&self, port: u16) {
        let start = Instant::now();
        while std::net::TcpStream::connect(addr(port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "sluice did not listen on {port}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fill(toml: &str, dir: &Path) -> String {
    toml.replace("{dir}", &dir.display().to_string())
}

/// A response, or how the connection ended without one.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Send `raw` (a whole request) on a new connection and read the response
/// until the server closes; `None` if no status line came back.
pub async fn exchange(to: SocketAddr, raw: &[u8]) -> Option<Reply> {
    let mut s = TcpStream::connect(to).await.ok()?;
    s.write_all(raw).await.ok()?;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    parse(&buf)
}

pub fn parse(buf: &[u8]) -> Option<Reply> {
    let text = String::from_utf8_lossy(buf);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some(Reply {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}

/// `GET path` with `Connection: close`.
pub async fn get(to: SocketAddr, path: &str) -> Option<Reply> {
    exchange(
        to,
        format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
}

/// The status of `GET path`, 0 when there was no response.
pub async fn status(to: SocketAddr, path: &str) -> u16 {
    get(to, path).await.map_or(0, |r| r.status)
}
