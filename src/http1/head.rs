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
//! Where sluice is stricter than nginx, on purpose (README "Security"):
//! HTTP/0.9 is refused (nginx answers it without headers), control bytes
//! other than tab in a header value are refused (nginx forwards them; hyper
//! and most backends cannot represent them), an invalid header name kept by
//! `ignore_invalid_headers = false` must still be an RFC 9110 token, and a
//! head has at most [`MAX_HEADERS`] fields (nginx has no count, only sizes).

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
pub fn parse_head(buf: &[u8], rules: &HeadRules) -> Parsed {
    HeadParser::new(*rules).advance(buf)
}

/// nginx's header buffers: a head starts in a 1 KB buffer; a line that does
/// not fit moves, whole, to the next large buffer; no line may be longer
/// than one large buffer, and there are only so many.
#[derive(Clone, Copy, Debug)]
struct Buffers {
    cap: usize,
    used: usize,
    large: usize,
    rules: (usize, usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overflow {
    /// One line is longer than a large buffer.
    Line,
    /// Every large buffer is taken.
    Head,
}

impl Buffers {
    fn new(rules: (usize, usize)) -> Buffers {
        Buffers {
            cap: CLIENT_HEADER_BUFFER,
            used: 0,
            large: 0,
            rules,
        }
    }

    /// A line of `len` bytes (its end of line included) is appended.
    fn take(&mut self, len: usize) -> Result<(), Overflow> {
        let (count, size) = self.rules;
        loop {
            if self.used + len <= self.cap {
                self.used += len;
                return Ok(());
            }
            // The buffer fills with the start of the line, which then moves
            // to a fresh large buffer.
            let partial = self.cap - self.used;
            if partial > 0 && partial >= size {
                return Err(Overflow::Line);
            }
            if self.large >= count {
                return Err(Overflow::Head);
            }
            self.large += 1;
            self.cap = size;
            self.used = 0;
        }
    }

    /// Would a line that has `partial` bytes so far (and no end yet) already
    /// have been refused?
    fn refuses_partial(&self, partial: usize) -> Option<Overflow> {
        let mut probe = *self;
        probe.take(partial + 1).err()
    }
}

/// The unique headers: a second one is a 400 (nginx's
/// `ngx_http_process_unique_header_line`, and `Host`).
const UNIQUE: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "if-modified-since",
    "if-unmodified-since",
    "if-match",
    "if-none-match",
    "content-range",
    "if-range",
    "expect",
    "authorization",
];

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
    count: usize,
    /// Unique headers seen (bit i: `UNIQUE[i]`).
    seen: u16,
    host: bool,
    /// `Some(None)`: a `Content-Length` that is not a length.
    content_length: Option<Option<u64>>,
    /// `Some(true)`: exactly `chunked`.
    transfer_encoding: Option<bool>,
    dropped: Vec<Vec<u8>>,
}

#[derive(Clone, Debug)]
struct RequestLine {
    /// The canonical request line's length in [`HeadParser::canonical`]
    /// (without its CRLF), for log lines.
    len: usize,
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
            count: 0,
            seen: 0,
            host: false,
            content_length: None,
            transfer_encoding: None,
            dropped: Vec::new(),
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

    fn overflow(&self, o: Overflow, line: Option<Vec<u8>>) -> Refusal {
        match (&self.line, o) {
            (None, _) => self.refuse(414, "client sent too long URI", None),
            // nginx names the line that did not fit either way.
            (Some(_), Overflow::Line | Overflow::Head) if line.is_some() => {
                let mut l = line.unwrap_or_default();
                l.truncate(64);
                self.refuse(400, "client sent too long header line", Some(l))
            }
            (Some(_), _) => self.refuse(400, "client sent too large request", None),
        }
    }

    fn refuse(&self, status: u16, reason: &'static str, detail: Option<Vec<u8>>) -> Refusal {
        Refusal {
            status,
            reason,
            detail,
            request_line: self.line.as_ref().map(|l| self.canonical[..l.len].to_vec()),
            in_headers: self.line.is_some(),
        }
    }

    /// The request line (without its LF; `available` bytes from its start
    /// are at hand). Ok(false): go on with headers.
    fn request_line(&mut self, line: &[u8], available: usize) -> Result<bool, Refusal> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // nginx's log line names the request line even when it is the fault.
        let parsed = parse_request_line(line).map_err(|(status, reason)| Refusal {
            status,
            reason,
            detail: None,
            request_line: Some(line.to_vec()),
            in_headers: false,
        })?;
        // Most heads arrive whole: room for all of it at once.
        let c = &mut self.canonical;
        c.reserve(available.min(8192) + 64);
        c.extend_from_slice(parsed.method);
        c.push(b' ');
        canonical_target(c, parsed.path, parsed.query);
        c.extend_from_slice(if parsed.http11 {
            b" HTTP/1.1"
        } else {
            b" HTTP/1.0"
        });
        let len = c.len();
        c.extend_from_slice(b"\r\n");
        if let Some(a) = parsed.authority {
            c.extend_from_slice(b"Host: ");
            c.extend_from_slice(a);
            c.extend_from_slice(b"\r\n");
        }
        self.line = Some(RequestLine {
            len,
            refused_method: match parsed.method {
                b"CONNECT" => Some("client sent CONNECT method"),
                b"TRACE" => Some("client sent TRACE method"),
                _ => None,
            },
            absolute: parsed.authority.is_some(),
            http11: parsed.http11,
        });
        Ok(false)
    }

    /// A header line (without its LF). Ok(true): that was the empty line.
    fn header_line(&mut self, line: &[u8]) -> Result<bool, Refusal> {
        let bad = |this: &Self| {
            let mut l = line.to_vec();
            l.truncate(64);
            this.refuse(400, "client sent invalid header line", Some(l))
        };
        // The content ends at the first CR; only CRs may follow it.
        let end = memchr(b'\r', line).unwrap_or(line.len());
        if end == 0 {
            // The empty line: exactly LF or CR LF.
            return if line.len() <= 1 {
                Ok(true)
            } else {
                Err(bad(self))
            };
        }
        if line[end..].iter().any(|&b| b != b'\r') {
            return Err(bad(self));
        }
        let content = &line[..end];
        // The name, up to ':' (or the whole line: a name without a value).
        let mut invalid = false;
        let mut token = true;
        let mut name_end = content.len();
        for (i, &b) in content.iter().enumerate() {
            match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' => {}
                b'_' => invalid |= !self.rules.underscores_in_headers,
                b':' if i == 0 => return Err(bad(self)),
                b':' => {
                    name_end = i;
                    break;
                }
                0..=0x20 | 0x7f => return Err(bad(self)),
                _ => {
                    invalid = true;
                    token &= is_token(b);
                }
            }
        }
        let name = &content[..name_end];
        let mut value = content.get(name_end + 1..).unwrap_or(&[]);
        while let [b' ', rest @ ..] = value {
            value = rest;
        }
        while let [rest @ .., b' '] = value {
            value = rest;
        }
        // One pass: a NUL is nginx's 400; other control bytes are sluice's
        // own (below, for fields that are kept).
        let mut control = false;
        for &b in value {
            if (b < 0x20 && b != b'\t') || b == 0x7f {
                if b == 0 {
                    return Err(bad(self));
                }
                control = true;
            }
        }
        if invalid && self.rules.ignore_invalid_headers {
            if self.dropped.len() < 8 {
                let mut l = content.to_vec();
                l.truncate(64);
                self.dropped.push(l);
            }
            return Ok(false);
        }
        // sluice's own limits: what hyper and backends can represent. (A
        // Transfer-Encoding with such bytes is no coding nginx knows: its 501
        // comes when the head is whole, as in nginx.)
        if control && name.eq_ignore_ascii_case(b"transfer-encoding") && token {
            if self.transfer_encoding.is_some() {
                return Err(self.refuse(400, "client sent duplicate header line", None));
            }
            self.seen |= 1 << 2;
            self.transfer_encoding = Some(false);
            return Ok(false);
        }
        if !token || control {
            return Err(bad(self));
        }
        self.count += 1;
        if self.count > MAX_HEADERS {
            return Err(self.refuse(400, "client sent too many header lines", None));
        }
        if let Some(i) = unique_index(name) {
            if self.seen & (1 << i) != 0 {
                let mut l = content.to_vec();
                l.truncate(64);
                let reason = if i == 0 {
                    "client sent duplicate host header"
                } else {
                    "client sent duplicate header line"
                };
                return Err(self.refuse(400, reason, Some(l)));
            }
            self.seen |= 1 << i;
            match i {
                0 => {
                    if !valid_host(value) {
                        return Err(self.refuse(400, "client sent invalid host header", None));
                    }
                    self.host = true;
                    if self.line.as_ref().is_some_and(|l| l.absolute) {
                        // Replaced by the target's authority (RFC 9112 §3.2.2).
                        return Ok(false);
                    }
                }
                1 => self.content_length = Some(parse_length(value)),
                2 => self.transfer_encoding = Some(value.eq_ignore_ascii_case(b"chunked")),
                _ => {}
            }
        }
        let c = &mut self.canonical;
        c.extend_from_slice(name);
        c.extend_from_slice(b": ");
        c.extend_from_slice(value);
        c.extend_from_slice(b"\r\n");
        Ok(false)
    }

    /// The empty line came: nginx's checks of the whole head, then the
    /// canonical head.
    fn finish(&mut self) -> Parsed {
        let Some(line) = self.line.take() else {
            return Parsed::Partial;
        };
        let request_line = Some(self.canonical[..line.len].to_vec());
        let refuse = |status: u16, reason: &'static str| {
            Parsed::Refused(Refusal {
                status,
                reason,
                detail: None,
                request_line: request_line.clone(),
                in_headers: true,
            })
        };
        if !self.host && line.http11 {
            return refuse(400, "client sent HTTP/1.1 request without \"Host\" header");
        }
        let mut framing = match self.content_length {
            Some(None) => return refuse(400, "client sent invalid \"Content-Length\" header"),
            Some(Some(n)) => Framing::Length(n),
            None => Framing::None,
        };
        if let Some(chunked) = self.transfer_encoding {
            if !line.http11 {
                return refuse(
                    400,
                    "client sent HTTP/1.0 request with \"Transfer-Encoding\" header",
                );
            }
            if !chunked {
                return refuse(501, "client sent unknown \"Transfer-Encoding\"");
            }
            if self.content_length.is_some() {
                return refuse(
                    400,
                    "client sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
                );
            }
            framing = Framing::Chunked;
        }
        if let Some(reason) = line.refused_method {
            return refuse(405, reason);
        }
        let mut canonical = std::mem::take(&mut self.canonical);
        canonical.extend_from_slice(b"\r\n");
        Parsed::Head(Head {
            len: self.pos,
            canonical,
            framing,
            dropped: std::mem::take(&mut self.dropped),
        })
    }
}

/// Which of [`UNIQUE`] `name` is (the length first: most names are none).
fn unique_index(name: &[u8]) -> Option<usize> {
    if !matches!(name.len(), 4 | 6 | 8 | 13 | 14 | 17 | 19) {
        return None;
    }
    UNIQUE
        .iter()
        .position(|u| u.as_bytes().eq_ignore_ascii_case(name))
}

fn memchr(b: u8, s: &[u8]) -> Option<usize> {
    s.iter().position(|&c| c == b)
}

/// RFC 9110 `tchar`, beyond letters, digits, `-` and `_`.
fn is_token(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'.' | b'^' | b'`' | b'|' | b'~'
    )
}

/// nginx's `Content-Length`: digits only, within a signed 64-bit offset.
fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        if n > i64::MAX as u64 {
            return None;
        }
    }
    Some(n)
}

/// nginx's host check: no `/`, no byte at or below space, no 0x7f, no two
/// dots in a row; a trailing dot does not count; something must be left
/// before the port.
pub fn valid_host(h: &[u8]) -> bool {
    #[derive(PartialEq)]
    enum S {
        Usual,
        Literal,
        Rest,
    }
    let mut state = S::Usual;
    let mut host_len = h.len();
    let mut last_dot: Option<usize> = None;
    for (i, &b) in h.iter().enumerate() {
        match b {
            b'.' => {
                if i > 0 && last_dot == Some(i - 1) {
                    return false;
                }
                last_dot = Some(i);
            }
            b':' if state == S::Usual => {
                host_len = i;
                state = S::Rest;
            }
            b'[' if i == 0 => state = S::Literal,
            b']' if state == S::Literal => {
                host_len = i + 1;
                state = S::Rest;
            }
            b'/' => return false,
            0..=0x20 | 0x7f => return false,
            _ => {}
        }
    }
    if host_len > 0 && last_dot == Some(host_len - 1) {
        host_len -= 1;
    }
    host_len > 0
}

type LineError = (u16, &'static str);

const INVALID_METHOD: LineError = (400, "client sent invalid method");
const INVALID_REQUEST: LineError = (400, "client sent invalid request");
const INVALID_VERSION: LineError = (505, "client sent invalid version");

/// The parts of a request line, borrowed from it.
struct LineParts<'a> {
    method: &'a [u8],
    path: &'a [u8],
    query: Option<&'a [u8]>,
    authority: Option<&'a [u8]>,
    http11: bool,
}

/// The request line without its end of line.
fn parse_request_line(l: &[u8]) -> Result<LineParts<'_>, LineError> {
    let mut i = 0;
    while i < l.len() && l[i] != b' ' {
        if !(l[i].is_ascii_uppercase() || l[i] == b'_' || l[i] == b'-') {
            return Err(INVALID_METHOD);
        }
        i += 1;
    }
    if i == 0 || i == l.len() {
        return Err(INVALID_METHOD);
    }
    let method = &l[..i];
    while l.get(i) == Some(&b' ') {
        i += 1;
    }
    let mut authority = None;
    let target_start;
    match l.get(i) {
        Some(b'/') => target_start = i,
        Some(c) if c.is_ascii_alphabetic() => {
            // scheme "://" host [":" port]
            while i < l.len() && (l[i].is_ascii_alphanumeric() || b"+-.".contains(&l[i])) {
                i += 1;
            }
            if l.get(i..i + 3) != Some(b"://") {
                return Err(INVALID_REQUEST);
            }
            i += 3;
            let host_start = i;
            if l.get(i) == Some(&b'[') {
                i += 1;
                loop {
                    match l.get(i) {
                        Some(b']') => {
                            i += 1;
                            break;
                        }
                        Some(&c)
                            if c.is_ascii_alphanumeric() || b":-._~!$&'()*+,;=".contains(&c) =>
                        {
                            i += 1
                        }
                        _ => return Err(INVALID_REQUEST),
                    }
                }
            } else {
                while i < l.len() && (l[i].is_ascii_alphanumeric() || l[i] == b'.' || l[i] == b'-')
                {
                    i += 1;
                }
            }
            let host_end = i;
            if l.get(i) == Some(&b':') {
                i += 1;
                while i < l.len() && l[i].is_ascii_digit() {
                    i += 1;
                }
            }
            match l.get(i) {
                Some(b'/') | Some(b'?') | Some(b' ') => {}
                _ => return Err(INVALID_REQUEST),
            }
            authority = Some((host_start, host_end, i));
            target_start = i;
        }
        _ => return Err(INVALID_REQUEST),
    }
    // The rest of the target, to a space or the end.
    while i < l.len() && l[i] != b' ' {
        if l[i] < 0x20 || l[i] == 0x7f {
            return Err(INVALID_REQUEST);
        }
        i += 1;
    }
    let raw_target = &l[target_start..i];
    // A fragment is the client's own business (RFC 9112 allows none in a
    // request target): hyper's URI cannot carry it raw, and `%23` would name
    // another resource, so it is cut, as browsers do before sending.
    let raw_target = match raw_target.iter().position(|&b| b == b'#') {
        Some(f) => &raw_target[..f],
        None => raw_target,
    };
    while l.get(i) == Some(&b' ') {
        i += 1;
    }
    if i == l.len() {
        // No version: HTTP/0.9, which sluice does not speak.
        return Err(if method == b"GET" {
            (400, "client sent HTTP/0.9 request")
        } else {
            (400, "client sent invalid method in HTTP/0.9 request")
        });
    }
    let http11 = parse_version(&l[i..])?;
    let (path, query) = match raw_target.iter().position(|&b| b == b'?') {
        Some(q) => (&raw_target[..q], Some(&raw_target[q + 1..])),
        None => (raw_target, None),
    };
    if !path.is_empty() && !path_ok(path) {
        return Err(INVALID_REQUEST);
    }
    let authority = match authority {
        Some((hs, he, end)) => {
            if !valid_host(&l[hs..he]) {
                return Err((400, "client sent invalid host in request line"));
            }
            Some(&l[hs..end])
        }
        None => None,
    };
    Ok(LineParts {
        method,
        path,
        query,
        authority,
        http11,
    })
}

/// `HTTP/major.minor` and trailing spaces. Ok(true): 1.1 or later.
fn parse_version(v: &[u8]) -> Result<bool, LineError> {
    let rest = v.strip_prefix(b"HTTP/").ok_or(INVALID_REQUEST)?;
    let mut i = 0;
    let mut major: u32 = 0;
    while let Some(&d) = rest.get(i).filter(|d| d.is_ascii_digit()) {
        if i == 0 && d == b'0' {
            return Err(INVALID_REQUEST);
        }
        major = major * 10 + u32::from(d - b'0');
        if major > 1 {
            return Err(INVALID_VERSION);
        }
        i += 1;
    }
    if i == 0 || rest.get(i) != Some(&b'.') {
        return Err(INVALID_REQUEST);
    }
    i += 1;
    let start = i;
    let mut minor: u32 = 0;
    while let Some(&d) = rest.get(i).filter(|d| d.is_ascii_digit()) {
        if minor > 99 {
            return Err(INVALID_REQUEST);
        }
        minor = minor * 10 + u32::from(d - b'0');
        i += 1;
    }
    if i == start || rest[i..].iter().any(|&b| b != b' ') {
        return Err(INVALID_REQUEST);
    }
    Ok(minor >= 1)
}

/// nginx's complex-URI check of a path: `%` escapes are two hex digits and
/// not `%00`, and `..` never climbs above `/`.
fn path_ok(path: &[u8]) -> bool {
    // Most paths have no escape and no dot segment: nothing to decode.
    if !path.contains(&b'%') && !path.windows(2).any(|w| w == b"/.") {
        return true;
    }
    let mut decoded = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        if path[i] == b'%' {
            let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
            match (hex(path.get(i + 1)), hex(path.get(i + 2))) {
                (Some(h), Some(l)) if h * 16 + l != 0 => decoded.push((h * 16 + l) as u8),
                _ => return false,
            }
            i += 3;
        } else {
            decoded.push(path[i]);
            i += 1;
        }
    }
    let mut depth: usize = 0;
    for seg in decoded.split(|&b| b == b'/').skip(1) {
        match seg {
            b"" | b"." => {}
            b".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => depth += 1,
        }
    }
    true
}

/// The target as hyper's `http::Uri` accepts it: origin-form (an empty path
/// is `/`), and bytes the URI grammar does not allow raw (non-ASCII, `<`,
/// `\`, `^`, …) percent-encoded, which is what they mean.
fn canonical_target(out: &mut Vec<u8>, path: &[u8], query: Option<&[u8]>) {
    if path.is_empty() {
        out.push(b'/');
    }
    let push = |out: &mut Vec<u8>, b: u8, ok: bool| {
        if ok {
            out.push(b);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    };
    for &b in path {
        let ok = matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x40..=0x5F | 0x61..=0x7A | 0x7C | 0x7E)
            || b == b'"'
            || b == b'{'
            || b == b'}';
        push(out, b, ok);
    }
    if let Some(q) = query {
        out.push(b'?');
        for &b in q {
            let ok = matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x7E);
            push(out, b, ok);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &[u8]) -> Parsed {
        parse_head(s, &HeadRules::default())
    }

    fn canonical(s: &[u8]) -> String {
        match parse(s) {
            Parsed::Head(h) => String::from_utf8(h.canonical).unwrap(),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(s)),
        }
    }

    fn refused(s: &[u8]) -> (u16, &'static str) {
        match parse(s) {
            Parsed::Refused(r) => (r.status, r.reason),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(s)),
        }
    }

    #[test]
    fn canonical_heads() {
        assert_eq!(
            canonical(b"GET  /a?b  HTTP/1.1  \r\nHost:  x  \r\nX-A: 1\n\r\n"),
            "GET /a?b HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n"
        );
        assert_eq!(
            canonical(b"\r\n\r\nGET http://h:81?x HTTP/1.1\r\nHost: other\r\n\r\n"),
            "GET /?x HTTP/1.1\r\nHost: h:81\r\n\r\n"
        );
        assert_eq!(
            canonical(b"GET /caf\xc3\xa9<#f?x HTTP/1.0\r\n\r\n"),
            "GET /caf%C3%A9%3C HTTP/1.0\r\n\r\n"
        );
        // Invalid names are dropped, a name alone is a field with no value.
        assert_eq!(
            canonical(b"GET / HTTP/1.1\r\nHost: x\r\nContent_Length: 5\r\nX.Y: 1\r\nFoo\r\n\r\n"),
            "GET / HTTP/1.1\r\nHost: x\r\nFoo: \r\n\r\n"
        );
        let rules = HeadRules {
            underscores_in_headers: true,
            ..HeadRules::default()
        };
        let Parsed::Head(h) = parse_head(b"GET / HTTP/1.1\r\nHost: x\r\nX_Y: 1\r\n\r\n", &rules)
        else {
            panic!()
        };
        assert!(h.canonical.ends_with(b"X_Y: 1\r\n\r\n"));
    }

    #[test]
    fn framing() {
        let f = |s: &[u8]| match parse(s) {
            Parsed::Head(h) => h.framing,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 007\r\n\r\n"),
            Framing::Length(7)
        );
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n"),
            Framing::Chunked
        );
        assert_eq!(f(b"GET / HTTP/1.0\r\n\r\n"), Framing::None);
    }

    #[test]
    fn refusals() {
        let cases: &[(&[u8], u16)] = &[
            (b"get / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a..b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: \r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
            (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \x0bchunked\r\n\r\n", 501),
            (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", 400),
            (b"GET /%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /../a HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET http://u@h/ HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"CONNECT h:443 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"CONNECT / HTTP/1.1\r\nHost: x\r\n\r\n", 405),
            (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
            (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\rX\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nA: \x00\r\n\r\n", 400),
            (b"GET /\r\n", 400),
        ];
        for &(req, status) in cases {
            assert_eq!(refused(req).0, status, "{:?}", String::from_utf8_lossy(req));
        }
    }

    #[test]
    fn nginx_buffer_sizes() {
        // A request line longer than a large buffer: 414; a header line: 400.
        let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(8200));
        assert_eq!(refused(long.as_bytes()).0, 414);
        let long = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
            "a".repeat(8200)
        );
        assert_eq!(refused(long.as_bytes()).0, 400);
        // Lines of 7 KB: four fit (one per large buffer), five do not.
        let line = format!("X: {}\r\n", "a".repeat(7000));
        let fits = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", line.repeat(4));
        assert!(matches!(parse(fits.as_bytes()), Parsed::Head(_)));
        let over = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", line.repeat(5));
        assert_eq!(
            refused(over.as_bytes()),
            (400, "client sent too long header line")
        );
        // Refused as soon as the partial line is too long, not at its end.
        let partial = format!("GET / HTTP/1.1\r\nHost: x\r\nX: {}", "a".repeat(9000));
        assert_eq!(refused(partial.as_bytes()).0, 400);
    }

    #[test]
    fn incremental_equals_whole() {
        let req = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX_A: 1\r\n\r\nabc";
        let whole = parse(req);
        let mut p = HeadParser::new(HeadRules::default());
        let mut got = Parsed::Partial;
        for n in 1..=req.len() {
            got = p.advance(&req[..n]);
            if got != Parsed::Partial {
                break;
            }
        }
        assert_eq!(got, whole);
        let Parsed::Head(h) = whole else { panic!() };
        assert_eq!(&req[h.len..], b"abc");
    }

    #[test]
    fn hosts() {
        for ok in [
            &b"a"[..],
            b"a.b",
            b"a.",
            b".a",
            b"[::1]:80",
            b"a:80",
            b"A-B",
        ] {
            assert!(valid_host(ok), "{:?}", String::from_utf8_lossy(ok));
        }
        for bad in [&b""[..], b".", b"a..b", b"a/b", b"a b", b":80", b"a\x7f"] {
            assert!(!valid_host(bad), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
