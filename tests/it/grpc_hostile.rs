//! A hostile upstream behind `grpc_pass` (issue #45, item 7): tests/it/grpc_hostile/upstream.py
//! writes HTTP/2 frames by hand (python3-h2's `hpack` for the requests) and misbehaves as each
//! call's method asks; tests/it/grpc_hostile/client.py (python3-grpcio) calls through sluice
//! and reports what each call ended with. Over-sized and malformed heads, bad trailers, resets
//! at each phase, GOAWAY and closes, floods, a stream that never ends, an upstream that never
//! reads, one that takes a stream at a time.
//!
//! For every case: the client gets a definite answer (a gRPC status, never its own deadline),
//! the one sluice must give for that misbehaviour (a well-formed answer passes through, a
//! broken one never does), and sluice serves the next call; after the worst cases, a hundred
//! rounds of them, its RSS and open fds are where they were. nginx 1.22's `grpc_pass` sees the
//! same cases in [`nginx_answers_the_same_cases`], whose table documents where the two differ
//! (sluice passes an upstream's reset on as gRPC's code for it; nginx resets with
//! INTERNAL_ERROR whatever happened once the head went out).

use crate::support::{Nginx, Port, Process, Sluice, Stop, with_ports};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const PYTHON: &str = "/usr/bin/python3";
/// client.py's deadline per call: a call that runs into it is a hang.
const DEADLINE_MS: u64 = 8000;
/// A client.py run (many calls) must end within this.
const RUN_LIMIT: Duration = Duration::from_secs(40);

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/grpc_hostile")
        .join(name)
}

/// upstream.py on four ports: `hostile` (the cases), `one` (one stream at a time), `zero`
/// (windows of 0), `deaf` (reads nothing after the first head).
struct Hostile {
    process: Process,
    ports: Vec<Port>,
    _dir: tempfile::TempDir,
}

impl Hostile {
    fn start() -> Hostile {
        let dir = tempfile::Builder::new()
            .prefix("sluice-it-grpc-hostile-")
            .tempdir()
            .expect("temporary directory for the hostile upstream");
        let profiles = ["hostile", "one", "zero", "deaf"];
        let (process, ports) = with_ports("upstream.py", profiles.len(), |ports| {
            let mut cmd = std::process::Command::new(PYTHON);
            cmd.arg(script("upstream.py"));
            for (port, profile) in ports.iter().zip(profiles) {
                cmd.arg("--listen")
                    .arg(format!("{}:{profile}", port.number()));
            }
            let numbers: Vec<u16> = ports.iter().map(Port::number).collect();
            Process::start("upstream", cmd, dir.path(), &numbers, Stop::Kill, &[])
        });
        Hostile {
            process,
            ports,
            _dir: dir,
        }
    }

    fn port(&self, i: usize) -> u16 {
        self.ports[i].number()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.process.stderr_path()).unwrap_or_default()
    }
}

/// The locations before `up`: path, read timeout, send timeout (seconds).
const LOCATIONS: [(&str, u64, u64); 4] = [
    ("hostile", 1, 60),
    ("one", 5, 60),
    ("zero", 5, 1),
    ("deaf", 5, 1),
];

/// sluice (h2c) before `up`: `/hostile.H/` with a read timeout of 1 s, `/one.H/` (5 s),
/// `/zero.H/` and `/deaf.H/` (5 s, and a send timeout of 1 s); request bodies up to 64 MB.
fn sluice(up: &Hostile) -> Sluice {
    let mut toml = String::from("client_max_body_size = \"64m\"\n[[servers]]\nhttp2 = true\n");
    for (i, (name, read, send)) in LOCATIONS.iter().enumerate() {
        toml.push_str(&format!(
            "[[servers.locations]]\npath = \"/{name}.H/\"\n\
             grpc_pass = \"grpc://127.0.0.1:{}\"\ngrpc_read_timeout = \"{read}s\"\n\
             grpc_send_timeout = \"{send}s\"\n",
            up.port(i)
        ));
    }
    Sluice::start(&toml)
}

/// nginx 1.22 with the same locations as [`sluice`].
fn nginx(up: &Hostile) -> Nginx {
    let mut conf = String::from("client_max_body_size 64m;\nserver {\n  listen http2;\n");
    for (i, (name, read, send)) in LOCATIONS.iter().enumerate() {
        conf.push_str(&format!(
            "  location /{name}.H/ {{ grpc_pass grpc://127.0.0.1:{}; \
             grpc_read_timeout {read}s; grpc_send_timeout {send}s; }}\n",
            up.port(i)
        ));
    }
    conf.push_str("}\n");
    Nginx::start(&conf)
}

/// Runs client.py against `target` with `specs`; one JSON object per spec.
async fn calls(target: std::net::SocketAddr, specs: &[&str]) -> Vec<Value> {
    let run = tokio::process::Command::new(PYTHON)
        .arg(script("client.py"))
        .arg(target.to_string())
        .args(specs)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(RUN_LIMIT, run)
        .await
        .unwrap_or_else(|_| panic!("client.py {specs:?} did not end within {RUN_LIMIT:?}"))
        .expect("/usr/bin/python3 with python3-grpcio (scripts/test.sh installs it)");
    let said = String::from_utf8_lossy(&out.stdout);
    let got: Vec<Value> = said
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        out.status.success() && got.len() == specs.len(),
        "client.py {specs:?}: {said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    got
}

/// A call that ran into client.py's own deadline: what a hang looks like.
fn hung(call: &Value) -> bool {
    call["code"] == "DEADLINE_EXCEEDED" && call["ms"].as_u64().unwrap_or(0) + 500 >= DEADLINE_MS
}

/// Each case's call must have ended with one of its codes, within `most_ms`, and `ok` after
/// each must succeed (sluice still serves, over a connection still good or a new one).
async fn check(s: &Sluice, up: &Hostile, cases: &[(&str, &[&str])], most_ms: u64) {
    let mut specs = Vec::new();
    for (case, _) in cases {
        specs.extend([*case, "ok"]);
    }
    let got = calls(s.addr(), &specs).await;
    let mut wrong = Vec::new();
    for ((case, codes), pair) in cases.iter().zip(got.chunks(2)) {
        let (call, after) = (&pair[0], &pair[1]);
        let code = call["code"].as_str().unwrap_or("?");
        let ms = call["ms"].as_u64().unwrap_or(u64::MAX);
        if hung(call) || !codes.contains(&code) || ms > most_ms {
            wrong.push(format!(
                "{case}: wanted one of {codes:?} within {most_ms} ms: {call}"
            ));
        }
        if after["code"] != "OK" {
            wrong.push(format!("the call after {case}: {after}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\n--- sluice ---\n{}\n--- upstream ---\n{}",
        wrong.join("\n"),
        s.log(),
        up.stderr()
    );
}

/// Heads that break RFC 9113 §8.3 or the 64 KiB cap are refused (UNAVAILABLE: sluice's 502,
/// as nginx); well-formed ones pass whatever they carry.
#[tokio::test]
async fn malformed_or_oversized_heads_are_refused_others_pass() {
    let up = Hostile::start();
    let s = sluice(&up);
    let refused: &[&str] = &["UNAVAILABLE"];
    check(
        &s,
        &up,
        &[
            ("big_head", refused),
            ("huge_value", refused),
            ("continuation_flood", refused),
            // A valid head in 1-byte CONTINUATIONs: served, as nginx serves it (sluice's
            // client takes up to 128 frames a block; continuation_flood is past that).
            ("continuations", &["OK"]),
            ("bad_pseudo", refused),
            ("request_pseudo", refused),
            ("no_status", refused),
            ("bad_status", refused),
            ("upper_name", refused),
            ("connection_field", refused),
            ("transfer_encoding", refused),
            ("head_first", refused),
            ("info_then_ok", &["OK"]),
            // Passed as the upstream sent it: gRPC's client decides (it accepts this one).
            ("no_content_type", &["OK"]),
            ("http_503", refused),
            ("trailers_only", &["NOT_FOUND"]),
        ],
        2000,
    )
    .await;
}

/// Trailers that break the rules end the call (the stream reset as a PROTOCOL_ERROR, which a
/// gRPC client reads as INTERNAL); what follows good trailers is never seen by the client.
#[tokio::test]
async fn bad_trailers_end_the_call() {
    let up = Hostile::start();
    let s = sluice(&up);
    let broken: &[&str] = &["INTERNAL"];
    check(
        &s,
        &up,
        &[
            // A pseudo-field in trailers is malformed (RFC 9113 §8.1), as nginx finds it.
            ("trailer_pseudo", broken),
            ("trailer_upper", broken),
            ("trailers_no_end", broken),
            ("trailer_no_status", &["UNKNOWN"]),
            ("headers_after_trailers", &["OK"]),
            ("data_after_trailers", &["OK"]),
        ],
        2000,
    )
    .await;
}

/// An upstream's reset before the head is sluice's 502 (UNAVAILABLE); after it, the reset goes
/// on (INTERNAL_ERROR is INTERNAL, CANCEL is CANCELLED to a gRPC client); after the trailers it
/// changes nothing. GOAWAY below the stream is UNAVAILABLE, one above lets it end; a
/// connection broken mid-body ends the call UNAVAILABLE.
#[tokio::test]
async fn resets_goaway_and_closes_end_calls_with_a_status() {
    let up = Hostile::start();
    let s = sluice(&up);
    let unavailable: &[&str] = &["UNAVAILABLE"];
    check(
        &s,
        &up,
        &[
            ("rst_before_internal", unavailable),
            ("rst_before_refused", unavailable),
            ("rst_before_cancel", unavailable),
            ("rst_mid_internal", &["INTERNAL"]),
            ("rst_mid_cancel", &["CANCELLED"]),
            // RST_STREAM NO_ERROR before the end broke the answer off: ended UNAVAILABLE, as
            // a connection broken there (see the test below).
            ("rst_mid_no_error", unavailable),
            ("rst_after_trailers", &["OK"]),
            ("goaway_below", unavailable),
            ("goaway_above", &["OK"]),
            ("goaway_linger", &["OK"]),
            ("goaway_mid_body", unavailable),
            ("close_before", unavailable),
            ("close_mid_body", unavailable),
        ],
        2000,
    )
    .await;
}

/// Floods and flow-control abuse from the upstream: SETTINGS and PING floods are answered (the
/// call served), a window past 2^31-1 or a frame over SETTINGS_MAX_FRAME_SIZE breaks the
/// connection, empty and one-byte DATA frames are a slow but valid body, a stream that never
/// ends is cut by the read timeout (DEADLINE_EXCEEDED trailers), a silent one too.
#[tokio::test]
async fn floods_and_stalls_from_the_upstream_end_calls() {
    let up = Hostile::start();
    let s = sluice(&up);
    check(
        &s,
        &up,
        &[
            ("settings_flood", &["OK"]),
            ("ping_flood", &["OK"]),
            // A connection error (FLOW_CONTROL_ERROR) after the head: passed on as the reset.
            ("window_overflow", &["INTERNAL", "UNAVAILABLE"]),
            ("stream_window_overflow", &["OK", "INTERNAL"]),
            // More than 100 empty DATA frames in a row: ENHANCE_YOUR_CALM, passed on as the
            // reset; one-byte frames are a slow but valid body (nginx serves it too).
            ("empty_data", &["RESOURCE_EXHAUSTED"]),
            ("tiny_data", &["OK"]),
            ("oversized_frame", &["INTERNAL", "UNAVAILABLE"]),
            ("never_ends", &["DEADLINE_EXCEEDED"]),
            ("silent", &["UNAVAILABLE", "DEADLINE_EXCEEDED"]),
        ],
        3000,
    )
    .await;
}

/// SETTINGS_MAX_CONCURRENT_STREAMS = 1 upstream: 20 calls at once all complete (sluice holds
/// the others until a stream ends), one after the other.
#[tokio::test]
async fn one_stream_at_a_time_upstream_serves_twenty_calls() {
    let up = Hostile::start();
    let s = sluice(&up);
    let got = calls(s.addr(), &["many:20:/one.H/x"]).await;
    assert_eq!(
        got[0]["codes"],
        serde_json::json!({"OK": 20}),
        "{}",
        s.log()
    );
}

/// The resident set of `pid` in KiB and its open fds.
fn usage(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (rss, fds)
}

/// An upstream that never reads: with windows of 0 the request bodies never leave, with the
/// largest windows and no reading they fill the socket; either way each of 20 uploads of 32 MiB
/// at once is cut by the send timeout, and sluice holds a bounded part of them (flow control
/// stops the clients), not 640 MiB.
#[tokio::test]
async fn an_upstream_that_never_reads_bounds_memory() {
    let up = Hostile::start();
    let s = sluice(&up);
    calls(s.addr(), &["ok"]).await;
    let (rss0, _) = usage(s.pid());
    let got = calls(
        s.addr(),
        &["upload:20:32:/zero.H/x", "upload:20:32:/deaf.H/x"],
    )
    .await;
    let (rss1, _) = usage(s.pid());
    for g in &got {
        let codes = g["codes"].as_object().expect("codes");
        let max_ms = g["max_ms"].as_u64().unwrap_or(u64::MAX);
        assert!(
            !codes.contains_key("OK") && max_ms < DEADLINE_MS - 500,
            "every upload cut by the send timeout, none hung: {g}\n{}",
            s.log()
        );
    }
    assert!(
        rss1 < rss0 + 64 * 1024,
        "sluice's RSS went from {rss0} KiB to {rss1} KiB for 40 stalled uploads"
    );
    check(&s, &up, &[("ok", &["OK"])], 2000).await;
}

/// An upload the upstream takes nothing of (a window of 0), before its answer's head and
/// after it: nginx and sluice both end the call after `grpc_send_timeout` (1 s), not the
/// read timeout (5 s), and log it as a timeout "while sending request to upstream". (nginx's
/// answers: its HTML 504 before the head, which a gRPC client reads as UNAVAILABLE, a reset
/// (INTERNAL) after it; sluice's: DEADLINE_EXCEEDED both times.) An upload that does not
/// stall is not cut by the send timeout: see grpc::ends.
#[tokio::test]
async fn a_stalled_upload_is_cut_by_the_send_timeout() {
    let up = Hostile::start();
    let (s, n) = (sluice(&up), nginx(&up));
    let specs = ["upload:1:4:/zero.H/x", "upload:1:4:/zero.H/head"];
    let (ours, theirs) = (calls(s.addr(), &specs).await, calls(n.addr(), &specs).await);
    for (i, (spec, want)) in specs.iter().zip(["UNAVAILABLE", "INTERNAL"]).enumerate() {
        let (a, b) = (&ours[i], &theirs[i]);
        let only = |v: &Value, code: &str| {
            v["codes"].as_object().map(|c| c.len()) == Some(1) && v["codes"][code] == 1
        };
        assert!(only(a, "DEADLINE_EXCEEDED"), "{spec}: {a}");
        assert!(only(b, want), "{spec}: nginx {b}");
        for (who, v) in [("sluice", a), ("nginx", b)] {
            let ms = v["max_ms"].as_u64().unwrap_or(u64::MAX);
            assert!((900..2500).contains(&ms), "{spec}: {who} took {ms} ms: {v}");
        }
    }
    let sent = "upstream timed out (110: Connection timed out) while sending request to upstream";
    assert_eq!(n.error_log().matches(sent).count(), 2, "{}", n.error_log());
    // (sluice logs the first; the second ends with DEADLINE_EXCEEDED trailers, unlogged.)
    let logged = s.log();
    assert!(logged.contains(sent), "{logged}");
}

/// The worst cases, a hundred rounds: connections broken by the upstream, over-sized heads,
/// resets mid-body, GOAWAY. sluice's RSS and open fds after are those of after one round
/// (within 16 MiB and 8 fds), and it still serves.
#[tokio::test]
async fn a_hundred_rounds_of_the_worst_cases_leak_nothing() {
    let up = Hostile::start();
    let s = sluice(&up);
    let worst = "rounds:ROUNDS:big_head,continuation_flood,close_mid_body,goaway_below,\
                 rst_mid_internal,trailer_upper,window_overflow,oversized_frame,empty_data,ok";
    calls(s.addr(), &[&worst.replace("ROUNDS", "1")]).await;
    let before = usage(s.pid());
    let got = calls(s.addr(), &[&worst.replace("ROUNDS", "100")]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = usage(s.pid());
    let codes = got[0]["codes"].as_object().expect("codes");
    assert!(
        !codes.contains_key("DEADLINE_EXCEEDED")
            && codes.get("OK").and_then(Value::as_u64) >= Some(100),
        "{}\n{}",
        got[0],
        s.log()
    );
    assert!(
        after.0 < before.0 + 16 * 1024 && after.1 <= before.1 + 8,
        "RSS {} -> {} KiB, fds {} -> {} after 100 rounds",
        before.0,
        after.0,
        before.1,
        after.1
    );
    check(&s, &up, &[("ok", &["OK"])], 2000).await;
}

/// The same cases through nginx 1.22's `grpc_pass`, side by side with sluice: both give every
/// call a definite answer; the table says what each client saw, and where they differ.
#[tokio::test]
async fn nginx_answers_the_same_cases() {
    let up = Hostile::start();
    let (s, n) = (sluice(&up), nginx(&up));
    let specs = COMPARED;
    let (ours, theirs) = (calls(s.addr(), specs).await, calls(n.addr(), specs).await);
    let mut table = BTreeMap::new();
    for ((case, a), b) in specs.iter().zip(&ours).zip(&theirs) {
        assert!(!hung(a) && !hung(b), "{case}: sluice {a}, nginx {b}");
        table.insert(*case, (a["code"].clone(), b["code"].clone()));
    }
    let differ: Vec<String> = table
        .iter()
        .filter(|(_, (a, b))| a != b)
        .map(|(c, (a, b))| format!("{c}: sluice {a}, nginx {b}"))
        .collect();
    let expected: Vec<String> = DIFFERENCES
        .iter()
        .map(|(c, a, b)| format!("{c}: sluice \"{a}\", nginx \"{b}\""))
        .collect();
    assert_eq!(differ, expected, "the cases where sluice and nginx differ");
}

/// The cases compared with nginx (not `rst_after_trailers`: nginx answers it OK or INTERNAL
/// depending on whether its client stream ended before the reset came).
const COMPARED: &[&str] = &[
    "ok",
    "big_head",
    "huge_value",
    "continuations",
    "continuation_flood",
    "bad_pseudo",
    "no_status",
    "upper_name",
    "connection_field",
    "info_then_ok",
    "no_content_type",
    "http_503",
    "trailers_only",
    "trailer_pseudo",
    "trailers_no_end",
    "trailer_no_status",
    // (Not "headers_after_trailers": nginx answers OK or INTERNAL, by how the frames fall.)
    "rst_before_internal",
    "rst_mid_internal",
    "rst_mid_cancel",
    "goaway_below",
    "goaway_above",
    "goaway_mid_body",
    "close_before",
    "close_mid_body",
    "settings_flood",
    "ping_flood",
    "window_overflow",
    "tiny_data",
    "oversized_frame",
    "never_ends",
    "silent",
];

/// Where sluice and nginx differ (case, sluice's code, nginx's), in the order of the names.
const DIFFERENCES: &[(&str, &str, &str)] = &[
    ("close_mid_body", "UNAVAILABLE", "INTERNAL"),
    ("connection_field", "UNAVAILABLE", "OK"),
    ("goaway_mid_body", "UNAVAILABLE", "INTERNAL"),
    ("info_then_ok", "OK", "UNAVAILABLE"),
    ("never_ends", "DEADLINE_EXCEEDED", "INTERNAL"),
    ("ping_flood", "OK", "UNAVAILABLE"),
    ("rst_mid_cancel", "CANCELLED", "INTERNAL"),
    ("settings_flood", "OK", "UNAVAILABLE"),
    // grpc_read_timeout before the head: sluice's DEADLINE_EXCEEDED, nginx's 504.
    ("silent", "DEADLINE_EXCEEDED", "UNAVAILABLE"),
];

/// An upstream that resets a gRPC call with NO_ERROR mid-body (before its trailers) broke it
/// off: the client gets UNAVAILABLE, as for a connection broken there (RFC 9113 §8.1 allows
/// NO_ERROR only after the response's END_STREAM).
#[tokio::test]
async fn an_upstream_reset_with_no_error_mid_body_ends_unavailable() {
    let up = Hostile::start();
    let s = sluice(&up);
    check(&s, &up, &[("rst_mid_no_error", &["UNAVAILABLE"])], 2000).await;
}
