//! The proxy: listeners, connections, and the life of one request.
//!
//! A request goes through the phases nginx users know: find the location,
//! apply its limits (reject, delay or pass), then either answer from
//! sluice (`return`) or forward upstream. Unlike nginx, `return` does not
//! bypass the limits (the seed article's pitfall).
//!
//! Time: limits use [`Clock`], integer milliseconds on tokio's monotonic
//! clock (so tests can pause it), offset like nginx's `ngx_current_msec` so
//! that a state with `last = 0` is always long drained.

use crate::errlog::{self, Excess, Severity};
use crate::limiter::{self, Outcome};
use crate::respond::{self, Body, Made};
use crate::runtime::{Action, Location, Runtime, Server};
use crate::vars::RequestVars;
use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Uri, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;

/// Milliseconds for the limiter.
#[derive(Clone, Copy)]
pub struct Clock {
    start: tokio::time::Instant,
}

impl Clock {
    /// nginx's clock counts from boot; a large base keeps `now - 0` large.
    const BASE: u64 = 1_000_000_000;

    pub fn new() -> Clock {
        Clock {
            start: tokio::time::Instant::now(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        Self::BASE + self.start.elapsed().as_millis() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

type UpstreamClient = Client<HttpConnector, Incoming>;

/// State shared by every connection: the current configuration and the
/// upstream connection pools.
pub struct Shared {
    runtime: ArcSwap<Runtime>,
    clock: Clock,
    /// One pooled client per distinct `proxy_connect_timeout`.
    clients: parking_lot::Mutex<HashMap<Duration, UpstreamClient>>,
    connections: AtomicU64,
}

impl Shared {
    pub fn new(runtime: Runtime) -> Arc<Shared> {
        Arc::new(Shared {
            runtime: ArcSwap::from_pointee(runtime),
            clock: Clock::new(),
            clients: Default::default(),
            connections: AtomicU64::new(0),
        })
    }

    /// The configuration generation new requests use.
    pub fn runtime(&self) -> Arc<Runtime> {
        self.runtime.load_full()
    }

    fn client(&self, connect_timeout: Duration) -> UpstreamClient {
        self.clients
            .lock()
            .entry(connect_timeout)
            .or_insert_with(|| {
                let mut conn = HttpConnector::new();
                conn.set_connect_timeout(Some(connect_timeout));
                conn.set_nodelay(true);
                Client::builder(TokioExecutor::new())
                    .pool_idle_timeout(Duration::from_secs(30))
                    .pool_timer(TokioTimer::new())
                    .build(conn)
            })
            .clone()
    }
}

/// Listeners bound for every `[[servers]]`, ready to serve.
pub struct Proxy {
    shared: Arc<Shared>,
    listeners: Vec<(SocketAddr, TcpListener)>,
}

impl Proxy {
    /// Bind every server's `listen` address. Fails before serving anything
    /// if one cannot be bound.
    pub async fn bind(runtime: Runtime) -> std::io::Result<Proxy> {
        let mut listeners = Vec::new();
        for s in &runtime.servers {
            let l = TcpListener::bind(s.listen).await.map_err(|e| {
                std::io::Error::new(e.kind(), format!("bind() to {} failed ({e})", s.listen))
            })?;
            listeners.push((s.listen, l));
        }
        Ok(Proxy {
            shared: Shared::new(runtime),
            listeners,
        })
    }

    /// The bound addresses, in server order (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|(_, l)| l.local_addr().ok())
            .collect()
    }

    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Serve until `shutdown` completes.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) {
        let mut tasks = tokio::task::JoinSet::new();
        for (configured, listener) in self.listeners {
            let shared = self.shared.clone();
            tasks.spawn(accept_loop(shared, configured, listener));
        }
        shutdown.await;
        tasks.abort_all();
    }
}

async fn accept_loop(shared: Arc<Shared>, configured: SocketAddr, listener: TcpListener) {
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                errlog::emit(Severity::Alert, format_args!("accept() failed ({e})"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().unwrap_or(configured);
        let id = shared.connections.fetch_add(1, Ordering::Relaxed) + 1;
        let conn = Arc::new(Conn {
            id,
            remote,
            local,
            listen: configured,
        });
        let shared = shared.clone();
        let header_timeout = shared
            .runtime()
            .servers
            .iter()
            .find(|s| s.listen == configured)
            .map(|s| s.client_header_timeout)
            .unwrap_or(crate::runtime::DEFAULT_TIMEOUT);
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                let conn = conn.clone();
                async move { handle(shared, conn, req).await }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// One client connection.
struct Conn {
    id: u64,
    remote: SocketAddr,
    local: SocketAddr,
    /// The configured `listen` of its server.
    listen: SocketAddr,
}

/// Returned by the service to close the connection without a response
/// (nginx's 444).
#[derive(Debug)]
struct CloseConnection;

impl std::fmt::Display for CloseConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection closed without a response (444)")
    }
}

impl std::error::Error for CloseConnection {}

/// `$limit_req_status`.
fn status_name(o: &Outcome, dry_run: bool) -> &'static str {
    match (o, dry_run) {
        (Outcome::Unlimited, _) => "-",
        (Outcome::Accepted { delay_ms: 0, .. }, _) => "PASSED",
        (Outcome::Accepted { .. }, false) => "DELAYED",
        (Outcome::Accepted { .. }, true) => "DELAYED_DRY_RUN",
        (_, false) => "REJECTED",
        (_, true) => "REJECTED_DRY_RUN",
    }
}

/// `, client: …, server: …, request: "…", host: "…"` — nginx's context.
struct LogContext<'a>(&'a RequestVars<'a>);

impl std::fmt::Display for LogContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.0;
        write!(
            f,
            ", client: {}, server: {}, request: \"{}\"",
            r.remote.ip(),
            r.server_name,
            r.request_line()
        )?;
        if let Some(h) = r.headers.get(header::HOST) {
            write!(f, ", host: \"{}\"", String::from_utf8_lossy(h.as_bytes()))?;
        }
        Ok(())
    }
}

/// Logs nginx's "client prematurely closed connection" if a delayed request
/// is dropped before its delay ends (the client went away). The slot stays
/// charged, as in nginx.
struct DelayGuard {
    armed: bool,
    line: String,
}

impl Drop for DelayGuard {
    fn drop(&mut self) {
        if self.armed {
            errlog::emit(
                Severity::Info,
                format_args!("client prematurely closed connection{}", self.line),
            );
        }
    }
}

async fn handle(
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    req: Request<Incoming>,
) -> Result<Response<Body>, CloseConnection> {
    let rt = shared.runtime();
    let Some(server) = rt.servers.iter().find(|s| s.listen == conn.listen) else {
        return Ok(plain_status(StatusCode::SERVICE_UNAVAILABLE));
    };
    let (parts, body) = req.into_parts();
    let path = match normalize_path(parts.uri.path()) {
        Some(p) => p,
        None => {
            let vars = request_vars(&conn, server, &parts, "");
            return Ok(respond::error_response(
                &server.error_pages,
                Some(&vars),
                &made(400, "The request path is invalid.".into()),
            ));
        }
    };
    let vars = request_vars(&conn, server, &parts, &path);
    let Some(loc) = server.locations.find(&path) else {
        return Ok(respond::error_response(
            &server.error_pages,
            Some(&vars),
            &made(404, format!("No location matches \"{path}\".")),
        ));
    };

    // Limits (nginx's preaccess phase).
    let now = shared.clock.now_ms();
    let mut key_buf = Vec::new();
    let outcome = limiter::decide(&loc.limits, now, |i| {
        key_buf.clear();
        loc.keys[i].eval(&vars, None, &mut key_buf);
        if key_buf.is_empty() {
            return None;
        }
        if key_buf.len() > 65_535 {
            errlog::emit(
                Severity::Error,
                format_args!(
                    "the value of the \"{}\" key is more than 65535 bytes: \"{}...\"{}",
                    loc.keys[i].source(),
                    String::from_utf8_lossy(&key_buf[..64]),
                    LogContext(&vars)
                ),
            );
            return None;
        }
        Some(key_buf.clone())
    })
    .await;
    let lrs = status_name(&outcome, loc.dry_run);
    let dry = if loc.dry_run { ", dry run" } else { "" };
    let level = Severity::from(loc.log_level);
    match outcome {
        Outcome::Unlimited | Outcome::Accepted { delay_ms: 0, .. } => {}
        Outcome::Accepted {
            delay_ms,
            limit,
            excess,
        } => {
            let zone = &loc.limits[limit].zone.name;
            errlog::emit(
                Severity::from(loc.log_level.lower()),
                format_args!(
                    "delaying request{dry}, excess: {}, by zone \"{zone}\"{}",
                    Excess(excess),
                    LogContext(&vars)
                ),
            );
            if !loc.dry_run {
                let mut guard = DelayGuard {
                    armed: true,
                    line: LogContext(&vars).to_string(),
                };
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                guard.armed = false;
            }
        }
        Outcome::Rejected {
            limit,
            excess,
            wait_ms,
        } => {
            let zone = &loc.limits[limit].zone.name;
            errlog::emit(
                level,
                format_args!(
                    "limiting requests{dry}, excess: {} by zone \"{zone}\"{}",
                    Excess(excess),
                    LogContext(&vars)
                ),
            );
            if !loc.dry_run {
                return reject(loc, &vars, zone, Some(wait_ms));
            }
        }
        Outcome::NoMemory { limit } => {
            let zone = &loc.limits[limit].zone.name;
            errlog::emit(
                Severity::Alert,
                format_args!(
                    "could not allocate node in limit_req zone \"{zone}\"{}",
                    LogContext(&vars)
                ),
            );
            if !loc.dry_run {
                return reject(loc, &vars, zone, None);
            }
        }
        // Redis failed and on_error = "deny": already logged (rate-limited)
        // and counted by the zone.
        Outcome::Unavailable { limit } => {
            if !loc.dry_run {
                let zone = &loc.limits[limit].zone.name;
                return reject_unavailable(loc, &vars, zone);
            }
        }
    }

    match &loc.action {
        Action::Return(ret) => Ok(respond::return_response(ret, &vars, lrs)),
        Action::Proxy(pp) => {
            let upstream_uri = upstream_uri(pp, loc, &parts.uri, &path);
            Ok(forward(
                &shared,
                loc,
                &conn,
                &vars,
                parts.clone_head(),
                body,
                upstream_uri,
                pp,
            )
            .await)
        }
    }
}

trait CloneHead {
    fn clone_head(&self) -> (http::Method, HeaderMap, http::Version);
}

impl CloneHead for http::request::Parts {
    fn clone_head(&self) -> (http::Method, HeaderMap, http::Version) {
        (self.method.clone(), self.headers.clone(), self.version)
    }
}

fn made(status: u16, detail: String) -> Made<'static> {
    Made {
        status,
        retry_after: None,
        limit_req_status: "-",
        zone: "",
        detail,
    }
}

fn plain_status(s: StatusCode) -> Response<Body> {
    let mut r = Response::new(respond::full(Bytes::new()));
    *r.status_mut() = s;
    r
}

fn reject(
    loc: &Location,
    vars: &RequestVars,
    zone: &str,
    wait_ms: Option<u64>,
) -> Result<Response<Body>, CloseConnection> {
    if loc.status == 444 {
        return Err(CloseConnection);
    }
    // Whole seconds, rounded up, at least 1.
    let retry_after = wait_ms.map(|ms| ms.div_ceil(1000).max(1));
    let detail = match retry_after {
        Some(s) => format!(
            "Request rate limit exceeded (zone \"{zone}\"). Retry after {s} second{}.",
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
        },
    ))
}

/// A rejection because the Redis zone could not decide (`on_error = "deny"`):
/// `limit_req_status`, no `Retry-After` (there is no bucket to compute it from).
fn reject_unavailable(
    loc: &Location,
    vars: &RequestVars,
    zone: &str,
) -> Result<Response<Body>, CloseConnection> {
    if loc.status == 444 {
        return Err(CloseConnection);
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
        },
    ))
}

fn request_vars<'a>(
    conn: &Conn,
    server: &'a Server,
    parts: &'a http::request::Parts,
    path: &'a str,
) -> RequestVars<'a> {
    RequestVars {
        remote: conn.remote,
        local: conn.local,
        server_name: &server.name,
        method: &parts.method,
        uri: &parts.uri,
        version: parts.version,
        path,
        headers: &parts.headers,
    }
}

/// nginx's `$uri`: percent-decoded, `//` merged, `.` and `..` resolved.
/// `None` when `..` climbs above the root or the path is not absolute.
pub fn normalize_path(raw: &str) -> Option<String> {
    if !raw.starts_with('/') {
        return None;
    }
    let bytes = raw.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = |b: u8| (b as char).to_digit(16);
            match (
                bytes.get(i + 1).and_then(|&b| hex(b)),
                bytes.get(i + 2).and_then(|&b| hex(b)),
            ) {
                (Some(h), Some(l)) => {
                    decoded.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => return None,
            }
        }
        decoded.push(bytes[i]);
        i += 1;
    }
    let text = String::from_utf8_lossy(&decoded);
    let mut segs: Vec<&str> = Vec::new();
    for seg in text.split('/').skip(1) {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop()?;
            }
            s => segs.push(s),
        }
    }
    let mut out = String::with_capacity(text.len());
    for s in &segs {
        out.push('/');
        out.push_str(s);
    }
    let trailing = text.ends_with('/') || text.ends_with("/.") || text.ends_with("/..");
    if out.is_empty() || trailing {
        out.push('/');
    }
    Some(out)
}

/// nginx's `proxy_pass` URI rule: with a URI part, the matched location
/// prefix is replaced by it; without one, the request URI goes unchanged.
fn upstream_uri(pp: &crate::config::ProxyPass, loc: &Location, uri: &Uri, path: &str) -> String {
    let original = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let replaced = match (&pp.uri, &loc.prefix) {
        (Some(base), Some(prefix)) => {
            let rest = path.strip_prefix(prefix.as_str()).unwrap_or("");
            let mut s = format!("{base}{}", escape_path(rest));
            if let Some(q) = uri.query() {
                s.push('?');
                s.push_str(q);
            }
            s
        }
        _ => original.to_string(),
    };
    format!("http://{}{}", pp.authority, replaced)
}

fn escape_path(p: &str) -> String {
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

/// Hop-by-hop headers (RFC 9110 §7.6.1), plus those named in `Connection`.
fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<http::HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| http::HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
    ] {
        h.remove(n);
    }
    h.remove("keep-alive");
    h.remove("proxy-connection");
}

#[allow(clippy::too_many_arguments)]
async fn forward(
    shared: &Shared,
    loc: &Location,
    conn: &Conn,
    vars: &RequestVars<'_>,
    head: (http::Method, HeaderMap, http::Version),
    body: Incoming,
    uri: String,
    pp: &crate::config::ProxyPass,
) -> Response<Body> {
    let (method, mut headers, _) = head;
    strip_hop_by_hop(&mut headers);
    // nginx's `proxy_set_header Host $proxy_host` default.
    if let Ok(v) = HeaderValue::from_str(pp.authority.as_str()) {
        headers.insert(header::HOST, v);
    }
    // $proxy_add_x_forwarded_for
    let client = conn.remote.ip().to_string();
    let xff = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(prev) => format!("{prev}, {client}"),
        None => client,
    };
    if let Ok(v) = HeaderValue::from_str(&xff) {
        headers.insert("x-forwarded-for", v);
    }
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.headers_mut() = headers;
    *req.uri_mut() = match uri.parse() {
        Ok(u) => u,
        Err(_) => {
            return respond::error_response(
                &loc.error_pages,
                Some(vars),
                &made(400, "The request URI cannot be forwarded.".into()),
            );
        }
    };

    let client = shared.client(loc.proxy_connect_timeout);
    match tokio::time::timeout(loc.proxy_read_timeout, client.request(req)).await {
        Ok(Ok(resp)) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body.boxed())
        }
        Ok(Err(e)) => {
            let what = if e.is_connect() {
                "connect() failed while connecting to upstream"
            } else {
                "upstream prematurely closed connection while reading response header from upstream"
            };
            errlog::emit(
                Severity::Error,
                format_args!(
                    "*{} {what} ({}){}, upstream: \"{uri}\"",
                    conn.id,
                    error_chain(&e),
                    LogContext(vars)
                ),
            );
            respond::error_response(
                &loc.error_pages,
                Some(vars),
                &made(502, "The upstream server could not be reached.".into()),
            )
        }
        Err(_) => {
            errlog::emit(
                Severity::Error,
                format_args!(
                    "*{} upstream timed out while reading response header from upstream{}, upstream: \"{uri}\"",
                    conn.id,
                    LogContext(vars)
                ),
            );
            respond::error_response(
                &loc.error_pages,
                Some(vars),
                &made(504, "The upstream server did not answer in time.".into()),
            )
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalize_like_nginx() {
        assert_eq!(normalize_path("/a//b/./c").as_deref(), Some("/a/b/c"));
        assert_eq!(normalize_path("/a/b/../c").as_deref(), Some("/a/c"));
        assert_eq!(normalize_path("/%70lain").as_deref(), Some("/plain"));
        assert_eq!(normalize_path("/a/").as_deref(), Some("/a/"));
        assert_eq!(normalize_path("/").as_deref(), Some("/"));
        assert_eq!(normalize_path("/.."), None);
        assert_eq!(normalize_path("/%zz"), None);
    }
}
