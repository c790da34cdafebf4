//! What limits do to the response: 444, limits on `return`, Retry-After, a delayed client that
//! leaves, dry run, and the error-log lines of a flood of rejections.

use super::*;

#[tokio::test]
async fn status_444_closes_the_connection_without_a_response() {
    let toml = format!("limit_req_status = 444\n{ONE_PER_MINUTE}");
    let s = Sluice::in_process(&toml);
    let a = request(s.addr(), client(2), "GET", "/", &[]).await;
    let b = request(s.addr(), client(2), "GET", "/", &[]).await;
    assert_eq!(a.status, 200);
    assert!(b.no_response(), "444 closes without a response, got {b}");
}

/// Unlike nginx (where `return` runs before limit_req), limits apply to `return`.
/// And with no error page, a rejection is problem+json with an exact Retry-After.
#[tokio::test]
async fn return_is_limited_and_rejections_carry_retry_after() {
    let toml = r#"
limit_req_status = 429
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "30r/m"
[zones.slow]
key = "$binary_remote_addr"
size = "1m"
rate = "6r/m"
[[servers]]
[[servers.locations]]
path = "/r"
limit_req = { zone = "z" }
return = { status = 200, body = "ok $limit_req_status\n" }
[[servers.locations]]
path = "/six"
limit_req = { zone = "slow" }
return = { status = 200 }
"#;
    let s = Sluice::in_process(toml);
    let replies = crate::support::burst(s.addr(), client(2), "/r", 3).await;
    let ok: Vec<_> = replies.iter().filter(|r| r.status == 200).collect();
    assert_eq!(ok.len(), 1, "one passes, the rest are limited");
    assert_eq!(ok[0].body_text(), "ok PASSED\n");
    let rejected = replies.iter().find(|r| r.status == 429).unwrap();
    assert_eq!(
        rejected.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(
        rejected.header("retry-after"),
        Some("2"),
        "30r/m without burst"
    );
    let body = rejected.body_text();
    assert!(
        body.contains("\"status\":429") && body.contains("#quota-exceeded"),
        "{body}"
    );

    request(s.addr(), client(3), "GET", "/six", &[]).await;
    let r = request(s.addr(), client(3), "GET", "/six", &[]).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("10"), "6r/m without burst");
}

/// nginx: a client that goes away while delayed is logged (499) and its slot
/// stays charged: the next request is delayed as if it had stayed.
#[tokio::test]
async fn a_delayed_client_that_leaves_keeps_its_slot() {
    let toml = r#"
access_log = "stdout"
[admin]
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "2r/s"
[[servers]]
[[servers.locations]]
path = "/"
limit_req = { zone = "z", burst = 5 }
return = { status = 200 }
"#;
    let s = Sluice::start(toml);
    // The raw connection below comes from 127.0.0.1: use that client throughout.
    let me = "127.0.0.1".parse().unwrap();
    let first = request(s.addr(), me, "GET", "/", &[]).await;
    assert_eq!(first.status, 200);
    // Second: delayed ~500 ms; leave after 100 ms.
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(c);
    let start = Instant::now();
    let r = request(s.addr(), me, "GET", "/", &[]).await;
    let waited = start.elapsed();
    assert_eq!(r.status, 200);
    // Excess after the first two: 2000 minus ~100 ms of leak → delay ≈ 900 ms.
    assert!(
        waited >= Duration::from_millis(700),
        "the slot of the client that left must stay charged (waited {waited:?})"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = s.log();
    assert!(
        log.contains("client prematurely closed connection"),
        "{log}"
    );
    let access = s.stdout();
    assert!(access.contains("\" 499 0 "), "{access}");
    let metrics = request(s.admin_addr(), me, "GET", "/metrics", &[]).await;
    assert!(
        metrics
            .body_text()
            .contains("sluice_http_responses_total{code=\"499\"} 1"),
        "{}",
        metrics.body_text()
    );
    assert!(
        access
            .lines()
            .any(|l| l.contains(" 499 ") && l.ends_with("DELAYED")),
        "{access}"
    );
}

/// Dry run: nothing is rejected or delayed, a dry-run delay is charged and a
/// dry-run rejection is not; `$limit_req_status` says what would have happened;
/// delays log one level below `limit_req_log_level`.
#[tokio::test]
async fn dry_run_statuses_and_log_levels() {
    let toml = r#"
access_log = "stdout"
log_format = "$status $limit_req_status $request_uri"
limit_req_log_level = "warn"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[[servers]]
[[servers.locations]]
path = "/dry"
limit_req_dry_run = true
limit_req = { zone = "z", burst = 1 }
return = { status = 200 }
[[servers.locations]]
path = "/real"
limit_req = { zone = "z", burst = 1 }
return = { status = 200 }
"#;
    let s = Sluice::start(toml);
    let replies = crate::support::burst(s.addr(), client(2), "/dry", 4).await;
    assert!(
        replies.iter().all(|r| r.status == 200 && r.ms() < 300),
        "dry run never rejects or delays: {replies:?}"
    );
    // 1r/m leaks nothing in a few hundred ms, so the excesses are exact.
    // Charged: pass (0) + dry-run delay (1000); the two dry-run rejections charged nothing.
    let r = request(s.addr(), client(2), "GET", "/real", &[]).await;
    assert_eq!(
        r.status, 503,
        "excess 2000 - leak > burst 1000: rejected, default status 503"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut lines: Vec<String> = s.stdout().lines().map(String::from).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "200 DELAYED_DRY_RUN /dry",
            "200 PASSED /dry",
            "200 REJECTED_DRY_RUN /dry",
            "200 REJECTED_DRY_RUN /dry",
            "503 REJECTED /real",
        ]
    );
    let log = s.log();
    assert!(
        log.contains("[notice]")
            && log.contains("delaying request, dry run, excess: 1.000, by zone \"z\""),
        "{log}"
    );
    assert!(
        log.contains("[warn]")
            && log.contains("limiting requests, dry run, excess: 2.000 by zone \"z\""),
        "{log}"
    );
}

/// Error-log lines are batched per worker (one write for many lines): a
/// flood of rejections still leaves exactly one whole, well-formed line per
/// rejection, written by the time the responses are out.
#[tokio::test]
async fn a_flood_of_rejections_logs_every_line_whole() {
    // An access log too: batched like the error log, every line whole.
    let toml = format!("access_log = \"stdout\"\n{ONE_PER_MINUTE}");
    let s = Sluice::start(&toml);
    let n = 300;
    let replies = burst(s.addr(), client(3), "/flood", n).await;
    let rejected = replies.iter().filter(|r| r.status == 503).count();
    assert_eq!(rejected, n - 1, "one passes, the rest are rejected");
    // Batched lines may trail the responses: wait until all have arrived, then check that
    // there are no more (one each).
    eventually(
        "a line per rejection",
        Duration::from_millis(500),
        async || {
            let lines = limit_lines(&s.log()).expect("every line in nginx's format");
            (lines.len() >= rejected).then_some(())
        },
    )
    .await;
    let lines = limit_lines(&s.log()).expect("every line in nginx's format");
    assert_eq!(lines.len(), rejected, "one line per rejection");
    assert!(
        lines
            .iter()
            .all(|l| l.zone == "z" && l.request == "GET /flood HTTP/1.1")
    );
    let access = s.stdout();
    let statuses: Vec<&str> = access
        .lines()
        .filter_map(|l| l.split("\"GET /flood HTTP/1.1\" ").nth(1))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    assert_eq!(access.lines().count(), n, "one access line per request");
    assert_eq!(statuses.iter().filter(|s| **s == "503").count(), n - 1);
    assert_eq!(statuses.iter().filter(|s| **s == "200").count(), 1);
}
