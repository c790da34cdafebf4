//! A [`Report`] as the aligned table `sluice simulate` prints, or as JSON
//! (written here: the shape is small and fixed, and the crate has no JSON
//! serializer to pull in for it).

use super::{Outcome, Report, Row, Scenario, Trace, period_text};
use std::fmt::Write as _;

/// Where a trace came from, to name it and its requests.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    Scenario(Scenario),
    /// A trace file, by the name it was given.
    File(&'a str),
}

impl Source<'_> {
    pub fn title(&self) -> String {
        match self {
            Source::Scenario(s) => format!("scenario {}", s.name()),
            Source::File(f) => (*f).to_string(),
        }
    }

    /// How a request is pointed at: by number in a scenario, by line in a
    /// file.
    fn request(&self, trace: &Trace, i: usize) -> String {
        let at = seconds(trace.arrivals[i].at_ms);
        match self {
            Source::Scenario(_) => format!("#{} at {at}", i + 1),
            Source::File(_) => format!("line {} at {at}", trace.lines[i]),
        }
    }
}

/// Milliseconds as seconds without trailing zeros: `9.9s`, `10s`.
pub fn seconds(ms: u64) -> String {
    let frac = format!("{:03}", ms % 1000);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{}s", ms / 1000)
    } else {
        format!("{}.{frac}s", ms / 1000)
    }
}

/// The table: a header naming the trace and the limit, one row per
/// algorithm, and how nginx's leaky bucket and the article's queue differ.
pub fn table(report: &Report, trace: &Trace, source: Source<'_>) -> String {
    let setup = &report.setup;
    let win = period_text(setup.period_ms);
    let mut head = vec![
        "algorithm".to_string(),
        "allowed".to_string(),
        "rejected".to_string(),
        format!("most in any {win}"),
    ];
    let keys = report.keys > 1;
    if keys {
        head.push(format!("all keys, any {win}"));
    }
    head.push(format!("processed in any {win}"));
    head.push("longest wait".to_string());
    let rows: Vec<Vec<String>> = report
        .outcomes
        .iter()
        .map(|o| table_row(o, report.requests, keys))
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} request{}{}, rate {}, burst {}",
        source.title(),
        report.requests,
        if report.requests == 1 { "" } else { "s" },
        if keys {
            format!(" from {} keys", report.keys)
        } else {
            String::new()
        },
        setup.rate_text(),
        setup.burst
    );
    aligned(&mut out, &head, &rows);
    if keys {
        let _ = writeln!(
            out,
            "most in any {win}: of the busiest key (each key has its own limit); all keys: together"
        );
    }
    if let Some(differ) = &report.bucket_vs_queue {
        out.push_str(&differences(differ, report, trace, source));
    }
    out
}

fn table_row(o: &Outcome, requests: usize, keys: bool) -> Vec<String> {
    let mut cells = vec![
        o.row.name().to_string(),
        o.allowed.to_string(),
        (requests - o.allowed).to_string(),
        o.max_in_window.to_string(),
    ];
    if keys {
        cells.push(o.max_in_window_all_keys.to_string());
    }
    match &o.queue {
        Some(q) => {
            cells.push(q.max_processed_in_window.to_string());
            cells.push(seconds(q.max_wait_ms));
        }
        None => cells.extend(["-".to_string(), "-".to_string()]),
    }
    cells
}

/// The first column left-aligned, the others right-aligned, two spaces
/// apart.
fn aligned(out: &mut String, head: &[String], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..head.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([head[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in std::iter::once(head).chain(rows.iter().map(Vec::as_slice)) {
        let mut text = String::new();
        for (c, cell) in line.iter().enumerate() {
            if c == 0 {
                let _ = write!(text, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(text, "  {cell:>w$}", w = widths[c]);
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    }
}

/// The footnote on nginx's leaky bucket against the article's queue.
fn differences(differ: &[usize], report: &Report, trace: &Trace, source: Source<'_>) -> String {
    const SHOWN: usize = 8;
    let queue = report.outcomes.iter().find(|o| o.row == Row::LeakyQueue);
    let Some(queue) = queue else {
        return String::new();
    };
    if differ.is_empty() {
        return "leaky_bucket (nginx's, delaying) and leaky_queue (the article's queue) decide every request alike\n".to_string();
    }
    let listed: Vec<String> = differ
        .iter()
        .take(SHOWN)
        .map(|&i| {
            let who = if queue.decisions[i] {
                "leaky_queue"
            } else {
                "leaky_bucket"
            };
            format!("  {}: admitted by {who} only\n", source.request(trace, i))
        })
        .collect();
    let more = match differ.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!("  and {n} more\n"),
    };
    format!(
        "leaky_bucket (nginx's, delaying) and leaky_queue (the article's queue) decide {} request{} differently:\n{}{more}",
        differ.len(),
        if differ.len() == 1 { "" } else { "s" },
        listed.concat()
    )
}

/// `{"algorithms": [...]}` with the trace and limit beside it.
pub fn json(report: &Report, source: Source<'_>) -> String {
    let s = &report.setup;
    let mut out = String::new();
    let _ = write!(
        out,
        "{{\"source\": {}, \"requests\": {}, \"keys\": {}, \"rate\": {}, \"count\": {}, \"period_ms\": {}, \"burst\": {}, \"algorithms\": [",
        quoted(&source.title()),
        report.requests,
        report.keys,
        quoted(&s.rate_text()),
        s.count,
        s.period_ms,
        s.burst
    );
    for (n, o) in report.outcomes.iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        json_outcome(&mut out, o, report);
    }
    out.push_str("]}\n");
    out
}

fn json_outcome(out: &mut String, o: &Outcome, report: &Report) {
    let _ = write!(
        out,
        "{{\"name\": {}, \"allowed\": {}, \"rejected\": {}, \"max_in_window\": {}, \"max_in_window_all_keys\": {}, \"decisions\": [{}]",
        quoted(o.row.name()),
        o.allowed,
        o.decisions.len() - o.allowed,
        o.max_in_window,
        o.max_in_window_all_keys,
        list(o.decisions.iter().map(|d| d.to_string()))
    );
    if let Some(q) = &o.queue {
        let waits = q
            .waits_ms
            .iter()
            .map(|w| w.map_or("null".to_string(), |ms| ms.to_string()));
        let _ = write!(
            out,
            ", \"max_wait_ms\": {}, \"max_processed_in_window\": {}, \"waits_ms\": [{}]",
            q.max_wait_ms,
            q.max_processed_in_window,
            list(waits)
        );
    }
    if let (Row::LeakyBucket, Some(differ)) = (o.row, &report.bucket_vs_queue) {
        let _ = write!(
            out,
            ", \"differs_from_leaky_queue\": [{}]",
            list(differ.iter().map(|i| i.to_string()))
        );
    }
    out.push('}');
}

fn list(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

/// A JSON string: quotes, backslashes and control characters escaped.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_exact() {
        assert_eq!(seconds(9_900), "9.9s");
        assert_eq!(seconds(10_000), "10s");
        assert_eq!(seconds(1), "0.001s");
        assert_eq!(seconds(1_230), "1.23s");
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(quoted("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }
}
