//! What sluice answers itself to a gRPC call, as a gRPC client reads it: a
//! trailers-only response (gRPC over HTTP/2, "Responses"): `:status 200`,
//! `content-type: application/grpc`, `grpc-status`, `grpc-message`, and
//! for a limit `grpc-retry-pushback-ms` (gRFC A6), all in one HEADERS
//! frame that ends the stream.
//!
//! Why not nginx's HTTP answer: every gRPC client reads an HTTP 429 or 503
//! as `UNAVAILABLE` "Received http2 header with status: 429", the code
//! retry policies retry at once; `RESOURCE_EXHAUSTED` with the pushback
//! makes them wait exactly as long as the bucket needs.
//!
//! Also here, the protocol's small grammars: the status codes with their
//! names, `grpc-message`'s percent-encoding, `grpc-timeout`, and which
//! requests are gRPC calls (their `content-type`).

use super::{ErrorPage, full};
use crate::body::Body;
use crate::vars::{RequestVars, ResponseVars};
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode, header};
use std::time::Duration;

/// `grpc-status`'s codes (gRPC's `statuscodes.md`), by their names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Code {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

impl Code {
    /// Every code, by number.
    pub const ALL: [Code; 17] = [
        Code::Ok,
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The code numbered `n` (0–16).
    pub fn from_u8(n: u8) -> Option<Code> {
        Code::ALL.get(usize::from(n)).copied()
    }

    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// Its name as gRPC writes it (`RESOURCE_EXHAUSTED`).
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// gRPC's "HTTP to gRPC Status Code Mapping" (`http-grpc-status-mapping.md`):
    /// what a client makes of an HTTP status without `grpc-status`.
    pub fn from_http(status: u16) -> Code {
        match status {
            400 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502..=504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A trailers-only answer: `code`, `message` (percent-encoded here) and,
/// for a limit, the milliseconds a client's retry policy should wait.
pub fn trailers_only(code: Code, message: &str, pushback_ms: Option<u64>) -> Response<Body> {
    // No data and no trailers: hyper sends the head as one HEADERS frame
    // with END_STREAM (the body is at its end).
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.insert(GRPC_STATUS, HeaderValue::from(u16::from(code.as_u8())));
    if !message.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&percent_encode(message)) {
            h.insert(GRPC_MESSAGE, v);
        }
    }
    if let Some(ms) = pushback_ms {
        h.insert(GRPC_RETRY_PUSHBACK_MS, HeaderValue::from(ms));
    }
    r
}

pub const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
pub const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
pub const GRPC_RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");
pub const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// `grpc-status`'s value as a number: digits only (`None`: absent, empty,
/// or anything else).
pub fn parse_status(v: &[u8]) -> Option<u32> {
    if v.is_empty() || v.len() > 9 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// `grpc-message`'s encoding (gRPC over HTTP/2, "Percent-Encoded"): the
/// UTF-8 bytes of `msg`, those outside space–`~` and `%` itself as `%XX`.
pub fn percent_encode(msg: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(msg.len());
    for &b in msg.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    out
}

/// `grpc-timeout` (gRPC over HTTP/2, "Timeout"): 1 to 8 ASCII digits, then
/// the unit `H`, `M`, `S`, `m`, `u` or `n`. Anything else is no timeout.
pub fn parse_timeout(v: &[u8]) -> Option<Duration> {
    let (&unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Whether a request's `content-type` makes it a gRPC call:
/// `application/grpc`, or with a subtype (`application/grpc+proto`) or
/// parameters. gRPC-Web's `application/grpc-web…` is another protocol
/// (its status travels in the body) and is not one.
pub fn is_grpc_content_type(v: &[u8]) -> bool {
    const T: &[u8] = b"application/grpc";
    v.len() >= T.len()
        && v[..T.len()].eq_ignore_ascii_case(T)
        && matches!(v.get(T.len()), None | Some(b'+' | b';'))
}

/// `grpc_errors`: how a `grpc_pass` location answers gRPC calls when
/// sluice answers them itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GrpcErrors {
    /// Trailers-only gRPC answers (the default).
    #[default]
    Grpc,
    /// nginx's HTTP answers, exactly.
    Http,
}

impl GrpcErrors {
    pub fn parse(s: &str) -> Option<GrpcErrors> {
        match s {
            "grpc" => Some(GrpcErrors::Grpc),
            "http" => Some(GrpcErrors::Http),
            _ => None,
        }
    }
}

/// What a gRPC answer says, before an error page changes it.
pub struct Said<'a> {
    pub code: Code,
    pub message: &'a str,
    /// `grpc-retry-pushback-ms`, for a limit's rejection.
    pub pushback_ms: Option<u64>,
}

/// The answer for `said` through `page` (the error page of the HTTP status
/// the answer stands for): its `grpc_status` and `grpc_message` replace
/// the cause's, its `headers` are added; its `status` and `body` have no
/// place in a trailers-only answer. `Retry-After` as the HTTP answer's.
pub fn page_answer(
    page: Option<&ErrorPage>,
    req: &RequestVars,
    vars: &ResponseVars,
    said: Said,
) -> Response<Body> {
    let grpc = page.map(|p| &p.grpc);
    let code = grpc.and_then(|g| g.status).unwrap_or(said.code);
    let message = grpc
        .and_then(|g| g.message.as_deref())
        .unwrap_or(said.message);
    let mut r = trailers_only(code, message, said.pushback_ms);
    if let Some(p) = page {
        super::add_headers(&mut r, &p.headers, req, vars);
    }
    if let Some(secs) = vars.retry_after {
        if !r.headers().contains_key(header::RETRY_AFTER) {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_their_numbers_and_names() {
        for n in 0..=16u8 {
            let c = Code::from_u8(n).unwrap();
            assert_eq!(c.as_u8(), n);
        }
        assert_eq!(Code::from_u8(17), None);
        assert_eq!(Code::ResourceExhausted.as_u8(), 8);
        assert_eq!(Code::ResourceExhausted.name(), "RESOURCE_EXHAUSTED");
        assert_eq!(Code::DeadlineExceeded.as_u8(), 4);
        assert_eq!(Code::PermissionDenied.name(), "PERMISSION_DENIED");
        assert_eq!(Code::Unauthenticated.as_u8(), 16);
    }

    #[test]
    fn http_statuses_map_as_grpc_documents() {
        for (http, want) in [
            (400, Code::Internal),
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::Unimplemented),
            (429, Code::Unavailable),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::Unavailable),
            (408, Code::Unknown),
            (413, Code::Unknown),
            (500, Code::Unknown),
        ] {
            assert_eq!(Code::from_http(http), want, "{http}");
        }
    }

    #[test]
    fn messages_are_percent_encoded() {
        assert_eq!(percent_encode("plain text ~!"), "plain text ~!");
        assert_eq!(percent_encode("100% sure"), "100%25 sure");
        assert_eq!(percent_encode("a\nb\tc"), "a%0Ab%09c");
        assert_eq!(percent_encode("zone \"é\""), "zone \"%C3%A9\"");
        assert_eq!(percent_encode("\u{7f}"), "%7F");
        assert_eq!(percent_encode(""), "");
    }

    #[test]
    fn timeouts_parse_as_the_spec_says() {
        let ok = |s: &str| parse_timeout(s.as_bytes());
        assert_eq!(ok("100m"), Some(Duration::from_millis(100)));
        assert_eq!(ok("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(ok("2M"), Some(Duration::from_secs(120)));
        assert_eq!(ok("3S"), Some(Duration::from_secs(3)));
        assert_eq!(ok("5u"), Some(Duration::from_micros(5)));
        assert_eq!(ok("99999999n"), Some(Duration::from_nanos(99_999_999)));
        assert_eq!(
            ok("99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        assert_eq!(ok("0m"), Some(Duration::ZERO));
        for bad in [
            "",
            "m",
            "100",
            "123456789m",
            "1.5S",
            "-1S",
            "10s",
            "10 m",
            " 10m",
            "1x",
            "+1S",
            "1SS",
            "１S",
        ] {
            assert_eq!(ok(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn grpc_content_types_are_recognised() {
        for yes in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc+json",
            "Application/GRPC",
            "application/grpc;charset=utf-8",
        ] {
            assert!(is_grpc_content_type(yes.as_bytes()), "{yes}");
        }
        for no in [
            "application/grpc-web",
            "application/grpc-web+proto",
            "application/grpcx",
            "application/json",
            "",
            "application/grp",
        ] {
            assert!(!is_grpc_content_type(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn a_trailers_only_answer_is_one_head() {
        use hyper::body::Body as _;
        let r = trailers_only(Code::ResourceExhausted, "slow down: 100%", Some(1000));
        assert_eq!(r.status(), StatusCode::OK);
        let h = r.headers();
        assert_eq!(h["content-type"], "application/grpc");
        assert_eq!(h["grpc-status"], "8");
        assert_eq!(h["grpc-message"], "slow down: 100%25");
        assert_eq!(h["grpc-retry-pushback-ms"], "1000");
        assert!(r.body().is_end_stream(), "no DATA frame");
        let r = trailers_only(Code::PermissionDenied, "", None);
        assert_eq!(r.headers()["grpc-status"], "7");
        assert!(!r.headers().contains_key("grpc-message"));
        assert!(!r.headers().contains_key("grpc-retry-pushback-ms"));
    }
}
