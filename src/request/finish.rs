//! The end of a request: its quota headers and its access record.

use super::error::{CloseConnection, Decided, retry_after_secs};
use crate::accesslog::{LoggedBody, Record};
use crate::body::Body;
use crate::config::Location;
use crate::headers::AddHeader;
use crate::limiter::Outcome;
use crate::respond::{self, RateLimitHeaders};
use crate::upstream::UpstreamFields;
use crate::vars::ResponseVars;
use http::{Response, header};

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

/// The request's access-log record gets the response's status and writes
/// itself when the body is done.
pub(crate) fn finish(
    resp: Result<Response<Body>, CloseConnection>,
    record: Option<Record>,
    Decided {
        status: limit_req_status,
        zone,
        algorithm,
    }: Decided,
) -> Result<Response<Body>, CloseConnection> {
    let Some(mut r) = record else { return resp };
    r.limit_req_status = limit_req_status;
    r.zone = zone.to_string();
    r.limit_req_algorithm = algorithm;
    match resp {
        Ok(resp) => {
            r.status = resp.status().as_u16();
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
