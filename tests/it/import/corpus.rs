//! The import corpus: real-world nginx.conf shapes (`corpus/*.conf`), each imported with the real
//! `sluice import-nginx`, its `not translated` warnings compared with a table (so a directive
//! dropped silently fails), the output checked with `sluice check`, and, for the files sluice
//! can serve as nginx does, nginx on the file and sluice on its import run side by side on the
//! same requests.
//!
//! # The files
//! Each is a whole nginx.conf, runnable in a prefix (`user root; daemon off;`, logs and temp
//! paths relative to the prefix), with placeholders substituted before nginx or the import
//! sees it: `{{LISTENn}}` (the n-th listen address: a reserved port for nginx, a fixed
//! `127.0.0.1:6100n` for the import, which the harness then relocates to a reserved port),
//! `{{UPn}}` (echo backend n, the same servers behind both sides: nginx's consistent hash
//! places a server by its address), `{{DEAD1}}` (a port nobody listens on), `{{CERT}}` and
//! `{{KEY}}` (a leaf of a test CA). `NAME.d/` beside a file, if any, is copied next to it
//! (its `include`s are relative to the file's directory, as nginx has them).
//!
//! # The comparison
//! A case is a list of steps; a step's requests are fired together at both sides at once (each
//! side on its own listener), and compared as multisets of *signatures*: status, the response
//! headers the case shows, and what the backend saw (which echo answered, method, target, the
//! headers the step looks at; `-` where absent). Latencies are paired per signature, sorted,
//! within ±[`TOLERANCE`] (delayed or not, to ~100 ms). Before that, nginx's status counts are
//! checked against the step's own expectation, so a harness fault cannot make both sides
//! agree on nonsense.

mod cases;
mod cases_vars;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::{
    KeyKind, Leaf, Nginx, Port, Reply, Request, Sluice, TOLERANCE, TestCa, Timing, Upstream,
    client, exchange, fire, status_counts, timing,
};

/// Where the corpus lives.
fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/import/corpus")
}

/// The address the import sees for `{{LISTENn}}`: outside Linux's ephemeral range, so no
/// backend holds it, and relocated to a reserved port when sluice starts.
fn import_listen(n: usize) -> String {
    format!("127.0.0.1:{}", 61000 + n)
}

/// One line the import must report: the file (relative to the main file's directory), the
/// line, the kind ([`NOT`], [`PART`] or [`IGNORED`]), the directive.
pub type Warning = (&'static str, u32, &'static str, &'static str);

/// `FILE:LINE: not translated: …`: nothing of the directive is in the output.
pub const NOT: &str = "not translated";
/// `FILE:LINE: translated in part: …`.
pub const PART: &str = "translated in part";
/// `FILE:LINE: ignored (no meaning for sluice): …`.
pub const IGNORED: &str = "ignored";

/// What the import says of the lines every corpus file starts with: `user` at line `user`
/// (then `worker_processes`, `daemon`, `pid`, `error_log`: the last two translated whole),
/// `proxy_temp_path` at line `temp`.
pub fn preamble(user: u32, temp: u32) -> Vec<Warning> {
    vec![
        ("nginx.conf", user, IGNORED, "user"),
        ("nginx.conf", user + 1, IGNORED, "worker_processes"),
        ("nginx.conf", user + 2, IGNORED, "daemon"),
        ("nginx.conf", temp, IGNORED, "proxy_temp_path"),
    ]
}

/// What a case is given besides its file: the values of the placeholders that are the same for
/// both sides.
struct Shared {
    echoes: Vec<Upstream>,
    dead: Port,
    ca: TestCa,
    leaf: Leaf,
}

impl Shared {
    fn start() -> Shared {
        let ca = TestCa::new();
        let leaf = ca.leaf("localhost", &["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
        Shared {
            echoes: ["up1", "up2", "up3"]
                .iter()
                .map(|n| Upstream::named(n))
                .collect(),
            dead: Port::reserve(),
            ca,
            leaf,
        }
    }

    /// `text` with every placeholder replaced; `listens` are the `{{LISTENn}}` values.
    fn substitute(&self, text: &str, listens: &[String]) -> String {
        let mut out = text.to_owned();
        for (i, addr) in listens.iter().enumerate() {
            out = out.replace(&format!("{{{{LISTEN{}}}}}", i + 1), addr);
        }
        for (i, echo) in self.echoes.iter().enumerate() {
            out = out.replace(&format!("{{{{UP{}}}}}", i + 1), &echo.addr.to_string());
        }
        out = out.replace("{{DEAD1}}", &self.dead.addr().to_string());
        out = out.replace("{{CERT}}", &self.leaf.chain.display().to_string());
        out = out.replace("{{KEY}}", &self.leaf.key.display().to_string());
        assert!(
            !out.contains("{{"),
            "a placeholder the harness does not know in:\n{out}"
        );
        out
    }

    /// Writes the case's file as `dir/nginx.conf` (and its `NAME.d/` as `dir/NAME.d/`), the
    /// placeholders substituted; returns the main file's text.
    fn materialize(&self, name: &str, dir: &Path, listens: &[String]) -> String {
        let src = corpus_dir();
        let text = std::fs::read_to_string(src.join(format!("{name}.conf")))
            .unwrap_or_else(|e| panic!("corpus file {name}.conf: {e}"));
        let text = self.substitute(&text, listens);
        std::fs::create_dir_all(dir).expect("the configuration's directory");
        std::fs::write(dir.join("nginx.conf"), &text).expect("write nginx.conf");
        let extra = src.join(format!("{name}.d"));
        if extra.is_dir() {
            let to = dir.join(format!("{name}.d"));
            std::fs::create_dir_all(&to).expect("the included files' directory");
            for entry in std::fs::read_dir(&extra).expect("read the included files") {
                let path = entry.expect("a directory entry").path();
                let body = std::fs::read_to_string(&path).expect("read an included file");
                let file = path.file_name().expect("a file name");
                std::fs::write(to.join(file), self.substitute(&body, listens))
                    .expect("write an included file");
            }
        }
        text
    }
}

/// A corpus file imported and checked.
pub struct Imported {
    pub name: &'static str,
    /// The TOML `import-nginx` wrote.
    pub toml: String,
    listens: usize,
    shared: Shared,
    _dir: tempfile::TempDir,
}

/// Imports corpus file `name` (with `listens` listen placeholders), asserts exit 0, exactly
/// `warnings` as `not translated` lines, and that `sluice check` accepts the output.
pub fn import(name: &'static str, listens: usize, warnings: &[Warning]) -> Imported {
    let shared = Shared::start();
    let dir = tempfile::Builder::new()
        .prefix("sluice-it-import-")
        .tempdir()
        .expect("temporary directory for the import");
    let conf_dir = dir.path().join("conf");
    let addrs: Vec<String> = (1..=listens).map(import_listen).collect();
    shared.materialize(name, &conf_dir, &addrs);
    let input = conf_dir.join("nginx.conf");
    let output = dir.path().join("sluice.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("import-nginx")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .expect("run sluice import-nginx");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{name}: import-nginx failed ({}):\n{stderr}",
        out.status
    );
    let toml = std::fs::read_to_string(&output)
        .unwrap_or_else(|e| panic!("{name}: import-nginx wrote no {}: {e}", output.display()));
    assert_warnings(name, &conf_dir, &stderr, warnings, &toml);
    let check = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("check")
        .arg("--config")
        .arg(&output)
        .output()
        .expect("run sluice check");
    assert!(
        check.status.success(),
        "{name}: sluice check refuses the import:\n{}{}\n--- sluice.toml ---\n{toml}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    Imported {
        name,
        toml,
        listens,
        shared,
        _dir: dir,
    }
}

/// The `not translated` lines of `stderr`, as `FILE:LINE: directive` with FILE relative to
/// `conf_dir`, compared with `expected` as sets.
fn assert_warnings(name: &str, conf_dir: &Path, stderr: &str, expected: &[Warning], toml: &str) {
    let prefix = format!("{}/", conf_dir.display());
    let mut got: Vec<String> = stderr
        .lines()
        .filter_map(|l| {
            let (at, kind, what) = [
                (": not translated: ", NOT),
                (": translated in part: ", PART),
                (": ignored (no meaning for sluice): ", IGNORED),
            ]
            .iter()
            .find_map(|(sep, kind)| l.split_once(sep).map(|(a, w)| (a, *kind, w)))?;
            let at = at.strip_prefix(&prefix).unwrap_or(at);
            let directive = what.split_whitespace().next().unwrap_or_default();
            Some(format!("{at}: {kind}: {directive}"))
        })
        .collect();
    got.sort();
    got.dedup();
    let mut want: Vec<String> = expected
        .iter()
        .map(|(file, line, kind, d)| format!("{file}:{line}: {kind}: {d}"))
        .collect();
    want.sort();
    let missing: Vec<&String> = want.iter().filter(|w| !got.contains(w)).collect();
    let extra: Vec<&String> = got.iter().filter(|g| !want.contains(g)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{name}: the import's warnings differ from the table\n  missing: {missing:?}\n  \
         unexpected: {extra:?}\n--- stderr ---\n{stderr}\n--- sluice.toml ---\n{toml}"
    );
}

/// nginx on a corpus file and (unless the case runs nginx alone) sluice on its import, side by
/// side.
pub struct Pair {
    pub name: &'static str,
    pub nginx: Nginx,
    pub sluice: Option<Sluice>,
    /// The import (empty when nginx runs alone).
    pub toml: String,
    shared: Shared,
    _timing: Timing,
}

/// nginx on the file, listening on reserved ports.
fn start_nginx(shared: &Shared, name: &str, listens: usize) -> Nginx {
    Nginx::start_whole(listens, |prefix, addrs| {
        let listens: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
        shared.materialize(name, &prefix.join("conf"), &listens)
    })
}

/// nginx alone on corpus file `name`: for the cases sluice cannot serve as nginx does (the
/// file is still shown to be a working configuration that answers as its steps expect).
pub fn nginx_alone(name: &'static str, listens: usize) -> Pair {
    let timing = timing();
    let shared = Shared::start();
    let nginx = start_nginx(&shared, name, listens);
    Pair {
        name,
        nginx,
        sluice: None,
        toml: String::new(),
        shared,
        _timing: timing,
    }
}

impl Imported {
    /// Starts nginx on the file (its listens on reserved ports) and sluice on the import (its
    /// listens relocated to reserved ports), both in front of the same echo backends.
    pub fn side_by_side(self) -> Pair {
        self.side_by_side_with(&[])
    }

    /// [`Imported::side_by_side`] with environment variables for sluice.
    pub fn side_by_side_with(self, env: &[(&str, &str)]) -> Pair {
        let timing = timing();
        let nginx = start_nginx(&self.shared, self.name, self.listens);
        let mut builder = Sluice::builder(&self.toml).dir("logs").dir("temp");
        for (k, v) in env {
            builder = builder.env(k, v);
        }
        for n in 1..=self.listens {
            builder = builder.relocate(&import_listen(n));
        }
        let sluice = builder.start();
        Pair {
            name: self.name,
            nginx,
            sluice: Some(sluice),
            toml: self.toml,
            shared: self.shared,
            _timing: timing,
        }
    }
}

/// One request of a step.
#[derive(Clone, Debug)]
pub struct Req {
    /// The `{{LISTENn}}` it goes to, from 1.
    pub listen: usize,
    pub source: u8,
    pub method: &'static str,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

/// `GET target` from client `127.0.0.N` to the first listener.
pub fn get(source: u8, target: &str) -> Req {
    Req {
        listen: 1,
        source,
        method: "GET",
        target: target.to_owned(),
        headers: Vec::new(),
        body: None,
    }
}

impl Req {
    pub fn method(mut self, method: &'static str) -> Req {
        self.method = method;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn body(mut self, body: Vec<u8>) -> Req {
        self.body = Some(body);
        self
    }

    pub fn on(mut self, listen: usize) -> Req {
        self.listen = listen;
        self
    }

    /// `n` copies.
    pub fn times(self, n: usize) -> Vec<Req> {
        vec![self; n]
    }

    /// The request as bytes for `addr` (`Host: addr` unless given; `Connection: close`).
    fn raw(&self, addr: SocketAddr) -> Vec<u8> {
        let has = |n: &str| self.headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(n));
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.target);
        if !has("host") {
            let _ = write!(head, "Host: {addr}\r\n");
        }
        for (n, v) in &self.headers {
            let _ = write!(head, "{n}: {v}\r\n");
        }
        if let Some(body) = &self.body {
            let _ = write!(head, "Content-Length: {}\r\n", body.len());
        }
        head.push_str("Connection: close\r\n\r\n");
        let mut raw = head.into_bytes();
        raw.extend_from_slice(self.body.as_deref().unwrap_or_default());
        raw
    }
}

/// Requests fired together, and what nginx must answer to them.
pub struct Step {
    pub what: &'static str,
    pub reqs: Vec<Req>,
    /// nginx's status counts, as [`status_counts`] writes them (`200=2 429=3`).
    pub expect: &'static str,
    /// Request headers the backend saw that are compared (besides method and target).
    pub seen: Vec<&'static str>,
    /// nginx's 2xx latencies, sorted, each within ±[`TOLERANCE`] (ms), when given.
    pub delays: Option<Vec<u64>>,
    /// Response headers compared in this step, when not the case's.
    pub show: Option<Vec<&'static str>>,
    /// Which request got which answer is left open (the signatures leave the request and
    /// backend targets out): for requests to different targets that one bucket decides.
    pub any_target: bool,
}

/// In a `seen` list: the targets are left out of the signatures (see [`Step::any_target`]).
const ANY_TARGET: &str = ":any-target";

/// A step comparing the case's default backend headers.
pub fn step(what: &'static str, reqs: Vec<Req>, expect: &'static str) -> Step {
    Step {
        what,
        reqs,
        expect,
        seen: Vec::new(),
        delays: None,
        show: None,
        any_target: false,
    }
}

impl Step {
    /// Response headers compared in this step (replacing the case's).
    pub fn show(mut self, names: &[&'static str]) -> Step {
        self.show = Some(names.to_vec());
        self
    }

    /// Leaves open which request got which answer (see [`Step::any_target`]'s field).
    pub fn any_target(mut self) -> Step {
        self.any_target = true;
        self
    }

    /// nginx's 2xx answers must come back after these delays (ms, any order).
    pub fn delays(mut self, ms: &[u64]) -> Step {
        self.delays = Some(ms.to_vec());
        self
    }

    /// Backend request headers compared in this step (replacing the case's).
    pub fn seen(mut self, names: &[&'static str]) -> Step {
        self.seen = names.to_vec();
        self
    }
}

/// What is compared in every step of a case.
pub struct Compare {
    /// Response headers (value or absent).
    pub show: &'static [&'static str],
    /// Backend request headers, for steps that name none.
    pub seen: &'static [&'static str],
}

impl Pair {
    /// Runs `steps` in order against both sides at once and compares each (see the module
    /// comment). Returns both sides' replies per step.
    pub async fn run(&self, compare: &Compare, steps: Vec<Step>) -> Vec<(Vec<Reply>, Vec<Reply>)> {
        let mut all = Vec::new();
        for step in steps {
            let sluice = self.sluice.as_ref();
            let sluice_addr = |i: usize| sluice.map(|s| s.addr_of(i - 1));
            let (n, s) = tokio::join!(
                send_all(|i| Some(self.nginx.addr_of(i - 1)), &step.reqs),
                send_all(sluice_addr, &step.reqs)
            );
            let mut seen = if step.seen.is_empty() {
                compare.seen.to_vec()
            } else {
                step.seen.clone()
            };
            if step.any_target {
                seen.push(ANY_TARGET);
            }
            let show = step.show.clone().unwrap_or_else(|| compare.show.to_vec());
            let scenario = format!("{}: {}", self.name, step.what);
            if let Some(want) = &step.delays {
                check_delays(&scenario, &n, want);
            }
            self.compare_replies(&scenario, &show, &seen, step.expect, &n, &s);
            all.push((n, s));
        }
        all
    }
}

/// nginx's status counts against the step's.
fn assert_nginx(scenario: &str, show: &[&str], seen: &[&str], expect: &str, nginx: &[Reply]) {
    assert_eq!(
        status_counts(nginx),
        expect,
        "{scenario}: nginx answered otherwise than the step expects\n{}",
        listing(nginx, show, seen)
    );
}

/// nginx's 2xx latencies against the step's delays.
fn check_delays(scenario: &str, nginx: &[Reply], want: &[u64]) {
    let mut got: Vec<u64> = nginx
        .iter()
        .filter(|r| (200..300).contains(&r.status))
        .map(Reply::ms)
        .collect();
    got.sort_unstable();
    let mut want = want.to_vec();
    want.sort_unstable();
    let tolerance = u64::try_from(TOLERANCE.as_millis()).expect("a small tolerance");
    let close = got.len() == want.len()
        && got
            .iter()
            .zip(&want)
            .all(|(g, w)| g.abs_diff(*w) <= tolerance);
    assert!(
        close,
        "{scenario}: nginx's 2xx latencies {got:?} ms, the step expects {want:?} ms"
    );
}

impl Pair {
    /// Compares one step's replies, got by the test itself (see [`Pair::run`]), with the case's
    /// backend headers.
    pub fn compare_step(
        &self,
        compare: &Compare,
        what: &str,
        expect: &str,
        nginx: &[Reply],
        sluice: &[Reply],
    ) {
        let scenario = format!("{}: {what}", self.name);
        self.compare_replies(&scenario, compare.show, compare.seen, expect, nginx, sluice);
    }

    /// nginx's status counts against `expect`, then sluice's replies against nginx's.
    fn compare_replies(
        &self,
        scenario: &str,
        show: &[&str],
        seen: &[&str],
        expect: &str,
        nginx: &[Reply],
        sluice: &[Reply],
    ) {
        if self.sluice.is_none() {
            return self.compare_replies_nginx(scenario, show, seen, expect, nginx);
        }
        assert_nginx(scenario, show, seen, expect, nginx);
        assert_same_replies(scenario, nginx, sluice, show, seen, self);
    }

    /// nginx's status counts against `expect`, for a step sluice is not sent.
    fn compare_replies_nginx(
        &self,
        scenario: &str,
        show: &[&str],
        seen: &[&str],
        expect: &str,
        nginx: &[Reply],
    ) {
        assert_nginx(scenario, show, seen, expect, nginx);
        println!("{scenario} (nginx alone)\n{}", listing(nginx, show, seen));
    }

    /// The test CA's certificate, which signed `{{CERT}}`.
    pub fn ca_cert(&self) -> PathBuf {
        self.shared.ca.cert()
    }
}

/// `GET path` over HTTPS and HTTP/2 (curl, from 127.0.0.2, `localhost` resolved to `addr`,
/// verified against `ca`), as a [`Reply`] with the HTTP version curl used added as the header
/// `X-Test-Version`.
pub async fn curl_h2(addr: SocketAddr, ca: &Path, path: &str) -> Reply {
    let url = format!("https://localhost:{}{path}", addr.port());
    let mut cmd = tokio::process::Command::new("curl");
    cmd.args([
        "-s",
        "-i",
        "--http2",
        "--interface",
        "127.0.0.2",
        "--cacert",
    ])
    .arg(ca)
    .arg("--resolve")
    .arg(format!("localhost:{}:127.0.0.1", addr.port()))
    .arg(&url);
    let start = std::time::Instant::now();
    let out = cmd
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run curl ({e}): the TLS case needs it"));
    let elapsed = start.elapsed();
    assert!(out.status.success(), "curl {url}: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (line, rest) = text.split_once("\r\n").unwrap_or((&text, ""));
    let mut words = line.splitn(2, ' ');
    let version = words
        .next()
        .unwrap_or_default()
        .trim_start_matches("HTTP/")
        .to_owned();
    let raw = format!("HTTP/1.1 {}\r\n{rest}", words.next().unwrap_or_default());
    let mut reply = Reply::parse(raw.as_bytes())
        .unwrap_or_else(|e| panic!("curl's answer to {url}: {e}\n{text}"));
    reply.headers.push(("X-Test-Version".to_owned(), version));
    reply.elapsed = elapsed;
    reply.source = client(2);
    reply.path = path.to_owned();
    reply
}

/// Sends `reqs` together (bodies or not), each to `addr(req.listen)`; replies in request order.
async fn send_all(addr: impl Fn(usize) -> Option<SocketAddr>, reqs: &[Req]) -> Vec<Reply> {
    if reqs.iter().any(|r| addr(r.listen).is_none()) {
        return Vec::new();
    }
    let addr = |i| addr(i).expect("checked above");
    if reqs.iter().all(|r| r.body.is_none()) && reqs.iter().all(|r| r.listen == reqs[0].listen) {
        let a = addr(reqs[0].listen);
        let requests: Vec<Request> = reqs
            .iter()
            .map(|r| Request {
                source: client(r.source),
                method: r.method.to_owned(),
                path: r.target.clone(),
                headers: r.headers.clone(),
            })
            .collect();
        return fire(a, requests).await;
    }
    let futures = reqs.iter().map(|r| {
        let a = addr(r.listen);
        let (raw, source) = (r.raw(a), client(r.source));
        async move { exchange(a, source, &raw).await }
    });
    futures_join(futures).await
}

/// All futures at once, results in order.
async fn futures_join<F: std::future::Future<Output = Reply> + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<Reply> {
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("a request task"));
    }
    out
}

/// What the backend saw, from an echo's answer: `up1 GET /x?y Host=… X-Real-IP=-`, or `-` when
/// the answer did not come from an echo.
pub fn backend_view(reply: &Reply, seen: &[&str]) -> String {
    let Some(echo) = reply.header("X-Echo") else {
        return "-".to_owned();
    };
    let body = reply.body_text();
    let mut lines = body.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let headers: Vec<(&str, &str)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim(), v.trim()))
        .collect();
    let version = parts.next().unwrap_or_default();
    let target = if seen.contains(&ANY_TARGET) {
        "…"
    } else {
        target
    };
    let mut out = format!("{echo} {method} {target}");
    for name in seen.iter().filter(|n| **n != ANY_TARGET) {
        if *name == ":version" {
            let _ = write!(out, " {version}");
            continue;
        }
        let values: Vec<&str> = headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
            .collect();
        let v = if values.is_empty() {
            "-".to_owned()
        } else {
            values.join(",")
        };
        let _ = write!(out, " {name}={v}");
    }
    out
}

/// A reply's signature: status, shown headers, backend view.
pub fn signature(reply: &Reply, show: &[&str], seen: &[&str]) -> String {
    let status = if reply.status == 0 {
        "closed".to_owned()
    } else {
        reply.status.to_string()
    };
    let path = if seen.contains(&ANY_TARGET) {
        "…"
    } else {
        &reply.path
    };
    let mut out = format!("{path} {status}");
    for name in show {
        let _ = write!(out, " {name}={}", reply.header(name).unwrap_or("-"));
    }
    let _ = write!(out, " | {}", backend_view(reply, seen));
    out
}

fn listing(replies: &[Reply], show: &[&str], seen: &[&str]) -> String {
    let mut out = String::new();
    for r in replies {
        let _ = writeln!(
            out,
            "    {:>5} ms  {}  {}  {}",
            r.ms(),
            r.source,
            r.path,
            signature(r, show, seen)
        );
    }
    out
}

/// The signatures of both sides are the same multiset, and per signature the sorted latencies
/// pair up within [`TOLERANCE`].
fn assert_same_replies(
    scenario: &str,
    nginx: &[Reply],
    sluice: &[Reply],
    show: &[&str],
    seen: &[&str],
    pair: &Pair,
) {
    let group = |v: &[Reply]| {
        let mut m: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for r in v {
            m.entry(signature(r, show, seen)).or_default().push(r.ms());
        }
        for l in m.values_mut() {
            l.sort_unstable();
        }
        m
    };
    let (n, s) = (group(nginx), group(sluice));
    let tolerance = u64::try_from(TOLERANCE.as_millis()).expect("a small tolerance");
    let mut problems = Vec::new();
    for key in n
        .keys()
        .chain(s.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (a, b) = (
            n.get(key).cloned().unwrap_or_default(),
            s.get(key).cloned().unwrap_or_default(),
        );
        if a.len() != b.len() {
            problems.push(format!("{} × nginx, {} × sluice: {key}", a.len(), b.len()));
            continue;
        }
        for (x, y) in a.iter().zip(&b) {
            if x.abs_diff(*y) > tolerance {
                problems.push(format!("{key}: {x} ms (nginx) vs {y} ms (sluice)"));
            }
        }
    }
    let report = format!(
        "  nginx:\n{}  sluice:\n{}",
        listing(nginx, show, seen),
        listing(sluice, show, seen)
    );
    if problems.is_empty() {
        println!("{scenario}\n{report}");
        return;
    }
    panic!(
        "{scenario}: nginx and sluice differ\n  - {}\n{report}--- sluice.toml ---\n{}\n--- \
         sluice's log ---\n{}",
        problems.join("\n  - "),
        pair.toml,
        pair.sluice.as_ref().map(Sluice::log).unwrap_or_default()
    );
}

/// Every file of the corpus has its case in [`cases::CASES`], and every case its file: a
/// file added without a table, or a table left for a removed file, fails here.
#[test]
fn corpus_every_file_has_a_case() {
    let mut files: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("read the corpus directory")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".conf").map(str::to_owned)
        })
        .collect();
    files.sort();
    let mut cases: Vec<String> = cases::CASES.iter().map(|s| (*s).to_owned()).collect();
    cases.sort();
    assert_eq!(files, cases, "corpus/*.conf and cases::CASES differ");
    assert!(files.len() >= 16, "the corpus has {} files", files.len());
}
