//! The seed article's experiment against sluice alone, on real sockets: the shipped example
//! configuration (the seed article's: four zones at 2r/s, four locations, the 429 error page, the
//! built-in upstream as a second server), 10 simultaneous requests per location, and the outcome of
//! nginx-limit-req.md §11. Each test starts its own sluice on free ports and uses its own client
//! address, so the tests run in parallel without sharing a bucket.

use crate::support::{
    InProcess, Reply, Sluice, Timing, assert_expected, burst, client, expect, timing,
};

/// sluice with the shipped example, config/sluice.toml (the seed article's configuration), its
/// ports (7060, the built-in upstream on 7070, the admin listener on 9090) moved to reserved ones;
/// and the guard that keeps heavy tests away while its latencies are checked.
fn start_article() -> (InProcess, Timing) {
    let timing = timing();
    let shipped = include_str!("../../config/sluice.toml");
    assert!(shipped.contains("127.0.0.1:7060") && shipped.contains("127.0.0.1:7070"));
    let sluice = Sluice::builder(shipped)
        .relocate("127.0.0.1:7060")
        .relocate("127.0.0.1:7070")
        .relocate("127.0.0.1:9090")
        .in_process();
    (sluice, timing)
}

/// Every 200 came through the built-in upstream (`"ok\n"`); every 429 is the configured error
/// page with a `Retry-After` of a positive whole number of seconds.
fn assert_bodies_and_error_pages(scenario: &str, replies: &[Reply]) {
    for r in replies {
        match r.status {
            200 => assert_eq!(
                r.body_text(),
                "ok\n",
                "{scenario}: a 200 that did not come from the built-in upstream: {r}\n{r:#?}"
            ),
            429 => {
                assert_eq!(
                    r.body_text(),
                    "too many requests\n",
                    "{scenario}: a 429 without the configured error page body: {r}\n{r:#?}"
                );
                let retry_after = r.header("Retry-After").unwrap_or_else(|| {
                    panic!("{scenario}: a 429 without Retry-After: {r}\n{r:#?}")
                });
                let secs: u64 = retry_after.parse().unwrap_or_else(|_| {
                    panic!(
                        "{scenario}: Retry-After {retry_after:?} is not a whole number of \
                         seconds\n{r:#?}"
                    )
                });
                assert!(secs > 0, "{scenario}: Retry-After is 0\n{r:#?}");
            }
            _ => {}
        }
    }
}

/// No burst: the first passes, the other nine are rejected at once (excess 1.000 > 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn article_plain_passes_one_and_rejects_nine() {
    let (sluice, _timing) = start_article();
    let replies = burst(sluice.addr(), client(2), "/plain", 10).await;
    assert_expected(
        "sluice /plain (no burst)",
        "sluice",
        &replies,
        &expect(&[(200, &[0]), (429, &[0; 9])]),
    );
    assert_bodies_and_error_pages("sluice /plain", &replies);
    // Retry-After: whole seconds, rounded up, until a request would pass. The bucket holds excess 0
    // after the one pass: the next request passes 500 ms later, so 1.
    for r in replies.iter().filter(|r| r.status == 429) {
        assert_eq!(
            r.header("Retry-After"),
            Some("1"),
            "sluice /plain: Retry-After must be ceil(0.5 s) = 1\n{r:#?}"
        );
    }
}

/// burst=5: one at once, five queued at 500 ms steps (2r/s), four rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn article_burst_delays_five_in_500ms_steps_and_rejects_four() {
    let (sluice, _timing) = start_article();
    let replies = burst(sluice.addr(), client(3), "/burst", 10).await;
    assert_expected(
        "sluice /burst (burst=5)",
        "sluice",
        &replies,
        &expect(&[(200, &[0, 500, 1000, 1500, 2000, 2500]), (429, &[0; 4])]),
    );
    assert_bodies_and_error_pages("sluice /burst", &replies);
}

/// burst=5 nodelay: six pass at once, four rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn article_nodelay_passes_six_at_once_and_rejects_four() {
    let (sluice, _timing) = start_article();
    let replies = burst(sluice.addr(), client(4), "/nodelay", 10).await;
    assert_expected(
        "sluice /nodelay (burst=5 nodelay)",
        "sluice",
        &replies,
        &expect(&[(200, &[0; 6]), (429, &[0; 4])]),
    );
    assert_bodies_and_error_pages("sluice /nodelay", &replies);
}

/// burst=5 delay=2: excess up to 2.000 is not delayed, so three pass at once, then three at
/// 500 ms steps, four rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn article_delay_passes_three_then_delays_three_and_rejects_four() {
    let (sluice, _timing) = start_article();
    let replies = burst(sluice.addr(), client(5), "/delay", 10).await;
    assert_expected(
        "sluice /delay (burst=5 delay=2)",
        "sluice",
        &replies,
        &expect(&[(200, &[0, 0, 0, 500, 1000, 1500]), (429, &[0; 4])]),
    );
    assert_bodies_and_error_pages("sluice /delay", &replies);
}
