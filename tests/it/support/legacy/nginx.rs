//! Real nginx, the oracle, in a temporary prefix.

use std::env;
use std::fs::{self, File};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use super::process::{Child, Stop};

/// A running nginx (`daemon off`, one worker) in its own temporary prefix:
/// `conf/nginx.conf`, `html/ok.txt` (`"ok\n"`), `logs/{error,access}.log`, `temp/*`.
/// Stopped on Drop (SIGTERM to the master, which stops the worker), prefix deleted.
pub struct Nginx {
    // Field order is drop order: stop the process before deleting its prefix.
    child: Child,
    prefix: TempDir,
    ports: Vec<u16>,
    conf: String,
}

impl Nginx {
    /// Writes `conf/nginx.conf` around `http_block` (the inside of `http { }`: zones,
    /// `limit_req_status`, servers with their `listen 127.0.0.1:PORT`), starts nginx, and waits
    /// until every port in `ports` accepts connections. Panics, with the configuration and the
    /// error log, if nginx is missing, rejects the configuration, or does not listen.
    pub fn start(http_block: &str, ports: &[u16]) -> Nginx {
        assert!(
            !ports.is_empty(),
            "Nginx::start needs the listen ports to wait for"
        );
        let bin = nginx_binary();
        let prefix = tempfile::Builder::new()
            .prefix("sluice-it-nginx-")
            .tempdir()
            .expect("temporary directory for the nginx prefix");
        let p = prefix.path();
        for dir in ["conf", "html", "logs", "temp"] {
            fs::create_dir_all(p.join(dir)).expect("nginx prefix directory");
        }
        fs::write(p.join("html/ok.txt"), "ok\n").expect("write html/ok.txt");
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
        let conf_path = p.join("conf/nginx.conf");
        fs::write(&conf_path, &conf).expect("write conf/nginx.conf");
        let out = File::create(p.join("logs/stdout.log")).expect("create logs/stdout.log");
        let err = File::create(p.join("logs/stderr.log")).expect("create logs/stderr.log");

        let mut cmd = Command::new(&bin);
        cmd.arg("-p")
            .arg(format!("{d}/"))
            .arg("-e")
            .arg(p.join("logs/error.log"))
            .arg("-c")
            .arg(&conf_path)
            .current_dir(p)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let mut child = Child::spawn("nginx", cmd, Stop::TermThenKill(Duration::from_secs(5)));
        let nginx_ports = ports.to_vec();
        if let Err(why) = child.wait_for_ports(&nginx_ports, Duration::from_secs(20)) {
            let error_log = read(&p.join("logs/error.log"));
            let stderr = read(&p.join("logs/stderr.log"));
            drop(child);
            panic!(
                "nginx ({}) did not start: {why}\n--- conf/nginx.conf ---\n{conf}\n--- \
                 logs/error.log ---\n{error_log}\n--- stderr ---\n{stderr}",
                bin.display()
            );
        }
        Nginx {
            child,
            prefix,
            ports: nginx_ports,
            conf,
        }
    }

    /// `127.0.0.1:` the first port given to [`Nginx::start`].
    pub fn addr(&self) -> SocketAddr {
        self.addr_of(self.ports[0])
    }

    /// `127.0.0.1:port`.
    pub fn addr_of(&self, port: u16) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, port))
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
        self.child.id()
    }
}

/// The nginx binary: `$SLUICE_TEST_NGINX`, else `nginx` on `PATH`, else the usual install
/// locations (`/usr/sbin` is often missing from a non-root `PATH`). Panics if there is none:
/// the differential tests need real nginx and are never skipped.
pub fn nginx_binary() -> PathBuf {
    if let Some(p) = env::var_os("SLUICE_TEST_NGINX") {
        let p = PathBuf::from(p);
        assert!(
            is_executable(&p),
            "SLUICE_TEST_NGINX={} is not an executable file",
            p.display()
        );
        return p;
    }
    let on_path: Vec<PathBuf> = env::var_os("PATH")
        .map(|path| {
            env::split_paths(&path)
                .map(|dir| dir.join("nginx"))
                .collect()
        })
        .unwrap_or_default();
    let usual = [
        "/usr/sbin/nginx",
        "/usr/local/sbin/nginx",
        "/usr/local/nginx/sbin/nginx",
    ]
    .map(PathBuf::from);
    on_path
        .into_iter()
        .chain(usual)
        .find(|p| is_executable(p))
        .unwrap_or_else(|| {
            panic!(
                "nginx is not installed, and the differential tests compare sluice with real \
                 nginx: run scripts/test.sh (it installs nginx), or `apt-get install \
                 nginx-light`, or set SLUICE_TEST_NGINX=/path/to/nginx"
            )
        })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn read(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| format!("(cannot read {}: {e})", p.display()))
}
