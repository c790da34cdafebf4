//! The decision (nginx 1.22's, case by case, from its source and measured
//! against it in tests/it/compress) and the encoded body.

use super::decide::Decision;
use super::decide::{cache_control_has, nginx_type};
use super::*;
use http_body_util::BodyExt;

fn on() -> Compression {
    Compression {
        types: Types::List(vec![b"application/json".to_vec()]),
        ..Compression::default()
    }
}

fn asked(ae: &str) -> Asked<'_> {
    Asked {
        accept_encoding: Some(ae.as_bytes()),
        ..Asked::default()
    }
}

fn html(len: Option<u64>) -> Answered<'static> {
    Answered {
        status: 200,
        length: len,
        content_type: Some(b"text/html"),
        ..Answered::default()
    }
}

fn coding(c: &Compression, a: &Asked, r: &Answered) -> Option<Coding> {
    decide(c, a, r, 1_000_000).coding
}

#[test]
fn nginx_reads_accept_encoding_its_own_way() {
    let c = on();
    let r = html(None);
    for (ae, gzip) in [
        ("gzip", true),
        ("gzip, deflate, br", true),
        ("deflate, gzip", true),
        ("deflate,gzip", true),
        ("GZIP", true),
        ("gzip;q=0.5", true),
        ("gzip; q=0.001", true),
        ("gzip;q=0", false),
        ("gzip;q=0.000", false),
        ("gzip;q=1.5", false),
        ("gzip;q=0.0001", false),
        ("gzip;q=x", false),
        ("gzip;level=1", false),
        ("x-gzip", false),
        ("*", false),
        ("deflate", false),
        ("gzi", false),
        ("identity;q=1, gzip ;q=1", true),
        // The first standalone `gzip` decides; a later `;q=0` is not read.
        ("gzip, gzip;q=0", true),
        ("xgzip", false),
        // nginx: a `gzip` right after the last rejected one counts.
        ("xgzipgzip", true),
        ("gzipx", false),
    ] {
        assert_eq!(coding(&c, &asked(ae), &r).is_some(), gzip, "{ae:?}");
    }
}

/// A response with `status`, `Content-Encoding` `ce`, length `len` and
/// `Content-Type` `ct`.
fn resp(
    status: u16,
    ce: Option<&'static [u8]>,
    len: Option<u64>,
    ct: Option<&'static [u8]>,
) -> Answered<'static> {
    Answered {
        status,
        content_encoding: ce,
        length: len,
        content_type: ct,
        ..Answered::default()
    }
}

#[test]
fn what_nginx_never_compresses() {
    let c = on();
    let a = asked("gzip");
    let html = Some(&b"text/html"[..]);
    let never = [
        ("206", resp(206, None, None, html)),
        ("201", resp(201, None, None, html)),
        ("304", resp(304, None, None, html)),
        ("204", resp(204, None, None, html)),
        ("500", resp(500, None, None, html)),
        ("encoded", resp(200, Some(b"br"), None, html)),
        ("short", resp(200, None, Some(19), html)),
        ("plain", resp(200, None, None, Some(b"text/plain"))),
        ("no type", resp(200, None, None, None)),
        ("grpc", resp(200, None, None, Some(b"application/grpc"))),
    ];
    let none = Decision {
        coding: None,
        vary: false,
    };
    for (what, r) in &never {
        assert_eq!(decide(&c, &a, r, 0), none, "{what}");
    }
    let compressed = [
        ("403", resp(403, None, None, html)),
        ("404", resp(404, None, None, html)),
        ("20 bytes", resp(200, None, Some(20), html)),
        ("empty encoding", resp(200, Some(b""), None, html)),
        ("json", resp(200, None, None, Some(b"Application/JSON"))),
    ];
    for (what, r) in &compressed {
        assert_eq!(coding(&c, &a, r), Some(Coding::Gzip), "{what}");
    }
    // `*` takes every type, even none; gRPC still never.
    let any = Compression {
        types: Types::Any,
        ..on()
    };
    assert_eq!(
        coding(&any, &a, &resp(200, None, None, None)),
        Some(Coding::Gzip)
    );
    let grpc = resp(200, None, None, Some(b"application/grpc+proto"));
    assert_eq!(coding(&any, &a, &grpc), None);
}

#[test]
fn content_type_is_cut_only_before_a_charset() {
    assert_eq!(nginx_type(b"text/html; charset=utf-8"), b"text/html");
    assert_eq!(nginx_type(b"text/html;charset=\"x\""), b"text/html");
    assert_eq!(
        nginx_type(b"application/json; v=1"),
        b"application/json; v=1"
    );
    assert_eq!(nginx_type(b"a/b; v=1; charset=x"), b"a/b; v=1");
    assert_eq!(nginx_type(b"a/b;"), b"a/b;");
    let c = on();
    let r = Answered {
        content_type: Some(b"application/json; v=1"),
        ..html(None)
    };
    assert_eq!(coding(&c, &asked("gzip"), &r), None);
}

#[test]
fn vary_goes_with_a_compressible_response_whoever_asks() {
    let c = Compression { vary: true, ..on() };
    let d = decide(&c, &asked("deflate"), &html(None), 0);
    assert_eq!(
        d,
        Decision {
            coding: None,
            vary: true
        }
    );
    let d = decide(&c, &Asked::default(), &html(None), 0);
    assert_eq!(
        d,
        Decision {
            coding: None,
            vary: true
        }
    );
    let d = decide(&c, &asked("gzip"), &html(Some(5)), 0);
    assert_eq!(
        d,
        Decision {
            coding: None,
            vary: false
        }
    );
}

#[test]
fn msie6_http_version_and_disable() {
    let ua = |s: &'static str| Asked {
        user_agent: Some(s.as_bytes()),
        ..asked("gzip")
    };
    let c = Compression {
        msie6: true,
        ..on()
    };
    let r = html(None);
    for (s, refused) in [
        ("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)", true),
        (
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)",
            false,
        ),
        ("Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)", true),
        ("Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)", false),
        ("Opera/9.0 (MSIE 6.0; Windows)", false),
        ("curl/8", false),
    ] {
        assert_eq!(coding(&c, &ua(s), &r).is_none(), refused, "{s}");
    }
    let old = Asked {
        http10: true,
        ..asked("gzip")
    };
    assert_eq!(coding(&on(), &old, &r), None);
    let c10 = Compression {
        http10: true,
        ..on()
    };
    assert_eq!(coding(&c10, &old, &r), Some(Coding::Gzip));
    let re = regex::bytes::Regex::new("(?i)bot").unwrap();
    let c = Compression {
        disable: vec![re],
        ..on()
    };
    assert_eq!(coding(&c, &ua("GoogleBOT/2"), &r), None);
    assert_eq!(coding(&c, &ua("curl"), &r), Some(Coding::Gzip));
}

#[test]
fn gzip_proxied_against_via_and_the_caching_fields() {
    let via = Asked {
        via: true,
        ..asked("gzip")
    };
    let with = |words: &[&str]| Compression {
        proxied: words
            .iter()
            .fold(Proxied::default(), |p, w| p.with(Proxied::word(w).unwrap())),
        ..on()
    };
    let r = html(None);
    assert_eq!(coding(&on(), &via, &r), None, "off by default");
    assert_eq!(coding(&with(&["any"]), &via, &r), Some(Coding::Gzip));
    let auth = Asked {
        authorization: true,
        ..via
    };
    assert_eq!(coding(&with(&["auth"]), &auth, &r), Some(Coding::Gzip));
    // Expires before Date: expired.
    let past = Answered {
        expires: Some(b"Thu, 01 Jan 1970 00:00:00 GMT"),
        date: Some(b"Sun, 06 Nov 1994 08:49:37 GMT"),
        ..html(None)
    };
    assert_eq!(coding(&with(&["expired"]), &via, &past), Some(Coding::Gzip));
    assert_eq!(coding(&with(&["no-cache"]), &via, &past), None);
    let bad = Answered {
        expires: Some(b"0"),
        ..html(None)
    };
    assert_eq!(coding(&with(&["expired"]), &via, &bad), None);
    let cc = |v: &'static [u8]| Answered {
        cache_control: vec![v],
        ..html(None)
    };
    assert_eq!(
        coding(&with(&["no-cache"]), &via, &cc(b"max-age=0, no-cache")),
        Some(Coding::Gzip)
    );
    assert_eq!(
        coding(&with(&["private"]), &via, &cc(b"private=\"x\"")),
        None
    );
    assert_eq!(coding(&with(&["no-store"]), &via, &cc(b"public")), None);
    // Neither Expires nor Cache-Control: on, unless the validators say no.
    assert_eq!(coding(&with(&["expired"]), &via, &r), Some(Coding::Gzip));
    let lm = Answered {
        last_modified: true,
        ..html(None)
    };
    assert_eq!(coding(&with(&["no_last_modified"]), &via, &lm), None);
    let etag = Answered {
        etag: true,
        ..html(None)
    };
    assert_eq!(coding(&with(&["no_etag"]), &via, &etag), None);
    assert_eq!(coding(&with(&["no_etag"]), &via, &lm), Some(Coding::Gzip));
    assert!(cache_control_has(&[b"a, No-Cache ,b"], b"no-cache"));
    assert!(!cache_control_has(&[b"no-cachex"], b"no-cache"));
}

#[test]
fn codings_by_the_clients_preference() {
    let c = Compression {
        codings: vec![Coding::Zstd, Coding::Br, Coding::Gzip],
        ..on()
    };
    let r = html(None);
    for (ae, want) in [
        ("gzip, deflate, br, zstd", Some(Coding::Zstd)),
        ("gzip, br", Some(Coding::Br)),
        ("gzip;q=1, br;q=0.5", Some(Coding::Gzip)),
        ("br;q=0.9, zstd;q=0.8, gzip;q=0.1", Some(Coding::Br)),
        ("zstd;q=0, gzip", Some(Coding::Gzip)),
        ("*", Some(Coding::Zstd)),
        ("*;q=0, gzip", Some(Coding::Gzip)),
        ("deflate", None),
    ] {
        assert_eq!(coding(&c, &asked(ae), &r), want, "{ae:?}");
    }
    let only_gzip = on();
    assert_eq!(coding(&only_gzip, &asked("br, zstd"), &r), None);
}

/// The body decompresses to what went in, whatever the pieces, and a
/// pause in the body hands on what came before it.
#[test]
fn encoded_bodies_decompress_to_their_input() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let text: Vec<u8> = (0..50_000u32)
        .flat_map(|i| format!("line {i} of the body\n").into_bytes())
        .collect();
    for coding in [Coding::Gzip, Coding::Zstd, Coding::Br] {
        let c = Compression {
            buffers: (2, 1024),
            ..on()
        };
        let pieces: Vec<Result<hyper::body::Frame<bytes::Bytes>, crate::body::BodyError>> = text
            .chunks(7000)
            .map(|p| Ok(hyper::body::Frame::data(bytes::Bytes::copy_from_slice(p))))
            .collect();
        let inner = http_body_util::StreamBody::new(tokio_stream(pieces)).boxed();
        let ratio = Arc::new(Ratio::default());
        let body = encode::Encoded::body(inner, coding, &c, ratio.clone());
        let out = rt.block_on(body.collect()).unwrap().to_bytes();
        assert_eq!(decompress(coding, &out), text, "{coding:?}");
        let (zin, zout) = ratio.get();
        assert_eq!(zin, text.len() as u64);
        assert!(zout > 0 && zout < zin / 4, "{coding:?} {zin} {zout}");
    }
}

fn tokio_stream<T: Unpin>(items: Vec<T>) -> impl futures_core::Stream<Item = T> + Unpin {
    struct S<T>(std::collections::VecDeque<T>);
    impl<T: Unpin> futures_core::Stream for S<T> {
        type Item = T;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<T>> {
            std::task::Poll::Ready(self.0.pop_front())
        }
    }
    S(items.into())
}

pub(crate) fn decompress(coding: Coding, data: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding {
        Coding::Gzip => {
            flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .unwrap();
        }
        Coding::Zstd => out = zstd::decode_all(data).unwrap(),
        Coding::Br => {
            brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
    }
    out
}
