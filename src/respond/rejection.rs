//! A limit's rejection, rendered once when the configuration is compiled:
//! its status, its problem body and its head fields, everything but the
//! seconds to wait (`Retry-After`, the problem's detail, the `RateLimit`
//! reset), which are filled in per rejection.
//!
//! Why: a flood is mostly rejections, and a rejection built as any other
//! response (a header map filled field by field, a body formatted, then the
//! map encoded again for the client) cost more than nginx spends on the
//! whole request. The HTTP/1.1 loop writes [`Rejection::fields`] and
//! [`Rejection::body`] straight into its output; HTTP/2 and the rest take
//! [`Rejection::response`], made from the same bytes, so the two cannot
//! differ.

use super::{QUOTA_EXCEEDED, QuotaState, RateLimitHeaders, add_quota_headers, describe_limit};
use super::{full, json_string, status_code};
use crate::body::Body;
use crate::limiter::Limit;
use http::{HeaderName, HeaderValue, Response, StatusCode};

/// One limit's rejection, all but its seconds.
#[derive(Clone, Debug)]
pub struct Rejection {
    status: StatusCode,
    /// The problem body up to the seconds, and after them (" second" or
    /// " seconds" goes between).
    prefix: String,
    suffix: String,
    /// The `ratelimit_headers` fields of a rejection, written as they go on
    /// the wire up to the seconds they end with (empty: none).
    quota: Vec<u8>,
}

/// The fields every rejection starts with.
const CONTENT_TYPE: &[u8] = b"content-type: application/problem+json\r\n";

impl Rejection {
    /// Limit `i` of `limits` (a location's list), answered `status`, with
    /// the location's `ratelimit_headers`.
    pub fn new(limits: &[Limit], i: usize, status: u16, mode: RateLimitHeaders) -> Rejection {
        let limit = &limits[i];
        let zone = &*limit.zone.name;
        let detail = format!("{} (zone \"{zone}\"). Retry after ", describe_limit(limit));
        let detail = json_string(&detail);
        Rejection {
            status: status_code(status),
            prefix: format!(
                "{{\"type\":{},\"title\":\"Request quota exceeded\",\"status\":{status},\"detail\":{}",
                json_string(QUOTA_EXCEEDED),
                &detail[..detail.len() - 1]
            ),
            suffix: format!(".\",\"violated-policies\":[{}]}}\n", json_string(zone)),
            quota: quota_fields(limits, i, mode),
        }
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The head fields for a wait of `secs` (whole seconds, at least 1):
    /// `Content-Type`, `Retry-After`, and with `quota` the rate-limit
    /// fields, each line ending in CRLF.
    pub fn fields(&self, secs: u64, quota: bool, dst: &mut Vec<u8>) {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(secs).as_bytes();
        dst.extend_from_slice(CONTENT_TYPE);
        dst.extend_from_slice(b"retry-after: ");
        dst.extend_from_slice(digits);
        dst.extend_from_slice(b"\r\n");
        if quota && !self.quota.is_empty() {
            dst.extend_from_slice(&self.quota);
            dst.extend_from_slice(digits);
            dst.extend_from_slice(b"\r\n");
        }
    }

    /// The body's length for a wait of `secs`.
    pub fn body_len(&self, secs: u64) -> usize {
        self.prefix.len()
            + itoa::Buffer::new().format(secs).len()
            + unit(secs).len()
            + self.suffix.len()
    }

    /// Appends the body for a wait of `secs`.
    pub fn body(&self, secs: u64, dst: &mut Vec<u8>) {
        dst.extend_from_slice(self.prefix.as_bytes());
        dst.extend_from_slice(itoa::Buffer::new().format(secs).as_bytes());
        dst.extend_from_slice(unit(secs).as_bytes());
        dst.extend_from_slice(self.suffix.as_bytes());
    }

    /// The same answer as a response: the fields of [`Rejection::fields`]
    /// in a header map, the body of [`Rejection::body`].
    pub fn response(&self, secs: u64, quota: bool) -> Response<Body> {
        // Exactly its length: the body becomes its `Bytes` without another
        // allocation.
        let mut body = Vec::with_capacity(self.body_len(secs));
        self.body(secs, &mut body);
        let mut r = Response::new(full(body));
        *r.status_mut() = self.status;
        let mut fields = Vec::new();
        self.fields(secs, quota, &mut fields);
        let h = r.headers_mut();
        for line in fields.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let name = HeaderName::from_bytes(&line[..colon]);
            let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii_start());
            if let (Ok(name), Ok(value)) = (name, value) {
                h.append(name, value);
            }
        }
        r
    }
}

fn unit(secs: u64) -> &'static str {
    if secs == 1 { " second" } else { " seconds" }
}

/// The rate-limit fields of a rejection by limit `i` as
/// [`add_quota_headers`] makes them (remaining 0), written out, less the
/// reset's digits, which end the last one.
fn quota_fields(limits: &[Limit], i: usize, mode: RateLimitHeaders) -> Vec<u8> {
    let mut map = http::HeaderMap::new();
    let state = QuotaState {
        limit: i,
        remaining: 0,
        reset: 0,
    };
    add_quota_headers(&mut map, mode, limits, state);
    let mut out = Vec::new();
    for (name, value) in &map {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    // Both forms end with the reset: `…;t=0` or `x-ratelimit-reset: 0`.
    match out.strip_suffix(b"0\r\n") {
        Some(head) => head.to_vec(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::{MemoryZone, Policy, Rate, Store, ZoneRef};
    use crate::respond::{ErrorPages, Made, error_response};
    use std::sync::Arc;

    fn limit(name: &str, burst: u64) -> Limit {
        Limit {
            zone: Arc::new(ZoneRef::new(
                name,
                Policy::leaky(Rate::per_second(2).unwrap()),
                Arc::new(Store::Memory(MemoryZone::with_capacity(10))),
            )),
            burst,
            delay: Limit::NODELAY,
        }
    }

    fn body_of(b: Body) -> Vec<u8> {
        use http_body_util::BodyExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(b.collect()).unwrap().to_bytes().to_vec()
    }

    /// The rendered rejection is the problem `error_response` makes, with
    /// the rate-limit fields `add_quota_headers` adds.
    #[test]
    fn the_rendered_rejection_is_the_response() {
        let limits = [limit("a", 0), limit("z\"q", 5000)];
        let zone = "z\"q";
        for mode in [
            RateLimitHeaders::Off,
            RateLimitHeaders::Draft,
            RateLimitHeaders::Legacy,
        ] {
            for secs in [1, 7, 86_400] {
                let r = Rejection::new(&limits, 1, 429, mode);
                let made = Made {
                    status: 429,
                    retry_after: Some(secs),
                    limit_req_status: Some(crate::limiter::LimitReqStatus::Rejected),
                    zone,
                    limit_conn_status: "",
                    detail: format!(
                        "{} (zone \"{zone}\"). Retry after {secs} second{}.",
                        describe_limit(&limits[1]),
                        if secs == 1 { "" } else { "s" }
                    ),
                    violated: Some(zone),
                };
                let mut want = error_response(&ErrorPages::new(), None, &made);
                let state = QuotaState {
                    limit: 1,
                    remaining: 0,
                    reset: secs,
                };
                add_quota_headers(want.headers_mut(), mode, &limits, state);
                let got = r.response(secs, true);
                assert_eq!(got.status(), want.status());
                assert_eq!(got.headers(), want.headers(), "{mode:?} {secs}");
                let order = |r: &Response<Body>| r.headers().keys().cloned().collect::<Vec<_>>();
                assert_eq!(order(&got), order(&want));
                let (body, want_body) = (body_of(got.into_body()), body_of(want.into_body()));
                assert_eq!(body, want_body);
                assert_eq!(r.body_len(secs), body.len());
                let mut wire = Vec::new();
                r.fields(secs, true, &mut wire);
                let off = r.response(secs, false);
                assert_eq!(off.headers().len(), 2, "{mode:?}: no quota fields");
            }
        }
    }
}
