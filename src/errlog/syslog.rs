//! nginx's `syslog:` log target, for the error log and the access log.
//!
//! A message is sent as nginx 1.22 sends it (`ngx_syslog_add_header`),
//! measured byte for byte with a UDP listener: RFC 3164's
//! `<PRI>Mmm dd hh:mm:ss HOSTNAME TAG: MSG`, one datagram per line, no
//! trailing newline, `HOSTNAME` left out with `nohostname` (one space then,
//! not two). `PRI` is `facility * 8 + severity`; the error log's severity
//! is the line's level (its `severity=` is accepted and ignored, as
//! nginx's), the access log's is `severity=` (default `info`).
//!
//! Sending never waits: the socket is non-blocking, and a message the
//! kernel will not take at once (a full queue of a unix socket whose
//! reader is slow, a UDP server that is down and answers with ICMP, a
//! `unix:` path with no socket yet) is dropped and counted
//! ([`dropped`], `sluice_syslog_messages_dropped_total`). nginx too drops
//! such messages (its `ngx_syslog_send` is one non-blocking `send`), but
//! does not count them.
//!
//! Lines reach a peer through [`crate::batch`] like every other log line,
//! as frames (a length, then the message): a batch holds several messages
//! and each is sent as its own datagram.

use crate::fmt::Timestamp;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// nginx's facility names, by number.
const FACILITIES: [&str; 24] = [
    "kern", "user", "mail", "daemon", "auth", "intern", "lpr", "news", "uucp", "clock", "authpriv",
    "ftp", "ntp", "audit", "alert", "cron", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

/// nginx's severity names, by number (RFC 5424's order).
const SEVERITIES: [&str; 8] = [
    "emerg", "alert", "crit", "error", "warn", "notice", "info", "debug",
];

/// `local7`, nginx's default facility.
const LOCAL7: u8 = 23;
/// `info`, the access log's default severity.
const INFO: u8 = 6;
/// The longest tag nginx accepts.
const TAG_MAX: usize = 32;
/// RFC 3164's port, when `server=` names none.
const DEFAULT_PORT: u16 = 514;

/// Where a `syslog:` target sends.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Server {
    /// `server=HOST[:PORT]`, as written (resolved when compiled).
    Inet(String),
    /// `server=unix:PATH`: a datagram socket (`/dev/log`).
    Unix(PathBuf),
}

impl Server {
    /// The key peers are shared by: one socket per server.
    pub fn key(&self) -> String {
        match self {
            Server::Inet(a) => format!("syslog:udp:{a}"),
            Server::Unix(p) => format!("syslog:unix:{}", p.display()),
        }
    }
}

/// A `syslog:` target's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub server: Server,
    /// 0–23 (`local7` by default).
    pub facility: u8,
    /// `severity=`: the access log's (the error log's comes from the line).
    pub severity: u8,
    /// `tag=` (`sluice` by default; nginx's is `nginx`).
    pub tag: String,
    /// `nohostname`: no HOSTNAME field.
    pub nohostname: bool,
}

/// sluice's default tag: a program name of its own, so that a host running
/// nginx and sluice tells their lines apart (`tag=nginx` keeps filters
/// written for nginx).
pub const DEFAULT_TAG: &str = "sluice";

impl Params {
    /// nginx's `syslog:` parameters (what follows `syslog:`), with its
    /// wording for each error.
    pub fn parse(args: &str) -> Result<Params, String> {
        let mut server = None;
        let (mut facility, mut severity, mut tag) = (None, None, None);
        let mut nohostname = false;
        for p in args.split(',') {
            let dup = |set: bool, name: &str| {
                if set {
                    Err(format!("duplicate syslog \"{name}\""))
                } else {
                    Ok(())
                }
            };
            if let Some(s) = p.strip_prefix("server=") {
                dup(server.is_some(), "server")?;
                server = Some(parse_server(s)?);
            } else if let Some(s) = p.strip_prefix("facility=") {
                dup(facility.is_some(), "facility")?;
                let n = FACILITIES.iter().position(|f| *f == s);
                facility = Some(n.ok_or(format!("unknown syslog facility \"{s}\""))? as u8);
            } else if let Some(s) = p.strip_prefix("severity=") {
                dup(severity.is_some(), "severity")?;
                let n = SEVERITIES.iter().position(|f| *f == s);
                severity = Some(n.ok_or(format!("unknown syslog severity \"{s}\""))? as u8);
            } else if let Some(s) = p.strip_prefix("tag=") {
                dup(tag.is_some(), "tag")?;
                if s.len() > TAG_MAX {
                    return Err(format!("syslog tag length exceeds {TAG_MAX}"));
                }
                if !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                    return Err(
                        "syslog \"tag\" only allows alphanumeric characters and underscore".into(),
                    );
                }
                tag = Some(s.to_string());
            } else if p == "nohostname" {
                nohostname = true;
            } else {
                return Err(format!("unknown syslog parameter \"{p}\""));
            }
        }
        Ok(Params {
            server: server.ok_or("no syslog server specified")?,
            facility: facility.unwrap_or(LOCAL7),
            severity: severity.unwrap_or(INFO),
            tag: tag.unwrap_or_else(|| DEFAULT_TAG.to_string()),
            nohostname,
        })
    }

    /// The parameters as nginx's syntax, `server=…,facility=…` (only those
    /// that differ from the defaults after the server).
    pub fn to_nginx(&self) -> String {
        let mut s = match &self.server {
            Server::Inet(a) => format!("server={a}"),
            Server::Unix(p) => format!("server=unix:{}", p.display()),
        };
        if self.facility != LOCAL7 {
            s += &format!(",facility={}", FACILITIES[self.facility as usize]);
        }
        if self.severity != INFO {
            s += &format!(",severity={}", SEVERITIES[self.severity as usize]);
        }
        if self.tag != DEFAULT_TAG {
            s += &format!(",tag={}", self.tag);
        }
        if self.nohostname {
            s += ",nohostname";
        }
        s
    }

    /// Appends RFC 3164's header, `<PRI>Mmm dd hh:mm:ss HOST TAG: `, for a
    /// message of `severity` (0 emerg … 7 debug) sent at `now`.
    pub fn push_header(&self, out: &mut Vec<u8>, severity: u8, now: &Timestamp) {
        out.push(b'<');
        crate::fmt::push_u64(out, u64::from(self.facility) * 8 + u64::from(severity));
        out.push(b'>');
        now.push_syslog(out);
        out.push(b' ');
        if !self.nohostname {
            out.extend_from_slice(hostname().as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(self.tag.as_bytes());
        out.extend_from_slice(b": ");
    }
}

/// `HOST[:PORT]`, `[V6][:PORT]` or `unix:PATH`.
fn parse_server(s: &str) -> Result<Server, String> {
    if let Some(path) = s.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(format!(
                "no path in the unix domain socket in syslog server \"{s}\""
            ));
        }
        return Ok(Server::Unix(PathBuf::from(path)));
    }
    let (host, port) = split_port(s);
    if host.is_empty() {
        return Err(format!("no host in syslog server \"{s}\""));
    }
    if let Some(p) = port {
        if !matches!(p.parse::<u16>(), Ok(1..)) {
            return Err(format!("invalid port in syslog server \"{s}\""));
        }
    }
    Ok(Server::Inet(s.to_string()))
}

/// `host:port` → (host, Some(port)); `[v6]:port` likewise; a bare host or
/// IPv6 address → (host, None).
fn split_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':')),
            None => (s, None),
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (s, None),
    }
}

/// The host name, lower-cased as nginx sends it, read once.
pub fn hostname() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let mut buf = [0u8; 256];
        // SAFETY: `buf` is valid for its length; gethostname writes at most
        // that many bytes.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        match rc {
            0 => String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase(),
            _ => "localhost".to_string(),
        }
    })
}

static SENT: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Messages handed to the kernel since start.
pub fn sent() -> u64 {
    SENT.load(Ordering::Relaxed)
}

/// Messages dropped since start: the peer could not take them at once.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// A message of a batch: a length (4 bytes, native order), then the bytes.
/// `msg` appends the message; the length is filled in after.
pub fn push_frame(out: &mut Vec<u8>, msg: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    msg(out);
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_ne_bytes());
}

/// The messages of a batch of frames.
fn frames(mut bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let len = u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let msg = bytes.get(4..4 + len)?;
        bytes = &bytes[4 + len..];
        Some(msg)
    })
}

/// A syslog server's socket, shared by every target that names it.
pub struct Peer {
    server: Server,
    state: Mutex<Socket>,
}

enum Socket {
    Udp(std::net::UdpSocket),
    Unix(UnixDatagram),
    /// A `unix:` path that could not be connected (no syslog daemon yet):
    /// tried again at most once a second, on a send.
    Unconnected {
        next_try: u64,
    },
}

impl Peer {
    /// A peer for `server`: a UDP server's name is resolved now (nginx
    /// resolves it when reading its configuration); a unix socket that is
    /// not there yet is connected later.
    pub fn open(server: &Server) -> std::io::Result<Peer> {
        let state = match server {
            Server::Inet(addr) => Socket::Udp(udp(addr)?),
            Server::Unix(path) => unix(path).unwrap_or(Socket::Unconnected { next_try: 0 }),
        };
        Ok(Peer {
            server: server.clone(),
            state: Mutex::new(state),
        })
    }

    /// Sends each framed message of `bytes`, never waiting.
    pub fn send_frames(&self, bytes: &[u8]) {
        let mut state = self.state.lock();
        for msg in frames(bytes) {
            let sent = match &*state {
                Socket::Udp(s) => udp_send(s, msg),
                Socket::Unix(s) => s.send(msg).map(drop),
                Socket::Unconnected { .. } => Err(std::io::ErrorKind::NotConnected.into()),
            };
            match sent {
                Ok(()) => SENT.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    self.failed(&mut state, &e);
                    DROPPED.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
    }

    /// A unix socket whose reader went away (the daemon restarted) is
    /// connected again, at most once a second; a UDP socket stays as it is
    /// (the next datagram goes out whether or not the last was refused).
    fn failed(&self, state: &mut Socket, e: &std::io::Error) {
        let Server::Unix(path) = &self.server else {
            return;
        };
        let now = crate::clock::coarse_unix_secs();
        match state {
            Socket::Unix(_) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Socket::Unconnected { next_try } if *next_try > now => {}
            _ => {
                *state = unix(path).unwrap_or(Socket::Unconnected { next_try: now + 1 });
            }
        }
    }

    /// Reopening (USR1) connects a unix socket again, as nginx's new cycle
    /// does: a syslog daemon restarted since is reached.
    pub fn reopen(&self) {
        if let Server::Unix(path) = &self.server {
            *self.state.lock() = unix(path).unwrap_or(Socket::Unconnected { next_try: 0 });
        }
    }
}

/// A UDP send. A refusal is the ICMP answer to an earlier datagram (the
/// port had no server then), reported by this send instead of sending: it
/// is tried once more, so that a server that came back gets this line.
fn udp_send(s: &std::net::UdpSocket, msg: &[u8]) -> std::io::Result<()> {
    match s.send(msg) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => s.send(msg).map(drop),
        r => r.map(drop),
    }
}

fn udp(addr: &str) -> std::io::Result<std::net::UdpSocket> {
    use std::net::ToSocketAddrs;
    let with_port = match split_port(addr) {
        (_, Some(_)) => addr.to_string(),
        (host, None) if host.contains(':') => format!("[{host}]:{DEFAULT_PORT}"),
        (host, None) => format!("{host}:{DEFAULT_PORT}"),
    };
    let to: SocketAddr = with_port
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "host not found"))?;
    let local: SocketAddr = match to {
        SocketAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = std::net::UdpSocket::bind(local)?;
    s.connect(to)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

fn unix(path: &std::path::Path) -> std::io::Result<Socket> {
    let s = UnixDatagram::unbound()?;
    s.connect(path)?;
    s.set_nonblocking(true)?;
    Ok(Socket::Unix(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG_TAG: &str = "server=a,tag=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn parameters_read_as_nginx_reads_them() {
        let p =
            Params::parse("severity=alert,server=127.0.0.1:5140,tag=SEE_this,nohostname").unwrap();
        assert_eq!(p.server, Server::Inet("127.0.0.1:5140".into()));
        assert_eq!((p.facility, p.severity), (23, 1));
        assert_eq!((p.tag.as_str(), p.nohostname), ("SEE_this", true));
        let p = Params::parse("server=unix:/dev/log,facility=user").unwrap();
        assert_eq!(p.server, Server::Unix("/dev/log".into()));
        assert_eq!((p.facility, p.severity, p.tag.as_str()), (1, 6, "sluice"));
        assert_eq!(p.to_nginx(), "server=unix:/dev/log,facility=user");
        for (bad, why) in [
            ("tag=x", "no syslog server specified"),
            ("server=a,foo=1", "unknown syslog parameter \"foo=1\""),
            ("server=a,facility=x", "unknown syslog facility \"x\""),
            ("server=a,severity=x", "unknown syslog severity \"x\""),
            ("server=a,tag=a-b", "syslog \"tag\" only allows"),
            (LONG_TAG, "length exceeds 32"),
            ("server=a,server=b", "duplicate syslog \"server\""),
            (
                "server=a:99999",
                "invalid port in syslog server \"a:99999\"",
            ),
            ("server=unix:", "no path in the unix domain socket"),
            ("", "unknown syslog parameter \"\""),
            ("server=a,nohostname=1", "unknown syslog parameter"),
        ]
        .map(|(a, b)| (a.to_string(), b))
        {
            let e = Params::parse(&bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(Params::parse("server=[::1]:514").is_ok());
        assert!(Params::parse("server=[::1]").is_ok());
    }

    #[test]
    fn the_header_is_nginx_bytes() {
        let mut p = Params::parse("server=a,facility=user,tag=t").unwrap();
        let now = Timestamp::from_secs(1_796_646_578); // 2026-12-07 12:29:38
        let mut out = Vec::new();
        p.push_header(&mut out, 3, &now);
        let want = format!("<11>Dec  7 12:29:38 {} t: ", hostname());
        assert_eq!(String::from_utf8(out).unwrap(), want);
        p.nohostname = true;
        let mut out = Vec::new();
        p.push_header(&mut out, 7, &now);
        assert_eq!(out, b"<15>Dec  7 12:29:38 t: ");
    }

    #[test]
    fn frames_come_back_as_written() {
        let mut buf = Vec::new();
        push_frame(&mut buf, |o| o.extend_from_slice(b"one"));
        push_frame(&mut buf, |o| o.extend_from_slice(b""));
        push_frame(&mut buf, |o| o.extend_from_slice(b"a\nb"));
        let got: Vec<&[u8]> = frames(&buf).collect();
        assert_eq!(got, vec![&b"one"[..], b"", b"a\nb"]);
    }

    /// A unix socket nobody reads fills up: messages are dropped and
    /// counted, and the sender never waits.
    #[test]
    fn a_full_socket_drops_without_waiting() {
        let dir = std::env::temp_dir().join(format!("sluice-syslog-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("log.sock");
        let _ = std::fs::remove_file(&path);
        let _reader = UnixDatagram::bind(&path).unwrap();
        let peer = Peer::open(&Server::Unix(path.clone())).unwrap();
        let mut batch = Vec::new();
        for _ in 0..20 {
            push_frame(&mut batch, |o| o.extend_from_slice(&[b'x'; 200]));
        }
        let before = dropped();
        let start = crate::clock::now();
        for _ in 0..200 {
            peer.send_frames(&batch);
        }
        assert!(crate::clock::since(start) < std::time::Duration::from_secs(2));
        assert!(dropped() > before, "a full queue drops");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
