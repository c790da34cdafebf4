//! The request, from the gate's canonical head.
//!
//! The gate has already read the client's head with nginx's rules and
//! written it in one narrow form ([`crate::http1::head`]'s `canonical`):
//! `METHOD SP target SP HTTP/1.x CRLF`, then `Name: value CRLF` per field
//! kept, then `CRLF`. So this is no second parse, only cutting that form at
//! its known separators; the values are slices of the head's own buffer,
//! not copies.

use super::response::{Asked, has_token};
use crate::client_body::{ClientBody, Pipe};
use crate::http1::{Framing, Head};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Uri, Version};

/// A request as the loop serves it.
pub(super) struct Exchange {
    pub(super) req: Request<ClientBody>,
    /// Its body's feed, if it has a body.
    pub(super) pipe: Option<Pipe>,
    pub(super) asked: Asked,
    /// The client keeps the connection after it.
    pub(super) keep_alive: bool,
    /// `100 Continue` is owed when the body is first read.
    pub(super) expect_continue: bool,
    /// The body is chunked.
    pub(super) chunked: bool,
}

/// The request of a canonical head (`None` if it is not one, which the gate
/// never gives).
pub(super) fn read(head: Head) -> Option<Exchange> {
    let (framing, fields) = (head.framing, head.fields);
    let bytes = Bytes::from(head.canonical);
    let first = line_end(&bytes)?;
    let line = &bytes[..first];
    let sp1 = line.iter().position(|&b| b == b' ')?;
    let sp2 = line.iter().rposition(|&b| b == b' ')?;
    let method = Method::from_bytes(&line[..sp1]).ok()?;
    let uri = Uri::from_maybe_shared(bytes.slice(sp1 + 1..sp2)).ok()?;
    let http11 = &line[sp2 + 1..] == b"HTTP/1.1";
    let mut headers = HeaderMap::with_capacity(fields);
    // `Connection` is read as the fields go by (not looked up after).
    let (mut close, mut keep) = (false, false);
    let mut pos = first + 2;
    while bytes.get(pos).is_some_and(|&b| b != b'\r') {
        let end = pos + line_end(&bytes[pos..])?;
        // (A field name has no `:`; the canonical form puts one space after it.)
        let colon = pos + bytes[pos..end].iter().position(|&b| b == b':')?;
        let name = HeaderName::from_bytes(&bytes[pos..colon]).ok()?;
        // (Leading and trailing tabs too, as hyper read values.)
        let (mut from, mut to) = (colon + 1, end);
        while from < to && matches!(bytes[from], b' ' | b'\t') {
            from += 1;
        }
        while to > from && matches!(bytes[to - 1], b' ' | b'\t') {
            to -= 1;
        }
        let value = HeaderValue::from_maybe_shared(bytes.slice(from..to)).ok()?;
        if name == header::CONNECTION {
            close |= has_token(&value, b"close");
            keep |= has_token(&value, b"keep-alive");
        }
        headers.append(name, value);
        pos = end + 2;
    }
    // As hyper read it: HTTP/1.1 keeps the connection unless a
    // `Connection` says close; HTTP/1.0 closes it unless one says
    // keep-alive.
    let keep_alive = !close && (http11 || keep);
    let length = match framing {
        Framing::None | Framing::Length(0) => None,
        Framing::Length(n) => Some(Some(n)),
        Framing::Chunked => Some(None),
    };
    let expect_continue = http11
        && length.is_some()
        && headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let (pipe, body) = match length {
        None => (None, ClientBody::Empty),
        Some(n) => {
            let (pipe, body) = Pipe::new(n);
            (Some(pipe), ClientBody::Pipe(body))
        }
    };
    let asked = Asked {
        http10: !http11,
        head: method == Method::HEAD,
    };
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.version_mut() = if http11 {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };
    *req.headers_mut() = headers;
    Some(Exchange {
        req,
        pipe,
        asked,
        keep_alive,
        expect_continue,
        chunked: framing == Framing::Chunked,
    })
}

/// Where the first line of `s` ends (its CR; canonical lines end in CRLF).
fn line_end(s: &[u8]) -> Option<usize> {
    let lf = s.iter().position(|&b| b == b'\n')?;
    lf.checked_sub(1).filter(|&cr| s[cr] == b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::{HeadParser, HeadRules, Parsed};

    fn exchange(raw: &[u8]) -> Exchange {
        let h = match HeadParser::new(HeadRules::default()).advance(raw) {
            Parsed::Head(h) => h,
            other => panic!("not a head: {other:?}"),
        };
        read(h).expect("a canonical head reads")
    }

    #[test]
    fn the_canonical_head_becomes_the_request() {
        let e = exchange(
            b"POST http://example.com:8080/a%20b?q=1 HTTP/1.1\r\nHost: other\r\nX-A:  v  \r\nContent-Length: 3\r\nExpect: 100-Continue\r\nX-A: w\r\n\r\n",
        );
        assert_eq!(e.req.method(), Method::POST);
        assert_eq!(e.req.uri(), "/a%20b?q=1");
        assert_eq!(e.req.headers()["host"], "example.com:8080");
        let xa: Vec<_> = e.req.headers().get_all("x-a").iter().collect();
        assert_eq!(xa, ["v", "w"]);
        assert!(e.keep_alive && e.expect_continue && e.pipe.is_some());
        assert_eq!(e.req.version(), Version::HTTP_11);

        let e = exchange(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(e.keep_alive && e.asked.http10 && e.pipe.is_none());
        let e = exchange(b"GET / HTTP/1.0\r\n\r\n");
        assert!(!e.keep_alive);
        let e = exchange(b"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n");
        assert!(!e.keep_alive && e.asked.head);
    }
}
