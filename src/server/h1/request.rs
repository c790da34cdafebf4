//! The request, from the gate's canonical head.
//!
//! The gate has already read the client's head with nginx's rules and
//! written it in one narrow form ([`crate::http1::head`]'s `canonical`):
//! `METHOD SP target SP HTTP/1.x CRLF`, then `name: value CRLF` per field
//! kept (the name lowercased), then `CRLF`. So this is no second parse,
//! only cutting that form at its known separators; the fields stay where
//! they are in the head's own buffer ([`Wire`]), with no `HeaderMap` built
//! of them (issue #31).

use super::response::{Asked, has_token};
use crate::client_body::{ClientBody, Pipe};
use crate::http1::fields::Wire;
use crate::http1::{Fields, Framing, Head};
use crate::request::RequestHead;
use bytes::Bytes;
use http::header;
use http::{Method, Uri, Version};

/// A request as the loop serves it.
pub(super) struct Exchange {
    pub(super) head: RequestHead,
    pub(super) body: ClientBody,
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
    let framing = head.framing;
    let bytes = Bytes::from(head.canonical);
    // The gate says where the method ends and the line does: the target is
    // between them and ` HTTP/1.x`.
    let (end, sp1) = head.line;
    let sp2 = end
        .checked_sub(b" HTTP/1.1".len())
        .filter(|&sp2| sp2 > sp1)?;
    let http11 = match bytes.get(sp2..end)? {
        b" HTTP/1.1" => true,
        b" HTTP/1.0" => false,
        _ => return None,
    };
    let method = Method::from_bytes(&bytes[..sp1]).ok()?;
    let uri = Uri::from_maybe_shared(bytes.slice(sp1 + 1..sp2)).ok()?;
    let fields = Fields::Wire(Wire::new(bytes, head.spans));
    // As hyper read it: HTTP/1.1 keeps the connection unless a
    // `Connection` says close; HTTP/1.0 closes it unless one says
    // keep-alive.
    let (mut close, mut keep) = (false, false);
    for v in fields.get_all(&header::CONNECTION) {
        close |= has_token(v, b"close");
        keep |= has_token(v, b"keep-alive");
    }
    let keep_alive = !close && (http11 || keep);
    let length = match framing {
        Framing::None | Framing::Length(0) => None,
        Framing::Length(n) => Some(Some(n)),
        Framing::Chunked => Some(None),
    };
    let expect_continue = http11
        && length.is_some()
        && fields
            .get(&header::EXPECT)
            .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue"));
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
    let version = if http11 {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };
    Some(Exchange {
        head: RequestHead {
            method,
            uri,
            version,
            fields,
        },
        body,
        pipe,
        asked,
        keep_alive,
        expect_continue,
        chunked: framing == Framing::Chunked,
    })
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
        assert_eq!(e.head.method, Method::POST);
        assert_eq!(e.head.uri, "/a%20b?q=1");
        assert_eq!(
            e.head.fields.get(&header::HOST),
            Some(&b"example.com:8080"[..])
        );
        let xa = http::HeaderName::from_static("x-a");
        let xa: Vec<_> = e.head.fields.get_all(&xa).collect();
        assert_eq!(xa, [b"v", b"w"]);
        assert!(e.keep_alive && e.expect_continue && e.pipe.is_some());
        assert_eq!(e.head.version, Version::HTTP_11);

        let e = exchange(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(e.keep_alive && e.asked.http10 && e.pipe.is_none());
        let e = exchange(b"GET / HTTP/1.0\r\n\r\n");
        assert!(!e.keep_alive);
        let e = exchange(b"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n");
        assert!(!e.keep_alive && e.asked.head);
    }
}
