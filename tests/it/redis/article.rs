//! The seed article's single run of its Redis token bucket (capacity 10 at 1/s: 12 calls in a
//! row, the last three (allowed, remaining, retry_after) = (1,0,0), (0,0,1), (0,0,1); 2.1 s
//! later (1,1,0)), through the proxy: statuses, `RateLimit` r and `Retry-After`, with the zone
//! in Redis and, as the control, in memory.

use super::*;

fn token_bucket_config(backend: &str, redis_url: Option<&str>) -> String {
    let redis = match redis_url {
        Some(url) => format!("[redis]\nurl = \"{url}\"\ntimeout = \"2s\"\non_error = \"deny\"\n"),
        None => String::new(),
    };
    format!(
        r#"
limit_req_status  = 429
ratelimit_headers = "draft"
{redis}
[zones.tb]
key       = "$binary_remote_addr"
size      = "1m"
rate      = "1r/s"
algorithm = "token_bucket"
backend   = "{backend}"

[[servers]]
[[servers.locations]]
path      = "/"
limit_req = {{ zone = "tb", burst = 9 }}
return    = {{ status = 200, body = "ok\n" }}
"#
    )
}

/// (status, RateLimit r, Retry-After) of one request.
async fn call(s: &Sluice) -> (u16, u64, Option<String>) {
    let r = request(s.addr(), client(9), "GET", "/", &[]).await;
    let remaining = r
        .header("ratelimit")
        .and_then(|v| v.strip_prefix("\"tb\";r="))
        .and_then(|v| v.split(';').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a RateLimit header for \"tb\": {r}"));
    (
        r.status,
        remaining,
        r.header("retry-after").map(str::to_string),
    )
}

async fn single_run(s: &Sluice, store: &str) {
    let mut seen = Vec::new();
    for _ in 0..12 {
        seen.push(call(s).await);
    }
    let one = Some("1".to_string());
    assert_eq!(
        seen[9..],
        [(200, 0, None), (429, 0, one.clone()), (429, 0, one)],
        "{store}: the last three of 12 calls in a row: {seen:?}"
    );
    for (i, (status, remaining, _)) in seen[..9].iter().enumerate() {
        assert_eq!(
            (*status, *remaining),
            (200, 9 - i as u64),
            "{store}: call {}",
            i + 1
        );
    }
    // Two tokens came back; this request takes one.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(call(s).await, (200, 1, None), "{store}: 2.1 s later");
}

#[tokio::test]
async fn the_articles_single_run_through_a_redis_zone() {
    let redis = RedisServer::start();
    let s = Sluice::start(&token_bucket_config("redis", Some(&redis.url())));
    single_run(&s, "redis").await;
    // The bucket lives in Redis, under the zone's hash-tagged key.
    let mut c = redis.client();
    let deficit: Option<u64> = redis::cmd("HGET")
        .arg(format!("sluice:tb:{{{}}}", hex(&[127, 0, 0, 9])))
        .arg("deficit")
        .query(&mut c)
        .unwrap();
    assert!(deficit.is_some(), "no token bucket in Redis");
}

#[tokio::test]
async fn the_articles_single_run_through_a_memory_zone() {
    let s = Sluice::start(&token_bucket_config("memory", None));
    single_run(&s, "memory").await;
}
