use super::*;
use crate::vars::Context;
use http::HeaderMap;

fn tpl(s: &str) -> Template {
    Template::parse(s, Context::Response).unwrap()
}

fn proxy(set: &[(&str, &str)]) -> ProxyHeaders {
    let set: Vec<(HeaderName, Template)> = set
        .iter()
        .map(|(n, v)| {
            (
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                Template::parse(v, Context::Proxy).unwrap(),
            )
        })
        .collect();
    ProxyHeaders::new(&set)
}

fn written(p: &ProxyHeaders, headers: &HeaderMap) -> String {
    let headers = crate::http1::Fields::Map(headers.clone());
    let vars = RequestVars::for_test(&headers, "10.0.0.7");
    let mut out = Vec::new();
    p.write(&mut out, &vars, "backend");
    String::from_utf8(out).unwrap()
}

#[test]
fn defaults_are_host_and_forwarded_for() {
    let mut h = HeaderMap::new();
    h.insert("x-forwarded-for", "1.1.1.1".parse().unwrap());
    let p = ProxyHeaders::default();
    assert_eq!(
        written(&p, &h),
        "host: backend\r\nx-forwarded-for: 1.1.1.1, 10.0.0.7\r\n"
    );
    assert!(p.replaces(b"host"));
    assert!(!p.replaces(b"x-other"));
}

#[test]
fn configured_come_first_replace_defaults_and_empty_removes() {
    let mut h = HeaderMap::new();
    h.insert("host", "client.example:8080".parse().unwrap());
    let p = proxy(&[
        ("X-Real-IP", "$remote_addr"),
        ("Host", "$host"),
        ("X-Forwarded-For", ""),
        ("X-Empty", "$http_missing"),
        ("Connection", "upgrade"),
    ]);
    assert_eq!(
        written(&p, &h),
        "x-real-ip: 10.0.0.7\r\nhost: client.example\r\n"
    );
    // A removed field is not forwarded from the client either.
    assert!(p.replaces(b"x-forwarded-for"));
    assert!(p.replaces(b"x-empty"));
    // Connection stays sluice's own.
    assert!(!p.replaces(b"connection"));
}

/// A name given twice (`"X-A" = ["v1", "v2"]` in the TOML, two
/// `proxy_set_header X-A` lines in nginx) is sent twice, in order; an
/// element that evaluates empty is not sent, the others are.
#[test]
fn a_name_given_twice_is_sent_twice_in_order() {
    let mut h = HeaderMap::new();
    h.insert("x-a", "from-client".parse().unwrap());
    let p = proxy(&[
        ("X-A", "v1"),
        ("X-B", "b"),
        ("X-A", ""),
        ("X-A", "$remote_addr"),
    ]);
    assert_eq!(
        written(&p, &h),
        "x-a: v1\r\nx-b: b\r\nx-a: 10.0.0.7\r\nhost: backend\r\nx-forwarded-for: 10.0.0.7\r\n"
    );
    assert!(p.replaces(b"x-a"));
}

#[test]
fn control_bytes_in_values_are_percent_encoded() {
    let mut out = b"x: ".to_vec();
    out.extend_from_slice(b"/a\r\nX-Evil: 1\x00\tz");
    sanitize_tail(&mut out, 3);
    assert_eq!(out, b"x: /a%0D%0AX-Evil: 1%00\tz");
}

/// Every byte at every place of a word (and of the tail) is encoded if and
/// only if it is a control byte but TAB, or 0x7f.
#[test]
fn each_byte_is_judged_wherever_it_is() {
    for b in 0..=255u8 {
        let bad = (b < 0x20 && b != b'\t') || b == 0x7f;
        for len in [1, 8, 11, 16] {
            for at in 0..len {
                let mut value = vec![b'v'; len];
                value[at] = b;
                let mut out = value.clone();
                sanitize_tail(&mut out, 0);
                assert_eq!(out != value, bad, "byte {b:#x} at {at} of {len}");
            }
        }
    }
}

#[test]
fn add_header_follows_status_and_always() {
    let list = vec![
        AddHeader {
            name: HeaderName::from_static("x-frame-options"),
            value: tpl("DENY"),
            always: false,
        },
        AddHeader {
            name: HeaderName::from_static("x-status"),
            value: tpl("$status $limit_req_status"),
            always: true,
        },
        AddHeader {
            name: HeaderName::from_static("x-limit"),
            value: tpl("$limit_req_status"),
            always: true,
        },
    ];
    let empty = crate::http1::Fields::default();
    let vars = RequestVars::for_test(&empty, "10.0.0.7");
    for (status, frame) in [
        (200, true),
        (204, true),
        (304, true),
        (308, true),
        (404, false),
        (429, false),
        (502, false),
        (101, false),
    ] {
        let mut h = HeaderMap::new();
        let resp = ResponseVars {
            status,
            ..ResponseVars::default()
        };
        add(&mut h, &list, &vars, &resp);
        assert_eq!(h.contains_key("x-frame-options"), frame, "{status}");
        assert_eq!(h["x-status"], format!("{status} "), "{status}");
        // Empty when no limit applied (not "-"), so not sent.
        assert!(!h.contains_key("x-limit"));
    }
    let mut h = HeaderMap::new();
    h.insert("x-frame-options", "SAMEORIGIN".parse().unwrap());
    let resp = ResponseVars {
        status: 429,
        limit_req_status: Some(crate::limiter::LimitReqStatus::Rejected),
        ..ResponseVars::default()
    };
    add(&mut h, &list, &vars, &resp);
    assert_eq!(h["x-limit"], "REJECTED");
    assert_eq!(h.get_all("x-frame-options").iter().count(), 1);
}

#[test]
fn hidden_headers_are_nginx_defaults_plus_hide_minus_pass() {
    let mut h = HeaderMap::new();
    for (n, v) in [
        ("date", "Mon"),
        ("server", "up/1"),
        ("x-accel-redirect", "/x"),
        ("x-powered-by", "php"),
        ("x-kept", "1"),
    ] {
        h.insert(HeaderName::from_static(n), v.parse().unwrap());
    }
    let shown = |hidden: &HiddenHeaders| {
        let mut names: Vec<&str> = h
            .keys()
            .map(|n| n.as_str())
            .filter(|n| !hidden.hides(n.as_bytes()))
            .collect();
        names.sort();
        names
    };
    assert_eq!(shown(&HiddenHeaders::default()), ["x-kept", "x-powered-by"]);
    let configured = HiddenHeaders::new(
        &[HeaderName::from_static("x-powered-by")],
        &[HeaderName::from_static("server")],
    );
    assert_eq!(shown(&configured), ["server", "x-kept"]);
    // Names lowercase, as the response parser asks.
    assert!(configured.hides(b"x-powered-by") && configured.hides(b"date"));
    assert!(!configured.hides(b"server"));
    // The default's fast path: each default name hidden, no other.
    let d = HiddenHeaders::default();
    for n in hidden_by_default(false) {
        assert!(d.hides(n.as_str().as_bytes()), "{n}");
    }
    assert!(HIDDEN_X.iter().all(|n| n.starts_with("x-")));
    for n in [
        "x-powered-by",
        "x-accel",
        "dates",
        "content-type",
        "x-pa",
        "x",
        "x-",
    ] {
        assert!(!d.hides(n.as_bytes()), "{n}");
    }
}

/// nginx's grpc module hides the proxy module's defaults but X-Pad, on the
/// fast path and with lists of its own.
#[test]
fn grpc_hides_the_grpc_modules_defaults() {
    let fast = HiddenHeaders::grpc(&[], &[]);
    let listed = HiddenHeaders::grpc(&[HeaderName::from_static("x-a")], &[]);
    for h in [&fast, &listed] {
        for n in hidden_by_default(true) {
            assert!(h.hides(n.as_str().as_bytes()), "{n}");
        }
        assert!(!h.hides(b"x-pad"));
    }
    assert_eq!(
        hidden_by_default(true).count() + 1,
        hidden_by_default(false).count()
    );
    assert!(listed.hides(b"x-a") && !fast.hides(b"x-a"));
    assert!(HiddenHeaders::default().hides(b"x-pad"));
}

/// For HTTP/2 upstreams: the same fields as name and value pairs, `host`
/// (the `:authority` there) included, empty ones left out.
#[test]
fn each_gives_the_fields_as_pairs() {
    let p = proxy(&[
        ("Host", "$http_x_name"),
        ("X-Uri", "a\r\nb"),
        ("X-Empty", ""),
    ]);
    let mut h = HeaderMap::new();
    h.insert("x-name", "api.example".parse().unwrap());
    let headers = crate::http1::Fields::Map(h);
    let vars = RequestVars::for_test(&headers, "10.0.0.7");
    let mut got = Vec::new();
    p.each(&vars, "backend", |n, v| {
        got.push(format!("{n}={}", String::from_utf8_lossy(v)))
    });
    assert_eq!(
        got,
        [
            "host=api.example",
            "x-uri=a%0D%0Ab",
            "x-forwarded-for=10.0.0.7"
        ]
    );
    let mut authority = Vec::new();
    ProxyHeaders::default().each(&vars, "backend", |n, v| {
        if n == "host" {
            authority = v.to_vec();
        }
    });
    assert_eq!(authority, b"backend");
}
