//! Differential conformance: raw, often hostile, request bytes sent to real nginx 1.22 and to
//! sluice, both proxying to the same kind of recording upstream ([`Recorder`]).
//!
//! Per case ([`cases`]) the suite asserts:
//! - (a) the same verdict: the statuses answered, in order (a 2xx from the upstream when
//!   forwarded, the proxy's own status when refused, none when the connection is closed without a
//!   response), and whether the connection was closed afterwards;
//! - (b) nothing reaches sluice's upstream that nginx refuses (sluice never forwards more
//!   requests than nginx);
//! - (c) sluice's upstream bytes split into the same number of requests under every
//!   [`Reading`] (lenient, CL-first, TE-first, `_` mapped to `-`), and that number is the
//!   number of upstream answers the client received: no request that sluice did not see,
//!   limit and log (and every 429 has its `limiting requests` error-log line);
//! - (d) where both forwarded the same number of requests, each has the same method and target
//!   as nginx's (sluice may cut a `#fragment` nginx passes on), and carries no client header
//!   that nginx dropped (`X_Foo`, `X.Foo`, ...).
//!
//! nginx runs with its defaults (`proxy_http_version` stays 1.0: nginx buffers request bodies
//! and sends them with Content-Length, so HTTP/1.1 towards the upstream is not needed for any
//! case). Both proxies get the same configuration: per slot a server whose `/` proxies to the
//! slot's recorder port, and `/limited/` behind a `$remote_addr:$remote_port` zone at 1r/m (on one
//! connection, the first request passes and every later one is refused with 429) so that
//! pipelined cases also check "requests the limiter passed = requests the upstream read".
//!
//! Cases run concurrently, one per slot at a time: each slot has its own listen port on each
//! proxy, its own recorder port and its own client source address (which attributes error-log
//! lines), so whatever reaches a slot's recorder during a case is that case's.
//!
//! `nginx_table` (ignored; run it with `CONFORMANCE_NGINX_TABLE=FILE cargo test --test it
//! nginx_table -- --ignored`) writes nginx's answer to every case as a markdown table.

mod cases;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::support::raw::{Exchange, Response, escape, exchange, responses};
use crate::support::readings::{Reading, forwarded, split};
use crate::support::recorder::Recorder;
use crate::support::{Nginx, Sluice, heavy};
use cases::Case;

/// Cases in flight at once, per proxy.
const SLOTS: usize = 32;
/// A connection still open after this much silence (after the client's last step) has said
/// all it will: keep-alive after a response, or a proxy still waiting for more.
const IDLE: Duration = Duration::from_millis(400);
/// The idle wait when a mismatch is checked again: a loaded machine (two cores shared with
/// builds) may take longer than [`IDLE`] to answer, and a late answer must not pass for "no
/// answer". A mismatch counts only when it is seen twice.
const IDLE_RECHECK: Duration = Duration::from_millis(1500);
/// Above this many mismatches the suite fails without checking them again (the result would
/// not change, only take longer).
const RECHECK_MAX: usize = 150;
/// The longest one case may take.
const LIMIT: Duration = Duration::from_secs(5);
/// After a case, before its upstream bytes and log lines are collected.
const GRACE: Duration = Duration::from_millis(60);

/// Why sluice deliberately refuses a case that nginx forwards (never the other way round), or
/// None. The suite accepts such a case only when nginx forwarded it, and sluice refused it and
/// sent its upstream nothing; any other difference on it still fails. The reasons are
/// src/http1/head/'s and config/operations.md "Security"'s.
fn stricter(case: &str) -> Option<&'static str> {
    const HTTP09: &str = "HTTP/0.9 is refused (nginx proxies it and answers without headers)";
    const CONTROL: &str = "control bytes other than tab in a header value are refused (nginx \
                           forwards them; hyper and most backends cannot represent them)";
    const COUNT: &str = "at most 100 header fields (hyper's limit; nginx counts only bytes, \
                         and this nginx build 1000 lines)";
    match case {
        "HTTP/0.9 simple request" | "HTTP/0.9 simple request space" | "HTTP/0.9 bare LF" => {
            Some(HTTP09)
        }
        // `GET /a\nb HTTP/1.1`: the LF ends an HTTP/0.9 request line `GET /a`.
        "target byte 0x0a" => Some(HTTP09),
        "value SOH" | "value ESC" | "value DEL" => Some(CONTROL),
        _ => {
            if let Some(hex) = case.strip_prefix("header value byte 0x") {
                let b = u8::from_str_radix(hex, 16).ok()?;
                // LF ends the line and CR is refused by nginx too: neither is "stricter".
                return ((b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || b == 0x7f)
                    .then_some(CONTROL);
            }
            let n: usize = case.strip_suffix(" headers")?.parse().ok()?;
            // The case sends Host and n more fields.
            (n + 1 > 100).then_some(COUNT)
        }
    }
}

/// Why a case's verdict may differ in one exact, deliberate way that refuses nothing more and
/// forwards nothing more (config/nginx.md "Where sluice differs from nginx on purpose"), or None.
/// `(nginx, sluice)` are the two verdicts this allows; the upstream must have read the same.
fn deliberate(case: &str) -> Option<(&'static str, &'static str, &'static str)> {
    const CLOSE_413: &str = "a 413 closes the connection (nginx keeps it and discards the \
                             announced body, which can be any size)";
    match case {
        "CL \"1048577\"" | "CL \"9223372036854775807\"" => {
            Some(("413 open", "413 closed", CLOSE_413))
        }
        "after CL too large then GET" => Some(("413 open", "413 closed", CLOSE_413)),
        "Expect 100-continue no body" => Some((
            "100,200 open",
            "200 open",
            "100 Continue only before a body is read (RFC 9110 lets a server answer at once)",
        )),
        // The recorder answers 200: an ordinary response, and the connection goes on.
        "Connection upgrade" => Some((
            "200 open",
            "200 open",
            "an upgrade request goes with its Upgrade (as nginx's does with the usual \
             `proxy_set_header Upgrade $http_upgrade`, which this nginx runs without)",
        )),
        _ => None,
    }
}

/// What one proxy did with one case.
#[derive(Clone, Debug, Default)]
struct Outcome {
    exchange: Exchange,
    responses: Vec<Response>,
    /// Bytes received by the recorder, per upstream connection.
    upstream: Vec<Vec<u8>>,
    /// The proxy's error-log lines for the case's client address.
    log: Vec<String>,
}

impl Outcome {
    /// The verdict compared between the proxies: statuses in order, then whether the
    /// connection was closed.
    fn verdict(&self) -> String {
        let mut s: Vec<String> = self
            .responses
            .iter()
            .map(|r| match r.status {
                0 => "raw".to_owned(),
                n => n.to_string(),
            })
            .collect();
        if s.is_empty() {
            s.push("none".to_owned());
        }
        let end = if self.exchange.closed {
            "closed"
        } else if self.exchange.timed_out {
            "timeout"
        } else {
            "open"
        };
        format!("{} {end}", s.join(","))
    }

    /// Requests the upstream read under each reading, summed over its connections.
    fn counts(&self) -> Vec<(Reading, usize)> {
        Reading::ALL
            .iter()
            .map(|&r| (r, self.upstream.iter().map(|c| split(c, r).count).sum()))
            .collect()
    }

    fn upstream_answers(&self) -> usize {
        self.responses.iter().filter(|r| r.upstream).count()
    }

    /// (c): every reading agrees, and with the answers the client got from the upstream.
    fn desync(&self) -> Option<String> {
        let counts = self.counts();
        let answered = self.upstream_answers();
        if counts.iter().all(|&(_, n)| n == answered) {
            return None;
        }
        let list: Vec<String> = counts.iter().map(|(r, n)| format!("{r:?}={n}")).collect();
        Some(format!(
            "upstream read {} but the client got {answered} upstream answer(s)",
            list.join(" ")
        ))
    }

    fn max_count(&self) -> usize {
        self.counts().iter().map(|&(_, n)| n).max().unwrap_or(0)
    }

    /// The verdict and how many requests the upstream read, for the mismatch table.
    fn summary(&self) -> String {
        format!("{} ↑{}", self.verdict(), self.max_count())
    }

    /// Forwarded: every answer came from the upstream.
    fn forwarded(&self) -> bool {
        !self.responses.is_empty() && self.responses.iter().all(|r| r.upstream)
    }

    fn limited(&self) -> (usize, usize) {
        let answers = self.responses.iter().filter(|r| r.status == 429).count();
        let logged = self
            .log
            .iter()
            .filter(|l| l.contains("limiting requests"))
            .count();
        (answers, logged)
    }
}

/// One proxy under test: its listen address per slot, and its error log.
struct Side {
    addrs: Vec<SocketAddr>,
    recorder: Arc<Recorder>,
    log: PathBuf,
    /// Client source address of slot `i` is `127.0.0.(first_source + i)`.
    first_source: u8,
}

/// Runs every case against one proxy, `SLOTS` at a time. Returns outcomes in case order.
async fn run(side: Arc<Side>, cases: Arc<Vec<Case>>, idle: Duration) -> Vec<Outcome> {
    let next = Arc::new(Mutex::new(0usize));
    let out = Arc::new(Mutex::new(vec![Outcome::default(); cases.len()]));
    let tail = LogTail::start(side.log.clone());
    let mut tasks = Vec::new();
    for slot in 0..side.addrs.len() {
        let (side, cases, next, out, tail) = (
            Arc::clone(&side),
            Arc::clone(&cases),
            Arc::clone(&next),
            Arc::clone(&out),
            Arc::clone(&tail),
        );
        tasks.push(tokio::spawn(async move {
            let source = IpAddr::V4(Ipv4Addr::new(
                127,
                0,
                0,
                side.first_source + u8::try_from(slot).expect("slots fit in a byte"),
            ));
            loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    let i = *n;
                    *n += 1;
                    i
                };
                let Some(case) = cases.get(i) else { break };
                // Leftovers of an earlier case on this slot (there should be none).
                side.recorder.take(slot);
                tail.take(source);
                let ex = exchange(side.addrs[slot], source, &case.steps, idle, LIMIT).await;
                tokio::time::sleep(GRACE).await;
                let o = Outcome {
                    responses: responses(&ex.bytes),
                    exchange: ex,
                    upstream: side.recorder.take(slot),
                    log: tail.take(source),
                };
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = o;
            }
        }));
    }
    for t in tasks {
        t.await.expect("slot task");
    }
    std::mem::take(&mut *out.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Follows a log file and hands out its lines by the client address they name
/// (`client: 127.0.0.N,`).
struct LogTail {
    lines: Mutex<HashMap<IpAddr, Vec<String>>>,
    path: PathBuf,
    offset: Mutex<u64>,
}

impl LogTail {
    fn start(path: PathBuf) -> Arc<LogTail> {
        let t = Arc::new(LogTail {
            lines: Mutex::default(),
            path,
            offset: Mutex::new(0),
        });
        t.poll();
        t
    }

    /// Reads what the file gained since the last poll.
    fn poll(&self) {
        use std::io::{Read, Seek, SeekFrom};
        let mut offset = self.offset.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return;
        };
        if f.seek(SeekFrom::Start(*offset)).is_err() {
            return;
        }
        let mut new = Vec::new();
        if f.read_to_end(&mut new).is_err() {
            return;
        }
        // Only whole lines; a partly written one waits for the next poll.
        let Some(last_nl) = new.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        *offset += (last_nl + 1) as u64;
        let text = String::from_utf8_lossy(&new[..=last_nl]).into_owned();
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        for line in text.lines() {
            let Some(at) = line.find("client: ") else {
                continue;
            };
            let rest = &line[at + 8..];
            let ip = rest.split([',', ' ']).next().unwrap_or("");
            if let Ok(ip) = ip.parse::<IpAddr>() {
                lines.entry(ip).or_default().push(line.to_owned());
            }
        }
    }

    fn take(&self, ip: IpAddr) -> Vec<String> {
        self.poll();
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ip)
            .unwrap_or_default()
    }
}

/// The inside of nginx's `http { }` for the slots (one server each, the harness gives them
/// their ports in slot order): nginx's defaults otherwise.
fn nginx_http(recorder: &Recorder) -> String {
    let mut s = String::from(
        "  limit_req_zone $remote_addr:$remote_port zone=lim:1m rate=1r/m;\n  limit_req_status 429;\n",
    );
    for slot in 0..SLOTS {
        let up = recorder.addr(slot);
        let _ = writeln!(
            s,
            "  server {{\n    location / {{ proxy_pass http://{up}; }}\n    \
             location /limited/ {{ limit_req zone=lim; proxy_pass http://{up}; }}\n  }}"
        );
    }
    s
}

/// sluice's equivalent of [`nginx_http`].
fn sluice_toml(recorder: &Recorder) -> String {
    let mut s = String::from(
        "limit_req_status = 429\n\n[zones.lim]\nkey = \"$remote_addr:$remote_port\"\nsize = \"1m\"\nrate = \"1r/m\"\n\n",
    );
    for i in 0..SLOTS {
        let up = recorder.addr(i);
        let _ = write!(
            s,
            "[[servers]]\nproxy_pass = \"http://{up}\"\n\
             [[servers.locations]]\npath = \"/\"\n\
             [[servers.locations]]\npath = \"/limited/\"\nlimit_req = {{ zone = \"lim\" }}\n\n"
        );
    }
    s
}

/// `bytes` for a table cell: escaped, the recorder's port replaced by `UP` so that rows do
/// not depend on the slot.
fn cell(bytes: &[u8], max: usize, recorder_ports: &[u16]) -> String {
    let mut s = escape(bytes, max);
    for p in recorder_ports {
        s = s.replace(&format!("127.0.0.1:{p}"), "UP");
    }
    md(&s)
}

fn md(s: &str) -> String {
    s.replace('|', "\\|")
}

/// An error-log line without its time, pid and connection number, and without the client
/// address (the slot's): `[info] client sent invalid method while reading client request line,
/// server: , request: "..."`.
/// `[level] event` of an error-log line: the message up to its context (` while …`, `, client:`,
/// `: "…"`).
fn log_event(line: &str) -> String {
    let short = short_log(line);
    let end = [" while ", ", server:", ": \"", ", client:"]
        .iter()
        .filter_map(|m| short.find(m))
        .min()
        .unwrap_or(short.len());
    short[..end].to_owned()
}

fn short_log(line: &str) -> String {
    let level_at = line.find('[').unwrap_or(0);
    let rest = &line[level_at..];
    let (level, msg) = rest.split_once(' ').unwrap_or((rest, ""));
    let msg = msg
        .split_once(": ")
        .map_or(msg, |(pid, m)| if pid.contains('#') { m } else { msg });
    let msg = match msg.strip_prefix('*') {
        Some(m) => m.split_once(' ').map_or(m, |(_, m)| m),
        None => msg,
    };
    let msg = msg
        .split(", client: ")
        .next()
        .map(|head| {
            let tail = msg
                .split_once(", client: ")
                .map(|(_, t)| t.split_once(", ").map_or("", |(_, t)| t))
                .unwrap_or("");
            if tail.is_empty() {
                head.to_owned()
            } else {
                format!("{head}, {tail}")
            }
        })
        .unwrap_or_default();
    // nginx writes the request line as received: control bytes would break the table.
    let msg: String = msg
        .chars()
        .take(240)
        .map(|ch| {
            if ch.is_control() {
                format!("\\x{:02x}", u32::from(ch))
            } else {
                ch.to_string()
            }
        })
        .collect();
    format!("{level} {msg}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "writes nginx's answers as a table: CONFORMANCE_NGINX_TABLE=FILE ... -- --ignored"]
async fn nginx_table() {
    let _heavy = heavy();
    let path = std::env::var_os("CONFORMANCE_NGINX_TABLE")
        .map(PathBuf::from)
        .expect("CONFORMANCE_NGINX_TABLE=FILE: where to write the table");
    let cases = Arc::new(cases::all());
    assert_unique(&cases);
    let recorder = Arc::new(Recorder::start(SLOTS));
    let nginx = Nginx::start(&nginx_http(&recorder));
    let start = Instant::now();
    let side = Arc::new(Side {
        addrs: nginx.addrs(),
        recorder: Arc::clone(&recorder),
        log: nginx.prefix().join("logs/error.log"),
        first_source: 10,
    });
    let outcomes = run(side, Arc::clone(&cases), IDLE).await;
    let elapsed = start.elapsed();
    let rec_ports: Vec<u16> = (0..SLOTS).map(|i| recorder.addr(i).port()).collect();

    let mut t = String::new();
    let _ = writeln!(
        t,
        "# nginx 1.22 answers to the conformance cases\n\n\
         Generated by `CONFORMANCE_NGINX_TABLE=FILE cargo test --test it nginx_table -- --ignored` \
         (tests/it/conformance.rs, cases in tests/it/conformance/cases.rs); {} cases in {:.1} s.\n\n\
         nginx: defaults (`large_client_header_buffers 4 8k`, `client_header_buffer_size 1k`, \
         `underscores_in_headers off`, `ignore_invalid_headers on`, `client_max_body_size 1m`, \
         `proxy_http_version 1.0`), `location / {{ proxy_pass http://UP; }}`, and \
         `location /limited/ {{ limit_req zone=lim; ... }}` with `limit_req_zone $remote_addr:$remote_port \
         zone=lim:1m rate=1r/m; limit_req_status 429;`. error_log at info.\n\n\
         Columns: **status** = statuses nginx sent in order (`none` = no response; `raw` = bytes \
         that are not an HTTP/1.x response, an HTTP/0.9 answer), then `closed` (nginx closed the \
         connection), `open` (still open {} ms after the client's last byte) or `timeout`. \
         **upstream** = what the recording upstream received, per upstream connection (`‖` \
         separates connections, `UP` is the upstream address, `∅` = nothing). Bytes are escaped \
         (`\\r \\n \\t \\0 \\xNN`, `c{{×N}}` = N times c, `⏸Nms` a pause, `⟂` the client's \
         half-close). **log** = nginx's error-log lines for the connection, without time, pid, \
         connection number and client address.\n",
        cases.len(),
        elapsed.as_secs_f64(),
        IDLE.as_millis()
    );
    let mut group = "";
    for (case, o) in cases.iter().zip(&outcomes) {
        if case.group != group {
            group = case.group;
            let _ = writeln!(
                t,
                "\n## {group}\n\n| case | bytes sent | status | upstream | log |\n|---|---|---|---|---|"
            );
        }
        let upstream = if o.upstream.is_empty() {
            "∅".to_owned()
        } else {
            o.upstream
                .iter()
                .map(|c| cell(c, 160, &rec_ports))
                .collect::<Vec<_>>()
                .join(" ‖ ")
        };
        let log = if o.log.is_empty() {
            "—".to_owned()
        } else {
            o.log
                .iter()
                .map(|l| md(&short_log(l)))
                .collect::<Vec<_>>()
                .join("<br>")
        };
        let mut status = o.verdict();
        if let Some(d) = o.desync() {
            status.push_str(&format!(" ⚠ {d}"));
        }
        if let Some(e) = &o.exchange.write_error {
            status.push_str(&format!(" (client write failed: {e})"));
        }
        let _ = writeln!(
            t,
            "| {} | `` {} `` | {} | `` {} `` | {} |",
            md(&case.name),
            md(&case.describe(200)),
            md(&status),
            upstream,
            log
        );
    }
    std::fs::write(&path, t).expect("write the nginx table");
    eprintln!(
        "{} cases against nginx in {:.1} s, table in {}",
        cases.len(),
        elapsed.as_secs_f64(),
        path.display()
    );
}

/// nginx answers the harness knows independently of the table (RFC 9112 and nginx's
/// documentation): if nginx does not give these, the harness is broken, not sluice.
const PINNED: &[(&str, &str)] = &[
    ("method GET", "200 open"),
    ("method get", "400 closed"),
    ("Host missing HTTP/1.1", "400 closed"),
    ("CL then TE", "400 closed"),
    ("two GETs one write", "200,200 open"),
    ("limited two in one write", "200,429 open"),
    ("request line 65536 bytes", "414 closed"),
    ("chunked half-close mid-data", "none closed"),
];

/// The suite: every case against nginx and sluice at the same time; mismatches as a table.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sluice_conforms_to_nginx() {
    // 64 connections at a time through two proxies: no latency comparison may run meanwhile.
    let _heavy = heavy();
    let cases = Arc::new(cases::all());
    assert_unique(&cases);
    assert!(cases.len() >= 300, "only {} cases", cases.len());
    let nginx_rec = Arc::new(Recorder::start(SLOTS));
    let sluice_rec = Arc::new(Recorder::start(SLOTS));
    let nginx = Nginx::start(&nginx_http(&nginx_rec));
    let sluice = Sluice::start(&sluice_toml(&sluice_rec));
    let start = Instant::now();
    let nginx_side = Arc::new(Side {
        addrs: nginx.addrs(),
        recorder: nginx_rec,
        log: nginx.prefix().join("logs/error.log"),
        first_source: 10,
    });
    let sluice_side = Arc::new(Side {
        addrs: sluice.addrs(),
        recorder: sluice_rec,
        log: sluice.log_path(),
        first_source: 100,
    });
    let (n, s) = tokio::join!(
        run(Arc::clone(&nginx_side), Arc::clone(&cases), IDLE),
        run(Arc::clone(&sluice_side), Arc::clone(&cases), IDLE)
    );

    // A case is suspect when nginx misses its pinned answer or is out of sync with its own
    // upstream (a harness fault, or a stall on a loaded machine) or when sluice differs. Suspects
    // run again, with a longer idle wait; only what is seen twice counts. With very many
    // mismatches (sluice far from nginx), only nginx's suspects run again.
    let pinned: Vec<(usize, &str)> = PINNED
        .iter()
        .map(|(name, want)| {
            let i = cases
                .iter()
                .position(|c| c.name == *name)
                .unwrap_or_else(|| panic!("pinned case {name:?} is not a case"));
            (i, *want)
        })
        .collect();
    let nginx_suspect = |i: usize, o: &Outcome| {
        o.desync().is_some() || pinned.iter().any(|&(p, w)| p == i && o.verdict() != w)
    };
    let (mut n, mut s) = (n, s);
    let differ = |i: usize, n: &[Outcome], s: &[Outcome]| !differences(&n[i], &s[i]).is_empty();
    let mut again: Vec<usize> = (0..cases.len()).filter(|&i| differ(i, &n, &s)).collect();
    if again.len() > RECHECK_MAX {
        again.clear();
    }
    let extra: Vec<usize> = (0..cases.len())
        .filter(|&i| nginx_suspect(i, &n[i]) && !again.contains(&i))
        .collect();
    again.extend(extra);
    if !again.is_empty() {
        let subset: Arc<Vec<Case>> = Arc::new(again.iter().map(|&i| cases[i].clone()).collect());
        let (n2, s2) = tokio::join!(
            run(Arc::clone(&nginx_side), Arc::clone(&subset), IDLE_RECHECK),
            run(Arc::clone(&sluice_side), Arc::clone(&subset), IDLE_RECHECK)
        );
        for (k, &i) in again.iter().enumerate() {
            n[i] = n2[k].clone();
            s[i] = s2[k].clone();
        }
    }

    // The harness: nginx must give the pinned answers and be in sync with its upstream under
    // every reading, or the readings (not sluice) are wrong.
    for &(i, want) in &pinned {
        assert_eq!(
            n[i].verdict(),
            want,
            "nginx on pinned case {:?}",
            cases[i].name
        );
    }
    let nginx_desync: Vec<String> = cases
        .iter()
        .zip(&n)
        .filter_map(|(c, o)| o.desync().map(|d| format!("{}: {d}", c.name)))
        .collect();
    assert!(
        nginx_desync.is_empty(),
        "the readings disagree on nginx's own upstream bytes (a harness fault):\n{}",
        nginx_desync.join("\n")
    );
    let differ: Vec<usize> = (0..cases.len()).filter(|&i| differ(i, &n, &s)).collect();
    let slow: Vec<&str> = again
        .iter()
        .filter(|i| !differ.contains(i))
        .map(|&i| cases[i].name.as_str())
        .collect();
    let elapsed = start.elapsed();

    let mut failed = Vec::new();
    let mut allowed = Vec::new();
    for &i in &differ {
        let (case, n, s) = (&cases[i], &n[i], &s[i]);
        let why = differences(n, s);
        let row = (case, n, s, why.join("; "));
        let same_upstream = n.upstream_answers() == s.upstream_answers();
        match (stricter(&case.name), deliberate(&case.name)) {
            (Some(_), _) if n.forwarded() && s.upstream_answers() == 0 && s.upstream.is_empty() => {
                allowed.push(row)
            }
            (_, Some((nv, sv, _))) if n.verdict() == nv && s.verdict() == sv && same_upstream => {
                allowed.push(row)
            }
            _ => failed.push(row),
        }
    }
    let table = |rows: &[(&Case, &Outcome, &Outcome, String)]| {
        let mut per_group: Vec<(&str, usize)> = Vec::new();
        for (case, ..) in rows {
            match per_group.iter_mut().find(|(g, _)| *g == case.group) {
                Some((_, n)) => *n += 1,
                None => per_group.push((case.group, 1)),
            }
        }
        let groups: Vec<String> = per_group.iter().map(|(g, n)| format!("{g} {n}")).collect();
        let mut t = format!(
            "by group: {}\n(verdict = statuses then open/closed; ↑N = requests the upstream read; \
             below each row: the bytes sent, then the first lines of each error log)\n\n\
             {:<44} {:<22} {:<22} why\n",
            groups.join(", "),
            "case",
            "nginx (↑ upstream)",
            "sluice (↑ upstream)"
        );
        for (case, n, s, why) in rows {
            let _ = writeln!(
                t,
                "{:<44} {:<22} {:<22} {why}\n    sent:   {}",
                case.name,
                n.summary(),
                s.summary(),
                case.describe(100)
            );
            for (who, o) in [("nginx", n), ("sluice", s)] {
                if let Some(line) = o.log.first() {
                    let _ = writeln!(t, "    {who:<7} {}", short_log(line));
                }
            }
        }
        t
    };
    eprintln!(
        "conformance: {} cases, nginx and sluice, {:.1} s; {} mismatches, {} allowed",
        cases.len(),
        elapsed.as_secs_f64(),
        failed.len(),
        allowed.len()
    );
    // Not asserted (sluice's lines are its own, config/operations.md "Security"), but worth seeing: where both
    // proxies logged for a case and the level or the event differs.
    let log_diff: Vec<String> = cases
        .iter()
        .zip(n.iter().zip(&s))
        .filter_map(|(c, (n, s))| {
            let (a, b) = (log_event(n.log.first()?), log_event(s.log.first()?));
            (a != b).then(|| format!("{}: nginx {a:?}, sluice {b:?}", c.name))
        })
        .collect();
    if !log_diff.is_empty() {
        eprintln!(
            "error-log event or level differs (not asserted) in {} case(s):\n  {}",
            log_diff.len(),
            log_diff.join("\n  ")
        );
    }
    if !slow.is_empty() {
        eprintln!(
            "matched only when waited for {} ms (a loaded machine, or a proxy slow to answer): {}",
            IDLE_RECHECK.as_millis(),
            slow.join(" | ")
        );
    }
    if !allowed.is_empty() {
        eprintln!(
            "allowed (sluice deliberately stricter or different, see stricter() and deliberate()):\n{}",
            table(&allowed)
        );
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases differ from nginx:\n{}",
        failed.len(),
        cases.len(),
        table(&failed)
    );
}

/// Equal verdicts; and where nginx refuses in HTTP/0.9 form (an error page without a status
/// line, for `POST /\r\n`), any 4xx from sluice followed by a close: there is no status to
/// compare.
fn same_verdict(n: &Outcome, s: &Outcome) -> bool {
    if n.verdict() == s.verdict() {
        return true;
    }
    let raw_refusal = matches!(n.responses.as_slice(), [r] if r.status == 0 && !r.upstream);
    let refusal = matches!(s.responses.as_slice(), [r] if (400..500).contains(&r.status));
    raw_refusal && refusal && n.exchange.closed && s.exchange.closed
}

/// What makes sluice's outcome differ from nginx's, per the module's (a), (b), (c).
fn differences(n: &Outcome, s: &Outcome) -> Vec<String> {
    let mut why = Vec::new();
    if !same_verdict(n, s) {
        why.push("verdict".to_owned());
    }
    if n.upstream.iter().all(Vec::is_empty) && s.upstream.iter().any(|c| !c.is_empty()) {
        why.push(format!(
            "forwarded what nginx refused: {}",
            escape(&s.upstream.concat(), 80)
        ));
    } else if s.max_count() > n.max_count() {
        why.push(format!(
            "upstream read {} request(s), nginx's {}",
            s.max_count(),
            n.max_count()
        ));
    }
    if let Some(d) = s.desync() {
        why.push(format!("desync: {d}"));
    }
    why.extend(forwarding(n, s));
    let (answers, logged) = s.limited();
    if answers != logged {
        why.push(format!(
            "{answers} answer(s) 429 but {logged} limiting line(s) logged"
        ));
    }
    why
}

/// Header names a proxy adds or rewrites for its own hop: their presence is a matter of each
/// proxy's forwarding policy, not of parsing the client's request.
const OWN_HOP: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "content-length",
    "transfer-encoding",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-real-ip",
    "forwarded",
    "via",
];

/// When both forwarded the same number of requests: the same method and target each (nginx
/// passes the target as received, except that absolute-form becomes origin-form), and no
/// client header that nginx dropped (underscores, invalid names) reaches sluice's upstream.
fn forwarding(n: &Outcome, s: &Outcome) -> Vec<String> {
    let nf: Vec<_> = n.upstream.iter().flat_map(|c| forwarded(c)).collect();
    let sf: Vec<_> = s.upstream.iter().flat_map(|c| forwarded(c)).collect();
    if nf.len() != sf.len() {
        return Vec::new();
    }
    let mut why = Vec::new();
    for (a, b) in nf.iter().zip(&sf) {
        // Deliberate: sluice cuts a fragment that nginx passes on raw (hyper's URI cannot carry
        // `#`, and `%23` would name another resource; src/http1/head/). Cutting sends less,
        // never a request nginx refuses.
        let cut = a.target.split('#').next().unwrap_or("");
        if a.method != b.method || (a.target != b.target && cut != b.target) {
            why.push(format!(
                "forwarded {} {} where nginx forwards {} {}",
                b.method, b.target, a.method, a.target
            ));
        }
        let extra: Vec<&str> = b
            .names
            .iter()
            .filter(|h| !OWN_HOP.contains(&h.as_str()) && !a.names.contains(h))
            .map(String::as_str)
            .collect();
        if !extra.is_empty() {
            why.push(format!(
                "forwarded header(s) nginx drops: {}",
                extra.join(", ")
            ));
        }
    }
    why
}

fn assert_unique(cases: &[Case]) {
    let mut seen = std::collections::HashSet::new();
    for c in cases {
        assert!(seen.insert(c.name.as_str()), "two cases named {:?}", c.name);
    }
}

/// The comparison itself, on made-up outcomes: each of (a), (b), (c) is caught.
#[test]
fn differences_catch_refusals_smuggling_and_limits() {
    let answer = |status, upstream| Response {
        status,
        upstream,
        truncated: false,
    };
    let outcome = |responses: Vec<Response>, closed, upstream: &[&[u8]]| Outcome {
        exchange: Exchange {
            closed,
            ..Exchange::default()
        },
        responses,
        upstream: upstream.iter().map(|b| b.to_vec()).collect(),
        log: Vec::new(),
    };
    let get: &[u8] = b"GET / HTTP/1.0\r\nHost: up\r\n\r\n";
    let refused = outcome(vec![answer(400, false)], true, &[]);
    let forwarded = outcome(vec![answer(200, true)], false, &[get]);
    assert!(differences(&refused, &refused).is_empty());
    assert!(differences(&forwarded, &forwarded).is_empty());

    let why = differences(&refused, &forwarded);
    assert_eq!(why[0], "verdict");
    assert!(
        why[1].starts_with("forwarded what nginx refused"),
        "{why:?}"
    );

    // Refused alike, but left open: still a verdict mismatch.
    let open = outcome(vec![answer(400, false)], false, &[]);
    assert_eq!(differences(&refused, &open), vec!["verdict".to_owned()]);

    // One answer, two requests upstream (a smuggled one): more than nginx, and a desync.
    let smuggled = outcome(vec![answer(200, true)], false, &[&[get, get].concat()]);
    let why = differences(&forwarded, &smuggled);
    assert!(why[0].starts_with("upstream read 2"), "{why:?}");
    assert!(why[1].starts_with("desync"), "{why:?}");

    // A 429 without its error-log line.
    let mut limited = outcome(vec![answer(200, true), answer(429, false)], false, &[get]);
    assert!(differences(&limited, &limited)[0].contains("429"));
    limited
        .log
        .push("limiting requests, excess: 1.000 by zone \"lim\"".to_owned());
    assert!(differences(&limited, &limited).is_empty());
}

/// (d) on made-up upstream bytes: another target or a header nginx dropped is caught, a cut
/// fragment and the proxy's own hop headers are not.
#[test]
fn forwarding_catches_rewritten_targets_and_dropped_headers() {
    let up = |bytes: &[u8]| Outcome {
        responses: vec![Response {
            status: 200,
            upstream: true,
            truncated: false,
        }],
        upstream: vec![bytes.to_vec()],
        ..Outcome::default()
    };
    let nginx = up(b"GET /?x HTTP/1.0\r\nHost: up\r\nConnection: close\r\n\r\n");
    let same = up(b"GET /?x HTTP/1.1\r\nhost: up\r\nx-forwarded-for: 127.0.0.1\r\n\r\n");
    assert!(forwarding(&nginx, &same).is_empty());
    let rewritten = up(b"GET ?x HTTP/1.1\r\nhost: up\r\n\r\n");
    assert_eq!(
        forwarding(&nginx, &rewritten),
        vec!["forwarded GET ?x where nginx forwards GET /?x".to_owned()]
    );
    let underscore = up(b"GET /?x HTTP/1.1\r\nhost: up\r\nContent_Length: 5\r\n\r\n");
    assert_eq!(
        forwarding(&nginx, &underscore),
        vec!["forwarded header(s) nginx drops: content_length".to_owned()]
    );
    let fragment = up(b"GET /a#f?x HTTP/1.0\r\nHost: up\r\n\r\n");
    assert!(forwarding(&fragment, &up(b"GET /a HTTP/1.1\r\n\r\n")).is_empty());
    assert!(!forwarding(&fragment, &up(b"GET /a%23f?x HTTP/1.1\r\n\r\n")).is_empty());
}
