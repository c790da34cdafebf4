//! Differential HTTP/2 conformance: the request cases of tests/it/h2/conformance.py (frames and
//! HPACK written by hand, so that any byte can be a name or a value) sent to real nginx 1.22
//! (`listen … http2`, `proxy_http_version 1.1`) and to sluice (`http2 = true`), each proxying
//! to its own [`Recorder`].
//!
//! Per case the suite compares:
//! - each stream's answer: the status (an upstream's `200` told apart from the proxy's own
//!   answer by the recorder's `x-recorder` field), or the RST_STREAM and its code; nginx's
//!   choice between a `400` and a reset is the oracle;
//! - the connection: the GOAWAY and its code, the close; most cases carry a valid sibling
//!   stream after the one under test, so a refusal that ends only its stream shows as the
//!   sibling's `200`, one that ends the connection as the sibling's silence;
//! - what the upstream received, request by request: the request line (the target modulo the
//!   bytes RFC 3986 never allows raw, as [`forwarded`] reads it), every header field but the two
//!   each proxy adds for its own hop (`Connection`, `X-Forwarded-For`; the `Host` both set to
//!   their upstream's address is compared as `UP`), and the body; and that the bytes split into
//!   as many requests under every [`Reading`] as the client got upstream answers (no request the
//!   proxy did not see and count).
//!
//! Where RFC 9113 (or sluice's documented design, config/operations.md "Security" and config/reference.md "HTTP/2") refuses what
//! nginx 1.22 forwards, or keeps a connection that nginx ends, [`DELIBERATE`] lists the case
//! with both outcomes and the reason: there sluice may give the listed outcome instead of
//! nginx's, provided its upstream got nothing that nginx's did not. Everything else must match.
//!
//! Each case runs on its own connection from its own source address (`127.1.x.y` towards nginx,
//! `127.2.x.y` towards sluice), which attributes the error-log lines; [`SLOTS`] cases run at once
//! per proxy, one per listener and recorder port. `H2_CONFORMANCE_TABLE=FILE` writes every
//! case's outcome on both proxies as a markdown table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::time::Instant;

use crate::support::readings::{Reading, find, forwarded, split};
use crate::support::recorder::Recorder;
use crate::support::{Nginx, Port, Sluice, heavy};

/// Debian's python3-h2 (which brings `hpack`) is for the system Python: the `python3` first on
/// `PATH` may be another one without it.
const PYTHON: &str = "/usr/bin/python3";
/// Cases in flight at once, per proxy.
const SLOTS: usize = 8;
/// After a case's last frame is read, before its upstream bytes are taken: a proxy that
/// (wrongly) still writes to its upstream after the client's stream ended must have those bytes
/// charged to this case, not to the next one on the slot. There is no event to wait for: the
/// bytes that matter are the ones that should not come.
const GRACE: Duration = Duration::from_millis(40);
/// The longest one case may take in the script (it stops waiting at 1.5 s) with a loaded
/// machine's margin.
const CASE_LIMIT: Duration = Duration::from_secs(15);

/// HTTP/2 error codes (RFC 9113 §7).
const NO_ERROR: u32 = 0;
const PROTOCOL_ERROR: u32 = 1;

fn code_name(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("0x{code:x}"), |n| (*n).to_owned())
}

mod deliberate;
use deliberate::{DELIBERATE, PINNED};

/// What a stream got.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    /// A response: its status, whether the upstream gave it (the recorder's `x-recorder`), the
    /// length of its body, and the RST_STREAM that followed it, if one did.
    Response {
        status: u16,
        upstream: bool,
        body: u64,
        reset: Option<u32>,
    },
    /// RST_STREAM before any response.
    Reset(u32),
    /// Nothing at all (the connection ended first, or the stream was left open).
    Nothing,
}

impl Answer {
    /// As compared: a RST_STREAM(NO_ERROR) after a complete response is left out, since RFC
    /// 9113 §8.1 lets a server send one, or not, once it answered before reading the whole
    /// request (nginx does when it refuses a request whose body it has not read).
    fn verdict(&self) -> String {
        match self {
            Answer::Response {
                status,
                upstream,
                reset,
                ..
            } => {
                let mut s = status.to_string();
                if *upstream {
                    s.push('↑');
                }
                if let Some(code) = reset.filter(|&c| c != NO_ERROR) {
                    let _ = write!(s, "+RST({})", code_name(code));
                }
                s
            }
            Answer::Reset(code) => format!("RST({})", code_name(*code)),
            Answer::Nothing => "none".to_owned(),
        }
    }

    /// Everything, for the tables.
    fn describe(&self) -> String {
        match self {
            Answer::Response {
                status,
                upstream,
                body,
                reset,
            } => {
                let mut s = format!("{status}{} ({body} B)", if *upstream { "↑" } else { "" });
                if let Some(code) = reset {
                    let _ = write!(s, "+RST({})", code_name(*code));
                }
                s
            }
            other => other.verdict(),
        }
    }
}

/// What one proxy did with one case.
#[derive(Clone, Debug, Default)]
struct Outcome {
    /// By stream id, ascending.
    streams: Vec<(u32, Answer)>,
    goaway: Option<u32>,
    closed: bool,
    /// The script's own failure (no SETTINGS, a frame it could not read).
    error: Option<String>,
    /// Bytes received by the recorder, per upstream connection.
    upstream: Vec<Vec<u8>>,
    /// The proxy's error-log lines for the case's source address.
    log: Vec<String>,
}

impl Outcome {
    /// The outcome compared between the proxies: each stream's answer, then the connection's
    /// (`open`, or its GOAWAY and whether it was closed), e.g. `1=RST(PROTOCOL_ERROR) 3=200↑
    /// open`.
    fn verdict(&self) -> String {
        let streams: Vec<String> = self
            .streams
            .iter()
            .map(|(id, a)| format!("{id}={}", a.verdict()))
            .collect();
        format!("{} {}", streams.join(" "), self.connection())
    }

    /// [`Outcome::verdict`] with the body lengths and every RST_STREAM, for the tables.
    fn describe(&self) -> String {
        let streams: Vec<String> = self
            .streams
            .iter()
            .map(|(id, a)| format!("{id}={}", a.describe()))
            .collect();
        format!("{} {}", streams.join(" "), self.connection())
    }

    fn connection(&self) -> String {
        let mut s = match (self.goaway, self.closed) {
            (Some(code), closed) => format!(
                "GOAWAY({}) {}",
                code_name(code),
                if closed { "closed" } else { "open" }
            ),
            (None, true) => "closed".to_owned(),
            (None, false) => "open".to_owned(),
        };
        if let Some(e) = &self.error {
            let _ = write!(s, " error: {e}");
        }
        s
    }

    /// Streams the client got an upstream's answer on.
    fn upstream_answers(&self) -> usize {
        self.streams
            .iter()
            .filter(|(_, a)| matches!(a, Answer::Response { upstream: true, .. }))
            .count()
    }

    /// The upstream's bytes split into as many requests under every reading as there were
    /// upstream answers; else what each reading counted.
    fn desync(&self) -> Option<String> {
        let answered = self.upstream_answers();
        let counts: Vec<(Reading, usize)> = Reading::ALL
            .iter()
            .map(|&r| (r, self.upstream.iter().map(|c| split(c, r).count).sum()))
            .collect();
        if counts.iter().all(|&(_, n)| n == answered) {
            return None;
        }
        let list: Vec<String> = counts.iter().map(|(r, n)| format!("{r:?}={n}")).collect();
        Some(format!(
            "the upstream read {} but the client got {answered} upstream answer(s)",
            list.join(" ")
        ))
    }
}

/// One request as an upstream received it, normalised for the comparison.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Upstreamed {
    method: String,
    /// As [`forwarded`] reads it (the bytes RFC 3986 never allows raw percent-encoded).
    target: String,
    version: String,
    /// Lowercased names, sorted; without the hop's own fields ([`OWN_HOP`]), the Host that
    /// names the proxy's own recorder as `UP`.
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

/// The fields each proxy sets for its own hop, whatever the client sent: nginx sends
/// `Connection: close`, sluice keeps its upstream connections and adds `X-Forwarded-For`.
const OWN_HOP: &[&str] = &["connection", "x-forwarded-for"];

/// The requests in one proxy's upstream bytes (`recorders`: that proxy's recorder addresses,
/// which its `Host` names).
fn upstreamed(conns: &[Vec<u8>], recorders: &[SocketAddr]) -> Vec<Upstreamed> {
    let mut out = Vec::new();
    for bytes in conns {
        let s = split(bytes, Reading::TeFirst);
        for (k, &start) in s.starts.iter().enumerate() {
            let end = s.starts.get(k + 1).copied().unwrap_or(bytes.len());
            let one = &bytes[start..end];
            let head_end = find(one, b"\r\n\r\n").map_or(one.len(), |i| i + 4);
            let Some(f) = forwarded(one).into_iter().next() else {
                continue;
            };
            let head = &one[..head_end];
            let line_end = find(head, b"\r\n").unwrap_or(head.len());
            let version = head[..line_end]
                .rsplit(|&b| b == b' ')
                .next()
                .map_or_else(String::new, text);
            let mut fields: Vec<(String, String)> = head[line_end..]
                .split(|&b| b == b'\n')
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .filter_map(|l| {
                    let colon = l.iter().position(|&b| b == b':')?;
                    // The value without the whitespace around it, which HTTP/1.1 does not count
                    // as part of it (RFC 9112 §5.1).
                    let v = ows_trimmed(&l[colon + 1..]);
                    Some((text(&l[..colon].to_ascii_lowercase()), text(v)))
                })
                .filter(|(n, _)| !OWN_HOP.contains(&n.as_str()))
                .map(|(n, v)| {
                    let own = recorders.iter().any(|a| a.to_string() == v);
                    let v = if n == "host" && own {
                        "UP".to_owned()
                    } else {
                        v
                    };
                    (n, v)
                })
                .collect();
            fields.sort();
            out.push(Upstreamed {
                method: f.method,
                target: f.target,
                version,
                fields,
                body: one[head_end..].to_vec(),
            });
        }
    }
    out.sort();
    out
}

/// `v` without the spaces and tabs at either end.
fn ows_trimmed(v: &[u8]) -> &[u8] {
    let ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = v.iter().position(|b| !ows(b)).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !ows(b)).map_or(start, |i| i + 1);
    &v[start..end]
}

/// Bytes as text, every byte outside printable ASCII as `\xNN`: two different bytes never read
/// the same, as they would through a lossy UTF-8 decoding.
fn text(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            s.push(char::from(b));
        } else {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

/// The same request, or the same but for a `#fragment` that sluice cut and nginx passed on raw
/// (hyper's URI cannot carry `#`; cutting sends less, never a request nginx refuses).
fn same_request(nginx: &Upstreamed, sluice: &Upstreamed) -> bool {
    let cut = nginx.target.split('#').next().unwrap_or("");
    nginx.method == sluice.method
        && (nginx.target == sluice.target || cut == sluice.target)
        && nginx.version == sluice.version
        && nginx.fields == sluice.fields
        && nginx.body == sluice.body
}

/// The requests of `sluice` not matched one for one in `nginx`, and those of `nginx` left over.
fn unmatched(nginx: &[Upstreamed], sluice: &[Upstreamed]) -> (Vec<Upstreamed>, Vec<Upstreamed>) {
    let mut left: Vec<Upstreamed> = nginx.to_vec();
    let mut extra = Vec::new();
    for s in sluice {
        match left.iter().position(|n| same_request(n, s)) {
            Some(i) => {
                left.remove(i);
            }
            None => extra.push(s.clone()),
        }
    }
    (extra, left)
}

fn show_request(r: &Upstreamed) -> String {
    let mut s = format!("{} {} {}", r.method, r.target, r.version);
    for (n, v) in &r.fields {
        let _ = write!(s, " | {n}: {v}");
    }
    if !r.body.is_empty() {
        let _ = write!(s, " | body \"{}\"", text(&r.body));
    }
    escape_controls(&s, 200)
}

fn escape_controls(s: &str, max: usize) -> String {
    let mut out = String::new();
    for ch in s.chars().take(max) {
        if ch.is_control() {
            let _ = write!(out, "\\x{:02x}", u32::from(ch));
        } else {
            out.push(ch);
        }
    }
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

/// Why sluice's outcome differs from nginx's (empty: the same).
fn differences(n: &Outcome, s: &Outcome, nu: &[Upstreamed], su: &[Upstreamed]) -> Vec<String> {
    let mut why = Vec::new();
    if n.verdict() != s.verdict() {
        why.push("answer".to_owned());
    }
    let (extra, missing) = unmatched(nu, su);
    if !extra.is_empty() {
        why.push(format!(
            "upstream got what nginx's did not: {}",
            extra
                .iter()
                .map(show_request)
                .collect::<Vec<_>>()
                .join(" ‖ ")
        ));
    }
    if !missing.is_empty() {
        why.push(format!(
            "upstream did not get: {}",
            missing
                .iter()
                .map(show_request)
                .collect::<Vec<_>>()
                .join(" ‖ ")
        ));
    }
    if let Some(d) = s.desync() {
        why.push(format!("desync: {d}"));
    }
    why
}

/// A difference that [`DELIBERATE`] allows: nginx gave the listed verdict, sluice the intended
/// one, in step with its upstream, which got nothing that nginx's did not, but the sibling
/// where nginx ended the connection before it (sluice, keeping the connection, serves it).
fn allowed(case: &str, n: &Outcome, s: &Outcome, nu: &[Upstreamed], su: &[Upstreamed]) -> bool {
    let nginx_served_sibling = nu.iter().any(|r| r.target == SIBLING);
    let (extra, _) = unmatched(nu, su);
    let extra_ok = match extra.as_slice() {
        [] => true,
        [r] => !nginx_served_sibling && r.method == "GET" && r.target == SIBLING,
        _ => false,
    };
    DELIBERATE.iter().any(|&(c, nv, sv, _)| {
        c == case && n.verdict() == nv && s.verdict() == sv && extra_ok && s.desync().is_none()
    })
}

/// The valid request conformance.py sends on stream 3 after most cases.
const SIBLING: &str = "/sibling";

/// One script line as an [`Outcome`] (upstream bytes and log lines are added later).
fn outcome(line: &str) -> Outcome {
    use serde_json::Value;
    let v: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("conformance.py wrote {line:?}: {e}"));
    let mut o = Outcome {
        goaway: v
            .get("goaway")
            .and_then(Value::as_u64)
            .and_then(|c| u32::try_from(c).ok()),
        closed: v.get("closed") == Some(&Value::Bool(true)),
        error: v.get("error").and_then(Value::as_str).map(str::to_owned),
        ..Outcome::default()
    };
    if let Some(streams) = v.get("streams").and_then(Value::as_object) {
        for (id, st) in streams {
            let id: u32 = id.parse().expect("a stream id");
            let num = |k: &str| st.get(k).and_then(Value::as_u64);
            let code = |k: &str| num(k).and_then(|c| u32::try_from(c).ok());
            let answer = match (num("status"), code("rst")) {
                (Some(status), reset) => Answer::Response {
                    status: u16::try_from(status).expect("a status"),
                    upstream: st.get("upstream") == Some(&Value::Bool(true)),
                    body: num("body").unwrap_or(0),
                    reset,
                },
                (None, Some(code)) => Answer::Reset(code),
                (None, None) => Answer::Nothing,
            };
            o.streams.push((id, answer));
        }
    }
    o.streams.sort_by_key(|(id, _)| *id);
    o
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/h2/conformance.py")
}

/// Panics, saying what to install, unless /usr/bin/python3 has `hpack` (python3-h2).
fn require_hpack() {
    let ok = std::process::Command::new(PYTHON)
        .args(["-c", "import hpack"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the HTTP/2 conformance suite needs {PYTHON} with the hpack package: run \
         scripts/test.sh (it installs it) or `apt-get install python3-h2`"
    );
}

/// The script's case names, in its order.
fn case_names() -> Vec<String> {
    let out = std::process::Command::new(PYTHON)
        .arg(script())
        .arg("--list")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {PYTHON} conformance.py --list: {e}"));
    assert!(
        out.status.success(),
        "conformance.py --list failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// One proxy under test.
struct Side {
    /// Its listeners, one per slot, each proxying to the recorder's port of the same slot.
    addrs: Vec<SocketAddr>,
    recorder: Recorder,
    /// The second byte of the cases' source addresses (127.N.x.y).
    net: u8,
}

impl Side {
    /// Case `i`'s source address: its own, so that log lines name their case.
    fn source(&self, i: usize) -> Ipv4Addr {
        let (hi, lo) = (i / 250, i % 250 + 1);
        Ipv4Addr::new(
            127,
            self.net,
            u8::try_from(hi).expect("fewer than 62500 cases"),
            u8::try_from(lo).expect("below 251"),
        )
    }

    fn recorders(&self) -> Vec<SocketAddr> {
        (0..SLOTS).map(|i| self.recorder.addr(i)).collect()
    }
}

/// Runs every case against one proxy, [`SLOTS`] at a time: one script process per slot, fed
/// case names on its stdin. Outcomes in case order, without log lines.
async fn run(side: Arc<Side>, names: Arc<Vec<String>>) -> Vec<Outcome> {
    let next = Arc::new(AtomicUsize::new(0));
    let out = Arc::new(Mutex::new(vec![Outcome::default(); names.len()]));
    let mut tasks = Vec::new();
    for slot in 0..SLOTS {
        let (side, names, next, out) = (
            Arc::clone(&side),
            Arc::clone(&names),
            Arc::clone(&next),
            Arc::clone(&out),
        );
        tasks.push(tokio::spawn(async move {
            let mut child = Command::new(PYTHON)
                .arg(script())
                .arg("--target")
                .arg(side.addrs[slot].to_string())
                .arg("--serve")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {PYTHON} conformance.py: {e}"));
            let mut stdin = child.stdin.take().expect("piped stdin");
            let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(name) = names.get(i) else { break };
                // Leftovers of an earlier case on this slot (there should be none).
                side.recorder.take(slot);
                let ask = format!("{name}\t{}\n", side.source(i));
                stdin.write_all(ask.as_bytes()).await.expect("write a case");
                let line = tokio::time::timeout(CASE_LIMIT, lines.next_line())
                    .await
                    .unwrap_or_else(|_| panic!("conformance.py took over {CASE_LIMIT:?} on {name}"))
                    .expect("read conformance.py's output");
                let Some(line) = line else {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        let _ = e.read_to_string(&mut err).await;
                    }
                    panic!("conformance.py ended on case {name}:\n{err}");
                };
                tokio::time::sleep(GRACE).await;
                let mut o = outcome(&line);
                o.upstream = side.recorder.take(slot);
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = o;
            }
            drop(stdin);
            let _ = child.wait().await;
        }));
    }
    for t in tasks {
        t.await.expect("a slot's task");
    }
    std::mem::take(&mut *out.lock().unwrap_or_else(|e| e.into_inner()))
}

/// An error log's lines by the client address they name (`client: 127.N.x.y,`). A line that
/// does not start with a date continues the one before: nginx writes what the client sent as it
/// is, and a LF in a header value breaks its line.
fn lines_by_client(log: &str) -> BTreeMap<IpAddr, Vec<String>> {
    let starts_entry = |l: &str| {
        let b = l.as_bytes();
        b.len() > 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'/' && b[7] == b'/'
    };
    let mut entries: Vec<String> = Vec::new();
    for line in log.lines() {
        match entries.last_mut() {
            Some(last) if !starts_entry(line) => {
                last.push('\n');
                last.push_str(line);
            }
            _ => entries.push(line.to_owned()),
        }
    }
    let mut by: BTreeMap<IpAddr, Vec<String>> = BTreeMap::new();
    for line in entries {
        let Some(at) = line.find(", client: ") else {
            continue;
        };
        let ip = line[at + 10..].split([',', ' ']).next().unwrap_or("");
        if let Ok(ip) = ip.parse::<IpAddr>() {
            by.entry(ip).or_default().push(short_log(&line));
        }
    }
    by
}

/// An error-log line's event: from the level up to its context (`, server: …`), so that
/// `[info] client sent invalid method: "get" while reading client request headers` is compared
/// whole, the phase included.
fn log_event(short: &str) -> &str {
    short.split(", server:").next().unwrap_or(short)
}

/// An error-log line from its level on, without the pid, connection number and client address
/// (each case has its own), control bytes escaped.
fn short_log(line: &str) -> String {
    let line = &line[line.find('[').unwrap_or(0)..];
    let (level, msg) = line.split_once(' ').unwrap_or((line, ""));
    // nginx: `2089#2089: *5 message`; sluice writes the same shape.
    let msg = match msg.split_once(": ") {
        Some((pid, rest)) if pid.contains('#') => rest,
        _ => msg,
    };
    let msg = match msg.strip_prefix('*') {
        Some(m) => m.split_once(' ').map_or(m, |(_, m)| m),
        None => msg,
    };
    let msg = match msg.split_once(", client: ") {
        Some((head, tail)) => match tail.split_once(", ") {
            Some((_, rest)) => format!("{head}, {rest}"),
            None => head.to_owned(),
        },
        None => msg.to_owned(),
    };
    format!("{level} {}", escape_controls(&msg, 240))
}

/// The inside of nginx's `http { }`: one `listen … http2` server per slot (addresses reserved
/// here: the harness's own listen has no `http2`), each proxying with HTTP/1.1 as sluice does;
/// and the server without `listen` the harness wants, idle.
fn nginx_http(ports: &[Port], recorder: &Recorder) -> String {
    let mut s = String::new();
    for (slot, port) in ports.iter().enumerate() {
        let _ = writeln!(
            s,
            "  server {{\n    listen {} http2;\n    location / {{ proxy_pass http://{}; \
             proxy_http_version 1.1; }}\n  }}",
            port.addr(),
            recorder.addr(slot)
        );
    }
    s.push_str("  server { return 444; }\n");
    s
}

/// sluice's equivalent: `http2 = true` servers (h2c with prior knowledge), defaults otherwise.
fn sluice_toml(recorder: &Recorder) -> String {
    let mut s = String::new();
    for slot in 0..SLOTS {
        let _ = write!(
            s,
            "[[servers]]\nhttp2 = true\nproxy_pass = \"http://{}\"\n\n",
            recorder.addr(slot)
        );
    }
    s
}

/// Every case's outcome on both proxies, as markdown (`H2_CONFORMANCE_TABLE`).
fn table(
    names: &[String],
    rows: &[(&Outcome, Vec<Upstreamed>, &Outcome, Vec<Upstreamed>)],
) -> String {
    let mut t = String::from(
        "# HTTP/2 conformance: nginx 1.22 and sluice\n\n\
         Generated by `H2_CONFORMANCE_TABLE=FILE cargo test --release --test it h2::conformance` \
         (cases in tests/it/h2/conformance.py). Streams: `N=STATUS` (`↑` from the upstream, \
         body bytes), `RST(CODE)`, `none`; then the connection. Upstream: the requests it got \
         (without Connection and X-Forwarded-For; `UP` is the proxy's upstream).\n\n\
         | case | nginx | nginx upstream | nginx log | sluice | sluice upstream | sluice log |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let cell = |s: &str| s.replace('|', "\\|");
    for (name, (n, nu, s, su)) in names.iter().zip(rows) {
        let ups = |u: &[Upstreamed]| {
            let v: Vec<String> = u.iter().map(|r| cell(&show_request(r))).collect();
            if v.is_empty() {
                "∅".to_owned()
            } else {
                v.join("<br>")
            }
        };
        let logs = |o: &Outcome| {
            if o.log.is_empty() {
                "—".to_owned()
            } else {
                cell(&o.log.join("<br>"))
            }
        };
        let _ = writeln!(
            t,
            "| {name} | {} | {} | {} | {} | {} | {} |",
            cell(&n.describe()),
            ups(nu),
            logs(n),
            cell(&s.describe()),
            ups(su),
            logs(s)
        );
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sluice_answers_hostile_h2_requests_as_nginx() {
    require_hpack();
    // 16 connections at a time through two proxies, and 16 Python processes: no latency
    // comparison may run meanwhile.
    let _heavy = heavy();
    let names = Arc::new(case_names());
    assert!(names.len() >= 120, "only {} cases", names.len());

    let nginx_rec = Recorder::start(SLOTS);
    let sluice_rec = Recorder::start(SLOTS);
    let ports: Vec<Port> = (0..SLOTS).map(|_| Port::reserve()).collect();
    let nginx = Nginx::start(&nginx_http(&ports, &nginx_rec));
    let sluice = Sluice::start(&sluice_toml(&sluice_rec));
    let start = Instant::now();
    let nginx_side = Arc::new(Side {
        addrs: ports.iter().map(Port::addr).collect(),
        recorder: nginx_rec,
        net: 1,
    });
    let sluice_side = Arc::new(Side {
        addrs: sluice.addrs(),
        recorder: sluice_rec,
        net: 2,
    });
    let (mut n, mut s) = tokio::join!(
        run(Arc::clone(&nginx_side), Arc::clone(&names)),
        run(Arc::clone(&sluice_side), Arc::clone(&names))
    );
    let elapsed = start.elapsed();
    let (nginx_log, sluice_log) = (
        lines_by_client(&nginx.error_log()),
        lines_by_client(&sluice.log()),
    );
    for (i, o) in n.iter_mut().enumerate() {
        o.log = nginx_log
            .get(&IpAddr::V4(nginx_side.source(i)))
            .cloned()
            .unwrap_or_default();
    }
    for (i, o) in s.iter_mut().enumerate() {
        o.log = sluice_log
            .get(&IpAddr::V4(sluice_side.source(i)))
            .cloned()
            .unwrap_or_default();
    }
    let (n_rec, s_rec) = (nginx_side.recorders(), sluice_side.recorders());
    let rows: Vec<_> = n
        .iter()
        .zip(&s)
        .map(|(n, s)| {
            (
                n,
                upstreamed(&n.upstream, &n_rec),
                s,
                upstreamed(&s.upstream, &s_rec),
            )
        })
        .collect();
    if let Some(path) = std::env::var_os("H2_CONFORMANCE_TABLE") {
        std::fs::write(&path, table(&names, &rows)).expect("write the table");
    }

    // The harness first: nginx answers what it is known to answer, reads each case without the
    // script failing, and its upstream is in step with its answers.
    for (case, want) in PINNED {
        let i = names
            .iter()
            .position(|c| c == case)
            .unwrap_or_else(|| panic!("pinned case {case} is not in conformance.py"));
        assert_eq!(n[i].verdict(), *want, "nginx on pinned case {case}");
    }
    let broken: Vec<String> = names
        .iter()
        .zip(&n)
        .filter_map(|(c, o)| {
            let why = o.error.clone().or_else(|| o.desync())?;
            Some(format!("{c}: {why}"))
        })
        .collect();
    assert!(
        broken.is_empty(),
        "the harness, on nginx:\n{}",
        broken.join("\n")
    );
    for (case, nv, ..) in DELIBERATE {
        let i = names
            .iter()
            .position(|c| c == case)
            .unwrap_or_else(|| panic!("DELIBERATE names {case}, not in conformance.py"));
        assert_eq!(
            n[i].verdict(),
            *nv,
            "DELIBERATE says what nginx answers to {case}: it answers otherwise now"
        );
    }

    let mut failed = String::new();
    let mut allowed_rows = Vec::new();
    let mut count = 0;
    for (name, (n, nu, s, su)) in names.iter().zip(&rows) {
        let why = differences(n, s, nu, su);
        if why.is_empty() {
            continue;
        }
        if allowed(name, n, s, nu, su) {
            allowed_rows.push(name.as_str());
            continue;
        }
        count += 1;
        let _ = writeln!(
            failed,
            "{name}\n    nginx   {}\n    sluice  {}\n    why     {}",
            n.describe(),
            s.describe(),
            why.join("; ")
        );
        for (who, o, u) in [("nginx", n, nu), ("sluice", s, su)] {
            for r in u {
                let _ = writeln!(failed, "    {who:<7} ↑ {}", show_request(r));
            }
            for l in &o.log {
                let _ = writeln!(failed, "    {who:<7} {l}");
            }
        }
    }
    eprintln!(
        "h2 conformance: {} cases on nginx and sluice in {:.1} s; {count} differ, {} allowed \
         (DELIBERATE): {}",
        names.len(),
        elapsed.as_secs_f64(),
        allowed_rows.len(),
        allowed_rows.join(", ")
    );
    // Not asserted (sluice writes nginx's words where it can, config/operations.md "Security"), but worth
    // seeing: where nginx logged a case and sluice's first line says otherwise, or nothing.
    let wording: Vec<String> = names
        .iter()
        .zip(&rows)
        .filter_map(|(name, (n, _, s, _))| {
            let a = log_event(n.log.first()?);
            let b = s.log.first().map_or("(nothing)", |l| log_event(l));
            (a != b).then(|| format!("{name}\n    nginx   {a}\n    sluice  {b}"))
        })
        .collect();
    if !wording.is_empty() {
        eprintln!(
            "error-log lines worded otherwise (not asserted), {} case(s):\n{}",
            wording.len(),
            wording.join("\n")
        );
    }
    assert!(
        failed.is_empty(),
        "{count} of {} HTTP/2 cases differ from nginx (verdicts: each stream, then the \
         connection; ↑ = answered by the upstream):\n{failed}",
        names.len()
    );
}

/// The comparison on made-up outcomes: another answer, a request nginx refused reaching the
/// upstream, a different forwarded field, are caught; a cut fragment, the proxies' own hop
/// fields and a deliberate refusal are not.
#[test]
fn differences_catch_answers_and_forwarding() {
    let rec: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let answer = |status, upstream| Answer::Response {
        status,
        upstream,
        body: 3,
        reset: None,
    };
    let o = |streams: Vec<(u32, Answer)>, goaway, closed, up: &[&[u8]]| Outcome {
        streams,
        goaway,
        closed,
        upstream: up.iter().map(|b| b.to_vec()).collect(),
        ..Outcome::default()
    };
    let sibling: &[u8] = b"GET /sibling HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: close\r\n\r\n";
    let get: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: close\r\nx-a: 1\r\n\r\n";
    let both = o(
        vec![(1, answer(200, true)), (3, answer(200, true))],
        None,
        false,
        &[get, sibling],
    );
    let reset = o(
        vec![(1, Answer::Reset(PROTOCOL_ERROR)), (3, answer(200, true))],
        None,
        false,
        &[sibling],
    );
    let cmp = |a: &Outcome, b: &Outcome| {
        differences(
            a,
            b,
            &upstreamed(&a.upstream, &[rec]),
            &upstreamed(&b.upstream, &[rec]),
        )
    };
    assert_eq!(both.verdict(), "1=200↑ 3=200↑ open");
    assert_eq!(reset.verdict(), "1=RST(PROTOCOL_ERROR) 3=200↑ open");
    assert!(cmp(&both, &both).is_empty());

    // Forwarded what nginx reset: another answer, a request nginx's upstream did not get.
    let why = cmp(&reset, &both);
    assert_eq!(why[0], "answer");
    assert!(
        why[1].starts_with("upstream got what nginx's did not: GET / HTTP/1.1"),
        "{why:?}"
    );

    // The same answers, another field forwarded (nginx dropped `x_a`, say).
    let under: &[u8] =
        b"GET / HTTP/1.1\r\nhost: 127.0.0.1:9\r\nx-forwarded-for: 127.0.0.1\r\nx-a: 1\r\nx_a: 2\r\n\r\n";
    let more = o(
        vec![(1, answer(200, true)), (3, answer(200, true))],
        None,
        false,
        &[&[under, sibling].concat()],
    );
    assert!(
        cmp(&both, &more)[0].contains("x_a: 2"),
        "{:?}",
        cmp(&both, &more)
    );

    // sluice's own hop fields, and a cut fragment, are no difference.
    let frag_n: &[u8] = b"GET /a#f HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: close\r\n\r\n";
    let frag_s: &[u8] =
        b"GET /a HTTP/1.1\r\nhost: 127.0.0.1:9\r\nconnection: keep-alive\r\nx-forwarded-for: 127.0.0.1\r\n\r\n";
    let one = |b: &[u8]| o(vec![(1, answer(200, true))], None, false, &[b]);
    assert!(cmp(&one(frag_n), &one(frag_s)).is_empty());

    // A connection ended instead of a stream.
    let goaway = o(
        vec![(1, Answer::Nothing), (3, Answer::Nothing)],
        Some(PROTOCOL_ERROR),
        true,
        &[],
    );
    assert_eq!(
        goaway.verdict(),
        "1=none 3=none GOAWAY(PROTOCOL_ERROR) closed"
    );
    assert_eq!(
        cmp(&reset, &goaway),
        vec![
            "answer".to_owned(),
            format!(
                "upstream did not get: {}",
                show_request(&upstreamed(&[sibling.to_vec()], &[rec])[0])
            )
        ]
    );

    // A deliberate refusal: allowed only with the listed verdicts and nothing extra upstream.
    let refused = o(
        vec![(1, Answer::Reset(PROTOCOL_ERROR)), (3, answer(200, true))],
        None,
        false,
        &[sibling],
    );
    let nu = upstreamed(&both.upstream, &[rec]);
    let su = upstreamed(&refused.upstream, &[rec]);
    assert!(allowed("framing/te-gzip", &both, &refused, &nu, &su));
    assert!(!allowed("valid/get", &both, &refused, &nu, &su));
    assert!(!allowed(
        "framing/te-gzip",
        &both,
        &more,
        &nu,
        &upstreamed(&more.upstream, &[rec])
    ));
    // Where nginx ended the connection, sluice may serve the sibling, and nothing else.
    let calm = o(
        vec![(1, Answer::Nothing), (3, Answer::Nothing)],
        Some(11),
        true,
        &[],
    );
    let answered = |extra: &[&[u8]]| {
        o(
            vec![
                (
                    1,
                    Answer::Response {
                        status: 400,
                        upstream: false,
                        body: 0,
                        reset: None,
                    },
                ),
                (3, answer(200, true)),
            ],
            None,
            false,
            extra,
        )
    };
    let kept = answered(&[sibling]);
    let leaked = answered(&[&[get, sibling].concat()]);
    let cu = upstreamed(&calm.upstream, &[rec]);
    assert!(allowed(
        "values/9k",
        &calm,
        &kept,
        &cu,
        &upstreamed(&kept.upstream, &[rec])
    ));
    assert!(!allowed(
        "values/9k",
        &calm,
        &leaked,
        &cu,
        &upstreamed(&leaked.upstream, &[rec])
    ));

    // A RST_STREAM(NO_ERROR) after a complete answer is not compared; another code is.
    let mut late = reset.clone();
    late.streams[0].1 = Answer::Response {
        status: 400,
        upstream: false,
        body: 157,
        reset: Some(NO_ERROR),
    };
    assert_eq!(late.verdict(), "1=400 3=200↑ open");
}

#[test]
fn json_reads_the_script_lines() {
    let o = outcome(
        r#"{"case": "x", "streams": {"1": {"status": 400, "body": 157, "upstream": false, "rst": 0}, "3": {"none": true}, "5": {"rst": 1}}, "goaway": 11, "goaway_last": 1, "closed": true, "seconds": 0.002, "error": null}"#,
    );
    assert_eq!(
        o.verdict(),
        "1=400 3=none 5=RST(PROTOCOL_ERROR) GOAWAY(ENHANCE_YOUR_CALM) closed"
    );
    let e = outcome(
        r#"{"case": "y", "streams": {}, "goaway": null, "closed": false, "error": "no SETTINGS \u00e9\n"}"#,
    );
    assert_eq!(e.error.as_deref(), Some("no SETTINGS é\n"));
}
