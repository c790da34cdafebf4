//! nginx's head rules on whole heads: canonical forms, framing, refusals,
//! buffer sizes, heads fed a byte at a time, Host validation.

use super::unique::valid_host;
use super::*;

fn parse(s: &[u8]) -> Parsed {
    parse_head(s, &HeadRules::default())
}

fn canonical(s: &[u8]) -> String {
    match parse(s) {
        Parsed::Head(h) => String::from_utf8(h.canonical).unwrap(),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(s)),
    }
}

fn refused(s: &[u8]) -> (u16, &'static str) {
    match parse(s) {
        Parsed::Refused(r) => (r.status, r.reason),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(s)),
    }
}

#[test]
fn canonical_heads() {
    assert_eq!(
        canonical(b"GET  /a?b  HTTP/1.1  \r\nHost:  x  \r\nX-A: 1\n\r\n"),
        "GET /a?b HTTP/1.1\r\nhost: x\r\nx-a: 1\r\n\r\n"
    );
    assert_eq!(
        canonical(b"\r\n\r\nGET http://h:81?x HTTP/1.1\r\nHost: other\r\n\r\n"),
        "GET /?x HTTP/1.1\r\nhost: h:81\r\n\r\n"
    );
    assert_eq!(
        canonical(b"GET /caf\xc3\xa9<#f?x HTTP/1.0\r\n\r\n"),
        "GET /caf%C3%A9%3C HTTP/1.0\r\n\r\n"
    );
    // Invalid names are dropped, a name alone is a field with no value.
    assert_eq!(
        canonical(b"GET / HTTP/1.1\r\nHost: x\r\nContent_Length: 5\r\nX.Y: 1\r\nFoo\r\n\r\n"),
        "GET / HTTP/1.1\r\nhost: x\r\nfoo: \r\n\r\n"
    );
    let rules = HeadRules {
        underscores_in_headers: true,
        ..HeadRules::default()
    };
    let Parsed::Head(h) = parse_head(b"GET / HTTP/1.1\r\nHost: x\r\nX_Y: 1\r\n\r\n", &rules) else {
        panic!()
    };
    assert!(h.canonical.ends_with(b"x_y: 1\r\n\r\n"));
}

#[test]
fn framing() {
    let f = |s: &[u8]| match parse(s) {
        Parsed::Head(h) => h.framing,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        f(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 007\r\n\r\n"),
        Framing::Length(7)
    );
    assert_eq!(
        f(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n"),
        Framing::Chunked
    );
    assert_eq!(f(b"GET / HTTP/1.0\r\n\r\n"), Framing::None);
}

#[test]
fn refusals() {
    let cases: &[(&[u8], u16)] = &[
        (b"get / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a..b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: \r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \x0bchunked\r\n\r\n", 501),
        (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", 400),
        (b"GET /%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /../a HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET http://u@h/ HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"CONNECT h:443 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"CONNECT / HTTP/1.1\r\nHost: x\r\n\r\n", 405),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\rX\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nA: \x00\r\n\r\n", 400),
        (b"GET /\r\n", 400),
    ];
    for &(req, status) in cases {
        assert_eq!(refused(req).0, status, "{:?}", String::from_utf8_lossy(req));
    }
}

#[test]
fn nginx_buffer_sizes() {
    // A request line longer than a large buffer: 414; a header line: 400.
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(8200));
    assert_eq!(refused(long.as_bytes()).0, 414);
    let long = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
        "a".repeat(8200)
    );
    assert_eq!(refused(long.as_bytes()).0, 400);
    // Lines of 7 KB: four fit (one per large buffer), five do not.
    let line = format!("X: {}\r\n", "a".repeat(7000));
    let fits = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", line.repeat(4));
    assert!(matches!(parse(fits.as_bytes()), Parsed::Head(_)));
    let over = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", line.repeat(5));
    assert_eq!(
        refused(over.as_bytes()),
        (400, "client sent too long header line")
    );
    // Refused as soon as the partial line is too long, not at its end.
    let partial = format!("GET / HTTP/1.1\r\nHost: x\r\nX: {}", "a".repeat(9000));
    assert_eq!(refused(partial.as_bytes()).0, 400);
}

#[test]
fn incremental_equals_whole() {
    let req = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX_A: 1\r\n\r\nabc";
    let whole = parse(req);
    let mut p = HeadParser::new(HeadRules::default());
    let mut got = Parsed::Partial;
    for n in 1..=req.len() {
        got = p.advance(&req[..n]);
        if got != Parsed::Partial {
            break;
        }
    }
    assert_eq!(got, whole);
    let Parsed::Head(h) = whole else { panic!() };
    assert_eq!(&req[h.len..], b"abc");
}

#[test]
fn hosts() {
    for ok in [
        &b"a"[..],
        b"a.b",
        b"a.",
        b".a",
        b"[::1]:80",
        b"a:80",
        b"A-B",
    ] {
        assert!(valid_host(ok), "{:?}", String::from_utf8_lossy(ok));
    }
    for bad in [&b""[..], b".", b"a..b", b"a/b", b"a b", b":80", b"a\x7f"] {
        assert!(!valid_host(bad), "{:?}", String::from_utf8_lossy(bad));
    }
}

proptest::proptest! {
    /// The scans eight bytes a step find what a byte-by-byte look finds.
    #[test]
    fn word_scans_agree_with_byte_scans(
        s in proptest::collection::vec(
            proptest::prop_oneof![0u8..=0x21, 0x7eu8..=0x80, proptest::num::u8::ANY],
            0..40,
        ),
        b in proptest::prop_oneof![proptest::strategy::Just(b'\n'), proptest::num::u8::ANY],
    ) {
        proptest::prop_assert_eq!(memchr(b, &s), s.iter().position(|&c| c == b));
        let each = if s.contains(&0) {
            None
        } else {
            Some(s.iter().any(|&c| (c < 0x20 && c != b'\t') || c == 0x7f))
        };
        proptest::prop_assert_eq!(header_line::control_bytes(&s), each);
    }
}

/// A refusal carries the fields kept before it (nginx's log phase still has
/// them), none once the request line is the fault, and the same whether
/// the head came whole or a byte at a time.
#[test]
fn a_refusal_keeps_the_fields_before_it() {
    let fields_of = |s: &[u8]| match parse(s) {
        Parsed::Refused(r) => r.fields.map(|w| {
            crate::http1::Fields::Wire(*w)
                .iter()
                .map(|(n, v)| String::from_utf8_lossy(&[n, b"=", v].concat()).into_owned())
                .collect::<Vec<_>>()
        }),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(s)),
    };
    let two_hosts = b"GET / HTTP/1.1\r\nX-A: 1\r\nHost: a\r\nHost: b\r\nX-B: 2\r\n\r\n";
    assert_eq!(
        fields_of(two_hosts),
        Some(vec!["x-a=1".to_owned(), "host=a".to_owned()])
    );
    let bad_name = b"GET / HTTP/1.1\r\nX-A: 1\r\nX A: 2\r\n\r\n";
    assert_eq!(fields_of(bad_name), Some(vec!["x-a=1".to_owned()]));
    assert_eq!(fields_of(b"GET / HTTP/1.1 x\r\nX-A: 1\r\n\r\n"), None);
    assert_eq!(fields_of(b"GET / HTTP/1.1\r\nX A: 2\r\n\r\n"), None);
    // Byte by byte: the same status and fields (a bad name is refused at
    // its first wrong byte, so its line's detail is shorter).
    let status_and_fields = |p: Parsed| match p {
        Parsed::Refused(r) => (r.status, r.fields),
        other => panic!("{other:?}"),
    };
    for head in [&two_hosts[..], &bad_name[..]] {
        let mut p = HeadParser::new(HeadRules::default());
        let refused = (1..=head.len())
            .map(|n| p.advance(&head[..n]))
            .find(|x| !matches!(x, Parsed::Partial))
            .expect("a refusal");
        assert_eq!(status_and_fields(refused), status_and_fields(parse(head)));
    }
}
