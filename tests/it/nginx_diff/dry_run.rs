//! Dry run (nginx-limit-req.md §3, §9): delays are charged, rejections are not.

use super::*;
use crate::support::EXCESS_TOLERANCE;

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
    // At 1r/m a loaded machine's milliseconds leak a thousandth now and then (2.999 for 3.000):
    // each excess to the nearest whole request, within the tolerance every delay test uses.
    let mut got: Vec<String> = lines
        .iter()
        .map(|l| {
            let whole = (l.excess + 500) / 1000 * 1000;
            assert!(
                l.excess.abs_diff(whole) <= EXCESS_TOLERANCE,
                "nginx's excess {} is not a whole request",
                l.excess
            );
            format!(
                "{} {:?} dry={} {} {}",
                l.level, l.event, l.dry_run, whole, l.request
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
