//! The end of a request: its quota headers, its compression (nginx's gzip
//! filter, [`crate::compress`]) and its access record.

use super::error::{CloseConnection, Decided, retry_after_secs};
use crate::accesslog::{LoggedBody, Record};
use crate::body::Body;
use crate::config::Location;
use crate::headers::AddHeader;
use crate::limiter::Outcome;
use crate::metrics::grpc::GrpcCalls;
use crate::respond::grpc::{Code, GRPC_STATUS, parse_status};
use crate::respond::{self, RateLimitHeaders, Rejection};
use crate::upstream::UpstreamFields;
use crate::vars::ResponseVars;
use http::{Response, header};
use http_body_util::BodyExt;
use std::sync::Arc;

/// The response with `list`'s `add_header` fields, as nginx's headers
/// filter adds them to every response of the location (its own answers,
/// error pages and rejections included, by their status and `always`).
pub(crate) fn with_added(
    resp: Result<Response<Body>, CloseConnection>,
    list: &[AddHeader],
    cx: &super::Ctx,
    proxy_host: &str,
    Decided {
        status: limit_req_status,
        zone,
        ..
    }: Decided,
) -> Result<Response<Body>, CloseConnection> {
    let Ok(mut r) = resp else { return resp };
    if list.is_empty() {
        return Ok(r);
    }
    let retry_after = crate::upstream::first_value(&r, &header::RETRY_AFTER)
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok());
    let made = ResponseVars {
        proxy_host,
        status: r.status().as_u16(),
        retry_after,
        limit_req_status,
        limit_req_zone: zone,
        limit_conn_status: cx.limit_conn_status(),
        log: None,
    };
    crate::headers::add(r.headers_mut(), list, &cx.vars, &made);
    Ok(r)
}

/// The response compressed as `c` says (nginx's gzip filter, after
/// `add_header`, before the log): its `$gzip_ratio` goes to the record.
#[inline]
pub(crate) fn compressed(
    resp: Result<Response<Body>, CloseConnection>,
    c: Option<&crate::compress::Compression>,
    cx: &super::Ctx,
    record: &mut Option<Record>,
) -> Result<Response<Body>, CloseConnection> {
    match c {
        Some(c) => compressed_by(resp, c, cx, record),
        None => resp,
    }
}

/// [`compressed`] where the scope compresses.
fn compressed_by(
    resp: Result<Response<Body>, CloseConnection>,
    c: &crate::compress::Compression,
    cx: &super::Ctx,
    record: &mut Option<Record>,
) -> Result<Response<Body>, CloseConnection> {
    let Ok(r) = &resp else {
        return resp;
    };
    // A tunnel's bytes are no body to compress.
    if r.status() == http::StatusCode::SWITCHING_PROTOCOLS {
        return resp;
    }
    let v = &cx.vars;
    let h = v.headers;
    let asked = crate::compress::Asked {
        accept_encoding: h.get(&header::ACCEPT_ENCODING),
        user_agent: h.get(&header::USER_AGENT),
        via: h.contains(&header::VIA),
        authorization: h.contains(&header::AUTHORIZATION),
        http10: v.version < http::Version::HTTP_11,
    };
    let head = v.method == http::Method::HEAD;
    resp.map(|r| {
        let (r, ratio) = crate::compress::apply(r, c, &asked, head);
        if let (Some(rec), Some(ratio)) = (record.as_mut(), ratio) {
            rec.gzip_ratio = Some(ratio);
        }
        r
    })
}

/// The request's access-log record gets the response's status and writes
/// itself when the body is done.
pub(crate) fn finish(
    resp: Result<Response<Body>, CloseConnection>,
    record: Option<Record>,
    decided: Decided,
) -> Result<Response<Body>, CloseConnection> {
    let Some(mut r) = record else { return resp };
    decided_in(&mut r, decided);
    match resp {
        Ok(resp) => {
            r.status = resp.status().as_u16();
            r.grpc_status = grpc_status(&resp);
            // A tunnel's line is written when it closes.
            let Some(r) = super::tunnel::log_at_close(&resp, r) else {
                return Ok(resp);
            };
            let (parts, body) = resp.into_parts();
            Ok(Response::from_parts(parts, LoggedBody::wrap(body, r)))
        }
        Err(close) => {
            r.status = close.status;
            r.write(0);
            Err(close)
        }
    }
}

/// `$grpc_status`: the code of a trailers-only answer (in its head).
fn grpc_status(resp: &Response<Body>) -> Option<u8> {
    let v = resp.headers().get(GRPC_STATUS)?;
    u8::try_from(parse_status(v.as_bytes())?).ok()
}

/// What the limits decided, in the access record.
fn decided_in(r: &mut Record, decided: Decided) {
    r.limit_req_status = decided.status;
    r.zone = decided.zone.to_string();
    r.limit_req_algorithm = decided.algorithm;
}

/// A request's answer: a response, or a rejection that the HTTP/1.1 loop
/// writes from its rendered form ([`Rejection`]) without making a
/// response of it.
pub enum Reply {
    Response(Response<Body>),
    Rejected(Rejected),
}

impl Reply {
    pub fn status(&self) -> u16 {
        match self {
            Reply::Response(r) => r.status().as_u16(),
            Reply::Rejected(r) => r.rejection.status().as_u16(),
        }
    }

    /// As a response (HTTP/2, hyper's HTTP/1.1): the same head and body.
    pub fn into_response(self) -> Response<Body> {
        match self {
            Reply::Response(r) => r,
            Reply::Rejected(r) => r.into_response(),
        }
    }
}

/// A `limit_req` rejection answered with its limit's default problem, as
/// [`super::answer`] would have made it: the rate-limit fields included,
/// no `add_header` (there are none where one is made), the access record
/// stamped.
pub struct Rejected {
    rejection: Arc<Rejection>,
    secs: u64,
    /// (Boxed: a record is large, and most rejections have none.)
    record: Option<Box<Record>>,
}

impl Rejected {
    /// The rejection `rejection` after `secs`, with no access record.
    pub(crate) fn new(rejection: Arc<Rejection>, secs: u64) -> Rejected {
        Rejected {
            rejection,
            secs,
            record: None,
        }
    }

    pub fn status(&self) -> http::StatusCode {
        self.rejection.status()
    }

    /// Its head fields, each line ending in CRLF (see [`Rejection::fields`]).
    pub fn fields(&self, dst: &mut Vec<u8>) {
        self.rejection.fields(self.secs, true, dst);
    }

    pub fn body_len(&self) -> usize {
        self.rejection.body_len(self.secs)
    }

    pub fn body(&self, dst: &mut Vec<u8>) {
        self.rejection.body(self.secs, dst);
    }

    /// `sent` bytes of the body went out: the access-log line, if any.
    pub fn done(self, sent: u64) {
        if let Some(r) = self.record {
            r.write(sent);
        }
    }

    fn into_response(self) -> Response<Body> {
        let resp = self.rejection.response(self.secs, true);
        match self.record {
            Some(r) => resp.map(|body| LoggedBody::wrap(body, *r)),
            None => resp,
        }
    }
}

/// The rejection by a limit whose answer is `rejection`, after `secs`.
pub(crate) fn rejected(
    rejection: Arc<Rejection>,
    secs: u64,
    record: Option<Record>,
    decided: Decided,
) -> Reply {
    let record = record.map(|mut r| {
        decided_in(&mut r, decided);
        r.status = rejection.status().as_u16();
        Box::new(r)
    });
    Reply::Rejected(Rejected {
        record,
        ..Rejected::new(rejection, secs)
    })
}

/// The response with `loc`'s rate-limit headers (`ratelimit_headers`) for
/// what the limits decided.
pub(crate) fn with_quota(
    mut resp: Response<Body>,
    loc: &Location,
    outcome: &Outcome,
) -> Response<Body> {
    if loc.ratelimit_headers != RateLimitHeaders::Off {
        if let Some(state) = quota_state(outcome) {
            // They replace the upstream's fields of their names.
            let mut quota = http::HeaderMap::new();
            respond::add_quota_headers(&mut quota, loc.ratelimit_headers, loc.limits.set(), state);
            let upstream = resp.extensions_mut().get_mut::<UpstreamFields>();
            if let Some(up) = upstream {
                for name in quota.keys() {
                    up.remove(name.as_str().as_bytes());
                }
            }
            for (name, value) in quota {
                if let Some(name) = name {
                    resp.headers_mut().insert(name, value);
                }
            }
        }
    }
    resp
}

/// Where this request leaves the client against the location's limits.
pub(crate) fn quota_state(outcome: &Outcome) -> Option<respond::QuotaState> {
    match *outcome {
        Outcome::Accepted {
            tightest: (limit, standing),
            ..
        } => Some(respond::QuotaState {
            limit,
            remaining: standing.remaining,
            reset: standing.reset_ms.div_ceil(1000),
        }),
        Outcome::Rejected { limit, wait_ms, .. } => Some(respond::QuotaState {
            limit,
            remaining: 0,
            reset: retry_after_secs(wait_ms),
        }),
        Outcome::Unlimited | Outcome::NoMemory { .. } | Outcome::Unavailable { .. } => None,
    }
}

/// On a `grpc_pass` location, the call is counted by the `grpc-status` it
/// ends with (see [`crate::metrics::grpc`]): at once for a trailers-only
/// answer, else when its body's trailers go by.
pub(crate) fn counted(
    resp: Result<Response<Body>, CloseConnection>,
    calls: Option<&GrpcCalls>,
) -> Result<Response<Body>, CloseConnection> {
    let (Some(calls), Ok(r)) = (calls, &resp) else {
        return resp;
    };
    let status = r.headers().get(GRPC_STATUS);
    if let Some(code) = status.and_then(|v| parse_status(v.as_bytes())) {
        calls.count(code);
        return resp;
    }
    resp.map(|r| {
        let call = Call {
            calls: calls.clone(),
            code: None,
            ended: false,
        };
        r.map(|body| crate::body::Watched::new(body, call).boxed())
    })
}

/// A gRPC call on its way: the status its trailers carry.
struct Call {
    calls: GrpcCalls,
    code: Option<u32>,
    ended: bool,
}

impl crate::body::Watch for Call {
    fn trailers(&mut self, trailers: &http::HeaderMap) {
        let status = trailers.get(GRPC_STATUS);
        self.code = status.and_then(|v| parse_status(v.as_bytes()));
    }

    fn ended(mut self) {
        self.ended = true;
    }

    /// The upstream broke off (sluice's answer to the client is then
    /// UNAVAILABLE, or the upstream's reset).
    fn failed(mut self, _error: &crate::body::BodyError) {
        self.code = self.code.or(Some(Code::Unavailable as u32));
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // No status: the client left first (CANCELLED), or the answer had
        // none (UNKNOWN, as a gRPC client reads it).
        let none = if self.ended {
            Code::Unknown
        } else {
            Code::Cancelled
        };
        self.calls.count(self.code.unwrap_or(none as u32));
    }
}
