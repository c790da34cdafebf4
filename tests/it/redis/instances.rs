//! Several instances: two sluices sharing a zone in Redis admit exactly what one would.

use super::*;

fn shared_zone_config(redis_url: &str, backend: &str) -> String {
    format!(
        r#"
limit_req_status = 429

[redis]
url = "{redis_url}"
timeout = "2s"
on_error = "deny"

[zones.shared]
key     = "$http_x_run"
size    = "1m"
rate    = "1r/m"
backend = "{backend}"

[[servers]]
[[servers.locations]]
path      = "/"
limit_req = {{ zone = "shared", burst = 9, nodelay = true }}
return    = {{ status = 200, body = "ok\n" }}
"#
    )
}

/// 50 concurrent clients × 4 requests spread over the instances; the
/// statuses seen.
async fn race(addrs: &[std::net::SocketAddr], run: &str) -> (usize, usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..50usize {
        let addrs = addrs.to_vec();
        let run = run.to_string();
        tasks.spawn(async move {
            let mut seen = Vec::new();
            for j in 0..4 {
                let addr = addrs[(c + j) % addrs.len()];
                let r = request(addr, client(1), "GET", "/", &[("X-Run", &run)]).await;
                seen.push(r.status);
            }
            seen
        });
    }
    let mut ok = 0;
    let mut limited = 0;
    while let Some(r) = tasks.join_next().await {
        for s in r.unwrap() {
            match s {
                200 => ok += 1,
                429 => limited += 1,
                other => panic!("unexpected status {other}"),
            }
        }
    }
    (ok, limited)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_admit_exactly_what_one_would() {
    let redis = RedisServer::start();
    let config = shared_zone_config(&redis.url(), "redis");
    let a = Sluice::in_process(&config);
    let b = Sluice::in_process(&config);
    for run in 1..=3 {
        let (ok, limited) = race(&[a.addr(), b.addr()], &format!("run-{run}")).await;
        assert_eq!(
            (ok, limited),
            (10, 190),
            "run {run}: burst=9 nodelay admits 10 in total"
        );
    }
    // The control: the same zone in memory admits 10 per instance.
    let config = shared_zone_config(&redis.url(), "memory");
    let a = Sluice::in_process(&config);
    let b = Sluice::in_process(&config);
    assert_eq!(race(&[a.addr(), b.addr()], "control").await, (20, 180));
}
