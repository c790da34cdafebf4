//! Logging: `$limit_req_status` in the access log, and `limit_req_log_level` for rejections and
//! delays.

use super::*;

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
