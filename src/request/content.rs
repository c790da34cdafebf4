//! The content phase: a location's `return`, or the request forwarded to
//! its upstream.

use super::Env;
use super::error::*;
use super::log::*;
use crate::body::Body;
use crate::client_body::LimitedBody;
use crate::config::Location;
use crate::conn::Conn;
use crate::errlog::{self, Severity};
use crate::metrics::UpstreamError;
use crate::respond::{self, Made};
use crate::upstream;
use crate::vars::RequestVars;
use http::{HeaderValue, Response, Uri, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;

/// nginx's `proxy_pass` URI rule: with a URI part, the matched location
/// prefix is replaced by it; without one, the request URI goes unchanged.
/// The result is the upstream request's target (path and query).
pub(crate) fn upstream_target<'a>(
    pp: &crate::config::ProxyPass,
    loc: &Location,
    uri: &'a Uri,
    path: &str,
) -> std::borrow::Cow<'a, str> {
    match (&pp.uri, &loc.prefix) {
        (Some(base), Some(prefix)) => {
            let rest = path.strip_prefix(prefix.as_str()).unwrap_or("");
            let mut s = format!("{base}{}", escape_path(rest));
            if let Some(q) = uri.query() {
                s.push('?');
                s.push_str(q);
            }
            s.into()
        }
        // Unchanged: the request's own (already parsed) path and query.
        _ => uri.path_and_query().map_or("/", |pq| pq.as_str()).into(),
    }
}

pub(crate) fn escape_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn forward(
    shared: &Env,
    loc: &Location,
    conn: &Conn,
    vars: &RequestVars<'_>,
    (limit_req_status, zone): (&'static str, &str),
    parts: &http::request::Parts,
    body: Incoming,
    target: &str,
    pp: &crate::config::ProxyPass,
) -> Result<Response<Body>, CloseConnection> {
    // Error pages after the limits know their decision ($limit_req_status).
    let made = |status: u16, detail: &str| Made {
        limit_req_status,
        zone,
        ..Made::plain(status, detail.to_string())
    };
    let (body, body_limit) =
        LimitedBody::new(body, loc.client_max_body_size, Some(conn.state.clone()));
    let head = upstream::Head {
        method: &parts.method,
        target,
        headers: &parts.headers,
        host: &pp.authority,
        client: vars.remote.ip(),
    };
    // nginx's proxy_request_buffering: nothing goes upstream before the
    // body is whole, so a body nginx would refuse is never half-forwarded.
    let sent = match &loc.request_buffering {
        Some(b) if !hyper::body::Body::is_end_stream(&body) => {
            use crate::client_body::{ReadError, read_whole};
            match read_whole(body, b.in_memory, &b.temp_dir, loc.timeouts.client_body).await {
                Ok(whole) => upstream::send(&pp.authority, loc.timeouts, &head, whole).await,
                Err(ReadError::Timeout) => Err(upstream::Error::ClientBodyTimeout),
                Err(ReadError::Body(e)) => Err(upstream::Error::Body(e)),
                Err(ReadError::File(e)) => {
                    log_req(
                        Severity::Crit,
                        conn,
                        vars,
                        format_args!(
                            "write() to a temporary file in {} failed ({e})",
                            b.temp_dir.display()
                        ),
                    );
                    return Ok(respond::error_response(
                        &loc.error_pages,
                        Some(vars),
                        &made(500, "The request body could not be kept."),
                    ));
                }
            }
        }
        _ => upstream::send(&pp.authority, loc.timeouts, &head, body).await,
    };
    let failure = match sent {
        Ok(resp) => return Ok(resp.map(BodyExt::boxed)),
        Err(_) if body_limit.exceeded() => {
            log_req(
                Severity::Error,
                conn,
                vars,
                format_args!(
                    "client intended to send too large chunked body: {} bytes (client_max_body_size {})",
                    body_limit.received(),
                    loc.client_max_body_size
                ),
            );
            return Ok(too_large(loc, vars));
        }
        Err(e) => e,
    };
    // The client's own failures: a broken chunked body (400, as nginx), too
    // slow (408), or gone (499 in the logs, as nginx logs it; there is
    // nobody to answer, so no response). Not the upstream's.
    let client_failure = match &failure {
        upstream::Error::ClientBodyTimeout => Some((
            408,
            "client timed out (110: Connection timed out) while reading client request body",
        )),
        upstream::Error::Body(e) if invalid_chunked(&**e) => {
            Some((400, "client sent invalid chunked body"))
        }
        upstream::Error::Body(_) => Some((
            499,
            "client prematurely closed connection while sending request to upstream",
        )),
        _ => None,
    };
    if let Some((status, what)) = client_failure {
        // nginx logs a broken chunked body as an error, the others at info.
        let sev = if status == 400 {
            Severity::Error
        } else {
            Severity::Info
        };
        errlog::emit_with(sev, |out| {
            push_req_line(out, conn, vars, |out| {
                out.extend_from_slice(what.as_bytes())
            });
        });
        if status == 499 {
            return Err(CloseConnection { status });
        }
        let mut resp = respond::error_response(
            &loc.error_pages,
            Some(vars),
            &made(
                status,
                if status == 400 {
                    "The chunked request body is invalid."
                } else {
                    "The request body did not arrive in time."
                },
            ),
        );
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return Ok(resp);
    }
    shared.metrics.upstream_error(match failure {
        _ if failure.is_timeout() => UpstreamError::Timeout,
        upstream::Error::Connect(_) => UpstreamError::Connect,
        _ => UpstreamError::Other,
    });
    log_upstream(
        conn,
        vars,
        (pp.authority.as_str(), target),
        format_args!("{failure}"),
    );
    let (status, detail) = if failure.is_timeout() {
        (504, "The upstream server did not answer in time.")
    } else {
        (502, "The upstream server could not be reached.")
    };
    Ok(respond::error_response(
        &loc.error_pages,
        Some(vars),
        &made(status, detail),
    ))
}
