//! A zone's `algorithm` and a rate with a period: what is accepted, and
//! every mistake as `FILE:LINE:COL`, all at once.

use super::tests::{errors, ok};
use crate::limiter::{Algorithm, Limit};

/// `[zones.NAME]` with `rate` and, unless empty, `algorithm`: 5 lines.
fn zone(name: &str, rate: &str, algorithm: &str) -> String {
    let alg = if algorithm.is_empty() {
        String::new()
    } else {
        format!("algorithm = \"{algorithm}\"")
    };
    format!(
        "[zones.{name}]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\nrate = \"{rate}\"\n{alg}\n"
    )
}

/// One server, then a location per `limit_req` value (3 lines each).
fn server(limits: &[&str]) -> String {
    let mut s = String::from(
        "[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\n",
    );
    for (i, l) in limits.iter().enumerate() {
        s.push_str(&format!(
            "[[servers.locations]]\npath = \"/{i}\"\nlimit_req = {l}\n"
        ));
    }
    s
}

/// Each error starts with its `want`, in order, and there are no others.
fn assert_errors(text: &str, want: &[&str]) {
    let e = errors(text);
    assert_eq!(e.len(), want.len(), "{e:#?}\n--- in ---\n{text}");
    for (got, want) in e.iter().zip(want) {
        assert!(
            got.starts_with(want),
            "{got}\n  does not start with\n{want}"
        );
    }
}

#[test]
fn the_algorithms_example_config_is_valid() {
    let spec = ok(include_str!("../../config/algorithms.toml"));
    let names: Vec<_> = spec.zones.iter().map(|z| z.policy.algorithm).collect();
    assert_eq!(names, Algorithm::ALL);
    let locations = &spec.servers[0].locations;
    assert_eq!(locations.len(), Algorithm::ALL.len());
    for (loc, alg) in locations.iter().zip(Algorithm::ALL) {
        assert_eq!(loc.path, format!("/{}", alg.name()));
        let z = &spec.zones[loc.level.limit_req.as_ref().unwrap()[0].zone];
        assert_eq!((z.name.as_str(), z.policy.algorithm), (alg.name(), alg));
        assert_eq!((z.policy.count, z.policy.period_ms), (10, 10_000));
        // The article's capacity 10 for every algorithm.
        let l = &loc.level.limit_req.as_ref().unwrap()[0];
        assert_eq!(z.policy.quota(l.burst), 10, "{}", alg.name());
    }
}

#[test]
fn an_unknown_algorithm_lists_the_names_and_its_zone_is_not_unknown() {
    let text = format!(
        "{}{}",
        zone("z", "10r/10s", "token"),
        server(&["{ zone = \"z\", burst = 9 }"])
    );
    assert_errors(
        &text,
        &[
            "t.toml:5:13: unknown algorithm \"token\" (expected one of \"leaky_bucket\", \"token_bucket\", \"gcra\", \"fixed_window\", \"sliding_window\", \"sliding_log\")",
            "t.toml:11:22: limit_req_zone \"z\" cannot be used: its table [zones.z] has an error",
        ],
    );
    let text = text.replace("\"token\"", "3");
    assert_errors(
        &text,
        &[
            "t.toml:5:13: \"algorithm\" must be a string, found an integer",
            "t.toml:11:22: limit_req_zone \"z\" cannot be used",
        ],
    );
    // Still unknown when there is no such table at all.
    let text = text.replace("zone = \"z\"", "zone = \"y\"");
    assert_errors(
        &text,
        &[
            "t.toml:5:13: \"algorithm\" must be",
            "t.toml:11:22: unknown limit_req_zone \"y\"",
        ],
    );
}

#[test]
fn windows_take_no_burst_and_only_the_leaky_bucket_delays() {
    let mut text = String::new();
    for alg in Algorithm::ALL {
        text.push_str(&zone(alg.name(), "10r/10s", alg.name()));
    }
    // Zones take 30 lines; the server 3; each location 3, limit_req on its third.
    text.push_str(&server(&[
        "{ zone = \"leaky_bucket\", burst = 9, delay = 4 }",
        "{ zone = \"token_bucket\", burst = 9, delay = 4 }",
        "{ zone = \"gcra\", delay = 4 }",
        "{ zone = \"fixed_window\", burst = 9 }",
        "{ zone = \"sliding_window\", delay = 1 }",
        "{ zone = \"sliding_log\", burst = 1, delay = 1 }",
    ]));
    let burst =
        "which takes no \"burst\": it admits the rate's count per period (raise \"rate\" instead)";
    let delay = "which never delays: \"delay\" is for \"leaky_bucket\" only (remove it: this algorithm admits or rejects at once)";
    let want = [
        format!("t.toml:39:57: zone \"token_bucket\" uses algorithm \"token_bucket\", {delay}"),
        format!("t.toml:42:38: zone \"gcra\" uses algorithm \"gcra\", {delay}"),
        format!("t.toml:45:46: zone \"fixed_window\" uses algorithm \"fixed_window\", {burst}"),
        format!("t.toml:48:48: zone \"sliding_window\" uses algorithm \"sliding_window\", {delay}"),
        format!("t.toml:51:45: zone \"sliding_log\" uses algorithm \"sliding_log\", {burst}"),
        format!("t.toml:51:56: zone \"sliding_log\" uses algorithm \"sliding_log\", {delay}"),
    ];
    assert_eq!(errors(&text), want, "{text}");
}

#[test]
fn nodelay_is_accepted_by_every_algorithm() {
    let mut text = String::new();
    let mut limits = Vec::new();
    for alg in Algorithm::ALL {
        text.push_str(&zone(alg.name(), "10r/10s", alg.name()));
        limits.push(if alg.is_window() {
            format!("{{ zone = \"{}\", nodelay = true }}", alg.name())
        } else {
            format!("{{ zone = \"{}\", burst = 9, nodelay = true }}", alg.name())
        });
    }
    let limits: Vec<&str> = limits.iter().map(String::as_str).collect();
    text.push_str(&server(&limits));
    let spec = ok(&text);
    for (loc, alg) in spec.servers[0].locations.iter().zip(Algorithm::ALL) {
        let l = &loc.level.limit_req.as_ref().unwrap()[0];
        assert_eq!(l.delay, Limit::NODELAY, "{}", alg.name());
        assert_eq!(l.burst, if alg.is_window() { 0 } else { 9000 });
    }
}

#[test]
fn the_leaky_bucket_needs_a_milli_request_per_second() {
    let slow = "is too slow for algorithm \"leaky_bucket\" (nginx's, the default), which counts whole milli-requests per second: its slowest rate is 1r/1000s (4r/h); raise the rate, or choose \"token_bucket\", \"gcra\" or a window, which take any rate";
    let text = format!(
        "{}{}{}{}{}",
        zone("default", "1r/h", ""),
        zone("leaky", "3r/h", "leaky_bucket"),
        zone("gcra", "1r/h", "gcra"),
        zone("edge", "4r/h", ""),
        zone("window", "1r/d", "fixed_window"),
    );
    let text = format!("{text}{}", server(&["{ zone = \"gcra\", burst = 2 }"]));
    assert_eq!(
        errors(&text),
        [
            format!("t.toml:4:8: zone \"default\": rate \"1r/h\" {slow}"),
            format!("t.toml:9:8: zone \"leaky\": rate \"3r/h\" {slow}"),
        ]
    );
    let fine = text
        .replace("\"1r/h\"\n\n", "\"1r/1000s\"\n\n")
        .replace("3r/h", "1r/1000s");
    let spec = ok(&fine);
    let rate = |i: usize| spec.zones[i].policy.rate.milli();
    assert_eq!([rate(0), rate(1), rate(3)], [1, 1, 1]);
    let gcra = &spec.zones[2].policy;
    assert_eq!((gcra.count, gcra.period_ms), (1, 3_600_000));
}

#[test]
fn bad_periods_are_located_and_explained() {
    let text = format!(
        "{}{}{}{}{}",
        zone("zero", "10r/0s", "fixed_window"),
        zone("unit", "1r/x", ""),
        zone("bare", "1r/10", "gcra"),
        zone("long", "1r/2d", "sliding_log"),
        zone("fine", "100r/5m", "sliding_log"),
    );
    assert_errors(
        &text,
        &[
            "t.toml:1:1: no [[servers]]: nothing to listen on",
            "t.toml:4:8: invalid rate \"10r/0s\": the period \"0s\" is zero: it must be at least 1ms",
            "t.toml:9:8: invalid rate \"1r/x\": unknown period unit \"x\" (expected \"ms\", \"s\", \"m\", \"h\" or \"d\", as in \"10r/10s\" or \"100r/5m\")",
            "t.toml:14:8: invalid rate \"1r/10\": the period \"10\" has no unit",
            "t.toml:19:8: rate \"1r/2d\" is out of range (at most 1000000000 requests per period, periods up to 1d)",
        ],
    );
}

/// A zone used at several levels with different mistakes: each is reported
/// where it is, with the zone's own mistakes and the unrelated ones.
#[test]
fn mixed_errors_of_one_zone_are_reported_together() {
    let text = format!(
        "limit_req = {{ zone = \"w\", burst = 2 }}\n{}{}{}",
        zone("w", "10r/10s", "sliding_window"),
        zone("bad", "10r/0s", "gcra"),
        server(&[
            "{ zone = \"w\", delay = 3 }",
            "[{ zone = \"w\", nodelay = true }, { zone = \"w\" }]",
            "{ zone = \"bad\", burst = 9 }",
            "{ zone = \"w\", burst = 0 }",
        ]),
    );
    assert_errors(
        &text,
        &[
            "t.toml:1:35: zone \"w\" uses algorithm \"sliding_window\", which takes no \"burst\"",
            "t.toml:10:8: invalid rate \"10r/0s\": the period \"0s\" is zero",
            "t.toml:17:35: zone \"w\" uses algorithm \"sliding_window\", which never delays",
            "t.toml:20:55: \"limit_req\" directive is duplicate: zone \"w\" is already limited at this level",
            "t.toml:23:22: limit_req_zone \"bad\" cannot be used: its table [zones.bad] has an error",
            "t.toml:26:35: invalid burst value: must be between 1 and 4000000",
        ],
    );
}
