//! Everything that ends a request before (or instead of) its content, in one
//! place: [`ProxyError`] → its status, its error-log line and severity, its
//! response.
//!
//! The limits' own lines ("limiting requests", "limiting connections",
//! "could not allocate node") are the limit phases' to write: nginx writes
//! them in dry-run too, when nothing is rejected. Everything else a request
//! can fail with is logged here, once, as nginx logs it.

use super::Ctx;
use super::log::{log_req, log_upstream};
use crate::body::Body;
use crate::config::Location;
use crate::errlog::Severity;
use crate::limiter::LimitReqStatus;
use crate::metrics::UpstreamError;
use crate::respond::{self, ErrorPages, Made};
use crate::upstream;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use std::path::Path;

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

/// Why a request is answered by sluice rather than by its content.
#[derive(Debug)]
pub(crate) enum ProxyError<'a> {
    /// The path climbs above the root or has a bad escape: 400.
    InvalidPath,
    /// Plain HTTP on an `ssl` address: nginx's 400 "The plain HTTP request
    /// was sent to HTTPS port", and the connection closed.
    PlainHttpOnHttps,
    /// No location matches the path: 404.
    NoLocation(&'a str),
    /// Sent in TLS early data (0-RTT), where it may be a replay, and not a
    /// safe method on a server with `ssl_early_data` (or any method on one
    /// without): 425 Too Early (RFC 8470), never forwarded; the client
    /// sends it again after its handshake.
    TooEarly,
    /// The path is a proxied location's name without its final slash:
    /// nginx's 301 to the name (`location /app/` answers `/app` so), with
    /// the query.
    AddSlash {
        to: &'a str,
        /// That location's `add_header`: the redirect is its answer.
        add: &'a [crate::headers::AddHeader],
    },
    /// `return = { status = 444 }`: the connection closed, no response.
    Close,
    /// A Content-Length over `client_max_body_size`: 413.
    BodyTooLarge { len: u64 },
    /// A body that grew over `client_max_body_size` as it came: 413.
    ChunkedBodyTooLarge { received: u64 },
    /// `limit_req` rejected it: limit `limit`, admitted again in `wait_ms`.
    Limited { limit: usize, wait_ms: u64 },
    /// `limit_req`'s zone had no room for a new key.
    ZoneFull { limit: usize },
    /// A Redis zone could not decide and `on_error = "deny"`.
    Unavailable { zone: &'a str },
    /// `allow`/`deny` refused the client: 403.
    Forbidden,
    /// `limit_conn` rejected it (`full`: its zone had no room).
    TooManyConnections { limit: usize, full: bool },
    /// The body could not be kept in `client_body_temp_path`: 500.
    BodyFile {
        dir: &'a Path,
        error: std::io::Error,
    },
    /// The body stopped arriving for `client_body_timeout`: 408.
    ClientBodyTimeout,
    /// The chunked body broke nginx's grammar: 400.
    InvalidChunked,
    /// The client left while its body was being read or sent.
    ClientGone,
    /// The upstream failed: 502, or 504 for a timeout.
    Upstream {
        error: upstream::Error,
        /// `http` or `https`.
        scheme: &'static str,
        authority: &'a str,
        target: std::borrow::Cow<'a, str>,
        /// The failure made the server unavailable: nginx's warning
        /// "upstream server temporarily disabled" follows the error line.
        disabled: bool,
    },
}

/// The `limit_req` decision a response reports (`$limit_req_status`, the
/// deciding zone and its algorithm), none before the limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Decided<'a> {
    /// `$limit_req_status`; None before the limits (or with none).
    pub status: Option<LimitReqStatus>,
    /// The zone that decided (the one that rejected or delayed most).
    pub zone: &'a str,
    /// That zone's algorithm, for the logs.
    pub algorithm: &'static str,
}

/// Before any limit was applied.
pub(crate) const UNDECIDED: Decided<'static> = Decided {
    status: None,
    zone: "",
    algorithm: "-",
};

impl ProxyError<'_> {
    /// The status it is answered (and logged) with; `loc` is where it
    /// happened, once the location is known.
    pub(crate) fn status(&self, loc: Option<&Location>) -> u16 {
        let limit_req_status = loc.map_or(503, |l| l.limit_req_status);
        match self {
            ProxyError::InvalidPath | ProxyError::InvalidChunked | ProxyError::PlainHttpOnHttps => {
                400
            }
            ProxyError::NoLocation(_) => 404,
            ProxyError::TooEarly => 425,
            ProxyError::Forbidden => 403,
            ProxyError::AddSlash { .. } => 301,
            ProxyError::Close => 444,
            ProxyError::BodyTooLarge { .. } | ProxyError::ChunkedBodyTooLarge { .. } => 413,
            ProxyError::Limited { .. }
            | ProxyError::ZoneFull { .. }
            | ProxyError::Unavailable { .. } => limit_req_status,
            ProxyError::TooManyConnections { .. } => loc.map_or(503, |l| l.conn_status),
            ProxyError::BodyFile { .. } => 500,
            ProxyError::ClientBodyTimeout => 408,
            ProxyError::ClientGone => 499,
            ProxyError::Upstream { error, .. } if error.is_timeout() => 504,
            ProxyError::Upstream { .. } => 502,
        }
    }

    /// Its error-log line, if this module writes one (see the module doc).
    fn log(&self, cx: &Ctx, loc: Option<&Location>) {
        let max = loc.map_or(0, |l| l.client_max_body_size);
        let (sev, msg) = match self {
            ProxyError::BodyTooLarge { len } => (
                Severity::Error,
                format!("client intended to send too large body: {len} bytes"),
            ),
            ProxyError::ChunkedBodyTooLarge { received } => (
                Severity::Error,
                format!(
                    "client intended to send too large chunked body: {received} bytes (client_max_body_size {max})"
                ),
            ),
            ProxyError::BodyFile { dir, error } => (
                Severity::Crit,
                format!(
                    "write() to a temporary file in {} failed ({error})",
                    dir.display()
                ),
            ),
            ProxyError::ClientBodyTimeout => (
                Severity::Info,
                "client timed out (110: Connection timed out) while reading client request body"
                    .into(),
            ),
            ProxyError::Forbidden => (Severity::Error, "access forbidden by rule".into()),
            // nginx logs a broken chunked body as an error.
            ProxyError::InvalidChunked => {
                (Severity::Error, "client sent invalid chunked body".into())
            }
            ProxyError::ClientGone => (
                Severity::Info,
                "client prematurely closed connection while sending request to upstream".into(),
            ),
            ProxyError::PlainHttpOnHttps => (
                Severity::Info,
                "client sent plain HTTP request to HTTPS port while reading client request headers"
                    .into(),
            ),
            ProxyError::Upstream {
                error,
                scheme,
                authority,
                target,
                disabled,
            } => {
                let upstream = (*scheme, *authority, &**target);
                log_upstream(cx.conn, &cx.vars, upstream, format_args!("{error}"));
                if *disabled {
                    super::next_upstream::log_disabled(cx, upstream, error);
                }
                return;
            }
            _ => return,
        };
        log_req(sev, cx.conn, &cx.vars, format_args!("{msg}"));
    }

    /// Count it (upstream failures), log it and make its answer: `loc`'s error pages (the server's before
    /// a location is found), or the problem body; `decided` is what the
    /// limits decided, for `$limit_req_status` in error pages.
    pub(crate) fn respond(
        self,
        cx: &Ctx,
        (pages, loc): (&ErrorPages, Option<&Location>),
        decided: Decided,
        grpc: bool,
    ) -> Result<Response<Body>, CloseConnection> {
        if let ProxyError::Upstream { error, .. } = &self {
            // A failed TLS handshake is no connection, as a refused one.
            cx.env.metrics.upstream_error(match error {
                _ if error.is_timeout() => UpstreamError::Timeout,
                _ if error.is_connect() => UpstreamError::Connect,
                _ => UpstreamError::Other,
            });
        }
        self.log(cx, loc);
        let status = self.status(loc);
        if status == 444 {
            return Err(CloseConnection::NO_RESPONSE);
        }
        if status == 499 {
            // Nobody to answer.
            return Err(CloseConnection { status });
        }
        if grpc {
            // (Nothing is closed: a gRPC call is a stream of HTTP/2.)
            return Ok(super::grpc::answer(
                &self,
                cx,
                (pages, loc),
                status,
                decided,
            ));
        }
        let mut resp = match (&self, loc) {
            (ProxyError::Limited { limit, wait_ms }, Some(loc)) => {
                reject(cx, loc, *limit, Some(*wait_ms))
            }
            (ProxyError::ZoneFull { limit }, Some(loc)) => reject(cx, loc, *limit, None),
            (ProxyError::Unavailable { zone }, Some(_)) => {
                let detail = format!(
                    "The limit_req zone \"{zone}\" cannot decide (its Redis is unavailable)."
                );
                rejected(cx, pages, status, zone, detail, (None, None))
            }
            _ => {
                // Before the limits, `$limit_req_status` is `-` in any case;
                // a 413 says `-` after them too, as it always has.
                let decided = match self {
                    ProxyError::BodyTooLarge { .. } | ProxyError::ChunkedBodyTooLarge { .. } => {
                        UNDECIDED
                    }
                    _ => decided,
                };
                let made = Made {
                    limit_req_status: decided.status,
                    zone: decided.zone,
                    limit_conn_status: cx.limit_conn_status(),
                    ..Made::plain(status, self.detail(loc))
                };
                respond::error_response(pages, Some(&cx.vars), &made)
            }
        };
        if let ProxyError::AddSlash { to, .. } = self {
            add_location(&mut resp, cx, to);
        }
        if self.closes() {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        Ok(resp)
    }

    /// The problem `detail` of an answer that is not a `limit_req`
    /// rejection.
    pub(super) fn detail(&self, loc: Option<&Location>) -> String {
        match self {
            ProxyError::InvalidPath => "The request path is invalid.".into(),
            ProxyError::PlainHttpOnHttps => "The plain HTTP request was sent to HTTPS port.".into(),
            ProxyError::NoLocation(path) => format!("No location matches \"{path}\"."),
            ProxyError::TooEarly => {
                "The request was sent in early data (0-RTT): send it again after the handshake."
                    .into()
            }
            ProxyError::AddSlash { to, .. } => format!("Moved to \"{to}\"."),
            ProxyError::Forbidden => "Access is forbidden to this client.".into(),
            ProxyError::BodyTooLarge { .. } | ProxyError::ChunkedBodyTooLarge { .. } => format!(
                "The request body is larger than client_max_body_size ({} bytes).",
                loc.map_or(0, |l| l.client_max_body_size)
            ),
            ProxyError::TooManyConnections { limit, full } => {
                let Some(l) = loc.map(|loc| &loc.conn_limits[*limit]) else {
                    return String::new();
                };
                let name = &*l.zone.name;
                if *full {
                    format!("The limit_conn zone \"{name}\" is full.")
                } else {
                    format!(
                        "Too many requests of this client are being processed at once (at most {} in limit_conn zone \"{name}\").",
                        l.conn
                    )
                }
            }
            ProxyError::BodyFile { .. } => "The request body could not be kept.".into(),
            ProxyError::InvalidChunked => "The chunked request body is invalid.".into(),
            ProxyError::ClientBodyTimeout => "The request body did not arrive in time.".into(),
            ProxyError::Upstream { error, .. } if error.is_timeout() => {
                "The upstream server did not answer in time.".into()
            }
            ProxyError::Upstream { .. } => "The upstream server could not be reached.".into(),
            ProxyError::Limited { .. }
            | ProxyError::ZoneFull { .. }
            | ProxyError::Unavailable { .. }
            | ProxyError::ClientGone
            | ProxyError::Close => String::new(),
        }
    }

    /// Whether the answer closes the connection: the rest of the body is
    /// not read (413), cannot be (a broken chunked body), or will not come.
    fn closes(&self) -> bool {
        matches!(
            self,
            ProxyError::BodyTooLarge { .. }
                | ProxyError::ChunkedBodyTooLarge { .. }
                | ProxyError::InvalidChunked
                | ProxyError::ClientBodyTimeout
                | ProxyError::PlainHttpOnHttps
        )
    }
}

/// nginx's absolute `Location` (`absolute_redirect`, `port_in_redirect`
/// on): the scheme, the request's host, the port unless the scheme's own,
/// then `path` and the query.
fn add_location(resp: &mut Response<Body>, cx: &Ctx, path: &str) {
    let https = cx.vars.tls.is_some();
    let port = cx.vars.local.port();
    let mut v = String::from(if https { "https://" } else { "http://" });
    let host = cx.vars.host();
    v.push_str(&host);
    if port != if https { 443 } else { 80 } {
        v.push_str(&format!(":{port}"));
    }
    v.push_str(path);
    if let Some(q) = cx.vars.uri.query() {
        v.push('?');
        v.push_str(q);
    }
    if let Ok(v) = HeaderValue::from_str(&v) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
}

/// A `limit_req` rejection through the error pages or the problem body.
fn rejected(
    cx: &Ctx,
    pages: &ErrorPages,
    status: u16,
    zone: &str,
    detail: String,
    (retry_after, violated): (Option<u64>, Option<&str>),
) -> Response<Body> {
    let made = Made {
        status,
        retry_after,
        limit_req_status: Some(LimitReqStatus::Rejected),
        zone,
        limit_conn_status: cx.limit_conn_status(),
        detail,
        violated,
    };
    respond::error_response(pages, Some(&cx.vars), &made)
}

/// A response with only a status.
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
/// quota-exceeded problem; `wait_ms` is until this key is accepted again
/// (none when the zone had no room).
fn reject(cx: &Ctx, loc: &Location, limit: usize, wait_ms: Option<u64>) -> Response<Body> {
    let l = loc.limits.limit(limit);
    let zone = &*l.zone.name;
    let retry_after = wait_ms.map(retry_after_secs);
    if let (Some(secs), false) = (
        retry_after,
        loc.error_pages.contains_key(&loc.limit_req_status),
    ) {
        // Without formatting: the pre-rendered problem (its rate-limit
        // fields are added with the rest's, see `with_quota`).
        return loc.limits.rejection(limit).response(secs, false);
    }
    let detail = limited_detail(loc, limit, retry_after);
    let violated = Some(zone);
    rejected(
        cx,
        &loc.error_pages,
        loc.limit_req_status,
        zone,
        detail,
        (retry_after, violated),
    )
}

/// What a rejection by limit `limit` says: the limit and the wait
/// (`retry_after` seconds), or that its zone is full (none).
pub(super) fn limited_detail(loc: &Location, limit: usize, retry_after: Option<u64>) -> String {
    let l = loc.limits.limit(limit);
    let zone = &*l.zone.name;
    match retry_after {
        Some(s) => format!(
            "{} (zone \"{zone}\"). Retry after {s} second{}.",
            respond::describe_limit(l),
            if s == 1 { "" } else { "s" }
        ),
        None => format!("The limit_req zone \"{zone}\" is full."),
    }
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
