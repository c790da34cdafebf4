//! The headers nginx allows once (`ngx_http_process_unique_header_line`,
//! `Host`), what it checks of them as they come (`Host` valid,
//! `Content-Length` digits), and what it checks of the whole head when the
//! empty line comes: `Host` present in HTTP/1.1, one framing only,
//! `Transfer-Encoding` exactly `chunked` and not in HTTP/1.0, CONNECT and
//! TRACE refused.
//!
//! Why here together: these are the rules request smuggling lives in (two
//! `Host`s, `Content-Length` beside `Transfer-Encoding`, a coding before
//! `chunked`); they decide the framing the gate and hyper then share.

use super::{Framing, Head, HeadParser, Parsed, Refusal};

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

impl HeadParser {
    /// A unique header, `UNIQUE[i]` (`content` is its line, for the log):
    /// a second one is a 400; `Host` is validated, `Content-Length` and
    /// `Transfer-Encoding` noted for [`HeadParser::finish`]. Ok(false): the
    /// field is not written (an absolute-form target's authority is the
    /// `Host`).
    pub(super) fn unique_field(
        &mut self,
        i: usize,
        content: &[u8],
        value: &[u8],
    ) -> Result<bool, Refusal> {
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
        Ok(true)
    }

    /// A `Transfer-Encoding` whose value has control bytes: no coding nginx
    /// knows, so its 501 comes when the head is whole, as in nginx (a
    /// second one is still a duplicate).
    pub(super) fn unknown_transfer_encoding(&mut self) -> Result<bool, Refusal> {
        if self.transfer_encoding.is_some() {
            return Err(self.refuse(400, "client sent duplicate header line", None));
        }
        self.seen |= 1 << 2;
        self.transfer_encoding = Some(false);
        Ok(false)
    }

    /// The empty line came: nginx's checks of the whole head, then the
    /// canonical head.
    pub(super) fn finish(&mut self) -> Parsed {
        let Some(line) = self.line.take() else {
            return Parsed::Partial;
        };
        // (The request line is copied for a refusal only.)
        let refuse = |status: u16, reason: &'static str| {
            Parsed::Refused(Refusal {
                status,
                reason,
                detail: None,
                request_line: Some(self.canonical[..line.len].to_vec()),
                in_headers: true,
                fields: self.fields_so_far(),
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
            upgrade: line.http11 && self.upgrade.0 && self.upgrade.1,
            spans: std::mem::take(&mut self.spans),
            line: (line.len, line.method),
        })
    }
}

/// Which of [`UNIQUE`] `name` is (the length first: most names are none).
pub(super) fn unique_index(name: &[u8]) -> Option<usize> {
    if !matches!(name.len(), 4 | 6 | 8 | 13 | 14 | 17 | 19) {
        return None;
    }
    UNIQUE
        .iter()
        .position(|u| u.as_bytes().eq_ignore_ascii_case(name))
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
        if !HOST_SPECIAL[usize::from(b)] {
            continue;
        }
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

/// The bytes [`valid_host`] looks at; any other is passed over (most of a
/// host's).
static HOST_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = matches!(i as u8, b'.' | b':' | b'[' | b']' | b'/' | 0..=0x20 | 0x7f);
        i += 1;
    }
    t
};
