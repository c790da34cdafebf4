//! `limit_conn` differential tests: real nginx and sluice with equivalent configurations, each in
//! front of its own upstream that holds every response for [`HOLD`], so that requests fired
//! together are in flight together. Statuses and latencies are compared with `assert_same`, after
//! nginx's own against the numbers measured on nginx 1.22 (so a harness fault cannot make both
//! sides agree on something else); the error-log lines and `$limit_conn_status` of the access
//! log are compared as multisets.
//!
//! And `worker_connections`, on sluice alone: nginx counts its listeners, its channel to the
//! master and its upstream connections against the same number, and reuses any idle connection
//! where sluice reuses those idle for a second, so there is no like-for-like nginx run (README,
//! "limit_conn and worker_connections").

use std::net::IpAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{
    Nginx, Reader, Reply, Request, Sluice, Upstream, assert_expected, assert_same, client,
    conn_lines, connect, eventually, expect, fire, group_by_source, request,
};

/// How long the upstreams hold each response.
const HOLD: Duration = Duration::from_millis(300);

/// The access-log line both sides write (nginx's `log_format lc`).
const LOG_FORMAT: &str = r#"$remote_addr "$request" $status $limit_conn_status"#;

/// nginx and sluice side by side, each in front of its own slow upstream.
struct Pair {
    nginx: Nginx,
    sluice: Sluice,
    nginx_upstream: Upstream,
    sluice_upstream: Upstream,
}

impl Pair {
    /// `nginx_locations` is the inside of nginx's `server { }` (its `location`s, which
    /// `proxy_pass http://backend`, the upstream block of nginx's upstream); `nginx_zones` goes
    /// before the server. `sluice_toml(server)` is sluice's file, `server` the `[[servers]]`
    /// header with the `proxy_pass` to sluice's upstream and the access log (the server's own
    /// keys and `[[servers.locations]]` follow it).
    fn start(
        nginx_zones: &str,
        nginx_locations: &str,
        sluice_toml: impl FnOnce(&str) -> String,
    ) -> Pair {
        let (nginx_upstream, sluice_upstream) =
            (Upstream::start_slow(HOLD), Upstream::start_slow(HOLD));
        let nginx = Nginx::start(&format!(
            "  log_format lc '{LOG_FORMAT}';\n  upstream backend {{ server {}; }}\n{nginx_zones}\n  server {{\n    access_log logs/lc.log lc;\n{nginx_locations}\n  }}\n",
            nginx_upstream.addr
        ));
        let server = format!(
            "[[servers]]\nproxy_pass = \"http://{}\"\naccess_log = \"stdout\"\n",
            sluice_upstream.addr
        );
        let sluice = Sluice::start(&format!(
            "log_format = '{LOG_FORMAT}'\n{}",
            sluice_toml(&server)
        ));
        Pair {
            nginx,
            sluice,
            nginx_upstream,
            sluice_upstream,
        }
    }

    /// The same requests to both at the same time.
    async fn fire(&self, requests: Vec<Request>) -> (Vec<Reply>, Vec<Reply>) {
        tokio::join!(
            fire(self.nginx.addr(), requests.clone()),
            fire(self.sluice.addr(), requests)
        )
    }

    /// Checks nginx against `expected` (status, ms), then sluice against nginx.
    fn check(&self, scenario: &str, nginx: &[Reply], sluice: &[Reply], expected: &[(u16, u64)]) {
        assert_expected(&format!("nginx {scenario}"), "nginx", nginx, expected);
        assert_same(&format!("{scenario}: nginx vs sluice"), nginx, sluice);
        let passed = |v: &[Reply]| v.iter().filter(|r| r.status == 200).count();
        assert_eq!(
            self.nginx_upstream.hits(),
            passed(nginx),
            "{scenario}: nginx's upstream"
        );
        assert_eq!(
            self.sluice_upstream.hits(),
            passed(sluice),
            "{scenario}: sluice's upstream saw a different number of requests than passed \
             (rejected requests must not be forwarded)"
        );
    }

    /// Both error logs carry the same `limiting connections` lines, and nginx's are `want`.
    async fn assert_conn_lines(&self, scenario: &str, want: &[String]) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let nginx = conn_lines(&self.nginx.error_log())
            .unwrap_or_else(|e| panic!("{scenario}: nginx's own error log: {e}"));
        assert_eq!(
            nginx, want,
            "{scenario}: nginx's limiting connections lines"
        );
        let sluice_log = self.sluice.log();
        let sluice = conn_lines(&sluice_log).unwrap_or_else(|e| {
            panic!("{scenario}: sluice's error log is not in nginx's format: {e}\n{sluice_log}")
        });
        assert_eq!(
            sluice, nginx,
            "{scenario}: sluice's lines vs nginx's\n{sluice_log}"
        );
    }

    /// Both access logs say the same (sorted lines: requests finish in any order), and nginx's
    /// are `want`.
    async fn assert_access_log(&self, scenario: &str, want: &[&str]) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sorted = |log: String| {
            let mut v: Vec<String> = log.lines().map(str::to_owned).collect();
            v.sort();
            v
        };
        let nginx = sorted(
            std::fs::read_to_string(self.nginx.prefix().join("logs/lc.log"))
                .expect("nginx's lc.log"),
        );
        let mut want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
        want.sort();
        assert_eq!(nginx, want, "{scenario}: nginx's access log");
        assert_eq!(
            sorted(self.sluice.stdout()),
            nginx,
            "{scenario}: sluice's access log"
        );
    }
}

const ZONE_NGINX: &str = "  limit_conn_zone $binary_remote_addr zone=addr:1m;";
const ZONE_SLUICE: &str = "[conn_zones.addr]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\n";

fn gets(source: IpAddr, path: &str, n: usize) -> Vec<Request> {
    vec![Request::get(source, path); n]
}

/// `"[error] limiting connections by zone "addr", client: …"` for a request to `path`.
fn line(level: &str, dry: bool, zone: &str, source: IpAddr, path: &str) -> String {
    let dry = if dry { ", dry run," } else { "" };
    format!(
        "[{level}] limiting connections{dry} by zone \"{zone}\", client: {source}, server: , request: \"GET {path} HTTP/1.1\""
    )
}

/// conn = 1 and three requests at once from one client: one is processed, two get 503 at once;
/// once the first is answered its count is released and the client is served again.
#[tokio::test(flavor = "multi_thread")]
async fn one_request_at_a_time_per_client() {
    let pair = Pair::start(
        ZONE_NGINX,
        "    location / { limit_conn addr 1; proxy_pass http://backend; }",
        |server| format!("{ZONE_SLUICE}{server}limit_conn = {{ zone = \"addr\", conn = 1 }}\n"),
    );
    let c = client(2);
    let (nginx, sluice) = pair.fire(gets(c, "/one", 3)).await;
    pair.check(
        "conn=1, 3 at once",
        &nginx,
        &sluice,
        &expect(&[(503, &[0, 0]), (200, &[300])]),
    );
    for r in sluice.iter().filter(|r| r.status == 503) {
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        assert!(
            r.body_text().contains("limit_conn zone \\\"addr\\\""),
            "{}",
            r.body_text()
        );
    }
    // Released: a request after the first was answered passes on both.
    let (nginx, sluice) = pair.fire(gets(c, "/after", 1)).await;
    assert_eq!((nginx[0].status, sluice[0].status), (200, 200));
    let l = line("error", false, "addr", c, "/one");
    pair.assert_conn_lines("conn=1", &[l.clone(), l]).await;
    let a = format!("{c} \"GET /one HTTP/1.1\"");
    pair.assert_access_log(
        "conn=1",
        &[
            &format!("{a} 200 PASSED"),
            &format!("{a} 503 REJECTED"),
            &format!("{a} 503 REJECTED"),
            &format!("{c} \"GET /after HTTP/1.1\" 200 PASSED"),
        ],
    )
    .await;
}

/// Two clients, each with its own count: conn = 2, three at once from each.
#[tokio::test(flavor = "multi_thread")]
async fn clients_are_counted_apart() {
    let pair = Pair::start(
        ZONE_NGINX,
        "    location / { limit_conn addr 2; proxy_pass http://backend; }",
        |server| format!("{ZONE_SLUICE}{server}limit_conn = {{ zone = \"addr\", conn = 2 }}\n"),
    );
    let (a, b) = (client(2), client(3));
    let mut reqs = gets(a, "/a", 3);
    reqs.extend(gets(b, "/b", 3));
    let (nginx, sluice) = pair.fire(reqs).await;
    pair.check(
        "two clients",
        &nginx,
        &sluice,
        &expect(&[(503, &[0, 0]), (200, &[300, 300, 300, 300])]),
    );
    for source in [a, b] {
        let (n, s) = (
            group_by_source(&nginx, source),
            group_by_source(&sluice, source),
        );
        assert_expected(
            &format!("nginx, client {source}"),
            "nginx",
            &n,
            &expect(&[(503, &[0]), (200, &[300, 300])]),
        );
        assert_same(&format!("client {source}"), &n, &s);
    }
    pair.assert_conn_lines(
        "two clients",
        &[
            line("error", false, "addr", a, "/a"),
            line("error", false, "addr", b, "/b"),
        ],
    )
    .await;
}

/// Dry run: everything is processed, the would-be rejections logged (`, dry run,`) and marked
/// REJECTED_DRY_RUN; limit_conn_log_level applies.
#[tokio::test(flavor = "multi_thread")]
async fn dry_run_logs_and_lets_through() {
    let pair = Pair::start(
        ZONE_NGINX,
        "    location / { limit_conn addr 1; limit_conn_dry_run on; limit_conn_log_level warn; proxy_pass http://backend; }",
        |server| {
            format!(
                "{ZONE_SLUICE}{server}limit_conn = {{ zone = \"addr\", conn = 1 }}\nlimit_conn_dry_run = true\nlimit_conn_log_level = \"warn\"\n"
            )
        },
    );
    let c = client(2);
    let (nginx, sluice) = pair.fire(gets(c, "/dry", 3)).await;
    pair.check(
        "dry run",
        &nginx,
        &sluice,
        &expect(&[(200, &[300, 300, 300])]),
    );
    let l = line("warn", true, "addr", c, "/dry");
    pair.assert_conn_lines("dry run", &[l.clone(), l]).await;
    let a = format!("{c} \"GET /dry HTTP/1.1\" 200");
    pair.assert_access_log(
        "dry run",
        &[
            &format!("{a} PASSED"),
            &format!("{a} REJECTED_DRY_RUN"),
            &format!("{a} REJECTED_DRY_RUN"),
        ],
    )
    .await;
}

/// `limit_conn_status 429`, inherited from the top level; a location without limit_conn logs
/// `-`.
#[tokio::test(flavor = "multi_thread")]
async fn limit_conn_status_429_and_unlimited_locations() {
    let pair = Pair::start(
        &format!("{ZONE_NGINX}\n  limit_conn_status 429;"),
        "    location / { limit_conn addr 1; proxy_pass http://backend; }\n    location /free { proxy_pass http://backend; }",
        |server| {
            format!(
                "limit_conn_status = 429\n{ZONE_SLUICE}{server}limit_conn = {{ zone = \"addr\", conn = 1 }}\n[[servers.locations]]\npath = \"/free\"\nlimit_conn = []\n"
            )
        },
    );
    let c = client(2);
    let mut reqs = gets(c, "/limited", 2);
    reqs.extend(gets(c, "/free", 2));
    let (nginx, sluice) = pair.fire(reqs).await;
    pair.check(
        "429",
        &nginx,
        &sluice,
        &expect(&[(429, &[0]), (200, &[300, 300, 300])]),
    );
    pair.assert_access_log(
        "429",
        &[
            &format!("{c} \"GET /limited HTTP/1.1\" 200 PASSED"),
            &format!("{c} \"GET /limited HTTP/1.1\" 429 REJECTED"),
            &format!("{c} \"GET /free HTTP/1.1\" 200 -"),
            &format!("{c} \"GET /free HTTP/1.1\" 200 -"),
        ],
    )
    .await;
}

/// limit_req runs before limit_conn (nginx's preaccess phase): a request limit_req rejects is
/// never counted (`$limit_conn_status` -), and one it delays is counted only once its delay is
/// over (a request to a limit_conn-only location during that delay passes).
#[tokio::test(flavor = "multi_thread")]
async fn limit_req_runs_first() {
    let pair = Pair::start(
        &format!(
            "{ZONE_NGINX}\n  limit_req_zone $binary_remote_addr zone=rq:1m rate=1r/s;\n  limit_req_zone $binary_remote_addr zone=nd:1m rate=1r/s;"
        ),
        "    location /delayed { limit_req zone=rq burst=5; limit_conn addr 1; proxy_pass http://backend; }\n    location /nodelay { limit_req zone=nd; limit_conn addr 1; proxy_pass http://backend; }\n    location /conn { limit_conn addr 1; proxy_pass http://backend; }",
        |server| {
            format!(
                r#"{ZONE_SLUICE}
[zones.rq]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/s"
[zones.nd]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/s"
{server}[[servers.locations]]
path = "/delayed"
limit_req = {{ zone = "rq", burst = 5 }}
limit_conn = {{ zone = "addr", conn = 1 }}
[[servers.locations]]
path = "/nodelay"
limit_req = {{ zone = "nd" }}
limit_conn = {{ zone = "addr", conn = 1 }}
[[servers.locations]]
path = "/conn"
limit_conn = {{ zone = "addr", conn = 1 }}
"#
            )
        },
    );
    let c = client(2);
    // Two to /delayed at once: the first is processed (0–300 ms), the second delayed 1 s; a
    // request to /conn at 500 ms finds no request of this client counted.
    let both = async {
        let at_once = pair.fire(gets(c, "/delayed", 2));
        let later = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            tokio::join!(
                request(pair.nginx.addr(), c, "GET", "/conn", &[]),
                request(pair.sluice.addr(), c, "GET", "/conn", &[])
            )
        };
        tokio::join!(at_once, later)
    };
    let ((nginx, sluice), (nginx_conn, sluice_conn)) = both.await;
    assert_expected(
        "nginx /delayed",
        "nginx",
        &nginx,
        &expect(&[(200, &[300, 1300])]),
    );
    assert_same("/delayed", &nginx, &sluice);
    assert_eq!(
        (nginx_conn.status, sluice_conn.status),
        (200, 200),
        "a delayed request is not counted while delayed"
    );
    // /nodelay: three at once; limit_req rejects two before limit_conn sees them.
    let (nginx, sluice) = pair.fire(gets(c, "/nodelay", 3)).await;
    assert_expected(
        "nginx /nodelay",
        "nginx",
        &nginx,
        &expect(&[(503, &[0, 0]), (200, &[300])]),
    );
    assert_same("/nodelay", &nginx, &sluice);
    pair.assert_conn_lines("limit_req first", &[]).await;
    let d = format!("{c} \"GET /delayed HTTP/1.1\" 200 PASSED");
    let n = format!("{c} \"GET /nodelay HTTP/1.1\"");
    pair.assert_access_log(
        "limit_req first",
        &[
            &d,
            &d,
            &format!("{c} \"GET /conn HTTP/1.1\" 200 PASSED"),
            &format!("{n} 200 PASSED"),
            &format!("{n} 503 -"),
            &format!("{n} 503 -"),
        ],
    )
    .await;
}

/// A client that goes away while its request is being processed releases its count (the
/// upstream answer is dropped).
#[tokio::test(flavor = "multi_thread")]
async fn a_client_gone_midway_releases_its_count() {
    let pair = Pair::start(
        ZONE_NGINX,
        "    location / { limit_conn addr 1; proxy_pass http://backend; }",
        |server| format!("{ZONE_SLUICE}{server}limit_conn = {{ zone = \"addr\", conn = 1 }}\n"),
    );
    let c = client(4);
    let sides = [
        (pair.nginx.addr(), &pair.nginx_upstream),
        (pair.sluice.addr(), &pair.sluice_upstream),
    ];
    for (addr, upstream) in sides {
        let mut s = connect(addr, c).await;
        s.write_all(b"GET /gone HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        // Gone while its request is being processed: once the upstream has it.
        eventually(
            "the request at the upstream",
            Duration::from_secs(5),
            async || (upstream.hits() == 1).then_some(()),
        )
        .await;
        drop(s);
    }
    // nginx notices the close once the upstream answers (it does not watch the client while
    // waiting: proxy_ignore_client_abort off checks on the next event); wait past HOLD.
    tokio::time::sleep(HOLD + Duration::from_millis(200)).await;
    let (nginx, sluice) = pair.fire(gets(c, "/next", 2)).await;
    assert_expected(
        "nginx after a client left",
        "nginx",
        &nginx,
        &expect(&[(503, &[0]), (200, &[300])]),
    );
    assert_same("after a client left", &nginx, &sluice);
    // The abandoned request reached the upstreams too.
    assert_eq!(
        (pair.nginx_upstream.hits(), pair.sluice_upstream.hits()),
        (2, 2)
    );
}

/// A keep-alive connection to `addr`, each answer read within 5 s.
async fn conn(addr: std::net::SocketAddr) -> Reader<TcpStream> {
    let s = TcpStream::connect(addr).await.unwrap();
    Reader::new(s).limit(Duration::from_secs(5))
}

/// One keep-alive request on `s`; the status.
async fn keepalive_get(s: &mut Reader<TcpStream>) -> u16 {
    s.write_all(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    s.response().await.status
}

/// Whether the server closed `s` (end of file or reset) within `within`.
async fn closed_by_server(s: &mut Reader<TcpStream>, within: Duration) -> bool {
    let mut b = [0u8; 64];
    match tokio::time::timeout(within, s.read(&mut b)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

/// sluice with worker_connections = 5 and one worker thread, `/fast` answered by `return`.
fn five_slots() -> Sluice {
    Sluice::builder(
        "worker_connections = 5\n[admin]\n[[servers]]\n[[servers.locations]]\npath = \"/fast\"\nreturn = { status = 200, body = \"ok\\n\" }\n",
    )
    .env("SLUICE_WORKERS", "1")
    .start()
}

/// worker_connections = 5 with one worker thread: five keep-alive connections are served, and
/// with each reading its next head (so none is idle, none can be reused), the sixth (and
/// seventh) are closed at once with nginx's alert, logged once for the burst; once two close,
/// new connections are served again; the refusals are counted in /metrics.
#[tokio::test(flavor = "multi_thread")]
async fn worker_connections_caps_open_connections() {
    let sluice = five_slots();
    // wait_for_ports connected once to each port; let those probes close.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let addr = sluice.addr();
    let mut open = Vec::new();
    for _ in 0..5 {
        let mut s = conn(addr).await;
        assert_eq!(keepalive_get(&mut s).await, 200);
        s.write_all(b"GET /fast HTTP/1.1\r\n").await.unwrap();
        open.push(s);
    }
    for i in 6..=7 {
        let mut s = conn(addr).await;
        let _ = s.write_all(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(
            closed_by_server(&mut s, Duration::from_secs(2)).await,
            "connection {i} over worker_connections must be closed at once"
        );
    }
    // The first five are still served.
    open[0].write_all(b"Host: x\r\n\r\n").await.unwrap();
    assert_eq!(open[0].response().await.status, 200);
    let log = sluice.log();
    let alerts = log.matches("[alert]").count();
    let exact = log
        .lines()
        .filter(|l| l.contains("[alert]"))
        .all(|l| l.ends_with(": 5 worker_connections are not enough"));
    assert!(
        (1..=2).contains(&alerts) && exact,
        "one alert per second at most, in nginx's words:\n{log}"
    );
    open.truncate(3);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..2 {
        let mut s = conn(addr).await;
        assert_eq!(
            keepalive_get(&mut s).await,
            200,
            "room again after two closed"
        );
        open.push(s);
    }
    let metrics = request(sluice.admin_addr(), client(1), "GET", "/metrics", &[]).await;
    assert!(
        metrics
            .body_text()
            .contains("sluice_connections_refused_total 2"),
        "{}",
        metrics.body_text()
    );
}

/// Out of worker_connections with idle connections parked (idle for a second), a new client is
/// served and the idle connection nearest its deadline is closed to make room, as nginx reuses
/// its idle connections, with nginx's warning once a second; one that sent nothing yet counts
/// as idle too, and none is refused.
#[tokio::test(flavor = "multi_thread")]
async fn out_of_worker_connections_idle_ones_are_closed_for_new_clients() {
    let sluice = five_slots();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let addr = sluice.addr();
    // The silent one's deadline (client_header_timeout, 60 s) is nearer than the keep-alive
    // ones' (75 s after their answers).
    let mut open = vec![conn(addr).await];
    for _ in 0..4 {
        let mut s = conn(addr).await;
        assert_eq!(keepalive_get(&mut s).await, 200);
        open.push(s);
    }
    // Parked after a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for i in 0..2 {
        let mut s = conn(addr).await;
        assert_eq!(keepalive_get(&mut s).await, 200, "new client {i}");
        assert!(
            closed_by_server(&mut open[i], Duration::from_secs(2)).await,
            "idle connection {i} is the one closed"
        );
        open.push(s);
    }
    for (i, s) in open.iter_mut().enumerate().skip(2) {
        assert_eq!(keepalive_get(s).await, 200, "connection {i} kept");
    }
    let log = sluice.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("[warn]")).collect();
    assert!(
        (1..=2).contains(&warnings.len())
            && warnings
                .iter()
                .all(|l| l.ends_with(": 5 worker_connections are not enough, reusing connections")),
        "nginx's warning, once a second:\n{log}"
    );
    assert!(!log.contains("[alert]"), "nothing refused:\n{log}");
    let metrics = request(sluice.admin_addr(), client(1), "GET", "/metrics", &[]).await;
    assert!(
        metrics
            .body_text()
            .contains("sluice_connections_refused_total 0"),
        "{}",
        metrics.body_text()
    );
}

/// `$limit_conn_status` wherever variables go, as nginx allows it: in `add_header` (with
/// `always`, so the 503 carries it too) the passed request says PASSED and the rejected ones
/// REJECTED, on both sides.
#[tokio::test(flavor = "multi_thread")]
async fn limit_conn_status_in_add_header() {
    let pair = Pair::start(
        ZONE_NGINX,
        "    location / { limit_conn addr 1; add_header X-LC $limit_conn_status always; \
         proxy_pass http://backend; }",
        |server| {
            format!(
                "{ZONE_SLUICE}{server}limit_conn = {{ zone = \"addr\", conn = 1 }}\n\
                 add_header = {{ name = \"X-LC\", value = \"$limit_conn_status\", always = true }}\n"
            )
        },
    );
    let c = client(3);
    let (nginx, sluice) = pair.fire(gets(c, "/lc", 3)).await;
    let headers = |v: &[Reply]| {
        let mut h: Vec<(u16, Option<String>)> = v
            .iter()
            .map(|r| (r.status, r.header("x-lc").map(str::to_owned)))
            .collect();
        h.sort();
        h
    };
    let want = vec![
        (200, Some("PASSED".to_owned())),
        (503, Some("REJECTED".to_owned())),
        (503, Some("REJECTED".to_owned())),
    ];
    assert_eq!(headers(&nginx), want, "nginx");
    assert_eq!(headers(&sluice), want, "sluice");
}
