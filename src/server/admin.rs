//! The admin listener: `/metrics` and `/healthz`.

use super::Shared;
use crate::body::Body;
use crate::respond::{self};
use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// One connection to the admin listener.
pub(crate) fn serve_admin(
    shared: &Arc<Shared>,
    graceful: &GracefulShutdown,
    stream: tokio::net::TcpStream,
) {
    let svc = {
        let shared = shared.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let shared = shared.clone();
            async move { Ok::<_, std::convert::Infallible>(admin(&shared, &req)) }
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

/// `/metrics` and `/healthz`.
pub(crate) fn admin(shared: &Shared, req: &Request<Incoming>) -> Response<Body> {
    let text = |status: StatusCode, content_type: &'static str, body: String| {
        let mut r = Response::new(respond::full(body));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        r
    };
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "method not allowed\n".into(),
        );
    }
    match req.uri().path() {
        "/metrics" => text(
            StatusCode::OK,
            crate::metrics::CONTENT_TYPE,
            shared.env.metrics.render(&shared.config()),
        ),
        "/healthz" if shared.draining.load(Ordering::Relaxed) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "draining\n".into(),
        ),
        "/healthz" => text(StatusCode::OK, "text/plain", "ok\n".into()),
        _ => text(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}
