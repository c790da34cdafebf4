//! One HTTP/2 request head, judged by the same gate as an HTTP/1.1 head.
//!
//! What HTTP/2 alone forbids is checked here (pseudo-header fields, an
//! uppercase or non-token name, CR, LF or NUL in a value, the
//! connection-specific fields of RFC 9113 §8.2.2); everything else goes
//! through [`HeadParser`]: `:method` and `:path` as a request line,
//! `:authority` as the `Host` field it stands for, then each field in the
//! order it came. The head that goes on is the parser's canonical one,
//! written again as HPACK literals, so a request reaches hyper (and the
//! upstream) only as the HTTP/1.1 gate would have let it through.

use super::hpack::{self, Field};
use crate::http1::{Head, HeadParser, HeadRules, Parsed, Refusal};

/// What becomes of a request head.
#[derive(Debug)]
pub enum Verdict {
    /// The canonical head as an HPACK block for hyper, and the names of
    /// the fields dropped as invalid (`ignore_invalid_headers`), which
    /// nginx logs.
    Accept {
        block: Vec<u8>,
        dropped: Vec<Vec<u8>>,
    },
    /// nginx's answer (a status, its log reason): the stream gets it.
    Refuse(Refusal),
    /// Malformed where RFC 9113 asks for a stream reset (`PROTOCOL_ERROR`),
    /// as nginx resets it: a name or value HTTP/2 forbids (with the line
    /// nginx logs), connection-specific fields or a `TE` other than
    /// `trailers` (which nginx drops without a word).
    Reset(Option<Refusal>),
}

/// nginx's info line for a field the gate dropped as invalid
/// (`ignore_invalid_headers`): one per name of [`Verdict::Accept`]'s
/// `dropped`, for HTTP/2 and HTTP/3 alike.
pub fn dropped_notice(name: Vec<u8>) -> Refusal {
    Refusal {
        status: 400,
        reason: "client sent invalid header",
        detail: Some(name),
        request_line: None,
        in_headers: true,
        fields: None,
    }
}

/// The sizes a head is held to, from `large_client_header_buffers`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// One buffer: the longest field, and the longest `:path`.
    pub field: usize,
    /// All of them: the whole header list (RFC 7541's sizes).
    pub list: usize,
}

impl Limits {
    pub fn of(rules: &HeadRules) -> Limits {
        let (n, size) = rules.large_header_buffers;
        Limits {
            field: size,
            list: n.saturating_mul(size),
        }
    }
}

#[derive(Default)]
struct Pseudo<'a> {
    method: Option<&'a [u8]>,
    scheme: Option<&'a [u8]>,
    authority: Option<&'a [u8]>,
    path: Option<&'a [u8]>,
}

/// Judges a decoded request head (`over`: its list passed `limits.list`).
pub fn judge(fields: &[Field], over: bool, rules: &HeadRules, limits: Limits) -> Verdict {
    match judged(fields, over, rules, limits) {
        Ok(Verdict::Reset(why)) => Verdict::Reset(why.map(|r| with_line(r, fields))),
        Ok(verdict) => verdict,
        Err(refusal) => Verdict::Refuse(with_line(refusal, fields)),
    }
}

fn with_line(mut refusal: Refusal, fields: &[Field]) -> Refusal {
    refusal.request_line = request_line(fields);
    refusal
}

fn refusal(status: u16, reason: &'static str, detail: Option<&[u8]>) -> Refusal {
    Refusal {
        status,
        reason,
        detail: detail.map(|d| d[..d.len().min(64)].to_vec()),
        request_line: None,
        in_headers: true,
        fields: None,
    }
}

/// Accepted or reset; a refusal is the error, so that `?` gives it.
fn judged(
    fields: &[Field],
    over: bool,
    rules: &HeadRules,
    limits: Limits,
) -> Result<Verdict, Refusal> {
    if over {
        // hyper's answer before the gate, kept (nginx ends the connection).
        return Err(refusal(431, "client sent too large request", None));
    }
    if let Some(r) = fields.iter().find_map(forbidden) {
        return Ok(Verdict::Reset(Some(r)));
    }
    let (pseudo, regular) = pseudo_fields(fields)?;
    // `:authority` goes on as the `Host` field: bound as one (nginx bounds
    // every field, pseudo-header fields too).
    let too_large = || refusal(400, "client sent too large header field", None);
    if pseudo.authority.is_some_and(|a| a.len() > limits.field) {
        return Err(too_large());
    }
    for f in regular {
        // nginx's bound is on the name and on the value, each.
        if f.name.len().max(f.value.len()) > limits.field {
            return Err(too_large());
        }
        if connection_specific(f) {
            return Ok(Verdict::Reset(None));
        }
    }
    let method = pseudo
        .method
        .ok_or_else(|| refusal(400, "client sent no :method header", None))?;
    let scheme = pseudo
        .scheme
        .ok_or_else(|| refusal(400, "client sent no :scheme header", None))?;
    let path = pseudo
        .path
        .ok_or_else(|| refusal(400, "client sent no :path header", None))?;
    if !valid_scheme(scheme) {
        return Err(refusal(
            400,
            "client sent invalid :scheme header",
            Some(scheme),
        ));
    }
    if path.len() > limits.field {
        return Err(refusal(414, "client sent too long URI", None));
    }
    let mut parser = HeadParser::new(*rules);
    parser.pseudo_line(method, path)?;
    if let Some(a) = pseudo.authority {
        parser.field(b"host", a)?;
    }
    for f in regular {
        parser.field(&f.name, &f.value)?;
    }
    match parser.end() {
        Parsed::Head(head) => {
            // The parser keeps a dropped field as an HTTP/1.1 line; nginx
            // names only the field on HTTP/2.
            let names = head.dropped.iter().map(|l| {
                let end = l.windows(2).position(|w| w == b": ").unwrap_or(l.len());
                l[..end].to_vec()
            });
            Ok(Verdict::Accept {
                block: block(&head, scheme),
                dropped: names.collect(),
            })
        }
        Parsed::Refused(r) => Err(r),
        Parsed::Partial => Err(refusal(400, "client sent invalid request", None)),
    }
}

/// The pseudo-header fields (each once, all before the first other field,
/// only the four a request has) and the fields after them.
fn pseudo_fields(fields: &[Field]) -> Result<(Pseudo<'_>, &[Field]), Refusal> {
    let mut p = Pseudo::default();
    let start = fields
        .iter()
        .position(|f| !f.name.starts_with(b":"))
        .unwrap_or(fields.len());
    for f in &fields[..start] {
        let slot = match f.name.as_ref() {
            b":method" => &mut p.method,
            b":scheme" => &mut p.scheme,
            b":authority" => &mut p.authority,
            b":path" => &mut p.path,
            _ => {
                return Err(refusal(
                    400,
                    "client sent unknown pseudo-header",
                    Some(&f.name),
                ));
            }
        };
        if slot.is_some() {
            return Err(pseudo_refusal(&f.name, Twice));
        }
        if f.value.is_empty() {
            return Err(pseudo_refusal(&f.name, Empty));
        }
        *slot = Some(&f.value);
    }
    let regular = &fields[start..];
    if let Some(f) = regular.iter().find(|f| f.name.starts_with(b":")) {
        return Err(refusal(
            400,
            "client sent pseudo-header after a header",
            Some(&f.name),
        ));
    }
    Ok((p, regular))
}

#[derive(Clone, Copy)]
enum PseudoFault {
    Twice,
    Empty,
}
use PseudoFault::{Empty, Twice};

/// A pseudo-header sent twice or empty, in nginx's words.
fn pseudo_refusal(name: &[u8], fault: PseudoFault) -> Refusal {
    let reason = match (name, fault) {
        (b":method", Twice) => "client sent duplicate :method header",
        (b":scheme", Twice) => "client sent duplicate :scheme header",
        (b":path", Twice) => "client sent duplicate :path header",
        (_, Twice) => "client sent duplicate host header",
        (b":method", Empty) => "client sent empty :method header",
        (b":scheme", Empty) => "client sent empty :scheme header",
        (b":path", Empty) => "client sent empty :path header",
        (_, Empty) => "client sent invalid host header",
    };
    refusal(400, reason, None)
}

/// What HTTP/2 forbids in a field (RFC 9113 §8.2.1), which makes the
/// request malformed, a stream error: a name with uppercase, whitespace,
/// control bytes or a `:` past the first byte; a value with NUL, CR or LF,
/// or with whitespace at either end. nginx resets such a stream (it lets
/// the whitespace through); so does sluice. (An empty name ends the
/// connection before this: [`super::inbound`].)
fn forbidden(f: &Field) -> Option<Refusal> {
    let name = f.name.get(1..).unwrap_or_default();
    let bad_name = f
        .name
        .first()
        .is_some_and(|&b| b != b':' && BAD_NAME[usize::from(b)])
        || name.iter().any(|&b| BAD_NAME[usize::from(b)] || b == b':');
    if bad_name {
        return Some(refusal(
            400,
            "client sent invalid header name",
            Some(&f.name),
        ));
    }
    let v = &f.value;
    let bad_value = v.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n')
        || v.first().is_some_and(|&b| b == b' ' || b == b'\t')
        || v.last().is_some_and(|&b| b == b' ' || b == b'\t');
    if bad_value {
        return Some(refusal(
            400,
            "client sent header with invalid value",
            Some(&f.name),
        ));
    }
    None
}

/// The bytes no HTTP/2 field name may hold (uppercase, whitespace and
/// control bytes, 0x7f), by value: one lookup a byte.
static BAD_NAME: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_uppercase() || b <= 0x20 || b == 0x7f;
        b += 1;
    }
    t
};

/// RFC 9113 §8.2.2: fields of one HTTP/1.1 hop, meaningless in HTTP/2.
fn connection_specific(f: &Field) -> bool {
    match f.name.as_ref() {
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade" => {
            true
        }
        b"te" => f.value.as_ref() != b"trailers",
        _ => false,
    }
}

/// `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` (RFC 3986 §3.1).
fn valid_scheme(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_alphabetic)
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
}

/// The request line nginx logs for an HTTP/2 request: `METHOD PATH
/// HTTP/2.0`, from what the client sent.
fn request_line(fields: &[Field]) -> Option<Vec<u8>> {
    let get = |n: &[u8]| fields.iter().find(|f| f.name == n).map(|f| &f.value[..]);
    let (method, path) = (get(b":method")?, get(b":path")?);
    let mut l = Vec::with_capacity(method.len() + path.len() + 10);
    l.extend_from_slice(method);
    l.push(b' ');
    l.extend_from_slice(path);
    l.extend_from_slice(b" HTTP/2.0");
    Some(l)
}

/// The canonical head (`METHOD TARGET HTTP/1.1`, then the fields, as
/// [`HeadParser`] wrote it and noted where each part is) as an HPACK
/// block: the request line's parts as pseudo-header fields, then the
/// fields, `Host` among them. `Host` goes as a field, not as
/// `:authority`: hyper would parse `:authority` as a URI's authority,
/// refusing hosts that nginx (and the gate) take, such as `a\b`; the
/// service reads `Host` either way.
fn block(head: &Head, scheme: &[u8]) -> Vec<u8> {
    let c = &head.canonical[..];
    let mut out = Vec::with_capacity(c.len() + 16);
    let line = c.get(..head.line.0).unwrap_or_default();
    let method = line.get(..head.line.1).unwrap_or_default();
    // The target has no space (the canonical head escapes them).
    let rest = line.get(head.line.1 + 1..).unwrap_or_default();
    let target = rest.split(|&b| b == b' ').next().unwrap_or_default();
    hpack::encode(&mut out, b":method", method);
    hpack::encode(&mut out, b":scheme", scheme);
    hpack::encode(&mut out, b":path", target);
    for span in &head.spans {
        let (name, value) = span.field_in(c);
        hpack::encode(&mut out, name, value);
    }
    out
}

/// The block that stands in for a refused request: hyper hands it to the
/// service like any other, which finds the refusal by `token`. Its method
/// is lowercase, which the gate refuses in any client's request, so no
/// client can send one.
pub fn stand_in(token: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    hpack::encode(&mut out, b":method", STAND_IN_METHOD.as_bytes());
    hpack::encode(&mut out, b":scheme", b"http");
    let mut path = itoa::Buffer::new();
    let mut p = b"/".to_vec();
    p.extend_from_slice(path.format(token).as_bytes());
    hpack::encode(&mut out, b":path", &p);
    out
}

/// The field the gate adds last to every request it lets through: the
/// stream's id, which hyper does not tell its service. The service takes
/// the last one and removes them all, so a client's own is never believed.
pub const STREAM_FIELD: &str = "sluice-stream-id";

/// The method of a [`stand_in`] request.
pub const STAND_IN_METHOD: &str = "refused";

/// The block that makes hyper reset a stream with `PROTOCOL_ERROR` (it
/// treats a `connection` field as malformed, RFC 9113 §8.2.2).
pub fn reset_block() -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    hpack::encode(&mut out, b":method", b"GET");
    hpack::encode(&mut out, b":scheme", b"http");
    hpack::encode(&mut out, b":path", b"/");
    hpack::encode(&mut out, b"connection", b"close");
    out
}

/// A trailer section (HEADERS after a request's DATA): the stream is reset
/// (hyper treats the `connection` field as malformed). nginx 1.22 refuses
/// request trailers on HTTP/2 outright (it ends the connection), so a
/// request that carries them never reaches the upstream; sluice ends only
/// that stream.
pub fn trailers(_fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::new();
    hpack::encode(&mut out, b"connection", b"close");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &'static str, value: &str) -> Field {
        Field {
            name: bytes::Bytes::from_static(name.as_bytes()),
            value: bytes::Bytes::copy_from_slice(value.as_bytes()),
        }
    }

    fn head(authority: &str) -> Vec<Field> {
        vec![
            field(":method", "GET"),
            field(":scheme", "http"),
            field(":authority", authority),
            field(":path", "/"),
        ]
    }

    /// `:authority` is bound as the `Host` field it becomes: a head the
    /// gate lets through is let through again as its own block says (the
    /// http2 fuzz target's finding: a long `:authority`, then a long `host`).
    #[test]
    fn an_authority_over_one_buffer_is_too_large_a_field() {
        let rules = HeadRules::default();
        let limits = Limits {
            field: 16,
            list: 64,
        };
        let long = "a".repeat(17);
        match judge(&head(&long), false, &rules, limits) {
            Verdict::Refuse(r) => {
                assert_eq!(
                    (r.status, r.reason),
                    (400, "client sent too large header field")
                );
            }
            v => panic!("{v:?}"),
        }
        let fits = "a".repeat(16);
        let Verdict::Accept { block, .. } = judge(&head(&fits), false, &rules, limits) else {
            panic!("refused");
        };
        let again = hpack::Decoder::new()
            .decode(&block, usize::MAX)
            .unwrap()
            .fields;
        assert!(matches!(
            judge(&again, false, &rules, limits),
            Verdict::Accept { .. }
        ));
    }
}
