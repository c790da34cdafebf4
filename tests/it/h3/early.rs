//! 0-RTT (`ssl_early_data`) with aioquic resuming a session: a first connection takes a
//! ticket (`--ticket FILE`), the next one sends its "early" requests with its ClientHello and
//! holds the end of its handshake back (`--hold`), so that sluice has those requests while the
//! handshake is still going on, as a replayed first flight would have them. What the upstream
//! read (`proxy_set_header Early-Data $ssl_early_data`) and the access log say what sluice did.

use super::{h3_with, leaf_for, server, start, status};
use crate::support::{KeyKind, TestCa, Upstream, client};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::Path;

/// `--ticket FILE` (resume from it, keep the next ticket in it) and `--hold SECONDS`.
fn args(ticket: &Path, hold: f64) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["--ticket".into(), ticket.into()];
    if hold > 0.0 {
        a.extend(["--hold".into(), hold.to_string().into()]);
    }
    a
}

/// One connection to `h3.test` from 127.0.0.`n` with `args`.
async fn run(addr: SocketAddr, ca: &TestCa, n: u8, spec: Value, args: &[OsString]) -> Vec<Value> {
    run_to(addr, ("h3.test", ca), n, spec, args).await
}

/// [`run`] to the server named `sni`.
async fn run_to(
    addr: SocketAddr,
    (sni, ca): (&str, &TestCa),
    n: u8,
    spec: Value,
    args: &[OsString],
) -> Vec<Value> {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    h3_with(addr, (sni, ca), client(n), spec, &args).await
}

/// The last line: the connection's.
fn connection(got: &[Value]) -> &Value {
    got.last().expect("a connection line")
}

/// What the echo upstream read for a request: its head, or "" if it never had it.
fn echoed(v: &Value) -> &str {
    v["body"].as_str().unwrap_or_default()
}

/// The proxied server of these tests: `Early-Data: $ssl_early_data` to the upstream, an access
/// log saying what sluice decided, a limit of `burst + 1` requests a client.
fn proxied(up: &Upstream, leaf: &crate::support::Leaf, keys: &str, burst: u32) -> String {
    let top = "log_format = \"$status $request_method $uri early=$ssl_early_data \
               lrs=$limit_req_status\"\n\
               [zones.z]\nsize = \"1m\"\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n";
    let body = format!(
        "access_log = \"access.log\"\n\
         [[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://{}\"\n\
         proxy_set_header = {{ \"Early-Data\" = \"$ssl_early_data\" }}\n\
         limit_req = {{ zone = \"z\", burst = {burst}, nodelay = true }}\nlimit_req_status = 429\n",
        up.addr
    );
    format!("{top}{}", server("h3.test", leaf, keys, &body))
}

#[tokio::test]
async fn early_safe_requests_are_served_marked_and_counted_others_get_425() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let up = Upstream::start();
    let s = start(&proxied(&up, &leaf, "ssl_early_data = true", 3));
    let dir = tempfile::tempdir().unwrap();
    let ticket = dir.path().join("ticket");
    let got = run(
        s.addr(),
        &ca,
        20,
        json!([{"path": "/warm"}]),
        &args(&ticket, 0.0),
    )
    .await;
    assert_eq!(status(&got[0]), Some(200), "{got:?}");
    assert_eq!(
        connection(&got)["ticket_early"],
        json!(u32::MAX),
        "its tickets offer 0-RTT: {got:?}"
    );
    // The early requests go with the ClientHello; the client's end of the handshake is held
    // 0.6 s; the last POST goes once the handshake has completed, on the same connection.
    let spec = json!([
        {"path": "/a", "early": true},
        {"path": "/o", "method": "OPTIONS", "early": true},
        {"path": "/p", "method": "POST", "body": "once", "early": true},
        {"path": "/d", "method": "DELETE", "early": true},
        {"path": "/after", "method": "POST", "body": "twice", "at": 1.0},
    ]);
    let hits = up.hits();
    let got = run(s.addr(), &ca, 20, spec, &args(&ticket, 0.6)).await;
    let last = connection(&got);
    assert_eq!(
        (&last["resumed"], &last["early_data"]),
        (&json!(true), &json!(true)),
        "{got:?}"
    );
    assert_eq!(status(&got[0]), Some(200), "{got:?}");
    assert!(
        echoed(&got[0]).starts_with("GET /a HTTP/1.1\r\n"),
        "{got:?}"
    );
    assert!(
        echoed(&got[0]).contains("early-data: 1\r\n"),
        "{}",
        echoed(&got[0])
    );
    // (OPTIONS for the other safe methods: aioquic holds a HEAD response's Content-Length
    // against its empty body.)
    assert_eq!(status(&got[1]), Some(200), "OPTIONS: {got:?}");
    assert!(echoed(&got[1]).starts_with("OPTIONS /o HTTP/1.1\r\n"));
    for (i, what) in [(2, "POST"), (3, "DELETE")] {
        assert_eq!(status(&got[i]), Some(425), "{what}: {got:?}");
        assert!(
            !echoed(&got[i]).contains("HTTP/1.1"),
            "{what} never forwarded: {got:?}"
        );
    }
    assert_eq!(status(&got[4]), Some(200), "{got:?}");
    assert!(echoed(&got[4]).starts_with("POST /after HTTP/1.1\r\n"));
    assert!(
        !echoed(&got[4]).to_lowercase().contains("early-data"),
        "after the handshake, no early data: {}",
        echoed(&got[4])
    );
    assert_eq!(up.hits() - hits, 3, "/a, /o and /after only");
    let log = s.wait_lines("access.log", 6).await;
    for line in [
        "200 GET /warm early=- lrs=PASSED",
        "200 GET /a early=1 lrs=PASSED",
        "200 OPTIONS /o early=1 lrs=PASSED",
        "425 POST /p early=1 lrs=-",
        "425 DELETE /d early=1 lrs=-",
        "200 POST /after early=- lrs=PASSED",
    ] {
        assert!(log.lines().any(|l| l == line), "{line:?} in {log}");
    }
    // limit_req counted /warm, /a, /o and /after (burst 3: four at once), not the 425s: the
    // next request is one too many.
    let got = run(s.addr(), &ca, 20, json!([{"path": "/more"}]), &[]).await;
    assert_eq!(status(&got[0]), Some(429), "{got:?}");
}

#[tokio::test]
async fn without_ssl_early_data_a_0rtt_attempt_is_refused_and_served_after_the_handshake() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let up = Upstream::start();
    let s = start(&proxied(&up, &leaf, "", 20));
    let dir = tempfile::tempdir().unwrap();
    let ticket = dir.path().join("ticket");
    // Off (the default): tickets offer no 0-RTT, so a client resumes without it.
    let got = run(
        s.addr(),
        &ca,
        21,
        json!([{"path": "/1"}]),
        &args(&ticket, 0.0),
    )
    .await;
    assert_eq!(status(&got[0]), Some(200), "{got:?}");
    assert_eq!(connection(&got)["ticket_early"], Value::Null, "{got:?}");
    let early = json!([
        {"path": "/g", "early": true},
        {"path": "/p", "method": "POST", "body": "x", "early": true},
    ]);
    let got = run(s.addr(), &ca, 21, early.clone(), &args(&ticket, 0.3)).await;
    assert_eq!(connection(&got)["resumed"], true, "{got:?}");
    assert_eq!(connection(&got)["early_data"], false, "{got:?}");
    // A ticket from when it was on, used once it is off: the client tries 0-RTT, sluice
    // refuses it, and the client sends its requests again after the handshake.
    let on = s.config_text().replace(
        "\n[[servers.locations]]",
        "\nssl_early_data = true\n[[servers.locations]]",
    );
    s.reload(&on).await;
    let got = run(
        s.addr(),
        &ca,
        21,
        json!([{"path": "/2"}]),
        &args(&ticket, 0.0),
    )
    .await;
    assert_eq!(connection(&got)["ticket_early"], json!(u32::MAX), "{got:?}");
    s.reload(&on.replace("ssl_early_data = true", "ssl_early_data = false"))
        .await;
    let hits = up.hits();
    let got = run(s.addr(), &ca, 21, early, &args(&ticket, 0.3)).await;
    let last = connection(&got);
    assert_eq!(
        (&last["resumed"], &last["early_data"]),
        (&json!(true), &json!(false)),
        "the session resumed, its 0-RTT refused: {got:?}"
    );
    for (i, line) in ["GET /g HTTP/1.1\r\n", "POST /p HTTP/1.1\r\n"]
        .iter()
        .enumerate()
    {
        assert_eq!(status(&got[i]), Some(200), "{got:?}");
        assert!(echoed(&got[i]).starts_with(line), "{got:?}");
        assert!(!echoed(&got[i]).to_lowercase().contains("early-data"));
    }
    assert_eq!(up.hits() - hits, 2);
    let log = s.file("access.log");
    assert!(!log.contains("early=1"), "{log}");
    assert!(!log.contains(" 425 "), "{log}");
}

#[tokio::test]
async fn a_ticket_resumes_once_and_a_server_without_ssl_early_data_answers_early_425() {
    let ca = TestCa::new();
    let a = ca.leaf("a", &["a.test"], KeyKind::EcdsaP256);
    let b = ca.leaf("b", &["b.test"], KeyKind::EcdsaP256);
    let answer = |n: &str| {
        format!(
            "[[servers.locations]]\npath = \"/\"\n\
             return = {{ status = 200, body = \"{n} $ssl_early_data\" }}\n"
        )
    };
    // Two servers on one address, only a.test with ssl_early_data: the address's handshakes
    // take 0-RTT (the name is not known yet when TLS decides), and b.test answers it 425.
    let toml = [
        server("a.test", &a, "ssl_early_data = true", &answer("a")),
        server("b.test", &b, "", &answer("b")),
    ]
    .concat();
    let s = start(&toml);
    let dir = tempfile::tempdir().unwrap();
    let (ta, tb) = (dir.path().join("a"), dir.path().join("b"));
    let warm = json!([{"path": "/"}]);
    let early = json!([{"path": "/e", "early": true}, {"path": "/later", "at": 1.0}]);
    run_to(s.addr(), ("b.test", &ca), 22, warm.clone(), &args(&tb, 0.0)).await;
    let got = run_to(
        s.addr(),
        ("b.test", &ca),
        22,
        early.clone(),
        &args(&tb, 0.6),
    )
    .await;
    assert_eq!(connection(&got)["early_data"], true, "{got:?}");
    assert_eq!(
        status(&got[0]),
        Some(425),
        "b.test takes no early data: {got:?}"
    );
    assert_eq!(got[1]["body"], "b ", "{got:?}");
    // a.test serves its early GET; its ticket, used a second time (a replay of the first
    // flight), finds nothing to resume: a full handshake, no 0-RTT, the GET served after it.
    run_to(s.addr(), ("a.test", &ca), 22, warm, &args(&ta, 0.0)).await;
    let replay = dir.path().join("a-again");
    std::fs::copy(&ta, &replay).unwrap();
    let got = run_to(
        s.addr(),
        ("a.test", &ca),
        22,
        early.clone(),
        &args(&ta, 0.6),
    )
    .await;
    assert_eq!(connection(&got)["early_data"], true, "{got:?}");
    assert_eq!(got[0]["body"], "a 1", "{got:?}");
    assert_eq!(got[1]["body"], "a ", "{got:?}");
    let got = run_to(s.addr(), ("a.test", &ca), 22, early, &args(&replay, 0.6)).await;
    let last = connection(&got);
    assert_eq!(
        (&last["resumed"], &last["early_data"]),
        (&json!(false), &json!(false)),
        "{got:?}"
    );
    assert_eq!(
        got[0]["body"], "a ",
        "sent again after the handshake: {got:?}"
    );
}

#[tokio::test]
async fn an_early_connection_whose_handshake_never_completes_is_closed_in_time() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let body = "[[servers.locations]]\npath = \"/\"\n\
                return = { status = 200, body = \"early=$ssl_early_data\" }\n";
    let keys = "ssl_early_data = true\nclient_header_timeout = \"1s\"";
    let toml = format!(
        "error_log = \"stderr info\"\n{}",
        server("h3.test", &leaf, keys, body)
    );
    let s = start(&toml);
    let dir = tempfile::tempdir().unwrap();
    let ticket = dir.path().join("ticket");
    run(
        s.addr(),
        &ca,
        23,
        json!([{"path": "/"}]),
        &args(&ticket, 0.0),
    )
    .await;
    let mark = s.log_mark();
    // A first flight whose sender does not finish the handshake (as a replay never can): its
    // GET is answered, and the connection closed once client_header_timeout has passed: when
    // the client speaks again, it hears so (until then, sluice may not send it more than
    // three times what it received: RFC 9000 §8.1).
    let spec = json!([{"path": "/", "early": true}, {"path": "/later", "at": 3.0}]);
    let got = run(s.addr(), &ca, 23, spec, &args(&ticket, 2.5)).await;
    assert_eq!(got[0]["body"], "early=1", "{got:?}");
    assert_eq!(status(&got[1]), None, "{got:?}");
    assert_eq!(connection(&got)["connection"], "closed", "{got:?}");
    let log = s
        .wait_log_after(mark, |l| l.contains("while SSL handshaking"))
        .await;
    assert!(
        log.contains(
            "client timed out (110: Connection timed out) while SSL handshaking, client: 127.0.0.23"
        ),
        "{log}"
    );
}
