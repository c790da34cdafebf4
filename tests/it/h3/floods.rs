//! HTTP/3 floods and protocol errors, each committed by a real QUIC client (aioquic, driven by
//! tests/it/h3/abuse.py, which encodes the frames and QPACK instructions itself): the
//! connection is closed with the error code RFC 9114 / RFC 9204 names (`H3_EXCESSIVE_LOAD` for a
//! flood), one info line says why, `sluice_http3_floods_total{kind}` or
//! `sluice_http3_protocol_errors_total{code}` counts it, the upstream got nothing it should
//! not have, and sluice serves the next client.
//!
//! Then the clients that must never be cut: a big upload, a body in 20 000 frames of 64 bytes,
//! a thousand requests on one connection with a few of them cancelled, and a browser (the
//! Chromium test in [`super`] loads a page and the dashboard, PRIORITY_UPDATEs and all).

use super::{ADDR, h3, header, leaf_for, python, server, status};
use crate::support::{Sluice, TestCa, Upstream, client, get};
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// The fixed allowance of the frame kinds: a flood's line counts at least this many.
const ALLOWANCE: u64 = 1000;
/// Unidirectional streams of unknown types a connection may open.
const UNI_ALLOWANCE: u64 = 100;
/// Streams reset before their answer: twice `http3_max_concurrent_streams` (128).
const RESET_ALLOWANCE: u64 = 256;

/// sluice on [`ADDR`] (TCP and QUIC) with `[admin]` (the metrics): `/` answered by sluice,
/// `/up` proxied to `upstream`.
fn sluice_for(ca: &TestCa, upstream: SocketAddr, keys: &str) -> Sluice {
    let leaf = leaf_for(ca);
    let body = format!(
        "[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200, body = \"ok\" }}\n\
         [[servers.locations]]\npath = \"/up\"\nproxy_pass = \"http://{upstream}\"\n"
    );
    Sluice::builder(&format!(
        "[admin]\n{}",
        server("h3.test", &leaf, keys, &body)
    ))
    .relocate(ADDR)
    .start()
}

/// One connection from `source` that asks for `/`, then commits `kind` `count` times (see
/// abuse.py): what the client saw.
async fn abuse(addr: SocketAddr, ca: &TestCa, source: IpAddr, kind: &str, count: usize) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/h3/abuse.py");
    let out = tokio::process::Command::new(python())
        .arg(script)
        .args([&addr.to_string(), kind, "--count", &count.to_string()])
        .args(["--sni", "h3.test", "--path", "/up", "--timeout", "8"])
        .args(["--bind", &source.to_string()])
        .arg("--ca")
        .arg(ca.cert())
        .output()
        .await
        .expect("the aioquic abuse client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "abuse.py {kind} failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The non-zero series of `metric` on `/metrics`.
async fn counted(s: &Sluice, metric: &str) -> Vec<String> {
    let metrics = get(s.admin_addr(), "/metrics").await.body_text();
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")) && !l.ends_with(" 0"))
        .map(str::to_string)
        .collect()
}

/// The flood's one log line, checked; its count.
async fn flood_line(s: &Sluice, words: &str) -> u64 {
    let log = s.wait_log(|l| l.contains("http3 flood detected")).await;
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("http3 flood detected"))
        .collect();
    assert_eq!(lines.len(), 1, "one flood line:\n{log}");
    let line = lines[0];
    let said = format!("client sent too many {words} (");
    for want in [
        " [info] ",
        &said,
        "(H3_EXCESSIVE_LOAD)",
        "while reading client request",
        "client: 127.0.0.3",
    ] {
        assert!(line.contains(want), "{want:?} in {line}");
    }
    line.split(&said)
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line}"))
}

/// The next client is served.
async fn next_client_served(s: &Sluice, ca: &TestCa) {
    let got = h3(
        s.addr(),
        "h3.test",
        ca,
        client(4),
        serde_json::json!([{"path": "/"}]),
    )
    .await;
    assert_eq!(
        status(&got[0]),
        Some(200),
        "a fresh client after the cut: {got:?}"
    );
}

/// `kind`, `count` times: cut with H3_EXCESSIVE_LOAD after its allowance, one line with
/// `words`, `sluice_http3_floods_total{kind="label"} 1`, nothing upstream.
async fn is_cut(kind: &str, count: usize, label: &str, words: &str, least: u64) {
    let ca = TestCa::new();
    let up = Upstream::start();
    let s = sluice_for(&ca, up.addr, "");
    let got = abuse(s.addr(), &ca, client(3), kind, count).await;
    assert_eq!(got["first"], 200, "{got}");
    assert_eq!(
        (got["connection"].as_str(), got["error"].as_u64()),
        (Some("closed"), Some(0x107)),
        "{kind}: H3_EXCESSIVE_LOAD: {got}\n{}",
        s.log()
    );
    assert!(
        got["ms"].as_f64().unwrap_or(f64::MAX) < 2000.0,
        "cut within 2 s of the flood's start: {got}"
    );
    let n = flood_line(&s, words).await;
    assert!(
        n >= least,
        "{kind}: cut after {n}, before its allowance {least}"
    );
    assert_eq!(
        counted(&s, "sluice_http3_floods_total").await,
        [format!("sluice_http3_floods_total{{kind=\"{label}\"}} 1")]
    );
    assert_eq!(up.hits(), 0, "the upstream got nothing");
    next_client_served(&s, &ca).await;
}

/// Request streams (GET /up, not ended) reset at once, over and over: HTTP/2's rapid reset.
#[tokio::test]
async fn rapid_reset_is_cut() {
    let words = "streams reset before their response";
    is_cut("rapid_reset", 3000, "reset", words, RESET_ALLOWANCE).await;
}

/// DATA frames without payload in an upload announced as 1 MB.
#[tokio::test]
async fn an_empty_data_flood_is_cut() {
    is_cut(
        "empty_data",
        20_000,
        "empty_data",
        "empty DATA frames",
        ALLOWANCE,
    )
    .await;
}

/// A body sent as DATA frames of one byte each.
#[tokio::test]
async fn a_body_in_one_byte_data_frames_is_cut() {
    is_cut(
        "small_data",
        20_000,
        "small_data",
        "small DATA frames",
        ALLOWANCE,
    )
    .await;
}

/// Reserved frame types (0x21) on a request stream, and on the control stream.
#[tokio::test]
async fn floods_of_unknown_frames_are_cut() {
    let words = "frames of unknown types";
    is_cut("unknown_request", 20_000, "unknown_frame", words, ALLOWANCE).await;
    is_cut("unknown_control", 20_000, "unknown_frame", words, ALLOWANCE).await;
}

/// PRIORITY_UPDATE (RFC 9218) on the control stream.
#[tokio::test]
async fn a_priority_update_flood_is_cut() {
    let words = "PRIORITY_UPDATE frames";
    is_cut(
        "priority_update",
        20_000,
        "priority_update",
        words,
        ALLOWANCE,
    )
    .await;
}

/// MAX_PUSH_ID, the same id again and again, on the control stream.
#[tokio::test]
async fn a_control_frame_flood_is_cut() {
    let words = "GOAWAY, MAX_PUSH_ID or CANCEL_PUSH frames";
    is_cut("max_push_id", 20_000, "control_frame", words, ALLOWANCE).await;
}

/// Unidirectional streams of reserved types, each ended at once: QUIC's credit comes back as
/// each closes, so only counting them bounds them.
#[tokio::test]
async fn unidirectional_stream_spam_is_cut() {
    let words = "unidirectional streams of unknown types";
    is_cut("uni_streams", 2000, "uni_stream", words, UNI_ALLOWANCE).await;
}

/// "Set Dynamic Table Capacity 0" on the encoder stream and "Stream Cancellation" on the
/// decoder stream: valid, and meaningless by the thousand.
#[tokio::test]
async fn floods_of_qpack_instructions_are_cut() {
    let words = "QPACK instructions that change nothing";
    is_cut(
        "encoder_noop",
        20_000,
        "qpack_instruction",
        words,
        ALLOWANCE,
    )
    .await;
    is_cut(
        "stream_cancel",
        20_000,
        "qpack_instruction",
        words,
        ALLOWANCE,
    )
    .await;
}

/// Each protocol error: the connection closed with `code` (and its name in the line and the
/// metric), the reason phrase saying `why`.
async fn is_refused(kind: &str, code: u64, name: &str, why: &str) {
    let ca = TestCa::new();
    let up = Upstream::start();
    let s = sluice_for(&ca, up.addr, "");
    let got = abuse(s.addr(), &ca, client(3), kind, 1).await;
    assert_eq!(
        (got["connection"].as_str(), got["error"].as_u64()),
        (Some("closed"), Some(code)),
        "{kind}: {name}: {got}\n{}",
        s.log()
    );
    let reason = got["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(why), "{kind}: {why:?} in {reason:?}");
    let log = s
        .wait_log(|l| l.contains("client sent invalid HTTP/3"))
        .await;
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("invalid HTTP/3"))
        .collect();
    assert_eq!(lines.len(), 1, "{kind}: one line:\n{log}");
    for want in [" [info] ", why, &format!("({name})"), "client: 127.0.0.3"] {
        assert!(lines[0].contains(want), "{kind}: {want:?} in {}", lines[0]);
    }
    assert_eq!(
        counted(&s, "sluice_http3_protocol_errors_total").await,
        [format!(
            "sluice_http3_protocol_errors_total{{code=\"{name}\"}} 1"
        )],
        "{kind}"
    );
    assert_eq!(up.hits(), 0, "the upstream got nothing");
    next_client_served(&s, &ca).await;
}

/// What h3 refuses on the control stream, and a header block that refers to the dynamic table
/// sluice never allowed: h3's own closes, logged and counted by sluice.
#[tokio::test]
async fn control_stream_abuse_ends_the_connection() {
    for (kind, code, name, why) in [
        (
            "second_settings",
            0x105,
            "H3_FRAME_UNEXPECTED",
            "second settings frame",
        ),
        (
            "data_on_control",
            0x105,
            "H3_FRAME_UNEXPECTED",
            "on control stream",
        ),
        (
            "headers_on_control",
            0x105,
            "H3_FRAME_UNEXPECTED",
            "on control stream",
        ),
        (
            "close_control",
            0x104,
            "H3_CLOSED_CRITICAL_STREAM",
            "control stream was closed",
        ),
        (
            "reset_control",
            0x104,
            "H3_CLOSED_CRITICAL_STREAM",
            "control stream was reset",
        ),
        (
            "dynamic_ref",
            0x200,
            "QPACK_DECOMPRESSION_FAILED",
            "Failed to decode headers",
        ),
    ] {
        is_refused(kind, code, name, why).await;
    }
}

/// The QPACK streams, which sluice reads itself against its dynamic table of 0 (RFC 9204).
#[tokio::test]
async fn qpack_stream_abuse_ends_the_connection() {
    const ENCODER: u64 = 0x201;
    const DECODER: u64 = 0x202;
    for (kind, code, name, why) in [
        (
            "encoder_insert",
            ENCODER,
            "QPACK_ENCODER_STREAM_ERROR",
            "Insert With Literal Name",
        ),
        (
            "encoder_capacity",
            ENCODER,
            "QPACK_ENCODER_STREAM_ERROR",
            "Capacity above 0",
        ),
        (
            "decoder_ack",
            DECODER,
            "QPACK_DECODER_STREAM_ERROR",
            "Section Acknowledgment",
        ),
        (
            "decoder_increment",
            DECODER,
            "QPACK_DECODER_STREAM_ERROR",
            "Insert Count Increment",
        ),
        (
            "close_encoder",
            0x104,
            "H3_CLOSED_CRITICAL_STREAM",
            "QPACK encoder stream was closed",
        ),
    ] {
        is_refused(kind, code, name, why).await;
    }
}

/// A 4 MB upload, a body with an empty DATA frame inside, one in 20 000 DATA frames of 64
/// bytes, a thousand requests on one
/// connection (ten of them cancelled, as a browser cancels): all served, nothing cut.
#[tokio::test]
async fn busy_polite_clients_are_never_cut() {
    let ca = TestCa::new();
    let up = Upstream::answering(crate::support::Answer::Body, 200);
    let s = sluice_for(&ca, up.addr, "client_max_body_size = \"8m\"");
    let big = "b".repeat(4 << 20);
    let spec = serde_json::json!([{"path": "/up", "method": "POST", "body": big}]);
    let got = h3(s.addr(), "h3.test", &ca, client(5), spec).await;
    assert_eq!(status(&got[0]), Some(200), "{}", got[1]);
    assert_eq!(
        header(&got[0], "x-length"),
        Some("4194304"),
        "the whole body upstream"
    );

    // An empty DATA frame between two others: h3 alone took it for the body's end.
    let between = abuse(s.addr(), &ca, client(6), "empty_between", 1).await;
    assert_eq!(between["answer"].as_u64(), Some(200), "{between}");
    assert_eq!(up.hits(), 2, "both bodies whole upstream");

    let chunked = abuse(s.addr(), &ca, client(6), "data_64", 20_000).await;
    assert_eq!(
        (chunked["answer"].as_u64(), chunked["connection"].as_str()),
        (Some(200), Some("open")),
        "{chunked}"
    );

    let mut spec: Vec<Value> = (0..1000)
        .map(|i| serde_json::json!({"path": format!("/{i}")}))
        .collect();
    // The cancelled ones first: aioquic resets a stream still waiting for QUIC's credit (the
    // 129th and later) as if it were open, which quinn rightly refuses (STREAM_LIMIT_ERROR).
    for cancelled in spec.iter_mut().take(10) {
        *cancelled = serde_json::json!({"path": "/up", "reset_at": 0.0});
    }
    let got = h3(s.addr(), "h3.test", &ca, client(7), Value::Array(spec)).await;
    let answered = got.iter().filter(|g| status(g) == Some(200)).count();
    assert_eq!(answered, 990, "{:?}", got.last());
    assert_eq!(
        got.last().map(|l| l["connection"].clone()),
        Some("open".into())
    );

    let log = s.log();
    assert!(
        !log.contains("flood detected") && !log.contains("invalid HTTP/3"),
        "{log}"
    );
    assert!(counted(&s, "sluice_http3_floods_total").await.is_empty());
}
