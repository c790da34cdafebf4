//! One client connection: each burst of requests is served by hyper once a
//! whole head has arrived; between bursts the connection waits with no
//! buffer but the bytes it sent, and a plain one idle for
//! [`super::io::PARK_AFTER`] leaves its task for its accept loop's
//! [`IdleSet`] (a few words, no task) until its next request. A request
//! answered 101 ends HTTP on the connection: hyper gives the socket back,
//! and it becomes a tunnel's ([`request::tunnel`]).

use super::Shared;
use super::h2;
use super::idle::{self, IdleSet};
use super::io::{Filled, TimedIo};
use super::refuse::refuse;
use super::tls;
use crate::body::Watched;
use crate::conn_state::{ClientTimeouts, Conn, ConnState, Expired, Idle};
use crate::connlimit::WorkerSlot;
use crate::errlog::{self, Severity};
use crate::metrics::Protocol;
use crate::request::{self};
use crate::upstream;
use http::Request;
use hyper::body::Incoming;
use hyper::service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::Instant;

/// The server of a connection, as its connection needs it: timeouts, name,
/// head rules.
pub(super) struct ServerSide {
    pub(super) timeouts: ClientTimeouts,
    pub(super) name: String,
    head_rules: crate::http1::HeadRules,
    /// A client may open with HTTP/2's preface (`http2` on a plain address).
    http2: bool,
}

impl ServerSide {
    /// The connection's server: the one its SNI name chose, else the
    /// address's default.
    fn of(shared: &Shared, configured: SocketAddr, sni: Option<&str>) -> ServerSide {
        let config = shared.config();
        let address = config.address(configured);
        // Prior knowledge on a plain address (with TLS, ALPN says).
        let http2 = address.is_some_and(|a| a.http2 && !a.ssl);
        let server = address.map(|a| a.server_for(None, sni));
        let Some(s) = server else {
            return ServerSide {
                timeouts: ClientTimeouts {
                    client_header: crate::config::DEFAULT_TIMEOUT,
                    keepalive: crate::config::DEFAULT_KEEPALIVE_TIMEOUT,
                    send: crate::config::DEFAULT_TIMEOUT,
                },
                name: String::new(),
                head_rules: crate::http1::HeadRules::default(),
                http2: false,
            };
        };
        ServerSide {
            timeouts: s.client_timeouts(),
            name: s.name.clone(),
            head_rules: s.head_rules,
            http2,
        }
    }
}

/// What a client connection's socket can be: plain TCP, or TLS over it.
pub(crate) trait ClientStream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static
{
    /// The socket itself, if nothing but the socket holds the connection's
    /// state (so that it can be parked in an [`IdleSet`]).
    fn into_plain(self) -> Option<tokio::net::TcpStream>;
}

impl ClientStream for tokio::net::TcpStream {
    fn into_plain(self) -> Option<tokio::net::TcpStream> {
        Some(self)
    }
}

impl ClientStream for tokio_rustls::server::TlsStream<tokio::net::TcpStream> {
    /// (rustls' session state is not parked.)
    fn into_plain(self) -> Option<tokio::net::TcpStream> {
        None
    }
}

/// How a connection's task began, and what it keeps for its whole life.
struct Start {
    /// Its `worker_connections` slot, until it closes.
    slot: WorkerSlot,
    /// Where it waits while idle, if it can be parked.
    idle: Option<Arc<IdleSet>>,
    /// It was parked, and is back with its next request (no HTTP/2
    /// preface can come now).
    resumed: bool,
    /// It was parked before it sent anything: its header is still due by
    /// the deadline set when it was accepted.
    header_until: Option<Instant>,
    /// What its PROXY protocol header named, if its address reads one.
    proxy: Option<Box<crate::proxy_protocol::Addresses>>,
}

/// One client connection of a server: on an `ssl` address its TLS
/// handshake first; then nginx's timeouts around hyper's HTTP/1.1, each
/// request handled by [`request::handle`].
pub(crate) fn serve_client(
    (shared, stopping, idle): (
        &Arc<Shared>,
        &tokio::sync::watch::Receiver<bool>,
        Option<&Arc<IdleSet>>,
    ),
    configured: SocketAddr,
    stream: tokio::net::TcpStream,
    remote: SocketAddr,
    slot: WorkerSlot,
) {
    let local = stream.local_addr().unwrap_or(configured);
    let id = shared.connections.fetch_add(1, Ordering::Relaxed) + 1;
    // On a `proxy_protocol` address, the header is due within the default
    // server's `client_header_timeout` (nginx's, before a request).
    let (ssl, header_timeout) = shared
        .config()
        .address(configured)
        .map_or((false, None), |a| {
            let timeout = a.default_server().client_header_timeout;
            (a.ssl, a.proxy_protocol.then_some(timeout))
        });
    let (mut stopping, shared) = (stopping.clone(), shared.clone());
    let idle = idle.cloned();
    // (Fresh: one clock read per wake-up of the connection: see clock::now.)
    tokio::spawn(crate::clock::Fresh::new(async move {
        shared.env.metrics.connection_opened();
        let at = (configured, local, remote, id);
        let mut start = Start {
            slot,
            idle,
            resumed: false,
            header_until: None,
            proxy: None,
        };
        let mut stream = stream;
        if let Some(timeout) = header_timeout {
            // A plain connection's request head is then due by the same
            // deadline, as in nginx.
            let deadline = crate::clock::now() + timeout;
            // Boxed: a connection without the header keeps no room for it.
            let read = read_proxy_header(&shared, &mut stream, &mut stopping, at, deadline);
            let Some(proxy) = Box::pin(read).await else {
                shared.env.metrics.connection_closed();
                return;
            };
            start.header_until = Some(deadline);
            start.proxy = proxy.map(Box::new);
        }
        if !ssl {
            serve_stream(&shared, stopping, at, stream, Tls::None, start).await;
            return;
        }
        // Boxed: a plain connection's task keeps no room for TLS.
        Box::pin(serve_tls(&shared, stopping, at, stream, start)).await;
    }));
}

/// The PROXY protocol header of a connection on a `proxy_protocol`
/// address, due by `deadline`, counted; `None`: the connection closes.
async fn read_proxy_header(
    shared: &Shared,
    stream: &mut tokio::net::TcpStream,
    stopping: &mut tokio::sync::watch::Receiver<bool>,
    (configured, _, remote, id): (SocketAddr, SocketAddr, SocketAddr, u64),
    deadline: Instant,
) -> Option<Option<crate::proxy_protocol::Addresses>> {
    let who = (id, remote, configured);
    let read = super::proxy_protocol::read(stream, deadline, stopping, who).await;
    let result = match read {
        Ok(Some(_)) => "client",
        Ok(None) => "local",
        Err(why) => why,
    };
    shared.env.metrics.proxy_header(result);
    read.ok()
}

/// A parked connection with something to read: a task again, with a new
/// state (its header is due within `client_header_timeout`, as nginx's).
pub(crate) fn resume(
    shared: &Arc<Shared>,
    stopping: &tokio::sync::watch::Receiver<bool>,
    idle: &Arc<IdleSet>,
    mut entry: idle::Entry,
) {
    if let Some(parked) = entry.h2.take() {
        return h2::resume(shared, stopping, idle, (entry.stream, entry.slot), *parked);
    }
    let addresses = (entry.stream.local_addr(), entry.stream.peer_addr());
    let stream = tokio::net::TcpStream::from_std(entry.stream);
    let (Ok(local), Ok(remote), Ok(stream)) = (addresses.0, addresses.1, stream) else {
        shared.env.metrics.connection_closed();
        return;
    };
    let at = (idle.configured, local, remote, entry.id);
    let start = Start {
        slot: entry.slot,
        idle: Some(idle.clone()),
        resumed: entry.header_until.is_none(),
        header_until: entry.header_until,
        proxy: entry.proxy,
    };
    let (stopping, shared) = (stopping.clone(), shared.clone());
    tokio::spawn(crate::clock::Fresh::new(async move {
        serve_stream(&shared, stopping, at, stream, Tls::None, start).await;
    }));
}

/// A parked connection whose deadline passed: closed, as nginx closes it
/// (with nginx's info line if it never sent a header).
pub(crate) fn expired(shared: &Shared, idle: &IdleSet, entry: idle::Entry) {
    if entry.h2.is_some() {
        return h2::closing(shared, entry);
    }
    shared.env.metrics.connection_closed();
    if entry.header_until.is_some() {
        let side = ServerSide::of(shared, idle.configured, None);
        if let Ok(remote) = entry.stream.peer_addr() {
            timed_out(entry.id, remote, &side.name, Expired::Header);
        }
    }
}

/// A connection on an `ssl` address: its handshake, then its requests.
async fn serve_tls(
    shared: &Arc<Shared>,
    stopping: tokio::sync::watch::Receiver<bool>,
    at: (SocketAddr, SocketAddr, SocketAddr, u64),
    stream: tokio::net::TcpStream,
    start: Start,
) {
    let (configured, _, remote, id) = at;
    // A TLS connection is never parked; its handshake has its own timeout.
    let start = Start {
        idle: None,
        header_until: None,
        ..start
    };
    match Box::pin(tls::accept(shared, stream, configured, (id, remote))).await {
        tls::Accepted::Tls(h) => {
            let h = *h;
            let tls = Tls::Session(h.session);
            serve_stream(shared, stopping, at, h.stream, tls, start).await;
        }
        tls::Accepted::Plain(stream) => {
            serve_stream(shared, stopping, at, stream, Tls::PlainOnHttps, start).await;
        }
        tls::Accepted::Failed => shared.env.metrics.connection_closed(),
    }
}

/// What a connection's stream is, as far as TLS goes.
enum Tls {
    /// A plain address.
    None,
    /// An `ssl` address, and the session its handshake settled.
    Session(Arc<crate::tls::Session>),
    /// An `ssl` address the client spoke plain HTTP to.
    PlainOnHttps,
}

/// A connection's requests, on its (plain or TLS) stream, then its close.
async fn serve_stream<S: ClientStream>(
    shared: &Arc<Shared>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
    (configured, local, remote, id): (SocketAddr, SocketAddr, SocketAddr, u64),
    stream: S,
    tls: Tls,
    mut start: Start,
) {
    let plain_on_https = matches!(tls, Tls::PlainOnHttps);
    let tls = match tls {
        Tls::Session(s) => Some(s),
        _ => None,
    };
    let sni = tls.as_ref().and_then(|t| t.server_name.as_deref());
    let side = ServerSide::of(shared, configured, sni);
    let header_until = start
        .header_until
        .unwrap_or_else(|| crate::clock::now() + side.timeouts.client_header);
    let state = ConnState::until(side.timeouts, header_until);
    let conn = Arc::new(Conn {
        id,
        remote,
        local,
        proxy: start.proxy.take(),
        listen: configured,
        state: state.clone(),
        tls,
        plain_on_https,
    });
    // HTTP/2: as ALPN chose on TLS; by its preface on a plain address with
    // `http2` (boxed: an HTTP/1.1 connection's task keeps no room for it).
    let mut stream = stream;
    let (h2, first) = match &conn.tls {
        Some(t) => (t.h2, Vec::new()),
        None if side.http2 && !start.resumed => {
            let deadline = header_until;
            match Box::pin(h2::opening(&mut stream, deadline, &mut stopping)).await {
                h2::Opening::H2(read) => (true, read),
                h2::Opening::Http1(read) => (false, read),
            }
        }
        None => (false, Vec::new()),
    };
    let protocol = if h2 { Protocol::Http2 } else { Protocol::Http1 };
    shared.env.metrics.speaks(&mut start.slot, protocol);
    if h2 {
        let server = (side.head_rules, side.name);
        let parking = h2::Parking::new(start.idle, start.slot);
        let h2 = h2::serve_h2(shared, conn, (stream, first), stopping, server, parking);
        Box::pin(h2).await;
        return;
    }
    let mut io = TimedIo::new(stream, state, side.head_rules);
    io.park_when_idle(!side.timeouts.keepalive.is_zero());
    io.park_silent(start.idle.is_some());
    let own = !hyper_loop();
    if own {
        io.gate = crate::http1::Gate::whole_heads(side.head_rules);
    }
    // Read while looking for the preface, not yet through the head gate.
    io.gate.input().extend_from_slice(&first);
    let can_park = start.idle.is_some();
    let (io, ended) = if own {
        super::h1::serve_requests(shared, &conn, &side, io, stopping, can_park).await
    } else {
        serve_requests(shared, &conn, &side, io, stopping, can_park).await
    };
    match ended {
        Ended::Served(served) => closed(shared, &conn, &side, io, served).await,
        Ended::Park => park(shared, &conn, io, start),
    }
}

/// Parks an idle connection in its accept loop's [`IdleSet`] (its task
/// ends here); closes it if it cannot be.
fn park<S: ClientStream>(shared: &Shared, conn: &Conn, io: TimedIo<S>, start: Start) {
    let deadline = conn.state.read_deadline();
    let stream = io.inner.into_plain().map(|s| s.into_std());
    let (Some(idle), Some((deadline, why)), Some(Ok(stream))) = (start.idle, deadline, stream)
    else {
        shared.env.metrics.connection_closed();
        return;
    };
    let entry = idle::Entry {
        stream,
        id: conn.id,
        slot: start.slot,
        header_until: (why == Expired::Header).then_some(deadline),
        h2: None,
        proxy: conn.proxy.clone(),
    };
    if idle.park(entry, deadline).is_err() {
        shared.env.metrics.connection_closed();
    }
}

/// How a connection's requests ended.
pub(super) enum Ended {
    /// It closes (with what ended it, if it failed).
    Served(Result<(), super::h1::Failed>),
    /// It is idle, with nothing held but its socket: it can be parked.
    Park,
}

/// What the service answers a request with.
type Served = Result<http::Response<Watched<Idle>>, request::CloseConnection>;
type ServedFuture = Pin<Box<dyn Future<Output = Served> + Send>>;

/// The service hyper calls for each request of the connection.
fn service(
    shared: &Arc<Shared>,
    conn: &Arc<Conn>,
) -> impl Service<
    Request<Incoming>,
    Response = http::Response<Watched<Idle>>,
    Error = request::CloseConnection,
    Future = ServedFuture,
> + Clone {
    let (shared, conn) = (shared.clone(), conn.clone());
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let state = conn.state.clone();
        state.busy_with(!hyper::body::Body::is_end_stream(req.body()));
        let (shared, conn) = (shared.clone(), conn.clone());
        // Boxed: hyper keeps room for one request's future in every
        // connection for its whole life (about 3 KB for this one); boxed,
        // an idle keep-alive connection holds a pointer instead.
        Box::pin(async move {
            let start = crate::clock::now();
            shared.env.metrics.request(Protocol::Http1);
            let (head, body) = req.into_parts();
            let body = crate::client_body::ClientBody::Hyper(body);
            let resp = request::handle(shared.env.clone(), conn, (head.into(), body), start).await;
            let mut resp = resp.map(request::Reply::into_response);
            // hyper writes only a header map (see `upstream::UpstreamFields`).
            if let Ok(r) = &mut resp {
                crate::upstream::into_header_map(r);
            }
            let status = resp
                .as_ref()
                .map_or_else(|c| c.status, |r| r.status().as_u16());
            shared
                .env
                .metrics
                .response(status, crate::clock::since(start));
            resp.map(|r| r.map(|b| Watched::new(b, Idle(state))))
        }) as ServedFuture
    })
}

/// Each burst of requests gets a hyper connection once a whole head has
/// arrived: a connection waiting for (the rest of) a head, or idle and
/// handed back by [`TimedIo::park_when_idle`], holds no buffer but the
/// bytes it sent, until its next request, a timeout or a stop.
async fn serve_requests<S: ClientStream>(
    shared: &Arc<Shared>,
    conn: &Arc<Conn>,
    side: &ServerSide,
    mut io: TimedIo<S>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
    can_park: bool,
) -> (TimedIo<S>, Ended) {
    let svc = service(shared, conn);
    let keepalive = !side.timeouts.keepalive.is_zero();
    loop {
        let next = tokio::select! {
            next = io.next_head() => next,
            _ = stopping.wait_for(|stop| *stop) => return (io, Ended::Served(Ok(()))),
        };
        match next {
            Ok(Filled::Data) => {}
            // Nothing sent of a next head for a while: parked.
            Ok(Filled::Parked) if can_park && io.gate.idle() => return (io, Ended::Park),
            _ => return (io, Ended::Served(Ok(()))),
        }
        log_dropped_headers(&mut io, conn.id, conn.remote, &side.name);
        io.start_serving();
        // Boxed, so that a waiting connection's task does not keep room
        // for it.
        let mut hyper_conn = Box::new(
            hyper::server::conn::http1::Builder::new()
                // TimedIo applies client_header_timeout (hyper's would arm a
                // timer per request, and bound keep-alive idling too).
                .timer(TokioTimer::new())
                .header_read_timeout(None)
                .keep_alive(keepalive)
                .serve_connection(TokioIo::new(io), svc.clone()),
        );
        let served = {
            let mut stop = std::pin::pin!(stopping.wait_for(|stop| *stop));
            let mut told = false;
            std::future::poll_fn(|cx| {
                if !told && stop.as_mut().poll(cx).is_ready() {
                    told = true;
                    std::pin::Pin::new(&mut *hyper_conn).graceful_shutdown();
                }
                // The connection future, not poll_without_shutdown: it
                // flushes what hyper still holds before it ends (a parked
                // TimedIo ignores the shutdown that follows).
                std::pin::Pin::new(&mut *hyper_conn).poll(cx)
            })
            .await
        };
        let parts = (*hyper_conn).into_parts();
        io = parts.io.into_inner();
        io.stop_serving();
        // A 101 was written: the connection is a tunnel's until it closes.
        if let Some(t) = request::tunnel::taken(&conn.state).filter(|_| served.is_ok()) {
            let first = io.start_tunnel(&parts.read_buf);
            let stop = stopped(&mut stopping);
            // Boxed: every connection's task would keep room for it.
            Box::pin(request::tunnel::run(
                t,
                &mut io,
                first,
                &shared.env.metrics,
                stop,
            ))
            .await;
            return (io, Ended::Served(Ok(())));
        }
        if served.is_err() || !io.take_parked() {
            return (io, Ended::Served(served.map_err(|e| e.into())));
        }
        // (An empty read_buf still holds hyper's whole read buffer.)
        if !parts.read_buf.is_empty() {
            io.unread(&parts.read_buf);
        } else if can_park && io.gate.idle() {
            return (io, Ended::Park);
        }
    }
}

/// Whether HTTP/1.1 is served by hyper's server rather than sluice's own
/// loop ([`super::h1`]): only while both exist, for the differential test
/// that holds them to the same bytes (`SLUICE_HTTP1_HYPER=1`).
fn hyper_loop() -> bool {
    static HYPER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HYPER.get_or_init(|| std::env::var_os("SLUICE_HTTP1_HYPER").is_some_and(|v| v == "1"))
}

/// A graceful stop's deadline: the accept loop keeps its stop signal until
/// `shutdown_timeout` has passed (or every connection closed), so the
/// signal going away is the deadline.
pub(super) async fn stopped(stopping: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
    while stopping.changed().await.is_ok() {}
}

/// The end of a connection (counted closed): a refused head is answered; an upstream body
/// that broke off, or a timeout, is logged as nginx logs it.
async fn closed<S: ClientStream>(
    shared: &Arc<Shared>,
    conn: &Conn,
    side: &ServerSide,
    mut io: TimedIo<S>,
    served: Result<(), super::h1::Failed>,
) {
    let (id, remote, server_name) = (conn.id, conn.remote, &side.name);
    if let Some(refusal) = io.take_refusal() {
        let (server, tables) = {
            let config = shared.config();
            (config.server_at(conn.listen).cloned(), config.vars.clone())
        };
        shared.env.metrics.request(Protocol::Http1);
        shared.env.metrics.response(refusal.status, Duration::ZERO);
        // Boxed: every waiting connection's task would keep room for it.
        Box::pin(refuse(
            io,
            &refusal,
            server.as_deref(),
            (conn, server_name),
            &tables,
            side.timeouts.send,
        ))
        .await;
        shared.env.metrics.connection_closed();
        return;
    }
    drop(io);
    shared.env.metrics.connection_closed();
    // An upstream body that broke off ended the client connection.
    if let Some(f) = served
        .as_ref()
        .err()
        .and_then(|e| upstream_body_failure(&**e))
    {
        errlog::emit(
            Severity::Error,
            format_args!("*{id} {f}, client: {}, server: {server_name}", remote.ip()),
        );
        return;
    }
    if let Some(why) = conn.state.expired() {
        timed_out(id, remote, server_name, why);
    }
}

/// nginx's info line for a client that timed out (none for keep-alive).
fn timed_out(id: u64, remote: SocketAddr, server_name: &str, why: Expired) {
    let what = match why {
        Expired::Header => "while reading client request headers",
        Expired::Send => "while sending response to client",
        Expired::Idle => return,
    };
    errlog::emit(
        Severity::Info,
        format_args!(
            "*{id} client timed out (110: Connection timed out) {what}, client: {}, server: {server_name}",
            remote.ip()
        ),
    );
}

/// nginx's info line for each header field a head dropped as invalid.
pub(crate) fn log_dropped_headers<S>(
    io: &mut TimedIo<S>,
    id: u64,
    remote: SocketAddr,
    server: &str,
) {
    for line in io.take_dropped() {
        errlog::emit(
            Severity::Info,
            format_args!(
                "*{id} client sent invalid header line: \"{}\" while reading client request headers, client: {}, server: {server}",
                String::from_utf8_lossy(&line),
                remote.ip()
            ),
        );
    }
}

/// The upstream body failure behind a client connection's error, if that
/// was what ended it.
pub(crate) fn upstream_body_failure<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e upstream::BodyFailure> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(f) = err.downcast_ref::<upstream::BodyFailure>() {
            return Some(f);
        }
        cur = err.source();
    }
    None
}
