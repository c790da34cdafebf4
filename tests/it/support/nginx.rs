//! Real nginx, the oracle, in a temporary prefix.

use std::env;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

use super::config::{complete_nginx, nginx_holes};
use super::ports::Port;
use super::spawn::{Process, StartError, Stop, read, with_ports};

/// A running nginx (`daemon off`, one worker) in its own temporary prefix:
/// `conf/nginx.conf`, `html/ok.txt` (`"ok\n"`), `logs/{error,access}.log`, `temp/*`.
/// Stopped on Drop (SIGTERM to the master, which stops the worker), prefix deleted.
pub struct Nginx {
    // Field order is drop order: stop the process before deleting its prefix.
    process: Process,
    prefix: TempDir,
    ports: Vec<Port>,
    conf: String,
}

impl Nginx {
    /// Writes `conf/nginx.conf` around `http_block` (the inside of `http { }`: zones,
    /// `limit_req_status`, `server { }` blocks without `listen`, which the harness adds on
    /// reserved ports, see [`super::config`]), starts nginx through the harness's spawner, and
    /// waits until every server accepts connections (on a port found taken, again on others).
    /// Panics, with the configuration and the error log, if nginx is missing, rejects the
    /// configuration, or does not listen.
    pub fn start(http_block: &str) -> Nginx {
        let bin = nginx_binary();
        let n = nginx_holes(http_block);
        assert!(n > 0, "an nginx configuration with no server: {http_block}");
        let ((process, prefix, conf), ports) = with_ports("nginx", n, |ports| {
            let addrs: Vec<SocketAddr> = ports.iter().map(Port::addr).collect();
            let block = complete_nginx(http_block, &addrs);
            let numbers: Vec<u16> = ports.iter().map(Port::number).collect();
            spawn(&bin, &block, &numbers)
        });
        Nginx {
            process,
            prefix,
            ports,
            conf,
        }
    }

    /// The first server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr_of(0)
    }

    /// The address of the `i`-th `server { }` block without `listen`.
    pub fn addr_of(&self, i: usize) -> SocketAddr {
        self.ports[i].addr()
    }

    /// Every server's address, in order.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.ports.iter().map(Port::addr).collect()
    }

    /// The content of `logs/error.log` so far.
    pub fn error_log(&self) -> String {
        read(&self.prefix.path().join("logs/error.log"))
    }

    /// The content of `logs/access.log` so far.
    pub fn access_log(&self) -> String {
        read(&self.prefix.path().join("logs/access.log"))
    }

    /// The whole `conf/nginx.conf` that was written.
    pub fn conf(&self) -> &str {
        &self.conf
    }

    pub fn prefix(&self) -> &Path {
        self.prefix.path()
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// A new nginx prefix: its directories, and `html/ok.txt` (`ok\n`).
fn new_prefix() -> TempDir {
    let prefix = tempfile::Builder::new()
        .prefix("sluice-it-nginx-")
        .tempdir()
        .expect("temporary directory for the nginx prefix");
    let p = prefix.path();
    for dir in ["conf", "html", "logs", "temp"] {
        fs::create_dir_all(p.join(dir)).expect("nginx prefix directory");
    }
    fs::write(p.join("html/ok.txt"), "ok\n").expect("write html/ok.txt");
    prefix
}

/// One attempt: a new prefix, its configuration, the process.
fn spawn(
    bin: &Path,
    http_block: &str,
    ports: &[u16],
) -> Result<(Process, TempDir, String), StartError> {
    let prefix = new_prefix();
    let p = prefix.path();
    let d = p.display();
    let conf = format!(
        "user root;
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/logs/error.log info;
events {{ worker_connections 1024; }}
http {{
  access_log {d}/logs/access.log;
  client_body_temp_path {d}/temp/client_body;
  proxy_temp_path {d}/temp/proxy;
  fastcgi_temp_path {d}/temp/fastcgi;
  uwsgi_temp_path {d}/temp/uwsgi;
  scgi_temp_path {d}/temp/scgi;
{http_block}
}}
"
    );
    fs::write(p.join("conf/nginx.conf"), &conf).expect("write conf/nginx.conf");
    launch(bin, prefix, conf, ports)
}

/// The nginx binary: `$SLUICE_TEST_NGINX`, else `nginx` on `PATH`, else the usual install
/// locations (`/usr/sbin` is often missing from a non-root `PATH`). Panics if there is none:
/// the differential tests need real nginx and are never skipped.
pub fn nginx_binary() -> PathBuf {
    let usual = [
        "/usr/sbin/nginx",
        "/usr/local/sbin/nginx",
        "/usr/local/nginx/sbin/nginx",
    ];
    super::spawn::system_binary("nginx", "SLUICE_TEST_NGINX", &usual).unwrap_or_else(|| {
        panic!(
            "nginx is not installed, and the differential tests compare sluice with real \
             nginx: run scripts/test.sh (it installs nginx), or `apt-get install \
             nginx-light`, or set SLUICE_TEST_NGINX=/path/to/nginx"
        )
    })
}

impl Nginx {
    /// A real nginx on a whole `nginx.conf` of the test's own (a corpus file, not a fragment the
    /// harness wraps): `write(prefix, addrs)` writes `conf/nginx.conf`, and whatever it includes,
    /// into the new prefix for the `n` reserved addresses it must listen on, and returns the
    /// configuration's text. The prefix has `conf`, `html` (with `ok.txt`), `logs` and `temp`, so
    /// the file's relative paths (`logs/error.log`, `temp/proxy`) stay inside it. Started with
    /// `-p PREFIX/ -c PREFIX/conf/nginx.conf`, waited for until every address accepts (on a port
    /// found taken, again on others). Panics, with the configuration and the error log, if nginx
    /// rejects it.
    pub fn start_whole(n: usize, write: impl Fn(&Path, &[SocketAddr]) -> String) -> Nginx {
        let bin = nginx_binary();
        assert!(n > 0, "an nginx configuration must listen somewhere");
        let ((process, prefix, conf), ports) = with_ports("nginx", n, |ports| {
            let addrs: Vec<SocketAddr> = ports.iter().map(Port::addr).collect();
            let numbers: Vec<u16> = ports.iter().map(Port::number).collect();
            spawn_whole(&bin, &addrs, &numbers, &write)
        });
        Nginx {
            process,
            prefix,
            ports,
            conf,
        }
    }
}

/// One attempt of [`Nginx::start_whole`].
fn spawn_whole(
    bin: &Path,
    addrs: &[SocketAddr],
    ports: &[u16],
    write: &impl Fn(&Path, &[SocketAddr]) -> String,
) -> Result<(Process, TempDir, String), StartError> {
    let prefix = new_prefix();
    let p = prefix.path();
    let conf = write(p, addrs);
    launch(bin, prefix, conf, ports)
}

/// Starts nginx on the prefix's `conf/nginx.conf` (already written: `conf` is its text, for
/// the message when nginx refuses it).
fn launch(
    bin: &Path,
    prefix: TempDir,
    conf: String,
    ports: &[u16],
) -> Result<(Process, TempDir, String), StartError> {
    let p = prefix.path();
    let mut cmd = Command::new(bin);
    cmd.arg("-p")
        .arg(format!("{}/", p.display()))
        .arg("-e")
        .arg(p.join("logs/error.log"))
        .arg("-c")
        .arg(p.join("conf/nginx.conf"))
        .current_dir(p);
    let stop = Stop::TermThenKill(Duration::from_secs(5));
    let logs = [p.join("logs/error.log")];
    match Process::start("nginx", cmd, p, ports, stop, &logs) {
        Ok(process) => Ok((process, prefix, conf)),
        Err(StartError::AddrInUse(out)) => Err(StartError::AddrInUse(out)),
        Err(StartError::Failed(out)) => Err(StartError::Failed(format!(
            "{out}\n--- conf/nginx.conf ---\n{conf}"
        ))),
    }
}
