//! The `upstream` fuzz target: bytes an upstream might send, through the
//! response head parser and the body decoder of `crate::upstream`, fed at
//! once and in pieces.
//!
//! Why the same bytes twice: a connection receives a response in whatever
//! pieces the network makes, and nothing the client sees (head, framing,
//! body, the bytes left for the next response) may depend on them.

use super::{Reader, pieces};
use bytes::BytesMut;
use http::{Method, header};

/// Bytes of response fed to the parser: libFuzzer's default `-max_len`. The
/// body decoder refuses a chunk line longer than 4096 bytes only once that
/// many are buffered without its end, which depends on how the bytes
/// arrived; below it, how they arrive must not matter.
const FUZZ_MAX_RESPONSE: usize = 4096;

/// What reading a response head and body ended in, for comparing two ways
/// of feeding the same bytes.
#[derive(Debug, PartialEq)]
enum Read {
    /// Error text.
    Failed(String),
    /// The bytes ran out before the head was complete.
    Partial,
    Head {
        interim: usize,
        status: http::StatusCode,
        headers: http::HeaderMap,
        framing: crate::upstream::Framing,
        keep: bool,
        body: Vec<u8>,
        /// The body broke off (invalid chunked, or truncated).
        body_failed: bool,
        /// Bytes after the body's end, never consumed (the next response on
        /// a kept-alive connection).
        rest: Vec<u8>,
    },
}

/// One upstream response: byte 0 picks the request method, byte 1 how the
/// bytes arrive (in pieces of a pseudo-random size, or at once), the rest is
/// what the upstream sent. Runs the response head parser and body decoder of
/// [`crate::upstream`] the way a connection does (parse when bytes come,
/// skip 1xx, then take the body until its end or the bytes run out).
///
/// Checked: no panic; the same result whatever the pieces (head, framing,
/// body bytes, error, and the bytes left after the body); hop-by-hop and
/// framing headers never come out; the fields passed on are lowercase and
/// each a valid `HeaderName` and `HeaderValue` (none lost when they move
/// into a map for hyper); a body never takes bytes past its end.
pub fn upstream(data: &[u8]) {
    let mut r = Reader(data);
    let method = match r.u8() % 5 {
        0 => Method::GET,
        1 => Method::HEAD,
        2 => Method::POST,
        3 => Method::PUT,
        _ => Method::DELETE,
    };
    let seed = r.u8();
    let bytes = &r.0[..r.0.len().min(FUZZ_MAX_RESPONSE)];
    let whole = read_response(bytes, &method, &[bytes.len()]);
    let pieces = pieces(seed, bytes.len(), 64);
    let split = read_response(bytes, &method, &pieces);
    assert_eq!(whole, split, "pieces {pieces:?} changed the result");

    if let Read::Head {
        status,
        headers,
        framing,
        body,
        body_failed,
        rest,
        ..
    } = &whole
    {
        for name in [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::TE,
            header::TRAILER,
            header::UPGRADE,
            header::PROXY_AUTHENTICATE,
        ] {
            // (A 101 tells the client the protocol it switched to.)
            let switched = name == header::UPGRADE && *status == 101;
            assert!(switched || !headers.contains_key(&name), "{name} came out");
        }
        assert!(!headers.contains_key("keep-alive") && !headers.contains_key("proxy-connection"));
        // (What follows a 101 is the new protocol's, read until the end,
        // whatever the method: not a body.)
        if (method == Method::HEAD || *status == 204 || *status == 304) && *status != 101 {
            assert!(body.is_empty(), "a body where none may be");
        }
        if let crate::upstream::Framing::Chunked(_) = framing {
            assert!(!headers.contains_key(header::CONTENT_LENGTH));
        }
        // Nothing is lost or invented: head, body and the rest came from
        // the bytes, in order.
        assert!(body.len() + rest.len() <= bytes.len());
        assert!(bytes.ends_with(rest));
        if !*body_failed {
            match framing {
                crate::upstream::Framing::UntilClose | crate::upstream::Framing::Length(_) => {
                    let start = bytes.len() - rest.len() - body.len();
                    assert_eq!(&bytes[start..bytes.len() - rest.len()], &body[..]);
                }
                _ => {}
            }
        }
    }
}

/// Feed `bytes` in `pieces` as a connection would receive them.
fn read_response(bytes: &[u8], method: &Method, pieces: &[usize]) -> Read {
    use crate::upstream::{Framing, Parsed, parse_head, take_body};
    let mut at = 0;
    let mut next = |buf: &mut BytesMut, i: &mut usize| -> bool {
        match pieces.get(*i) {
            Some(&n) => {
                buf.extend_from_slice(&bytes[at..at + n]);
                at += n;
                *i += 1;
                true
            }
            None => false,
        }
    };
    let mut buf = BytesMut::new();
    let mut i = 0;
    let mut interim = 0;
    // The head, as `read_head` reads it.
    let (mut resp, framing, keep) = 'head: loop {
        while !buf.is_empty() {
            match parse_head(&mut buf, method, &crate::headers::HiddenHeaders::default()) {
                Ok(Some(Parsed::Interim)) => interim += 1,
                Ok(Some(Parsed::Final(resp, framing, keep))) => break 'head (resp, framing, keep),
                Ok(None) => break,
                Err(e) => return Read::Failed(e.to_string()),
            }
        }
        if !next(&mut buf, &mut i) {
            return Read::Partial;
        }
    };
    written_as_sent(&resp, &framing, method);
    // The body, as `UpstreamBody` takes it.
    let mut state = framing;
    let mut body = Vec::new();
    let mut body_failed = false;
    loop {
        match take_body(&mut state, &mut buf) {
            Ok(Some(piece)) => {
                assert!(!piece.is_empty(), "an empty body piece");
                body.extend_from_slice(&piece);
                continue;
            }
            Ok(None) => {}
            Err(_) => {
                body_failed = true;
                break;
            }
        }
        if matches!(state, Framing::Length(0)) {
            state = Framing::Done;
        }
        if state == Framing::Done {
            break;
        }
        if !next(&mut buf, &mut i) {
            // The upstream closed: the end of an unframed body, else a
            // truncated one.
            body_failed = state != Framing::UntilClose;
            break;
        }
    }
    let mut rest = buf.to_vec();
    rest.extend_from_slice(&bytes[at..]);
    Read::Head {
        interim,
        status: resp.status(),
        headers: passed_on(&mut resp),
        framing,
        keep,
        body,
        body_failed,
        rest,
    }
}

/// The loop's HTTP/1.1 writer sends the upstream's fields as they came, in
/// order, and a head a client reads whole; the framing fields, `Date` and
/// `Connection` are the writer's own (it frames what it sends).
fn written_as_sent(resp: &http::Response<()>, framing: &crate::upstream::Framing, method: &Method) {
    use crate::server::h1;
    use crate::upstream::{Framing, UpstreamFields};
    let Some(up) = UpstreamFields::of(resp) else {
        return;
    };
    let mut copy = http::Response::new(());
    *copy.status_mut() = resp.status();
    copy.extensions_mut().insert(up.clone());
    let (mut parts, ()) = copy.into_parts();
    let length = match framing {
        Framing::Length(0) | Framing::Done => h1::Length::None,
        Framing::Length(n) => h1::Length::Known(*n),
        Framing::Chunked(_) | Framing::UntilClose => h1::Length::Unknown,
    };
    let asked = h1::Asked {
        http10: false,
        head: method == Method::HEAD,
    };
    let mut out = Vec::new();
    h1::encode(&mut parts, length, asked, &mut true, &mut out);
    let mut lines = vec![httparse::EMPTY_HEADER; up.len() + 8];
    let mut read = httparse::Response::new(&mut lines);
    match read.parse(&out) {
        Ok(httparse::Status::Complete(n)) => assert_eq!(n, out.len()),
        other => panic!("{other:?}: {:?}", String::from_utf8_lossy(&out)),
    }
    assert_eq!(read.code, Some(resp.status().as_u16()));
    let theirs = |n: &[u8]| {
        !matches!(
            n,
            b"content-length" | b"transfer-encoding" | b"trailer" | b"connection" | b"date"
        )
    };
    let sent: Vec<(&[u8], &[u8])> = up.iter().filter(|(n, _)| theirs(n)).collect();
    let written: Vec<(&[u8], &[u8])> = read
        .headers
        .iter()
        .map(|h| (h.name.as_bytes(), h.value))
        .filter(|(n, _)| theirs(n))
        .collect();
    assert_eq!(written, sent, "the upstream's fields written otherwise");
}

/// The response's fields as hyper's writers get them, checked on the way:
/// every field passed on is a valid `HeaderName` (lowercase) and
/// `HeaderValue`, and none is lost at hyper's door.
fn passed_on(resp: &mut http::Response<()>) -> http::HeaderMap {
    let fields = crate::upstream::UpstreamFields::of(resp).map(|f| {
        f.iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect::<Vec<_>>()
    });
    crate::upstream::into_header_map(resp);
    let fields = fields.unwrap_or_default();
    assert_eq!(resp.headers().len(), fields.len(), "a field lost");
    for (n, v) in &fields {
        assert!(!n.iter().any(u8::is_ascii_uppercase), "{n:?} not lowercase");
        let values = resp
            .headers()
            .get_all(http::HeaderName::from_bytes(n).unwrap());
        assert!(values.iter().any(|x| x.as_bytes() == v.as_slice()));
    }
    resp.headers().clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The harness reads what a connection reads: a chunked body up to its
    /// end, whatever the pieces, and leaves the next response alone.
    #[test]
    fn upstream_harness_reads_like_a_connection() {
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nHTTP/1.1 204";
        for pieces in [vec![bytes.len()], vec![1; bytes.len()]] {
            let Read::Head {
                interim,
                status,
                body,
                body_failed,
                rest,
                keep,
                ..
            } = read_response(bytes, &Method::GET, &pieces)
            else {
                panic!("no head")
            };
            assert_eq!((interim, status.as_u16(), keep), (1, 200, true));
            assert_eq!((&body[..], body_failed), (&b"hello"[..], false));
            assert_eq!(rest, b"HTTP/1.1 204");
        }
        let cut = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel";
        let Read::Head { body_failed, .. } = read_response(cut, &Method::GET, &[cut.len()]) else {
            panic!("no head")
        };
        assert!(body_failed, "a truncated body is a failure");
        assert_eq!(
            read_response(b"HTTP/1.1 200 OK\r\n", &Method::GET, &[17]),
            Read::Partial
        );
    }
}
