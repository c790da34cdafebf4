//! Differential tests: real nginx and sluice with equivalent configurations, the same bursts at
//! the same time, compared with `assert_same` (statuses equal as multisets, latencies paired per
//! status within ±100 ms) and, where all requests arrive together, `assert_same_limit_lines`
//! (the nginx-format error-log lines: level, event, zone, client, request, excess ±0.100).
//!
//! Each scenario first checks nginx against nginx-limit-req.md's numbers, so a harness fault (for
//! instance requests that do not arrive together) fails as such instead of making both sides
//! agree on something else. Both sides proxy to their own in-process [`Upstream`], which also
//! shows that rejected requests never reach the backend.

use std::net::SocketAddr;

use tokio::time::{Duration, Instant, sleep_until};

use crate::support::{
    Event, Nginx, Reply, Request, Sluice, Upstream, assert_expected, assert_same,
    assert_same_limit_lines, burst, client, expect, fire, free_port, group_by_source, limit_lines,
};

/// `[zones.NAME]` keyed on the client address, 1m, at `rate`.
fn zone(name: &str, rate: &str) -> String {
    format!("[zones.{name}]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\nrate = \"{rate}\"\n\n")
}

/// nginx and sluice side by side, each proxying to its own upstream.
struct Pair {
    nginx: Nginx,
    sluice: Sluice,
    nginx_upstream: Upstream,
    sluice_upstream: Upstream,
}

impl Pair {
    /// `nginx_http(port, upstream)` is the inside of nginx's `http { }`; `sluice_toml(port,
    /// upstream)` the sluice configuration. Both must listen on 127.0.0.1:`port`.
    fn start(
        nginx_http: impl FnOnce(u16, SocketAddr) -> String,
        sluice_toml: impl FnOnce(u16, SocketAddr) -> String,
    ) -> Pair {
        let (nginx_upstream, sluice_upstream) = (Upstream::start(), Upstream::start());
        let nginx_port = free_port();
        let nginx = Nginx::start(&nginx_http(nginx_port, nginx_upstream.addr), &[nginx_port]);
        let sluice_port = free_port();
        let sluice = Sluice::start(
            &sluice_toml(sluice_port, sluice_upstream.addr),
            &[sluice_port],
        );
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

    /// Every 2xx answer reached the upstream, and nothing else did.
    fn assert_upstream_hits(&self, scenario: &str, nginx: &[Reply], sluice: &[Reply]) {
        let passed = |v: &[Reply]| v.iter().filter(|r| (200..300).contains(&r.status)).count();
        assert_eq!(
            self.nginx_upstream.hits(),
            passed(nginx),
            "{scenario}: nginx's upstream saw a different number of requests than passed"
        );
        assert_eq!(
            self.sluice_upstream.hits(),
            passed(sluice),
            "{scenario}: sluice's upstream saw a different number of requests than passed \
             (rejected requests must not be forwarded, passed ones must)"
        );
        for r in nginx.iter().chain(sluice).filter(|r| r.status == 200) {
            let first = r.body_text().lines().next().unwrap_or_default().to_owned();
            assert!(
                first.starts_with(&format!("GET {} HTTP/1.", r.path)),
                "{scenario}: the upstream saw request line {first:?} for {}",
                r.path
            );
        }
    }

    /// Both error logs carry the same limit lines. Waits briefly for the last lines to land.
    async fn assert_same_limit_lines(&self, scenario: &str) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_same_limit_lines(scenario, &self.nginx.error_log(), &self.sluice.log());
    }
}

// === The seed article ===

const NGINX_ERROR_PAGE: &str = r#"
    error_page 429 @too_many;
    location @too_many {
      add_header Retry-After 1 always;
      return 429 "too many requests\n";
    }"#;

const NGINX_ARTICLE_ZONES: &str = "
  limit_req_zone $binary_remote_addr zone=z_plain:1m   rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_burst:1m   rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_nodelay:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_delay:1m   rate=2r/s;
  limit_req_status 429;";

/// config/nginx/seed.conf's server, answering from html/ok.txt as in the article.
fn nginx_seed(port: u16) -> String {
    format!(
        "{NGINX_ARTICLE_ZONES}
  server {{
    listen 127.0.0.1:{port};
    root html;
    location /plain   {{ limit_req zone=z_plain;                   try_files /ok.txt =404; }}
    location /burst   {{ limit_req zone=z_burst burst=5;           try_files /ok.txt =404; }}
    location /nodelay {{ limit_req zone=z_nodelay burst=5 nodelay; try_files /ok.txt =404; }}
    location /delay   {{ limit_req zone=z_delay burst=5 delay=2;   try_files /ok.txt =404; }}
    {NGINX_ERROR_PAGE}
  }}"
    )
}

/// The article's server with proxy_pass to `upstream`.
fn nginx_article(port: u16, upstream: SocketAddr) -> String {
    format!(
        "{NGINX_ARTICLE_ZONES}
  server {{
    listen 127.0.0.1:{port};
    location /plain   {{ limit_req zone=z_plain;                   proxy_pass http://{upstream}; }}
    location /burst   {{ limit_req zone=z_burst burst=5;           proxy_pass http://{upstream}; }}
    location /nodelay {{ limit_req zone=z_nodelay burst=5 nodelay; proxy_pass http://{upstream}; }}
    location /delay   {{ limit_req zone=z_delay burst=5 delay=2;   proxy_pass http://{upstream}; }}
    {NGINX_ERROR_PAGE}
  }}"
    )
}

/// SPEC.md §2's server, proxying to `upstream`.
fn sluice_article(port: u16, upstream: SocketAddr) -> String {
    let zones: String = ["z_plain", "z_burst", "z_nodelay", "z_delay"]
        .iter()
        .map(|z| zone(z, "2r/s"))
        .collect();
    format!(
        r#"limit_req_status    = 429
limit_req_log_level = "error"

{zones}[[servers]]
listen     = "127.0.0.1:{port}"
proxy_pass = "http://{upstream}"

[[servers.locations]]
path      = "/plain"
limit_req = {{ zone = "z_plain" }}

[[servers.locations]]
path      = "/burst"
limit_req = {{ zone = "z_burst", burst = 5 }}

[[servers.locations]]
path      = "/nodelay"
limit_req = {{ zone = "z_nodelay", burst = 5, nodelay = true }}

[[servers.locations]]
path      = "/delay"
limit_req = [{{ zone = "z_delay", burst = 5, delay = 2 }}]

[servers.error_pages.429]
status  = 429
headers = {{ "Retry-After" = "$retry_after" }}
body    = "too many requests\n"
"#
    )
}

/// nginx-limit-req.md §11: 10 simultaneous requests per location at 2r/s.
fn article_expected(path: &str) -> Vec<(u16, u64)> {
    match path {
        "/plain" => expect(&[(200, &[0]), (429, &[0; 9])]),
        "/burst" => expect(&[(200, &[0, 500, 1000, 1500, 2000, 2500]), (429, &[0; 4])]),
        "/nodelay" => expect(&[(200, &[0; 6]), (429, &[0; 4])]),
        "/delay" => expect(&[(200, &[0, 0, 0, 500, 1000, 1500]), (429, &[0; 4])]),
        _ => unreachable!("not an article location: {path}"),
    }
}

/// The oracle itself: nginx with config/nginx/seed.conf's locations reproduces the table of
/// nginx-limit-req.md §11 through this harness (bodies from html/ok.txt, the @too_many page).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_oracle_reproduces_the_reference_table() {
    let port = free_port();
    let nginx = Nginx::start(&nginx_seed(port), &[port]);
    let addr = nginx.addr();
    let (plain, burst_, nodelay, delay) = tokio::join!(
        burst(addr, client(2), "/plain", 10),
        burst(addr, client(3), "/burst", 10),
        burst(addr, client(4), "/nodelay", 10),
        burst(addr, client(5), "/delay", 10),
    );
    for (path, replies) in [
        ("/plain", &plain),
        ("/burst", &burst_),
        ("/nodelay", &nodelay),
        ("/delay", &delay),
    ] {
        assert_expected(
            &format!("nginx {path} (seed.conf)"),
            "nginx",
            replies,
            &article_expected(path),
        );
        for r in replies.iter() {
            match r.status {
                200 => assert_eq!(r.body_text(), "ok\n", "{r:#?}"),
                429 => {
                    assert_eq!(r.body_text(), "too many requests\n", "{r:#?}");
                    assert_eq!(r.header("Retry-After"), Some("1"), "{r:#?}");
                }
                _ => panic!("nginx {path}: unexpected {r}"),
            }
        }
    }
}

async fn diff_article(path: &str) {
    let pair = Pair::start(nginx_article, sluice_article);
    let (nginx, sluice) = pair.fire(vec![Request::get(client(2), path); 10]).await;
    assert_expected(
        &format!("nginx {path}"),
        "nginx",
        &nginx,
        &article_expected(path),
    );
    assert_same(&format!("article {path}: nginx vs sluice"), &nginx, &sluice);
    for r in nginx.iter().chain(&sluice).filter(|r| r.status == 429) {
        assert_eq!(
            r.body_text(),
            "too many requests\n",
            "article {path}: the 429 error page body differs: {r}"
        );
    }
    pair.assert_upstream_hits(&format!("article {path}"), &nginx, &sluice);
    pair.assert_same_limit_lines(&format!("article {path}"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_article_plain() {
    diff_article("/plain").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_article_burst() {
    diff_article("/burst").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_article_nodelay() {
    diff_article("/nodelay").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_article_delay() {
    diff_article("/delay").await;
}

// === Several limits in one location (nginx-limit-req.md §3) ===

/// `z_a` 2r/s burst=3 nodelay, then `z_b` 1r/s burst=3, 10 simultaneous requests: request 1
/// passes, 2–4 are delayed 1000/2000/3000 ms by z_b, the other six are rejected by z_a at excess
/// 4.000 (z_b is never evaluated for them, and z_a is charged only for accepted requests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_two_limits_nodelay_zone_then_delaying_zone() {
    let pair = Pair::start(
        |port, up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_a:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_b:1m rate=1r/s;
  limit_req_status 429;
  server {{
    listen 127.0.0.1:{port};
    location /two {{
      limit_req zone=z_a burst=3 nodelay;
      limit_req zone=z_b burst=3;
      proxy_pass http://{up};
    }}
  }}"
            )
        },
        |port, up| {
            format!(
                r#"limit_req_status = 429

{}{}[[servers]]
listen     = "127.0.0.1:{port}"
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/two"
limit_req = [{{ zone = "z_a", burst = 3, nodelay = true }}, {{ zone = "z_b", burst = 3 }}]
"#,
                zone("z_a", "2r/s"),
                zone("z_b", "1r/s")
            )
        },
    );
    let (nginx, sluice) = pair.fire(vec![Request::get(client(2), "/two"); 10]).await;
    assert_expected(
        "nginx /two",
        "nginx",
        &nginx,
        &expect(&[(200, &[0, 1000, 2000, 3000]), (429, &[0; 6])]),
    );
    assert_same("two limits /two: nginx vs sluice", &nginx, &sluice);
    pair.assert_upstream_hits("two limits", &nginx, &sluice);

    // The oracle's log: six `limiting requests, excess: 4.000 by zone "z_a"` at [error], three
    // `delaying request, excess: 1.000/2.000/3.000, by zone "z_b"` at [warn].
    tokio::time::sleep(Duration::from_millis(100)).await;
    let lines = limit_lines(&pair.nginx.error_log()).expect("nginx's error log parses");
    let summary: Vec<String> = lines
        .iter()
        .map(|l| format!("{:?} {} {} {}", l.event, l.level, l.zone, l.excess))
        .collect();
    let rejected: Vec<_> = lines
        .iter()
        .filter(|l| l.event == Event::Limiting)
        .collect();
    let delayed: Vec<_> = lines
        .iter()
        .filter(|l| l.event == Event::Delaying)
        .collect();
    assert!(
        rejected.len() == 6
            && rejected.iter().all(|l| l.zone == "z_a"
                && l.level == "error"
                && (3900..=4000).contains(&l.excess)),
        "nginx's rejections are not 6 × [error] z_a at ~4.000: {summary:#?}"
    );
    let mut delayed_excess: Vec<u64> = delayed.iter().map(|l| l.excess).collect();
    delayed_excess.sort_unstable();
    assert!(
        delayed.len() == 3
            && delayed.iter().all(|l| l.zone == "z_b" && l.level == "warn")
            && delayed_excess
                .iter()
                .zip([1000, 2000, 3000])
                .all(|(e, want)| e.abs_diff(want) <= 100),
        "nginx's delays are not 3 × [warn] z_b at ~1, 2, 3: {summary:#?}"
    );
    pair.assert_same_limit_lines("two limits /two").await;
}

// === Per-client buckets ===

/// Two clients burst the same location at the same moment; each has its own bucket, so each
/// gets the full burst=2 treatment (0, 500, 1000 ms, three rejected).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_two_clients_get_separate_buckets() {
    let pair = Pair::start(
        |port, up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_shared:1m rate=2r/s;
  limit_req_status 429;
  server {{
    listen 127.0.0.1:{port};
    location /shared {{ limit_req zone=z_shared burst=2; proxy_pass http://{up}; }}
  }}"
            )
        },
        |port, up| {
            format!(
                r#"limit_req_status = 429

{}[[servers]]
listen     = "127.0.0.1:{port}"
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/shared"
limit_req = {{ zone = "z_shared", burst = 2 }}
"#,
                zone("z_shared", "2r/s")
            )
        },
    );
    let (a, b) = (client(2), client(3));
    // Interleaved, so neither client's requests all come first.
    let requests: Vec<Request> = (0..12)
        .map(|i| Request::get(if i % 2 == 0 { a } else { b }, "/shared"))
        .collect();
    let (nginx, sluice) = pair.fire(requests).await;
    let expected = expect(&[(200, &[0, 500, 1000]), (429, &[0; 3])]);
    for who in [a, b] {
        let (n, s) = (group_by_source(&nginx, who), group_by_source(&sluice, who));
        assert_expected(&format!("nginx /shared from {who}"), "nginx", &n, &expected);
        assert_same(&format!("/shared from {who}: nginx vs sluice"), &n, &s);
    }
    pair.assert_upstream_hits("two clients", &nginx, &sluice);
    pair.assert_same_limit_lines("two clients /shared").await;
}

// === The bucket leaks between bursts ===

/// burst=2 nodelay at 2r/s. First 5 requests: three pass (excess 0, 1.000, 2.000 stored), two
/// rejected. 1.25 s later the stored 2.000 has leaked to 0 (2.000 − 2.500 + 1.000 = 0.500 for the
/// next request): two pass (0.500, 1.500), three rejected (2.500 > 2). A bucket that did not leak,
/// or refilled like a token bucket, gives other counts. (Any gap from 1.0 s to 1.5 s gives these.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_leak_between_two_bursts() {
    let pair = Pair::start(
        |port, up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_leak:1m rate=2r/s;
  limit_req_status 429;
  server {{
    listen 127.0.0.1:{port};
    location /leak {{ limit_req zone=z_leak burst=2 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |port, up| {
            format!(
                r#"limit_req_status = 429

{}[[servers]]
listen     = "127.0.0.1:{port}"
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/leak"
limit_req = {{ zone = "z_leak", burst = 2, nodelay = true }}
"#,
                zone("z_leak", "2r/s")
            )
        },
    );
    let two_bursts = |addr: SocketAddr| async move {
        let start = Instant::now();
        let first = burst(addr, client(2), "/leak", 5).await;
        sleep_until(start + Duration::from_millis(1250)).await;
        let second = burst(addr, client(2), "/leak", 5).await;
        (first, second)
    };
    let ((n1, n2), (s1, s2)) = tokio::join!(
        two_bursts(pair.nginx.addr()),
        two_bursts(pair.sluice.addr())
    );
    assert_expected(
        "nginx /leak first burst",
        "nginx",
        &n1,
        &expect(&[(200, &[0; 3]), (429, &[0; 2])]),
    );
    assert_expected(
        "nginx /leak second burst, 1.25 s later",
        "nginx",
        &n2,
        &expect(&[(200, &[0; 2]), (429, &[0; 3])]),
    );
    assert_same("/leak first burst: nginx vs sluice", &n1, &s1);
    assert_same("/leak second burst 1.25 s later: nginx vs sluice", &n2, &s2);
    let all = |a: &[Reply], b: &[Reply]| [a, b].concat();
    pair.assert_upstream_hits("leak", &all(&n1, &n2), &all(&s1, &s2));
}

// === Status codes ===

/// Without `limit_req_status` anywhere, nginx rejects with 503; so must sluice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_default_limit_req_status_is_503() {
    let pair = Pair::start(
        |port, up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_default:1m rate=2r/s;
  server {{
    listen 127.0.0.1:{port};
    location /default {{ limit_req zone=z_default; proxy_pass http://{up}; }}
  }}"
            )
        },
        |port, up| {
            format!(
                r#"{}[[servers]]
listen     = "127.0.0.1:{port}"
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/default"
limit_req = {{ zone = "z_default" }}
"#,
                zone("z_default", "2r/s")
            )
        },
    );
    let (nginx, sluice) = pair
        .fire(vec![Request::get(client(2), "/default"); 3])
        .await;
    assert_expected(
        "nginx /default",
        "nginx",
        &nginx,
        &expect(&[(200, &[0]), (503, &[0, 0])]),
    );
    assert_same(
        "/default (no limit_req_status): nginx vs sluice",
        &nginx,
        &sluice,
    );
    pair.assert_upstream_hits("default status", &nginx, &sluice);
    pair.assert_same_limit_lines("default status /default")
        .await;
}

/// `limit_req_status 444`: nginx closes the connection without any response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_limit_req_status_444_closes_without_response() {
    let pair = Pair::start(
        |port, up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_close:1m rate=2r/s;
  limit_req_status 444;
  server {{
    listen 127.0.0.1:{port};
    location /close {{ limit_req zone=z_close; proxy_pass http://{up}; }}
  }}"
            )
        },
        |port, up| {
            format!(
                r#"limit_req_status = 444

{}[[servers]]
listen     = "127.0.0.1:{port}"
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/close"
limit_req = {{ zone = "z_close" }}
"#,
                zone("z_close", "2r/s")
            )
        },
    );
    let (nginx, sluice) = pair.fire(vec![Request::get(client(2), "/close"); 3]).await;
    assert_expected(
        "nginx /close",
        "nginx",
        &nginx,
        &expect(&[(200, &[0]), (0, &[0, 0])]),
    );
    assert_same("/close (444): nginx vs sluice", &nginx, &sluice);
    pair.assert_upstream_hits("444", &nginx, &sluice);
    pair.assert_same_limit_lines("444 /close").await;
}

// === Inheritance (nginx-limit-req.md §8) ===

/// A server-level `limit_req` applies to locations without their own; a location with its own
/// list does not also get the server's (lists are never merged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_location_limit_req_hides_the_server_list() {
    let pair = Pair::start(
        |port, up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_server:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_own:1m rate=2r/s;
  limit_req_status 429;
  server {{
    listen 127.0.0.1:{port};
    limit_req zone=z_server burst=1 nodelay;
    location /inherit {{ proxy_pass http://{up}; }}
    location /own {{ limit_req zone=z_own burst=3 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |port, up| {
            format!(
                r#"limit_req_status = 429

{}{}[[servers]]
listen     = "127.0.0.1:{port}"
proxy_pass = "http://{up}"
limit_req  = [{{ zone = "z_server", burst = 1, nodelay = true }}]

[[servers.locations]]
path = "/inherit"

[[servers.locations]]
path      = "/own"
limit_req = {{ zone = "z_own", burst = 3, nodelay = true }}
"#,
                zone("z_server", "2r/s"),
                zone("z_own", "2r/s")
            )
        },
    );
    let (inherit, own) = (client(2), client(3));
    let requests: Vec<Request> = (0..12)
        .map(|i| {
            if i % 2 == 0 {
                Request::get(inherit, "/inherit")
            } else {
                Request::get(own, "/own")
            }
        })
        .collect();
    let (nginx, sluice) = pair.fire(requests).await;
    for (who, path, expected) in [
        (
            inherit,
            "/inherit",
            expect(&[(200, &[0; 2]), (429, &[0; 4])]),
        ),
        (own, "/own", expect(&[(200, &[0; 4]), (429, &[0; 2])])),
    ] {
        let (n, s) = (group_by_source(&nginx, who), group_by_source(&sluice, who));
        assert_expected(&format!("nginx {path}"), "nginx", &n, &expected);
        assert_same(&format!("{path}: nginx vs sluice"), &n, &s);
    }
    pair.assert_upstream_hits("inheritance", &nginx, &sluice);
    pair.assert_same_limit_lines("inheritance").await;
}
