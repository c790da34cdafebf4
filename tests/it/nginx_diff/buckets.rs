//! Buckets: several limits in one location (nginx-limit-req.md §3), one bucket per client, and
//! the leak between two bursts.

use super::*;

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
