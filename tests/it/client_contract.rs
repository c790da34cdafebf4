//! What a client can trust: an exact Retry-After, RateLimit headers that
//! agree with it, a quota-exceeded problem body, fair keys (IPv6 prefixes,
//! exemptions), and a polite client that never hits the limit twice in a row.

use crate::support::{Reply, Sluice, burst, client, request};
use std::time::{Duration, Instant};

fn config(zone_extra: &str, rate: &str, limit: &str, top: &str) -> String {
    format!(
        r#"{top}
limit_req_status = 429
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "{rate}"
{zone_extra}
[[servers]]
[[servers.locations]]
path = "/"
limit_req = {limit}
return = {{ status = 200, body = "ok\n" }}
"#
    )
}

#[tokio::test]
async fn retry_after_is_exact() {
    for (rate, limit, n, want) in [
        ("30r/m", "{ zone = \"z\" }", 2, "2"),
        ("6r/m", "{ zone = \"z\" }", 2, "10"),
        (
            "2r/s",
            "{ zone = \"z\", burst = 5, nodelay = true }",
            7,
            "1",
        ),
        ("1r/m", "{ zone = \"z\" }", 2, "63"),
    ] {
        let s = Sluice::in_process(&config("", rate, limit, ""));
        let replies = burst(s.addr(), client(2), "/", n).await;
        let rejected: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
        assert_eq!(rejected.len(), 1, "{rate} {limit}: {replies:?}");
        assert_eq!(
            rejected[0].header("retry-after"),
            Some(want),
            "{rate} {limit}"
        );
    }
}

#[tokio::test]
async fn draft_headers_agree_with_retry_after() {
    let toml = config(
        "",
        "2r/s",
        "{ zone = \"z\", burst = 5, nodelay = true }",
        "ratelimit_headers = \"draft\"",
    );
    let s = Sluice::in_process(&toml);
    let first = request(s.addr(), client(2), "GET", "/", &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("ratelimit-policy"), Some("\"z\";q=6;w=3"));
    assert_eq!(first.header("ratelimit"), Some("\"z\";r=5;t=1"));
    let replies = burst(s.addr(), client(2), "/", 6).await;
    let mut remaining: Vec<&str> = replies
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.header("ratelimit").unwrap())
        .collect();
    remaining.sort();
    assert_eq!(
        remaining,
        [
            "\"z\";r=0;t=1",
            "\"z\";r=1;t=1",
            "\"z\";r=2;t=1",
            "\"z\";r=3;t=1",
            "\"z\";r=4;t=1"
        ]
    );
    let rejected = replies
        .iter()
        .find(|r| r.status == 429)
        .expect("one rejected");
    let t: u64 = rejected
        .header("ratelimit")
        .and_then(|v| v.strip_prefix("\"z\";r=0;t="))
        .expect("RateLimit on the rejection")
        .parse()
        .unwrap();
    let retry_after: u64 = rejected.header("retry-after").unwrap().parse().unwrap();
    assert!(
        retry_after >= t,
        "Retry-After {retry_after} earlier than t={t}"
    );
    assert_eq!(rejected.header("ratelimit-policy"), Some("\"z\";q=6;w=3"));
}

#[tokio::test]
async fn legacy_headers_and_delayed_responses() {
    let toml = config(
        "",
        "1r/s",
        "{ zone = \"z\", burst = 2 }",
        "ratelimit_headers = \"legacy\"",
    );
    let s = Sluice::in_process(&toml);
    let replies = burst(s.addr(), client(2), "/", 4).await;
    // pass, delayed 1 s, delayed 2 s, rejected: every one carries the trio.
    for r in &replies {
        assert_eq!(r.header("x-ratelimit-limit"), Some("3"), "{r}");
        assert!(r.header("x-ratelimit-remaining").is_some(), "{r}");
        assert!(r.header("x-ratelimit-reset").is_some(), "{r}");
    }
    let delayed: Vec<&Reply> = replies
        .iter()
        .filter(|r| r.status == 200 && r.ms() > 500)
        .collect();
    assert_eq!(delayed.len(), 2, "{replies:?}");
    let rejected = replies.iter().find(|r| r.status == 429).unwrap();
    assert_eq!(rejected.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(
        rejected.header("x-ratelimit-reset"),
        rejected.header("retry-after")
    );
}

#[tokio::test]
async fn the_default_rejection_is_a_quota_exceeded_problem() {
    let toml = config(
        "",
        "2r/s",
        "{ zone = \"z\", burst = 5, nodelay = true }",
        "",
    );
    let s = Sluice::in_process(&toml);
    let replies = burst(s.addr(), client(2), "/", 7).await;
    let r = replies.iter().find(|r| r.status == 429).unwrap();
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let body = r.body_text();
    for want in [
        "\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\"",
        "\"status\":429",
        "\"violated-policies\":[\"z\"]",
        "2 requests per second, burst 5",
        "Retry after 1 second.",
    ] {
        assert!(body.contains(want), "{want} not in {body}");
    }
}

/// IPv6 clients named through a trusted proxy: with `ipv6_prefix = 64`, all
/// addresses of one /64 share a bucket; `exempt` clients are never limited.
#[tokio::test]
async fn ipv6_prefixes_and_exemptions() {
    let toml = config(
        "ipv6_prefix = 64\nexempt = [\"10.0.0.0/8\", \"2001:db8:ffff::/48\"]",
        "1r/m",
        "{ zone = \"z\" }",
        "real_ip = { from = [\"127.0.0.0/8\"] }",
    );
    let s = Sluice::in_process(&toml);
    let from = |ip: &'static str| {
        let addr = s.addr();
        async move {
            request(addr, client(2), "GET", "/", &[("X-Forwarded-For", ip)])
                .await
                .status
        }
    };
    assert_eq!(from("2001:db8:0:1::1").await, 200);
    assert_eq!(from("2001:db8:0:1::2").await, 429, "same /64");
    assert_eq!(from("2001:db8:0:1:ffff::9").await, 429, "same /64");
    assert_eq!(from("2001:db8:0:2::1").await, 200, "another /64");
    for _ in 0..3 {
        assert_eq!(from("10.1.2.3").await, 200, "exempt IPv4");
        assert_eq!(from("2001:db8:ffff:1::1").await, 200, "exempt IPv6");
    }
    assert_eq!(from("192.0.2.1").await, 200);
    assert_eq!(
        from("192.0.2.1").await,
        429,
        "IPv4 keys are whole addresses"
    );
}

/// scripts/polite-client.sh against 1r/s burst=2 nodelay: six successes take
/// about three seconds (three at once, then one a second), and every 429 is
/// followed, after the advertised wait, by a success.
#[tokio::test]
async fn the_polite_client_never_hits_the_limit_twice_in_a_row() {
    let toml = config(
        "",
        "1r/s",
        "{ zone = \"z\", burst = 2, nodelay = true }",
        "",
    );
    let s = Sluice::in_process(&toml);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/polite-client.sh");
    let url = format!("http://{}/", s.addr());
    let start = Instant::now();
    let out = tokio::process::Command::new("bash")
        .arg(script)
        .arg(&url)
        .arg("6")
        .output()
        .await
        .expect("run scripts/polite-client.sh");
    let took = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let statuses: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.starts_with("done"))
        .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == "200").count(),
        6,
        "{stdout}"
    );
    for pair in statuses.windows(2) {
        assert!(
            !(pair[0] == "429" && pair[1] == "429"),
            "two 429s in a row:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("(retry-after)") && !stdout.contains("(backoff)"),
        "{stdout}"
    );
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_millis(5000),
        "six requests at 1r/s burst=2 should take about 3 s, took {took:?}:\n{stdout}"
    );
}
