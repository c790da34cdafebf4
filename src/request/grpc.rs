//! A gRPC call on a `grpc_pass` location: what sluice answers it itself,
//! chosen by cause, as a trailers-only answer ([`crate::respond::grpc`]),
//! and its deadline (`grpc-timeout`), which `limit_req`'s delay may not
//! outlive (see [`super::limit`]) and the upstream's read timeout should
//! not either.
//!
//! A request is answered so when its location says `grpc_pass` (with
//! `grpc_errors = "grpc"`, the default) and it is a gRPC call: its
//! `content-type` is `application/grpc…`. Anything else sent there (a
//! browser, a health check with curl) keeps nginx's HTTP answers, which it
//! can read; a gRPC client cannot read those ("Received http2 header with
//! status: 429" is `UNAVAILABLE` to it, retried at once).

use super::error::{Decided, ProxyError, limited_detail, retry_after_secs};
use super::{Ctx, RequestHead};
use crate::body::Body;
use crate::config::Location;
use crate::respond::ErrorPages;
use crate::respond::grpc::{self, Code, Said};
use crate::vars::ResponseVars;
use http::{Response, header};
use std::time::Duration;

/// Whether `loc` answers this request in gRPC: a gRPC call to a
/// `grpc_pass` location whose answers are gRPC's.
pub(crate) fn answers(loc: &Location, head: &RequestHead) -> bool {
    loc.grpc_answers
        && head
            .fields
            .get(&header::CONTENT_TYPE)
            .is_some_and(grpc::is_grpc_content_type)
}

/// The call's deadline: its `grpc-timeout` when valid (else none), from
/// when the client sent it (about when the request arrived).
pub(crate) fn deadline(head: &RequestHead) -> Option<Duration> {
    head.fields
        .get(&grpc::GRPC_TIMEOUT)
        .and_then(grpc::parse_timeout)
}

impl ProxyError<'_> {
    /// The gRPC code of its answer, by cause; `status` is the HTTP status
    /// it would have had, which gives the code of the others (gRPC's own
    /// mapping of HTTP statuses).
    pub(crate) fn grpc_code(&self, status: u16) -> Code {
        match self {
            ProxyError::Limited { .. }
            | ProxyError::ZoneFull { .. }
            | ProxyError::TooManyConnections { .. }
            | ProxyError::BodyTooLarge { .. }
            | ProxyError::ChunkedBodyTooLarge { .. } => Code::ResourceExhausted,
            // The limiter could not decide: not the client's quota.
            ProxyError::Unavailable { .. } => Code::Unavailable,
            ProxyError::Forbidden => Code::PermissionDenied,
            ProxyError::Upstream { error, .. } if error.is_timeout() => Code::DeadlineExceeded,
            ProxyError::Upstream { .. } => Code::Unavailable,
            _ => Code::from_http(status),
        }
    }
}

/// The trailers-only answer to `e` (whose HTTP answer would have had
/// `status`): the error page of `status` may name its code and message;
/// a `limit_req` rejection tells the wait in `grpc-retry-pushback-ms` and
/// `Retry-After` (the `RateLimit` fields and `add_header` follow as for
/// any answer).
pub(crate) fn answer(
    e: &ProxyError,
    cx: &Ctx,
    (pages, loc): (&ErrorPages, Option<&Location>),
    status: u16,
    decided: Decided,
) -> Response<Body> {
    let (pushback_ms, message) = match (e, loc) {
        (ProxyError::Limited { limit, wait_ms }, Some(loc)) => (
            Some(*wait_ms),
            limited_detail(loc, *limit, Some(retry_after_secs(*wait_ms))),
        ),
        (ProxyError::ZoneFull { limit }, Some(loc)) => (None, limited_detail(loc, *limit, None)),
        (ProxyError::Unavailable { zone }, _) => (
            None,
            format!("The limit_req zone \"{zone}\" cannot decide (its Redis is unavailable)."),
        ),
        _ => (None, e.detail(loc)),
    };
    let vars = ResponseVars {
        proxy_host: "",
        status: 200,
        retry_after: pushback_ms.map(retry_after_secs),
        limit_req_status: decided.status,
        limit_req_zone: decided.zone,
        limit_conn_status: cx.limit_conn_status(),
        log: None,
    };
    let said = Said {
        code: e.grpc_code(status),
        message: &message,
        pushback_ms,
    };
    grpc::page_answer(pages.get(&status), &cx.vars, &vars, said)
}
