//! Real HAProxy in TCP mode, in front of a server that speaks the PROXY protocol: each
//! connection a client opens to [`Haproxy::addr`] is passed on to the target with a PROXY header
//! (v1 text, `send-proxy`, or v2 binary, `send-proxy-v2`) naming the client's address and port
//! and HAProxy's own frontend address and port. Bytes are relayed untouched, so TLS and HTTP/2
//! go through to the target, which terminates them.
//!
//! HAProxy connects to the target only once the client has sent its first bytes (`tcp-request
//! content accept if { req.len gt 0 }` after an inspect delay): the harness's readiness probe,
//! which connects and sends nothing, never reaches the target, so it leaves no line in its logs.
//! HAProxy's own connection to the target comes from 127.0.0.1.

use std::env;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

use super::ports::Port;
use super::spawn::{Process, StartError, Stop, with_ports};

/// The PROXY protocol version HAProxy sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyVersion {
    /// `send-proxy`: `PROXY TCP4 SRC DST SPORT DPORT\r\n`.
    V1,
    /// `send-proxy-v2`: the binary header.
    V2,
}

/// A running `haproxy -db` in its own temporary directory, stopped on Drop.
pub struct Haproxy {
    // Field order is drop order: stop the process before deleting its directory.
    process: Process,
    dir: TempDir,
    port: Port,
    target: SocketAddr,
}

impl Haproxy {
    /// HAProxy on a reserved port of 127.0.0.1, passing every connection on to `target` with a
    /// PROXY header of `version`. Waits until it accepts. Panics if HAProxy is missing or does
    /// not start.
    pub fn start(target: SocketAddr, version: ProxyVersion) -> Haproxy {
        let bin = haproxy_binary();
        let ((process, dir), mut ports) = with_ports("haproxy", 1, |ports| {
            spawn(&bin, ports[0].addr(), target, version)
        });
        Haproxy {
            process,
            dir,
            port: ports.pop().expect("one port"),
            target,
        }
    }

    /// Where clients connect: `127.0.0.1:PORT`, also the PROXY header's destination.
    pub fn addr(&self) -> SocketAddr {
        self.port.addr()
    }

    /// The server HAProxy passes connections on to.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// The configuration file HAProxy runs on.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("haproxy.cfg")
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// The configuration: one TCP frontend on `listen`, one server, `target`.
fn config(listen: SocketAddr, target: SocketAddr, version: ProxyVersion) -> String {
    let send = match version {
        ProxyVersion::V1 => "send-proxy",
        ProxyVersion::V2 => "send-proxy-v2",
    };
    format!(
        "global
  maxconn 256

defaults
  mode tcp
  timeout connect 5s
  timeout client 30s
  timeout server 30s

frontend clients
  bind {listen}
  tcp-request inspect-delay 10s
  tcp-request content accept if {{ req.len gt 0 }}
  default_backend target

backend target
  server s {target} {send}
"
    )
}

/// One attempt: a new directory, its configuration, the process.
fn spawn(
    bin: &Path,
    listen: SocketAddr,
    target: SocketAddr,
    version: ProxyVersion,
) -> Result<(Process, TempDir), StartError> {
    let dir = tempfile::Builder::new()
        .prefix("sluice-it-haproxy-")
        .tempdir()
        .expect("temporary directory for haproxy");
    let cfg = dir.path().join("haproxy.cfg");
    let text = config(listen, target, version);
    std::fs::write(&cfg, &text).expect("write haproxy.cfg");
    let mut cmd = Command::new(bin);
    cmd.arg("-db").arg("-f").arg(&cfg).current_dir(dir.path());
    let stop = Stop::TermThenKill(Duration::from_secs(2));
    match Process::start("haproxy", cmd, dir.path(), &[listen.port()], stop, &[]) {
        Ok(process) => Ok((process, dir)),
        Err(StartError::AddrInUse(out)) => Err(StartError::AddrInUse(out)),
        Err(StartError::Failed(out)) => Err(StartError::Failed(format!(
            "{out}\n--- haproxy.cfg ---\n{text}"
        ))),
    }
}

/// The haproxy binary: `$SLUICE_TEST_HAPROXY`, else `haproxy` on `PATH`, else `/usr/sbin` and
/// `/usr/local/sbin`. Panics if there is none: the PROXY protocol tests need a real one.
pub fn haproxy_binary() -> PathBuf {
    let usual = ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"];
    super::spawn::system_binary("haproxy", "SLUICE_TEST_HAPROXY", &usual).unwrap_or_else(|| {
        panic!(
            "haproxy is not installed, and the PROXY protocol tests put a real HAProxy in \
             front of nginx and sluice: `apt-get install haproxy`, or set \
             SLUICE_TEST_HAPROXY=/path/to/haproxy"
        )
    })
}
