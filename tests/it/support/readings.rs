//! Several ways a backend may split a byte stream into HTTP/1.1 requests.
//!
//! A request smuggling desync is two parsers disagreeing on where one request ends. The
//! conformance suite reads what a proxy sent its upstream under each [`Reading`] below: if they
//! disagree on the number of requests, some backend would see a request the proxy never saw
//! (never limited, never logged). These readers are deliberately simple and independent of
//! sluice's own parser: each is the rule one family of backends applies.

/// One way of reading request framing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Forgiving: bare LF line ends, names and values trimmed, `chunked` anywhere in
    /// Transfer-Encoding wins, Content-Length read as its leading digits (`+5`, `5 5`, `05`).
    Lenient,
    /// RFC framing with Content-Length winning when both are present (old servers).
    ClFirst,
    /// RFC 9112 §6.3: Transfer-Encoding with a final `chunked` wins over Content-Length.
    TeFirst,
    /// CGI-style stacks that map `_` to `-` in header names, then TE-first: `Content_Length`
    /// and `Transfer_Encoding` frame the body.
    UnderscoreTeFirst,
    /// `_` mapped to `-`, then CL-first.
    UnderscoreClFirst,
}

impl Reading {
    pub const ALL: [Reading; 5] = [
        Reading::Lenient,
        Reading::ClFirst,
        Reading::TeFirst,
        Reading::UnderscoreTeFirst,
        Reading::UnderscoreClFirst,
    ];

    fn lenient(self) -> bool {
        self == Reading::Lenient
    }

    fn underscores(self) -> bool {
        matches!(
            self,
            Reading::UnderscoreTeFirst | Reading::UnderscoreClFirst
        )
    }

    fn cl_first(self) -> bool {
        matches!(self, Reading::ClFirst | Reading::UnderscoreClFirst)
    }
}

/// How a stream split under one reading.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Requests whose head was complete (a complete or incomplete body still counts: the
    /// backend acts on the head), plus one for non-blank bytes left over that do not form a
    /// complete head (a backend would take them as the start of its next request).
    pub count: usize,
    /// The byte offset where each counted request starts.
    pub starts: Vec<usize>,
    /// Bytes at the end that were not consumed as a complete request.
    pub leftover: usize,
    /// Whether every request's body was complete.
    pub complete: bool,
}

/// The request heads and bodies in `bytes` under `reading`.
pub fn split(bytes: &[u8], reading: Reading) -> Split {
    let mut out = Split {
        complete: true,
        ..Split::default()
    };
    let mut pos = 0;
    loop {
        // RFC 9112 §2.2: empty lines before a request line are ignored.
        while pos < bytes.len() && (bytes[pos] == b'\r' || bytes[pos] == b'\n') {
            pos += 1;
        }
        if pos >= bytes.len() {
            break;
        }
        let Some((head_len, head)) = head(&bytes[pos..], reading) else {
            out.count += 1;
            out.starts.push(pos);
            out.leftover = bytes.len() - pos;
            out.complete = false;
            break;
        };
        out.count += 1;
        out.starts.push(pos);
        pos += head_len;
        match body(&bytes[pos..], &head, reading) {
            Some(n) => pos += n,
            None => {
                out.leftover = bytes.len() - pos;
                out.complete = false;
                break;
            }
        }
    }
    out
}

/// A forwarded request as the strict reading sees it: method, target, header names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forwarded {
    pub method: String,
    /// The target with the bytes RFC 3986 never allows raw (0x80-0xff and `"<>\\^`{|}`)
    /// percent-encoded: `/a%60b` and `/a`b` name the same resource, and a proxy may send
    /// either. Every other byte, `%` escape and `#` is kept as sent.
    pub target: String,
    /// Lowercased, in order.
    pub names: Vec<String>,
}

/// The requests in `bytes` under [`Reading::TeFirst`], with what a comparison of two proxies'
/// forwarding needs.
pub fn forwarded(bytes: &[u8]) -> Vec<Forwarded> {
    let s = split(bytes, Reading::TeFirst);
    s.starts
        .iter()
        .map(|&start| {
            let rest = &bytes[start..];
            let end = find(rest, b"\r\n\r\n").unwrap_or(rest.len());
            let head = &rest[..end];
            let line_end = find(head, b"\r\n").unwrap_or(head.len());
            let mut parts = head[..line_end].splitn(3, |&b| b == b' ');
            let method = String::from_utf8_lossy(parts.next().unwrap_or(b"")).into_owned();
            let mut target = String::new();
            for &b in parts.next().unwrap_or(b"") {
                if b >= 0x80 || b"\"<>\\^`{|}".contains(&b) {
                    target.push_str(&format!("%{b:02X}"));
                } else {
                    target.push(char::from(b));
                }
            }
            let names = String::from_utf8_lossy(&head[line_end..])
                .split("\r\n")
                .filter_map(|l| l.split_once(':').map(|(n, _)| n.to_ascii_lowercase()))
                .collect();
            Forwarded {
                method,
                target,
                names,
            }
        })
        .collect()
}

/// The framing-relevant part of a request head.
#[derive(Debug, Default)]
struct Head {
    content_length: Option<Option<u64>>,
    chunked: bool,
    has_te: bool,
}

/// Length of the head (through its blank line) and what it says about the body.
fn head(bytes: &[u8], reading: Reading) -> Option<(usize, Head)> {
    let end = if reading.lenient() {
        let crlf = find(bytes, b"\r\n\r\n").map(|i| i + 4);
        let lf = find(bytes, b"\n\n").map(|i| i + 2);
        let lfcrlf = find(bytes, b"\n\r\n").map(|i| i + 3);
        [crlf, lf, lfcrlf].into_iter().flatten().min()?
    } else {
        find(bytes, b"\r\n\r\n")? + 4
    };
    let text = &bytes[..end];
    let lines: Vec<&[u8]> = if reading.lenient() {
        text.split(|&b| b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .collect()
    } else {
        split_crlf(text)
    };
    let mut h = Head::default();
    let mut te = Vec::new();
    for line in lines.iter().skip(1) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let mut name: Vec<u8> = line[..colon].to_ascii_lowercase();
        if reading.lenient() || reading.underscores() {
            name = trim(&name).to_vec();
        }
        if reading.underscores() {
            for b in &mut name {
                if *b == b'_' {
                    *b = b'-';
                }
            }
        }
        let value = trim(&line[colon + 1..]);
        match name.as_slice() {
            b"content-length" if h.content_length.is_none() => {
                h.content_length = Some(parse_length(value, reading.lenient()));
            }
            b"transfer-encoding" => {
                h.has_te = true;
                te.push(value.to_ascii_lowercase());
            }
            _ => {}
        }
    }
    let te = te.join(&b","[..]);
    h.chunked = if reading.lenient() {
        find(&te, b"chunked").is_some()
    } else {
        te.split(|&b| b == b',').map(trim).rfind(|t| !t.is_empty()) == Some(&b"chunked"[..])
    };
    Some((end, h))
}

/// Bytes of `bytes` the body takes, None when it is incomplete or malformed.
fn body(bytes: &[u8], h: &Head, reading: Reading) -> Option<usize> {
    let by_length = |cl: Option<u64>| -> Option<usize> {
        let n = usize::try_from(cl?).ok()?;
        (n <= bytes.len()).then_some(n)
    };
    match (h.content_length, h.chunked) {
        (Some(cl), true) if reading.cl_first() => by_length(cl),
        (_, true) => chunked(bytes, reading.lenient()),
        (Some(cl), false) => by_length(cl),
        // A Transfer-Encoding without a final chunked: the body runs to the end of the
        // connection (RFC 9112 §6.3 for responses; a request cannot be framed at all).
        (None, false) if h.has_te => None,
        (None, false) => Some(0),
    }
}

/// A chunked body's length, None when incomplete or malformed.
fn chunked(bytes: &[u8], lenient: bool) -> Option<usize> {
    let mut pos = 0;
    loop {
        let (line, next) = line_at(bytes, pos, lenient)?;
        let size_text = line.split(|&b| b == b';').next().unwrap_or(b"");
        let size_text = if lenient { trim(size_text) } else { size_text };
        if size_text.is_empty() || size_text.len() > 15 {
            return None;
        }
        let size = usize::from_str_radix(std::str::from_utf8(size_text).ok()?, 16).ok()?;
        if !size_text.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        pos = next;
        if size == 0 {
            // Trailer fields up to the empty line.
            loop {
                let (line, next) = line_at(bytes, pos, lenient)?;
                pos = next;
                if line.is_empty() {
                    return Some(pos);
                }
            }
        }
        if bytes.len() < pos + size {
            return None;
        }
        pos += size;
        let (rest, next) = line_at(bytes, pos, lenient)?;
        if !rest.is_empty() {
            return None;
        }
        pos = next;
    }
}

/// The line starting at `pos` (without its ending) and the offset after its ending.
fn line_at(bytes: &[u8], pos: usize, lenient: bool) -> Option<(&[u8], usize)> {
    let rest = bytes.get(pos..)?;
    if lenient {
        let i = rest.iter().position(|&b| b == b'\n')?;
        let line = &rest[..i];
        Some((line.strip_suffix(b"\r").unwrap_or(line), pos + i + 1))
    } else {
        let i = find(rest, b"\r\n")?;
        Some((&rest[..i], pos + i + 2))
    }
}

fn parse_length(v: &[u8], lenient: bool) -> Option<u64> {
    if lenient {
        let v = v.strip_prefix(b"+").unwrap_or(v);
        let digits: Vec<u8> = v.iter().copied().take_while(u8::is_ascii_digit).collect();
        std::str::from_utf8(&digits).ok()?.parse().ok()
    } else if !v.is_empty() && v.iter().all(u8::is_ascii_digit) {
        std::str::from_utf8(v).ok()?.parse().ok()
    } else {
        None
    }
}

fn split_crlf(text: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(i) = find(rest, b"\r\n") {
        lines.push(&rest[..i]);
        rest = &rest[i + 2..];
    }
    lines
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |i| i + 1);
    &v[start..end.max(start)]
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::{Reading, split};

    fn counts(bytes: &[u8]) -> Vec<usize> {
        Reading::ALL
            .iter()
            .map(|&r| split(bytes, r).count)
            .collect()
    }

    #[test]
    fn plain_pipeline_is_two_requests_under_every_reading() {
        let two =
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(counts(two), vec![2; 5]);
        let s = split(two, Reading::TeFirst);
        assert_eq!(s.starts, vec![0, 27]);
        assert!(s.complete);
    }

    #[test]
    fn cl_te_smuggle_splits_differently_cl_first_and_te_first() {
        // CL says the body is "0\r\n\r\nG" (one request, then "GET /x ..."); TE says the body
        // ends after "0\r\n\r\n" and "GGET /x" begins the next request.
        let b = b"POST / HTTP/1.1\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGGET /x HTTP/1.1\r\n\r\n";
        assert_eq!(split(b, Reading::ClFirst).count, 2);
        assert_eq!(split(b, Reading::TeFirst).count, 2);
        assert_ne!(
            split(b, Reading::ClFirst).starts,
            split(b, Reading::TeFirst).starts
        );
        // Content-Length 0 beside a chunked body: CL-first reads the chunks as a second head.
        let c = b"POST / HTTP/1.1\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        assert_eq!(split(c, Reading::TeFirst).count, 1);
        assert_eq!(split(c, Reading::ClFirst).count, 2);
    }

    #[test]
    fn underscores_frame_only_under_the_underscore_readings() {
        let b = b"POST / HTTP/1.1\r\nContent_Length: 24\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n";
        assert_eq!(counts(b), vec![2, 2, 2, 1, 1]);
        let t = b"POST / HTTP/1.1\r\nTransfer_Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(split(t, Reading::TeFirst).count, 2, "'0' is read as a head");
        assert_eq!(split(t, Reading::UnderscoreTeFirst).count, 1);
    }

    #[test]
    fn lenient_accepts_bare_lf_and_loose_lengths() {
        let b = b"POST / HTTP/1.1\nContent-Length: +5\n\nhelloGET / HTTP/1.1\n\n";
        assert_eq!(split(b, Reading::Lenient).count, 2);
        // Strictly, there is no complete head (no CRLF CRLF): one partial request.
        let s = split(b, Reading::TeFirst);
        assert_eq!((s.count, s.complete), (1, false));
    }

    #[test]
    fn forwarded_targets_compare_modulo_encoding_of_never_raw_bytes() {
        let raw = super::forwarded(b"GET /a`b\xff#f HTTP/1.0\r\nX-A: 1\r\n\r\n");
        let enc = super::forwarded(b"GET /a%60b%FF#f HTTP/1.1\r\nx-a: 1\r\n\r\n");
        assert_eq!(raw, enc);
        assert_eq!(raw[0].names, vec!["x-a".to_owned()]);
        let frag = super::forwarded(b"GET /a%60b%FF%23f HTTP/1.1\r\n\r\n");
        assert_ne!(
            raw[0].target, frag[0].target,
            "# is a delimiter, %23 is not"
        );
    }

    #[test]
    fn incomplete_and_malformed_bodies_stop_the_split() {
        let b = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel";
        let s = split(b, Reading::TeFirst);
        assert_eq!((s.count, s.complete, s.leftover), (1, false, 6));
        let bad = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n";
        assert!(!split(bad, Reading::TeFirst).complete);
        // A Transfer-Encoding without a final chunked cannot be framed.
        let gz = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n";
        assert!(!split(gz, Reading::TeFirst).complete);
        assert_eq!(split(b"", Reading::TeFirst).count, 0);
        assert_eq!(split(b"\r\n\r\n", Reading::TeFirst).count, 0);
    }
}
