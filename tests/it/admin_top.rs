//! `sluice top --once` against a sluice that has seen traffic (the
//! dashboard test's): the zones' counters, rates from traffic sent between
//! its two readings, the most limited keys, the upstream states.

use crate::admin_api::hits;
use crate::admin_dashboard::{config, traffic};
use crate::support::{Sluice, Upstream};
use std::time::Duration;

#[tokio::test]
async fn sluice_top_once_shows_zones_rates_and_keys() {
    let up = Upstream::start();
    let s = Sluice::in_process(&config(&up));
    traffic(&s).await;
    let top = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["top", "--once", "--interval", "1500ms", "--admin"])
        .arg(s.admin_addr().to_string())
        .kill_on_drop(true)
        .output();
    let more = async {
        // Between its two readings: 3 more rejected requests of 127.0.0.2.
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(hits(s.addr(), 2, "/z", 3).await, [429, 429, 429]);
    };
    let (out, ()) = tokio::join!(top, more);
    let out = out.expect("sluice top runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains('\x1b'),
        "--once writes no escape codes:\n{text}"
    );
    let row = |first: &str| -> Vec<String> {
        text.lines()
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .find(|w| w.first().map(String::as_str) == Some(first))
            .unwrap_or_else(|| panic!("no line for {first}:\n{text}"))
    };
    // ZONE ALGORITHM RATE BACKEND STATES/CAP PASSED DELAYED REJECTED and the three rates.
    let z = row("z");
    assert_eq!(
        z[1..8],
        ["leaky_bucket", "1r/m", "memory", "2/16384", "4", "0", "7"],
        "{text}"
    );
    let rejected_per_s: f64 = z[10].parse().unwrap();
    assert!((1.5..=2.1).contains(&rejected_per_s), "3 in 1.5 s:\n{text}");
    assert_eq!(z[8], "0.0", "{text}");
    assert_eq!(row("d")[5..8], ["1", "2", "0"], "{text}");
    // KEY COUNT ±ERROR REJECTED DELAYED, most limited first.
    let of_z = &text[text.find("most limited keys of z").expect("z's top keys")..];
    let keys: Vec<Vec<&str>> = of_z
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let want = [
        ["127.0.0.2", "6", "0", "6", "0"],
        ["127.0.0.3", "1", "0", "1", "0"],
    ];
    assert_eq!(keys, want, "{text}");
    let dead = row("127.0.0.1:9");
    assert_eq!(dead[1], "unavail", "{text}");
    assert_eq!(row("c")[1..3], ["passed", "2"], "{text}");
}
