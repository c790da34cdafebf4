//! The request line, with nginx's grammar (`ngx_http_parse_request_line`):
//! method, target (origin- or absolute-form), version; then the checks of
//! the path nginx makes on a complex URI.
//!
//! Why each part is its own function: each decides one of nginx's answers
//! (`invalid method`, `invalid request`, `invalid version`, `invalid host in
//! request line`, HTTP/0.9), and they are tried in nginx's order, which
//! decides which answer a line with several faults gets.

use super::unique::valid_host;
use super::{HeadParser, Refusal, RequestLine, canonical};

impl HeadParser {
    /// The request line (without its LF; `available` bytes from its start
    /// are at hand). Ok(false): go on with headers.
    pub(super) fn request_line(&mut self, line: &[u8], available: usize) -> Result<bool, Refusal> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // nginx's log line names the request line even when it is the fault.
        let parsed = parse_request_line(line).map_err(|(status, reason)| Refusal {
            status,
            reason,
            detail: None,
            request_line: Some(line.to_vec()),
            in_headers: false,
            fields: None,
        })?;
        let len =
            canonical::request_line((&mut self.canonical, &mut self.spans), &parsed, available);
        self.line = Some(RequestLine {
            len,
            method: parsed.method.len(),
            refused_method: refused_method(parsed.method),
            absolute: parsed.authority.is_some(),
            http11: parsed.http11,
        });
        Ok(false)
    }
}

impl HeadParser {
    /// The request line of a head that came as HTTP/2 fields, `:method` and
    /// `:path`: judged by the request line's own grammar for a method and
    /// an origin-form target (HTTP/2 has no absolute form, and `*` is for
    /// OPTIONS, which nginx does not serve either), then written as an
    /// HTTP/1.1 line, so both protocols reach the same canonical head.
    pub fn pseudo_line(&mut self, method: &[u8], target: &[u8]) -> Result<(), Refusal> {
        // nginx reads pseudo-headers as header fields, and names the one
        // it refuses.
        let parsed = parse_pseudo_line(method, target).map_err(|(status, reason)| Refusal {
            status,
            reason,
            detail: match (status, reason) {
                INVALID_METHOD => Some(method[..method.len().min(64)].to_vec()),
                INVALID_PATH => Some(target[..target.len().min(64)].to_vec()),
                _ => None,
            },
            request_line: None,
            in_headers: true,
            fields: None,
        })?;
        let len = canonical::request_line(
            (&mut self.canonical, &mut self.spans),
            &parsed,
            target.len() + 256,
        );
        self.line = Some(RequestLine {
            len,
            method: parsed.method.len(),
            refused_method: refused_method(parsed.method),
            absolute: false,
            http11: true,
        });
        Ok(())
    }
}

/// nginx answers CONNECT and TRACE with 405 once the head is read.
fn refused_method(method: &[u8]) -> Option<&'static str> {
    match method {
        b"CONNECT" => Some("client sent CONNECT method"),
        b"TRACE" => Some("client sent TRACE method"),
        _ => None,
    }
}

/// `:method` and `:path` as the parts of a request line.
fn parse_pseudo_line<'a>(method: &'a [u8], target: &'a [u8]) -> Result<LineParts<'a>, LineError> {
    if method.is_empty()
        || !method
            .iter()
            .all(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-')
    {
        return Err(INVALID_METHOD);
    }
    if target.first() != Some(&b'/') || target.iter().any(|&b| b <= 0x20 || b == 0x7f) {
        return Err(INVALID_PATH);
    }
    let target = match target.iter().position(|&b| b == b'#') {
        Some(f) => &target[..f],
        None => target,
    };
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(q) => (&target[..q], Some(&target[q + 1..])),
        None => (target, None),
    };
    if !path_ok(path) {
        return Err(INVALID_REQUEST);
    }
    Ok(LineParts {
        method,
        path,
        query,
        authority: None,
        http11: true,
        plain: false,
    })
}

type LineError = (u16, &'static str);

const INVALID_METHOD: LineError = (400, "client sent invalid method");
const INVALID_REQUEST: LineError = (400, "client sent invalid request");
const INVALID_VERSION: LineError = (505, "client sent invalid version");
const INVALID_PATH: LineError = (400, "client sent invalid :path header");

/// The parts of a request line, borrowed from it.
pub(super) struct LineParts<'a> {
    pub(super) method: &'a [u8],
    pub(super) path: &'a [u8],
    pub(super) query: Option<&'a [u8]>,
    pub(super) authority: Option<&'a [u8]>,
    pub(super) http11: bool,
    /// The path is not empty, has no query and is written as it is.
    pub(super) plain: bool,
}

/// The request line without its end of line.
fn parse_request_line(l: &[u8]) -> Result<LineParts<'_>, LineError> {
    let mut i = method_end(l)?;
    let method = &l[..i];
    i = skip_spaces(l, i);
    let authority = match l.get(i) {
        Some(b'/') => None,
        Some(c) if c.is_ascii_alphabetic() => {
            let (host_start, host_end, end) = absolute_form(l, i)?;
            i = end;
            Some((host_start, host_end, end))
        }
        _ => return Err(INVALID_REQUEST),
    };
    let target_start = i;
    let seen;
    (i, seen) = target_end(l, i)?;
    let mut raw_target = &l[target_start..i];
    // A fragment is the client's own business (RFC 9112 allows none in a
    // request target): hyper's URI cannot carry it raw, and `%23` would name
    // another resource, so it is cut, as browsers do before sending.
    if seen & HASH != 0 {
        if let Some(f) = raw_target.iter().position(|&b| b == b'#') {
            raw_target = &raw_target[..f];
        }
    }
    i = skip_spaces(l, i);
    if i == l.len() {
        // No version: HTTP/0.9, which sluice does not speak.
        return Err(if method == b"GET" {
            (400, "client sent HTTP/0.9 request")
        } else {
            (400, "client sent invalid method in HTTP/0.9 request")
        });
    }
    let http11 = parse_version(&l[i..])?;
    // No `#`, `?`, `%`, `.` nor byte to escape: the target is its path,
    // valid and written as it is.
    let plain = seen & (HASH | QUERY | ESCAPE | DECODE) == 0 && !raw_target.is_empty();
    let q = match seen & QUERY {
        0 => None,
        _ => raw_target.iter().position(|&b| b == b'?'),
    };
    let (path, query) = match q {
        Some(q) => (&raw_target[..q], Some(&raw_target[q + 1..])),
        None => (raw_target, None),
    };
    // (Without a `%` or a `.` a path is fine.)
    if seen & DECODE != 0 && !path.is_empty() && !path_ok(path) {
        return Err(INVALID_REQUEST);
    }
    Ok(LineParts {
        method,
        path,
        query,
        authority: line_authority(l, authority)?,
        http11,
        plain,
    })
}

/// Where the rest of the target ends (at a space or the line's end), and
/// the classes of its bytes ([`TARGET_CLASS`]) gathered on the way: most
/// targets have no byte the passes after look for, and then skip them.
fn target_end(l: &[u8], mut i: usize) -> Result<(usize, u8), LineError> {
    let mut seen = 0;
    while let Some(&b) = l.get(i) {
        let class = TARGET_CLASS[usize::from(b)];
        if class & (SPACE | CONTROL) != 0 {
            if class & CONTROL != 0 {
                return Err(INVALID_REQUEST);
            }
            break;
        }
        seen |= class;
        i += 1;
    }
    Ok((i, seen))
}

/// An absolute-form target's authority (where its host starts and ends,
/// where it ends), once its host is valid.
fn line_authority(
    l: &[u8],
    authority: Option<(usize, usize, usize)>,
) -> Result<Option<&[u8]>, LineError> {
    match authority {
        Some((hs, he, end)) => {
            if !valid_host(&l[hs..he]) {
                return Err((400, "client sent invalid host in request line"));
            }
            Ok(Some(&l[hs..end]))
        }
        None => Ok(None),
    }
}

/// Where the method ends (at its space): `A-Z _ -` only, not empty, and
/// something must follow it.
fn method_end(l: &[u8]) -> Result<usize, LineError> {
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
    Ok(i)
}

/// Past the spaces from `i` (nginx allows any number between the parts).
fn skip_spaces(l: &[u8], mut i: usize) -> usize {
    while l.get(i) == Some(&b' ') {
        i += 1;
    }
    i
}

/// An absolute-form target's `scheme "://" host [":" port]` from `i` (no
/// userinfo): where the host starts and ends, and where the authority ends
/// (at the path, the query or the space after the target).
fn absolute_form(l: &[u8], mut i: usize) -> Result<(usize, usize, usize), LineError> {
    while i < l.len() && (l[i].is_ascii_alphanumeric() || b"+-.".contains(&l[i])) {
        i += 1;
    }
    if l.get(i..i + 3) != Some(b"://") {
        return Err(INVALID_REQUEST);
    }
    i += 3;
    let host_start = i;
    if l.get(i) == Some(&b'[') {
        i = ip_literal_end(l, i + 1)?;
    } else {
        while i < l.len() && (l[i].is_ascii_alphanumeric() || l[i] == b'.' || l[i] == b'-') {
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
    Ok((host_start, host_end, i))
}

/// Past the `]` of an IP literal whose bytes start at `i`.
fn ip_literal_end(l: &[u8], mut i: usize) -> Result<usize, LineError> {
    loop {
        match l.get(i) {
            Some(b']') => return Ok(i + 1),
            Some(&c) if c.is_ascii_alphanumeric() || b":-._~!$&'()*+,;=".contains(&c) => i += 1,
            _ => return Err(INVALID_REQUEST),
        }
    }
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
    let mut prev = 0;
    let plain = path.iter().all(|&b| {
        let dot_segment = b == b'.' && prev == b'/';
        prev = b;
        b != b'%' && !dot_segment
    });
    if plain {
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

/// What a byte of a request target is to [`parse_request_line`]: where the
/// target ends, a refusal, or a reason to look at the target again (its
/// fragment, its query, its escapes and dot segments, a byte the canonical
/// target escapes); most bytes are none.
static TARGET_CLASS: [u8; 256] = {
    let mut t = [0; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = match b {
            b' ' => SPACE,
            0..0x20 | 0x7f => CONTROL,
            b'#' => HASH,
            b'?' => QUERY,
            b'%' | b'.' => DECODE,
            _ if !canonical::path_raw(b) => ESCAPE,
            _ => 0,
        };
        i += 1;
    }
    t
};
const SPACE: u8 = 1;
const CONTROL: u8 = 2;
const HASH: u8 = 4;
const QUERY: u8 = 8;
const DECODE: u8 = 16;
const ESCAPE: u8 = 32;
