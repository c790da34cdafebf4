//! Responses sluice makes itself: rejections, `return`, 4xx/5xx, through the
//! configured error pages or a default `application/problem+json` body.

use crate::body::Body;
use crate::limiter::LimitReqStatus;
use crate::vars::{RequestVars, ResponseVars, Template};
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use std::collections::BTreeMap;

pub mod grpc;
mod rejection;
pub use rejection::Rejection;
/// `[error_pages.CODE]`: what to answer instead of a response with `CODE`.
#[derive(Debug)]
pub struct ErrorPage {
    /// The status sent (defaults to `CODE`; nginx's `error_page 429 =200`).
    pub status: u16,
    pub headers: Vec<(HeaderName, Template)>,
    /// `None`: the default body for that status.
    pub body: Option<Template>,
    /// `grpc_status` and `grpc_message`: what a gRPC call answered `CODE`
    /// by sluice gets (`None`: the code and message of the cause).
    pub grpc: GrpcPage,
}

/// An error page's `grpc_status` and `grpc_message`.
#[derive(Debug, Default, Clone)]
pub struct GrpcPage {
    pub status: Option<grpc::Code>,
    pub message: Option<String>,
}

/// The error pages of a level, by the status they replace.
pub type ErrorPages = BTreeMap<u16, ErrorPage>;

/// `return = { status, body, headers }`: answer from sluice itself.
#[derive(Debug)]
pub struct ReturnSpec {
    pub status: u16,
    pub headers: Vec<(HeaderName, Template)>,
    pub body: Option<Template>,
}

/// `ratelimit_headers`: which quota headers limited responses carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateLimitHeaders {
    #[default]
    Off,
    /// `RateLimit-Policy` and `RateLimit` of draft-ietf-httpapi-ratelimit-headers.
    Draft,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    Legacy,
}

pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|never| match never {}).boxed()
}

/// What is known about a response sluice makes, for its page and headers.
pub struct Made<'a> {
    pub status: u16,
    /// Whole seconds until the client may retry (rejections only).
    pub retry_after: Option<u64>,
    pub limit_req_status: Option<LimitReqStatus>,
    pub zone: &'a str,
    /// `$limit_conn_status` (empty before `limit_conn` decided).
    pub limit_conn_status: &'static str,
    /// The problem `detail` when no error page is configured.
    pub detail: String,
    /// For a rejection: the policies (zones) that were exceeded; the default
    /// body is then the draft's `quota-exceeded` problem type.
    pub violated: Option<&'a str>,
}

impl Made<'static> {
    /// A response about the request itself, before or without any limit
    /// (`$limit_req_status` is `-`).
    pub fn plain(status: u16, detail: String) -> Made<'static> {
        Made {
            status,
            retry_after: None,
            limit_req_status: None,
            zone: "",
            limit_conn_status: "",
            detail,
            violated: None,
        }
    }
}

fn status_code(s: u16) -> StatusCode {
    StatusCode::from_u16(s).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Build the answer for `made`, through `pages` when one matches its status.
pub fn error_response(
    pages: &ErrorPages,
    req: Option<&RequestVars>,
    made: &Made,
) -> Response<Body> {
    let vars = ResponseVars {
        proxy_host: "",
        status: made.status,
        retry_after: made.retry_after,
        limit_req_status: made.limit_req_status,
        limit_req_zone: made.zone,
        limit_conn_status: made.limit_conn_status,
        log: None,
    };
    let page = pages.get(&made.status);
    let mut resp = match (page, req) {
        (
            Some(ErrorPage {
                status,
                headers,
                body: Some(body),
                ..
            }),
            Some(req),
        ) => {
            let mut r = Response::new(full(body.eval_to_vec(req, Some(&vars))));
            *r.status_mut() = status_code(*status);
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            add_headers(&mut r, headers, req, &vars);
            r
        }
        _ => {
            let mut r = problem(made);
            if let (Some(p), Some(req)) = (page, req) {
                *r.status_mut() = status_code(p.status);
                add_headers(&mut r, &p.headers, req, &vars);
            }
            r
        }
    };
    if let Some(secs) = made.retry_after {
        if !resp.headers().contains_key(header::RETRY_AFTER) {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
    }
    resp
}

fn add_headers(
    r: &mut Response<Body>,
    headers: &[(http::HeaderName, crate::vars::Template)],
    req: &RequestVars,
    vars: &ResponseVars,
) {
    for (name, t) in headers {
        if let Ok(v) = HeaderValue::from_bytes(&t.eval_to_vec(req, Some(vars))) {
            r.headers_mut().insert(name.clone(), v);
        }
    }
}

/// The problem type of draft-ietf-httpapi-ratelimit-headers for an exceeded quota.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// RFC 9457 problem details.
fn problem(made: &Made) -> Response<Body> {
    let status = status_code(made.status);
    let body = match made.violated {
        Some(zone) => format!(
            "{{\"type\":{},\"title\":\"Request quota exceeded\",\"status\":{},\"detail\":{},\"violated-policies\":[{}]}}\n",
            json_string(QUOTA_EXCEEDED),
            made.status,
            json_string(&made.detail),
            json_string(zone)
        ),
        None => format!(
            "{{\"type\":\"about:blank\",\"title\":{},\"status\":{},\"detail\":{}}}\n",
            json_string(status.canonical_reason().unwrap_or("Error")),
            made.status,
            json_string(&made.detail)
        ),
    };
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    r
}

pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut plain = 0;
    for (i, c) in s.char_indices() {
        let esc = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        out.push_str(&s[plain..i]);
        if esc.is_empty() {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push_str(esc);
        }
        plain = i + c.len_utf8();
    }
    out.push_str(&s[plain..]);
    out.push('"');
    out
}

/// A location's `return`.
pub fn return_response(
    ret: &ReturnSpec,
    req: &RequestVars,
    limit_req_status: Option<LimitReqStatus>,
) -> Response<Body> {
    let vars = ResponseVars {
        proxy_host: "",
        status: ret.status,
        retry_after: None,
        limit_req_status,
        limit_req_zone: "",
        limit_conn_status: "",
        log: None,
    };
    let body = ret
        .body
        .as_ref()
        .map(|b| b.eval_to_vec(req, Some(&vars)))
        .unwrap_or_default();
    let mut r = Response::new(full(body));
    *r.status_mut() = status_code(ret.status);
    // nginx's default_type when none is set (headers may say otherwise).
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    add_headers(&mut r, &ret.headers, req, &vars);
    r
}

/// A limit in words, for problem details: "2 requests per second, burst
/// 5"; another algorithm than nginx's is named after it ("10 requests per
/// 10 seconds, burst 9, token bucket"), not in parentheses, which the
/// zone's name follows in.
pub fn describe_limit(limit: &crate::limiter::Limit) -> String {
    let p = limit.policy();
    let mut s = p.describe();
    if limit.burst > 0 {
        s.push_str(&format!(", burst {}", limit.burst / 1000));
    }
    use crate::limiter::Algorithm as A;
    let words = match p.algorithm {
        A::LeakyBucket => return s,
        A::TokenBucket => "token bucket",
        A::Gcra => "GCRA",
        A::FixedWindow => "fixed window",
        A::SlidingWindow => "sliding window",
        A::SlidingLog => "sliding log",
    };
    s.push_str(", ");
    s.push_str(words);
    s
}

/// Where a response stands against its location's limits.
#[derive(Clone, Copy, Debug)]
pub struct QuotaState {
    /// Index of the limit reported in `RateLimit`.
    pub limit: usize,
    pub remaining: u64,
    /// Seconds until more quota is available (`t`).
    pub reset: u64,
}

/// Add `RateLimit-Policy`/`RateLimit` (draft) or `X-RateLimit-*` (legacy).
///
/// Mapping: `q` is what an empty state accepts at once (a bucket's
/// burst + 1, a window's count); `w` is the window, or for a bucket the
/// time `q` takes to drain, rounded up to whole seconds (never more
/// permissive than the rate); `r` is how many more requests would be
/// accepted at once; `t` is the whole seconds until one more is (for a
/// rejection, exactly the `Retry-After`).
pub fn add_quota_headers(
    headers: &mut http::HeaderMap,
    mode: RateLimitHeaders,
    limits: &[crate::limiter::Limit],
    state: QuotaState,
) {
    use RateLimitHeaders as M;
    let Some(tight) = limits.get(state.limit) else {
        return;
    };
    match mode {
        M::Off => {}
        M::Draft => {
            let policies: Vec<String> = limits
                .iter()
                .map(|l| {
                    let (q, w) = (l.quota(), l.quota_window_secs());
                    format!("{};q={q};w={w}", sf_string(&l.zone.name))
                })
                .collect();
            if let Ok(v) = HeaderValue::from_str(&policies.join(", ")) {
                headers.insert("ratelimit-policy", v);
            }
            let v = format!(
                "{};r={};t={}",
                sf_string(&tight.zone.name),
                state.remaining,
                state.reset
            );
            if let Ok(v) = HeaderValue::from_str(&v) {
                headers.insert("ratelimit", v);
            }
        }
        M::Legacy => {
            headers.insert("x-ratelimit-limit", HeaderValue::from(tight.quota()));
            headers.insert("x-ratelimit-remaining", HeaderValue::from(state.remaining));
            headers.insert("x-ratelimit-reset", HeaderValue::from(state.reset));
        }
    }
}

/// A structured-field string (RFC 9651): printable ASCII, `"` and `\` escaped.
fn sf_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_described_with_their_algorithm() {
        use crate::limiter::{Algorithm, Limit, MemoryZone, Policy, Store, ZoneRef};
        use std::sync::Arc;
        let limit = |alg, burst| Limit {
            zone: Arc::new(ZoneRef::new(
                "z",
                Policy::new(alg, 10, 10_000).unwrap(),
                Arc::new(Store::Memory(MemoryZone::with_capacity(10))),
            )),
            burst,
            delay: Limit::NODELAY,
        };
        for (alg, burst, want) in [
            (
                Algorithm::LeakyBucket,
                9000,
                "10 requests per 10 seconds, burst 9",
            ),
            (
                Algorithm::TokenBucket,
                9000,
                "10 requests per 10 seconds, burst 9, token bucket",
            ),
            (Algorithm::Gcra, 0, "10 requests per 10 seconds, GCRA"),
            (
                Algorithm::FixedWindow,
                0,
                "10 requests per 10 seconds, fixed window",
            ),
            (
                Algorithm::SlidingWindow,
                0,
                "10 requests per 10 seconds, sliding window",
            ),
            (
                Algorithm::SlidingLog,
                0,
                "10 requests per 10 seconds, sliding log",
            ),
        ] {
            assert_eq!(describe_limit(&limit(alg, burst)), want);
        }
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(
            json_string("zone \"a\"\n\\x\u{1}é"),
            "\"zone \\\"a\\\"\\n\\\\x\\u0001é\""
        );
        assert_eq!(json_string("plain"), "\"plain\"");
    }

    #[test]
    fn structured_strings_are_escaped() {
        assert_eq!(sf_string("z_a"), "\"z_a\"");
        assert_eq!(sf_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
