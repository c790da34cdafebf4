//! How calls end other than well: a client's cancellation and deadline reach the upstream (its
//! call is cancelled there too, at once, not when it would have answered); the upstream's
//! failures reach the client whole (status, message, custom trailing metadata, before any
//! message and mid-stream); an unreachable upstream is `UNAVAILABLE`.

use super::peers::{Upstreams, client, seen_upstream, untimed, with_sluice_xff};
use super::{nginx, nginx_location, sluice, sluice_location};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

/// Long enough for the server's log line of a call it saw cancelled (it looks every 5 ms); a
/// call the proxy did not cancel upstream ends only after the server's 10 s.
const CANCEL_SEEN: Duration = Duration::from_secs(3);

/// The cancel scenario through `addr`, checked: the client's result and the upstream's lines
/// of the unary call (cancelled after 300 ms) and the server stream (cancelled after its
/// first message of 100, 100 ms apart).
async fn cancel(up: &Upstreams, addr: SocketAddr, id: &str) -> (Value, Value, Value) {
    let r = client(addr, "cancel", id, &["after=300"]).await;
    assert_eq!(r["unary"]["code"], "CANCELLED", "{id}: {r}");
    assert_eq!(r["stream"]["code"], "CANCELLED", "{id}: {r}");
    let unary = up.call(&format!("{id}-1"), CANCEL_SEEN).await;
    let stream = up.call(&format!("{id}-2"), CANCEL_SEEN).await;
    for line in [&unary, &stream] {
        assert_eq!(line["outcome"], "cancelled", "{id}: upstream: {line}");
        assert!(
            line["elapsed_ms"].as_u64().is_some_and(|ms| ms < 1500),
            "{id}: the upstream saw the cancellation late: {line}"
        );
    }
    assert!(
        stream["sent"]["count"].as_u64().is_some_and(|n| n < 10),
        "{id}: the upstream went on streaming: {stream}"
    );
    (r, unary, stream)
}

/// A client cancels a unary call the server holds, and a server stream after its first
/// message: the upstream's call is cancelled within moments (an RST_STREAM or a closed
/// connection), not left running.
#[tokio::test]
async fn a_cancelled_call_is_cancelled_upstream() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.a());
    let ng = nginx("", &[&nginx_location(&target, "")]);
    let (theirs, their_unary, their_stream) = cancel(&up, ng.addr(), "cancel-ng").await;
    let s = sluice("", &[&sluice_location(&target, "")]);
    let (ours, our_unary, our_stream) = cancel(&up, s.addr(), "cancel-sl").await;
    assert_eq!(untimed(&ours), untimed(&theirs), "client: sluice, nginx");
    assert_eq!(
        seen_upstream(&our_unary),
        with_sluice_xff(&seen_upstream(&their_unary))
    );
    // How many messages left before the cancel arrived is a matter of timing.
    let unsent = |v: &Value| {
        let mut v = seen_upstream(v);
        v["sent"] = Value::Null;
        v
    };
    assert_eq!(unsent(&our_stream), with_sluice_xff(&unsent(&their_stream)));
}

/// The deadline scenario (500 ms, a server that would answer after 10 s) through `addr`: the
/// client's result and the upstream's line, checked.
async fn deadline(up: &Upstreams, addr: SocketAddr, id: &str) -> (Value, Value) {
    let r = client(addr, "deadline", id, &["timeout=500"]).await;
    assert_eq!(r["code"], "DEADLINE_EXCEEDED", "{id}: {r}");
    assert!(
        r["ms"].as_u64().is_some_and(|ms| (450..1500).contains(&ms)),
        "{id}: {r}"
    );
    let line = up.call(&format!("{id}-1"), CANCEL_SEEN).await;
    assert!(
        line["deadline_ms"]
            .as_u64()
            .is_some_and(|ms| (300..=500).contains(&ms)),
        "{id}: the upstream did not get the client's grpc-timeout: {line}"
    );
    assert_eq!(line["outcome"], "cancelled", "{id}: upstream: {line}");
    assert!(
        line["elapsed_ms"].as_u64().is_some_and(|ms| ms < 1500),
        "{id}: the upstream's call outlived the deadline: {line}"
    );
    (r, line)
}

/// A call with a 500 ms deadline: the client gives up with `DEADLINE_EXCEEDED`, the upstream
/// got the deadline (`grpc-timeout` passed on) and its call ended with it.
#[tokio::test]
async fn a_deadline_reaches_the_upstream_and_ends_the_call_there() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.a());
    let ng = nginx("", &[&nginx_location(&target, "")]);
    let (theirs, their_line) = deadline(&up, ng.addr(), "deadline-ng").await;
    let s = sluice("", &[&sluice_location(&target, "")]);
    let (ours, our_line) = deadline(&up, s.addr(), "deadline-sl").await;
    // sluice's read timeout ends at the client's deadline too: when the client's own timer is
    // late (a loaded machine), sluice's DEADLINE_EXCEEDED reaches it first, with its own words.
    let mut ours = untimed(&ours);
    if ours["details"] == "The upstream server did not answer in time." {
        ours["details"] = theirs["details"].clone();
    }
    assert_eq!(ours, untimed(&theirs), "client: sluice, nginx");
    assert_eq!(
        seen_upstream(&our_line),
        with_sluice_xff(&seen_upstream(&their_line))
    );
}

/// A client stream that takes 1.5 s to send its four messages, through a location whose
/// `grpc_read_timeout` is 1 s: nginx arms the read timeout for the response head only once the
/// request is all sent (a long upload is not a silent upstream), and so does sluice. Both
/// deliver the call whole.
#[tokio::test]
async fn a_client_stream_outlasting_the_read_timeout_completes() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.a());
    let params = ["count=4", "gap=500", "size=100"];
    let ng = nginx("", &[&nginx_location(&target, "grpc_read_timeout 1s;")]);
    let theirs = client(ng.addr(), "client_stream", "slow-up-ng", &params).await;
    let s = sluice(
        "",
        &[&sluice_location(&target, "grpc_read_timeout = \"1s\"\n")],
    );
    let ours = client(s.addr(), "client_stream", "slow-up-sl", &params).await;
    assert_eq!(theirs["code"], "OK", "nginx: {theirs}");
    assert_eq!(ours["code"], "OK", "sluice: {ours}\n{}", s.log());
    assert_eq!(untimed(&ours), untimed(&theirs), "client: sluice, nginx");
    assert!(
        ours["ms"].as_u64().is_some_and(|ms| ms >= 1500),
        "the upload took its 1.5 s: {ours}"
    );
}

/// The upstream fails a unary call before any message (`NOT_FOUND`, a message with non-ASCII
/// characters and `%`, which travel percent-encoded, text and binary trailing metadata), and a
/// server stream after three messages (`ABORTED`): the client gets each status, message and
/// trailer as the server sent them, through nginx and through sluice alike.
#[tokio::test]
async fn failures_pass_through_with_status_message_and_trailers() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.a());
    let ng = nginx("", &[&nginx_location(&target, "")]);
    let theirs = client(ng.addr(), "fail", "fail-ng", &[]).await;
    let unary = &theirs["unary"];
    assert_eq!(unary["code"], "NOT_FOUND", "nginx: {theirs}");
    assert_eq!(unary["details"], "not found: caf\u{e9} 100% \u{2603}");
    assert_eq!(
        unary["trailing"],
        json!([["x-reason", "gone"], ["x-detail-bin", "00ff6f6b"]])
    );
    let stream = &theirs["stream"];
    assert_eq!(stream["code"], "ABORTED", "nginx: {theirs}");
    assert_eq!(stream["details"], "aborted at 3");
    assert_eq!(stream["messages"], 3);
    assert_eq!(stream["trailing"], json!([["x-reason", "mid-stream"]]));

    let s = sluice("", &[&sluice_location(&target, "")]);
    let ours = client(s.addr(), "fail", "fail-sl", &[]).await;
    assert_eq!(untimed(&ours), untimed(&theirs), "client: sluice, nginx");
    for n in 1..=2 {
        let o = up.call(&format!("fail-sl-{n}"), CANCEL_SEEN).await;
        let t = up.call(&format!("fail-ng-{n}"), CANCEL_SEEN).await;
        assert_eq!(
            seen_upstream(&o),
            with_sluice_xff(&seen_upstream(&t)),
            "call {n}: upstream"
        );
    }
}

/// `grpc_pass` to a port nothing listens on: nginx answers HTTP 502, which the gRPC client
/// reads as `UNAVAILABLE` ("Received http2 header with status: 502"); sluice answers a gRPC
/// trailers-only `UNAVAILABLE` of its own (issue #45), so only the code is compared, and that
/// sluice answers it at once.
#[tokio::test]
async fn an_unreachable_upstream_is_unavailable() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.dead());
    let ng = nginx("", &[&nginx_location(&target, "")]);
    let theirs = client(ng.addr(), "calls", "dead-ng", &["count=2"]).await;
    for call in theirs["calls"].as_array().expect("calls") {
        assert_eq!(call["code"], "UNAVAILABLE", "nginx: {theirs}");
        assert_eq!(
            call["details"], "Received http2 header with status: 502",
            "nginx: {theirs}"
        );
    }
    assert!(
        ng.error_log()
            .contains("connect() failed (111: Connection refused)"),
        "{}",
        ng.error_log()
    );

    let s = sluice("", &[&sluice_location(&target, "")]);
    let ours = client(s.addr(), "calls", "dead-sl", &["count=2", "timeout=5000"]).await;
    let codes = |v: &Value| -> Vec<Value> {
        v["calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["code"].clone())
            .collect()
    };
    assert_eq!(codes(&ours), codes(&theirs), "sluice: {ours}");
}

/// What sluice adds to nginx's view of a call's end: `$upstream_trailer_NAME` puts the
/// upstream's trailers in the access log (`grpc-status`, `grpc-message` and custom trailing
/// metadata), and each call is counted by the status it ended with in `/metrics` and the
/// status API, the upstream's failures included.
#[tokio::test]
async fn trailers_reach_the_log_and_calls_are_counted_by_status() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.a());
    let top = "log_format = 'gs=$upstream_trailer_grpc_status gm=\"$upstream_trailer_grpc_message\" \
               r=$upstream_trailer_x_reason st=$status'\naccess_log = \"stdout\"\n[admin]\n";
    let s = sluice(top, &[&sluice_location(&target, "")]);
    let ours = client(s.addr(), "fail", "count-sl", &[]).await;
    assert_eq!(ours["unary"]["code"], "NOT_FOUND", "{ours}");
    assert_eq!(ours["stream"]["code"], "ABORTED", "{ours}");
    let ok = client(s.addr(), "unary", "count-ok", &[]).await;
    assert_eq!(ok["code"], "OK", "{ok}");
    let lines =
        crate::support::eventually("three access lines", Duration::from_secs(5), async || {
            let out = s.stdout();
            (out.lines().filter(|l| l.contains(" st=")).count() >= 3).then_some(out)
        })
        .await;
    assert!(
        lines.contains("gs=10 gm=\"aborted at 3\" r=mid-stream st=200"),
        "the streamed failure's trailers in the log: {lines}"
    );
    assert!(lines.contains("gs=0 "), "the OK call's status: {lines}");
    let metrics = crate::support::get(s.admin_addr(), "/metrics").await;
    let text = metrics.body_text();
    for (code, n) in [
        ("OK", 1),
        ("ABORTED", 1),
        ("NOT_FOUND", 1),
        ("UNAVAILABLE", 0),
    ] {
        let line = format!("sluice_grpc_calls_total{{code=\"{code}\"}} {n}\n");
        assert!(text.contains(&line), "{line} in: {text}");
    }
    let api = crate::support::get(s.admin_addr(), "/api/sluice/grpc").await;
    let api: Value = serde_json::from_str(&api.body_text()).unwrap();
    assert_eq!(api["calls"]["ABORTED"], 1, "{api}");
    assert_eq!(api["calls"]["OK"], 1, "{api}");
}
