use super::*;
use http::{HeaderMap, HeaderValue};

fn req<'a>(uri: &'a Uri, headers: &'a Fields, method: &'a Method) -> RequestVars<'a> {
    RequestVars {
        remote: "10.1.2.3:5555".parse().unwrap(),
        local: "127.0.0.1:7060".parse().unwrap(),
        proxy: None,
        server_name: "",
        method,
        uri,
        version: Version::HTTP_11,
        path: uri.path(),
        headers,
        raw_request_line: None,
        tls: None,
        user: None,
    }
}

#[test]
fn variables_and_text() {
    let uri: Uri = "/a/b?x=1&Key=v2".parse().unwrap();
    let mut h = HeaderMap::new();
    h.insert("host", "Example.COM:8080".parse().unwrap());
    h.insert("x-api-key", "k1".parse().unwrap());
    h.insert("cookie", "a=1; sid=abc".parse().unwrap());
    let m = Method::GET;
    let h = Fields::Map(h);
    let r = req(&uri, &h, &m);
    let t = Template::parse(
        "$remote_addr|${host}|$uri|$arg_key|$http_x_api_key|$cookie_sid|$request_method",
        Context::Key,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(t.eval_to_vec(&r, None)).unwrap(),
        "10.1.2.3|example.com|/a/b|v2|k1|abc|GET"
    );
    let b = Template::parse("$binary_remote_addr", Context::Key).unwrap();
    assert_eq!(b.eval_to_vec(&r, None), vec![10, 1, 2, 3]);
    let e = Template::parse("$http_missing", Context::Key).unwrap();
    assert!(e.eval_to_vec(&r, None).is_empty());
}

#[test]
fn log_escapes_like_nginx() {
    let uri: Uri = "/a".parse().unwrap();
    let mut h = HeaderMap::new();
    h.insert(
        "user-agent",
        HeaderValue::from_bytes(b"a\"b\\c\td\xc3\xa9").unwrap(),
    );
    let m = Method::GET;
    let h = Fields::Map(h);
    let r = req(&uri, &h, &m);
    let eval = |escape| {
        let t = Template::parse("\"$http_user_agent\" $http_referer", Context::Log)
            .unwrap()
            .with_escape(escape);
        String::from_utf8_lossy(&t.eval_to_vec(&r, None)).into_owned()
    };
    assert_eq!(eval(LogEscape::Default), r#""a\x22b\x5Cc\x09d\xC3\xA9" -"#);
    assert_eq!(eval(LogEscape::Json), "\"a\\\"b\\\\c\\td\u{e9}\" ");
    assert_eq!(eval(LogEscape::None), "\"a\"b\\c\td\u{e9}\" -");
}

#[test]
fn errors_have_offsets() {
    let e = Template::parse("ab $nope", Context::Key).unwrap_err();
    assert_eq!(e.offset, 3);
    assert!(e.message.contains("unknown \"nope\" variable"));
    let e = Template::parse("x$retry_after", Context::Key).unwrap_err();
    assert_eq!(e.offset, 1);
    assert!(Template::parse("$retry_after", Context::Response).is_ok());
    assert!(Template::parse("${host", Context::Key).is_err());
}

#[test]
fn proxy_protocol_variables_are_empty_without_a_header() {
    let fields = Fields::Map(http::HeaderMap::new());
    let t = Template::parse(
        "$proxy_protocol_addr|$proxy_protocol_port|$proxy_protocol_server_addr|$proxy_protocol_server_port",
        Context::Key,
    )
    .unwrap();
    let mut req = RequestVars::for_test(&fields, "10.0.0.1");
    assert_eq!(t.eval_to_vec(&req, None), b"|||");
    let pp = crate::proxy_protocol::Addresses {
        source: "[2001:db8::7]:51234".parse().unwrap(),
        destination: "198.51.100.1:443".parse().unwrap(),
    };
    req.proxy = Some(&pp);
    assert_eq!(
        String::from_utf8(t.eval_to_vec(&req, None)).unwrap(),
        "2001:db8::7|51234|198.51.100.1|443"
    );
}

/// `$gzip_ratio` as nginx prints it: two decimals, rounded half up.
#[test]
fn gzip_ratio_has_two_rounded_decimals() {
    for ((zin, zout), want) in [
        ((2125, 1000), "2.13"),
        ((1000, 1000), "1.00"),
        ((19995, 2000), "10.00"),
        ((3, 7), "0.43"),
    ] {
        let mut out = Vec::new();
        super::upstream::push_ratio(&mut out, zin, zout);
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }
}
