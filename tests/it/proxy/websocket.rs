//! WebSocket (and any HTTP/1.1 upgrade) through sluice: a real client and echo server (Python
//! `websockets`), the handshake compared with real nginx's, the limits on the handshake, the
//! tunnel's idle limit, bytes right after the handshake, half-close, the access-log line and the
//! metrics of a tunnel, a graceful stop, and what is not an upgrade.

mod peers;

use self::peers::{Switcher, WsEcho, field, handshake, handshake_fields, one_response, ws_client};
use super::*;
use crate::support::{Message, Nginx, connect, get};

/// sluice's location (and nginx's) in front of a WebSocket echo upstream.
fn ws_url(addr: SocketAddr, path: &str) -> String {
    format!("ws://{addr}{path}")
}

/// Text, binary and a 1 MB message echoed, the close handshake answered; then eight tunnels at
/// once.
#[tokio::test]
async fn websocket_messages_pass_both_ways() {
    let echo = WsEcho::start();
    let toml = format!(
        "[[servers]]\nproxy_pass = \"http://{}\"\n[[servers.locations]]\npath = \"/\"\n",
        echo.addr()
    );
    let s = Sluice::in_process(&toml);
    let out = ws_client(&["echo", &ws_url(s.addr(), "/chat")]).await;
    assert_eq!(
        out,
        r#"{"text": true, "binary": true, "big": true, "close_code": 1000}"#
    );
    let out = ws_client(&["concurrent", &ws_url(s.addr(), "/many"), "8"]).await;
    assert_eq!(out, r#"{"ok": 8, "of": 8}"#);
    assert_eq!(echo.handshakes().len(), 9);
}

/// The handshake as the upstream receives it: the same fields from sluice as from nginx with the
/// usual `proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection "upgrade"`
/// (sluice adds its X-Forwarded-For, and the host is each one's).
#[tokio::test]
async fn the_upstream_receives_the_handshake_nginx_sends() {
    let echo = WsEcho::start();
    let toml = format!("[[servers]]\nproxy_pass = \"http://{}\"\n", echo.addr());
    let s = Sluice::in_process(&toml);
    let nginx = Nginx::start(&format!(
        "server {{ location / {{ proxy_pass http://{}; proxy_http_version 1.1; \
         proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection \"upgrade\"; }} }}",
        echo.addr()
    ));
    ws_client(&["handshake", &ws_url(s.addr(), "/s")]).await;
    ws_client(&["handshake", &ws_url(nginx.addr(), "/n")]).await;
    let seen = echo.handshakes();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let compared = |line: &str| {
        let mut f: Vec<(String, String)> = handshake_fields(line)
            .into_iter()
            .filter(|(n, _)| n != "host" && n != "x-forwarded-for")
            .map(|(n, v)| match n.as_str() {
                "sec-websocket-key" => (n, "(a new one each time)".to_owned()),
                _ => (n, v),
            })
            .collect();
        f.sort();
        f
    };
    let (ours, theirs) = (compared(&seen[0]), compared(&seen[1]));
    assert_eq!(ours, theirs, "sluice's handshake first: {seen:?}");
    for want in [("upgrade", "websocket"), ("connection", "upgrade")] {
        let want = (want.0.to_owned(), want.1.to_owned());
        assert!(ours.contains(&want), "{want:?} in {ours:?}");
    }
    let xff = handshake_fields(&seen[0])
        .into_iter()
        .find(|(n, _)| n == "x-forwarded-for");
    assert_eq!(xff.map(|(_, v)| v).as_deref(), Some("127.0.0.1"));
}

/// The limit applies to the handshake: the second of two quick handshakes gets 429 with
/// Retry-After and never reaches the upstream, from sluice as from nginx.
#[tokio::test]
async fn a_limited_location_rejects_the_second_handshake_as_nginx() {
    let (ours, theirs) = (WsEcho::start(), WsEcho::start());
    let toml = format!(
        r#"
limit_req_status = 429
[zones.ws]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/s"
[[servers]]
[[servers.locations]]
path = "/"
proxy_pass = "http://{}"
limit_req = {{ zone = "ws", nodelay = true }}
"#,
        ours.addr()
    );
    let s = Sluice::in_process(&toml);
    let nginx = Nginx::start(&format!(
        "limit_req_zone $binary_remote_addr zone=ws:1m rate=1r/s; limit_req_status 429;
         server {{ location / {{ limit_req zone=ws nodelay; proxy_pass http://{};
           proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade;
           proxy_set_header Connection \"upgrade\"; }} }}",
        theirs.addr()
    ));
    for (addr, echo, who) in [
        (s.addr(), &ours, "sluice"),
        (nginx.addr(), &theirs, "nginx"),
    ] {
        let out = ws_client(&["handshakes", &ws_url(addr, "/ws"), "2"]).await;
        assert!(out.contains("\"statuses\": [101, 429]"), "{who}: {out}");
        assert_eq!(
            echo.handshakes().len(),
            1,
            "{who}: the upstream saw one handshake"
        );
        if who == "sluice" {
            assert!(out.contains("\"retry_after\": \"1\""), "{out}");
        }
    }
}

/// `proxy_read_timeout` is the tunnel's idle limit, both ways together (nginx's rule): a quiet
/// tunnel closes when it runs out, one the client keeps busy stays; nginx's info line.
#[tokio::test]
async fn the_idle_limit_closes_a_quiet_tunnel_and_spares_a_busy_one() {
    let echo = WsEcho::start();
    let toml = format!(
        "error_log_level = \"info\"\n[[servers]]\nproxy_pass = \"http://{}\"\n\
         proxy_read_timeout = \"1s\"\n",
        echo.addr()
    );
    let s = Sluice::start(&toml);
    let quiet_url = ws_url(s.addr(), "/quiet");
    let busy_url = ws_url(s.addr(), "/busy");
    let quiet_args = ["idle", &quiet_url, "5"];
    let busy_args = ["active", &busy_url, "2.5", "0.3"];
    let (quiet, busy) = tokio::join!(ws_client(&quiet_args), ws_client(&busy_args));
    let after: f64 = field(&quiet, "closed_after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("the quiet tunnel stayed open: {quiet}"));
    assert!((0.9..1.8).contains(&after), "closed after {after} s");
    assert_eq!(field(&busy, "ok"), Some("true"), "{busy}");
    let log = s
        .wait_log(|l| l.contains("while proxying upgraded connection"))
        .await;
    let line = log
        .lines()
        .find(|l| l.contains("while proxying upgraded connection"))
        .unwrap_or_default();
    assert!(
        line.contains(
            "[info] ",
        ) && line.contains(
            "upstream timed out (110: Connection timed out) while proxying upgraded connection, \
             client: 127.0.0.1, server: , request: \"GET /quiet HTTP/1.1\", upstream: \"http://"
        ),
        "{log}"
    );
    assert!(!log.contains("/busy HTTP/1.1\", upstream"), "{log}");
}

/// An upgrade request the upstream answers with anything but 101 gets that answer, and its
/// connection goes on with HTTP: the next request is served on it.
#[tokio::test]
async fn an_answer_other_than_101_is_an_ordinary_response() {
    let up = Upstream::start();
    let s = Sluice::in_process(&format!(
        "[[servers]]\nproxy_pass = \"http://{}\"\n",
        up.addr
    ));
    let mut c = Reader::new(connect(s.addr(), client(2)).await);
    let twice = format!("{}GET /next HTTP/1.1\r\nHost: x\r\n\r\n", handshake("/ws"));
    c.write_all(twice.as_bytes()).await.unwrap();
    for path in ["/ws", "/next"] {
        let head = c.head().await;
        assert!(head.start_line().starts_with("HTTP/1.1 200 OK"), "{head}");
        let len: usize = head.header("content-length").unwrap().parse().unwrap();
        let body = String::from_utf8(c.read_n(len).await).unwrap();
        assert!(body.starts_with(&format!("GET {path} HTTP/1.1")), "{body}");
        // What the upstream was sent: the upgrade, then a plain request.
        let lower = body.to_ascii_lowercase();
        let upgrade = lower.contains("upgrade: websocket") && lower.contains("connection: upgrade");
        assert_eq!(upgrade, path == "/ws", "{body}");
    }
    assert_eq!(up.hits(), 2);
}

/// The bytes right after the handshake go first, both ways: the client's after its request
/// (sent with it), the upstream's after its 101 head (sent with it). And a request body with the
/// upgrade is forwarded before the switch.
#[tokio::test]
async fn bytes_right_after_the_handshake_go_first_both_ways() {
    let up = Switcher::start().await;
    let s = Sluice::in_process(&format!(
        "[[servers]]\nproxy_pass = \"http://{}\"\n",
        up.addr
    ));
    let mut c = Reader::new(connect(s.addr(), client(2)).await);
    c.write_all(format!("{}PIPED", handshake("/early")).as_bytes())
        .await
        .unwrap();
    let head = c.head().await;
    assert!(
        head.start_line()
            .starts_with("HTTP/1.1 101 Switching Protocols"),
        "{head}"
    );
    assert_eq!(head.header("upgrade"), Some("websocket"));
    assert_eq!(head.header("connection"), Some("upgrade"));
    assert_eq!(
        head.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    // EARLY, then PIPED echoed.
    assert_eq!(c.read_n(10).await, b"EARLYPIPED");
    c.write_all(b"more").await.unwrap();
    assert_eq!(c.read_n(4).await, b"more");
    assert_eq!(up.seen()[0].tunnel, b"PIPEDmore");

    let mut c = Reader::new(connect(s.addr(), client(3)).await);
    let post = handshake("/body").replacen("GET", "POST", 1).replacen(
        "\r\n\r\n",
        "\r\nContent-Length: 3\r\n\r\nabc",
        1,
    );
    c.write_all(format!("{post}after").as_bytes())
        .await
        .unwrap();
    let head = c.head().await;
    assert!(head.start_line().starts_with("HTTP/1.1 101"), "{head}");
    assert_eq!(c.read_n(5).await, b"after");
    let seen = &up.seen()[1];
    assert_eq!(
        (&seen.request.body[..], &seen.tunnel[..]),
        (&b"abc"[..], &b"after"[..])
    );
}

/// An end of file from one side is passed on, and the other side may still answer (nginx 1.22
/// closes both at the first end of file).
#[tokio::test]
async fn half_close_is_passed_on() {
    let up = Switcher::start().await;
    let s = Sluice::in_process(&format!(
        "[[servers]]\nproxy_pass = \"http://{}\"\n",
        up.addr
    ));
    let mut c = Reader::new(connect(s.addr(), client(2)).await);
    c.write_all(handshake("/late").as_bytes()).await.unwrap();
    let head = c.head().await;
    assert!(head.start_line().starts_with("HTTP/1.1 101"), "{head}");
    assert!(c.buffered().is_empty());
    c.write_all(b"bye").await.unwrap();
    assert_eq!(c.read_n(3).await, b"bye");
    c.shutdown().await.unwrap();
    let start = Instant::now();
    assert_eq!(c.read_to_close().await, b"late");
    assert!(
        start.elapsed() >= Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );
    assert!(up.seen()[0].ended);
}

/// A tunnel's access-log line is written when it closes: status 101, its whole life as
/// `$request_time` and `$upstream_response_time`, the bytes the client received through it as
/// `$body_bytes_sent` (as nginx); and the metrics count it while it is open and its bytes each
/// way.
#[tokio::test]
async fn a_tunnel_is_logged_when_it_closes_and_counted() {
    let up = Switcher::start().await;
    let toml = format!(
        "access_log = \"access.log\"\n\
         log_format = '$status $request_time $upstream_response_time $body_bytes_sent \
         \"$request\" $limit_req_status'\n\
         [admin]\n[[servers]]\nproxy_pass = \"http://{}\"\n",
        up.addr
    );
    let s = Sluice::start(&toml);
    let mut c = Reader::new(connect(s.addr(), client(2)).await);
    c.write_all(handshake("/early").as_bytes()).await.unwrap();
    let _ = c.head().await;
    c.write_all(b"0123456789").await.unwrap();
    assert_eq!(c.read_n(15).await, b"EARLY0123456789");
    // (Counted just after they are written: the client may read them first.)
    let counted = [
        "sluice_tunnels_opened_total 1",
        "sluice_tunnels_active 1",
        "sluice_tunnel_bytes_total{direction=\"to_client\"} 15",
        "sluice_tunnel_bytes_total{direction=\"to_upstream\"} 10",
    ];
    eventually(
        "the tunnel and its bytes counted",
        Duration::from_secs(5),
        async || {
            let m = get(s.admin_addr(), "/metrics").await.body_text();
            counted.iter().all(|l| m.contains(l)).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(s.file("access.log"), "", "no line while the tunnel is open");
    c.shutdown().await.unwrap();
    c.read_to_close().await;
    let log = s.wait_lines("access.log", 1).await;
    let parts: Vec<&str> = log.trim().split(' ').collect();
    assert_eq!(parts[0], "101", "{log}");
    for time in &parts[1..3] {
        let time: f64 = time.parse().unwrap();
        assert!((0.4..3.0).contains(&time), "a time of {time} s: {log}");
    }
    assert_eq!(
        &parts[3..],
        ["15", "\"GET", "/early", "HTTP/1.1\"", "-"],
        "{log}"
    );
    let metrics = eventually(
        "the tunnel counted closed",
        Duration::from_secs(5),
        async || {
            let m = get(s.admin_addr(), "/metrics").await.body_text();
            m.contains("sluice_tunnels_active 0").then_some(m)
        },
    )
    .await;
    assert!(
        metrics.contains("sluice_http_responses_total{code=\"101\"} 1"),
        "{metrics}"
    );
}

/// The same tunnel through nginx and sluice: the same access-log line (status 101, the bytes
/// the client received through the tunnel).
#[tokio::test]
async fn a_tunnel_is_logged_as_nginx_logs_it() {
    let up = Switcher::start().await;
    let s = Sluice::start(&format!(
        "access_log = \"access.log\"\nlog_format = '$status $body_bytes_sent \"$request\"'\n\
         [[servers]]\nproxy_pass = \"http://{}\"\n",
        up.addr
    ));
    let nginx = Nginx::start(&format!(
        "log_format t '$status $body_bytes_sent \"$request\"';
         server {{ access_log logs/t.log t; location / {{ proxy_pass http://{};
           proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade;
           proxy_set_header Connection \"upgrade\"; }} }}",
        up.addr
    ));
    for addr in [s.addr(), nginx.addr()] {
        let mut c = Reader::new(connect(addr, client(2)).await);
        c.write_all(handshake("/early").as_bytes()).await.unwrap();
        let _ = c.head().await;
        c.write_all(b"0123456789").await.unwrap();
        assert_eq!(c.read_n(15).await, b"EARLY0123456789");
        c.shutdown().await.unwrap();
        c.read_to_close().await;
    }
    let theirs = eventually("nginx's line", Duration::from_secs(5), async || {
        let log = std::fs::read_to_string(nginx.prefix().join("logs/t.log")).unwrap_or_default();
        (!log.is_empty()).then_some(log)
    })
    .await;
    assert_eq!(theirs, "101 15 \"GET /early HTTP/1.1\"\n");
    assert_eq!(s.wait_lines("access.log", 1).await, theirs);
}

/// limit_conn counts a tunnel as long as it is open (nginx frees the count with the request).
#[tokio::test]
async fn limit_conn_counts_a_tunnel_while_it_is_open() {
    let up = Switcher::start().await;
    let toml = format!(
        r#"
[conn_zones.addr]
key = "$binary_remote_addr"
size = "1m"
[[servers]]
proxy_pass = "http://{}"
limit_conn = {{ zone = "addr", conn = 1 }}
"#,
        up.addr
    );
    let s = Sluice::in_process(&toml);
    let mut first = Reader::new(connect(s.addr(), client(2)).await);
    first.write_all(handshake("/one").as_bytes()).await.unwrap();
    let head = first.head().await;
    assert!(head.start_line().starts_with("HTTP/1.1 101"), "{head}");
    let (second, _) = one_response(s.addr(), client(2), &handshake("/two")).await;
    assert!(second.start_line().starts_with("HTTP/1.1 503"), "{second}");
    first.shutdown().await.unwrap();
    first.read_to_close().await;
    eventually(
        "the tunnel's count released",
        Duration::from_secs(5),
        async || {
            let mut c = Reader::new(connect(s.addr(), client(2)).await);
            c.write_all(handshake("/three").as_bytes()).await.unwrap();
            let head = c.head().await;
            head.start_line().starts_with("HTTP/1.1 101").then_some(())
        },
    )
    .await;
}

/// RFC 9110 §7.8: an `Upgrade` in HTTP/1.0 is ignored (the request goes as a plain one), and so is
/// one without `Connection: upgrade`, and one to `h2c`; a 101 to a request that did not ask for
/// it is refused, 502.
/// (nginx 1.22 with the usual configuration forwards both, and leaves an unasked 101 hanging.)
#[tokio::test]
async fn what_is_not_an_upgrade_is_not_upgraded() {
    let plain = Upstream::start();
    let switcher = Switcher::start().await;
    let toml = format!(
        "[[servers]]\n[[servers.locations]]\npath = \"/plain\"\nproxy_pass = \"http://{}\"\n\
         [[servers.locations]]\npath = \"/switch\"\nproxy_pass = \"http://{}\"\n",
        plain.addr, switcher.addr
    );
    let s = Sluice::in_process(&toml);
    let http10 = handshake("/plain/10").replace("HTTP/1.1", "HTTP/1.0");
    let (head, body) = one_response(s.addr(), client(2), &http10).await;
    assert!(head.start_line().starts_with("HTTP/1.0 200 OK"), "{head}");
    let echo = String::from_utf8_lossy(&body).to_ascii_lowercase();
    assert!(!echo.contains("upgrade"), "{echo}");

    for raw in [
        handshake("/switch/10").replace("HTTP/1.1", "HTTP/1.0"),
        handshake("/switch/no-option").replace("Connection: Upgrade", "Connection: keep-alive"),
        // HTTP/2 after the switch would carry requests past the limits.
        "GET /switch/h2c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n\
         Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
            .to_owned(),
        "GET /switch/plain HTTP/1.1\r\nHost: x\r\n\r\n".to_owned(),
    ] {
        let (head, _) = one_response(s.addr(), client(3), &raw).await;
        assert_eq!(
            head.start_line().split(' ').nth(1),
            Some("502"),
            "{raw:?}: {head}"
        );
    }
    let heads: Vec<Message> = switcher.seen().into_iter().map(|s| s.request).collect();
    assert_eq!(heads.len(), 4);
    assert!(
        heads.iter().all(|h| h.header("upgrade").is_none()),
        "{heads:?}"
    );
}

/// A graceful stop lets tunnels run until `shutdown_timeout`, then closes them (and logs them),
/// and the process exits.
#[tokio::test]
async fn a_graceful_stop_closes_tunnels_at_shutdown_timeout() {
    let up = Switcher::start().await;
    let toml = format!(
        "shutdown_timeout = \"1s\"\naccess_log = \"access.log\"\n\
         log_format = '$status $body_bytes_sent'\n[[servers]]\nproxy_pass = \"http://{}\"\n",
        up.addr
    );
    let mut s = Sluice::start(&toml);
    let mut c = Reader::new(connect(s.addr(), client(2)).await);
    c.write_all(handshake("/stay").as_bytes()).await.unwrap();
    let head = c.head().await;
    assert!(head.start_line().starts_with("HTTP/1.1 101"), "{head}");
    let start = Instant::now();
    s.signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.write_all(b"still").await.unwrap();
    assert_eq!(c.read_n(5).await, b"still");
    assert_eq!(c.read_to_close().await, b"");
    let closed = start.elapsed();
    assert!(
        (Duration::from_millis(900)..Duration::from_millis(3000)).contains(&closed),
        "closed {closed:?} after SIGTERM"
    );
    assert!(
        s.wait_exit(Duration::from_secs(5)).await.is_some(),
        "sluice did not exit"
    );
    assert_eq!(s.file("access.log"), "101 5\n");
}
