//! The gRPC peers: tests/it/grpc/server.py, one process that the module's tests share while
//! any of them runs (started again if all had ended), and tests/it/grpc/client.py, one process
//! per scenario run. Both are Debian's python3-grpcio under /usr/bin/python3: the `python3`
//! first on `PATH` may be another one without it.

use crate::support::{KeyKind, Leaf, Port, Process, Stop, TestCa, eventually, with_ports};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

const PYTHON: &str = "/usr/bin/python3";

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/grpc")
        .join(name)
}

/// Panics, saying what to install, unless /usr/bin/python3 has `grpc`.
fn require_grpcio() {
    let ok = std::process::Command::new(PYTHON)
        .args(["-c", "import grpc"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the gRPC tests need {PYTHON} with grpcio: run scripts/test.sh (it installs it) or \
         `apt-get install python3-grpcio`"
    );
}

/// server.py's servers: `a` and `b` (plain), `s` (TLS, with a certificate for `localhost` and
/// 127.0.0.1 signed by [`Upstreams::ca`]), and [`Upstreams::dead`], a reserved port on which
/// nothing listens (a connection to it is refused).
pub struct Upstreams {
    // Field order is drop order: the process before its directory and certificates.
    process: Process,
    ports: Vec<Port>,
    dead: Port,
    ca: TestCa,
    _dir: tempfile::TempDir,
}

impl Upstreams {
    /// The running server, or a new one if no test holds one.
    pub fn shared() -> Arc<Upstreams> {
        static SHARED: Mutex<Weak<Upstreams>> = Mutex::new(Weak::new());
        let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(up) = slot.upgrade() {
            return up;
        }
        let up = Arc::new(Upstreams::start());
        *slot = Arc::downgrade(&up);
        up
    }

    fn start() -> Upstreams {
        require_grpcio();
        let ca = TestCa::new();
        let leaf: Leaf = ca.leaf("grpc", &["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
        let dir = tempfile::Builder::new()
            .prefix("sluice-it-grpc-")
            .tempdir()
            .expect("temporary directory for the gRPC server");
        let (process, ports) = with_ports("the gRPC server (server.py)", 3, |ports| {
            let mut cmd = std::process::Command::new(PYTHON);
            cmd.arg(script("server.py"))
                .arg("--plain")
                .arg(format!("a={}", ports[0].number()))
                .arg("--plain")
                .arg(format!("b={}", ports[1].number()))
                .arg("--tls")
                .arg(format!("s={}", ports[2].number()))
                .arg("--cert")
                .arg(&leaf.chain)
                .arg("--key")
                .arg(&leaf.key);
            let numbers: Vec<u16> = ports.iter().map(Port::number).collect();
            Process::start("grpc-server", cmd, dir.path(), &numbers, Stop::Kill, &[])
        });
        Upstreams {
            process,
            ports,
            dead: Port::reserve(),
            ca,
            _dir: dir,
        }
    }

    /// Plain server `a`.
    pub fn a(&self) -> SocketAddr {
        self.ports[0].addr()
    }

    /// Plain server `b`.
    pub fn b(&self) -> SocketAddr {
        self.ports[1].addr()
    }

    /// TLS server `s`.
    pub fn tls(&self) -> SocketAddr {
        self.ports[2].addr()
    }

    /// A port nothing listens on.
    pub fn dead(&self) -> SocketAddr {
        self.dead.addr()
    }

    /// The CA that signed `s`'s certificate.
    pub fn ca(&self) -> PathBuf {
        self.ca.cert()
    }

    /// The server's log lines of the calls named `PREFIX-N` so far, in the order they ended.
    pub fn calls(&self, prefix: &str) -> Vec<Value> {
        let start = format!("{prefix}-");
        std::fs::read_to_string(self.process.stdout_path())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["id"].as_str().is_some_and(|id| id.starts_with(&start)))
            .collect()
    }

    /// The log line of call `id` (`PREFIX-N`), waited for up to `limit`: a call the server
    /// still holds (a cancellation it has not seen) has none yet.
    pub async fn call(&self, id: &str, limit: Duration) -> Value {
        let prefix = id.rsplit_once('-').map_or(id, |(p, _)| p);
        let what = format!("the gRPC server's log line of call {id}");
        eventually(&what, limit, async || {
            self.calls(prefix).into_iter().find(|v| v["id"] == id)
        })
        .await
    }
}

/// Runs client.py against `target`: scenario `scenario`, call ids `id-N`, `params` as
/// `KEY=VALUE`. Panics if the client could not run it (its `error`, its stderr).
pub async fn client(target: SocketAddr, scenario: &str, id: &str, params: &[&str]) -> Value {
    require_grpcio();
    let run = tokio::process::Command::new(PYTHON)
        .arg(script("client.py"))
        .arg(target.to_string())
        .arg(scenario)
        .arg(id)
        .args(params)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap_or_else(|_| panic!("client.py {scenario} {params:?} ran over 60 s"))
        .expect("run client.py");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "client.py {scenario} against {target}: no JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        v.get("error").is_none(),
        "client.py {scenario} against {target} failed: {}\n{}",
        v["trace"].as_str().unwrap_or_default(),
        String::from_utf8_lossy(&out.stderr)
    );
    v
}

/// What the upstream saw of a call, without what must differ between two runs (its id, the
/// proxy's port, the times): method, authority, metadata sorted by key (the order of one key's
/// values kept), the messages received, sent, and how it ended. `deadline_ms` is kept as
/// whether there was one.
pub fn seen_upstream(call: &Value) -> Value {
    let mut md: Vec<(String, String)> = call["metadata"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|kv| Some((kv[0].as_str()?.to_owned(), kv[1].as_str()?.to_owned())))
        .filter(|(k, _)| k != "x-call-id")
        .collect();
    md.sort_by(|x, y| x.0.cmp(&y.0));
    let mut received = call["received"].clone();
    if let Some(r) = received.as_object_mut() {
        r.remove("at_ms");
    }
    serde_json::json!({
        "server": call["server"],
        "method": call["method"],
        "authority": call["authority"],
        "peer": call["peer"].as_str().map(|p| p.rsplit_once(':').map_or(p, |(h, _)| h)),
        "metadata": md,
        "deadline": !call["deadline_ms"].is_null(),
        "received": received,
        "sent": call["sent"],
        "outcome": call["outcome"],
    })
}

/// `v` without the keys named `ms` and `first_ms` at any depth (times, which differ run to
/// run), for comparing two clients' results whole.
pub fn untimed(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "ms" | "first_ms"))
                .map(|(k, v)| (k.clone(), untimed(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(untimed).collect()),
        other => other.clone(),
    }
}

/// nginx's upstream view `theirs` ([`seen_upstream`]) as sluice's upstream sees the same call
/// through a location that sets no `X-Forwarded-For`: sluice appends one by default, for
/// `grpc_pass` as for `proxy_pass` (its documented difference, config/nginx.md: "sluice sends
/// X-Forwarded-For ($proxy_add_x_forwarded_for) to upstreams unless proxy_set_header sets it;
/// nginx does not send it by default"). The client is 127.0.0.1.
pub fn with_sluice_xff(theirs: &Value) -> Value {
    let mut v = theirs.clone();
    if let Some(md) = v["metadata"].as_array_mut() {
        if !md.iter().any(|kv| kv[0] == "x-forwarded-for") {
            md.push(serde_json::json!(["x-forwarded-for", "127.0.0.1"]));
            md.sort_by(|x, y| x[0].as_str().cmp(&y[0].as_str()));
        }
    }
    v
}
