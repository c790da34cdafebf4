//! One request's life, in nginx's phases: [`find`] (server, realip, the
//! normalised path, the location), [`limit`] (limit_req: keys, decision,
//! delay, its log lines) and [`limit_conn`], [`content`] (`return` or the
//! upstream), [`finish`] (quota headers, compression, the access record). Everything that
//! ends a request early is an [`error::ProxyError`], mapped to its status,
//! log line and response in one place ([`error`]); [`log`] writes nginx's
//! error-log lines about a request. An upgrade request the upstream answers
//! 101 becomes a [`tunnel`], which the connection runs once its 101 is
//! written.
//!
//! Unlike nginx, `return` does not bypass the limits (the seed article's
//! pitfall).

mod content;
mod error;
mod find;
mod finish;
mod grpc;
mod limit;
mod limit_conn;
mod log;
mod next_upstream;
pub(crate) mod tunnel;

pub use error::CloseConnection;
pub use find::normalize_path;
pub use finish::{Rejected, Reply};

use self::error::{Decided, ProxyError, UNDECIDED, plain_status};
use self::finish::{compressed, counted, finish, with_added, with_quota};
use crate::accesslog::{AccessLog, Record};
use crate::body::Body;
use crate::client_body::ClientBody;
use crate::clock::Clock;
use crate::config::Config;
use crate::conn_state::Conn;
use crate::http1::Fields;
use crate::metrics::Metrics;
use crate::vars::RequestVars;
use arc_swap::ArcSwap;
use http::{Method, Response, StatusCode, Uri, Version};
use std::sync::Arc;
use tokio::time::Instant;

/// What every request reads besides its connection: the configuration
/// generation to use, the clock, the counters.
pub struct Env {
    pub(crate) config: ArcSwap<Config>,
    pub clock: Clock,
    /// Counters for `/metrics`.
    pub metrics: Metrics,
}

impl Env {
    pub fn new(config: Config) -> Env {
        Env {
            config: ArcSwap::from_pointee(config),
            clock: Clock::new(),
            metrics: Metrics::new(),
        }
    }

    /// The configuration generation new requests use.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// From now on, new requests use `config`.
    pub fn switch(&self, config: Arc<Config>) {
        self.config.store(config);
    }
}

/// A request's head as the phases read it (its body goes beside it).
pub struct RequestHead {
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    /// In place in the HTTP/1.1 gate's head, or HTTP/2's map.
    pub fields: Fields,
}

impl From<http::request::Parts> for RequestHead {
    fn from(p: http::request::Parts) -> RequestHead {
        RequestHead {
            method: p.method,
            uri: p.uri,
            version: p.version,
            fields: Fields::Map(p.headers),
        }
    }
}

/// What the phases of one request read: its environment, its connection,
/// its variables, when it arrived.
pub(crate) struct Ctx<'a> {
    pub(crate) env: &'a Env,
    pub(crate) conn: &'a Conn,
    pub(crate) vars: RequestVars<'a>,
    pub(crate) start: Instant,
    /// `$limit_conn_status`, once `limit_conn` decided.
    limit_conn_status: std::sync::OnceLock<&'static str>,
    /// Whether the request runs in an [`crate::errlog::scope`] (some
    /// server or location logs elsewhere than the top level).
    scoped_log: bool,
}

impl<'a> Ctx<'a> {
    /// The request's context in `server`: its error-log lines go to the
    /// server's `error_log` from now on.
    fn new(
        env: &'a Env,
        conn: &'a Conn,
        (vars, server, scoped_log): (RequestVars<'a>, &crate::config::ServerBlock, bool),
        start: Instant,
    ) -> Ctx<'a> {
        if scoped_log {
            crate::errlog::set_request_log(&server.error_log);
        }
        Ctx {
            env,
            conn,
            vars,
            start,
            limit_conn_status: std::sync::OnceLock::new(),
            scoped_log,
        }
    }

    /// The request's error-log lines go to `log` from now on.
    #[inline]
    fn log_to(&self, log: &Arc<crate::errlog::ErrorLog>) {
        if self.scoped_log {
            crate::errlog::set_request_log(log);
        }
    }

    /// `$limit_conn_status`: empty until `limit_conn` decided.
    pub(crate) fn limit_conn_status(&self) -> &'static str {
        self.limit_conn_status.get().copied().unwrap_or("")
    }

    /// `limit_conn` decided (once a request).
    pub(crate) fn set_limit_conn_status(&self, status: &'static str) {
        let _ = self.limit_conn_status.set(status);
    }

    /// The access-log record of the request, if `log` is configured.
    fn record(&self, log: &Option<Arc<AccessLog>>) -> Option<Record> {
        let l = log.as_ref()?;
        Some(Record::new(l.clone(), &self.vars, self.conn.id, self.start))
    }
}

/// Serve one request: find → limit_req → limit_conn → content → finish.
/// Its error-log lines go to its server's `error_log`, then its location's
/// ([`crate::errlog::scope`]).
pub(crate) async fn handle(
    env: Arc<Env>,
    conn: Arc<Conn>,
    (head, body): (RequestHead, ClientBody),
    start: Instant,
) -> Result<Reply, CloseConnection> {
    let config = env.config();
    // A scope costs every poll of the request a task-local swap: only
    // where some server or location logs elsewhere than the top level,
    // the request served again inside one, boxed (so that this future,
    // which HTTP/1.1 writes into a box in place and HTTP/2 and HTTP/3 move
    // into one per stream, is one request's, with no copy of its
    // arguments in a wrapper).
    if !config.one_error_log && !crate::errlog::in_scope() {
        drop(config);
        let again = handle(env, conn, (head, body), start);
        return Box::pin(crate::errlog::scope(again)).await;
    }
    // None after a reload removed the connection's `listen`: its last
    // requests get 503.
    let Some(address) = config.address(conn.listen) else {
        return Ok(Reply::Response(plain_status(
            StatusCode::SERVICE_UNAVAILABLE,
        )));
    };
    let server = address.server_for(
        find::host(&head),
        conn.tls.as_ref().and_then(|t| t.server_name.as_deref()),
    );
    let path = normalize_path(head.uri.path());
    let remote = find::client(&conn, server, &head);
    let user = (!config.vars.is_empty())
        .then(|| Arc::new(crate::vars::UserVars::new(config.vars.clone(), remote)));
    let at = (path.as_deref().unwrap_or(""), remote);
    let vars = find::request_vars(&conn, server, &head, at, user.as_ref());
    let cx = Ctx::new(&env, &conn, (vars, server, !config.one_error_log), start);
    let at_server = Scope::server(server);
    if conn.plain_on_https {
        let record = cx.record(&server.access_log);
        let e = ProxyError::PlainHttpOnHttps;
        return refuse(&cx, at_server, e, record, None);
    }
    let loc = match find::location(server, path.as_deref()) {
        Ok(loc) => loc,
        Err(e) => {
            // (The redirect is the location's answer: its add_header apply.)
            let at = match &e {
                ProxyError::AddSlash { add, .. } => Scope { add, ..at_server },
                _ => at_server,
            };
            return refuse(&cx, at, e, cx.record(&server.access_log), None);
        }
    };
    log::at_location(&cx, loc);
    let at = Scope::location(loc, &head);
    let path = path.as_deref().unwrap_or("");
    let mut record = cx.record(&loc.access_log);
    if find::too_early(&conn, server, &head.method) {
        return refuse(&cx, at, ProxyError::TooEarly, record, None);
    }
    if let Err(e) = find::check_body_size(loc, &head.fields) {
        return refuse(&cx, at, e, record, None);
    }
    let deadline = at.grpc.then(|| grpc::deadline(&head)).flatten();
    let limited = match limit::limit_req(&cx, loc, &mut record, deadline).await {
        Ok(limited) => limited,
        Err((e, limited)) => return limited_answer(&cx, (at, loc), e, record, &limited),
    };
    let at = Scope {
        decided: limited.decided,
        ..at
    };
    let held = match limit_conn::limit_conn(&cx, loc, &mut record) {
        Ok(held) => held,
        Err(e) => return refuse(&cx, at, e, record, None),
    };
    // nginx's access phase follows the limits' preaccess phase.
    if !crate::access::allows(&loc.access, cx.vars.remote.ip()) {
        let e = ProxyError::Forbidden;
        return refuse(&cx, at, e, record, Some(&limited));
    }
    let resp = match content(&cx, loc, (&head, body), path, &limited, &mut record).await {
        Ok(resp) => answered(&cx, (at, loc), resp, record, &limited),
        Err(e) => answer(&cx, at, e, record, Some(&limited)),
    };
    // The counts are held until the response body has been sent (or
    // dropped), as nginx releases them when the request is freed; a
    // tunnel's, for as long as it is open.
    resp.map(|r| Reply::Response(tunnel::hand_over(r, held, &conn.state, head.version)))
}

/// A content phase's response as the client gets it: the quota fields,
/// `add_header`, compression, the access record handed to its body, and
/// the gRPC call counted.
#[inline(always)]
fn answered(
    cx: &Ctx<'_>,
    (at, loc): (Scope<'_>, &crate::config::Location),
    resp: Response<Body>,
    mut record: Option<Record>,
    limited: &limit::Limited<'_>,
) -> Result<Response<Body>, CloseConnection> {
    let resp = with_quota(resp, loc, &limited.outcome);
    let resp = compressed(at.added(Ok(resp), cx), at.compress, cx, &mut record);
    let resp = finish(resp, record, limited.decided);
    counted(resp, at.grpc_calls(cx))
}

/// [`content::content`], with nginx's 499 in the access log if it is
/// dropped before its answer ([`Unanswered`]).
async fn content<'l>(
    cx: &Ctx<'_>,
    loc: &'l crate::config::Location,
    (head, body): (&'l RequestHead, ClientBody),
    path: &str,
    limited: &limit::Limited<'_>,
    record: &mut Option<Record>,
) -> Result<Response<Body>, ProxyError<'l>> {
    let pending = Unanswered {
        record,
        cx,
        answered: false,
    };
    let r = content::content(cx, loc, (head, body), path, limited, pending.record).await;
    let mut pending = pending;
    pending.answered = true;
    r
}

/// A request dropped in its content phase, before its answer: the client
/// reset its stream or closed its connection while the upstream had it.
/// nginx finalizes such a request with 499 (`NGX_HTTP_CLIENT_CLOSED_REQUEST`):
/// its access line, nothing sent, and the count in the metrics.
struct Unanswered<'r, 'a, 'b> {
    /// The request's (in place: a record is large, and moving it in and
    /// out of the guard costs every request two copies).
    record: &'r mut Option<Record>,
    cx: &'a Ctx<'b>,
    answered: bool,
}

impl Drop for Unanswered<'_, '_, '_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        if let Some(mut r) = self.record.take() {
            let took = crate::clock::since(self.cx.start);
            self.cx.env.metrics.response(499, took);
            r.status = 499;
            r.write(0);
        }
    }
}

/// Where a request is answered: the error pages, the location (once one
/// is found), its `add_header` list and upstream host, what the limits
/// decided so far.
#[derive(Clone, Copy)]
struct Scope<'a> {
    pages: &'a crate::respond::ErrorPages,
    loc: Option<&'a crate::config::Location>,
    add: &'a [crate::headers::AddHeader],
    proxy_host: &'a str,
    decided: Decided<'a>,
    /// A gRPC call answered in gRPC ([`grpc::answers`]).
    grpc: bool,
    /// How its responses are compressed (`None`: not).
    compress: Option<&'a crate::compress::Compression>,
}

impl<'a> Scope<'a> {
    /// Before a location is found: the server's pages and `add_header`.
    fn server(server: &'a crate::config::ServerBlock) -> Scope<'a> {
        Scope {
            pages: &server.error_pages,
            loc: None,
            add: &server.add_headers,
            proxy_host: "",
            decided: UNDECIDED,
            grpc: false,
            compress: server.compress.as_deref(),
        }
    }

    /// In `loc`, before its limits decided, for a request with `head`.
    fn location(loc: &'a crate::config::Location, head: &RequestHead) -> Scope<'a> {
        Scope {
            pages: &loc.error_pages,
            loc: Some(loc),
            add: &loc.headers.add,
            proxy_host: match &loc.action {
                crate::config::Action::Proxy(pp) => pp.authority.as_str(),
                crate::config::Action::Return(_) => "",
            },
            decided: UNDECIDED,
            grpc: grpc::answers(loc, head),
            compress: loc.compress.as_deref(),
        }
    }

    /// Where a `grpc_pass` location's calls are counted.
    fn grpc_calls<'c>(&self, cx: &'c Ctx) -> Option<&'c crate::metrics::grpc::GrpcCalls> {
        let grpc = self.loc.is_some_and(|l| l.is_grpc());
        grpc.then(|| cx.env.metrics.grpc_calls())
    }

    /// The response with this scope's `add_header` fields.
    fn added(
        &self,
        resp: Result<Response<Body>, CloseConnection>,
        cx: &Ctx,
    ) -> Result<Response<Body>, CloseConnection> {
        with_added(resp, self.add, cx, self.proxy_host, self.decided)
    }
}

/// The answer to a request `limit_req` refused: the flood's answer,
/// rendered ([`finish::rejected`]), when nothing configured changes it
/// (444 and 499: nothing is answered) and it is no gRPC answer; else as
/// any other.
fn limited_answer<'a>(
    cx: &Ctx,
    (at, loc): (Scope<'a>, &'a crate::config::Location),
    e: ProxyError<'a>,
    record: Option<crate::accesslog::Record>,
    limited: &limit::Limited<'a>,
) -> Result<Reply, CloseConnection> {
    match e {
        ProxyError::Limited { limit, wait_ms }
            if !matches!(loc.limit_req_status, 444 | 499)
                && !loc.error_pages.contains_key(&loc.limit_req_status)
                && loc.headers.add.is_empty()
                && !at.grpc =>
        {
            let rejection = loc.limits.rejection(limit).clone();
            let secs = error::retry_after_secs(wait_ms);
            Ok(finish::rejected(rejection, secs, record, limited.decided))
        }
        e => refuse(cx, at, e, record, Some(limited)),
    }
}

/// [`answer`], as the request's reply.
fn refuse<'a>(
    cx: &Ctx,
    at: Scope<'a>,
    e: ProxyError<'a>,
    record: Option<crate::accesslog::Record>,
    limited: Option<&limit::Limited<'a>>,
) -> Result<Reply, CloseConnection> {
    answer(cx, at, e, record, limited).map(Reply::Response)
}

/// The one place where a request that ended early is answered: the
/// error's own response (logged and counted, see [`error`]), the quota
/// headers when the limits decided it (`limited`), the scope's
/// `add_header`, then the access record.
fn answer<'a>(
    cx: &Ctx,
    at: Scope<'a>,
    e: ProxyError<'a>,
    mut record: Option<crate::accesslog::Record>,
    limited: Option<&limit::Limited<'a>>,
) -> Result<Response<Body>, CloseConnection> {
    let decided = limited.map_or(at.decided, |l| l.decided);
    let at = Scope { decided, ..at };
    let resp = e
        .respond(cx, (at.pages, at.loc), decided, at.grpc)
        .map(|r| match (limited, at.loc) {
            (Some(l), Some(loc)) => with_quota(r, loc, &l.outcome),
            _ => r,
        });
    let resp = compressed(at.added(resp, cx), at.compress, cx, &mut record);
    counted(finish(resp, record, decided), at.grpc_calls(cx))
}
