//! Differential tests: real nginx and sluice with equivalent configurations, the same bursts at
//! the same time, compared with `assert_same` (statuses equal as multisets, latencies paired per
//! status within ±100 ms) and, where all requests arrive together, `assert_same_limit_lines`
//! (the nginx-format error-log lines: level, event, zone, client, request, excess ±0.100).
//!
//! Each scenario first checks nginx against nginx-limit-req.md's numbers, so a harness fault (for
//! instance requests that do not arrive together) fails as such instead of making both sides
//! agree on something else. Both sides proxy to their own in-process [`Upstream`], which also
//! shows that rejected requests never reach the backend.

use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::process::Command;

use tokio::time::{Duration, Instant, sleep_until};

use crate::support::{
    Event, Nginx, Reply, Request, Sluice, Timing, Upstream, assert_expected, assert_same,
    assert_same_limit_lines, burst, client, expect, fire, group_by_source, limit_lines,
    nginx_binary, timing,
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
    /// Latencies are compared: no heavy test may run meanwhile.
    _timing: Timing,
}

impl Pair {
    /// `nginx_http(upstream)` is the inside of nginx's `http { }`; `sluice_toml(upstream)` the
    /// sluice configuration. Their servers name no `listen`: the harness gives each one a port,
    /// server `i` of one side is server `i` of the other.
    fn start(
        nginx_http: impl FnOnce(SocketAddr) -> String,
        sluice_toml: impl FnOnce(SocketAddr) -> String,
    ) -> Pair {
        let timing = timing();
        let (nginx_upstream, sluice_upstream) = (Upstream::start(), Upstream::start());
        let nginx = Nginx::start(&nginx_http(nginx_upstream.addr));
        let sluice = Sluice::start(&sluice_toml(sluice_upstream.addr));
        Pair {
            nginx,
            sluice,
            nginx_upstream,
            sluice_upstream,
            _timing: timing,
        }
    }

    /// The same requests to server `i` of both at the same time.
    async fn fire_on(&self, i: usize, requests: Vec<Request>) -> (Vec<Reply>, Vec<Reply>) {
        tokio::join!(
            fire(self.nginx.addr_of(i), requests.clone()),
            fire(self.sluice.addr_of(i), requests)
        )
    }

    /// `steps` against both at the same time: each step's requests are fired together
    /// [`fire`] at its offset (ms) from `start`, once the previous step has been answered.
    /// Returns each side's replies per step.
    async fn steps(
        &self,
        start: Instant,
        steps: Vec<(u64, Vec<Request>)>,
    ) -> (Vec<Vec<Reply>>, Vec<Vec<Reply>>) {
        tokio::join!(
            run_steps(self.nginx.addr(), start, steps.clone()),
            run_steps(self.sluice.addr(), start, steps)
        )
    }

    /// The same requests to both at the same time.
    async fn fire(&self, requests: Vec<Request>) -> (Vec<Reply>, Vec<Reply>) {
        self.fire_on(0, requests).await
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

/// Fires each step's requests together at `start + ms`, after the previous step was answered.
async fn run_steps(
    addr: SocketAddr,
    start: Instant,
    steps: Vec<(u64, Vec<Request>)>,
) -> Vec<Vec<Reply>> {
    let mut out = Vec::with_capacity(steps.len());
    for (ms, requests) in steps {
        sleep_until(start + Duration::from_millis(ms)).await;
        out.push(fire(addr, requests).await);
    }
    out
}

/// `GET path` from `source` with extra header lines.
fn get_with(source: IpAddr, path: &str, headers: &[(&str, &str)]) -> Request {
    let mut r = Request::get(source, path);
    r.headers = headers
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    r
}

/// The replies whose request target is one of `paths`.
fn on_paths(replies: &[Reply], paths: &[&str]) -> Vec<Reply> {
    replies
        .iter()
        .filter(|r| paths.contains(&r.path.as_str()))
        .cloned()
        .collect()
}

/// Checks nginx's group against the reference's numbers, then sluice's against nginx's.
fn check_group(scenario: &str, nginx: &[Reply], sluice: &[Reply], expected: &[(u16, u64)]) {
    assert_expected(&format!("nginx {scenario}"), "nginx", nginx, expected);
    assert_same(&format!("{scenario}: nginx vs sluice"), nginx, sluice);
}

/// The non-empty lines of an access log, sorted (a multiset: requests finish in any order).
fn sorted_lines(log: &str) -> Vec<String> {
    let mut v: Vec<String> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    v.sort();
    v
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
fn nginx_seed() -> String {
    format!(
        "{NGINX_ARTICLE_ZONES}
  server {{
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
fn nginx_article(upstream: SocketAddr) -> String {
    format!(
        "{NGINX_ARTICLE_ZONES}
  server {{
    location /plain   {{ limit_req zone=z_plain;                   proxy_pass http://{upstream}; }}
    location /burst   {{ limit_req zone=z_burst burst=5;           proxy_pass http://{upstream}; }}
    location /nodelay {{ limit_req zone=z_nodelay burst=5 nodelay; proxy_pass http://{upstream}; }}
    location /delay   {{ limit_req zone=z_delay burst=5 delay=2;   proxy_pass http://{upstream}; }}
    {NGINX_ERROR_PAGE}
  }}"
    )
}

/// SPEC.md §2's server, proxying to `upstream`.
fn sluice_article(upstream: SocketAddr) -> String {
    let zones: String = ["z_plain", "z_burst", "z_nodelay", "z_delay"]
        .iter()
        .map(|z| zone(z, "2r/s"))
        .collect();
    format!(
        r#"limit_req_status    = 429
limit_req_log_level = "error"

{zones}[[servers]]
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
    let _timing = timing();
    let nginx = Nginx::start(&nginx_seed());
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
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_a:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_b:1m rate=1r/s;
  limit_req_status 429;
  server {{
    location /two {{
      limit_req zone=z_a burst=3 nodelay;
      limit_req zone=z_b burst=3;
      proxy_pass http://{up};
    }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}{}[[servers]]
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
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_shared:1m rate=2r/s;
  limit_req_status 429;
  server {{
    location /shared {{ limit_req zone=z_shared burst=2; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}[[servers]]
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
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_leak:1m rate=2r/s;
  limit_req_status 429;
  server {{
    location /leak {{ limit_req zone=z_leak burst=2 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}[[servers]]
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
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_default:1m rate=2r/s;
  server {{
    location /default {{ limit_req zone=z_default; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"{}[[servers]]
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
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_close:1m rate=2r/s;
  limit_req_status 444;
  server {{
    location /close {{ limit_req zone=z_close; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 444

{}[[servers]]
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
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_server:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_own:1m rate=2r/s;
  limit_req_status 429;
  server {{
    limit_req zone=z_server burst=1 nodelay;
    location /inherit {{ proxy_pass http://{up}; }}
    location /own {{ limit_req zone=z_own burst=3 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}{}[[servers]]
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

// === Per-minute rates (nginx-limit-req.md §1: 30r/m = 500, 1r/m = 16, 7r/m = 116 milli-req/s) ===

/// 30r/m leaks 0.5 requests per second. `/m30` (no burst), single requests at 0, 1.0, 2.3 and
/// 3.3 s: pass, reject (excess 0.500, nothing stored), pass (2.3 s since the last pass leaked
/// everything), reject (0.500). `/m30d` (burst=1), two requests at 0: one passes, one is delayed
/// excess × 1000 / 500 = 2000 ms; two more at 2.5 s: excess 1.000 − 1.250 + 1.000 = 0.750 is
/// delayed 1500 ms, the other is rejected at 1.750. Every decision is ≥ 250 ms from a boundary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_rate_30r_m_rejects_and_delays() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=m30:1m rate=30r/m;
  limit_req_zone $binary_remote_addr zone=m30d:1m rate=30r/m;
  limit_req_status 429;
  server {{
    location /m30  {{ limit_req zone=m30;          proxy_pass http://{up}; }}
    location /m30d {{ limit_req zone=m30d burst=1; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}{}[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/m30"
limit_req = {{ zone = "m30" }}

[[servers.locations]]
path      = "/m30d"
limit_req = {{ zone = "m30d", burst = 1 }}
"#,
                zone("m30", "30r/m"),
                zone("m30d", "30r/m")
            )
        },
    );
    let one = |ms: u64| (ms, vec![Request::get(client(2), "/m30")]);
    let two = |ms: u64| (ms, vec![Request::get(client(3), "/m30d"); 2]);
    let start = Instant::now();
    let ((n30, s30), (n30d, s30d)) = tokio::join!(
        pair.steps(start, vec![one(0), one(1000), one(2300), one(3300)]),
        pair.steps(start, vec![two(0), two(2500)]),
    );
    let pass = expect(&[(200, &[0])]);
    let reject = expect(&[(429, &[0])]);
    for (i, (at, expected)) in [(0, &pass), (1000, &reject), (2300, &pass), (3300, &reject)]
        .into_iter()
        .enumerate()
    {
        check_group(
            &format!("30r/m /m30 at {at} ms"),
            &n30[i],
            &s30[i],
            expected,
        );
    }
    check_group(
        "30r/m burst=1 /m30d, two at 0 ms",
        &n30d[0],
        &s30d[0],
        &expect(&[(200, &[0, 2000])]),
    );
    check_group(
        "30r/m burst=1 /m30d, two at 2500 ms",
        &n30d[1],
        &s30d[1],
        &expect(&[(200, &[1500]), (429, &[0])]),
    );
    pair.assert_same_limit_lines("30r/m").await;
}

/// 1r/m (16 milli-req/s) and 7r/m (116) leak almost nothing in a few seconds: what passes is
/// decided by counts, and the excesses in the log show the leak. `/m1` burst=2 nodelay: two at
/// 0 pass (0, 1.000); one at 1.5 s passes (1.000 − 0.024 + 1.000 = 1.976 ≤ 2); one at 3.0 s is
/// rejected (1.976 − 0.024 + 1 = 2.952). `/m7` burst=3 nodelay: three at 0 pass; one at 1.5 s
/// passes (2.000 − 0.174 + 1 = 2.826); one at 3.0 s is rejected (3.652). A rate read as r/s would
/// pass everything. (The truncation of 7r/m to 116 rather than 116.67 changes these excesses by
/// 0.001–0.002 and a delay by ~50 ms in 8.6 s: not observable within a few seconds at ±0.100 /
/// ±100 ms, so it is not asserted here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_rate_1r_m_and_7r_m_leak_little() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=m1:1m rate=1r/m;
  limit_req_zone $binary_remote_addr zone=m7:1m rate=7r/m;
  limit_req_status 429;
  server {{
    location /m1 {{ limit_req zone=m1 burst=2 nodelay; proxy_pass http://{up}; }}
    location /m7 {{ limit_req zone=m7 burst=3 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}{}[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/m1"
limit_req = {{ zone = "m1", burst = 2, nodelay = true }}

[[servers.locations]]
path      = "/m7"
limit_req = {{ zone = "m7", burst = 3, nodelay = true }}
"#,
                zone("m1", "1r/m"),
                zone("m7", "7r/m")
            )
        },
    );
    let m1 = |ms: u64, n: usize| (ms, vec![Request::get(client(2), "/m1"); n]);
    let m7 = |ms: u64, n: usize| (ms, vec![Request::get(client(3), "/m7"); n]);
    let start = Instant::now();
    let ((n1, s1), (n7, s7)) = tokio::join!(
        pair.steps(start, vec![m1(0, 2), m1(1500, 1), m1(3000, 1)]),
        pair.steps(start, vec![m7(0, 3), m7(1500, 1), m7(3000, 1)]),
    );
    let steps = [("1r/m /m1", &n1, &s1, 2), ("7r/m /m7", &n7, &s7, 3)];
    for (name, n, s, first) in steps {
        let all_pass = vec![(200, 0); first];
        check_group(&format!("{name} at 0 ms"), &n[0], &s[0], &all_pass);
        check_group(
            &format!("{name} at 1500 ms"),
            &n[1],
            &s[1],
            &expect(&[(200, &[0])]),
        );
        check_group(
            &format!("{name} at 3000 ms"),
            &n[2],
            &s[2],
            &expect(&[(429, &[0])]),
        );
    }
    // The oracle's two rejections: 2.952 by m1, 3.652 by m7 (± the leak of ~100 ms of jitter).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let lines = limit_lines(&pair.nginx.error_log()).expect("nginx's error log parses");
    let mut got: Vec<(String, u64)> = lines.iter().map(|l| (l.zone.clone(), l.excess)).collect();
    got.sort();
    assert!(
        got.len() == 2
            && got[0].0 == "m1"
            && got[0].1.abs_diff(2952) <= 20
            && got[1].0 == "m7"
            && got[1].1.abs_diff(3652) <= 50,
        "nginx's rejections are not m1 at 2.952 and m7 at 3.652: {got:?}"
    );
    pair.assert_same_limit_lines("1r/m and 7r/m").await;
}

// === Inheritance, continued: http-level and server-level lists and statuses ===

/// http level: `limit_req zone=z_http burst=1 nodelay` and `limit_req_status 429`. Server 0 has
/// no limits of its own: `/a` gets the http list (2 of 5 pass, 429). Server 1 has its own
/// `limit_req zone=z_srv burst=2 nodelay` and `limit_req_status 503`: `/b` (nothing of its own)
/// gets the server's list and status (3 of 6 pass, 503); `/c` has `z_loc burst=3 nodelay` and
/// `limit_req_status 429` (4 of 6 pass, 429). Lists are never merged, so a merged list would let
/// fewer pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_http_and_server_level_limit_req_are_inherited() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_http:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_srv:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_loc:1m rate=2r/s;
  limit_req_status 429;
  limit_req zone=z_http burst=1 nodelay;
  server {{
    location /a {{ proxy_pass http://{up}; }}
  }}
  server {{
    limit_req zone=z_srv burst=2 nodelay;
    limit_req_status 503;
    location /b {{ proxy_pass http://{up}; }}
    location /c {{
      limit_req zone=z_loc burst=3 nodelay;
      limit_req_status 429;
      proxy_pass http://{up};
    }}
  }}",
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429
limit_req        = {{ zone = "z_http", burst = 1, nodelay = true }}

{}{}{}[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path = "/a"

[[servers]]
proxy_pass       = "http://{up}"
limit_req        = [{{ zone = "z_srv", burst = 2, nodelay = true }}]
limit_req_status = 503

[[servers.locations]]
path = "/b"

[[servers.locations]]
path             = "/c"
limit_req        = {{ zone = "z_loc", burst = 3, nodelay = true }}
limit_req_status = 429
"#,
                zone("z_http", "2r/s"),
                zone("z_srv", "2r/s"),
                zone("z_loc", "2r/s")
            )
        },
    );
    let on_b: Vec<Request> = (0..12)
        .map(|i| {
            if i % 2 == 0 {
                Request::get(client(3), "/b")
            } else {
                Request::get(client(4), "/c")
            }
        })
        .collect();
    let ((na, sa), (nb, sb)) = tokio::join!(
        pair.fire_on(0, vec![Request::get(client(2), "/a"); 5]),
        pair.fire_on(1, on_b),
    );
    check_group(
        "/a (http-level list, http-level status)",
        &na,
        &sa,
        &expect(&[(200, &[0; 2]), (429, &[0; 3])]),
    );
    check_group(
        "/b (server-level list and status)",
        &on_paths(&nb, &["/b"]),
        &on_paths(&sb, &["/b"]),
        &expect(&[(200, &[0; 3]), (503, &[0; 3])]),
    );
    check_group(
        "/c (own list and status)",
        &on_paths(&nb, &["/c"]),
        &on_paths(&sb, &["/c"]),
        &expect(&[(200, &[0; 4]), (429, &[0; 2])]),
    );
    pair.assert_upstream_hits(
        "http/server inheritance",
        &[na, nb].concat(),
        &[sa, sb].concat(),
    );
    pair.assert_same_limit_lines("http/server inheritance")
        .await;
}

// === Dry run (nginx-limit-req.md §3, §9) ===

/// `/dry`: `limit_req_dry_run on` with `z` at 1r/m burst=1 (it leaks nothing meanwhile). Four
/// simultaneous requests all pass at once: PASSED (excess 0), DELAYED_DRY_RUN (1.000, charged),
/// REJECTED_DRY_RUN twice (2.000, not charged). Then `/real`, the same zone with burst=2
/// nodelay, twice: the stored 1.000 + 1 = 2.000 passes, the next is rejected at 3.000. (Had the
/// dry-run rejections been charged, both would be rejected; had the dry-run delay not been
/// charged, both would pass.) Error-log lines and `$limit_req_status` in the access log compared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_dry_run_charges_delays_not_rejections() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z:1m rate=1r/m;
  limit_req_status 429;
  log_format lrs '$status $limit_req_status $uri';
  server {{
    access_log logs/lrs.log lrs;
    location /dry  {{ limit_req_dry_run on; limit_req zone=z burst=1; proxy_pass http://{up}; }}
    location /real {{ limit_req zone=z burst=2 nodelay;               proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429
log_format       = "$status $limit_req_status $uri"
access_log       = "stdout"

{}[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path              = "/dry"
limit_req_dry_run = true
limit_req         = {{ zone = "z", burst = 1 }}

[[servers.locations]]
path      = "/real"
limit_req = {{ zone = "z", burst = 2, nodelay = true }}
"#,
                zone("z", "1r/m")
            )
        },
    );
    let (n_dry, s_dry) = pair.fire(vec![Request::get(client(2), "/dry"); 4]).await;
    check_group(
        "dry run /dry: nothing rejected or delayed",
        &n_dry,
        &s_dry,
        &expect(&[(200, &[0; 4])]),
    );
    let (n_real, s_real) = pair.fire(vec![Request::get(client(2), "/real"); 2]).await;
    check_group(
        "/real after the dry run: 1.000 was charged",
        &n_real,
        &s_real,
        &expect(&[(200, &[0]), (429, &[0])]),
    );
    pair.assert_upstream_hits(
        "dry run",
        &[n_dry, n_real].concat(),
        &[s_dry, s_real].concat(),
    );

    tokio::time::sleep(Duration::from_millis(100)).await;
    let expected_access = [
        "200 DELAYED_DRY_RUN /dry",
        "200 PASSED /dry",
        "200 PASSED /real",
        "200 REJECTED_DRY_RUN /dry",
        "200 REJECTED_DRY_RUN /dry",
        "429 REJECTED /real",
    ];
    let nginx_access = sorted_lines(
        &std::fs::read_to_string(pair.nginx.prefix().join("logs/lrs.log"))
            .expect("nginx's logs/lrs.log"),
    );
    assert_eq!(nginx_access, expected_access, "nginx's access log (oracle)");
    assert_eq!(
        sorted_lines(&pair.sluice.stdout()),
        nginx_access,
        "dry run: sluice's access log ($status $limit_req_status $uri) differs from nginx's"
    );

    // The oracle's lines: [warn] delaying, dry run, 1.000; 2 × [error] limiting, dry run, 2.000;
    // [error] limiting 3.000 (not a dry run) for /real.
    let lines = limit_lines(&pair.nginx.error_log()).expect("nginx's error log parses");
    let mut got: Vec<String> = lines
        .iter()
        .map(|l| {
            format!(
                "{} {:?} dry={} {} {}",
                l.level, l.event, l.dry_run, l.excess, l.request
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "error Limiting dry=false 3000 GET /real HTTP/1.1",
            "error Limiting dry=true 2000 GET /dry HTTP/1.1",
            "error Limiting dry=true 2000 GET /dry HTTP/1.1",
            "warn Delaying dry=true 1000 GET /dry HTTP/1.1",
        ],
        "nginx's limit lines (oracle)"
    );
    pair.assert_same_limit_lines("dry run").await;
}

// === Empty keys are not limited (nginx's allow-list idiom) ===

/// Zone keyed on `$http_x_key` (1r/m burst=1 nodelay). Without the header, or with an empty
/// one, the key is empty and nothing is counted: all pass, nothing logged. With it, the header's
/// value is the bucket whatever the address: `X-Key: b` ×3 passes 2; `X-Key: a` ×2 from one
/// client passes both, then `X-Key: a` ×2 from another client is rejected (the same bucket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_empty_key_is_never_limited() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $http_x_key zone=z_key:1m rate=1r/m;
  limit_req_status 429;
  server {{
    location /k {{ limit_req zone=z_key burst=1 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

[zones.z_key]
key  = "$http_x_key"
size = "1m"
rate = "1r/m"

[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/k"
limit_req = {{ zone = "z_key", burst = 1, nodelay = true }}
"#
            )
        },
    );
    let mut first = Vec::new();
    for _ in 0..4 {
        first.push(Request::get(client(2), "/k?g=none"));
        first.push(get_with(client(3), "/k?g=empty", &[("X-Key", "")]));
    }
    for _ in 0..2 {
        first.push(get_with(client(4), "/k?g=a", &[("X-Key", "a")]));
    }
    for _ in 0..3 {
        first.push(get_with(client(6), "/k?g=b", &[("X-Key", "b")]));
    }
    let (n1, s1) = pair.fire(first).await;
    for (path, expected) in [
        ("/k?g=none", expect(&[(200, &[0; 4])])),
        ("/k?g=empty", expect(&[(200, &[0; 4])])),
        ("/k?g=a", expect(&[(200, &[0; 2])])),
        ("/k?g=b", expect(&[(200, &[0; 2]), (429, &[0])])),
    ] {
        check_group(
            path,
            &on_paths(&n1, &[path]),
            &on_paths(&s1, &[path]),
            &expected,
        );
    }
    let (n2, s2) = pair
        .fire(vec![get_with(client(5), "/k?g=a2", &[("X-Key", "a")]); 2])
        .await;
    check_group(
        "/k?g=a2 (X-Key: a from another address: a's bucket)",
        &n2,
        &s2,
        &expect(&[(429, &[0; 2])]),
    );
    pair.assert_upstream_hits("empty key", &[n1, n2].concat(), &[s1, s2].concat());
    pair.assert_same_limit_lines("empty key").await;
}

// === delay= thresholds, and nodelay/delay order ===

/// 2r/s, seven simultaneous requests per location, each location its own zone and client:
/// - `/d1` burst=4 delay=1: 0, 0, 500, 1000, 1500, two rejected;
/// - `/d3` burst=4 delay=3: 0, 0, 0, 0, 500, two rejected;
/// - `/dbig` burst=2 delay=5 (delay > burst acts as nodelay): three at 0, four rejected;
/// - `/nd_b` `nodelay burst=3` (parameter order does not matter): four at 0, three rejected;
/// - `/d_b` `delay=2 burst=3`: 0, 0, 0, 500, three rejected;
/// - `/nb` `delay=2 nodelay` without burst (both given, the later wins, and neither changes
///   anything without burst): one at 0, six rejected.
///
/// nginx's `limit_req` takes at most three arguments, so `burst` together with both `nodelay`
/// and `delay=` is refused (see `diff_burst_with_both_nodelay_and_delay_is_refused`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_delay_thresholds_and_nodelay_order() {
    /// (path, zone, nginx parameters, sluice table, expected)
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        Vec<(u16, u64)>,
    );
    let cases: [Case; 6] = [
        (
            "/d1",
            "z_d1",
            "burst=4 delay=1",
            "burst = 4, delay = 1",
            expect(&[(200, &[0, 0, 500, 1000, 1500]), (429, &[0; 2])]),
        ),
        (
            "/d3",
            "z_d3",
            "burst=4 delay=3",
            "burst = 4, delay = 3",
            expect(&[(200, &[0, 0, 0, 0, 500]), (429, &[0; 2])]),
        ),
        (
            "/dbig",
            "z_dbig",
            "burst=2 delay=5",
            "burst = 2, delay = 5",
            expect(&[(200, &[0; 3]), (429, &[0; 4])]),
        ),
        (
            "/nd_b",
            "z_nd_b",
            "nodelay burst=3",
            "nodelay = true, burst = 3",
            expect(&[(200, &[0; 4]), (429, &[0; 3])]),
        ),
        (
            "/d_b",
            "z_d_b",
            "delay=2 burst=3",
            "delay = 2, burst = 3",
            expect(&[(200, &[0, 0, 0, 500]), (429, &[0; 3])]),
        ),
        (
            "/nb",
            "z_nb",
            "delay=2 nodelay",
            "delay = 2, nodelay = true",
            expect(&[(200, &[0]), (429, &[0; 6])]),
        ),
    ];
    let nginx_zones: String = cases
        .iter()
        .map(|c| {
            format!(
                "  limit_req_zone $binary_remote_addr zone={}:1m rate=2r/s;\n",
                c.1
            )
        })
        .collect();
    let sluice_zones: String = cases.iter().map(|c| zone(c.1, "2r/s")).collect();
    let pair = Pair::start(
        |up| {
            let locations: String = cases
                .iter()
                .map(|(path, z, params, _, _)| {
                    format!(
                        "    location {path} {{ limit_req zone={z} {params}; proxy_pass http://{up}; }}\n"
                    )
                })
                .collect();
            format!(
                "{nginx_zones}  limit_req_status 429;
  server {{
{locations}  }}"
            )
        },
        |up| {
            let locations: String = cases
                .iter()
                .map(|(path, z, _, table, _)| {
                    format!(
                        "[[servers.locations]]\npath      = \"{path}\"\nlimit_req = {{ zone = \"{z}\", {table} }}\n\n"
                    )
                })
                .collect();
            format!(
                "limit_req_status = 429\n\n{sluice_zones}[[servers]]\nproxy_pass = \"http://{up}\"\n\n{locations}"
            )
        },
    );
    let mut requests = Vec::new();
    for _ in 0..7 {
        for (i, c) in cases.iter().enumerate() {
            let n = u8::try_from(i).expect("few cases") + 2;
            requests.push(Request::get(client(n), c.0));
        }
    }
    let (nginx, sluice) = pair.fire(requests).await;
    for (path, _, params, _, expected) in &cases {
        check_group(
            &format!("{path} ({params})"),
            &on_paths(&nginx, &[path]),
            &on_paths(&sluice, &[path]),
            expected,
        );
    }
    pair.assert_upstream_hits("delay thresholds", &nginx, &sluice);
    pair.assert_same_limit_lines("delay thresholds").await;
}

/// nginx 1.22.1 declares `limit_req` with one to three arguments (`NGX_CONF_TAKE123`), so
/// `limit_req zone=z burst=3 nodelay delay=2` (four) fails `nginx -t` with `invalid number of
/// arguments in "limit_req" directive`, whichever of nodelay/delay comes last. Without burst, both
/// fit (`zone=z nodelay delay=2`): nginx accepts that, and the later wins.
///
/// sluice refuses `{ zone = "z", burst = 3, nodelay = true, delay = 2 }` in the same way
/// (nginx-limit-req.md §1, "Both given: the later wins", holds only without burst).
#[test]
fn diff_burst_with_both_nodelay_and_delay_is_refused() {
    let dir = tempfile::Builder::new()
        .prefix("sluice-it-check-")
        .tempdir()
        .expect("temporary directory");
    let d = dir.path();
    fs::create_dir_all(d.join("conf")).expect("conf directory");
    fs::create_dir_all(d.join("logs")).expect("logs directory");
    // (nginx parameters, sluice table, nginx accepts)
    let cases = [
        (
            "burst=3 nodelay delay=2",
            "burst = 3, nodelay = true, delay = 2",
            false,
        ),
        (
            "burst=3 delay=2 nodelay",
            "burst = 3, delay = 2, nodelay = true",
            false,
        ),
        ("nodelay delay=2", "nodelay = true, delay = 2", true),
        ("burst=3 delay=2", "burst = 3, delay = 2", true),
    ];
    let mut problems = Vec::new();
    for (nginx_params, sluice_table, accepted) in cases {
        let conf = d.join("conf/nginx.conf");
        fs::write(
            &conf,
            format!(
                "events {{}}\nhttp {{\n  limit_req_zone $binary_remote_addr zone=z:1m rate=2r/s;\n  \
                 server {{ listen 127.0.0.1:1; location / {{ limit_req zone=z {nginx_params}; }} }}\n}}\n"
            ),
        )
        .expect("write nginx.conf");
        let nginx = Command::new(nginx_binary())
            .arg("-t")
            .arg("-p")
            .arg(format!("{}/", d.display()))
            .arg("-e")
            .arg(d.join("logs/error.log"))
            .arg("-c")
            .arg(&conf)
            .output()
            .expect("run nginx -t");
        let nginx_text = String::from_utf8_lossy(&nginx.stderr).into_owned();
        assert_eq!(
            nginx.status.success(),
            accepted,
            "nginx -t on `limit_req zone=z {nginx_params}` (oracle): {nginx_text}"
        );
        if !accepted {
            assert!(
                nginx_text.contains("invalid number of arguments in \"limit_req\" directive"),
                "nginx -t on `limit_req zone=z {nginx_params}` (oracle): {nginx_text}"
            );
        }
        let toml = d.join("sluice.toml");
        fs::write(
            &toml,
            format!(
                "{}[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\n\n\
                 [[servers.locations]]\npath = \"/\"\nlimit_req = {{ zone = \"z\", {sluice_table} }}\n",
                zone("z", "2r/s")
            ),
        )
        .expect("write sluice.toml");
        let sluice = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("check")
            .arg("--config")
            .arg(&toml)
            .output()
            .expect("run sluice check");
        if sluice.status.success() != accepted {
            problems.push(format!(
                "nginx {} `limit_req zone=z {nginx_params}`, sluice check {} \
                 `limit_req = {{ zone = \"z\", {sluice_table} }}` ({}):\n{}{}",
                if accepted { "accepts" } else { "refuses" },
                if sluice.status.success() {
                    "accepts"
                } else {
                    "refuses"
                },
                sluice.status,
                String::from_utf8_lossy(&sluice.stdout),
                String::from_utf8_lossy(&sluice.stderr),
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "sluice and nginx disagree on which limit_req lines are valid:\n{}",
        problems.join("\n")
    );
}

// === Location matching: each location's own limits ===

/// nginx's lookup order with a limit per location, told apart by how many of seven
/// simultaneous nodelay requests pass (2r/s, each location its own zone, each path its own
/// client): `= /x` burst=1 (2 pass); `/x/y` is not `= /x` but `/` burst=5 (6); `^~ /static/`
/// burst=2 stops the regexes for `/static/a.php` (3); `~ \.php$` burst=3 beats the prefix
/// `/app/` for `/app/a.php` (4); `/app/` burst=4 for `/app/a.txt` (5); `~* \.JPG$` (no burst)
/// matches `/app/A.jpg` case-insensitively (1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_exact_prefix_and_regex_locations_pick_their_own_limits() {
    // (nginx location, zone, burst, request path, passes)
    let locations: [(&str, &str, u32, &str, usize); 6] = [
        ("= /x", "z_exact", 1, "/x", 2),
        ("/", "z_root", 5, "/x/y", 6),
        ("^~ /static/", "z_static", 2, "/static/a.php", 3),
        ("~ \\.php$", "z_php", 3, "/app/a.php", 4),
        ("/app/", "z_app", 4, "/app/a.txt", 5),
        ("~* \\.JPG$", "z_jpg", 0, "/app/A.jpg", 1),
    ];
    let burst = |b: u32, nginx: bool| match (b, nginx) {
        (0, _) => String::new(),
        (b, true) => format!(" burst={b} nodelay"),
        (b, false) => format!(", burst = {b}, nodelay = true"),
    };
    let pair = Pair::start(
        |up| {
            let zones: String = locations
                .iter()
                .map(|l| {
                    format!(
                        "  limit_req_zone $binary_remote_addr zone={}:1m rate=2r/s;\n",
                        l.1
                    )
                })
                .collect();
            let locs: String = locations
                .iter()
                .map(|(loc, z, b, _, _)| {
                    format!(
                        "    location {loc} {{ limit_req zone={z}{}; proxy_pass http://{up}; }}\n",
                        burst(*b, true)
                    )
                })
                .collect();
            format!(
                "{zones}  limit_req_status 429;
  server {{
{locs}  }}"
            )
        },
        |up| {
            let zones: String = locations.iter().map(|l| zone(l.1, "2r/s")).collect();
            let locs: String = locations
                .iter()
                .map(|(loc, z, b, _, _)| {
                    format!(
                        "[[servers.locations]]\npath      = '{loc}'\nlimit_req = {{ zone = \"{z}\"{} }}\n\n",
                        burst(*b, false)
                    )
                })
                .collect();
            format!(
                "limit_req_status = 429\n\n{zones}[[servers]]\nproxy_pass = \"http://{up}\"\n\n{locs}"
            )
        },
    );
    let mut requests = Vec::new();
    for _ in 0..7 {
        for (i, l) in locations.iter().enumerate() {
            let n = u8::try_from(i).expect("few locations") + 2;
            requests.push(Request::get(client(n), l.3));
        }
    }
    let (nginx, sluice) = pair.fire(requests).await;
    for (loc, _, _, path, passes) in &locations {
        let expected: Vec<(u16, u64)> = (0..7)
            .map(|i| (if i < *passes { 200 } else { 429 }, 0))
            .collect();
        check_group(
            &format!("{path} (location {loc})"),
            &on_paths(&nginx, &[path]),
            &on_paths(&sluice, &[path]),
            &expected,
        );
    }
    pair.assert_upstream_hits("location matching", &nginx, &sluice);
    pair.assert_same_limit_lines("location matching").await;
}

// === realip: the client named by X-Forwarded-For is the key ===

/// Three servers, each with its own 1r/m zone (burst=1 nodelay, so only counts matter), all
/// requests from 127.0.0.2:
/// - server 0, `set_real_ip_from 127.0.0.0/8; real_ip_header X-Forwarded-For;
///   real_ip_recursive on`: `1.1.1.1` ×3 and `2.2.2.2` ×3 have their own buckets (2 pass, 1
///   rejected each); `3.3.3.3` ×2 pass, then `3.3.3.3, 127.0.0.9` ×2 are rejected (recursive:
///   the trusted 127.0.0.9 is skipped, the key is 3.3.3.3's);
/// - server 1, no realip: `1.1.1.1` ×2 pass, then `2.2.2.2` ×2 are rejected (one bucket, the peer);
/// - server 2, realip not recursive: `5.5.5.5` ×2 and `3.3.3.3, 127.0.0.9` ×2 pass, then
///   `4.4.4.4, 127.0.0.9` ×2 are rejected (the key is the last address, 127.0.0.9).
///
/// The error-log `client:` field is the real address on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_realip_x_forwarded_for_selects_the_bucket() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_rr:1m rate=1r/m;
  limit_req_zone $binary_remote_addr zone=z_none:1m rate=1r/m;
  limit_req_zone $binary_remote_addr zone=z_nr:1m rate=1r/m;
  limit_req_status 429;
  server {{
    set_real_ip_from 127.0.0.0/8;
    real_ip_header X-Forwarded-For;
    real_ip_recursive on;
    location /rr {{ limit_req zone=z_rr burst=1 nodelay; proxy_pass http://{up}; }}
  }}
  server {{
    location /none {{ limit_req zone=z_none burst=1 nodelay; proxy_pass http://{up}; }}
  }}
  server {{
    set_real_ip_from 127.0.0.0/8;
    real_ip_header X-Forwarded-For;
    location /nr {{ limit_req zone=z_nr burst=1 nodelay; proxy_pass http://{up}; }}
  }}",
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}{}{}[[servers]]
proxy_pass = "http://{up}"
real_ip    = {{ from = ["127.0.0.0/8"], header = "X-Forwarded-For", recursive = true }}

[[servers.locations]]
path      = "/rr"
limit_req = {{ zone = "z_rr", burst = 1, nodelay = true }}

[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/none"
limit_req = {{ zone = "z_none", burst = 1, nodelay = true }}

[[servers]]
proxy_pass = "http://{up}"
real_ip    = {{ from = ["127.0.0.0/8"], header = "X-Forwarded-For", recursive = false }}

[[servers.locations]]
path      = "/nr"
limit_req = {{ zone = "z_nr", burst = 1, nodelay = true }}
"#,
                zone("z_rr", "1r/m"),
                zone("z_none", "1r/m"),
                zone("z_nr", "1r/m")
            )
        },
    );
    let xff = |path: &str, value: &str, n: usize| {
        vec![get_with(client(2), path, &[("X-Forwarded-For", value)]); n]
    };
    let ((nr0, sr0), (nn0, sn0), (nx0, sx0)) = tokio::join!(
        pair.fire_on(
            0,
            [
                xff("/rr?f=1", "1.1.1.1", 3),
                xff("/rr?f=2", "2.2.2.2", 3),
                xff("/rr?f=3", "3.3.3.3", 2),
            ]
            .concat()
        ),
        pair.fire_on(1, xff("/none?f=1", "1.1.1.1", 2)),
        pair.fire_on(
            2,
            [
                xff("/nr?f=5", "5.5.5.5", 2),
                xff("/nr?f=3", "3.3.3.3, 127.0.0.9", 2),
            ]
            .concat()
        ),
    );
    let ((nr1, sr1), (nn1, sn1), (nx1, sx1)) = tokio::join!(
        pair.fire_on(0, xff("/rr?f=3b", "3.3.3.3, 127.0.0.9", 2)),
        pair.fire_on(1, xff("/none?f=2", "2.2.2.2", 2)),
        pair.fire_on(2, xff("/nr?f=4", "4.4.4.4, 127.0.0.9", 2)),
    );
    let two_one = expect(&[(200, &[0; 2]), (429, &[0])]);
    let two = expect(&[(200, &[0; 2])]);
    let rejected = expect(&[(429, &[0; 2])]);
    for (name, n, s, path, expected) in [
        ("recursive, XFF 1.1.1.1", &nr0, &sr0, "/rr?f=1", &two_one),
        ("recursive, XFF 2.2.2.2", &nr0, &sr0, "/rr?f=2", &two_one),
        ("recursive, XFF 3.3.3.3", &nr0, &sr0, "/rr?f=3", &two),
        (
            "recursive, then XFF 3.3.3.3, 127.0.0.9",
            &nr1,
            &sr1,
            "/rr?f=3b",
            &rejected,
        ),
        ("no realip, XFF 1.1.1.1", &nn0, &sn0, "/none?f=1", &two),
        (
            "no realip, then XFF 2.2.2.2",
            &nn1,
            &sn1,
            "/none?f=2",
            &rejected,
        ),
        ("not recursive, XFF 5.5.5.5", &nx0, &sx0, "/nr?f=5", &two),
        (
            "not recursive, XFF 3.3.3.3, 127.0.0.9",
            &nx0,
            &sx0,
            "/nr?f=3",
            &two,
        ),
        (
            "not recursive, then XFF 4.4.4.4, 127.0.0.9",
            &nx1,
            &sx1,
            "/nr?f=4",
            &rejected,
        ),
    ] {
        check_group(
            &format!("realip {name} ({path})"),
            &on_paths(n, &[path]),
            &on_paths(s, &[path]),
            expected,
        );
    }
    // The oracle's rejections name the real client.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let lines = limit_lines(&pair.nginx.error_log()).expect("nginx's error log parses");
    let mut clients: Vec<(String, String)> = lines
        .iter()
        .map(|l| (l.zone.clone(), l.client.clone()))
        .collect();
    clients.sort();
    let want: Vec<(String, String)> = [
        ("z_none", "127.0.0.2"),
        ("z_none", "127.0.0.2"),
        ("z_nr", "127.0.0.9"),
        ("z_nr", "127.0.0.9"),
        ("z_rr", "1.1.1.1"),
        ("z_rr", "2.2.2.2"),
        ("z_rr", "3.3.3.3"),
        ("z_rr", "3.3.3.3"),
    ]
    .iter()
    .map(|(z, c)| ((*z).to_owned(), (*c).to_owned()))
    .collect();
    assert_eq!(clients, want, "nginx's rejections (zone, client) (oracle)");
    pair.assert_same_limit_lines("realip").await;
}

// === $limit_req_status in the access log ===

/// `log_format '$status $limit_req_status $uri'`. `/lrs` at 2r/s burst=3 delay=1, six at once:
/// PASSED ×2 (0, 1.000 ≤ delay), DELAYED ×2 (500, 1000 ms), REJECTED ×2. `/free` has no
/// limit and `/nokey` a limit whose key (`$http_x_key`) is empty: both `-`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_limit_req_status_in_the_access_log() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_lrs:1m rate=2r/s;
  limit_req_zone $http_x_key zone=z_nokey:1m rate=2r/s;
  limit_req_status 429;
  log_format lrs '$status $limit_req_status $uri';
  server {{
    access_log logs/lrs.log lrs;
    location /lrs   {{ limit_req zone=z_lrs burst=3 delay=1; proxy_pass http://{up}; }}
    location /free  {{ proxy_pass http://{up}; }}
    location /nokey {{ limit_req zone=z_nokey; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429
log_format       = "$status $limit_req_status $uri"
access_log       = "stdout"

{}[zones.z_nokey]
key  = "$http_x_key"
size = "1m"
rate = "2r/s"

[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/lrs"
limit_req = {{ zone = "z_lrs", burst = 3, delay = 1 }}

[[servers.locations]]
path = "/free"

[[servers.locations]]
path      = "/nokey"
limit_req = {{ zone = "z_nokey" }}
"#,
                zone("z_lrs", "2r/s")
            )
        },
    );
    let mut requests = vec![Request::get(client(2), "/lrs"); 6];
    requests.push(Request::get(client(3), "/free"));
    requests.push(Request::get(client(4), "/nokey"));
    let (nginx, sluice) = pair.fire(requests).await;
    check_group(
        "/lrs burst=3 delay=1",
        &on_paths(&nginx, &["/lrs"]),
        &on_paths(&sluice, &["/lrs"]),
        &expect(&[(200, &[0, 0, 500, 1000]), (429, &[0; 2])]),
    );
    check_group(
        "/free and /nokey",
        &on_paths(&nginx, &["/free", "/nokey"]),
        &on_paths(&sluice, &["/free", "/nokey"]),
        &expect(&[(200, &[0; 2])]),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let nginx_access = sorted_lines(
        &std::fs::read_to_string(pair.nginx.prefix().join("logs/lrs.log"))
            .expect("nginx's logs/lrs.log"),
    );
    assert_eq!(
        nginx_access,
        [
            "200 - /free",
            "200 - /nokey",
            "200 DELAYED /lrs",
            "200 DELAYED /lrs",
            "200 PASSED /lrs",
            "200 PASSED /lrs",
            "429 REJECTED /lrs",
            "429 REJECTED /lrs",
        ],
        "nginx's access log (oracle)"
    );
    assert_eq!(
        sorted_lines(&pair.sluice.stdout()),
        nginx_access,
        "sluice's access log ($status $limit_req_status $uri) differs from nginx's"
    );
    pair.assert_same_limit_lines("$limit_req_status").await;
}

// === limit_req_log_level ===

/// Server level `limit_req_log_level warn`; locations `/warn` (inherits), `/info`, `/notice`,
/// `/error` (their own). 2r/s burst=1, three at once: pass, delay 500 ms, reject. Rejections log
/// at the level, delays one lower: warn → [warn]/[notice], info → [info]/[info], notice →
/// [notice]/[info], error → [error]/[warn].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_limit_req_log_level_sets_rejection_and_delay_levels() {
    // (path, own level or None to inherit warn, rejection level, delay level)
    let cases: [(&str, Option<&str>, &str, &str); 4] = [
        ("/warn", None, "warn", "notice"),
        ("/info", Some("info"), "info", "info"),
        ("/notice", Some("notice"), "notice", "info"),
        ("/error", Some("error"), "error", "warn"),
    ];
    let zone_of = |path: &str| format!("z_{}", &path[1..]);
    let pair = Pair::start(
        |up| {
            let zones: String = cases
                .iter()
                .map(|c| {
                    format!(
                        "  limit_req_zone $binary_remote_addr zone={}:1m rate=2r/s;\n",
                        zone_of(c.0)
                    )
                })
                .collect();
            let locs: String = cases
                .iter()
                .map(|(path, level, _, _)| {
                    let own = level
                        .map(|l| format!("limit_req_log_level {l}; "))
                        .unwrap_or_default();
                    format!(
                        "    location {path} {{ {own}limit_req zone={} burst=1; proxy_pass http://{up}; }}\n",
                        zone_of(path)
                    )
                })
                .collect();
            format!(
                "{zones}  limit_req_status 429;
  server {{
    limit_req_log_level warn;
{locs}  }}"
            )
        },
        |up| {
            let zones: String = cases.iter().map(|c| zone(&zone_of(c.0), "2r/s")).collect();
            let locs: String = cases
                .iter()
                .map(|(path, level, _, _)| {
                    let own = level
                        .map(|l| format!("limit_req_log_level = \"{l}\"\n"))
                        .unwrap_or_default();
                    format!(
                        "[[servers.locations]]\npath      = \"{path}\"\n{own}limit_req = {{ zone = \"{}\", burst = 1 }}\n\n",
                        zone_of(path)
                    )
                })
                .collect();
            format!(
                "limit_req_status = 429\n\n{zones}[[servers]]\nproxy_pass          = \"http://{up}\"\nlimit_req_log_level = \"warn\"\n\n{locs}"
            )
        },
    );
    let mut requests = Vec::new();
    for _ in 0..3 {
        for (i, c) in cases.iter().enumerate() {
            let n = u8::try_from(i).expect("few cases") + 2;
            requests.push(Request::get(client(n), c.0));
        }
    }
    let (nginx, sluice) = pair.fire(requests).await;
    for (path, _, _, _) in &cases {
        check_group(
            &format!("log level {path}"),
            &on_paths(&nginx, &[path]),
            &on_paths(&sluice, &[path]),
            &expect(&[(200, &[0, 500]), (429, &[0])]),
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let lines = limit_lines(&pair.nginx.error_log()).expect("nginx's error log parses");
    for (path, _, reject_level, delay_level) in &cases {
        let request = format!("GET {path} HTTP/1.1");
        let mut got: Vec<(Event, &str)> = lines
            .iter()
            .filter(|l| l.request == request)
            .map(|l| (l.event, l.level.as_str()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                (Event::Limiting, *reject_level),
                (Event::Delaying, *delay_level)
            ],
            "nginx's levels for {path} (oracle)"
        );
    }
    pair.assert_same_limit_lines("limit_req_log_level").await;
}
