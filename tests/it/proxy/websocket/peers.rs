//! The peers of the WebSocket tests: a real WebSocket echo server and client (Python
//! `websockets`, /usr/bin/python3), and a raw upstream that switches protocols and echoes
//! bytes, for the tests that count bytes exactly.

use crate::support::{Message, Port, Process, Reader, Stop, with_ports};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Debian's python3-websockets is for the system Python: the `python3` first on `PATH` may be
/// another one without it.
const PYTHON: &str = "/usr/bin/python3";

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/proxy")
        .join(name)
}

/// Panics, saying what to install, unless /usr/bin/python3 has `websockets`.
fn require_websockets() {
    let ok = std::process::Command::new(PYTHON)
        .args(["-c", "import websockets"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the WebSocket tests need {PYTHON} with the websockets package: run scripts/test.sh \
         (it installs it) or `apt-get install python3-websockets`"
    );
}

/// tests/it/proxy/ws_echo.py on a reserved port: echoes every message; prints a JSON line per
/// handshake it accepted.
pub struct WsEcho {
    // Field order is drop order: the process before its directory.
    process: Process,
    _dir: tempfile::TempDir,
    port: Port,
}

impl WsEcho {
    pub fn start() -> WsEcho {
        require_websockets();
        let dir = tempfile::Builder::new()
            .prefix("sluice-it-ws-")
            .tempdir()
            .expect("temporary directory for the echo server");
        let (process, mut ports) = with_ports("the WebSocket echo server", 1, |ports| {
            let mut cmd = std::process::Command::new(PYTHON);
            cmd.arg(script("ws_echo.py"))
                .arg(ports[0].number().to_string());
            Process::start(
                "ws-echo",
                cmd,
                dir.path(),
                &[ports[0].number()],
                Stop::Kill,
                &[],
            )
        });
        WsEcho {
            process,
            _dir: dir,
            port: ports.remove(0),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.port.addr()
    }

    /// One JSON line per handshake accepted so far: `{"path": …, "headers": [[name, value], …]}`.
    pub fn handshakes(&self) -> Vec<String> {
        std::fs::read_to_string(self.process.stdout_path())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// Runs tests/it/proxy/ws_client.py `args` (a scenario, a URL, …): its JSON line.
pub async fn ws_client(args: &[&str]) -> String {
    require_websockets();
    let run = tokio::process::Command::new(PYTHON)
        .arg(script("ws_client.py"))
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap_or_else(|_| panic!("ws_client.py {args:?} ran over 60 s"))
        .expect("run ws_client.py");
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        text.starts_with('{') && !text.contains("\"error\""),
        "ws_client.py {args:?}: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The `[name, value]` pairs of one of [`WsEcho::handshakes`]'s lines, in order.
pub fn handshake_fields(line: &str) -> Vec<(String, String)> {
    let list = line.split_once("\"headers\": [[").map_or("", |(_, r)| r);
    let list = list.strip_suffix("]]}").unwrap_or(list);
    list.split("], [")
        .filter_map(|p| {
            let (n, v) = p.split_once("\", \"")?;
            Some((
                n.trim_matches('"').to_owned(),
                v.trim_matches('"').to_owned(),
            ))
        })
        .collect()
}

/// The raw text of `field`'s value in one of ws_client.py's JSON lines.
pub fn field<'a>(json: &'a str, field: &str) -> Option<&'a str> {
    let at = json.find(&format!("\"{field}\": "))? + field.len() + 4;
    let rest = &json[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// What [`Switcher`] saw on one connection.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// The request: its head (up to its empty line) and body.
    pub request: Message,
    /// Every byte after the request, in order: the tunnel's.
    pub tunnel: Vec<u8>,
    /// The client's end of file came.
    pub ended: bool,
}

/// A raw upstream that answers every request (asked for an upgrade or not) with `101
/// Switching Protocols`, then echoes every byte. A path with `early` gets `EARLY` right after
/// the head, in the same write; with `late`, the client's end of file is answered 300 ms later
/// by `late` and its own end (else at once by its end).
pub struct Switcher {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Arc<Mutex<Seen>>>>>,
    task: JoinHandle<()>,
}

impl Switcher {
    pub async fn start() -> Switcher {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the upstream");
        let addr = listener.local_addr().expect("its address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let all = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let one = Arc::new(Mutex::new(Seen::default()));
                all.lock().unwrap().push(one.clone());
                tokio::spawn(switch(stream, one));
            }
        });
        Switcher { addr, seen, task }
    }

    /// Each connection's record so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        let all = self.seen.lock().unwrap();
        all.iter().map(|s| s.lock().unwrap().clone()).collect()
    }
}

impl Drop for Switcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn switch(s: TcpStream, seen: Arc<Mutex<Seen>>) {
    let mut s = Reader::new(s);
    let Some(request) = s.request().await else {
        return;
    };
    let (mut s, tunnel) = s.into_parts();
    let path = request.target().to_owned();
    {
        let mut seen = seen.lock().unwrap();
        seen.request = request;
    }
    let mut answer = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n".to_vec();
    if path.contains("early") {
        answer.extend_from_slice(b"EARLY");
    }
    if s.write_all(&answer).await.is_err() {
        return;
    }
    let mut pending = tunnel;
    loop {
        if !pending.is_empty() {
            seen.lock().unwrap().tunnel.extend_from_slice(&pending);
            if s.write_all(&pending).await.is_err() {
                return;
            }
        }
        let mut buf = [0u8; 65536];
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => pending = buf[..n].to_vec(),
        }
    }
    seen.lock().unwrap().ended = true;
    if path.contains("late") {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = s.write_all(b"late").await;
    }
    let _ = s.shutdown().await;
}

/// A WebSocket handshake for `path` (any key: the raw upstream does not check it).
pub fn handshake(path: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

/// `raw` on a new connection from `source`: the response's head and its body (Content-Length),
/// the connection left as it is (a kept-alive one is not waited for).
pub async fn one_response(
    addr: SocketAddr,
    source: std::net::IpAddr,
    raw: &str,
) -> (Message, Vec<u8>) {
    let mut c = Reader::new(crate::support::connect(addr, source).await);
    c.write_all(raw.as_bytes()).await.expect("send the request");
    let head = c.head().await;
    let len = head
        .header("content-length")
        .map_or(0, |v| v.parse().unwrap_or(0));
    let body = c.read_n(len).await;
    (head, body)
}
