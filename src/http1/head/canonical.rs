//! The canonical head, the only bytes hyper parses: one space between the
//! parts of the request line, an origin-form target hyper's `http::Uri`
//! accepts, `host` from an absolute-form target, `name: value` fields with
//! their names lowercased and their spaces trimmed, `CRLF` line ends.
//!
//! Why rewrite rather than pass the client's bytes through: two parsers
//! (nginx's rules here, hyper's after) must never disagree on a request;
//! handing hyper only what this reader wrote, in the narrowest form both
//! read the same way, makes that hold by construction.

use super::request_line::LineParts;
use crate::http1::fields::Span;

/// The canonical request line (and, for an absolute-form target, the `Host`
/// it stands for, noted in `spans`) into `c`; returns the request line's
/// length without its CRLF, for log lines. `available` bytes of the head
/// are at hand.
pub(super) fn request_line(
    (c, spans): (&mut Vec<u8>, &mut Vec<Span>),
    parsed: &LineParts<'_>,
    available: usize,
) -> usize {
    // Most heads arrive whole: room for all of it at once.
    c.reserve(available.min(8192) + 64);
    c.extend_from_slice(parsed.method);
    c.push(b' ');
    if parsed.plain {
        c.extend_from_slice(parsed.path);
    } else {
        canonical_target(c, parsed.path, parsed.query);
    }
    c.extend_from_slice(if parsed.http11 {
        b" HTTP/1.1"
    } else {
        b" HTTP/1.0"
    });
    let len = c.len();
    c.extend_from_slice(b"\r\n");
    if let Some(a) = parsed.authority {
        // (Nothing was sent as this field: no `sent` to copy.)
        field((c, spans), b"host", a, &[]);
    }
    len
}

/// One header field kept, as `name: value` CRLF, the name lowercased (as
/// every reader of the canonical head compares names: HTTP/2's are, and
/// `http::HeaderName` lowercases); where its name and value are noted in
/// `spans` (the value without surrounding spaces and tabs, as hyper read
/// values), so that the fields are read in place, never parsed again.
/// `sent` is the field as it came (`name` its start, `:` after it, `value`
/// its end): most clients send `name: value` already, which is then copied
/// in one piece rather than four.
pub(super) fn field(
    (c, spans): (&mut Vec<u8>, &mut Vec<Span>),
    name: &[u8],
    value: &[u8],
    sent: &[u8],
) {
    let at = c.len();
    let value_at = at + name.len() + 2;
    // `sent` is `name` `:` then `value` after spaces; one byte more than
    // both with a space after the colon is exactly `name: value`.
    if sent.len() == name.len() + 2 + value.len() && sent.get(name.len() + 1) == Some(&b' ') {
        c.reserve(sent.len() + 2);
        c.extend_from_slice(sent);
    } else {
        c.reserve(name.len() + value.len() + 4);
        c.extend_from_slice(name);
        c.extend_from_slice(b": ");
        c.extend_from_slice(value);
    }
    c.extend_from_slice(b"\r\n");
    crate::http1::lowercase(&mut c[at..at + name.len()]);
    let blank = |b: &u8| matches!(b, b' ' | b'\t');
    let from = value.iter().position(|b| !blank(b)).unwrap_or(value.len());
    let to = value
        .iter()
        .rposition(|b| !blank(b))
        .map_or(from, |i| i + 1);
    spans.push(Span::new(at, name.len(), value_at + from, to - from));
}

/// The target as hyper's `http::Uri` accepts it: origin-form (an empty path
/// is `/`), and bytes the URI grammar does not allow raw (non-ASCII, `<`,
/// `\`, `^`, …) percent-encoded, which is what they mean.
fn canonical_target(out: &mut Vec<u8>, path: &[u8], query: Option<&[u8]>) {
    if path.is_empty() {
        out.push(b'/');
    }
    escaped(out, path, &PATH_RAW);
    if let Some(q) = query {
        out.push(b'?');
        escaped(out, q, &QUERY_RAW);
    }
}

/// `bytes` into `out`, those not `raw` percent-encoded; runs of raw bytes
/// (most targets are one) copied whole.
fn escaped(out: &mut Vec<u8>, bytes: &[u8], raw: &[bool; 256]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !raw[usize::from(b)] {
            out.extend_from_slice(&bytes[from..i]);
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
            from = i + 1;
        }
    }
    out.extend_from_slice(&bytes[from..]);
}

/// The path bytes written as they are.
static PATH_RAW: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = path_raw(i as u8);
        i += 1;
    }
    t
};

/// Whether a path byte is written as it is.
pub(super) const fn path_raw(b: u8) -> bool {
    matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x40..=0x5F | 0x61..=0x7A | 0x7C | 0x7E)
        || b == b'"'
        || b == b'{'
        || b == b'}'
}

/// The query bytes written as they are.
static QUERY_RAW: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = matches!(i as u8, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x7E);
        i += 1;
    }
    t
};
