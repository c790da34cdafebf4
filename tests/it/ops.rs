//! Operating sluice on the real binary: reload (SIGHUP, `sluice reload`),
//! graceful stop (SIGTERM), `/metrics`, timeouts and body size; [`parking`]: idle connections
//! parked and resumed, the listen backlog, connections shared out among the workers.

mod parking;

use crate::support::{
    Answer, Port, Reader, Reply, Sluice, Upstream, client, connect, eventually, exchange, get,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The status of `GET path` from 127.0.0.1, 0 when there was no response.
async fn status(to: SocketAddr, path: &str) -> u16 {
    get(to, path).await.status
}

/// One server with a zone `z` (`rate`, burst 1 nodelay) on `/limited` and
/// an unlimited `/free`; `extra` is appended (more locations).
fn limited(rate: &str, extra: &str) -> String {
    format!(
        r#"
limit_req_status = 429
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "{rate}"

[[servers]]
[[servers.locations]]
path = "/limited"
limit_req = {{ zone = "z", burst = 1, nodelay = true }}
return = {{ status = 200, body = "limited\n" }}
[[servers.locations]]
path = "/free"
return = {{ status = 200, body = "free\n" }}
{extra}
"#
    )
}

#[tokio::test]
async fn reload_under_load_loses_no_request_and_keeps_the_zone() {
    let s = Sluice::start(&limited("1r/m", ""));
    let a = s.addr();
    // burst 1: two pass, the third is over.
    assert_eq!(status(a, "/limited").await, 200);
    assert_eq!(status(a, "/limited").await, 200);
    assert_eq!(status(a, "/limited").await, 429);

    // Constant load from 4 clients while the configuration is reloaded.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut load = Vec::new();
    for _ in 0..4 {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let r = get(a, "/free").await;
                if r.status == 200 {
                    ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    eprintln!("failed during reload: {r:?}");
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for i in 0..5 {
        let extra = format!(
            "[[servers.locations]]\npath = \"/gen\"\nreturn = {{ status = 200, body = \"gen {i}\\n\" }}\n"
        );
        let log = s.reload(&limited("1r/m", &extra)).await;
        assert!(log.contains("reconfigured:"), "{log}");
        assert!(log.contains("1 kept with their state: z"), "{log}");
        let r = get(a, "/gen").await;
        assert_eq!(r.body_text(), format!("gen {i}\n"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.unwrap();
    }
    assert_eq!(failed.load(Ordering::Relaxed), 0);
    assert!(ok.load(Ordering::Relaxed) > 20, "the load ran");
    // The zone kept its excess through five reloads.
    assert_eq!(status(a, "/limited").await, 429);
}

#[tokio::test]
async fn a_new_rate_applies_at_once_to_the_kept_state() {
    let s = Sluice::start(&limited("1r/m", ""));
    let a = s.addr();
    assert_eq!(status(a, "/limited").await, 200);
    assert_eq!(status(a, "/limited").await, 200);
    let charged = Instant::now();
    assert_eq!(status(a, "/limited").await, 429);

    let log = s.reload(&limited("1r/s", "")).await;
    assert!(log.contains("reconfigured:"), "{log}");
    // Kept: excess 1.000 stored; at 1r/s it leaks 1 per second.
    assert!(charged.elapsed() < Duration::from_millis(800));
    assert_eq!(status(a, "/limited").await, 429, "state was kept");
    tokio::time::sleep_until(charged + Duration::from_millis(1200)).await;
    // At the old 1r/m this would still be over; at 1r/s it passes.
    assert_eq!(status(a, "/limited").await, 200, "the new rate applies");
}

#[tokio::test]
async fn a_bad_reload_changes_nothing_and_says_where() {
    let good = limited("1r/m", "[admin]\n");
    let s = Sluice::start(&good);
    let a = s.addr();
    assert_eq!(status(a, "/limited").await, 200);

    // Two problems: both reported with file, line and column.
    let bad = good
        .replace("rate = \"1r/m\"", "rate = \"0r/m\"\nbrust = 5")
        .replace("path = \"/free\"", "path = \"/gone\"");
    let log = s.reload(&bad).await;
    let file = s.config_path().display().to_string();
    // Lines as written: the harness added the listen addresses.
    let written = s.config_text();
    let line_of = |needle: &str| written.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert!(log.contains("[emerg]"), "{log}");
    let rate = format!("{file}:{}:8: invalid rate \"0r/m\"", line_of("0r/m"));
    assert!(log.contains(&rate), "{rate} in {log}");
    let brust = format!("{file}:{}:1: unknown key \"brust\"", line_of("brust"));
    assert!(log.contains(&brust), "{brust} in {log}");
    assert!(log.contains("reload failed, still running the previous configuration"));
    // The old configuration still answers, with its zone state.
    assert_eq!(status(a, "/free").await, 200);
    assert_eq!(status(a, "/gone").await, 404);
    assert_eq!(status(a, "/limited").await, 200);
    assert_eq!(status(a, "/limited").await, 429);

    // A new key with the same size is refused, as nginx.
    let log = s
        .reload(&good.replace("$binary_remote_addr", "$remote_addr"))
        .await;
    assert!(
        log.contains(
            "limit_req \"z\" uses the \"$remote_addr\" key while previously it used the \"$binary_remote_addr\" key"
        ),
        "{log}"
    );
    assert_eq!(status(a, "/limited").await, 429);

    let metrics = get(s.admin_addr(), "/metrics").await.body_text();
    assert!(
        metrics.contains("sluice_config_reloads_total{result=\"failed\"} 2"),
        "{metrics}"
    );
    assert!(metrics.contains("sluice_config_last_reload_successful 0"));

    // A good one again.
    let log = s.reload(&good).await;
    assert!(log.contains("reconfigured:"), "{log}");
    let metrics = get(s.admin_addr(), "/metrics").await.body_text();
    assert!(metrics.contains("sluice_config_reloads_total{result=\"ok\"} 1"));
    assert!(metrics.contains("sluice_config_last_reload_successful 1"));
}

/// One server answering `body` on every path; the harness gives it its port.
fn server(body: &str) -> String {
    format!(
        "[[servers]]\n[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200, body = \"{body}\" }}\n"
    )
}

/// [`server`] on a given address: one listener that a reload keeps.
fn server_at(addr: SocketAddr, body: &str) -> String {
    server(body).replacen(
        "[[servers]]\n",
        &format!("[[servers]]\nlisten = \"{addr}\"\n"),
        1,
    )
}

#[tokio::test]
async fn reload_adds_and_removes_listeners() {
    let pid_file = "pid_file = \"sluice.pid\"\n";
    let s = Sluice::start(&format!("{pid_file}{}", server("one")));
    let p1 = s.addr();
    let pid_path = s.dir().join("sluice.pid");
    assert_eq!(
        std::fs::read_to_string(&pid_path).unwrap().trim(),
        s.pid().to_string()
    );
    // A keep-alive connection to p1, open across the reloads.
    let mut kept = open(p1).await;
    let one = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    kept.write_all(one).await.unwrap();
    assert_eq!(kept.response().await.body_text(), "one");
    let mut buf = [0u8; 1024];

    // Added: p2 (the second server gets a new port). `sluice reload --pid-file` sends the
    // SIGHUP.
    let two = format!("{pid_file}{}{}", server("one again"), server("two"));
    let log = s.reload_by_command(&two, &pid_path).await;
    assert!(log.contains("reconfigured:"), "{log}");
    let p2 = s.addr_of(1);
    assert!(log.contains(&format!("listening on {p2}")), "{log}");
    assert_eq!(get(p2, "/").await.body_text(), "two");
    // p1 kept its listener and serves the new configuration.
    assert_eq!(get(p1, "/").await.body_text(), "one again");

    // Removed: p1.
    let log = s
        .reload(&format!("{pid_file}{}", server_at(p2, "two again")))
        .await;
    assert!(log.contains(&format!("stopped listening on {p1}")), "{log}");
    assert!(TcpStream::connect(p1).await.is_err(), "p1 closed");
    assert_eq!(get(p2, "/").await.body_text(), "two again");
    // The idle keep-alive connection of the removed listener was closed.
    let n = tokio::time::timeout(Duration::from_secs(5), kept.read(&mut buf))
        .await
        .expect("closed, not left open")
        .unwrap_or(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn sigterm_lets_delayed_requests_finish_then_exits_0() {
    let toml = r#"
pid_file = "sluice.pid"
access_log = "access.log"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/s"
[[servers]]
[[servers.locations]]
path = "/"
limit_req = { zone = "z", burst = 5 }
return = { status = 200, body = "done\n" }
"#;
    let mut s = Sluice::start(toml);
    let a = s.addr();
    // Three at once: delays 0, 1 s and 2 s.
    let start = Instant::now();
    let reqs: Vec<_> = (0..3)
        .map(|_| tokio::spawn(async move { (get(a, "/").await, start.elapsed()) }))
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        TcpStream::connect(a).await.is_err(),
        "no new connections once stopping"
    );
    let mut took = Vec::new();
    for r in reqs {
        let (reply, elapsed) = r.await.unwrap();
        assert_eq!(reply.status, 200, "answered");
        assert_eq!(reply.body_text(), "done\n");
        took.push(elapsed);
    }
    took.sort();
    assert!(took[2] >= Duration::from_millis(1900), "{took:?}");
    let status = s.wait_exit(Duration::from_secs(5)).await.expect("exited");
    assert_eq!(status.code(), Some(0), "log:\n{}", s.log());
    assert!(!s.dir().join("sluice.pid").exists(), "pid file removed");
    let log = s.log();
    assert!(log.contains("signal 15 (SIGTERM) received"), "{log}");
    assert!(log.contains("gracefully shutting down"), "{log}");
    // Every request's access-log line is written before the exit, the one
    // that finished last in the drain included (lines are batched per worker).
    let access = s.file("access.log");
    assert_eq!(access.lines().count(), 3, "{access}");
    assert!(
        access
            .lines()
            .all(|l| l.contains("\"GET / HTTP/1.1\" 200 5 ")),
        "{access}"
    );
}

#[tokio::test]
async fn shutdown_timeout_bounds_the_drain() {
    let toml = r#"
shutdown_timeout = "500ms"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[[servers]]
[[servers.locations]]
path = "/"
limit_req = { zone = "z", burst = 5 }
return = { status = 200 }
"#;
    let mut s = Sluice::start(toml);
    let a = s.addr();
    assert_eq!(status(a, "/").await, 200);
    // Delayed by a minute.
    let slow = tokio::spawn(async move { get(a, "/").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let start = Instant::now();
    s.signal(libc::SIGTERM);
    let code = s.wait_exit(Duration::from_secs(5)).await.expect("exited");
    assert_eq!(code.code(), Some(0));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert!(slow.await.unwrap().no_response(), "cut off, no response");
    assert!(s.log().contains("still open after shutdown_timeout"));
}

#[tokio::test]
async fn metrics_count_what_was_sent() {
    let dead = Port::reserve(); // nothing listens there: connect errors
    let toml = format!(
        r#"
limit_req_status = 429
[admin]
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[zones.dry]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[[servers]]
[[servers.locations]]
path = "/z"
limit_req = {{ zone = "z" }}
return = {{ status = 200 }}
[[servers.locations]]
path = "/dry"
limit_req = {{ zone = "dry" }}
limit_req_dry_run = true
return = {{ status = 200 }}
[[servers.locations]]
path = "/dead"
proxy_pass = "http://{dead}"
"#,
        dead = dead.addr()
    );
    let s = Sluice::in_process(&toml);
    let a = s.addr();
    for _ in 0..4 {
        status(a, "/z").await;
    }
    for _ in 0..3 {
        assert_eq!(status(a, "/dry").await, 200);
    }
    assert_eq!(status(a, "/dead").await, 502);
    assert_eq!(status(a, "/nowhere").await, 404);

    let r = get(s.admin_addr(), "/metrics").await;
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .is_some_and(|v| v.starts_with("application/openmetrics-text")),
        "{r:?}"
    );
    let m = r.body_text();
    for line in [
        "sluice_limit_req_requests_total{zone=\"z\",status=\"passed\"} 1",
        "sluice_limit_req_requests_total{zone=\"z\",status=\"rejected\"} 3",
        "sluice_limit_req_requests_total{zone=\"dry\",status=\"passed\"} 1",
        "sluice_limit_req_requests_total{zone=\"dry\",status=\"rejected_dry_run\"} 2",
        "sluice_upstream_errors_total{kind=\"connect\"} 1",
        "sluice_http_responses_total{code=\"200\"} 4",
        "sluice_http_responses_total{code=\"429\"} 3",
        "sluice_http_responses_total{code=\"502\"} 1",
        "sluice_http_responses_total{code=\"404\"} 1",
        "sluice_http_request_duration_seconds_count 9",
        "sluice_limit_req_zone_states{zone=\"z\"} 1",
        "sluice_limit_req_zone_states{zone=\"dry\"} 1",
        "sluice_limit_req_zone_evictions_total{zone=\"z\"} 0",
    ] {
        assert!(m.contains(line), "missing {line:?} in\n{m}");
    }
    assert!(!m.contains("127.0.0.1\""), "never a label per client");
    let h = get(s.admin_addr(), "/healthz").await;
    assert_eq!((h.status, h.body_text().as_str()), (200, "ok\n"));
    drop(s);
}

#[tokio::test]
async fn silent_and_idle_clients_are_dropped() {
    let toml = r#"
client_header_timeout = "1s"
keepalive_timeout = "600ms"
[[servers]]
[[servers.locations]]
path = "/"
return = { status = 200, body = "ok" }
"#;
    let s = Sluice::start(toml);
    // Connects and sends nothing: dropped after client_header_timeout.
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
        .await
        .expect("dropped")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let t = start.elapsed();
    assert!(
        t >= Duration::from_millis(900) && t < Duration::from_millis(1800),
        "{t:?}"
    );

    // Idle after a response: dropped after keepalive_timeout, which is
    // shorter than client_header_timeout here.
    let mut c = open(s.addr()).await;
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(c.response().await.status, 200);
    let start = Instant::now();
    let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
        .await
        .expect("dropped")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let t = start.elapsed();
    assert!(
        t >= Duration::from_millis(500) && t < Duration::from_millis(950),
        "{t:?}"
    );

    // A keep-alive connection is reusable within keepalive_timeout.
    let mut c = open(s.addr()).await;
    for _ in 0..3 {
        c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(c.response().await.status, 200);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(s.log().contains("client timed out"), "{}", s.log());
}

#[tokio::test]
async fn bodies_over_client_max_body_size_get_413() {
    // An upstream that reads requests and never answers.
    let up = Upstream::answering(Answer::Never, 200);
    let up = up.addr;
    let toml = format!(
        r#"
client_max_body_size = "1k"
[[servers]]
[[servers.locations]]
path = "/"
return = {{ status = 200, body = "ok" }}
[[servers.locations]]
path = "/up"
proxy_pass = "http://{up}"
[[servers.locations]]
path = "/big"
client_max_body_size = 0
return = {{ status = 200, body = "any size" }}
"#
    );
    let s = Sluice::start(&toml);
    let a = s.addr();
    let post = |path: &str, len: usize| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {len}\r\n\r\n{}",
            "x".repeat(len)
        )
    };
    let me = client(1);
    assert_eq!(
        exchange(a, me, post("/", 1024).as_bytes()).await.status,
        200
    );
    let r = exchange(a, me, post("/", 1025).as_bytes()).await;
    assert_eq!(r.status, 413);
    assert!(
        r.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close")),
        "{r:?}"
    );
    assert_eq!(
        exchange(a, me, post("/big", 5000).as_bytes()).await.status,
        200
    );

    // Chunked, no length announced: cut off once past the limit.
    let mut c = TcpStream::connect(a).await.unwrap();
    c.write_all(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    for _ in 0..3 {
        let chunk = format!("200\r\n{}\r\n", "y".repeat(512));
        if c.write_all(chunk.as_bytes()).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut buf)).await;
    let r = Reply::parse(&buf).expect("a response");
    assert_eq!(r.status, 413);
    assert!(
        s.log()
            .contains("client intended to send too large chunked body")
    );
}

#[tokio::test]
async fn watch_reloads_when_the_file_changes() {
    let conf = |body: &str| format!("watch = true\n{}", server(body));
    let s = Sluice::start(&conf("before"));
    let a = s.addr();
    assert_eq!(get(a, "/").await.body_text(), "before");
    // Written to a temporary file and renamed over, as editors do.
    s.rewrite(&conf("after"));
    eventually(
        "the watched file's change to apply",
        Duration::from_secs(5),
        async || (get(a, "/").await.body_text() == "after").then_some(()),
    )
    .await;
    assert!(s.log().contains("changed, reconfiguring"));
    // Turned off by a reload: later changes are ignored.
    s.rewrite(&server("unwatched"));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(get(a, "/").await.body_text(), "unwatched");
    s.rewrite(&server("ignored"));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(get(a, "/").await.body_text(), "unwatched");
}

#[tokio::test]
async fn json_access_log_reopens_on_sigusr1_and_error_log_level_filters() {
    let toml = r#"
error_log_level = "warn"
log_format_escape = "json"
access_log = "access.log"
[[servers]]
[[servers.locations]]
path = "/"
return = { status = 200 }
"#;
    let s = Sluice::start(toml);
    let a = s.addr();
    let req = b"GET /x HTTP/1.1\r\nHost: t\r\nUser-Agent: a\"b\r\nConnection: close\r\n\r\n";
    assert_eq!(exchange(a, client(1), req).await.status, 200);
    let log_path = s.dir().join("access.log");
    let first = s.wait_lines("access.log", 1).await;
    assert!(first.starts_with("{\"time\":\""), "{first}");
    assert!(
        first.contains("\"request\":\"GET /x HTTP/1.1\",\"status\":200,"),
        "{first}"
    );
    assert!(first.contains("\"http_user_agent\":\"a\\\"b\""), "{first}");
    assert!(
        first.contains("\"http_referer\":\"\""),
        "empty stays empty: {first}"
    );
    // No limit applied: nginx's $limit_req_status is not found, which escape=json writes empty.
    assert!(first.contains("\"limit_req_status\":\"\""), "{first}");

    // Rotation: rename, SIGUSR1, the next line goes to a new file.
    let rotated = s.dir().join("access.log.1");
    std::fs::rename(&log_path, &rotated).unwrap();
    s.signal(libc::SIGUSR1);
    // Lines written before the signal is handled still go to the old file.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(exchange(a, client(1), req).await.status, 200);
    let second = s.wait_lines("access.log", 1).await;
    assert!(second.contains("\"status\":200"), "{second}");
    assert_eq!(
        s.file("access.log.1").lines().count(),
        1,
        "the old file got no more"
    );

    // error_log_level = "warn": notices (listening, signals) are not written.
    let log = s.log();
    assert!(!log.contains("[notice]"), "{log}");
}

/// A kept-alive connection to `addr`, read response by response, each within 5 s.
async fn open(addr: SocketAddr) -> Reader<TcpStream> {
    let c = TcpStream::connect(addr).await.unwrap();
    Reader::new(c).limit(Duration::from_secs(5))
}
