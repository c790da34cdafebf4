//! Helpers for the Redis tests, self-contained: a real `redis-server` on a
//! free loopback port, `sluice` processes, and a minimal HTTP/1.1 client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Ports come from the shared harness, so no two tests of this binary get the same one.
pub use crate::support::legacy::free_port;

/// Poll `f` every 10 ms until it returns `Some`, or panic after `limit`.
pub fn poll<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > limit {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A `redis-server` of our own, killed on drop.
pub struct RedisServer {
    pub port: u16,
    /// Extra arguments (TLS).
    args: Vec<String>,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let mut last = String::new();
        // A free port can be taken between our probe and redis-server's
        // bind: try a few.
        for _ in 0..5 {
            let mut s = RedisServer {
                port: free_port(),
                args: Vec::new(),
                child: None,
                dir: tempfile::tempdir().expect("temp dir"),
            };
            match s.spawn() {
                Ok(()) => return s,
                Err(e) => last = e,
            }
        }
        panic!("could not start redis-server: {last}");
    }

    /// A server on `port` (one that sluice already points at).
    pub fn start_on(port: u16) -> RedisServer {
        let mut s = RedisServer {
            port,
            args: Vec::new(),
            child: None,
            dir: tempfile::tempdir().expect("temp dir"),
        };
        poll("redis-server on its port", Duration::from_secs(10), || {
            s.spawn().ok()
        });
        s
    }

    /// A server that also listens with TLS on `tls_port`, requiring client
    /// certificates signed by `certs`' CA (the plain port stays for the
    /// test's own checks).
    pub fn start_tls(certs: &TlsFiles, tls_port: u16) -> RedisServer {
        let p = |f: &str| certs.dir.path().join(f).display().to_string();
        let mut s = RedisServer {
            port: free_port(),
            args: vec![
                "--tls-port".into(),
                tls_port.to_string(),
                "--tls-cert-file".into(),
                p("server.crt"),
                "--tls-key-file".into(),
                p("server.key"),
                "--tls-ca-cert-file".into(),
                p("ca.crt"),
                "--tls-auth-clients".into(),
                "yes".into(),
            ],
            child: None,
            dir: tempfile::tempdir().expect("temp dir"),
        };
        poll("redis-server with TLS", Duration::from_secs(10), || {
            s.spawn().ok()
        });
        s
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--dir", &self.dir.path().display().to_string()])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-server is not installed (the Redis tests start their own): \
                 run scripts/test.sh, or apt-get install redis-server"
            ),
            Err(e) => panic!("cannot run redis-server: {e}"),
        };
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("redis-server exited early ({status})"));
            }
            if self.ping_ours(child.id()) {
                self.child = Some(child);
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                return Err("redis-server did not answer PING within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Answers, and is our process (not another test's server that got the
    /// same port).
    fn ping_ours(&self, pid: u32) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
            return false;
        };
        let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut c) else {
            return false;
        };
        info.lines()
            .any(|l| l.trim() == format!("process_id:{pid}"))
    }

    /// Kill the server (SIGKILL): its data is gone, as in a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        // The port may linger briefly; redis-server exits if it cannot bind.
        poll("redis-server to restart", Duration::from_secs(10), || {
            self.spawn().ok()
        });
    }

    /// Freeze (SIGSTOP) or resume (SIGCONT) the server: a Redis that is up
    /// but does not answer.
    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} {pid}");
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .expect("connect to the test redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_ref() {
            // resume a frozen server so that it can die
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
        self.kill();
    }
}

/// A `sluice` process on a configuration, killed on drop.
pub struct Sluice {
    pub addr: SocketAddr,
    child: Child,
    pub stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl Sluice {
    /// Start sluice with `config`, in which `{PORT}` is replaced by a free
    /// port that the first server listens on.
    pub fn start(config: &str) -> Sluice {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let path = dir.path().join("sluice.toml");
        std::fs::write(&path, config.replace("{PORT}", &port.to_string())).unwrap();
        let stderr = dir.path().join("stderr.log");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("--config")
            .arg(&path)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn sluice");
        let mut s = Sluice {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            stderr,
            _dir: dir,
        };
        poll("sluice to listen", Duration::from_secs(20), || {
            if let Ok(Some(st)) = s.child.try_wait() {
                panic!("sluice exited ({st}):\n{}", s.log());
            }
            TcpStream::connect(s.addr).ok().map(|_| ())
        });
        s
    }

    pub fn log(&self) -> String {
        std::thread::sleep(crate::support::LOG_SETTLE);
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Still running (no panic, no exit).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response: status, headers (lower-case names), time taken.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub took: Duration,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `GET path` with extra headers, `Connection: close`, blocking.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).expect("connect to sluice");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read the response");
    parse(&buf, start.elapsed())
}

/// The same with tokio, for many concurrent clients.
pub async fn get_async(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let start = Instant::now();
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to sluice");
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read the response");
    parse(&buf, start.elapsed())
}

fn parse(buf: &[u8], took: Duration) -> Reply {
    let text = String::from_utf8_lossy(buf);
    let head = text.split("\r\n\r\n").next().unwrap_or("");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        took,
    }
}

/// A throw-away CA, a server certificate for 127.0.0.1 and a client
/// certificate, made with the `openssl` command.
pub struct TlsFiles {
    pub dir: tempfile::TempDir,
}

impl TlsFiles {
    pub fn generate() -> TlsFiles {
        let dir = tempfile::tempdir().expect("temp dir");
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap_or_else(|e| {
                    panic!("cannot run openssl ({e}): it makes the TLS test's certificates")
                });
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        run(&[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=sluice test CA",
            ],
        ]
        .concat());
        std::fs::write(
            dir.path().join("server.ext"),
            "subjectAltName=IP:127.0.0.1\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("client.ext"),
            "extendedKeyUsage=clientAuth\n",
        )
        .unwrap();
        for who in ["server", "client"] {
            let key = format!("{who}.key");
            let csr = format!("{who}.csr");
            let crt = format!("{who}.crt");
            let ext = format!("{who}.ext");
            run(&[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    &key,
                    "-out",
                    &csr,
                    "-subj",
                    &format!("/CN={who}"),
                ],
            ]
            .concat());
            run(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                &ext,
            ]);
        }
        TlsFiles { dir }
    }
}
