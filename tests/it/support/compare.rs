//! Comparing bursts: status multisets, and latencies paired per status, within ±[`TOLERANCE`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::Duration;

use super::client::Reply;

/// How far two latencies (or a latency and the expected delay) may be apart.
pub const TOLERANCE: Duration = Duration::from_millis(100);

/// One request's outcome: status (0 = closed without a response) and latency in ms.
type Outcome = (u16, u64);

/// Expected outcomes from `(status, latencies in ms)` groups, e.g.
/// `expect(&[(200, &[0, 500, 1000]), (429, &[0; 4])])`.
pub fn expect(groups: &[(u16, &[u64])]) -> Vec<(u16, u64)> {
    groups
        .iter()
        .flat_map(|(status, delays)| delays.iter().map(move |d| (*status, *d)))
        .collect()
}

/// Status counts in the form of `scripts/burst10.sh`: `200=6 429=4` (0 is shown as `closed`).
pub fn status_counts(replies: &[Reply]) -> String {
    counts(&outcomes(replies))
}

/// The replies from `source`, in their order.
pub fn group_by_source(replies: &[Reply], source: IpAddr) -> Vec<Reply> {
    replies
        .iter()
        .filter(|r| r.source == source)
        .cloned()
        .collect()
}

/// Asserts that sluice answered a burst as nginx did: the same multiset of statuses, and, status
/// by status, the latencies sorted and paired differ by at most [`TOLERANCE`] (so six delayed
/// 200s must come back at the same steps, and rejections must be as immediate as nginx's).
/// Prints both tables on success (visible with `--nocapture`); panics with them on failure.
pub fn assert_same(scenario: &str, nginx: &[Reply], sluice: &[Reply]) {
    check(
        scenario,
        ("nginx", &outcomes(nginx)),
        ("sluice", &outcomes(sluice)),
    );
}

/// Asserts a burst's outcome against absolute expectations (see [`expect`]), with the same rules
/// as [`assert_same`]. `side` names who answered (`"nginx"`, `"sluice"`).
pub fn assert_expected(scenario: &str, side: &str, replies: &[Reply], expected: &[(u16, u64)]) {
    let mut expected = expected.to_vec();
    expected.sort_by_key(|&(status, ms)| (ms, status));
    check(
        scenario,
        (side, &outcomes(replies)),
        ("expected", &expected),
    );
}

fn outcomes(replies: &[Reply]) -> Vec<Outcome> {
    let mut v: Vec<Outcome> = replies.iter().map(|r| (r.status, r.ms())).collect();
    v.sort_by_key(|&(status, ms)| (ms, status));
    v
}

fn check(scenario: &str, left: (&str, &[Outcome]), right: (&str, &[Outcome])) {
    let problems = differences(left.1, right.1);
    let report = format!(
        "  {:<8} {}\n  {:<8} {}\n{}",
        left.0,
        counts(left.1),
        right.0,
        counts(right.1),
        table(left, right)
    );
    if problems.is_empty() {
        println!("{scenario}\n{report}");
    } else {
        let mut msg = format!(
            "{scenario}: {} and {} differ\n{report}  differences (tolerance {} ms):\n",
            left.0,
            right.0,
            TOLERANCE.as_millis()
        );
        for p in problems {
            let _ = writeln!(msg, "    - {p}");
        }
        panic!("{msg}");
    }
}

fn differences(left: &[Outcome], right: &[Outcome]) -> Vec<String> {
    let mut problems = Vec::new();
    let by_status = |v: &[Outcome]| {
        let mut m: BTreeMap<u16, Vec<u64>> = BTreeMap::new();
        for &(status, ms) in v {
            m.entry(status).or_default().push(ms);
        }
        for list in m.values_mut() {
            list.sort_unstable();
        }
        m
    };
    let (l, r) = (by_status(left), by_status(right));
    if counts(left) != counts(right) {
        problems.push(format!(
            "statuses differ: {} vs {}",
            counts(left),
            counts(right)
        ));
    }
    let tolerance = u64::try_from(TOLERANCE.as_millis()).expect("small tolerance");
    for (status, lms) in &l {
        let Some(rms) = r.get(status) else { continue };
        for (i, (a, b)) in lms.iter().zip(rms).enumerate() {
            if a.abs_diff(*b) > tolerance {
                problems.push(format!(
                    "{} #{} (sorted by latency): {a} ms vs {b} ms, {} ms apart",
                    status_name(*status),
                    i + 1,
                    a.abs_diff(*b)
                ));
            }
        }
    }
    problems
}

fn counts(v: &[Outcome]) -> String {
    let mut m: BTreeMap<u16, usize> = BTreeMap::new();
    for &(status, _) in v {
        *m.entry(status).or_default() += 1;
    }
    m.iter()
        .map(|(s, n)| format!("{}={n}", status_name(*s)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn status_name(status: u16) -> String {
    if status == 0 {
        "closed".to_owned()
    } else {
        status.to_string()
    }
}

/// Both sides as columns, rows ordered by status then latency, so that rows pair up the way
/// [`differences`] pairs them.
fn table(left: (&str, &[Outcome]), right: (&str, &[Outcome])) -> String {
    let by_status = |v: &[Outcome]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    let (left, right) = (
        (left.0, &by_status(left.1)[..]),
        (right.0, &by_status(right.1)[..]),
    );
    let cell = |o: Option<&Outcome>| match o {
        Some(&(status, ms)) => format!("{:<6} {ms:>6} ms", status_name(status)),
        None => String::new(),
    };
    let mut out = format!("  {:>3}  {:<16}  {:<16}\n", "#", left.0, right.0);
    for i in 0..left.1.len().max(right.1.len()) {
        let _ = writeln!(
            out,
            "  {:>3}  {:<16}  {:<16}",
            i + 1,
            cell(left.1.get(i)),
            cell(right.1.get(i))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_catch_status_and_latency_mismatches() {
        let nginx = expect(&[(200, &[2, 501, 1001]), (429, &[1, 1])]);
        let close = expect(&[(200, &[10, 560, 950]), (429, &[3, 4])]);
        assert!(differences(&nginx, &close).is_empty());

        let late = expect(&[(200, &[2, 501, 1150]), (429, &[1, 1])]);
        assert_eq!(differences(&nginx, &late).len(), 1);

        let other = expect(&[(200, &[2, 501]), (429, &[1, 1, 1])]);
        let problems = differences(&nginx, &other);
        assert!(problems[0].starts_with("statuses differ: 200=3 429=2 vs 200=2 429=3"));
    }

    #[test]
    #[should_panic(expected = "nginx and sluice differ")]
    fn check_panics_with_both_tables() {
        let nginx = expect(&[(200, &[0]), (429, &[0])]);
        let sluice = expect(&[(200, &[0, 500])]);
        check("unit", ("nginx", &nginx), ("sluice", &sluice));
    }
}
