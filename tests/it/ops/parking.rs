//! Connections over time: silent and idle ones parked (their task ended, their socket waiting)
//! and resumed with their deadlines, numbers and worker_connections slots; a burst of
//! connections waiting in the listen backlog and shared out among the workers.

use super::*;

/// Reads the next response off a kept-alive connection: `200` with `ok\n`.
async fn read_ok(c: &mut Reader<TcpStream>) {
    let r = c.response().await;
    assert_eq!(
        (r.status, r.body_text().as_str()),
        (200, "ok\n"),
        "{}",
        r.head
    );
}

/// A connection that sends nothing for a second is parked too (no task while
/// it waits), and still behaves as before: its client_header_timeout runs from
/// its accept, with nginx's info line when it passes; a request sent later is
/// answered; on an `http2` address an HTTP/2 preface sent later is HTTP/2.
#[tokio::test]
async fn a_silent_connection_is_parked_and_keeps_its_header_deadline() {
    let toml = r#"
client_header_timeout = "3s"
error_log_level = "info"
[[servers]]
http2 = true
[[servers.locations]]
path = "/"
return = { status = 200, body = "ok\n" }
"#;
    let s = Sluice::start(toml);
    let mut silent = TcpStream::connect(s.addr()).await.unwrap();
    let accepted = Instant::now();
    let mut late = open(s.addr()).await;
    let late_h2 = TcpStream::connect(s.addr()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    late.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    read_ok(&mut late).await;
    let (mut send, conn) = h2::client::handshake(late_h2)
        .await
        .expect("HTTP/2 after a parking");
    tokio::spawn(conn);
    let req = http::Request::get(format!("http://{}/", s.addr()))
        .body(())
        .unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(5), resp)
        .await
        .expect("an HTTP/2 answer")
        .unwrap();
    assert_eq!(resp.status(), 200);
    // The silent one is closed 3 s after its accept, not 3 s after its parking.
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(6), silent.read(&mut buf))
        .await
        .expect("closed by client_header_timeout")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let waited = accepted.elapsed();
    assert!(
        (Duration::from_millis(2800)..Duration::from_millis(3900)).contains(&waited),
        "closed {waited:?} after its accept; client_header_timeout is 3 s"
    );
    let log = s.log();
    assert_eq!(
        log.matches(
            "client timed out (110: Connection timed out) while reading client request headers"
        )
        .count(),
        1,
        "{log}"
    );
}

/// One server whose every path is answered `ok` by `return`.
const RETURN_OK: &str = r#"
[[servers]]
[[servers.locations]]
path = "/"
return = { status = 200, body = "ok\n" }
"#;

/// Sends `GET /` on `c` (kept alive).
async fn send_get(c: &mut Reader<TcpStream>) {
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
}

/// Silent connections on a plain address (no HTTP/2 preface to look for)
/// whose requests come after they were parked are answered at once, and go
/// on as keep-alive connections: a connection resumed past its own parking
/// time is not parked again before it has read what woke it (that loop
/// once kept a worker busy and left every request of its clients unread).
#[tokio::test]
async fn silent_connections_answer_requests_sent_after_their_parking() {
    let s = Sluice::start(RETURN_OK);
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(open(s.addr()).await);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sent = Instant::now();
    for c in &mut silent {
        send_get(c).await;
    }
    for c in &mut silent {
        read_ok(c).await;
    }
    let waited = sent.elapsed();
    assert!(
        waited < Duration::from_millis(500),
        "answered {waited:?} after they were sent"
    );
    // Each goes on: its next request is answered too, and a fresh client
    // is not kept waiting behind them.
    for c in &mut silent {
        send_get(c).await;
        read_ok(c).await;
    }
    assert_eq!(get(s.addr(), "/").await.status, 200);
}

/// A burst of connections waits in the kernel while sluice cannot accept
/// them (its listen backlog is nginx's 511, not std's 128): none of 400
/// clients connecting to a stopped sluice loses its SYN (a lost one waits a
/// second for its retry), and each is answered once sluice runs again.
#[tokio::test]
async fn a_burst_of_connections_waits_in_the_listen_backlog() {
    let s = Sluice::start(RETURN_OK);
    s.signal(libc::SIGSTOP);
    let mut conns = Vec::new();
    for i in 0..400 {
        let made =
            tokio::time::timeout(Duration::from_millis(500), connect(s.addr(), client(4))).await;
        let Ok(c) = made else {
            s.signal(libc::SIGCONT);
            panic!("connection {i} not made while sluice could not accept: its SYN was dropped");
        };
        conns.push(Reader::new(c).limit(Duration::from_secs(5)));
    }
    s.signal(libc::SIGCONT);
    for c in &mut conns {
        send_get(c).await;
    }
    for c in &mut conns {
        read_ok(c).await;
    }
}

/// A burst of clients is shared out among the workers: 64 connections that
/// waited in the backlog of a stopped sluice (as wrk opens its connections
/// all at once) are accepted by both workers, not all by the first to wake.
/// Each connection's second request is rejected (the key is `$remote_port`),
/// and its log line names the worker thread that served it.
#[tokio::test]
async fn a_burst_of_clients_is_shared_out_among_the_workers() {
    let toml = r#"
[zones.once]
key = "$remote_port"
size = "1m"
rate = "1r/m"
[[servers]]
[[servers.locations]]
path = "/"
limit_req = { zone = "once" }
return = { status = 200, body = "ok\n" }
"#;
    let s = Sluice::builder(toml).env("SLUICE_WORKERS", "2").start();
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.signal(libc::SIGSTOP);
    let mut conns = Vec::new();
    for _ in 0..64 {
        let c = connect(s.addr(), client(5)).await;
        conns.push(Reader::new(c).limit(Duration::from_secs(5)));
    }
    let two = b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n";
    for c in &mut conns {
        c.write_all(two).await.unwrap();
    }
    s.signal(libc::SIGCONT);
    for c in &mut conns {
        assert_eq!(c.response().await.status, 200);
        assert_eq!(c.response().await.status, 503);
    }
    let log = s.log();
    let mut by_thread = std::collections::BTreeMap::<&str, usize>::new();
    for line in log.lines().filter(|l| l.contains("limiting requests")) {
        let thread = line.split(": ").next().and_then(|h| h.rsplit('#').next());
        *by_thread.entry(thread.unwrap_or("?")).or_default() += 1;
    }
    let counts: Vec<usize> = by_thread.values().copied().collect();
    assert_eq!(counts.iter().sum::<usize>(), 64, "{log}");
    assert!(
        counts.len() == 2 && counts.iter().all(|&n| n >= 16),
        "connections per worker thread: {by_thread:?}"
    );
}

/// A parked connection (idle for a second: its task ended, its socket waits
/// in its accept loop's idle set) keeps its number and its
/// worker_connections slot (a client over the cap gets the slot of the one
/// nearest its deadline, closed for it, as nginx reuses idle connections),
/// and gives the slot back when its client closes while it is parked.
#[tokio::test]
async fn a_parked_connection_keeps_its_number_and_its_slot() {
    let toml = r#"
worker_connections = 3
log_format = "$connection $status"
[admin]
[[servers]]
access_log = "access.log"
[[servers.locations]]
path = "/"
return = { status = 200, body = "ok\n" }
"#;
    let s = Sluice::builder(toml).env("SLUICE_WORKERS", "1").start();
    // wait_for_ports connected once to each port; let those probes close.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let req = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut conns = Vec::new();
    for _ in 0..3 {
        let mut c = open(s.addr()).await;
        c.write_all(req).await.unwrap();
        read_ok(&mut c).await;
        conns.push(c);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // All three parked, still counted: a fourth takes the first one's slot.
    let mut fourth = open(s.addr()).await;
    fourth.write_all(req).await.unwrap();
    read_ok(&mut fourth).await;
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(2), conns[0].read(&mut buf))
        .await
        .expect("the first parked connection closed for the fourth")
        .unwrap_or(0);
    assert_eq!(n, 0, "closed to make room");
    let log = s.log();
    assert!(
        log.contains("3 worker_connections are not enough, reusing connections"),
        "{log}"
    );
    conns.remove(0);
    for c in &mut conns {
        c.write_all(req).await.unwrap();
        read_ok(c).await;
    }
    // Each connection's requests carry its one number: 1 + 2 + 2 + 1.
    let log = s.wait_lines("access.log", 6).await;
    let mut numbers: Vec<&str> = log.lines().filter_map(|l| l.split(' ').next()).collect();
    numbers.sort();
    let all = numbers.len();
    numbers.dedup();
    assert_eq!(
        (all, numbers.len()),
        (6, 4),
        "four connections, two of them with two requests:\n{log}"
    );
    // One closes while parked: its slot is free again, and a new client
    // takes it with no other closed for it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    drop(conns.pop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut again = open(s.addr()).await;
    again.write_all(req).await.unwrap();
    read_ok(&mut again).await;
    for c in [&mut conns[0], &mut fourth] {
        c.write_all(req).await.unwrap();
        read_ok(c).await;
    }
    let metrics = get(s.admin_addr(), "/metrics").await;
    assert!(
        metrics.body_text().contains("sluice_connections_active 3"),
        "two parked and one new: {}",
        metrics.body_text()
    );
}

/// An idle keep-alive connection leaves hyper after a second (its buffers
/// are freed while it waits): it still serves its next request, still ends
/// after keepalive_timeout, and a stop closes it at once.
#[tokio::test]
async fn an_idle_keepalive_connection_is_parked_and_still_behaves() {
    let toml = r#"
keepalive_timeout = "3s"
[[servers]]
[[servers.locations]]
path = "/"
return = { status = 200, body = "ok\n" }
"#;
    let mut s = Sluice::start(toml);
    let req = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut c = open(s.addr()).await;
    for _ in 0..3 {
        c.write_all(req).await.unwrap();
        read_ok(&mut c).await;
        // Parked after 1 s of idling; the next request wakes it.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    // Pipelined, after being parked: both answered, in order.
    c.write_all(&[&req[..], &req[..]].concat()).await.unwrap();
    read_ok(&mut c).await;
    read_ok(&mut c).await;
    // keepalive_timeout runs from the end of the last response.
    let idle = Instant::now();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(6), c.read(&mut buf))
        .await
        .expect("closed by keepalive_timeout")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let waited = idle.elapsed();
    assert!(
        (Duration::from_millis(2700)..Duration::from_millis(4500)).contains(&waited),
        "closed after {waited:?}, keepalive_timeout is 3 s"
    );

    // A parked connection does not hold up a stop.
    let mut c = open(s.addr()).await;
    c.write_all(req).await.unwrap();
    read_ok(&mut c).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stop = Instant::now();
    s.signal(libc::SIGTERM);
    let status = s.wait_exit(Duration::from_secs(5)).await.expect("exited");
    assert_eq!(status.code(), Some(0), "log:\n{}", s.log());
    assert!(
        stop.elapsed() < Duration::from_secs(2),
        "a parked connection held the stop for {:?}",
        stop.elapsed()
    );
    let n = tokio::time::timeout(Duration::from_secs(2), c.read(&mut buf))
        .await
        .expect("closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
}
