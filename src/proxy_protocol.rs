//! The PROXY protocol header (HAProxy's, versions 1 and 2), read as nginx's
//! `listen … proxy_protocol` reads it, only stricter where nginx is lax.
//!
//! A load balancer that opens every connection from its own address tells
//! the server who the client is in a header before the connection's first
//! byte of TLS or HTTP: a text line in version 1
//! (`PROXY TCP4 192.0.2.7 198.51.100.1 51234 443\r\n`), a binary block in
//! version 2 (a 12-byte signature, version and command, family and
//! transport, a length, the addresses, then TLVs). As nginx does, the two
//! are told apart by version 2's signature; anything else must be a
//! version 1 line.
//!
//! [`parse`] is pure and incremental: it is given every byte read so far
//! and answers [`Parsed::Incomplete`] while they are a valid beginning, so
//! a header split across TCP segments is read whole (nginx 1.22 judges the
//! first read alone and closes such a connection). It is bounded: a
//! version 1 line is at most [`V1_MAX`] bytes (the protocol's own bound,
//! nginx's too), a version 2 header at most [`V2_MAX`].
//!
//! Where nginx 1.22 accepts what the protocol forbids, this parser refuses
//! (the connection is closed): addresses that are not of the line's family
//! (nginx keeps any hex digits, dots and colons as the address text),
//! version 2 commands other than LOCAL and PROXY (the specification says a
//! receiver must drop them), a short address block (nginx closes silently;
//! here with a line). Like nginx, it accepts `UNKNOWN` lines, LOCAL
//! commands (a load balancer's health check), and families and transports
//! it does not use (UNIX sockets, datagrams), all without addresses: the
//! connection's own are used. TLVs are skipped, within the header's stated
//! length, and never read: nothing in them names the client.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Version 1's bound: `PROXY TCP6` with two full IPv6 addresses and ports
/// is 104 bytes; the specification allows 107 with its CRLF.
pub const V1_MAX: usize = 107;

/// Version 2's bound, signature and TLVs included (nginx 1.25's; 1.22
/// takes what fits its first read: 1 KB on plain addresses).
pub const V2_MAX: usize = 4096;

/// Version 2's 12-byte signature.
const SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The addresses a header names: the client's (`$proxy_protocol_addr`,
/// `$proxy_protocol_port`) and the one it connected to
/// (`$proxy_protocol_server_addr`, `$proxy_protocol_server_port`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addresses {
    pub source: SocketAddr,
    pub destination: SocketAddr,
}

/// A whole header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Its length: the connection's own bytes begin after it.
    pub len: usize,
    /// `None`: `UNKNOWN`, LOCAL, or a family or transport without
    /// addresses to use (the connection's own stand).
    pub addresses: Option<Addresses>,
}

/// What the bytes read so far are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A valid beginning: read on.
    Incomplete,
    Done(Header),
}

/// Why a header is refused; its `Display` is the error-log message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Broken {
    /// Not a header, or a malformed version 1 line: nginx's `broken header:
    /// "…"` with the bytes read (escaped: the error log is one line each).
    Line(Vec<u8>),
    /// Version 2's signature with another version.
    Version(u8),
    /// Version 2 with a command the protocol does not define.
    Command(u8),
    /// Version 2 longer than [`V2_MAX`], or cut short ([`cut_short`]).
    TooLarge,
    /// Version 2 whose address block is shorter than its family's.
    ShortAddresses,
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Broken::Line(shown) => {
                // The error log is text: what nginx would write raw is
                // escaped as nginx's log_format escapes it (ASCII out).
                let mut escaped = Vec::with_capacity(shown.len());
                for &b in shown {
                    crate::fmt::push_log_escaped(&mut escaped, b);
                }
                write!(
                    f,
                    "broken header: \"{}\"",
                    String::from_utf8_lossy(&escaped)
                )
            }
            Broken::Version(v) => write!(f, "unknown PROXY protocol version: {v}"),
            Broken::Command(c) => write!(f, "unknown PROXY protocol v2 command: {c}"),
            Broken::TooLarge => f.write_str("header is too large"),
            Broken::ShortAddresses => {
                f.write_str("broken header: PROXY protocol v2 addresses shorter than their family")
            }
        }
    }
}

impl Broken {
    /// nginx's `broken header` of what was read: all of it, as nginx
    /// quotes its whole first read (here up to [`SHOWN_MAX`] bytes).
    fn line(buf: &[u8]) -> Broken {
        Broken::Line(buf[..buf.len().min(SHOWN_MAX)].to_vec())
    }
}

/// How much of what was read a `broken header` line shows.
pub const SHOWN_MAX: usize = 512;

/// What a header cut short by the end of the connection is, as nginx
/// judges a first read that holds no whole header: a version 2 header
/// whose announced length did not arrive is "too large", anything else a
/// broken line. `buf` is what [`parse`] found incomplete.
pub fn cut_short(buf: &[u8]) -> Broken {
    if buf.len() >= 16 && buf.starts_with(SIGNATURE) {
        Broken::TooLarge
    } else {
        Broken::line(buf)
    }
}

/// The header at the start of `buf` (every byte read so far).
pub fn parse(buf: &[u8]) -> Result<Parsed, Broken> {
    let sig = buf.len().min(SIGNATURE.len());
    if buf[..sig] == SIGNATURE[..sig] && !buf.is_empty() {
        if buf.len() < 16 {
            return Ok(Parsed::Incomplete);
        }
        return v2(buf);
    }
    v1(buf)
}

/// A version 1 line: `PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n` or
/// `PROXY UNKNOWN…\r\n`.
fn v1(buf: &[u8]) -> Result<Parsed, Broken> {
    let broken = || Broken::line(buf);
    let prefix = buf.len().min(6);
    if buf[..prefix] != b"PROXY "[..prefix] {
        return Err(broken());
    }
    let Some(lf) = buf[..buf.len().min(V1_MAX)]
        .iter()
        .position(|&b| b == b'\n')
    else {
        return if buf.len() < V1_MAX {
            Ok(Parsed::Incomplete)
        } else {
            Err(broken())
        };
    };
    let line = buf[..lf].strip_suffix(b"\r").ok_or_else(broken)?;
    let rest = &line[6..];
    if rest.starts_with(b"UNKNOWN") {
        return Ok(Parsed::Done(Header {
            len: lf + 1,
            addresses: None,
        }));
    }
    let addresses = v1_addresses(rest).ok_or_else(broken)?;
    Ok(Parsed::Done(Header {
        len: lf + 1,
        addresses: Some(addresses),
    }))
}

/// `TCP4 SRC DST SPORT DPORT`, single spaces, addresses of the family.
/// Read from the bytes in one pass (a connection pays for it).
fn v1_addresses(rest: &[u8]) -> Option<Addresses> {
    let mut words = rest.split(|&b| b == b' ');
    let v6 = match words.next()? {
        b"TCP4" => false,
        b"TCP6" => true,
        _ => return None,
    };
    let (src, dst) = (words.next()?, words.next()?);
    let (sport, dport) = (words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let ip = |w: &[u8]| -> Option<IpAddr> {
        if v6 {
            std::str::from_utf8(w)
                .ok()?
                .parse::<Ipv6Addr>()
                .ok()
                .map(IpAddr::V6)
        } else {
            ipv4(w).map(IpAddr::V4)
        }
    };
    Some(Addresses {
        source: SocketAddr::new(ip(src)?, port(sport)?),
        destination: SocketAddr::new(ip(dst)?, port(dport)?),
    })
}

/// A dotted quad as Rust's `Ipv4Addr` reads one (no leading zeros, no
/// more than 255), from bytes.
fn ipv4(w: &[u8]) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = w.split(|&b| b == b'.');
    for o in &mut octets {
        let p = parts.next()?;
        if p.len() > 1 && p[0] == b'0' {
            return None;
        }
        *o = u8::try_from(number(p, 3)?).ok()?;
    }
    parts.next().is_none().then_some(Ipv4Addr::from(octets))
}

/// One to `most` decimal digits.
fn number(p: &[u8], most: usize) -> Option<u32> {
    if p.is_empty() || p.len() > most {
        return None;
    }
    p.iter().try_fold(0u32, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
    })
}

/// A decimal port of one to five digits, as nginx reads it.
fn port(p: &[u8]) -> Option<u16> {
    u16::try_from(number(p, 5)?).ok()
}

/// A version 2 header, its 16 fixed bytes in `buf`.
fn v2(buf: &[u8]) -> Result<Parsed, Broken> {
    let (version, command) = (buf[12] >> 4, buf[12] & 0x0f);
    if version != 2 {
        return Err(Broken::Version(version));
    }
    if command > 1 {
        return Err(Broken::Command(command));
    }
    let len = 16 + usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    if len > V2_MAX {
        return Err(Broken::TooLarge);
    }
    let Some(block) = buf.get(16..len) else {
        return Ok(Parsed::Incomplete);
    };
    let (family, transport) = (buf[13] >> 4, buf[13] & 0x0f);
    // LOCAL (a health check), or what nginx does not use: no addresses.
    if command == 0 || transport != 1 || !(family == 1 || family == 2) {
        return Ok(Parsed::Done(Header {
            len,
            addresses: None,
        }));
    }
    let addresses = if family == 1 {
        let a = block.get(..12).ok_or(Broken::ShortAddresses)?;
        let ip = |at: usize| IpAddr::from([a[at], a[at + 1], a[at + 2], a[at + 3]]);
        let port = |at: usize| u16::from_be_bytes([a[at], a[at + 1]]);
        Addresses {
            source: SocketAddr::new(ip(0), port(8)),
            destination: SocketAddr::new(ip(4), port(10)),
        }
    } else {
        let a = block.get(..36).ok_or(Broken::ShortAddresses)?;
        let ip = |at: usize| {
            let mut b = [0u8; 16];
            b.copy_from_slice(&a[at..at + 16]);
            IpAddr::from(b)
        };
        let port = |at: usize| u16::from_be_bytes([a[at], a[at + 1]]);
        Addresses {
            source: SocketAddr::new(ip(0), port(32)),
            destination: SocketAddr::new(ip(16), port(34)),
        }
    };
    Ok(Parsed::Done(Header {
        len,
        addresses: Some(addresses),
    }))
}

#[cfg(test)]
mod tests;
