//! A header line, with nginx's grammar (`ngx_http_parse_header_line`) and
//! sluice's own limits on top: the name's bytes, the value's, the line's
//! end; then the field is dropped, refused, checked as a unique header, or
//! written to the canonical head.
//!
//! Why the name is scanned once for three answers (refused, invalid,
//! token): nginx refuses some bytes outright (a space, a control byte, a
//! leading `:`), drops a name with other bytes as invalid (or keeps it, with
//! `ignore_invalid_headers` off), and sluice keeps only a kept name that is
//! still an RFC 9110 token; one pass decides all three, in nginx's order.

use super::unique::unique_index;
use super::{HeadParser, MAX_HEADERS, Refusal, canonical, has_control, memchr};

/// What scanning a header name found.
pub(super) struct Name {
    /// Where the name ends: its `:`, or the line's end (a name alone).
    end: usize,
    /// A byte nginx does not allow in a name (`ignore_invalid_headers`).
    invalid: bool,
    /// Every byte is an RFC 9110 `tchar`.
    token: bool,
}

impl HeadParser {
    /// A header line (without its LF). Ok(true): that was the empty line.
    pub(super) fn header_line(&mut self, line: &[u8]) -> Result<bool, Refusal> {
        // The content ends at the first CR; only CRs may follow it.
        let end = memchr(b'\r', line).unwrap_or(line.len());
        if end == 0 {
            // The empty line: exactly LF or CR LF.
            return if line.len() <= 1 {
                Ok(true)
            } else {
                Err(self.invalid_line(line))
            };
        }
        if line[end..].iter().any(|&b| b != b'\r') {
            return Err(self.invalid_line(line));
        }
        let content = &line[..end];
        let Some(scan) = self.scan_name(content) else {
            return Err(self.invalid_line(line));
        };
        let name = &content[..scan.end];
        let value = trim_spaces(content.get(scan.end + 1..).unwrap_or(&[]));
        let Some(control) = control_bytes(value) else {
            return Err(self.invalid_line(line));
        };
        self.judge_field(&scan, name, value, control, (content, line))?;
        Ok(false)
    }

    /// A field whose grammar was read (a header line's on HTTP/1.1, HPACK's
    /// on HTTP/2): dropped as invalid, refused, checked as a unique header,
    /// or written to the canonical head. `(content, line)`: the field as
    /// the client sent it and its whole line, for log lines.
    pub(super) fn judge_field(
        &mut self,
        scan: &Name,
        name: &[u8],
        value: &[u8],
        control: bool,
        (content, line): (&[u8], &[u8]),
    ) -> Result<(), Refusal> {
        if scan.invalid && self.rules.ignore_invalid_headers {
            self.drop_field(content);
            return Ok(());
        }
        // sluice's own limits: what hyper and backends can represent. (A
        // Transfer-Encoding with such bytes is no coding nginx knows: its 501
        // comes when the head is whole, as in nginx.)
        if control && name.eq_ignore_ascii_case(b"transfer-encoding") && scan.token {
            return self.unknown_transfer_encoding().map(drop);
        }
        if !scan.token || control {
            return Err(self.invalid_line(line));
        }
        self.count += 1;
        if self.count > MAX_HEADERS {
            return Err(self.refuse(400, "client sent too many header lines", None));
        }
        if let Some(i) = unique_index(name) {
            if !self.unique_field(i, content, value)? {
                return Ok(());
            }
        }
        self.note_upgrade(name, value);
        canonical::field((&mut self.canonical, &mut self.spans), name, value, content);
        Ok(())
    }

    /// A field of a head that came as HTTP/2 fields, after the request
    /// line ([`HeadParser::pseudo_line`]): judged as the same field on a
    /// header line. The caller has refused what HTTP/2 alone forbids
    /// (uppercase, `:` or whitespace in a name, CR, LF or NUL in a value).
    pub fn field(&mut self, name: &[u8], value: &[u8]) -> Result<(), Refusal> {
        // The field as an HTTP/1.1 line would carry it, for log lines only:
        // its first 64 bytes, on the stack (no allocation per field).
        let mut buf = [0u8; 64];
        let line = first_64(&mut buf, name, value);
        let scan = match self.scan_name(name) {
            Some(s) if s.end == name.len() && !name.is_empty() => s,
            _ => return Err(self.invalid_line(line)),
        };
        let Some(control) = control_bytes(value) else {
            return Err(self.invalid_line(line));
        };
        self.judge_field(&scan, name, value, control, (line, line))
    }

    /// The head is whole (HTTP/2's END_HEADERS): nginx's checks of the
    /// whole head, as at an HTTP/1.1 head's empty line.
    pub fn end(&mut self) -> super::Parsed {
        self.finish()
    }

    /// Notes the fields [`super::upgrade_asked`] reads (the length first:
    /// most names are neither).
    fn note_upgrade(&mut self, name: &[u8], value: &[u8]) {
        match name.len() {
            7 if name.eq_ignore_ascii_case(b"upgrade") => {
                self.upgrade.0 |= !value.trim_ascii().is_empty();
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                self.upgrade.1 |= super::lists_upgrade(value);
            }
            _ => {}
        }
    }

    /// nginx's 400 for a header line, naming its first 64 bytes.
    fn invalid_line(&self, line: &[u8]) -> Refusal {
        let mut l = line.to_vec();
        l.truncate(64);
        self.refuse(400, "client sent invalid header line", Some(l))
    }

    /// The name, up to ':' (or the whole line: a name without a value);
    /// `None` for a byte nginx refuses in a name.
    pub(super) fn scan_name(&self, content: &[u8]) -> Option<Name> {
        let mut name = Name {
            end: content.len(),
            invalid: false,
            token: true,
        };
        // Most names are letters, digits and `-` up to their colon: those
        // bytes change nothing, and are passed over in a tighter loop.
        let plain = content
            .iter()
            .position(|&b| NAME_CLASS[usize::from(b)] != PLAIN)
            .unwrap_or(content.len());
        for (i, &b) in content.iter().enumerate().skip(plain) {
            match NAME_CLASS[usize::from(b)] {
                PLAIN => {}
                UNDERSCORE => name.invalid |= !self.rules.underscores_in_headers,
                COLON if i == 0 => return None,
                COLON => {
                    name.end = i;
                    break;
                }
                REFUSED => return None,
                class => {
                    name.invalid = true;
                    name.token &= class == TOKEN;
                }
            }
        }
        Some(name)
    }

    /// An invalid field dropped: kept for nginx's info line (the first few,
    /// 64 bytes each).
    fn drop_field(&mut self, content: &[u8]) {
        if self.dropped.len() < 8 {
            let mut l = content.to_vec();
            l.truncate(64);
            self.dropped.push(l);
        }
    }
}

/// The value without the spaces around it.
fn trim_spaces(mut value: &[u8]) -> &[u8] {
    while let [b' ', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' '] = value {
        value = rest;
    }
    value
}

/// One pass over a value: `None` for a NUL (nginx's 400), else whether it
/// has other control bytes (sluice's own refusal, for fields that are kept).
/// Eight bytes a step: a chunk without a byte below 0x20 or 0x7f (most of
/// them) has neither.
pub(super) fn control_bytes(value: &[u8]) -> Option<bool> {
    let (chunks, rest) = value.as_chunks::<8>();
    let mut control = false;
    for c in chunks {
        if has_control(u64::from_le_bytes(*c)) {
            control |= control_bytes_each(c)?;
        }
    }
    Some(control | control_bytes_each(rest)?)
}

/// Whether a value has a byte no field value may hold (a control byte
/// but TAB, or 0x7f), eight bytes a step as [`control_bytes`].
pub fn any_control_byte(value: &[u8]) -> bool {
    control_bytes(value) != Some(false)
}

/// [`control_bytes`], byte by byte.
fn control_bytes_each(value: &[u8]) -> Option<bool> {
    let mut control = false;
    for &b in value {
        if (b < 0x20 && b != b'\t') || b == 0x7f {
            if b == 0 {
                return None;
            }
            control = true;
        }
    }
    Some(control)
}

/// What a byte makes of a header name ([`HeadParser::scan_name`]): letters,
/// digits and `-` are plain; `_` is valid only with
/// `underscores_in_headers`; `:` ends the name (and is refused first); a
/// space, a control byte or 0x7f is refused; any other byte is invalid, and
/// still a token if it is an RFC 9110 `tchar`.
static NAME_CLASS: [u8; 256] = {
    let mut t = [OTHER; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' => PLAIN,
            b'_' => UNDERSCORE,
            b':' => COLON,
            0..=0x20 | 0x7f => REFUSED,
            _ if is_token(b) => TOKEN,
            _ => OTHER,
        };
        i += 1;
    }
    t
};
const PLAIN: u8 = 0;
const UNDERSCORE: u8 = 1;
const COLON: u8 = 2;
const REFUSED: u8 = 3;
const TOKEN: u8 = 4;
const OTHER: u8 = 5;

/// RFC 9110 `tchar`, beyond letters, digits, `-` and `_`.
const fn is_token(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'.' | b'^' | b'`' | b'|' | b'~'
    )
}

/// The first 64 bytes of `name: value`, written into `buf`.
fn first_64<'a>(buf: &'a mut [u8; 64], name: &[u8], value: &[u8]) -> &'a [u8] {
    let mut n = 0;
    for part in [name, b": ", value] {
        let take = part.len().min(buf.len() - n);
        buf[n..n + take].copy_from_slice(&part[..take]);
        n += take;
    }
    &buf[..n]
}
