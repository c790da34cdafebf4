//! What a client sees from each of the seed article's algorithms, through the real proxy. At the
//! article's limit (10 requests per 10 s, capacity 10: `rate = "10r/10s"`, `burst = 9` for the
//! buckets) a burst at one instant: how many 200s before the 429s, an exact `Retry-After` (the
//! client is admitted when it says), `RateLimit-Policy`/`RateLimit` or `X-RateLimit-*`, the
//! problem body or an error page, `$limit_req_status` and `$limit_req_algorithm` in the access
//! log, the zone's info metric. Then the article's single-run token-bucket vector, and the
//! shipped config/algorithms.toml, checked and run.
//!
//! Where a window ends depends on the origin of the limiter's clock, which a test does not see:
//! what depends on it is checked against the proxy itself (a client polls until it is admitted),
//! never against a boundary computed here.

use super::*;
use crate::support::{Reply, get};
use std::net::IpAddr;
use std::process::Command;

/// The six algorithms, by their names in the configuration; each test names its zones and
/// locations after them.
const ALGORITHMS: [&str; 6] = [
    "leaky_bucket",
    "token_bucket",
    "gcra",
    "fixed_window",
    "sliding_window",
    "sliding_log",
];

/// `alg`'s `limit_req` at the article's limit: the buckets hold 10 (`burst = 9`); the leaky
/// bucket with `nodelay` (it would delay the 9 otherwise), GCRA with `nodelay` too (accepted,
/// changes nothing), the token bucket without (it never delays); the windows take no burst.
fn article_limit(alg: &str) -> String {
    let extra = match alg {
        "leaky_bucket" | "gcra" => ", burst = 9, nodelay = true",
        "token_bucket" => ", burst = 9",
        _ => "",
    };
    format!("{{ zone = \"{alg}\"{extra} }}")
}

/// `top` (top-level keys, then tables), a zone per algorithm at 10r/10s named after it, `zones`,
/// one server with a location `/ALG` per algorithm (answering `ok`), then `locations`.
fn config(top: &str, zones: &str, locations: &str) -> String {
    let mut s = format!("{top}\n");
    for alg in ALGORITHMS {
        s.push_str(&format!(
            "[zones.{alg}]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\nrate = \"10r/10s\"\nalgorithm = \"{alg}\"\n"
        ));
    }
    s.push_str(zones);
    s.push_str("[[servers]]\n");
    for alg in ALGORITHMS {
        s.push_str(&format!(
            "[[servers.locations]]\npath = \"/{alg}\"\nlimit_req = {}\nreturn = {{ status = 200, body = \"ok\\n\" }}\n",
            article_limit(alg)
        ));
    }
    s.push_str(locations);
    s
}

/// A header that must be there, as a number.
fn number(r: &Reply, name: &str) -> u64 {
    r.header(name)
        .unwrap_or_else(|| panic!("no {name}: {r}\n{r:#?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a whole number: {r:#?}"))
}

/// `r` and `t` of the `RateLimit` field `"ZONE";r=R;t=T`.
fn ratelimit(reply: &Reply, zone: &str) -> (u64, u64) {
    let v = reply
        .header("ratelimit")
        .unwrap_or_else(|| panic!("no RateLimit: {reply:#?}"));
    let rest = v
        .strip_prefix(&format!("\"{zone}\";r="))
        .unwrap_or_else(|| panic!("RateLimit {v:?} is not zone {zone}'s"));
    let (r, t) = rest
        .split_once(";t=")
        .unwrap_or_else(|| panic!("RateLimit {v:?}"));
    (r.parse().unwrap(), t.parse().unwrap())
}

/// Checks what a bucket or window says about its next request, from a burst at one instant:
/// `secs` (a `t` or a `Retry-After`) is 1 for the buckets, whose next token is one second away;
/// 10 for the sliding log, whose oldest entry leaves 10 s after the burst; for a window, until
/// the window ends: at most 10, and within a second of `window_t` (what the burst's 200s said).
fn assert_next_in(alg: &str, secs: u64, window_t: u64, what: &str) {
    match alg {
        "sliding_log" => assert_eq!(secs, 10, "{alg}: {what}"),
        "fixed_window" | "sliding_window" => assert!(
            (1..=10).contains(&secs) && secs.abs_diff(window_t) <= 1,
            "{alg}: {what} {secs}, the burst's t {window_t}"
        ),
        _ => assert_eq!(secs, 1, "{alg}: {what}"),
    }
}

/// The problem `detail`'s limit in words.
fn described(alg: &str) -> String {
    let words = match alg {
        "leaky_bucket" => return "10 requests per 10 seconds, burst 9".into(),
        "token_bucket" => "burst 9, token bucket".to_string(),
        "gcra" => "burst 9, GCRA".to_string(),
        window => window.replace('_', " "),
    };
    format!("10 requests per 10 seconds, {words}")
}

/// After rejections decided between `before` and `after` and told to retry in `told` seconds,
/// the client polls every 50 ms until admitted. The true wait of each lies between the last
/// refusal's sending and the admission's answer, and its `Retry-After` must be its ceiling (to
/// the polling's precision): never early, never a second late.
async fn assert_admitted_when_told(
    addr: SocketAddr,
    source: IpAddr,
    path: &str,
    told: &[u64],
    (before, after): (Instant, Instant),
) {
    let longest = told.iter().copied().max().unwrap_or(1);
    let mut last_refused = after;
    let admitted = loop {
        let sent = Instant::now();
        let r = request(addr, source, "GET", path, &[]).await;
        match r.status {
            200 => break Instant::now(),
            429 => last_refused = sent,
            _ => panic!("{path}: {r}\n{r:#?}"),
        }
        assert!(
            sent - before < Duration::from_secs(longest + 3),
            "{path}: still refused {:?} after Retry-After {told:?}",
            sent - before
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let ms = |d: Duration| d.as_millis() as u64;
    for &secs in told {
        assert!(
            (secs - 1) * 1000 < ms(admitted - before),
            "{path}: Retry-After {secs}, but admitted {:?} after the rejection",
            admitted - before
        );
        assert!(
            secs * 1000 > ms(last_refused.saturating_duration_since(after)),
            "{path}: Retry-After {secs}, but still refused {:?} after the rejection",
            last_refused.saturating_duration_since(after)
        );
    }
}

/// 12 at once from `source` at `/ALG` (draft headers, no error page): 10 pass at once, 2 are
/// problems with an exact `Retry-After`. Then the client polls until admitted.
async fn a_burst_at_the_articles_limit(addr: SocketAddr, alg: &'static str, source: IpAddr) {
    let path = format!("/{alg}");
    let before = Instant::now();
    let replies = burst(addr, source, &path, 12).await;
    let after = Instant::now();
    let (ok, rejected): (Vec<&Reply>, Vec<&Reply>) = replies.iter().partition(|r| r.status == 200);
    assert_eq!((ok.len(), rejected.len()), (10, 2), "{alg}: {replies:#?}");
    for r in &replies {
        assert!(r.ms() < 800, "{alg}: nothing is delayed: {r}");
        assert_eq!(
            r.header("ratelimit-policy"),
            Some(format!("\"{alg}\";q=10;w=10").as_str()),
            "{alg}"
        );
    }
    let mut standing: Vec<(u64, u64)> = ok.iter().map(|r| ratelimit(r, alg)).collect();
    standing.sort();
    let remaining: Vec<u64> = standing.iter().map(|s| s.0).collect();
    assert_eq!(remaining, (0..10).collect::<Vec<_>>(), "{alg}: r");
    let window_t = standing[0].1;
    for &(_, t) in &standing {
        assert_next_in(alg, t, window_t, "t of a 200");
    }
    let mut told = Vec::new();
    for r in &rejected {
        let secs = number(r, "retry-after");
        assert_next_in(alg, secs, window_t, "Retry-After");
        assert_eq!(ratelimit(r, alg), (0, secs), "{alg}: t is Retry-After");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        let body = r.body_text();
        let s = if secs == 1 { "" } else { "s" };
        for want in [
            "\"status\":429".to_string(),
            format!("\"violated-policies\":[\"{alg}\"]"),
            format!(
                "\"detail\":\"{} (zone \\\"{alg}\\\"). Retry after {secs} second{s}.\"",
                described(alg)
            ),
        ] {
            assert!(body.contains(&want), "{alg}: {want} not in {body}");
        }
        told.push(secs);
    }
    assert_admitted_when_told(addr, source, &path, &told, (before, after)).await;
}

/// Every algorithm at the article's limit through one sluice process: the burst's replies,
/// `Retry-After` against the proxy's own admission, the access log (PASSED and REJECTED, never
/// DELAYED but for nginx's leaky bucket without `nodelay`; the algorithm of the deciding zone),
/// and the zone info metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_at_the_articles_limit() {
    let top = r#"access_log = "stdout"
log_format = "$request_uri $status $limit_req_status $limit_req_zone $limit_req_algorithm"
limit_req_status = 429
ratelimit_headers = "draft"
[admin]"#;
    let zones = "[zones.delayed]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\nrate = \"10r/s\"\n";
    let locations = r#"[[servers.locations]]
path = "/delayed"
limit_req = { zone = "delayed", burst = 2 }
return = { status = 200 }
[[servers.locations]]
path = "/free"
return = { status = 200 }
"#;
    let s = Sluice::start(&config(top, zones, locations));
    let mut tasks = Vec::new();
    for (i, alg) in ALGORITHMS.into_iter().enumerate() {
        let addr = s.addr();
        tasks.push(tokio::spawn(a_burst_at_the_articles_limit(
            addr,
            alg,
            client(10 + i as u8),
        )));
    }
    let delayed = burst(s.addr(), client(20), "/delayed", 3).await;
    assert!(delayed.iter().all(|r| r.status == 200), "{delayed:#?}");
    get(s.addr(), "/free").await;
    for t in tasks {
        if let Err(e) = t.await {
            std::panic::resume_unwind(e.into_panic());
        }
    }
    assert_access_log(&s.stdout());
    let metrics = request(s.admin_addr(), client(1), "GET", "/metrics", &[]).await;
    let text = metrics.body_text();
    for alg in ALGORITHMS {
        let info = format!(
            "sluice_limit_req_zone_info{{zone=\"{alg}\",algorithm=\"{alg}\",rate=\"10r/10s\"}} 1"
        );
        assert!(text.contains(&info), "{info} not in\n{text}");
        let none =
            format!("sluice_limit_req_requests_total{{zone=\"{alg}\",status=\"delayed\"}} 0");
        assert!(text.contains(&none), "{none} not in\n{text}");
    }
    let info =
        "sluice_limit_req_zone_info{zone=\"delayed\",algorithm=\"leaky_bucket\",rate=\"10r/s\"} 1";
    assert!(text.contains(info), "{info} not in\n{text}");
}

/// Each algorithm's lines: its burst's 10 PASSED and the polling's last, every 429 REJECTED,
/// zone and algorithm named; the leaky bucket without `nodelay` DELAYED; `-` without a limit.
fn assert_access_log(log: &str) {
    for alg in ALGORITHMS {
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.starts_with(&format!("/{alg} ")))
            .collect();
        let passed = format!("/{alg} 200 PASSED {alg} {alg}");
        let rejected = format!("/{alg} 429 REJECTED {alg} {alg}");
        assert_eq!(
            lines.iter().filter(|l| **l == passed).count(),
            11,
            "{alg}:\n{log}"
        );
        assert!(
            lines.len() >= 13,
            "{alg}: 12 at once and the polling\n{log}"
        );
        for l in &lines {
            assert!(*l == passed || *l == rejected, "{alg}: {l}\n{log}");
        }
    }
    let mut delayed: Vec<&str> = log.lines().filter(|l| l.starts_with("/delayed ")).collect();
    delayed.sort();
    assert_eq!(
        delayed,
        [
            "/delayed 200 DELAYED delayed leaky_bucket",
            "/delayed 200 DELAYED delayed leaky_bucket",
            "/delayed 200 PASSED delayed leaky_bucket",
        ]
    );
    assert!(log.lines().any(|l| l == "/free 200 - - -"), "{log}");
}

/// With `ratelimit_headers = "legacy"` and an error page for 429: the `X-RateLimit-*` trio
/// (limit 10, remaining 9 down to 0, reset as `t`), and the page, with `$retry_after` and
/// `$limit_req_zone`, instead of the problem body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_headers_and_error_pages_for_every_algorithm() {
    let top = r#"limit_req_status = 429
ratelimit_headers = "legacy"
[error_pages.429]
status = 429
headers = { "Retry-After" = "$retry_after" }
body = "$limit_req_zone: retry in $retry_after s\n""#;
    let s = Sluice::in_process(&config(top, "", ""));
    let mut tasks = Vec::new();
    for (i, alg) in ALGORITHMS.into_iter().enumerate() {
        let addr = s.addr();
        tasks.push(tokio::spawn(async move {
            let replies = burst(addr, client(30 + i as u8), &format!("/{alg}"), 11).await;
            legacy_burst(alg, &replies);
        }));
    }
    for t in tasks {
        if let Err(e) = t.await {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

fn legacy_burst(alg: &str, replies: &[Reply]) {
    let (ok, rejected): (Vec<&Reply>, Vec<&Reply>) = replies.iter().partition(|r| r.status == 200);
    assert_eq!((ok.len(), rejected.len()), (10, 1), "{alg}: {replies:#?}");
    for r in replies {
        assert_eq!(r.header("x-ratelimit-limit"), Some("10"), "{alg}: {r}");
        assert_eq!(r.header("ratelimit"), None, "{alg}: legacy only");
    }
    let mut remaining: Vec<u64> = ok
        .iter()
        .map(|r| number(r, "x-ratelimit-remaining"))
        .collect();
    remaining.sort();
    assert_eq!(remaining, (0..10).collect::<Vec<_>>(), "{alg}");
    let window_t = number(ok[0], "x-ratelimit-reset");
    for r in &ok {
        assert_next_in(alg, number(r, "x-ratelimit-reset"), window_t, "reset");
    }
    let r = rejected[0];
    let secs = number(r, "retry-after");
    assert_next_in(alg, secs, window_t, "Retry-After");
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"), "{alg}");
    assert_eq!(number(r, "x-ratelimit-reset"), secs, "{alg}");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(
        r.body_text(),
        format!("{alg}: retry in {secs} s\n"),
        "{alg}"
    );
}

/// The article's single run of its Redis token bucket (capacity 10, 1 token per second),
/// through the proxy with a memory zone: 12 calls in a row end with (allowed, remaining,
/// retry_after) = (1,0,0), (0,0,1), (0,0,1); 2.1 s later (1,1,0). Here as the status, the `r` of
/// `RateLimit` and `Retry-After` (none on a 200).
#[tokio::test]
async fn the_articles_single_run_vector() {
    let toml = r#"
limit_req_status = 429
ratelimit_headers = "draft"
[zones.bucket]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/s"
algorithm = "token_bucket"
[[servers]]
[[servers.locations]]
path = "/"
limit_req = { zone = "bucket", burst = 9 }
return = { status = 200 }
"#;
    let s = Sluice::in_process(toml);
    let call = async || {
        let r = request(s.addr(), client(2), "GET", "/", &[]).await;
        let (remaining, t) = ratelimit(&r, "bucket");
        let retry_after = r
            .header("retry-after")
            .map_or(0, |_| number(&r, "retry-after"));
        if r.status == 429 {
            assert_eq!(t, retry_after, "t is Retry-After on a rejection");
        }
        (u64::from(r.status == 200), remaining, retry_after)
    };
    let mut run = Vec::new();
    for _ in 0..12 {
        run.push(call().await);
    }
    let first: Vec<_> = (0..9).map(|i| (1, 9 - i, 0)).collect();
    assert_eq!(run[..9], first[..], "{run:?}");
    assert_eq!(run[9..], [(1, 0, 0), (0, 0, 1), (0, 0, 1)], "{run:?}");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(call().await, (1, 1, 0));
}

/// config/algorithms.toml as shipped: `sluice check` accepts it and names every algorithm;
/// served (its two ports moved to reserved ones), 12 requests at once at each location show
/// each algorithm's burst: nginx's leaky bucket passes one and makes nine wait a second more
/// each, every other one passes ten at once; all reject two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_algorithms_example_checks_and_runs() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/algorithms.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check", "--config", path])
        .output()
        .expect("run sluice check");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for alg in ALGORITHMS {
        let zone = summary
            .lines()
            .find(|l| l.trim_start().starts_with(alg))
            .unwrap_or_else(|| panic!("no zone {alg} in\n{summary}"));
        let rate = if alg == "leaky_bucket" {
            "10r/10s = 1r/s"
        } else {
            "10r/10s"
        };
        assert!(
            zone.ends_with(&format!("{alg} rate {rate}")),
            "{zone}\n{summary}"
        );
        assert!(summary.contains(&format!("location /{alg} ")), "{summary}");
    }
    let shipped = include_str!("../../../config/algorithms.toml");
    let s = Sluice::builder(shipped)
        .relocate("127.0.0.1:7060")
        .relocate("127.0.0.1:7070")
        .in_process();
    let mut tasks = Vec::new();
    for (i, alg) in ALGORITHMS.into_iter().enumerate() {
        let addr = s.addr();
        tasks.push(tokio::spawn(async move {
            let replies = burst(addr, client(40 + i as u8), &format!("/{alg}"), 12).await;
            example_burst(alg, &replies);
        }));
    }
    for t in tasks {
        if let Err(e) = t.await {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

fn example_burst(alg: &str, replies: &[Reply]) {
    let (ok, rejected): (Vec<&Reply>, Vec<&Reply>) = replies.iter().partition(|r| r.status == 200);
    assert_eq!((ok.len(), rejected.len()), (10, 2), "{alg}: {replies:#?}");
    for r in &ok {
        assert_eq!(
            r.body_text(),
            "ok\n",
            "{alg}: through the built-in upstream"
        );
        assert_eq!(
            r.header("ratelimit-policy"),
            Some(format!("\"{alg}\";q=10;w=10").as_str())
        );
    }
    for r in &rejected {
        assert!(r.ms() < 800, "{alg}: rejected at once: {r}");
        assert!(
            r.body_text().contains(&described(alg)),
            "{alg}: {}",
            r.body_text()
        );
    }
    // Sorted by latency: the leaky bucket's k-th 200 waited about k seconds.
    for (k, r) in ok.iter().enumerate() {
        if alg == "leaky_bucket" {
            let k = k as u64;
            assert!(
                r.ms() + 100 >= k * 1000 && r.ms() < k * 1000 + 2000,
                "{alg}: the {k}th waits its turn: {r}"
            );
        } else {
            assert!(r.ms() < 800, "{alg}: passed at once: {r}");
        }
    }
}
