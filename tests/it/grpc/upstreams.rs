//! Upstreams beyond one plain address: `grpcs://` (TLS with ALPN h2) verified against a trusted
//! CA and refused when the name does not match; a group of servers, one of them down, failing
//! over with `grpc_next_upstream`'s default and not with `off`.

use super::peers::{Upstreams, client, seen_upstream, untimed, with_sluice_xff};
use super::{nginx, nginx_location, sluice, sluice_location};
use serde_json::Value;
use std::time::Duration;

const LOG_WAIT: Duration = Duration::from_secs(5);

/// `grpcs://127.0.0.1:PORT` with `grpc_ssl_verify`, the CA trusted and `grpc_ssl_name
/// localhost` (the certificate's name): the unary call reaches the TLS server `s` with the
/// client's metadata. With `grpc_ssl_name wrong.example`, the handshake is refused: the
/// client gets `UNAVAILABLE` and the server never sees the call.
#[tokio::test]
async fn grpcs_upstream_verified_and_refused() {
    let up = Upstreams::shared();
    let target = format!("grpcs://{}", up.tls());
    let ca = up.ca();
    let ng_tls = |name: &str| {
        format!(
            "grpc_ssl_verify on; grpc_ssl_trusted_certificate {}; grpc_ssl_name {name};",
            ca.display()
        )
    };
    let ng = nginx(
        "",
        &[
            &nginx_location(&target, &ng_tls("localhost")),
            &nginx_location(&target, &ng_tls("wrong.example")),
        ],
    );
    let theirs = client(ng.addr_of(0), "unary", "tls-ng", &[]).await;
    assert_eq!(theirs["code"], "OK", "nginx: {theirs}");
    assert_eq!(theirs["reply"]["server"], "s", "nginx: {theirs}");
    let their_seen = up.call("tls-ng-1", LOG_WAIT).await;
    let refused = client(ng.addr_of(1), "calls", "tls-bad-ng", &["count=1"]).await;
    assert_eq!(
        refused["calls"][0]["code"], "UNAVAILABLE",
        "nginx: {refused}"
    );
    assert!(
        ng.error_log()
            .contains("upstream SSL certificate does not match \"wrong.example\""),
        "{}",
        ng.error_log()
    );

    let sl_tls = |name: &str| {
        format!(
            "grpc_ssl_verify = true\ngrpc_ssl_trusted_certificate = \"{}\"\ngrpc_ssl_name = \"{name}\"",
            ca.display()
        )
    };
    let s = sluice(
        "",
        &[
            &sluice_location(&target, &sl_tls("localhost")),
            &sluice_location(&target, &sl_tls("wrong.example")),
        ],
    );
    let ours = client(s.addr_of(0), "unary", "tls-sl", &[]).await;
    // The echo's metadata differs by sluice's X-Forwarded-For: compared in the upstream's view.
    let unechoed = |v: &Value| {
        let mut v = untimed(v);
        v["reply"]["metadata"] = Value::Null;
        v
    };
    assert_eq!(unechoed(&ours), unechoed(&theirs), "client: sluice, nginx");
    let our_seen = up.call("tls-sl-1", LOG_WAIT).await;
    assert_eq!(
        seen_upstream(&our_seen),
        with_sluice_xff(&seen_upstream(&their_seen))
    );
    let refused = client(s.addr_of(1), "calls", "tls-bad-sl", &["count=1"]).await;
    assert_eq!(
        refused["calls"][0]["code"], "UNAVAILABLE",
        "sluice: {refused}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        up.calls("tls-bad-sl").is_empty() && up.calls("tls-bad-ng").is_empty(),
        "a call reached the server past a failed verification"
    );
}

/// Each call's code and the server that answered it (`null` for none).
fn answers(v: &Value) -> Vec<(String, String)> {
    v["calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (c["code"].to_string(), c["server"].to_string()))
        .collect()
}

/// A group of the dead port, `a` and `b`: with `grpc_next_upstream`'s default (`error
/// timeout`), a call that meets the dead server is tried again on the next, so all six calls
/// succeed, on `a` and `b` in nginx's round-robin order. A group of the dead port and `a`
/// with `grpc_next_upstream off`: the call that meets the dead server fails `UNAVAILABLE`
/// (and marks it down), the others reach `a`. sluice chooses the same servers in the same
/// order.
#[tokio::test]
async fn a_group_with_a_server_down_fails_over() {
    let up = Upstreams::shared();
    let (dead, a, b) = (up.dead(), up.a(), up.b());
    let ng = nginx(
        &format!(
            "upstream g {{ server {dead}; server {a}; server {b}; }}\n\
             upstream g_off {{ server {dead}; server {a}; }}"
        ),
        &[
            &nginx_location("grpc://g", ""),
            &nginx_location("grpc://g_off", "grpc_next_upstream off;"),
        ],
    );
    let theirs = client(ng.addr_of(0), "calls", "group-ng", &["count=6"]).await;
    let their_order = answers(&theirs);
    assert!(
        their_order.iter().all(|(code, _)| code == "\"OK\""),
        "nginx: {theirs}"
    );
    let servers: Vec<&str> = their_order.iter().map(|(_, s)| s.as_str()).collect();
    assert!(
        servers.contains(&"\"a\"") && servers.contains(&"\"b\""),
        "nginx: {theirs}"
    );
    let their_off = client(ng.addr_of(1), "calls", "group-off-ng", &["count=3"]).await;
    let their_off_order = answers(&their_off);
    assert!(
        their_off_order
            .iter()
            .any(|(code, _)| code == "\"UNAVAILABLE\""),
        "nginx: {their_off}"
    );

    let s = sluice(
        &format!(
            "[upstreams.g]\nservers = [{{ address = \"{dead}\" }}, {{ address = \"{a}\" }}, {{ address = \"{b}\" }}]\n\
             [upstreams.g_off]\nservers = [{{ address = \"{dead}\" }}, {{ address = \"{a}\" }}]"
        ),
        &[
            &sluice_location("grpc://g", ""),
            &sluice_location("grpc://g_off", "grpc_next_upstream = \"off\""),
        ],
    );
    let ours = client(s.addr_of(0), "calls", "group-sl", &["count=6"]).await;
    assert_eq!(
        answers(&ours),
        their_order,
        "sluice: {ours}\nnginx: {theirs}"
    );
    let our_off = client(s.addr_of(1), "calls", "group-off-sl", &["count=3"]).await;
    assert_eq!(
        answers(&our_off),
        their_off_order,
        "sluice: {our_off}\nnginx: {their_off}"
    );
    assert_eq!(up.calls("group-sl").len(), 6);
}
