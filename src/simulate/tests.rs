//! The article's table, reproduced through the real limiter; trace parsing.

use super::*;
use proptest::prelude::*;

/// The article's limit: 10 per 10 s, capacity 10.
const ARTICLE: Setup = Setup {
    count: 10,
    period_ms: 10_000,
    burst: 9,
};

fn report(s: Scenario) -> Report {
    run(&s.trace(), &ARTICLE, &Row::ALL).unwrap()
}

fn outcome(r: &Report, row: Row) -> &Outcome {
    r.outcomes.iter().find(|o| o.row == row).unwrap()
}

/// (allowed, most in any 10 s) per row, as the article's table has them.
fn allowed_and_most(r: &Report) -> Vec<(&'static str, usize, u64)> {
    r.outcomes
        .iter()
        .map(|o| (o.row.name(), o.allowed, o.max_in_window))
        .collect()
}

#[test]
fn the_articles_scenario_a() {
    let r = report(Scenario::A);
    assert_eq!(r.requests, 20);
    assert_eq!(
        allowed_and_most(&r)[..6],
        [
            ("fixed_window", 20, 20),
            ("sliding_log", 10, 10),
            ("sliding_window", 11, 11),
            ("token_bucket", 10, 10),
            ("leaky_queue", 11, 11),
            ("gcra", 10, 10),
        ]
    );
    // nginx's bucket takes burst + 1 at once; the article's queue one
    // more (the one being processed is not in its queue).
    let nginx = outcome(&r, Row::LeakyBucket);
    assert_eq!((nginx.allowed, nginx.max_in_window), (10, 10));
    assert_eq!(r.bucket_vs_queue, Some(vec![10]));
}

#[test]
fn the_articles_scenario_b() {
    let r = report(Scenario::B);
    assert_eq!(r.requests, 46);
    assert_eq!(
        allowed_and_most(&r)[..6],
        [
            ("fixed_window", 20, 19),
            ("sliding_log", 20, 10),
            ("sliding_window", 20, 10),
            ("token_bucket", 29, 19),
            ("leaky_queue", 30, 20),
            ("gcra", 29, 19),
        ]
    );
    let q = outcome(&r, Row::LeakyQueue).queue.as_ref().unwrap();
    assert_eq!(q.max_processed_in_window, 10);
    assert_eq!(q.max_wait_ms, 10_000);
    // "processed the 30 at 1 s intervals from 0 s to 29 s"
    let done: Vec<u64> = q.done_units.iter().flatten().map(|u| u / 10).collect();
    assert_eq!(done, (0..30).map(|s| s * 1000).collect::<Vec<_>>());
}

#[test]
fn nginxs_bucket_delays_by_its_excess() {
    let r = report(Scenario::B);
    let nginx = outcome(&r, Row::LeakyBucket);
    let q = nginx.queue.as_ref().unwrap();
    // At 0.5 s intervals, twice the rate: each request finds half a
    // request more, and waits 500 ms more, than the one before.
    let first: Vec<Option<u64>> = q.waits_ms[..4].to_vec();
    assert_eq!(first, [Some(0), Some(500), Some(1000), Some(1500)]);
    assert!(q.max_wait_ms <= 9_000, "burst 9 at 1r/s: {}", q.max_wait_ms);
    assert!(q.max_processed_in_window <= 11);
    let differ = r.bucket_vs_queue.clone().unwrap();
    for &i in &differ {
        assert_ne!(
            nginx.decisions[i],
            outcome(&r, Row::LeakyQueue).decisions[i]
        );
    }
    assert!(!differ.is_empty());
}

#[test]
fn token_bucket_and_gcra_decide_alike_on_the_scenarios() {
    for s in [Scenario::A, Scenario::B] {
        let r = report(s);
        assert_eq!(
            outcome(&r, Row::TokenBucket).decisions,
            outcome(&r, Row::Gcra).decisions
        );
    }
}

proptest! {
    #![proptest_config(crate::limiter::proptest_config(200))]

    #[test]
    fn token_bucket_and_gcra_decide_alike(times in prop::collection::vec(0u64..60_000, 1..80),
                                          count in 1u64..20, period in 1u64..30_000, burst in 0u64..12) {
        let trace = Trace {
            lines: (1..=times.len()).collect(),
            arrivals: times.iter().map(|&at_ms| Arrival { at_ms, key: 0 }).collect(),
            keys: vec![String::new()],
        };
        let setup = Setup { count, period_ms: period, burst };
        let r = run(&trace, &setup, &[Row::TokenBucket, Row::Gcra]).unwrap();
        prop_assert_eq!(&r.outcomes[0].decisions, &r.outcomes[1].decisions);
    }
}

#[test]
fn keys_are_limited_apart() {
    // Two clients, each bursting 12 at once: each gets its own 10.
    let text: String = (0..24)
        .map(|i| format!("1.5 {}\n", if i % 2 == 0 { "alice" } else { "bob" }))
        .collect();
    let trace = parse_trace(&text).unwrap();
    assert_eq!(trace.keys, ["alice", "bob"]);
    let r = run(&trace, &ARTICLE, &[Row::TokenBucket, Row::SlidingLog]).unwrap();
    for o in &r.outcomes {
        assert_eq!(o.allowed, 20, "{:?}", o.row);
        assert_eq!(o.max_in_window, 10);
        assert_eq!(o.max_in_window_all_keys, 20);
    }
}

#[test]
fn decisions_come_back_in_input_order() {
    // Out of order in the file: the 11th request in time is the first line.
    let mut text = String::from("9.95\n");
    text.push_str(&"9.9\n".repeat(10));
    let trace = parse_trace(&text).unwrap();
    let r = run(&trace, &ARTICLE, &[Row::SlidingLog]).unwrap();
    let d = &r.outcomes[0].decisions;
    assert!(!d[0]);
    assert!(d[1..].iter().all(|&x| x));
}

#[test]
fn windows_fall_on_the_traces_own_clock() {
    // 10 just before a multiple of 10 s (an epoch time), 10 just after:
    // the fixed window lets all 20 through, as at 9.9 s and 10.1 s.
    let text = "1700000009.9\n".repeat(10) + &"1700000010.1\n".repeat(10);
    let trace = parse_trace(&text).unwrap();
    let r = run(&trace, &ARTICLE, &[Row::FixedWindow, Row::LeakyBucket]).unwrap();
    assert_eq!(r.origin_ms, 1_700_000_000_000);
    assert_eq!(r.outcomes[0].allowed, 20);
    // A key never seen is new even on an epoch clock.
    assert_eq!(r.outcomes[1].allowed, 10);
}

#[test]
fn a_first_request_at_zero_is_a_new_key_for_nginxs_bucket() {
    let trace = parse_trace("0\n").unwrap();
    let setup = Setup {
        burst: 0,
        ..ARTICLE
    };
    let r = run(&trace, &setup, &[Row::LeakyBucket]).unwrap();
    assert_eq!(r.outcomes[0].decisions, [true]);
}

#[test]
fn rows_come_in_the_articles_order() {
    let trace = Scenario::A.trace();
    let r = run(&trace, &ARTICLE, &[Row::Gcra, Row::FixedWindow, Row::Gcra]).unwrap();
    let names: Vec<&str> = r.outcomes.iter().map(|o| o.row.name()).collect();
    assert_eq!(names, ["fixed_window", "gcra"]);
    assert_eq!(r.bucket_vs_queue, None);
    for row in Row::ALL {
        assert_eq!(Row::from_name(row.name()), Some(row));
    }
    assert_eq!(Row::from_name("leaky"), None);
}

#[test]
fn bad_setups_are_refused() {
    let trace = Scenario::A.trace();
    let slow = Setup {
        count: 1,
        period_ms: 3_600_000,
        burst: 0,
    };
    assert!(matches!(
        run(&trace, &slow, &[Row::LeakyBucket]),
        Err(SimError::TooSlowForLeakyBucket(_))
    ));
    assert!(run(&trace, &slow, &[Row::TokenBucket, Row::LeakyQueue]).is_ok());
    let big = Setup {
        burst: MAX_BURST + 1,
        ..ARTICLE
    };
    assert_eq!(
        run(&trace, &big, &Row::ALL),
        Err(SimError::Burst(MAX_BURST + 1))
    );
    let zero = Setup {
        count: 0,
        ..ARTICLE
    };
    assert!(matches!(
        run(&trace, &zero, &Row::ALL),
        Err(SimError::Rate(_))
    ));
    // Refused before any arithmetic on it (no division by a zero period).
    let no_period = Setup {
        period_ms: 0,
        ..ARTICLE
    };
    assert!(matches!(
        run(&trace, &no_period, &[Row::Gcra]),
        Err(SimError::Rate(_))
    ));
    let long = Setup {
        period_ms: algorithm::MAX_PERIOD_MS + 1,
        ..ARTICLE
    };
    assert!(matches!(
        run(&trace, &long, &[Row::Gcra]),
        Err(SimError::Rate(_))
    ));
}

#[test]
fn most_within_counts_half_open_windows() {
    assert_eq!(most_within(&mut [0, 5, 10, 10, 15], 10), 3);
    assert_eq!(most_within(&mut [], 10), 0);
    assert_eq!(most_within(&mut [3, 3, 3], 1), 3);
}

#[test]
fn periods_read_as_rates_write_them() {
    assert_eq!(period_text(10_000), "10s");
    assert_eq!(period_text(1_500), "1500ms");
    assert_eq!(period_text(300_000), "5m");
    // A period of one unit is written without its 1, but for ms.
    assert_eq!(algorithm::rate_text(3, 1000), "3r/s");
    assert_eq!(algorithm::rate_text(3, 60_000), "3r/m");
    assert_eq!(algorithm::rate_text(3, 1), "3r/1ms");
    assert_eq!(ARTICLE.rate_text(), "10r/10s");
}

#[test]
fn seconds_parse_exactly() {
    assert_eq!(parse_seconds("9.9"), Ok(9_900));
    assert_eq!(parse_seconds("10.1"), Ok(10_100));
    assert_eq!(parse_seconds("0.125"), Ok(125));
    assert_eq!(parse_seconds(".5"), Ok(500));
    assert_eq!(parse_seconds("7."), Ok(7_000));
    assert_eq!(parse_seconds("12"), Ok(12_000));
    assert_eq!(parse_seconds("1.500000"), Ok(1_500));
    assert_eq!(parse_seconds("1700000000.123"), Ok(1_700_000_000_123));
    assert!(
        parse_seconds("1.0005")
            .unwrap_err()
            .contains("more than 3 decimals")
    );
    for bad in ["", ".", "-1", "1e3", "1,5", "0x10", "1.2.3", "+1", "inf"] {
        assert!(
            parse_seconds(bad).unwrap_err().contains("invalid time"),
            "{bad}"
        );
    }
    assert!(
        parse_seconds("99999999999999999999")
            .unwrap_err()
            .contains("too large")
    );
    assert!(
        parse_seconds("1000000000000001")
            .unwrap_err()
            .contains("too large")
    );
}

#[test]
fn traces_skip_comments_and_blank_lines() {
    let text = "# the article's scenario A, two clients\n\n9.9 alice  # first burst\n  9.9\tbob\n10.1\n#10.2\n";
    let t = parse_trace(text).unwrap();
    assert_eq!(t.keys, ["alice", "bob", ""]);
    let got: Vec<(u64, usize)> = t.arrivals.iter().map(|a| (a.at_ms, a.key)).collect();
    assert_eq!(got, [(9_900, 0), (9_900, 1), (10_100, 2)]);
    assert_eq!(t.lines, [3, 4, 5]);
}

#[test]
fn trace_errors_name_their_line() {
    let e = parse_trace("1\n2\n\nx3\n").unwrap_err();
    assert_eq!(e.line, 4);
    assert!(e.message.contains("invalid time \"x3\""), "{e}");
    let e = parse_trace("# one\n1 alice bob\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("unexpected \"bob\""), "{e}");
    assert_eq!(e.to_string(), format!("2: {}", e.message));
    let e = parse_trace("# nothing\n\n").unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.message.contains("no request"), "{e}");
}

#[test]
fn the_table_has_the_articles_numbers() {
    let r = report(Scenario::B);
    let text = table(&r, &Scenario::B.trace(), Source::Scenario(Scenario::B));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "scenario B: 46 requests, rate 10r/10s, burst 9");
    let cells = |name: &str| -> Vec<String> {
        let line = lines.iter().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().map(str::to_string).collect()
    };
    assert_eq!(
        cells("token_bucket "),
        ["token_bucket", "29", "17", "19", "-", "-"]
    );
    assert_eq!(
        cells("leaky_queue"),
        ["leaky_queue", "30", "16", "20", "10", "10s"]
    );
    // Aligned: every row as wide as the header's columns.
    let header_len = lines[1].len();
    assert!(lines[2..9].iter().all(|l| l.len() <= header_len + 4));
    assert!(lines[9].starts_with("leaky_bucket (nginx's, delaying) and leaky_queue"));
}

#[test]
fn the_json_lists_every_row() {
    let r = report(Scenario::A);
    let text = json(&r, Source::Scenario(Scenario::A));
    assert!(text.starts_with("{\"source\": \"scenario A\", \"requests\": 20"));
    assert!(text.contains(
        "{\"name\": \"fixed_window\", \"allowed\": 20, \"rejected\": 0, \"max_in_window\": 20"
    ));
    assert!(text.contains("\"differs_from_leaky_queue\": [10]"));
    assert_eq!(text.matches("\"name\"").count(), 7);
    assert_eq!(text.matches("\"max_wait_ms\"").count(), 2);
}

#[test]
fn the_plot_has_a_lane_per_row() {
    let r = report(Scenario::B);
    let svg = svg(&r, &Scenario::B.trace(), Source::Scenario(Scenario::B));
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<g class=\"lane\"").count(), 7);
    for row in Row::ALL {
        assert!(svg.contains(&format!("data-algorithm=\"{}\"", row.name())));
    }
    // Window boundaries at 0, 10, 20 and 30 s (the queue works until 29 s).
    assert_eq!(svg.matches("class=\"window\"").count(), 4);
    // 46 marks per lane: as many admitted as the row allowed.
    for (lane, o) in svg.split("<g class=\"lane\"").skip(1).zip(&r.outcomes) {
        assert_eq!(lane.matches("class=\"admitted\"").count(), o.allowed);
        assert_eq!(lane.matches("class=\"rejected\"").count(), 46 - o.allowed);
    }
}
