//! nginx's `error_log` and `syslog:` targets: the cases of nginx's own `error_log.t` (levels per
//! file and per location, several entries naming one file or stderr, `debug`) and `syslog.t`
//! (facility, severity, tag, nohostname, the access log's and the error log's messages), the
//! second side by side with real nginx: the datagrams a syslog server receives, over UDP and a
//! unix datagram socket, are nginx's byte for byte once the clock, the process and connection
//! numbers and the port in `Host` are set aside. Then a syslog server that is down or slow (lines
//! dropped and counted, requests not slowed) and the reopening of an error-log file.

use crate::support::{Nginx, Sluice, Upstream, client, get, request};
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// `limiting requests` at `level`, as nginx writes it about `GET path` from 127.0.0.5.
fn limiting(line: &str, level: &str, path: &str) -> bool {
    line.contains(&format!(" [{level}] "))
        && line.contains("limiting requests, excess: ")
        && line.contains(" by zone \"one\", client: 127.0.0.5, server: , ")
        && line.contains(&format!("request: \"GET {path} HTTP/1.1\""))
}

/// nginx's `error_log.t`, on sluice: every request after the first is refused by a 1r/m zone
/// at the top level, and logged at its location's `limit_req_log_level` into the files and
/// stderr of the location's own `error_log` list, each entry taking what its level takes.
#[tokio::test]
async fn error_log_t_levels_per_file_and_location() {
    let loc = |path: &str, level: Option<&str>, logs: &[&str]| {
        let level = level.map_or(String::new(), |l| {
            format!("limit_req_log_level = \"{l}\"\n")
        });
        let list: Vec<String> = logs.iter().map(|l| format!("\"{l}\"")).collect();
        format!(
            "[[servers.locations]]\npath = \"{path}\"\nreturn = {{ status = 200 }}\n{level}error_log = [{}]\n",
            list.join(", ")
        )
    };
    let locations = [
        loc(
            "/debug",
            None,
            &[
                "e_debug_debug.log debug",
                "e_debug_info.log info",
                "stderr debug",
            ],
        ),
        loc(
            "/info",
            Some("info"),
            &[
                "e_info_debug.log debug",
                "e_info_info.log info",
                "e_info_notice.log notice",
                "stderr info",
            ],
        ),
        loc(
            "/notice",
            Some("notice"),
            &[
                "e_notice_info.log info",
                "e_notice_notice.log notice",
                "e_notice_warn.log warn",
                "stderr notice",
            ],
        ),
        loc(
            "/warn",
            Some("warn"),
            &[
                "e_warn_notice.log notice",
                "e_warn_warn.log warn",
                "e_warn_error.log error",
                "stderr warn",
            ],
        ),
        loc(
            "/error",
            None,
            &[
                "e_error_warn.log warn",
                "e_error_error.log",
                "e_error_alert.log alert",
                "stderr",
            ],
        ),
        loc(
            "/file_low",
            None,
            &["e_multi_low.log warn", "e_multi_low.log"],
        ),
        loc("/file_dup", None, &["e_multi.log", "e_multi.log"]),
        loc(
            "/file_high",
            None,
            &["e_multi_high.log emerg", "e_multi_high.log"],
        ),
        loc("/stderr_low", None, &["stderr warn", "stderr"]),
        loc("/stderr_dup", None, &["stderr", "stderr"]),
        loc("/stderr_high", None, &["stderr emerg", "stderr"]),
        loc("/", None, &["stderr"]),
    ];
    let toml = format!(
        "error_log = \"stderr notice\"\nlimit_req = {{ zone = \"one\" }}\n\
         [zones.one]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\nrate = \"1r/m\"\n\
         [[servers]]\n{}",
        locations.concat()
    );
    let s = Sluice::start(&toml);
    let a = s.addr();
    let go = async |path: &str| {
        let mark = s.log_mark();
        let r = request(a, client(5), "GET", path, &[("Host", "localhost")]).await;
        assert_eq!(r.status, 503, "{path}");
        s.log().get(mark..).unwrap_or_default().to_owned()
    };
    // Charge the zone.
    assert_eq!(request(a, client(5), "GET", "/", &[]).await.status, 200);
    let file_lines = |name: &str, level: &str, path: &str, n: usize| {
        let text = s.file(name);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), n, "{name}:\n{text}");
        assert!(
            lines.iter().all(|l| limiting(l, level, path)),
            "{name}:\n{text}"
        );
    };
    let stderr_lines = |log: &str, level: &str, path: &str| {
        log.lines().filter(|l| limiting(l, level, path)).count()
    };

    let log = go("/debug").await;
    assert!(
        s.file("e_debug_debug.log").contains("[debug]"),
        "debug lines written"
    );
    let debug = s.file("e_debug_debug.log");
    assert!(debug.contains("using configuration \"/debug\""), "{debug}");
    assert!(
        debug.contains("http request line: \"GET /debug HTTP/1.1\""),
        "{debug}"
    );
    assert!(log.contains("[debug]"), "stderr debug:\n{log}");
    assert!(!s.file("e_debug_info.log").contains("[debug]"));
    file_lines("e_debug_info.log", "error", "/debug", 1);

    let log = go("/info").await;
    let debug = s.file("e_info_debug.log");
    assert_eq!(
        debug
            .lines()
            .filter(|l| limiting(l, "info", "/info"))
            .count(),
        1
    );
    file_lines("e_info_info.log", "info", "/info", 1);
    assert!(!s.file("e_info_notice.log").contains("[info]"));
    assert_eq!(stderr_lines(&log, "info", "/info"), 1, "{log}");

    let log = go("/notice").await;
    file_lines("e_notice_info.log", "notice", "/notice", 1);
    file_lines("e_notice_notice.log", "notice", "/notice", 1);
    assert!(!s.file("e_notice_warn.log").contains("[notice]"));
    assert_eq!(stderr_lines(&log, "notice", "/notice"), 1, "{log}");

    let log = go("/warn").await;
    file_lines("e_warn_notice.log", "warn", "/warn", 1);
    file_lines("e_warn_warn.log", "warn", "/warn", 1);
    assert!(!s.file("e_warn_error.log").contains("[warn]"));
    assert_eq!(stderr_lines(&log, "warn", "/warn"), 1, "{log}");

    let log = go("/error").await;
    file_lines("e_error_warn.log", "error", "/error", 1);
    file_lines("e_error_error.log", "error", "/error", 1);
    assert!(!s.file("e_error_alert.log").contains("[error]"));
    assert_eq!(stderr_lines(&log, "error", "/error"), 1, "{log}");

    // Several entries naming one file or stderr: a line per entry that takes it.
    for (path, file, n) in [
        ("/file_low", "e_multi_low.log", 2),
        ("/file_dup", "e_multi.log", 2),
        ("/file_high", "e_multi_high.log", 1),
    ] {
        go(path).await;
        file_lines(file, "error", path, n);
    }
    for (path, n) in [("/stderr_low", 2), ("/stderr_dup", 2), ("/stderr_high", 1)] {
        let log = go(path).await;
        assert_eq!(stderr_lines(&log, "error", path), n, "{path}:\n{log}");
    }
    // The top level's list is the process's: its notices.
    let log = s.log();
    assert!(
        log.contains("[notice]") && log.contains("listening on"),
        "{log}"
    );
}

/// The datagrams a syslog server receives, with what changes from run to run set aside: the
/// header's and the error line's clock, `PID#TID`, `*CONN`, the port in `Host`.
fn normalized(datagram: &[u8]) -> String {
    let text = String::from_utf8_lossy(datagram).into_owned();
    let header = regex::Regex::new(r"^(<\d+>)[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d ").unwrap();
    assert!(header.is_match(&text), "no RFC 3164 header: {text:?}");
    let text = header.replace(&text, "${1}TIME ");
    let line =
        regex::Regex::new(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[(\w+)\] \d+#\d+: \*\d+ ").unwrap();
    let text = line.replace(&text, "DATE [$1] P#T: *N ");
    let host = regex::Regex::new(r#"host: "127\.0\.0\.1:\d+""#).unwrap();
    host.replace(&text, "host: \"H\"").into_owned()
}

/// Everything `socket` received within `quiet` of the last datagram, normalized and sorted.
fn drain(recv: impl Fn(&mut [u8]) -> std::io::Result<usize>) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = recv(&mut buf) {
        out.push(normalized(&buf[..n]));
    }
    out.sort();
    out
}

/// nginx's `syslog.t` cases, nginx and sluice side by side: each path is asked twice (a 1r/m
/// zone keyed by `$uri` refuses the second), and both servers' syslog listeners must receive the
/// same messages: the error line of the refusal (PRI from the line's level; `severity=` ignored;
/// `facility=`), the access lines (`severity=`, `facility=`, `nohostname`), over UDP and over a
/// unix datagram socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syslog_t_datagrams_match_nginx() {
    let up = Upstream::start();
    let dir = tempfile::tempdir().unwrap();
    let listen = |name: &str| {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(400)))
            .unwrap();
        let path = dir.path().join(format!("{name}.sock"));
        let unix = UnixDatagram::bind(&path).unwrap();
        unix.set_read_timeout(Some(Duration::from_millis(400)))
            .unwrap();
        (udp, unix, path)
    };
    let (n_udp, n_unix, n_path) = listen("nginx");
    let (s_udp, s_unix, s_path) = listen("sluice");
    // (path, error_log, access_log), in nginx's syntax; `U` is the UDP listener, `X` the unix one.
    let cases = [
        ("/e", "syslog:server=U,tag=T", ""),
        ("/ef", "syslog:server=U,facility=user,tag=T", ""),
        ("/es", "syslog:server=U,severity=alert,tag=T", ""),
        ("/et", "syslog:server=U,tag=SEETHIS", ""),
        ("/a", "", "syslog:server=U,tag=T"),
        ("/af", "", "syslog:server=U,facility=user,tag=T"),
        ("/as", "", "syslog:severity=alert,server=U,tag=T"),
        (
            "/nohostname",
            "syslog:server=U,tag=T,nohostname",
            "syslog:server=U,nohostname,tag=T",
        ),
        (
            "/x",
            "syslog:server=unix:X,tag=T warn",
            "syslog:server=unix:X,facility=auth,severity=notice,tag=T",
        ),
    ];
    let at = |s: &str, udp: &std::net::UdpSocket, unix: &std::path::Path| {
        s.replace("server=U", &format!("server={}", udp.local_addr().unwrap()))
            .replace("unix:X", &format!("unix:{}", unix.display()))
    };
    let mut nginx_locs = String::new();
    let mut sluice_locs = String::new();
    for (path, err, acc) in cases {
        let level = if path == "/x" {
            "limit_req_log_level warn; "
        } else {
            ""
        };
        let mut n = format!(
            "    location {path} {{ limit_req zone=one; {level}proxy_pass http://{}; ",
            up.addr
        );
        let mut s =
            format!("[[servers.locations]]\npath = \"{path}\"\nlimit_req = {{ zone = \"one\" }}\n");
        if path == "/x" {
            s += "limit_req_log_level = \"warn\"\n";
        }
        if !err.is_empty() {
            n += &format!("error_log {}; ", at(err, &n_udp, &n_path));
            s += &format!("error_log = \"{}\"\n", at(err, &s_udp, &s_path));
        }
        if !acc.is_empty() {
            n += &format!("access_log {} t; ", at(acc, &n_udp, &n_path));
            s += &format!("access_log = \"{}\"\n", at(acc, &s_udp, &s_path));
        }
        nginx_locs += &(n + "}\n");
        sluice_locs += &s;
    }
    let nginx = Nginx::start(&format!(
        "  limit_req_zone $uri zone=one:1m rate=1r/m;\n  log_format t '$request $status';\n  server {{\n{nginx_locs}  }}"
    ));
    let sluice = Sluice::start(&format!(
        "log_format = \"$request $status\"\n[zones.one]\nkey = \"$uri\"\nsize = \"1m\"\nrate = \"1r/m\"\n\
         [[servers]]\nproxy_pass = \"http://{}\"\n{sluice_locs}",
        up.addr
    ));
    for (path, _, _) in cases {
        for addr in [nginx.addr(), sluice.addr()] {
            assert_eq!(
                request(addr, client(6), "GET", path, &[]).await.status,
                200,
                "{path}"
            );
            assert_eq!(
                request(addr, client(6), "GET", path, &[]).await.status,
                503,
                "{path}"
            );
        }
    }
    let (n_got, s_got) = (drain(|b| n_udp.recv(b)), drain(|b| s_udp.recv(b)));
    assert_eq!(
        s_got, n_got,
        "UDP: sluice's datagrams (left) differ from nginx's"
    );
    let host = hostname();
    assert!(n_got.contains(&format!("<187>TIME {host} T: DATE [error] P#T: *N limiting requests, excess: 1.000 by zone \"one\", client: 127.0.0.6, server: , request: \"GET /es HTTP/1.1\", host: \"H\"")), "{n_got:#?}");
    assert!(
        n_got.contains(&format!("<14>TIME {host} T: GET /af HTTP/1.1 503")),
        "{n_got:#?}"
    );
    assert!(
        n_got.contains(&"<190>TIME T: GET /nohostname HTTP/1.1 200".to_string()),
        "{n_got:#?}"
    );
    assert_eq!(n_got.len(), 13, "{n_got:#?}");
    let (n_got, s_got) = (drain(|b| n_unix.recv(b)), drain(|b| s_unix.recv(b)));
    assert_eq!(
        s_got, n_got,
        "unix socket: sluice's datagrams (left) differ from nginx's"
    );
    assert_eq!(n_got.len(), 3, "{n_got:#?}");
    assert!(n_got[0].starts_with("<188>TIME"), "{n_got:#?}");
}

/// A syslog server that is down, or a reader that stopped reading, never slows a request: its
/// messages are dropped and counted in `/metrics`; once it reads again, messages arrive again
/// (`syslog.t`'s "send error - recover"). The default tag is `sluice`.
#[tokio::test]
async fn a_stuck_syslog_server_drops_lines_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.sock");
    let reader = UnixDatagram::bind(&path).unwrap();
    // A UDP port nobody listens on (yet).
    let udp_port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let toml = format!(
        "access_log = \"syslog:server=unix:{}\"\n[admin]\n[[servers]]\n[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200 }}\n\
         [[servers.locations]]\npath = \"/udp\"\nreturn = {{ status = 200 }}\naccess_log = \"syslog:server={udp_port},tag=udp\"\n",
        path.display()
    );
    let s = Sluice::start(&toml);
    let a = s.addr();
    let started = std::time::Instant::now();
    // The socket's queue holds a few hundred messages: many more are asked for.
    for _ in 0..1000 {
        assert_eq!(get(a, "/").await.status, 200);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "1000 requests took {took:?}"
    );
    let metrics = get(s.admin_addr(), "/metrics").await.body_text();
    let count = |result: &str| -> u64 {
        let key = format!("sluice_syslog_messages_total{{result=\"{result}\"}} ");
        let line = metrics
            .lines()
            .find(|l| l.starts_with(&key))
            .unwrap_or_else(|| panic!("{metrics}"));
        line[key.len()..].trim().parse().unwrap()
    };
    assert!(count("dropped") > 0, "{metrics}");
    assert_eq!(count("sent") + count("dropped"), 1000, "{metrics}");
    // Reading again: a new line arrives, with sluice's default tag.
    reader
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = vec![0u8; 65536];
    while reader.recv(&mut buf).is_ok() {}
    assert_eq!(get(a, "/again").await.status, 200);
    reader
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let n = reader
        .recv(&mut buf)
        .expect("a message after the queue drained");
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        msg.starts_with("<190>") && msg.contains(" sluice: 127.0.0.1 - - ["),
        "{msg}"
    );
    assert!(msg.contains("\"GET /again HTTP/1.1\" 200"), "{msg}");
    // A unix socket that is not there at all: dropped too, and the server keeps answering.
    drop(reader);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(get(a, "/gone").await.status, 200);
    // UDP to a port nobody listens on: refused (ICMP), and once a server is there, received
    // (nginx's syslog.t, "send error - recover").
    for _ in 0..3 {
        assert_eq!(get(a, "/udp").await.status, 200);
    }
    let server = std::net::UdpSocket::bind(udp_port).unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(get(a, "/udp").await.status, 200);
    let n = server
        .recv(&mut buf)
        .expect("a datagram once a server listens");
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        msg.contains(" udp: 127.0.0.1 - - [") && msg.contains("GET /udp"),
        "{msg}"
    );
}

/// The host name a syslog header carries: the kernel's, lower-cased (as nginx sends it).
fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the host name");
    name.trim().to_lowercase()
}

/// `error_log` files are reopened by SIGUSR1, as the access log: after a rotation, lines go to
/// the new file; a server's own `error_log` takes its requests' lines, the top level's the
/// process's.
#[tokio::test]
async fn error_log_files_reopen_on_sigusr1() {
    let toml = "error_log = \"main.log info\"\n[zones.one]\nkey = \"$uri\"\nsize = \"1m\"\nrate = \"1r/m\"\n\
                [[servers]]\nerror_log = \"server.log warn\"\n[[servers.locations]]\npath = \"/\"\n\
                limit_req = { zone = \"one\" }\nreturn = { status = 200 }\n";
    let s = Sluice::start(toml);
    let a = s.addr();
    let main = s.wait_lines("main.log", 1).await;
    assert!(main.contains("[notice]"), "{main}");
    for path in ["/1", "/1", "/2", "/2"] {
        get(a, path).await;
    }
    let server = s.wait_lines("server.log", 2).await;
    assert!(
        server
            .lines()
            .all(|l| l.contains("[error]") && l.contains("limiting requests")),
        "{server}"
    );
    assert!(
        !s.file("main.log").contains("limiting"),
        "the server's lines are the server's"
    );
    std::fs::rename(s.dir().join("server.log"), s.dir().join("server.log.1")).unwrap();
    std::fs::rename(s.dir().join("main.log"), s.dir().join("main.log.1")).unwrap();
    s.signal(libc::SIGUSR1);
    let made = crate::support::within(Duration::from_secs(5), async || {
        s.dir().join("server.log").exists().then_some(())
    });
    made.await.expect("SIGUSR1 opens server.log again");
    assert!(s.file("main.log.1").contains("reopening logs"));
    get(a, "/1").await;
    let server = s.wait_lines("server.log", 1).await;
    assert!(server.contains("limiting requests"), "{server}");
    assert_eq!(
        s.file("server.log.1").lines().count(),
        2,
        "the old file got no more"
    );
}
