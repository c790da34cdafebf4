//! The `http3` fuzz target: HTTP/3 request heads as h3 hands them over
//! (an `http::Request` QPACK-decoded and parsed), through sluice's head
//! path ([`crate::server::h3_head`]): the fields made of the request, the
//! HTTP/2 gate, the request made again from the gate's canonical block.
//!
//! Why these checks: the request `request::handle` reads must be exactly
//! the head the gate accepted. So an accepted head is never lost on the
//! way back (the gate accepted it: it must become a request), has neither
//! a connection-specific field nor two `Cookie`s nor a second `Host`, keeps
//! the client's method, and is a fixed point: judged again through the
//! same path it is accepted unchanged. A refusal is a 4xx.

use super::Reader;
use crate::http1::HeadRules;
use crate::server::{H3Head, h3_fields, h3_head};
use http::{HeaderName, HeaderValue, Method, Request, header};

/// Byte 0 picks the rules as for `http1`; the rest is a list of fields
/// (the `http2` target's generator), made a request as h3 would (fields it
/// refuses, such as an uppercase name, are h3's to reset: left out).
pub fn http3(data: &[u8]) {
    let mut r = Reader(data);
    let rules = super::http1::fuzz_rules(r.u8());
    let Some(req) = as_h3(&super::http2::fields(&mut r)) else {
        return;
    };
    match h3_head(&req, &rules) {
        H3Head::Refuse(r) => assert!((400..500).contains(&r.status), "refused with {r:?}"),
        H3Head::Reset(_) => {}
        H3Head::Accept(parts, _) => check_accepted(&req, parts, &rules),
    }
}

fn check_accepted(req: &Request<()>, parts: http::request::Parts, rules: &HeadRules) {
    assert_eq!(&parts.method, req.method(), "the method changed");
    assert!(parts.uri.path().starts_with('/'), "{:?}", parts.uri);
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    ] {
        assert!(!parts.headers.contains_key(name), "{name} went through");
    }
    if let Some(te) = parts.headers.get(header::TE) {
        assert_eq!(te, "trailers");
    }
    assert!(parts.headers.get_all(header::COOKIE).iter().count() <= 1);
    assert_eq!(
        parts.headers.get_all(header::HOST).iter().count(),
        1,
        "{parts:?}"
    );
    // The same request through the same path again: accepted, unchanged.
    let mut again = Request::new(());
    *again.method_mut() = parts.method.clone();
    *again.uri_mut() = with_authority(&parts);
    *again.headers_mut() = parts.headers.clone();
    again.headers_mut().remove(header::HOST);
    // The cookies as the client sent them, one crumb a field: joined, an
    // empty crumb leaves a "; " at the end (as nginx joins them), which no
    // single field may carry.
    again.headers_mut().remove(header::COOKIE);
    for crumb in req.headers().get_all(header::COOKIE) {
        again.headers_mut().append(header::COOKIE, crumb.clone());
    }
    match h3_head(&again, rules) {
        H3Head::Accept(p2, _) => {
            assert_eq!(p2.method, parts.method);
            assert_eq!(p2.uri, parts.uri);
            assert_eq!(p2.headers, parts.headers, "judged again, the head changed");
        }
        other => panic!(
            "an accepted head judged again: {other:?}\n{:?}",
            h3_fields(&again)
        ),
    }
}

/// The accepted request's URI as a client would send it again: its host
/// as `:authority`, `https`.
fn with_authority(parts: &http::request::Parts) -> http::Uri {
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let built = http::Uri::builder()
        .scheme("https")
        .authority(host.unwrap_or_default())
        .path_and_query(pq)
        .build();
    built.unwrap_or_else(|_| parts.uri.clone())
}

/// The request h3 makes of `fields` (RFC 9114 §4.3's pseudo-headers, then
/// the rest), or `None` where h3 resets the stream itself.
fn as_h3(fields: &[crate::http2::hpack::Field]) -> Option<Request<()>> {
    let mut b = http::uri::Builder::new();
    let mut req = Request::new(());
    for f in fields {
        let text = std::str::from_utf8(&f.value).ok();
        match f.name.as_ref() {
            b":method" => *req.method_mut() = Method::from_bytes(&f.value).ok()?,
            b":scheme" => b = b.scheme(text?),
            b":authority" => b = b.authority(text?),
            b":path" => b = b.path_and_query(text?),
            n if n.starts_with(b":") => return None,
            n => {
                let name = HeaderName::from_lowercase(n).ok()?;
                req.headers_mut()
                    .append(name, HeaderValue::from_bytes(&f.value).ok()?);
            }
        }
    }
    *req.uri_mut() = b.build().ok()?;
    Some(req)
}
