//! A request head, read with nginx's rules, to its canonical form or to
//! nginx's refusal.
//!
//! The grammar is nginx 1.22's (`ngx_http_parse_request_line`,
//! `ngx_http_parse_header_line`, `ngx_http_process_request_header`), learnt
//! from its behaviour and checked against it by the conformance suite
//! (tests/it/conformance.rs). In short:
//! - request line: method of `A-Z _ -`; one or more spaces; an origin-form
//!   target (`/…`) or an absolute-form one (`scheme://host[:port][/…|?…]`,
//!   no userinfo); `HTTP/1.x` (a major version above 1 is 505); bytes below
//!   0x20 and 0x7f refused in the target; the path's `%` escapes must be
//!   valid, decode to no NUL and climb no higher than `/`; CONNECT and TRACE
//!   are 405.
//! - header lines: names of letters, digits and `-` (and `_` with
//!   `underscores_in_headers`); a name with other visible bytes is invalid and
//!   dropped (`ignore_invalid_headers`, the default) or kept; a space, tab,
//!   control byte or leading `:` in a name, a NUL in a value, or a CR not
//!   followed by the line's end is a 400; obs-fold is a 400.
//! - unique headers (`Host`, `Content-Length`, `Transfer-Encoding`, `Expect`,
//!   `Authorization`, the conditional ones, `Content-Range`) twice is a 400;
//!   `Host` is validated (no `/`, space, control byte, `..`, not empty) and
//!   required in HTTP/1.1; `Content-Length` is digits; `Transfer-Encoding`
//!   must be exactly `chunked` (else 501), never with `Content-Length` and
//!   never in HTTP/1.0 (400).
//! - size: a 1 KB buffer, then at most `large_client_header_buffers` (4 × 8
//!   KB) into which no line may be split: a request line that does not fit
//!   is 414, a header line or a head that does not is 400 (nginx's 494).
//!
//! Where sluice is stricter than nginx, on purpose (config/operations.md "Security"):
//! HTTP/0.9 is refused (nginx answers it without headers), control bytes
//! other than tab in a header value are refused (nginx forwards them; hyper
//! and most backends cannot represent them), an invalid header name kept by
//! `ignore_invalid_headers = false` must still be an RFC 9110 token, and a
//! head has at most [`MAX_HEADERS`] fields (nginx has no count, only sizes).
//!
//! The parts: `request_line` and `header_line` are the two grammars,
//! `unique` the headers allowed once and the checks of the whole head
//! (`Host`, `Content-Length`, `Transfer-Encoding`), `buffers` nginx's
//! `large_client_header_buffers` arithmetic, and `canonical` how each part
//! is written for hyper. This file is the API ([`HeadParser`], [`parse_head`]
//! and what they answer) and the loop that cuts the input into lines.

mod buffers;
mod canonical;
mod header_line;
pub use header_line::any_control_byte;
mod request_line;
#[cfg(test)]
mod tests;
mod unique;

use crate::http1::fields::Wire;
use buffers::Buffers;
use std::fmt;

/// nginx's `client_header_buffer_size` default: where every head starts.
pub const CLIENT_HEADER_BUFFER: usize = 1024;

/// Header fields kept per request at most (hyper's own default; Apache's
/// `LimitRequestFields` and Envoy's `max_headers_count` are 100 too).
pub const MAX_HEADERS: usize = 100;

/// The directives that shape what a head may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadRules {
    /// `underscores_in_headers`: `_` is a valid name byte (default off).
    pub underscores_in_headers: bool,
    /// `ignore_invalid_headers`: drop fields with invalid names (default
    /// on); off keeps them.
    pub ignore_invalid_headers: bool,
    /// `large_client_header_buffers NUMBER SIZE` (default 4 8k).
    pub large_header_buffers: (usize, usize),
}

impl Default for HeadRules {
    fn default() -> Self {
        HeadRules {
            underscores_in_headers: false,
            ignore_invalid_headers: true,
            large_header_buffers: (4, 8192),
        }
    }
}

/// How the request's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// A head that nginx would accept, rewritten for hyper.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the input the head took (up to its empty line).
    pub len: usize,
    /// The head as hyper is given it.
    pub canonical: Vec<u8>,
    pub framing: Framing,
    /// Fields dropped as invalid, for nginx's info line each
    /// (`client sent invalid header line: "…"`), the first few only.
    pub dropped: Vec<Vec<u8>>,
    /// It asks to switch protocols ([`upgrade_asked`]): what follows it on
    /// the connection may not be HTTP (see [`super::Gate`]).
    pub upgrade: bool,
    /// Where each field is in `canonical`, in order.
    pub spans: Vec<crate::http1::fields::Span>,
    /// The lengths of the request line in `canonical` (without its CRLF)
    /// and of its method: its parts are where the reader of the head cuts
    /// it, without looking for them again.
    pub line: (usize, usize),
}

/// nginx's answer to a head it will not serve; the connection is closed
/// after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    /// nginx's error-log wording.
    pub reason: &'static str,
    /// Context for the log line: the offending header line, if one.
    pub detail: Option<Vec<u8>>,
    /// The request line, once it was read (for `request: "…"`).
    pub request_line: Option<Vec<u8>>,
    /// Whether the request line had been read (nginx says "while reading
    /// client request line" or "… headers").
    pub in_headers: bool,
    /// The fields kept before the refusal: nginx's log phase still has
    /// them (`$http_…`, and maps of them, in the access-log line). Boxed:
    /// a refusal is the error of every step of the head's reading.
    pub fields: Option<Box<Wire>>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason)?;
        if let Some(d) = &self.detail {
            write!(f, ": \"{}\"", String::from_utf8_lossy(d))?;
        }
        Ok(())
    }
}

/// The outcome of reading what has arrived so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole head yet, and nothing wrong so far.
    Partial,
    Head(Head),
    Refused(Refusal),
}

/// Reads a whole head from `buf` (a convenience over [`HeadParser`]).
#[cfg(any(test, feature = "fuzzing"))]
pub fn parse_head(buf: &[u8], rules: &HeadRules) -> Parsed {
    HeadParser::new(*rules).advance(buf)
}

/// Reads a head line by line as its bytes arrive: each line is looked at
/// once, however slowly it comes (a slowloris costs no repeated parsing).
#[derive(Clone, Debug)]
pub struct HeadParser {
    rules: HeadRules,
    /// Bytes of the input already read (whole lines).
    pos: usize,
    buffers: Buffers,
    /// The request line, once read.
    line: Option<RequestLine>,
    /// The canonical head so far, written as its lines are read (one
    /// buffer per head: the request line, `Host` for an absolute-form
    /// target, then the fields kept).
    canonical: Vec<u8>,
    /// Where each field kept is in `canonical`.
    spans: Vec<crate::http1::fields::Span>,
    count: usize,
    /// Unique headers seen (bit i: `UNIQUE[i]`).
    seen: u16,
    host: bool,
    /// `Some(None)`: a `Content-Length` that is not a length.
    content_length: Option<Option<u64>>,
    /// `Some(true)`: exactly `chunked`.
    transfer_encoding: Option<bool>,
    dropped: Vec<Vec<u8>>,
    /// An `Upgrade` field with a value, and a `Connection` field listing
    /// `upgrade`, were kept.
    upgrade: (bool, bool),
}

#[derive(Clone, Debug)]
struct RequestLine {
    /// The canonical request line's length in [`HeadParser::canonical`]
    /// (without its CRLF), for log lines.
    len: usize,
    /// Its method's length.
    method: usize,
    /// nginx answers CONNECT and TRACE with 405 once the head is read.
    refused_method: Option<&'static str>,
    /// Absolute-form: the target's authority replaces `Host`.
    absolute: bool,
    http11: bool,
}

impl HeadParser {
    pub fn new(rules: HeadRules) -> HeadParser {
        HeadParser {
            rules,
            pos: 0,
            buffers: Buffers::new(rules.large_header_buffers),
            line: None,
            canonical: Vec::new(),
            spans: Vec::new(),
            count: 0,
            seen: 0,
            host: false,
            content_length: None,
            transfer_encoding: None,
            dropped: Vec::new(),
            upgrade: (false, false),
        }
    }

    /// Whether any byte of a head has been read (a head has begun).
    pub fn started(&self) -> bool {
        self.pos > 0
    }

    /// Reads on in `buf`, which holds everything received for this head so
    /// far (the bytes given before, unchanged, and maybe more).
    pub fn advance(&mut self, buf: &[u8]) -> Parsed {
        loop {
            if self.line.is_none() {
                // nginx skips empty lines before a request line.
                while let Some(&b) = buf.get(self.pos) {
                    if b != b'\r' && b != b'\n' {
                        break;
                    }
                    if self.buffers.take(1).is_err() {
                        return Parsed::Refused(self.refuse(414, "client sent too long URI", None));
                    }
                    self.pos += 1;
                }
            }
            let rest = &buf[self.pos..];
            let Some(lf) = memchr(b'\n', rest) else {
                // nginx refuses at the first byte that cannot be right, not
                // at the line's end (a TLS hello or garbage gets its 400 now).
                if let Some(r) = self.refuses_prefix(rest) {
                    return Parsed::Refused(r);
                }
                if let Some(o) = self.buffers.refuses_partial(rest.len()) {
                    let detail = Some(rest.to_vec());
                    return Parsed::Refused(self.overflow(o, detail));
                }
                return Parsed::Partial;
            };
            let line = &rest[..lf];
            if let Err(o) = self.buffers.take(lf + 1) {
                // As when the line arrives in pieces: a byte that cannot be
                // right is refused as such before the line is too long
                // (nginx parses what fits first; found by the http1 fuzzer).
                if let Some(r) = self.refuses_prefix(line) {
                    return Parsed::Refused(r);
                }
                let detail = Some(line.to_vec());
                return Parsed::Refused(self.overflow(o, detail));
            }
            self.pos += lf + 1;
            let step = if self.line.is_none() {
                self.request_line(line, rest.len())
            } else {
                self.header_line(line)
            };
            match step {
                Ok(true) => return self.finish(),
                Ok(false) => {}
                Err(r) => return Parsed::Refused(r),
            }
        }
    }

    /// A line still without its end that is already wrong: a method byte
    /// outside `A-Z _ -`, or a space or control byte in a header name.
    fn refuses_prefix(&self, partial: &[u8]) -> Option<Refusal> {
        if self.line.is_none() {
            let method = partial.split(|&b| b == b' ').next().unwrap_or(partial);
            // A CR last is the line's end coming (the whole line decides
            // then), but the bytes before it are wrong already or not: the
            // same answer whatever the pieces (found by the http1 fuzzer).
            let method = method.strip_suffix(b"\r").unwrap_or(method);
            let bad = method
                .iter()
                .any(|&b| !(b.is_ascii_uppercase() || b == b'_' || b == b'-'));
            if bad {
                let mut r = self.refuse(400, "client sent invalid method", None);
                r.request_line = Some(partial.to_vec());
                return Some(r);
            }
            return None;
        }
        // The name, whether or not its colon has come (with the colon but
        // no line end yet, it is as wrong as it will be when the end comes;
        // found by the http1 fuzzer).
        let name = partial.split(|&b| b == b':').next().unwrap_or(partial);
        if name.is_empty() {
            return None;
        }
        if name.iter().any(|&b| b <= 0x20 && b != b'\r' || b == 0x7f) {
            let mut l = partial.to_vec();
            l.truncate(64);
            return Some(self.refuse(400, "client sent invalid header line", Some(l)));
        }
        None
    }

    fn refuse(&self, status: u16, reason: &'static str, detail: Option<Vec<u8>>) -> Refusal {
        Refusal {
            status,
            reason,
            detail,
            request_line: self.line.as_ref().map(|l| self.canonical[..l.len].to_vec()),
            in_headers: self.line.is_some(),
            fields: self.fields_so_far(),
        }
    }

    /// The fields kept so far, for a refusal (copied: refusals are rare).
    fn fields_so_far(&self) -> Option<Box<Wire>> {
        if self.spans.is_empty() {
            return None;
        }
        Some(Box::new(Wire::new(
            bytes::Bytes::copy_from_slice(&self.canonical),
            self.spans.clone(),
        )))
    }
}

/// Whether a request asks to switch protocols (RFC 9110 §7.8): HTTP/1.1 (an
/// `Upgrade` in HTTP/1.0 must be ignored), an `Upgrade` field with a value,
/// and the `upgrade` option in `Connection` (without it, `Upgrade` was not
/// meant for this hop). The head parser and the request's handler both
/// decide by these words, so the connection and the request agree on it.
pub fn upgrade_asked<'a>(
    http11: bool,
    upgrade: impl IntoIterator<Item = &'a [u8]>,
    connection: impl IntoIterator<Item = &'a [u8]>,
) -> bool {
    http11
        && upgrade.into_iter().any(|v| !v.trim_ascii().is_empty())
        && connection.into_iter().any(lists_upgrade)
}

/// A `Connection` value lists the `upgrade` option.
pub fn lists_upgrade(value: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade"))
}

/// The first `b` in `s`, eight bytes a step: a head's lines are tens of
/// bytes, and each is looked for its end once.
fn memchr(b: u8, s: &[u8]) -> Option<usize> {
    let pattern = LOW_BITS * u64::from(b);
    let (chunks, rest) = s.as_chunks::<8>();
    for (i, c) in chunks.iter().enumerate() {
        let found = zero_bytes(u64::from_le_bytes(*c) ^ pattern);
        if found != 0 {
            return Some(i * 8 + (found.trailing_zeros() / 8) as usize);
        }
    }
    let at = chunks.len() * 8;
    rest.iter().position(|&c| c == b).map(|i| at + i)
}

const LOW_BITS: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each zero byte of `x` set (and maybe of bytes above the
/// first zero one: the lowest bit set is always the first zero byte's).
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(LOW_BITS) & !x & HIGH_BITS
}

/// Whether any of the 8 bytes of `x` is below 0x20 or is 0x7f (a control
/// byte, or tab): the chunks without one need no byte-by-byte look.
fn has_control(x: u64) -> bool {
    let below = x.wrapping_sub(LOW_BITS * 0x20) & !x & HIGH_BITS;
    below != 0 || zero_bytes(x ^ (LOW_BITS * 0x7f)) != 0
}
