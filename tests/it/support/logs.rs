//! nginx-format limit_req error-log lines (nginx-limit-req.md §9), parsed strictly so that a
//! sluice line in another format is reported, not ignored.
//!
//! ```text
//! 2026/11/30 18:14:20 [error] 4323#4323: *18 limiting requests, excess: 5.998 by zone "z_b5", client: 127.0.0.1, server: , request: "GET /b5 HTTP/1.1", host: "x"
//! ... [warn] ...: *3 delaying request, excess: 0.998, by zone "z", client: ...
//! ```

use std::fmt::Write as _;

/// What a limit line reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// `limiting requests, [dry run, ]excess: N.NNN by zone "Z"`
    Limiting,
    /// `delaying request, [dry run, ]excess: N.NNN, by zone "Z"`
    Delaying,
}

/// One parsed limit line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitLine {
    /// The level in brackets: `error`, `warn`, `notice`, `info`.
    pub level: String,
    pub event: Event,
    pub dry_run: bool,
    /// Excess in milli-requests (`4.000` = 4000).
    pub excess: u64,
    pub zone: String,
    /// The `client:` field.
    pub client: String,
    /// The `request:` field without quotes, e.g. `GET /two HTTP/1.1`.
    pub request: String,
}

/// Every `limiting requests` / `delaying request` line of `log`, in order. Err names the first
/// line that mentions one of them but does not follow nginx's format exactly.
pub fn limit_lines(log: &str) -> Result<Vec<LimitLine>, String> {
    log.lines()
        .filter(|l| l.contains("limiting requests") || l.contains("delaying request"))
        .map(|l| parse(l).map_err(|e| format!("{e} in line: {l}")))
        .collect()
}

fn parse(line: &str) -> Result<LimitLine, String> {
    let (event, at, sep) = if let Some(at) = line.find("limiting requests, ") {
        (
            Event::Limiting,
            at + "limiting requests, ".len(),
            " by zone \"",
        )
    } else if let Some(at) = line.find("delaying request, ") {
        (
            Event::Delaying,
            at + "delaying request, ".len(),
            ", by zone \"",
        )
    } else {
        return Err("no \"limiting requests, \" or \"delaying request, \"".to_owned());
    };
    let level = line[..at]
        .split_once('[')
        .and_then(|(_, r)| r.split_once(']'))
        .map(|(lvl, _)| lvl.to_owned())
        .ok_or("no [level] before the message")?;
    let mut rest = &line[at..];
    let dry_run = rest.starts_with("dry run, ");
    if dry_run {
        rest = &rest["dry run, ".len()..];
    }
    rest = rest
        .strip_prefix("excess: ")
        .ok_or("no \"excess: \" where nginx puts it")?;
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let excess = parse_excess(&rest[..num_end])?;
    rest = rest[num_end..]
        .strip_prefix(sep)
        .ok_or_else(|| format!("no {sep:?} after the excess (nginx's exact punctuation)"))?;
    let (zone, tail) = rest.split_once('"').ok_or("unterminated zone name")?;
    let client = tail
        .split_once(", client: ")
        .and_then(|(_, r)| r.split(", ").next())
        .ok_or("no \", client: \" field")?
        .to_owned();
    let request = tail
        .split_once("request: \"")
        .and_then(|(_, r)| r.split_once('"'))
        .map(|(req, _)| req.to_owned())
        .ok_or("no request: \"…\" field")?;
    Ok(LimitLine {
        level,
        event,
        dry_run,
        excess,
        zone: zone.to_owned(),
        client,
        request,
    })
}

/// `4.000` → 4000. Exactly three decimals, as nginx prints them.
fn parse_excess(s: &str) -> Result<u64, String> {
    let bad = || format!("excess {s:?} is not N.NNN");
    let (int, frac) = s.split_once('.').ok_or_else(bad)?;
    if frac.len() != 3 || int.is_empty() {
        return Err(bad());
    }
    let int: u64 = int.parse().map_err(|_| bad())?;
    let frac: u64 = frac.parse().map_err(|_| bad())?;
    Ok(int * 1000 + frac)
}

/// How far two excess values may be apart (milli-requests): requests a few ms apart leak a few
/// milli-requests (nginx itself logs 0.998 instead of 1.000 one loop tick later).
pub const EXCESS_TOLERANCE: u64 = 100;

/// Asserts that sluice's limit lines say what nginx's say: the same number of lines, and, sorted
/// by (event, zone, client, request, excess), the same level, event, dry-run flag, zone, client and request line,
/// with excess within [`EXCESS_TOLERANCE`]. Prints both on success, panics with both otherwise.
pub fn assert_same_limit_lines(scenario: &str, nginx_log: &str, sluice_log: &str) {
    let nginx = limit_lines(nginx_log)
        .unwrap_or_else(|e| panic!("{scenario}: nginx's own error log does not parse: {e}"));
    let sluice = limit_lines(sluice_log).unwrap_or_else(|e| {
        panic!("{scenario}: sluice's error log is not in nginx's format: {e}\n--- sluice stderr ---\n{sluice_log}")
    });
    let sorted = |mut v: Vec<LimitLine>| {
        v.sort_by(|a, b| {
            (a.event, &a.zone, &a.client, &a.request, a.excess)
                .cmp(&(b.event, &b.zone, &b.client, &b.request, b.excess))
        });
        v
    };
    let (nginx, sluice) = (sorted(nginx), sorted(sluice));
    let mut problems = Vec::new();
    if nginx.len() != sluice.len() {
        problems.push(format!(
            "{} limit lines from nginx, {} from sluice",
            nginx.len(),
            sluice.len()
        ));
    }
    for (i, (n, s)) in nginx.iter().zip(&sluice).enumerate() {
        let same = n.level == s.level
            && n.event == s.event
            && n.dry_run == s.dry_run
            && n.zone == s.zone
            && n.client == s.client
            && n.request == s.request
            && n.excess.abs_diff(s.excess) <= EXCESS_TOLERANCE;
        if !same {
            problems.push(format!(
                "line {}: nginx {} / sluice {}",
                i + 1,
                show(n),
                show(s)
            ));
        }
    }
    let mut report = format!("{scenario}: limit lines\n  nginx:\n");
    for l in &nginx {
        let _ = writeln!(report, "    {}", show(l));
    }
    report.push_str("  sluice:\n");
    for l in &sluice {
        let _ = writeln!(report, "    {}", show(l));
    }
    if problems.is_empty() {
        println!("{report}");
    } else {
        panic!(
            "{report}  differences:\n    - {}\n--- nginx error.log ---\n{nginx_log}\n--- sluice stderr ---\n{sluice_log}",
            problems.join("\n    - ")
        );
    }
}

fn show(l: &LimitLine) -> String {
    let dry = if l.dry_run { "dry run, " } else { "" };
    let text = match l.event {
        Event::Limiting => format!(
            "limiting requests, {dry}excess: {}.{:03} by zone \"{}\"",
            l.excess / 1000,
            l.excess % 1000,
            l.zone
        ),
        Event::Delaying => format!(
            "delaying request, {dry}excess: {}.{:03}, by zone \"{}\"",
            l.excess / 1000,
            l.excess % 1000,
            l.zone
        ),
    };
    format!(
        "[{}] {text}, client: {}, request: \"{}\"",
        l.level, l.client, l.request
    )
}

/// Every `limiting connections` line of `log` (nginx's limit_conn), each as
/// `[level] limiting connections[, dry run,] by zone "Z", client: C, server: S, request: "R"`:
/// the date, pid, connection number and host (a port that differs between the servers) cut off,
/// sorted. Err names the first such line not in nginx's exact format.
pub fn conn_lines(log: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for line in log.lines().filter(|l| l.contains("limiting connections")) {
        let bad = |why: &str| format!("{why} in line: {line}");
        let level = line
            .split_once(" [")
            .and_then(|(_, r)| r.split_once("] "))
            .map(|(l, _)| l)
            .ok_or_else(|| bad("no [level]"))?;
        let msg = line
            .split_once(": *")
            .and_then(|(_, r)| r.split_once(' '))
            .map(|(_, m)| m)
            .ok_or_else(|| bad("no \": *CONN \" before the message"))?;
        let rest = msg
            .strip_prefix("limiting connections")
            .ok_or_else(|| bad("the message does not start with \"limiting connections\""))?;
        if !(rest.starts_with(" by zone \"") || rest.starts_with(", dry run, by zone \"")) {
            return Err(bad(
                "not nginx's punctuation around \"dry run\" / \"by zone\"",
            ));
        }
        let msg = msg.split(", host: ").next().unwrap_or(msg);
        if !msg.contains(", client: ") || !msg.contains(", request: \"") {
            return Err(bad("no client: / request: fields"));
        }
        out.push(format!("[{level}] {msg}"));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nginx_lines_and_rejects_other_punctuation() {
        let log = "2026/11/30 18:14:20 [notice] 1#1: start worker process 2\n\
2026/11/30 18:14:20 [error] 4323#4323: *18 limiting requests, excess: 5.998 by zone \"z_b5\", client: 127.0.0.1, server: , request: \"GET /b5?k=t1&i=6 HTTP/1.1\", host: \"x\"\n\
2026/11/30 18:14:20 [warn] 4323#4323: *19 delaying request, dry run, excess: 1.000, by zone \"z\", client: 127.0.0.2, server: , request: \"GET / HTTP/1.1\", host: \"x\"\n";
        let lines = limit_lines(log).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            LimitLine {
                level: "error".into(),
                event: Event::Limiting,
                dry_run: false,
                excess: 5998,
                zone: "z_b5".into(),
                client: "127.0.0.1".into(),
                request: "GET /b5?k=t1&i=6 HTTP/1.1".into(),
            }
        );
        assert!(lines[1].dry_run && lines[1].event == Event::Delaying && lines[1].excess == 1000);

        let comma = "[error] 1#1: *1 limiting requests, excess: 1.000, by zone \"z\", client: a, server: , request: \"GET / HTTP/1.1\"";
        assert!(limit_lines(comma).is_err());
        let two_decimals = "[warn] 1#1: *1 delaying request, excess: 1.00, by zone \"z\", client: a, server: , request: \"GET / HTTP/1.1\"";
        assert!(limit_lines(two_decimals).is_err());
    }
}
