//! A real `redis-server` of the test's own, through the harness's spawner, and the throw-away
//! certificates of the TLS test.

use std::path::PathBuf;
use std::process::Command;

use tempfile::TempDir;

use super::certs::{KeyKind, TestCa};
use super::ports::Port;
use super::spawn::{Process, StartError, Stop, with_ports};

/// A `redis-server` on a reserved port (and a TLS port when asked), without persistence, killed
/// on Drop.
pub struct RedisServer {
    // Field order is drop order: stop the process before deleting its directory.
    process: Option<Process>,
    dir: TempDir,
    port: Port,
    tls: Option<(Port, PathBuf)>,
    /// Extra `redis-server` arguments, kept for a restart.
    args: Vec<String>,
}

impl RedisServer {
    /// A server on a port of its own.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A server on a port of its own, with extra `args` (such as `--rename-command FCALL ""`).
    pub fn start_with(args: &[&str]) -> RedisServer {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let ((process, dir), mut ports) =
            with_ports("redis-server", 1, |ports| spawn(&ports[0], None, &args));
        RedisServer {
            process: Some(process),
            dir,
            port: ports.remove(0),
            tls: None,
            args,
        }
    }

    /// A server on `port`, one that sluice already points at (reserved by the test until now).
    pub fn start_on(port: Port) -> RedisServer {
        let (process, dir) = spawn_on_same_port(&port, None, &[]);
        RedisServer {
            process: Some(process),
            dir,
            port,
            tls: None,
            args: Vec::new(),
        }
    }

    /// A server that also listens with TLS on a second port, requiring client certificates
    /// signed by `certs`' CA (the plain port stays for the test's own checks).
    pub fn start_tls(certs: &TlsFiles) -> RedisServer {
        let certs = certs.dir().to_owned();
        let ((process, dir), mut ports) = with_ports("redis-server with TLS", 2, |ports| {
            spawn(&ports[0], Some((&ports[1], &certs)), &[])
        });
        let tls = ports.pop().expect("the TLS port");
        RedisServer {
            process: Some(process),
            dir,
            port: ports.remove(0),
            tls: Some((tls, certs)),
            args: Vec::new(),
        }
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port.number())
    }

    /// The TLS port of [`RedisServer::start_tls`].
    pub fn tls_port(&self) -> u16 {
        self.tls
            .as_ref()
            .map(|(p, _)| p.number())
            .expect("started with TLS")
    }

    /// Kills the server (SIGKILL): its data is gone, as in a crash.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
    }

    /// Starts it again on the same port(s).
    pub fn restart(&mut self) {
        self.kill();
        let tls = self.tls.as_ref().map(|(p, certs)| (p, certs.as_path()));
        let (process, dir) = spawn_on_same_port(&self.port, tls, &self.args);
        self.process = Some(process);
        self.dir = dir;
    }

    /// Freezes (`libc::SIGSTOP`) or resumes (`libc::SIGCONT`) the server: a Redis that is up
    /// but does not answer. Drop resumes a frozen server before stopping it.
    pub fn signal(&self, signal: i32) {
        self.process.as_ref().expect("running").signal(signal);
    }

    /// A connection of the test's own, for looking at the keys.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("a redis url")
            .get_connection()
            .expect("connect to the test redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(p) = self.process.as_ref() {
            p.signal(libc::SIGCONT);
        }
        self.kill();
    }
}

/// Starts on `port` (and the TLS port), retrying while a port of the previous process lingers:
/// the ports cannot change, sluice points at them.
fn spawn_on_same_port(
    port: &Port,
    tls: Option<(&Port, &std::path::Path)>,
    args: &[String],
) -> (Process, TempDir) {
    let mut last = String::new();
    for _ in 0..50 {
        match spawn(port, tls, args) {
            Ok(started) => return started,
            Err(StartError::AddrInUse(out)) => last = out,
            Err(StartError::Failed(out)) => panic!("redis-server did not start: {out}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("redis-server found its port taken, the last time:\n{last}")
}

/// One attempt: `redis-server` without persistence in a new directory, with `args` last.
fn spawn(
    port: &Port,
    tls: Option<(&Port, &std::path::Path)>,
    args: &[String],
) -> Result<(Process, TempDir), StartError> {
    let dir = tempfile::Builder::new()
        .prefix("sluice-it-redis-")
        .tempdir()
        .expect("temporary directory for redis-server");
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.number().to_string()])
        .args(["--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir.path())
        .current_dir(dir.path());
    let mut ports = vec![port.number()];
    if let Some((tls_port, certs)) = tls {
        let p = |f: &str| certs.join(f);
        cmd.args(["--tls-port", &tls_port.number().to_string()])
            .arg("--tls-cert-file")
            .arg(p("server.crt"))
            .arg("--tls-key-file")
            .arg(p("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(p("ca.crt"))
            .args(["--tls-auth-clients", "yes"]);
        ports.push(tls_port.number());
    }
    cmd.args(args);
    if which("redis-server").is_none() {
        panic!(
            "redis-server is not installed (the Redis tests start their own): \
             run scripts/test.sh, or apt-get install redis-server"
        );
    }
    let process = Process::start("redis-server", cmd, dir.path(), &ports, Stop::Kill, &[])?;
    Ok((process, dir))
}

/// `name` on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A throw-away CA (`ca.crt`), a server certificate for 127.0.0.1
/// (`server.crt`, `server.key`) and a client certificate (`client.crt`,
/// `client.key`), all in one directory: made by [`TestCa`].
pub struct TlsFiles {
    ca: TestCa,
}

impl TlsFiles {
    pub fn generate() -> TlsFiles {
        let ca = TestCa::new();
        ca.leaf("server", &["127.0.0.1"], KeyKind::EcdsaP256);
        ca.client("client", "client");
        TlsFiles { ca }
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &std::path::Path {
        self.ca.dir()
    }
}
