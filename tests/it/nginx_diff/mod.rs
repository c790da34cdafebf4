//! Differential tests: real nginx and sluice with equivalent configurations, the same bursts at
//! the same time, compared with `assert_same` (statuses equal as multisets, latencies paired per
//! status within ±100 ms) and, where all requests arrive together, `assert_same_limit_lines`
//! (the nginx-format error-log lines: level, event, zone, client, request, excess ±0.100).
//!
//! Each scenario first checks nginx against nginx-limit-req.md's numbers, so a harness fault (for
//! instance requests that do not arrive together) fails as such instead of making both sides
//! agree on something else. Both sides proxy to their own in-process [`Upstream`], which also
//! shows that rejected requests never reach the backend.
//!
//! # Layout
//! - this file: [`Pair`], nginx and sluice side by side, and the comparisons;
//! - [`article`]: the seed article's four locations, and the oracle's own check;
//! - [`buckets`]: several limits in one location, per-client buckets, the leak between bursts;
//! - [`statuses`]: `limit_req_status` (the default 503, 444);
//! - [`inheritance`]: which level's `limit_req` list and status apply;
//! - [`rates`]: per-minute rates;
//! - [`dry_run`]: what `limit_req_dry_run` charges;
//! - [`keys`]: empty keys, and the client named by X-Forwarded-For (realip);
//! - [`delay`]: `delay=` thresholds, and `nodelay` with `delay`;
//! - [`locations`]: each location's own limits, in nginx's matching order;
//! - [`logging`]: `$limit_req_status` in the access log, `limit_req_log_level`;
//! - [`vars`]: `geo`, `map`, `allow` and `deny`;
//! - [`proxy_protocol`]: `listen … proxy_protocol`, `real_ip` from the PROXY header and the
//!   `$proxy_protocol_*` variables, behind a real HAProxy and with headers written by hand.

mod article;
mod buckets;
mod delay;
mod dry_run;
mod inheritance;
mod keys;
mod locations;
mod logging;
mod proxy_protocol;
mod rates;
mod statuses;
mod vars;

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
