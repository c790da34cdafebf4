//! The PROXY protocol (issue #43): `listen … proxy_protocol`, `real_ip` from the PROXY header,
//! the `$proxy_protocol_*` variables, behind a real HAProxy and with headers written by hand.
//!
//! # nginx 1.22.1, observed (also in /work/notes/nginx-proxy-protocol.md)
//!
//! With `listen … proxy_protocol; set_real_ip_from 127.0.0.1; real_ip_header proxy_protocol;`,
//! each header written in one write on a fresh connection from 127.0.0.1, followed by `GET /x
//! HTTP/1.1\r\nHost: a\r\n\r\n`. Log lines without their date, pid and `*N`; `SERVER` is
//! `127.0.0.1:PORT` of the listener; quoted bytes are raw in error.log (CR, LF, NUL as such).
//! - served, `$remote_addr` the header's source: v1 `TCP4` (`192.0.2.7`), `TCP6`
//!   (`2001:db8::7`); v2 `PROXY` IPv4 and IPv6, with TLVs or not. Access log `$remote_addr
//!   $proxy_protocol_addr $proxy_protocol_port $proxy_protocol_server_addr
//!   $proxy_protocol_server_port $status`: `192.0.2.7 192.0.2.7 51000 198.51.100.9 443 200`.
//! - served, `$remote_addr` the peer (127.0.0.1), the variables empty (`- - - -`): v1 `UNKNOWN`
//!   (with or without addresses), v2 `LOCAL`.
//! - served although malformed (nginx is lax; the tests require sluice to refuse them): `PROXY
//!   TCP4 192.0.2.999 …` (`$proxy_protocol_addr` `192.0.2.999`, `$remote_addr` stays 127.0.0.1)
//!   and a v1 line over 107 bytes whose address is 100 digits (the digits become
//!   `$proxy_protocol_addr`).
//! - closed without a byte, nothing forwarded, one line:
//!   - missing header, garbage, v1 port 70000: `[error] broken header: "<every byte of the first
//!     read, request included>" while reading PROXY protocol, client: 127.0.0.1, server: SERVER`;
//!   - v2 version nibble 3: `[error] unknown PROXY protocol version: 3 while reading PROXY
//!     protocol, client: 127.0.0.1, server: SERVER`;
//!   - v2 announcing 200 bytes, sending 12, then FIN: `[error] header is too large while reading
//!     PROXY protocol, client: 127.0.0.1, server: SERVER`;
//!   - v2 length 4, shorter than the IPv4 address block: no line at all.
//! - the header split across two segments 50 ms apart: nginx 1.22 parses its first read only and
//!   closes: `[error] broken header: "PROXY TCP4 192.0.2.7 " while reading PROXY protocol, …`
//!   (v2: the first 10 bytes, raw). sluice must read the whole header and serve the request.
//! - `client_header_timeout 1s`, nothing sent: closed after 1.0 s, `[info] client timed out (110:
//!   Connection timed out) while reading PROXY protocol, client: 127.0.0.1, server: SERVER`. A
//!   header trickling in a byte at a time is `broken header: "P"` at once in nginx; sluice must
//!   wait for it and close at the timeout with the same timeout line.
//! - a PROXY line to a listener without `proxy_protocol`: `400` (`Connection: close`), `[info]
//!   client sent invalid request while reading client request line, client: 127.0.0.1, server:
//!   , request: "PROXY TCP4 192.0.2.7 198.51.100.9 51000 443"`; a v2 header: `400`, `[info]
//!   client sent invalid method while reading client request line, …, request: "\0"` (a NUL).
//!
//! # Where sluice differs on purpose
//! - A `broken header` entry quotes the same bytes, what was read, but escaped as `\xNN`
//!   ([`quoted_line`]): nginx writes its whole first read raw, so a client writes lines of its
//!   own into nginx's error log.
//! - A v2 length shorter than its address block is `broken header: PROXY protocol v2 addresses
//!   shorter than their family` (nginx: no line).
//! - A header is read across segments; one announcing more than it sends and then closing is
//!   judged when the client closes, as nginx judges its first read (`header is too large`);
//!   more than 4096 bytes announced is `header is too large` on both, at once.
//!
//! # Layout
//! - this file: the configurations both sides share, raw exchanges observed on both, error-log
//!   entries (a `broken header` entry spans several lines);
//! - [`headers`]: PROXY headers written by hand: accepted, refused, lax in nginx, split, slow;
//!   a PROXY line to a listener without `proxy_protocol`;
//! - [`haproxy`]: HAProxy's `send-proxy` and `send-proxy-v2` in front of each side: per-client
//!   limits, what the upstream and the access log see; `real_ip` from an untrusted range;
//! - [`tls`]: TLS and HTTP/2 terminated behind HAProxy's `send-proxy-v2`.

mod haproxy;
mod headers;
mod tls;

use std::net::SocketAddr;
use std::sync::OnceLock;

use tokio::time::{Duration, Instant};

use super::*;
use crate::support::raw::{Step, exchange};

/// `log_format` of every access log here.
const PP_FORMAT: &str = "$remote_addr $proxy_protocol_addr $proxy_protocol_port \
                         $proxy_protocol_server_addr $proxy_protocol_server_port $status";

/// The request written after a header.
const REQUEST: &[u8] = b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n";

/// What a test's two configurations say, besides what they all share: one server whose
/// `listen` has `flags`, trusting `trusted` for `real_ip_header proxy_protocol`,
/// `client_header_timeout 1s`, the access log in [`PP_FORMAT`] (nginx's `logs/pp.log`, sluice's
/// stdout), `limit_req_status 429`, proxying with `X-Real-IP` and `X-Forwarded-For` set.
struct Setup<'a> {
    flags: &'a str,
    trusted: &'a str,
    /// Zones `(name, key, rate)`, 1m each.
    zones: &'a [(&'a str, &'a str, &'a str)],
    /// Locations `(prefix, zone, burst)`, each with `limit_req … nodelay`; none: one `/`
    /// without a limit.
    locations: &'a [(&'a str, &'a str, u32)],
    /// More `proxy_set_header`s, `(name, value)`.
    headers: &'a [(&'a str, &'a str)],
    /// More lines for nginx's `server { }` and sluice's `[[servers]]` (certificates).
    nginx_server: String,
    sluice_server: String,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Setup {
            flags: "proxy_protocol",
            trusted: "127.0.0.1",
            zones: &[],
            locations: &[],
            headers: &[],
            nginx_server: String::new(),
            sluice_server: String::new(),
        }
    }
}

impl Setup<'_> {
    /// nginx's `http { }` inside, proxying to `up`.
    fn nginx(&self, up: SocketAddr) -> String {
        let zones: String = self
            .zones
            .iter()
            .map(|(name, key, rate)| {
                format!("  limit_req_zone {key} zone={name}:1m rate={rate};\n")
            })
            .collect();
        let mut headers = String::from(
            "proxy_set_header X-Real-IP $remote_addr; \
             proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
        );
        for (name, value) in self.headers {
            headers.push_str(&format!(" proxy_set_header {name} {value};"));
        }
        let location = |path: &str, limit: String| {
            format!("    location {path} {{ {limit}{headers} proxy_pass http://{up}; }}\n")
        };
        let locations: String = if self.locations.is_empty() {
            location("/", String::new())
        } else {
            self.locations
                .iter()
                .map(|(path, zone, burst)| {
                    location(
                        path,
                        format!("limit_req zone={zone} burst={burst} nodelay; "),
                    )
                })
                .collect()
        };
        let (flags, trusted, server) = (self.flags, self.trusted, &self.nginx_server);
        format!(
            "
  log_format pp '{PP_FORMAT}';
  limit_req_status 429;
{zones}  server {{
    listen {flags};
    set_real_ip_from {trusted};
    real_ip_header proxy_protocol;
    client_header_timeout 1s;
    access_log logs/pp.log pp;
    {server}
{locations}  }}"
        )
    }

    /// sluice's twin of [`Setup::nginx`].
    fn sluice(&self, up: SocketAddr) -> String {
        let zones: String = self
            .zones
            .iter()
            .map(|(name, key, rate)| {
                format!("[zones.{name}]\nkey = \"{key}\"\nsize = \"1m\"\nrate = \"{rate}\"\n\n")
            })
            .collect();
        let mut headers = String::from(
            "\"X-Real-IP\" = \"$remote_addr\", \"X-Forwarded-For\" = \"$proxy_add_x_forwarded_for\"",
        );
        for (name, value) in self.headers {
            headers.push_str(&format!(", \"{name}\" = \"{value}\""));
        }
        let locations: String = if self.locations.is_empty() {
            "[[servers.locations]]\npath = \"/\"\n".to_owned()
        } else {
            self.locations
                .iter()
                .map(|(path, zone, burst)| {
                    format!(
                        "[[servers.locations]]\npath = \"{path}\"\nlimit_req = {{ zone = \"{zone}\", \
                         burst = {burst}, nodelay = true }}\n\n"
                    )
                })
                .collect()
        };
        let (flags, trusted, server) = (self.flags, self.trusted, &self.sluice_server);
        format!(
            r#"limit_req_status      = 429
log_format            = "{PP_FORMAT}"
access_log            = "stdout"
client_header_timeout = "1s"

{zones}[[servers]]
listen           = "{flags}"
proxy_pass       = "http://{up}"
real_ip          = {{ from = ["{trusted}"], header = "proxy_protocol" }}
proxy_set_header = {{ {headers} }}
{server}

{locations}"#
        )
    }

    /// nginx and sluice on this setup.
    fn start(&self) -> Pair {
        Pair::start(|up| self.nginx(up), |up| self.sluice(up))
    }
}

/// A pair with one `proxy_protocol` server each, trusting 127.0.0.1, no limit.
fn plain_pair() -> Pair {
    Setup::default().start()
}

/// The value the upstream echoed for the request field `name` (case-insensitive).
fn echoed(reply: &Reply, name: &str) -> Option<String> {
    reply.body_text().lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

/// One side of a [`Pair`], as the raw exchanges see it.
struct Side<'a> {
    name: &'static str,
    addr: SocketAddr,
    upstream: &'a Upstream,
    error_log: Box<dyn Fn() -> String + Send + Sync + 'a>,
    access_log: Box<dyn Fn() -> String + Send + Sync + 'a>,
}

impl Pair {
    /// (nginx, sluice) as [`Side`]s: nginx's access log is `logs/pp.log`, sluice's its stdout.
    fn sides(&self) -> (Side<'_>, Side<'_>) {
        let prefix = self.nginx.prefix().to_owned();
        (
            Side {
                name: "nginx",
                addr: self.nginx.addr(),
                upstream: &self.nginx_upstream,
                error_log: Box::new(|| self.nginx.error_log()),
                access_log: Box::new(move || {
                    std::fs::read_to_string(prefix.join("logs/pp.log")).unwrap_or_default()
                }),
            },
            Side {
                name: "sluice",
                addr: self.sluice.addr(),
                upstream: &self.sluice_upstream,
                error_log: Box::new(|| self.sluice.log()),
                access_log: Box::new(|| self.sluice.stdout()),
            },
        )
    }
}

/// What one raw exchange did.
#[derive(Debug)]
struct Observed {
    /// The response's status; None when the connection closed without a byte.
    status: Option<u16>,
    /// The upstream's echo of `X-Real-IP` and `X-Forwarded-For`.
    real_ip: Option<String>,
    xff: Option<String>,
    /// Requests the upstream read meanwhile.
    forwarded: usize,
    /// The server closed the connection (else it was left idle, kept alive).
    closed: bool,
    /// From the first byte written to the close or the last byte read.
    elapsed: Duration,
    /// Error-log entries written meanwhile ([`entries`]), `SERVER` for the listener.
    log: Vec<String>,
    /// Access-log lines written meanwhile.
    access: Vec<String>,
}

/// Writes `steps` to `side` from 127.0.0.1 and reads until the server closes, or nothing came
/// for 250 ms after the last step, or `limit` passes; then what the logs and upstream say.
async fn observe(side: &Side<'_>, steps: &[Step], limit: Duration) -> Observed {
    let (log_mark, access_mark) = ((side.error_log)().len(), (side.access_log)().len());
    let hits = side.upstream.hits();
    let start = Instant::now();
    let ex = exchange(
        side.addr,
        client(1),
        steps,
        Duration::from_millis(250),
        limit,
    )
    .await;
    let elapsed = if ex.closed {
        start.elapsed()
    } else {
        start.elapsed().saturating_sub(Duration::from_millis(250))
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let reply = (!ex.bytes.is_empty()).then(|| {
        Reply::parse(&ex.bytes)
            .unwrap_or_else(|e| panic!("{}: a malformed answer: {e}: {:?}", side.name, ex.bytes))
    });
    let log = (side.error_log)();
    let access = (side.access_log)();
    Observed {
        status: reply.as_ref().map(|r| r.status),
        real_ip: reply.as_ref().and_then(|r| echoed(r, "x-real-ip")),
        xff: reply.as_ref().and_then(|r| echoed(r, "x-forwarded-for")),
        forwarded: side.upstream.hits() - hits,
        closed: ex.closed,
        elapsed,
        log: entries(log.get(log_mark..).unwrap_or_default(), side.addr),
        access: access
            .get(access_mark..)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect(),
    }
}

/// The error-log entries of `log` (an entry begins with a date and may span lines: nginx writes
/// a broken header's bytes raw), each as `[level] message`: date, pid and `*N` cut, `addr` (the
/// listener) written `SERVER`. nginx's `closed keepalive connection` lines (a kept-alive
/// connection of an earlier exchange) are left out.
fn entries(log: &str, addr: SocketAddr) -> Vec<String> {
    static DATE: OnceLock<regex::Regex> = OnceLock::new();
    let date = DATE.get_or_init(|| {
        regex::Regex::new(r"(?m)^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} ").expect("a regex")
    });
    let starts: Vec<usize> = date.find_iter(log).map(|m| m.start()).collect();
    let mut out = Vec::new();
    for (i, &at) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(log.len());
        let entry = log[at..end].strip_suffix('\n').unwrap_or(&log[at..end]);
        let Some(level_at) = entry.find(" [") else {
            continue;
        };
        let rest = &entry[level_at + 1..];
        let (level, msg) = rest.split_once(' ').unwrap_or((rest, ""));
        let msg = match msg.split_once(": ") {
            Some((pid, m)) if pid.contains('#') => m,
            _ => msg,
        };
        let msg = match msg.strip_prefix('*') {
            Some(m) => m.split_once(' ').map_or(m, |(_, m)| m),
            None => msg,
        };
        if msg.contains("closed keepalive connection") {
            continue;
        }
        out.push(format!(
            "{level} {}",
            msg.replace(&addr.to_string(), "SERVER")
        ));
    }
    out
}

/// The lines of an access log in [`PP_FORMAT`], sorted, the client port (a number) written
/// `PORT` and `front` (HAProxy's port) written `FRONT`. Other values stay as they are.
fn access_shapes(log: &str, front: u16) -> Vec<String> {
    let mut out: Vec<String> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut f: Vec<String> = l.split(' ').map(str::to_owned).collect();
            if f.len() == 6 {
                if f[2].parse::<u16>().is_ok() {
                    f[2] = "PORT".to_owned();
                }
                if f[4] == front.to_string() {
                    f[4] = "FRONT".to_owned();
                }
            }
            f.join(" ")
        })
        .collect();
    out.sort();
    out
}

/// `n` times the access line `remote pp_addr PORT 127.0.0.1 FRONT status`.
fn lines(n: usize, remote: &str, pp_addr: &str, status: u16) -> Vec<String> {
    vec![format!("{remote} {pp_addr} PORT 127.0.0.1 FRONT {status}"); n]
}

/// What a case must do on one side.
#[derive(Clone, Debug)]
enum Want {
    /// `200` from the upstream, which saw `X-Real-IP` and `X-Forwarded-For` = this address;
    /// no error-log entry; this access-log line.
    Served {
        real_ip: &'static str,
        access: &'static str,
    },
    /// Closed without a byte, nothing forwarded, exactly these error-log entries.
    Refused { log: Vec<String> },
}

/// How `seen` differs from what `want` says, one sentence each (none: as wanted).
fn differences(seen: &Observed, want: &Want) -> Vec<String> {
    let mut out = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            out.push(what);
        }
    };
    match want {
        Want::Served { real_ip, access } => {
            expect(
                seen.status == Some(200),
                format!("status {:?}, not 200", seen.status),
            );
            expect(
                seen.forwarded == 1,
                format!("forwarded {} requests, not 1", seen.forwarded),
            );
            for (field, value) in [("X-Real-IP", &seen.real_ip), ("X-Forwarded-For", &seen.xff)] {
                let ok = value.as_deref() == Some(*real_ip);
                expect(ok, format!("upstream's {field} {value:?}, not {real_ip}"));
            }
            expect(
                seen.log.is_empty(),
                format!("error log {:?}, not empty", seen.log),
            );
            expect(
                seen.access == [*access],
                format!("access log {:?}, not [{access:?}]", seen.access),
            );
        }
        Want::Refused { log } => {
            expect(seen.status.is_none(), format!("answered {:?}", seen.status));
            expect(seen.closed, "kept the connection open".to_owned());
            expect(
                seen.forwarded == 0,
                format!("forwarded {} requests", seen.forwarded),
            );
            expect(
                seen.access.is_empty(),
                format!("access log {:?}", seen.access),
            );
            expect(
                &seen.log == log,
                format!("error log {:?}, not {log:?}", seen.log),
            );
        }
    }
    out
}

/// Panics with the differences between `seen` on `side` and `want`.
fn check(case: &str, side: &str, seen: &Observed, want: &Want) {
    let found = differences(seen, want);
    assert!(
        found.is_empty(),
        "{case}: {side}: {}\n{seen:#?}",
        found.join("; ")
    );
}

/// Each case on both sides at once, one case after another: nginx checked against its `Want`
/// (every case first: the oracle), then sluice against its own. Panics with every case's
/// differences.
async fn run_cases(pair: &Pair, cases: Vec<(&str, Vec<Step>, Want, Want)>, limit: Duration) {
    let (n, s) = pair.sides();
    let (mut oracle, mut sluice) = (Vec::new(), Vec::new());
    for (case, steps, want_n, want_s) in cases {
        let (seen_n, seen_s) = tokio::join!(observe(&n, &steps, limit), observe(&s, &steps, limit));
        for (problems, seen, want) in [(&mut oracle, seen_n, want_n), (&mut sluice, seen_s, want_s)]
        {
            let found = differences(&seen, &want);
            if !found.is_empty() {
                problems.push(format!(
                    "{case}:\n    - {}\n    {seen:?}",
                    found.join("\n    - ")
                ));
            }
        }
    }
    assert!(
        oracle.is_empty(),
        "nginx (the oracle) did not do what it should:\n  {}",
        oracle.join("\n  ")
    );
    assert!(
        sluice.is_empty(),
        "sluice differs:\n  {}",
        sluice.join("\n  ")
    );
}

/// `[error] broken header: "BYTES" while reading PROXY protocol, client: 127.0.0.1, server:
/// SERVER`, nginx's line for `bytes` (as raw text).
fn broken_header(bytes: &[u8]) -> String {
    format!(
        "[error] broken header: \"{}\"{READING}",
        String::from_utf8_lossy(bytes)
    )
}

/// sluice's `broken header` entry for `bytes`: nginx's, every byte read quoted (up to 512), with
/// every byte outside printable ASCII, `"` and `\` written `\xNN` (nginx's access log escaping),
/// so that a client cannot write lines of its own into the error log.
fn quoted_line(bytes: &[u8]) -> String {
    let shown: String = bytes[..bytes.len().min(512)]
        .iter()
        .map(|&b| match b {
            b'"' | b'\\' => format!("\\x{b:02X}"),
            0x20..0x7f => char::from(b).to_string(),
            _ => format!("\\x{b:02X}"),
        })
        .collect();
    format!("[error] broken header: \"{shown}\"{READING}")
}

/// The end of every line about a connection whose PROXY header is being read.
const READING: &str = " while reading PROXY protocol, client: 127.0.0.1, server: SERVER";
