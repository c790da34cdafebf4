//! The admin listener: `/metrics`, `/healthz`, the status API and the
//! dashboard.
//!
//! The API keeps NGINX Plus's paths and field names (API version 9) where
//! NGINX Plus has them, so that scripts and dashboards written for it
//! work ([`plus`]): `/api/9/http/limit_reqs[/ZONE]`,
//! `/api/9/http/limit_conns[/ZONE]`, `/api/9/http/upstreams[/NAME]`, and
//! `DELETE` on a zone to reset its counters. sluice's own additions live
//! under `/api/sluice/` ([`zones`]): each zone's algorithm, rate, backend and
//! states, one client key's state (`keys/KEY`, and `DELETE` to forget it),
//! and the zone's most limited keys (`top`).
//!
//! The dashboard ([`dashboard`]) at `/` is one self-contained page that
//! polls this API.
//!
//! Who may use it ([`gate`]): loopback clients, and those `[admin] allow`
//! names; everyone else gets 403. Writes (`DELETE`) need `Authorization:
//! Bearer TOKEN` with `[admin] token_file`'s token: without a token file
//! they are off (403), with a missing or wrong token 401, and nothing
//! changes. Every answer is counted (`sluice_admin_requests`).

mod dashboard;
mod plus;
mod zones;

use super::Shared;
use crate::body::Body;
use crate::metrics::AdminResult;
use crate::respond;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// One connection to the admin listener, from `client`.
pub(crate) fn serve_admin(
    shared: &Arc<Shared>,
    graceful: &GracefulShutdown,
    stream: tokio::net::TcpStream,
    client: IpAddr,
) {
    let svc = {
        let shared = shared.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let shared = shared.clone();
            async move { Ok::<_, std::convert::Infallible>(admin(&shared, &req, client).await) }
        })
    };
    let served = graceful.watch(
        hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(10))
            .serve_connection(TokioIo::new(stream), svc),
    );
    tokio::spawn(served);
}

/// An admin answer: its status, type and body, and how it is counted.
pub(crate) struct Answer {
    status: StatusCode,
    content_type: &'static str,
    body: String,
    result: AdminResult,
}

impl Answer {
    /// `body` of `content_type` (none: no body), counted as not found
    /// for a 404 and as answered otherwise.
    fn new(status: StatusCode, content_type: &'static str, body: String) -> Answer {
        let result = match status {
            StatusCode::NOT_FOUND => AdminResult::NotFound,
            _ => AdminResult::Ok,
        };
        Answer {
            status,
            content_type,
            body,
            result,
        }
    }

    fn text(status: StatusCode, body: impl Into<String>) -> Answer {
        Answer::new(status, "text/plain; charset=utf-8", body.into())
    }

    fn json(status: StatusCode, value: &serde_json::Value) -> Answer {
        let mut body = serde_json::to_string_pretty(value).unwrap_or_default();
        body.push('\n');
        Answer::new(status, "application/json", body)
    }

    /// NGINX Plus's error object: `{"error": {"status", "text", "code"}}`.
    fn error(status: StatusCode, text: impl Into<String>, code: &str) -> Answer {
        let v = serde_json::json!({
            "error": { "status": status.as_u16(), "text": text.into(), "code": code }
        });
        Answer::json(status, &v)
    }

    fn no_content() -> Answer {
        Answer::new(StatusCode::NO_CONTENT, "", String::new())
    }

    fn counted_as(self, result: AdminResult) -> Answer {
        Answer { result, ..self }
    }
}

/// Answer one admin request from `client`.
pub(crate) async fn admin(
    shared: &Shared,
    req: &Request<Incoming>,
    client: IpAddr,
) -> Response<Body> {
    let config = shared.config();
    let answer = match gate(
        config.ops.admin.as_ref(),
        req.method(),
        req.headers(),
        client,
    ) {
        Err(refused) => refused,
        Ok(()) => route(shared, &config, req).await,
    };
    shared.env.metrics.admin_request(answer.result);
    let mut r = Response::new(if req.method() == Method::HEAD {
        respond::full(String::new())
    } else {
        respond::full(answer.body)
    });
    *r.status_mut() = answer.status;
    if !answer.content_type.is_empty() {
        let v = HeaderValue::from_static(answer.content_type);
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if answer.content_type.starts_with("text/html") {
        let v = HeaderValue::from_static(dashboard::csp());
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    if answer.result == AdminResult::Unauthorized {
        let v = HeaderValue::from_static("Bearer realm=\"sluice admin\"");
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

/// Who may ask, and who may write.
fn gate(
    admin: Option<&crate::config::AdminSpec>,
    method: &Method,
    headers: &HeaderMap,
    client: IpAddr,
) -> Result<(), Answer> {
    let client = client.to_canonical();
    let allowed =
        client.is_loopback() || admin.is_some_and(|a| a.allow.iter().any(|n| n.contains(&client)));
    if !allowed {
        let a = Answer::error(StatusCode::FORBIDDEN, "address not allowed", "Forbidden");
        return Err(a.counted_as(AdminResult::Forbidden));
    }
    if matches!(*method, Method::GET | Method::HEAD) {
        return Ok(());
    }
    let Some(token) = admin.and_then(|a| a.token.as_deref()) else {
        let text = "write methods are off: [admin] has no token_file";
        let a = Answer::error(StatusCode::FORBIDDEN, text, "WritesOff");
        return Err(a.counted_as(AdminResult::WritesOff));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
        let a = Answer::error(
            StatusCode::UNAUTHORIZED,
            "no or wrong token",
            "Unauthorized",
        );
        return Err(a.counted_as(AdminResult::Unauthorized));
    }
    Ok(())
}

/// Equal, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The answer at the request's path.
async fn route(shared: &Shared, config: &crate::config::Config, req: &Request<Incoming>) -> Answer {
    let path = req.uri().path();
    let query = req.uri().query().unwrap_or("");
    let method = req.method();
    if let Some(rest) = path.strip_prefix("/api/sluice") {
        return zones::route(shared, config, method, rest, query).await;
    }
    if path == "/api" || path.starts_with("/api/") {
        return plus::route(config, method, path, query);
    }
    if !matches!(*method, Method::GET | Method::HEAD) {
        return Answer::text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match path {
        "/metrics" => Answer::new(
            StatusCode::OK,
            crate::metrics::CONTENT_TYPE,
            shared.env.metrics.render(config),
        ),
        "/healthz" if shared.draining.load(Ordering::Relaxed) => {
            Answer::text(StatusCode::SERVICE_UNAVAILABLE, "draining\n")
        }
        "/healthz" => Answer::text(StatusCode::OK, "ok\n"),
        "/" | "/index.html" => Answer::new(
            StatusCode::OK,
            "text/html; charset=utf-8",
            dashboard::PAGE.into(),
        ),
        _ => Answer::text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AdminSpec;

    fn spec(allow: &[&str], token: Option<&str>) -> AdminSpec {
        AdminSpec {
            listen: "0.0.0.0:9090".parse().unwrap(),
            allow: allow.iter().map(|n| n.parse().unwrap()).collect(),
            token: token.map(Into::into),
            top_keys: 10,
        }
    }

    fn result(a: &AdminSpec, method: Method, auth: Option<&str>, client: &str) -> AdminResult {
        let mut headers = HeaderMap::new();
        if let Some(v) = auth {
            headers.insert(header::AUTHORIZATION, v.parse().unwrap());
        }
        match gate(Some(a), &method, &headers, client.parse().unwrap()) {
            Ok(()) => AdminResult::Ok,
            Err(answer) => answer.result,
        }
    }

    #[test]
    fn only_loopback_and_allowed_networks_get_in() {
        let a = spec(&[], None);
        assert_eq!(result(&a, Method::GET, None, "127.0.0.9"), AdminResult::Ok);
        assert_eq!(result(&a, Method::GET, None, "::1"), AdminResult::Ok);
        assert_eq!(
            result(&a, Method::GET, None, "::ffff:127.0.0.1"),
            AdminResult::Ok
        );
        assert_eq!(
            result(&a, Method::GET, None, "192.0.2.1"),
            AdminResult::Forbidden
        );
        let a = spec(&["192.0.2.0/24"], None);
        assert_eq!(result(&a, Method::GET, None, "192.0.2.1"), AdminResult::Ok);
        assert_eq!(
            result(&a, Method::GET, None, "198.51.100.1"),
            AdminResult::Forbidden
        );
    }

    #[test]
    fn writes_need_the_token() {
        let t = "0123456789abcdef-token";
        let a = spec(&[], Some(t));
        let del = |auth: Option<&str>| result(&a, Method::DELETE, auth, "127.0.0.1");
        assert_eq!(del(None), AdminResult::Unauthorized);
        assert_eq!(del(Some("Bearer nope")), AdminResult::Unauthorized);
        let (basic, bearer) = (format!("Basic {t}"), format!("Bearer {t}"));
        assert_eq!(del(Some(&basic)), AdminResult::Unauthorized);
        assert_eq!(del(Some(&bearer)), AdminResult::Ok);
        // Still refused by address first, token or not.
        let far = result(
            &a,
            Method::DELETE,
            Some(&format!("Bearer {t}")),
            "192.0.2.1",
        );
        assert_eq!(far, AdminResult::Forbidden);
        let off = spec(&[], None);
        let del = result(
            &off,
            Method::DELETE,
            Some(&format!("Bearer {t}")),
            "127.0.0.1",
        );
        assert_eq!(del, AdminResult::WritesOff);
    }
}
