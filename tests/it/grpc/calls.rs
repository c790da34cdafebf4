//! Calls that succeed: unary with metadata and trailers, the three streaming kinds message by
//! message, 4 MB messages, a thousand concurrent calls over one channel.

use super::peers::{Upstreams, client, seen_upstream, untimed, with_sluice_xff};
use super::{nginx, nginx_location, sluice, sluice_location};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

const LOG_WAIT: Duration = Duration::from_secs(5);

/// The value of metadata `key` in an echo's or a log line's `metadata` list.
fn md<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter(|kv| kv[0] == key)
        .filter_map(|kv| kv[1].as_str())
        .collect()
}

/// The unary scenario through `addr`: the client's result and the upstream's log line.
async fn unary(up: &Upstreams, addr: SocketAddr, id: &str) -> (Value, Value) {
    let r = client(addr, "unary", id, &[]).await;
    let seen = up.call(&format!("{id}-1"), LOG_WAIT).await;
    (r, seen)
}

/// A unary call with text, binary and user metadata asking for initial and trailing metadata:
/// the client gets them back (and the message), the upstream gets the client's metadata, the
/// `:authority` of `grpc_pass`'s address (nginx's default, `$proxy_host`-like), the
/// `X-Forwarded-For` set by `grpc_set_header`, and the deadline.
#[tokio::test]
async fn unary_call_carries_metadata_and_trailers_both_ways() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.a());
    let ng = nginx(
        "",
        &[&nginx_location(
            &target,
            "grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
        )],
    );
    let (theirs, their_seen) = unary(&up, ng.addr(), "unary-ng").await;
    assert_eq!(theirs["code"], "OK", "nginx: {theirs}");
    assert_eq!(theirs["initial"], json!([["x-answer", "forty-two"]]));
    assert_eq!(
        theirs["trailing"],
        json!([["x-checksum", "abc123"], ["x-trace-bin", "deadbeef"]]),
        "nginx: {theirs}"
    );
    let echo = &theirs["reply"];
    assert_eq!(echo["server"], "a");
    assert_eq!(echo["authority"], up.a().to_string(), "nginx: {echo}");
    assert_eq!(md(&echo["metadata"], "x-user"), ["alice"]);
    assert_eq!(md(&echo["metadata"], "x-blob-bin"), ["0001feff"]);
    assert_eq!(md(&echo["metadata"], "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(echo["size"], 100);
    assert!(
        their_seen["deadline_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 5000),
        "nginx passes grpc-timeout on: {their_seen}"
    );

    let s = sluice(
        "",
        &[&sluice_location(
            &target,
            "grpc_set_header = { \"X-Forwarded-For\" = \"$proxy_add_x_forwarded_for\" }",
        )],
    );
    let (ours, our_seen) = unary(&up, s.addr(), "unary-sl").await;
    assert_eq!(
        untimed(&ours),
        untimed(&theirs),
        "client's view: sluice, nginx"
    );
    assert_eq!(
        seen_upstream(&our_seen),
        seen_upstream(&their_seen),
        "upstream's view: sluice, nginx"
    );
}

/// Server, client and bidirectional streaming: every message arrives whole and in order, the
/// trailers follow; and each message is passed on when it comes, not when the call ends (the
/// first of a server's messages 200 ms apart arrives long before the last, a client's messages
/// 200 ms apart reach the upstream 200 ms apart, and a ping-pong where each message waits for
/// the previous one's echo finishes at all).
#[tokio::test]
async fn server_client_and_bidi_streams_flow_message_by_message() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.a());
    let ng = nginx("", &[&nginx_location(&target, "")]);
    let theirs = streams(&up, ng.addr(), "streams-ng").await;
    let s = sluice("", &[&sluice_location(&target, "")]);
    let ours = streams(&up, s.addr(), "streams-sl").await;
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(
            untimed(&o.0),
            untimed(&t.0),
            "call {i}, client: sluice, nginx"
        );
        assert_eq!(
            seen_upstream(&o.1),
            with_sluice_xff(&seen_upstream(&t.1)),
            "call {i}, upstream: sluice, nginx"
        );
    }
}

/// The three streaming scenarios through `addr`, each checked on its own; their results and
/// log lines.
async fn streams(up: &Upstreams, addr: SocketAddr, id: &str) -> Vec<(Value, Value)> {
    let who = format!("{id} through {addr}");
    let server = client(
        addr,
        "server_stream",
        &format!("{id}-ss"),
        &["count=4", "gap=200", "size=1000"],
    )
    .await;
    assert_eq!(server["code"], "OK", "{who}: {server}");
    assert_eq!(server["messages"], 4, "{who}: {server}");
    assert_eq!(server["intact"], true, "{who}: {server}");
    assert_eq!(server["trailing"], json!([["x-end", "done"]]), "{who}");
    let (first, all) = (server["first_ms"].as_u64(), server["ms"].as_u64());
    assert!(
        first.zip(all).is_some_and(|(f, a)| f + 300 < a),
        "{who}: the first message came with the last: {server}"
    );
    let server_seen = up.call(&format!("{id}-ss-1"), LOG_WAIT).await;

    let from_client = client(
        addr,
        "client_stream",
        &format!("{id}-cs"),
        &["count=4", "gap=200", "size=1000"],
    )
    .await;
    assert_eq!(from_client["code"], "OK", "{who}: {from_client}");
    assert_eq!(from_client["reply"]["count"], 4, "{who}: {from_client}");
    assert_eq!(from_client["trailing"], json!([["x-end", "done"]]), "{who}");
    let client_seen = up.call(&format!("{id}-cs-1"), LOG_WAIT).await;
    let at: Vec<u64> = client_seen["received"]["at_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect();
    assert!(
        at.len() == 4 && at[3] >= at[0] + 450,
        "{who}: the upstream got the client's messages together: {client_seen}"
    );

    let bidi = client(
        addr,
        "bidi",
        &format!("{id}-bd"),
        &["rounds=20", "size=100000", "timeout=5000"],
    )
    .await;
    assert_eq!(bidi["code"], "OK", "{who}: {bidi}");
    assert_eq!(bidi["messages"], 20, "{who}: {bidi}");
    assert_eq!(bidi["intact"], true, "{who}: {bidi}");
    let bidi_seen = up.call(&format!("{id}-bd-1"), LOG_WAIT).await;
    vec![
        (server, server_seen),
        (from_client, client_seen),
        (bidi, bidi_seen),
    ]
}

/// 4 MiB in one message each way (gRPC's default limit, raised on both ends), then a server
/// stream of two: whole and intact, through both.
#[tokio::test]
async fn four_megabyte_messages_pass_both_ways() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.a());
    let ng = nginx("", &[&nginx_location(&target, "")]);
    let theirs = client(ng.addr(), "big", "big-ng", &[]).await;
    let their_seen = up.call("big-ng-1", LOG_WAIT).await;
    let size = 4 * 1024 * 1024;
    assert_eq!(theirs["unary"]["code"], "OK", "nginx: {theirs}");
    assert_eq!(
        theirs["unary"]["reply"],
        json!({"size": size, "intact": true})
    );
    assert_eq!(their_seen["received"]["bytes"], size, "nginx: {their_seen}");
    assert_eq!(theirs["stream"]["code"], "OK", "nginx: {theirs}");
    assert_eq!(theirs["stream"]["bytes"], 2 * size);
    assert_eq!(theirs["stream"]["intact"], true);

    let s = sluice("", &[&sluice_location(&target, "")]);
    let ours = client(s.addr(), "big", "big-sl", &[]).await;
    let our_seen = up.call("big-sl-1", LOG_WAIT).await;
    assert_eq!(untimed(&ours), untimed(&theirs), "client: sluice, nginx");
    assert_eq!(
        seen_upstream(&our_seen),
        with_sluice_xff(&seen_upstream(&their_seen))
    );
}

/// A thousand unary calls at once on one channel (one HTTP/2 connection to the proxy, more
/// streams than nginx's 128 at a time): every one answered OK with its own answer, and the
/// upstream saw each once.
#[tokio::test]
async fn a_thousand_concurrent_calls_over_one_channel() {
    let up = Upstreams::shared();
    let target = format!("grpc://{}", up.a());
    let ng = nginx("", &[&nginx_location(&target, "")]);
    let theirs = client(ng.addr(), "many", "many-ng", &["count=1000"]).await;
    assert_eq!(theirs["codes"], json!({"OK": 1000}), "nginx: {theirs}");
    assert_eq!(theirs["distinct"], 1000, "nginx: {theirs}");
    assert_eq!(up.calls("many-ng").len(), 1000);

    let s = sluice("", &[&sluice_location(&target, "")]);
    let ours = client(s.addr(), "many", "many-sl", &["count=1000"]).await;
    assert_eq!(untimed(&ours), untimed(&theirs), "sluice, nginx");
    let seen = up.calls("many-sl");
    assert_eq!(seen.len(), 1000, "calls the upstream saw through sluice");
    assert!(
        seen.iter()
            .all(|c| c["outcome"] == "ok" && c["received"]["count"] == 1),
        "every call once, whole"
    );
}
