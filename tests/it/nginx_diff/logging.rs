//! Logging: `$limit_req_status` in the access log, and `limit_req_log_level` for rejections and
//! delays.

use super::*;
use crate::support::exchange;

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
    let nginx_access = nginx_log(&pair, "logs/lrs.log").await;
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

/// nginx's access log `file` (in its prefix), its lines sorted, once its last lines are written.
async fn nginx_log(pair: &Pair, file: &str) -> Vec<String> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    let path = pair.nginx.prefix().join(file);
    sorted_lines(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("nginx's {file}: {e}")))
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

/// The maps, geos and fields in the access-log line of a request refused before it was read:
/// nginx computes them in its log phase from what the request has, the client's address and the
/// fields read before the refusal. So a geo of the client and a map of `$remote_addr` keep their
/// values; a field (and a map of it) has its value if it came before the fault, else is empty
/// (the map's default). One good request, then refused ones: an invalid request line, a field
/// name with a space before and after `X-Plan`, `Host` twice after it, from 127.0.0.2 to .5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_maps_and_geos_in_the_log_line_of_a_refused_request() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  geo $tier {{ default free; 127.0.0.3 paid; }}
  map $remote_addr $who {{ default other; 127.0.0.2 two; }}
  map $http_x_plan $plan {{ default none; gold gold; }}
  log_format vars '$status $tier $who $plan $http_x_plan';
  server {{
    access_log logs/vars.log vars;
    location / {{ proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"log_format = "$status $tier $who $plan $http_x_plan"
access_log = "stdout"

[geos.tier]
default  = "free"
networks = {{ "127.0.0.3" = "paid" }}

[maps.who]
source  = "$remote_addr"
default = "other"
values  = {{ "127.0.0.2" = "two" }}

[maps.plan]
source  = "$http_x_plan"
default = "none"
values  = {{ "gold" = "gold" }}

[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path = "/"
"#
            )
        },
    );
    let good = b"GET / HTTP/1.1\r\nHost: a\r\nX-Plan: gold\r\nConnection: close\r\n\r\n".as_slice();
    let bad_line = b"GET / HTTP/1.1 junk\r\nHost: a\r\nX-Plan: gold\r\n\r\n".as_slice();
    let bad_field = b"GET / HTTP/1.1\r\nX Plan: gold\r\nHost: a\r\n\r\n".as_slice();
    let bad_after = b"GET / HTTP/1.1\r\nX-Plan: gold\r\nX Y: 1\r\n\r\n".as_slice();
    let two_hosts = b"GET / HTTP/1.1\r\nX-Plan: gold\r\nHost: a\r\nHost: b\r\n\r\n".as_slice();
    let cases = [
        (2, good),
        (2, bad_line),
        (3, bad_line),
        (3, bad_field),
        (4, bad_after),
        (5, two_hosts),
    ];
    for (n, raw) in cases {
        let (a, b) = tokio::join!(
            exchange(pair.nginx.addr(), client(n), raw),
            exchange(pair.sluice.addr(), client(n), raw)
        );
        assert_eq!(a.status, b.status, "{:?}", String::from_utf8_lossy(raw));
    }
    let nginx_access = nginx_log(&pair, "logs/vars.log").await;
    assert_eq!(
        nginx_access,
        [
            "200 free two gold gold",
            "400 free other gold gold",
            "400 free other gold gold",
            "400 free two none -",
            "400 paid other none -",
            "400 paid other none -",
        ],
        "nginx's access log (oracle)"
    );
    assert_eq!(
        sorted_lines(&pair.sluice.stdout()),
        nginx_access,
        "sluice's access log ($status $tier $who $plan $http_x_plan) differs from nginx's"
    );
}
