//! `sluice top`: the dashboard's data in a terminal, for a person on the
//! server over ssh: per `limit_req` zone its passed, delayed and rejected
//! requests per second (from two successive readings), its states, and
//! its most limited keys; the upstream servers' states; the `limit_conn`
//! zones.
//!
//! Why this shape: it reads the admin listener's JSON API like any other
//! client (so it shows exactly what the API and the dashboard show, of a
//! sluice running elsewhere on the machine), with a small blocking
//! HTTP/1.1 GET over [`TcpStream`]: one request per second or two needs no
//! HTTP client library and no runtime. The screen is redrawn with two ANSI
//! escapes (home, clear) rather than a curses library; `--once` prints one
//! reading without them, for scripts.
//!
//! Client keys are the clients' own bytes: control characters in them are
//! written escaped (`\u{9b}`), never sent to the terminal.

use serde_json::Value;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Clear the screen and put the cursor top left.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// How long one API request may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Longest key shown (longer ones end in `…`).
const KEY_WIDTH: usize = 39;

/// The admin listener `[admin] listen` names in the configuration file at
/// `path`, as a client reaches it (a wildcard address becomes loopback).
/// Only that key is read: the rest of the file (and its `token_file`,
/// which may not be readable by the person running `top`) is not needed.
pub fn admin_of(path: &std::path::Path) -> Result<SocketAddr, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("{shown} is not valid TOML: {e}"))?;
    let listen = table
        .get("admin")
        .and_then(|a| a.get("listen"))
        .and_then(|l| l.as_str())
        .ok_or_else(|| {
            format!("{shown} has no [admin] listen: sluice top needs the admin listener")
        })?;
    let mut addr: SocketAddr = listen
        .parse()
        .map_err(|_| format!("{shown}: [admin] listen \"{listen}\" is not an address:port"))?;
    if addr.ip().is_unspecified() {
        let ip: std::net::IpAddr = if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        };
        addr.set_ip(ip);
    }
    Ok(addr)
}

/// One reading of the API.
#[derive(Debug)]
pub struct Reading {
    /// `/api/sluice/limit_reqs`: each zone in full.
    zones: serde_json::Map<String, Value>,
    /// `/api/sluice/limit_reqs/ZONE/top`, for the zones that track keys.
    tops: Vec<(String, Value)>,
    upstreams: serde_json::Map<String, Value>,
    conns: serde_json::Map<String, Value>,
    /// Monotonic milliseconds when it was taken.
    at_ms: u64,
}

/// `GET path` on the admin listener at `addr`: its JSON answer.
pub fn get_json(addr: SocketAddr, path: &str) -> Result<Value, String> {
    let fail = |e: std::io::Error| format!("admin listener {addr}: {e}");
    let mut s = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(fail)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(fail)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(fail)?;
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n\
         User-Agent: sluice-top\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).map_err(fail)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(fail)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("admin listener {addr}: an answer without a header end"))?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        let line = head.lines().next().unwrap_or("");
        return Err(format!("GET {path} on {addr}: {line}: {}", body.trim()));
    }
    serde_json::from_str(body).map_err(|e| format!("GET {path} on {addr}: not JSON: {e}"))
}

/// A path segment, percent-encoded where it is not unreserved.
fn segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn object(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// Read everything `top` shows from the admin listener at `addr`.
pub fn read(addr: SocketAddr, at_ms: u64) -> Result<Reading, String> {
    let zones = object(get_json(addr, "/api/sluice/limit_reqs")?);
    let mut tops = Vec::new();
    for (name, z) in &zones {
        if z["top_keys"].as_u64().unwrap_or(0) > 0 {
            let path = format!("/api/sluice/limit_reqs/{}/top", segment(name));
            tops.push((name.clone(), get_json(addr, &path)?));
        }
    }
    Ok(Reading {
        zones,
        tops,
        upstreams: object(get_json(addr, "/api/9/http/upstreams")?),
        conns: object(get_json(addr, "/api/9/http/limit_conns")?),
        at_ms,
    })
}

/// Text from a client, safe for a terminal: control characters escaped,
/// cut at `width` characters.
fn safe(s: &str, width: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == width {
            out.push('…');
            break;
        }
        if c.is_control() {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Per second between `prev` and `now` for a zone's counter (a counter
/// that went down was reset: counted from zero).
fn per_second(prev: Option<&Reading>, now: &Reading, zone: &str, field: &str) -> Option<f64> {
    let prev = prev?;
    let dt = now.at_ms.checked_sub(prev.at_ms).filter(|&d| d > 0)? as f64 / 1000.0;
    let before = count(&prev.zones.get(zone)?["counters"][field]);
    let after = count(&now.zones[zone]["counters"][field]);
    let delta = if after >= before {
        after - before
    } else {
        after
    };
    Some(delta as f64 / dt)
}

/// The screen for `now`, with rates from `prev` when there is one.
pub fn render(admin: SocketAddr, prev: Option<&Reading>, now: &Reading) -> String {
    let mut o = String::new();
    let over = match prev {
        Some(p) => format!(
            "rates over {:.1} s",
            now.at_ms.saturating_sub(p.at_ms) as f64 / 1000.0
        ),
        None => "rates from the next reading".into(),
    };
    let _ = writeln!(o, "sluice top — admin {admin} — {over}\n");
    let _ = writeln!(
        o,
        "{:<16} {:<14} {:<9} {:<7} {:>15} {:>10} {:>9} {:>10} {:>9} {:>9} {:>10}",
        "ZONE",
        "ALGORITHM",
        "RATE",
        "BACKEND",
        "STATES/CAP",
        "PASSED",
        "DELAYED",
        "REJECTED",
        "PASSED/s",
        "DELAYED/s",
        "REJECTED/s"
    );
    for (name, z) in &now.zones {
        let c = &z["counters"];
        let rate = |f| per_second(prev, now, name, f).map_or("–".into(), |r| format!("{r:.1}"));
        let _ = writeln!(
            o,
            "{:<16} {:<14} {:<9} {:<7} {:>15} {:>10} {:>9} {:>10} {:>9} {:>9} {:>10}",
            safe(name, 16),
            safe(z["algorithm"].as_str().unwrap_or("?"), 14),
            safe(z["rate"].as_str().unwrap_or("?"), 9),
            safe(z["backend"].as_str().unwrap_or("?"), 7),
            format!("{}/{}", count(&z["states"]), count(&z["capacity"])),
            count(&c["passed"]),
            count(&c["delayed"]),
            count(&c["rejected"]),
            rate("passed"),
            rate("delayed"),
            rate("rejected"),
        );
    }
    render_tops(&mut o, now);
    render_upstreams(&mut o, now);
    render_conns(&mut o, now);
    o
}

fn render_tops(o: &mut String, now: &Reading) {
    for (zone, t) in &now.tops {
        let window = count(&t["window_ms"]) / 1000;
        let _ = writeln!(
            o,
            "\nmost limited keys of {} (last {window} to {} s):",
            safe(zone, 16),
            2 * window
        );
        let keys = t["keys"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if keys.is_empty() {
            let _ = writeln!(o, "  none rejected or delayed");
            continue;
        }
        let _ = writeln!(
            o,
            "  {:<KEY_WIDTH$} {:>9} {:>7} {:>9} {:>9}",
            "KEY", "COUNT", "±ERROR", "REJECTED", "DELAYED"
        );
        for k in keys {
            let _ = writeln!(
                o,
                "  {:<KEY_WIDTH$} {:>9} {:>7} {:>9} {:>9}",
                safe(k["key"].as_str().unwrap_or(""), KEY_WIDTH),
                count(&k["count"]),
                count(&k["error"]),
                count(&k["rejected"]),
                count(&k["delayed"]),
            );
        }
    }
}

fn render_upstreams(o: &mut String, now: &Reading) {
    for (name, g) in &now.upstreams {
        let _ = writeln!(o, "\nupstream {}:", safe(name, 32));
        for p in g["peers"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let _ = writeln!(
                o,
                "  {:<40} {:<8} requests {:>9}  fails {:>6}{}",
                safe(p["server"].as_str().unwrap_or("?"), 40),
                safe(p["state"].as_str().unwrap_or("?"), 8),
                count(&p["requests"]),
                count(&p["fails"]),
                if p["backup"] == true { "  backup" } else { "" },
            );
        }
    }
}

fn render_conns(o: &mut String, now: &Reading) {
    if now.conns.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nlimit_conn zones:");
    for (name, c) in &now.conns {
        let _ = writeln!(
            o,
            "  {:<16} passed {:>10}  rejected {:>9}  rejected_dry_run {:>9}",
            safe(name, 16),
            count(&c["passed"]),
            count(&c["rejected"]),
            count(&c["rejected_dry_run"]),
        );
    }
}

/// What `sluice top` was asked.
pub struct Options {
    pub admin: SocketAddr,
    /// Between readings (and, with `once`, between the two readings whose
    /// difference gives the rates).
    pub interval: Duration,
    /// One screen, without escape codes, then return.
    pub once: bool,
}

/// Run `top`, writing to `out`: until an error with `once`; otherwise
/// until killed, showing an error on the screen while the API does not
/// answer and carrying on.
pub fn run(opts: &Options, out: &mut impl Write) -> Result<(), String> {
    let start = tokio::time::Instant::now();
    let ms = || start.elapsed().as_millis() as u64;
    let mut prev = read(opts.admin, ms())?;
    if opts.once {
        std::thread::sleep(opts.interval);
        let now = read(opts.admin, ms())?;
        let screen = render(opts.admin, Some(&prev), &now);
        return out.write_all(screen.as_bytes()).map_err(|e| e.to_string());
    }
    let mut screen = render(opts.admin, None, &prev);
    loop {
        write!(out, "{CLEAR}{screen}")
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
        std::thread::sleep(opts.interval);
        screen = match read(opts.admin, ms()) {
            Ok(now) => {
                let s = render(opts.admin, Some(&prev), &now);
                prev = now;
                s
            }
            Err(e) => format!("sluice top: {e}\n(retrying every {:?})\n", opts.interval),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cannot_drive_the_terminal() {
        assert_eq!(safe("127.0.0.1", 39), "127.0.0.1");
        assert_eq!(safe("a\u{1b}[2Jb", 39), "a\\u{1b}[2Jb");
        assert_eq!(safe("x\u{9b}31m", 39), "x\\u{9b}31m");
        assert_eq!(safe("abcdef", 3), "abc…");
    }

    #[test]
    fn zone_names_are_percent_encoded_in_paths() {
        assert_eq!(segment("z_1.a-b"), "z_1.a-b");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn the_admin_address_comes_from_the_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            "[admin]\nlisten = \"0.0.0.0:9090\"\ntoken_file = \"/nope\"\n",
        )
        .unwrap();
        assert_eq!(admin_of(&path).unwrap(), "127.0.0.1:9090".parse().unwrap());
        std::fs::write(&path, "[admin]\nlisten = \"[::]:9091\"\n").unwrap();
        assert_eq!(admin_of(&path).unwrap(), "[::1]:9091".parse().unwrap());
        std::fs::write(&path, "rate = 1\n").unwrap();
        assert!(admin_of(&path).unwrap_err().contains("no [admin] listen"));
    }
}
