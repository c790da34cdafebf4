//! Everything that ends a request before its content: its status, its
//! error-log line and severity, its response.

use crate::body::Body;
use crate::config::Location;
use crate::respond::{self, Made};
use crate::vars::RequestVars;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

/// Returned by the service to close the connection without a response:
/// nginx's 444, or a client that went away mid-request (logged 499).
#[derive(Debug)]
pub struct CloseConnection {
    /// The status the logs and metrics record.
    pub(crate) status: u16,
}

impl CloseConnection {
    pub(crate) const NO_RESPONSE: CloseConnection = CloseConnection { status: 444 };
}

impl std::fmt::Display for CloseConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "connection closed without a response ({})", self.status)
    }
}

impl std::error::Error for CloseConnection {}

pub(crate) fn plain_status(s: StatusCode) -> Response<Body> {
    let mut r = Response::new(respond::full(Bytes::new()));
    *r.status_mut() = s;
    r
}

/// Whole seconds, rounded up, at least 1: `Retry-After` for a wait.
pub(crate) fn retry_after_secs(wait_ms: u64) -> u64 {
    wait_ms.div_ceil(1000).max(1)
}

/// The answer to a rejected request: limit `limit`'s error page, or the
/// quota-exceeded problem; `wait_ms` is until this key is accepted again.
pub(crate) fn reject(
    loc: &Location,
    vars: &RequestVars,
    limit: usize,
    wait_ms: Option<u64>,
) -> Result<Response<Body>, CloseConnection> {
    if loc.status == 444 {
        return Err(CloseConnection::NO_RESPONSE);
    }
    let l = &loc.limits[limit];
    let zone = &*l.zone.name;
    let retry_after = wait_ms.map(retry_after_secs);
    if let (Some(secs), false) = (retry_after, loc.error_pages.contains_key(&loc.status)) {
        // The common case, without formatting: the pre-rendered problem.
        return Ok(loc.problems[limit].response(loc.status, secs));
    }
    let detail = match retry_after {
        Some(s) => format!(
            "{} (zone \"{zone}\"). Retry after {s} second{}.",
            respond::describe_limit(l),
            if s == 1 { "" } else { "s" }
        ),
        None => format!("The limit_req zone \"{zone}\" is full."),
    };
    Ok(respond::error_response(
        &loc.error_pages,
        Some(vars),
        &Made {
            status: loc.status,
            retry_after,
            limit_req_status: "REJECTED",
            zone,
            detail,
            violated: Some(zone),
        },
    ))
}

/// A rejection because the Redis zone could not decide (`on_error = "deny"`):
/// `limit_req_status`, no `Retry-After` (there is no bucket to compute it from).
pub(crate) fn reject_unavailable(
    loc: &Location,
    vars: &RequestVars,
    zone: &str,
) -> Result<Response<Body>, CloseConnection> {
    if loc.status == 444 {
        return Err(CloseConnection::NO_RESPONSE);
    }
    Ok(respond::error_response(
        &loc.error_pages,
        Some(vars),
        &Made {
            status: loc.status,
            retry_after: None,
            limit_req_status: "REJECTED",
            zone,
            detail: format!(
                "The limit_req zone \"{zone}\" cannot decide (its Redis is unavailable)."
            ),
            violated: None,
        },
    ))
}

/// 413, closing the connection: the rest of the body is not read.
pub(crate) fn too_large(loc: &Location, vars: &RequestVars) -> Response<Body> {
    let mut resp = respond::error_response(
        &loc.error_pages,
        Some(vars),
        &Made::plain(
            413,
            format!(
                "The request body is larger than client_max_body_size ({} bytes).",
                loc.client_max_body_size
            ),
        ),
    );
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Whether a request body failed because its chunked framing broke nginx's
/// grammar (see [`crate::http1::chunked`]), rather than the client leaving.
pub(crate) fn invalid_chunked(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.is::<crate::http1::ChunkError>()
            || err
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .is_some_and(|inner| inner.is::<crate::http1::ChunkError>())
            || err
                .downcast_ref::<hyper::Error>()
                .is_some_and(|h| h.is_parse())
        {
            return true;
        }
        cur = err.source();
    }
    false
}
