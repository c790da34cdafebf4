//! The upstream's response head: read until complete, parsed with
//! `httparse`, 1xx skipped (but 101, the last head on its connection), hop-by-hop headers dropped, and its body's
//! framing decided by RFC 9112 §6.3, with whether the connection may be
//! reused after it.
//!
//! Why the framing is decided here, once: everything after the head (the
//! body, and on a kept-alive connection the next response) is read by that
//! decision, so a suspect message (Content-Length beside chunked, an
//! unknown coding, an HTTP/1.0 keep-alive without a length) is settled
//! before a byte of its body is taken. The error wording is nginx's.

use super::Error;
use super::body::{Chunk, Framing, parse_number};
use super::fields::{Span, UpstreamFields};
use super::pool::READ_CHUNK;
use crate::headers::HiddenHeaders;
use bytes::{Buf, BytesMut};
use http::{HeaderName, Method, Response, StatusCode, header};
use std::pin::Pin;

/// Largest response head accepted; nginx's `proxy_buffer_size` is 4k or 8k,
/// so anything nginx accepts fits.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// Most header lines in a response head (hyper's default).
const MAX_HEADERS: usize = 100;

/// The response head (1xx skipped), how its body is framed, and whether
/// the connection may be reused after it.
pub(super) async fn read_head<R: tokio::io::AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    (method, hidden): (&Method, &HiddenHeaders),
    received: &mut bool,
) -> Result<(Response<()>, Framing, bool), Error> {
    loop {
        if !buf.is_empty() {
            *received = true;
            match parse_head(buf, method, hidden)? {
                Some(Parsed::Interim) => continue,
                Some(Parsed::Final(resp, framing, keep)) => return Ok((resp, framing, keep)),
                None if buf.len() >= MAX_HEAD => return Err(Error::TooBig),
                None => {}
            }
        }
        buf.reserve(READ_CHUNK);
        let read =
            std::future::poll_fn(|cx| tokio_util::io::poll_read_buf(Pin::new(&mut *rd), cx, buf));
        match read.await {
            Ok(0) => return Err(Error::Closed),
            Ok(_) => {}
            Err(e) => return Err(Error::Recv(e)),
        }
    }
}

pub(crate) enum Parsed {
    Interim,
    Final(Response<()>, Framing, bool),
}

/// Parses a complete head off the front of `buf`, or `None` if it is not
/// all there yet; the fields `hidden` names are left out (the client never
/// gets them).
pub(crate) fn parse_head(
    buf: &mut BytesMut,
    method: &Method,
    hidden: &HiddenHeaders,
) -> Result<Option<Parsed>, Error> {
    let mut lines = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut parsed,
        buf,
        &mut lines,
    ) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Error::TooBig),
        Err(_) => return Err(Error::Invalid("header")),
    };
    let code = parsed.code.unwrap_or(0);
    let status = StatusCode::from_u16(code).map_err(|_| Error::Invalid("status"))?;
    let switching = status == StatusCode::SWITCHING_PROTOCOLS;
    if status.is_informational() && !switching {
        buf.advance(len);
        return Ok(Some(Parsed::Interim));
    }
    let http11 = parsed.version == Some(1);
    let count = parsed.headers.len();
    let mut at = [(0u32, 0u32, 0u32, 0u32); MAX_HEADERS];
    locate(&mut at, buf.as_ptr() as usize, parsed.headers);
    let mut head = buf.split_to(len);
    let mut fields = read_fields(&mut head, &at[..count], (http11, switching), hidden)?;
    // A 101 ends HTTP on the connection: what follows is the new protocol,
    // until either side closes; the connection is never reused (it is the
    // tunnel's, or closed with the response). Its `keep` says only that
    // nothing went wrong before it: `exchange` clears it when the 101 came
    // before the whole request was sent (see `super::switched`).
    let (framing, keep) = if switching {
        (Framing::UntilClose, true)
    } else {
        let framing = body_framing(method, status, http11, &mut fields)?;
        (framing, fields.keep)
    };
    let mut passed = UpstreamFields::new(head.freeze(), std::mem::take(&mut fields.at));
    for name in &fields.connection {
        if !(switching && *name == header::UPGRADE) {
            passed.remove(name.as_str().as_bytes());
        }
    }
    // A length is not passed on beside chunked, nor with a 101 (it would be
    // the new protocol's business).
    if switching || matches!(framing, Framing::Chunked(_)) {
        passed.remove(b"content-length");
    }
    let mut resp = Response::new(());
    *resp.status_mut() = status;
    resp.extensions_mut().insert(passed);
    Ok(Some(Parsed::Final(resp, framing, keep)))
}

/// Header values share the head's bytes rather than each being copied:
/// where each name and value is (from `base`, the head's first byte),
/// taken before the head is split off the buffer. (Into the caller's
/// array: returned, its 1.6 KB were copied once more per response.)
fn locate(at: &mut [Span; MAX_HEADERS], base: usize, lines: &[httparse::Header<'_>]) {
    for (slot, h) in at.iter_mut().zip(lines.iter()) {
        let n = (h.name.as_ptr() as usize - base) as u32;
        let v = (h.value.as_ptr() as usize - base) as u32;
        *slot = (n, h.name.len() as u32, v, h.value.len() as u32);
    }
}

/// What a response's header lines say, the hop-by-hop ones taken out.
struct Fields {
    /// Where the fields passed on to the client are in the head.
    at: Vec<Span>,
    /// The connection may be reused (so far: the framing decides last).
    keep: bool,
    /// The Content-Length, every one of them the same.
    length: Option<u64>,
    /// A Transfer-Encoding: `Some(true)` if its last coding is chunked.
    chunked: Option<bool>,
    /// The names its Connection lists: hop-by-hop on this connection too.
    connection: Vec<HeaderName>,
}

/// Which of the response fields sluice reads itself or drops as
/// hop-by-hop a field's name (lowercase) is, by its length first, as most
/// names have none of theirs.
fn special(name: &[u8]) -> Option<&'static str> {
    let is = |n: &'static str| (n.as_bytes() == name).then_some(n);
    match name.len() {
        2 => is("te"),
        7 => is("upgrade").or_else(|| is("trailer")),
        10 => is("connection").or_else(|| is("keep-alive")),
        14 => is("content-length"),
        16 => is("proxy-connection"),
        17 => is("transfer-encoding"),
        18 => is("proxy-authenticate"),
        _ => None,
    }
}

/// The header lines at `at` in `head`, in order: the framing ones and
/// Connection read (not passed on), hop-by-hop ones dropped, the names
/// Connection lists noted (the caller removes them); `Upgrade` kept in a
/// 101 (`switching`: the client is told which protocol it switched to). A
/// field `hidden` names is left out (nginx's `Date` and `Server` are in
/// every response). Every name is lowercased in place first.
fn read_fields(
    head: &mut [u8],
    at: &[Span],
    (http11, switching): (bool, bool),
    hidden: &HiddenHeaders,
) -> Result<Fields, Error> {
    let mut f = Fields {
        at: Vec::with_capacity(at.len()),
        keep: http11,
        length: None,
        chunked: None,
        connection: Vec::new(),
    };
    for &span in at {
        let (n, nl, v, vl) = span;
        let (n, nl, v, vl) = (n as usize, nl as usize, v as usize, vl as usize);
        crate::http1::lowercase(&mut head[n..n + nl]);
        let (raw, value) = (&head[n..n + nl], &head[v..v + vl]);
        match special(raw) {
            Some("content-length") => {
                let l = parse_number(value.trim_ascii(), 10)
                    .ok_or(Error::Invalid("\"Content-Length\" header"))?;
                if f.length.is_some_and(|old| old != l) {
                    return Err(Error::Invalid("\"Content-Length\" header"));
                }
                f.length = Some(l);
                if hidden.hides(raw) {
                    continue;
                }
            }
            Some("transfer-encoding") => {
                let last = value.rsplit(|&b| b == b',').next().unwrap_or(b"");
                f.chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
                continue;
            }
            Some("connection") => {
                connection_tokens(value, &mut f.keep, &mut f.connection);
                continue;
            }
            Some("upgrade") if switching && !hidden.hides(raw) => {}
            Some(_) => continue,
            None if hidden.hides(raw) => continue,
            None => {}
        }
        f.at.push(span);
    }
    Ok(f)
}

/// A Connection header's tokens: `close` and `keep-alive` decide `keep`,
/// any other names a header that is hop-by-hop on this connection.
fn connection_tokens(value: &[u8], keep: &mut bool, named: &mut Vec<HeaderName>) {
    for t in value.split(|&b| b == b',') {
        let t = t.trim_ascii();
        if t.eq_ignore_ascii_case(b"close") {
            *keep = false;
        } else if t.eq_ignore_ascii_case(b"keep-alive") {
            *keep = true;
        } else if let Ok(n) = HeaderName::from_bytes(t) {
            named.push(n);
        }
    }
}

/// How the body is framed (RFC 9112 §6.3), and `f.keep` settled with it.
fn body_framing(
    method: &Method,
    status: StatusCode,
    http11: bool,
    f: &mut Fields,
) -> Result<Framing, Error> {
    let framing = if *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Framing::Length(0)
    } else if let Some(chunked) = f.chunked {
        // Only chunked is understood (nginx: "upstream sent unknown
        // Transfer-Encoding"); with a Content-Length too the message is
        // suspect (RFC 9112 §6.3): read it, but do not reuse the connection.
        if !chunked {
            return Err(Error::Invalid("\"Transfer-Encoding\" header"));
        }
        if f.length.is_some() {
            f.keep = false;
        }
        Framing::Chunked(Chunk::Size)
    } else if let Some(l) = f.length {
        Framing::Length(l)
    } else {
        f.keep = false;
        Framing::UntilClose
    };
    if !http11 && f.keep {
        // An HTTP/1.0 upstream that said keep-alive: trust only a framed body.
        f.keep = !matches!(framing, Framing::UntilClose);
    }
    Ok(framing)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 101 is the last head on its connection: `Upgrade` kept for the
    /// client, what follows it left unread (the new protocol's first bytes).
    #[test]
    fn a_101_keeps_upgrade_and_leaves_what_follows() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade, X-Hop\r\nX-Hop: 1\r\nSec-WebSocket-Accept: abc\r\nContent-Length: 5\r\n\r\n\x81\x02hi"[..],
        );
        let Ok(Some(Parsed::Final(mut resp, framing, keep))) =
            parse_head(&mut buf, &Method::GET, &HiddenHeaders::default())
        else {
            panic!("a final head");
        };
        super::super::into_header_map(&mut resp);
        assert_eq!(resp.status(), 101);
        assert_eq!(resp.headers()["upgrade"], "websocket");
        assert_eq!(resp.headers()["sec-websocket-accept"], "abc");
        for gone in ["connection", "x-hop", "content-length"] {
            assert!(!resp.headers().contains_key(gone), "{gone}");
        }
        assert_eq!(framing, Framing::UntilClose);
        assert!(keep, "(for a 101: nothing went wrong before it)");
        assert_eq!(&buf[..], b"\x81\x02hi");

        // Any other response drops Upgrade, as before.
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 200 OK\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n"[..],
        );
        let Ok(Some(Parsed::Final(mut resp, ..))) =
            parse_head(&mut buf, &Method::GET, &HiddenHeaders::default())
        else {
            panic!("a final head");
        };
        super::super::into_header_map(&mut resp);
        assert!(!resp.headers().contains_key("upgrade"));
    }

    /// The fields passed on stay in the head, in the upstream's order with
    /// their names lowercased; the hop-by-hop ones, those `Connection`
    /// names and a length beside chunked are left out (and nothing is in
    /// the map: it is sluice's own).
    #[test]
    fn fields_stay_in_place_lowercased_and_in_order() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 200 OK\r\nX-B: 1\r\nConnection: keep-alive, X-Hop\r\nSet-Cookie: a\r\nX-HOP: no\r\nContent-Length: 3\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nset-cookie: b\r\n\r\n"[..],
        );
        let Ok(Some(Parsed::Final(resp, framing, keep))) =
            parse_head(&mut buf, &Method::GET, &HiddenHeaders::default())
        else {
            panic!("a final head");
        };
        assert!(resp.headers().is_empty());
        let up = UpstreamFields::of(&resp).expect("the upstream's fields");
        let fields: Vec<_> = up.iter().collect();
        assert_eq!(
            fields,
            [
                (&b"x-b"[..], &b"1"[..]),
                (b"set-cookie", b"a"),
                (b"content-type", b"text/plain"),
                (b"set-cookie", b"b"),
            ]
        );
        assert_eq!(framing, Framing::Chunked(Chunk::Size));
        assert!(!keep, "a length beside chunked: not reused");
    }

    /// `special` knows these names (lowercase), and no other.
    #[test]
    fn special_names_are_the_lists() {
        const SPECIAL: [&str; 9] = [
            "content-length",
            "transfer-encoding",
            "connection",
            "upgrade",
            "keep-alive",
            "proxy-connection",
            "te",
            "trailer",
            "proxy-authenticate",
        ];
        for n in SPECIAL {
            assert_eq!(special(n.as_bytes()), Some(n));
        }
        for n in ["content-type", "tee", "upgrades", "connectio", "x", ""] {
            assert_eq!(special(n.as_bytes()), None, "{n}");
        }
    }

    /// Hidden fields never reach the response, in any case; a hidden
    /// Content-Length still frames the body.
    #[test]
    fn hidden_fields_are_left_out_as_they_are_read() {
        let head = b"HTTP/1.1 200 OK\r\nServer: up\r\nDATE: now\r\nX-Accel-Redirect: /x\r\nX-Powered-By: php\r\nContent-Length: 2\r\nX-Kept: 1\r\n\r\nhi";
        let read = |hidden: &HiddenHeaders| {
            let mut buf = BytesMut::from(&head[..]);
            let Ok(Some(Parsed::Final(mut resp, framing, _))) =
                parse_head(&mut buf, &Method::GET, hidden)
            else {
                panic!("a final head");
            };
            super::super::into_header_map(&mut resp);
            let mut names: Vec<String> = resp.headers().keys().map(|n| n.to_string()).collect();
            names.sort();
            (names, framing)
        };
        let (names, framing) = read(&HiddenHeaders::default());
        assert_eq!(names, ["content-length", "x-kept", "x-powered-by"]);
        assert_eq!(framing, Framing::Length(2));
        let hide = [
            HeaderName::from_static("x-powered-by"),
            header::CONTENT_LENGTH,
        ];
        let (names, framing) = read(&HiddenHeaders::new(&hide, &[header::SERVER]));
        assert_eq!(names, ["server", "x-kept"]);
        assert_eq!(framing, Framing::Length(2));
    }
}
