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

use crate::accesslog::{AccessLog, LoggedBody, Record};
use crate::client_io::{
    ConnState, Expired, Filled, Idle, LimitedBody, TimedIo, Timeouts, UntilEnd,
};
use crate::config::{LoadError, Spec};
use crate::connlimit::{self, Held, WorkerSlot};
use crate::errlog::{self, Excess, Severity};
use crate::limiter::{self, Outcome};
use crate::metrics::{Metrics, UpstreamError};
use crate::respond::{self, Body, Made};
use crate::config::{Action, CompileError, Location, Config, Server};
use crate::upstream;
use crate::vars::RequestVars;
use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Uri, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

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
        self.ms_at(tokio::time::Instant::now())
    }

    /// The limiter's milliseconds at `t` (a request's arrival: one clock
    /// read serves the limits, the access log and the latency metric).
    pub fn ms_at(&self, t: tokio::time::Instant) -> u64 {
        Self::BASE + t.saturating_duration_since(self.start).as_millis() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// State shared by every connection: the current configuration and the
/// upstream connection pools.
pub struct Shared {
    config: ArcSwap<Config>,
    clock: Clock,
    /// The worker threads serving client connections (see [`Workers`]).
    workers: Workers,
    connections: AtomicU64,
    /// Counters for `/metrics`.
    pub metrics: Metrics,
    /// Set once a stop began: `/healthz` answers 503.
    draining: AtomicBool,
}

impl Shared {
    pub fn new(config: Config) -> Arc<Shared> {
        Arc::new(Shared {
            config: ArcSwap::from_pointee(config),
            clock: Clock::new(),
            workers: Workers::start(),
            connections: AtomicU64::new(0),
            metrics: Metrics::new(),
            draining: AtomicBool::new(false),
        })
    }

    /// The configuration generation new requests use.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }
}

/// Thread-per-core serving: one single-threaded tokio runtime per CPU, each
/// accepting on its own copy of every listening socket and running the
/// connections it accepted to the end, upstream pool included. Profiles of
/// a work-stealing runtime showed most time in the kernel waking threads
/// and switching between them; here a request never changes thread.
struct Workers {
    handles: Vec<tokio::runtime::Handle>,
}

impl Workers {
    fn start() -> Workers {
        let n = std::env::var("SLUICE_WORKERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let handles = (0..n)
            .map(|i| {
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::Builder::new()
                    .name(format!("sluice-worker-{i}"))
                    .spawn(move || {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .on_thread_park(crate::batch::flush)
                            .build()
                            .expect("a worker runtime");
                        let _ = tx.send(rt.handle().clone());
                        // Runs until the process exits.
                        rt.block_on(async {
                            crate::batch::on_this_thread();
                            std::future::pending::<()>().await
                        });
                    })
                    .expect("a worker thread");
                rx.recv().expect("the worker's runtime handle")
            })
            .collect();
        Workers { handles }
    }

    /// Write every worker's batched log lines (see [`crate::batch`]) now.
    async fn flush_logs(&self) {
        for h in &self.handles {
            let _ = h.spawn(async { crate::batch::flush() }).await;
        }
    }
}

/// What a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A `[[servers]]` block.
    Proxy,
    /// `[admin]`: `/metrics` and `/healthz`.
    Admin,
}

/// A bound listener and, once serving, its accept loop.
struct Listener {
    kind: Kind,
    /// The `listen` address as configured (servers are found by it).
    configured: SocketAddr,
    local: SocketAddr,
    state: ListenerState,
}

enum ListenerState {
    Bound(std::net::TcpListener),
    /// Accepting, one loop per worker; send the drain deadline to stop.
    Accepting {
        stops: Vec<oneshot::Sender<StopAccepting>>,
        tasks: Vec<tokio::task::JoinHandle<()>>,
    },
    Stopped,
}

impl Listener {
    async fn bind(kind: Kind, addr: SocketAddr) -> std::io::Result<Listener> {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("bind() to {addr} failed ({e})")))?;
        Ok(Listener {
            kind,
            configured: addr,
            local: l.local_addr()?,
            state: ListenerState::Bound(l.into_std()?),
        })
    }

    /// Start accepting: for a server, on every worker (each with its own
    /// copy of the socket); the admin listener on the current runtime.
    fn start(&mut self, shared: &Arc<Shared>) {
        let ListenerState::Bound(l) = std::mem::replace(&mut self.state, ListenerState::Stopped)
        else {
            return;
        };
        let here = [tokio::runtime::Handle::current()];
        let runtimes: &[tokio::runtime::Handle] = match self.kind {
            Kind::Proxy => &shared.workers.handles,
            Kind::Admin => &here,
        };
        let (mut stops, mut tasks) = (Vec::new(), Vec::new());
        for rt in runtimes {
            let copy = match l.try_clone() {
                Ok(c) => c,
                Err(e) => {
                    errlog::emit(
                        Severity::Alert,
                        format_args!("dup() of a listening socket failed ({e})"),
                    );
                    continue;
                }
            };
            let (stop, stopped) = oneshot::channel();
            let (shared, kind, configured) = (shared.clone(), self.kind, self.configured);
            tasks.push(rt.spawn(async move {
                match TcpListener::from_std(copy) {
                    Ok(l) => accept_loop(shared, kind, configured, l, stopped).await,
                    Err(e) => errlog::emit(Severity::Alert, format_args!("listen() failed ({e})")),
                }
            }));
            stops.push(stop);
        }
        self.state = ListenerState::Accepting { stops, tasks };
    }

    /// Stop accepting, and return once every copy of the socket is closed
    /// (a new connection is then refused); open connections finish their
    /// requests until `deadline`. Returns the accept loops, done when they
    /// have.
    async fn stop(&mut self, deadline: Instant) -> Vec<tokio::task::JoinHandle<()>> {
        match std::mem::replace(&mut self.state, ListenerState::Stopped) {
            ListenerState::Accepting { stops, tasks } => {
                let mut closed = Vec::new();
                for stop in stops {
                    let (tx, rx) = oneshot::channel();
                    if stop
                        .send(StopAccepting {
                            deadline,
                            closed: tx,
                        })
                        .is_ok()
                    {
                        closed.push(rx);
                    }
                }
                for c in closed {
                    let _ = c.await;
                }
                tasks
            }
            _ => Vec::new(),
        }
    }
}

/// What the running proxy can be asked to do (by signals, `sluice reload`,
/// the file watcher).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Read the configuration again and switch to it if it is valid.
    Reload,
    /// Reopen access-log files (after rotation).
    Reopen,
    /// Stop accepting, let in-flight requests finish, exit.
    Stop,
}

/// Why a reload did not happen; the previous configuration stays.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Load(#[from] LoadError),
    #[error("{0}")]
    Build(#[from] CompileError),
    #[error("{0}")]
    Bind(#[from] std::io::Error),
}

/// Listeners bound for every `[[servers]]` (and `[admin]`), ready to serve.
pub struct Proxy {
    shared: Arc<Shared>,
    listeners: Vec<Listener>,
}

impl Proxy {
    /// Bind every server's `listen` address and the admin listener. Fails
    /// before serving anything if one cannot be bound.
    pub async fn bind(runtime: Config) -> std::io::Result<Proxy> {
        let mut listeners = Vec::new();
        for (kind, addr) in wanted(&runtime) {
            listeners.push(Listener::bind(kind, addr).await?);
        }
        Ok(Proxy {
            shared: Shared::new(runtime),
            listeners,
        })
    }

    /// The bound addresses of the servers, in server order (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter(|l| l.kind == Kind::Proxy)
            .map(|l| l.local)
            .collect()
    }

    /// The bound address of `[admin]`, if configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|l| l.kind == Kind::Admin)
            .map(|l| l.local)
    }

    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Serve until `shutdown` completes, then stop gracefully (see
    /// [`Proxy::stop`]). No reloads: see [`Proxy::run`].
    pub async fn serve(mut self, shutdown: impl Future<Output = ()>) {
        self.start_all();
        shutdown.await;
        self.stop().await;
    }

    /// Serve and obey `commands` until [`Command::Stop`] (or the channel
    /// closes); `load` reads the configuration for [`Command::Reload`].
    pub async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut load: impl FnMut() -> Result<Spec, LoadError>,
    ) {
        self.start_all();
        while let Some(cmd) = commands.recv().await {
            match cmd {
                Command::Reload => {
                    let result = match load() {
                        Ok(spec) => self.reload(spec).await,
                        Err(e) => Err(e.into()),
                    };
                    self.shared.metrics.reload(result.is_ok());
                    if let Err(e) = result {
                        log_reload_error(&e);
                    }
                }
                Command::Reopen => {
                    errlog::emit(Severity::Notice, format_args!("reopening logs"));
                    if let Err(e) = self.shared.config().sinks.reopen_all() {
                        errlog::emit(Severity::Alert, format_args!("reopen() failed ({e})"));
                    }
                }
                Command::Stop => break,
            }
        }
        self.stop().await;
    }

    fn start_all(&mut self) {
        for l in &mut self.listeners {
            l.start(&self.shared);
        }
    }

    /// Switch to `spec`, as nginx's reload: it is compiled against the
    /// running configuration (zones with the same name, key and size keep
    /// their states), new `listen` addresses are bound, and only then is the
    /// new configuration swapped in, at once for all new requests. Requests
    /// in flight finish on the configuration they started with. Listeners no
    /// longer configured stop accepting; their open connections finish
    /// their requests, within `shutdown_timeout`. On any error nothing
    /// changes.
    pub async fn reload(&mut self, spec: Spec) -> Result<(), ReloadError> {
        let old = self.shared.config();
        let new = Config::compile(spec, Some(&old))?;
        let want = wanted(&new);
        let mut added = Vec::new();
        for &(kind, addr) in &want {
            if !self
                .listeners
                .iter()
                .any(|l| l.kind == kind && l.configured == addr)
            {
                // Dropping `added` on error closes what was bound so far.
                added.push(Listener::bind(kind, addr).await?);
            }
        }
        let kept_zones: Vec<&str> = new
            .zones
            .iter()
            .filter(|z| {
                old.zones
                    .iter()
                    .any(|o| Arc::ptr_eq(&o.limiter.store, &z.limiter.store))
            })
            .map(|z| z.name())
            .collect();
        let summary = format!(
            "reconfigured: {} zone(s), {} kept with their state{}{}",
            new.zones.len(),
            kept_zones.len(),
            if kept_zones.is_empty() { "" } else { ": " },
            kept_zones.join(", ")
        );
        let drain = Instant::now() + new.shutdown_timeout();
        errlog::set_level(new.ops.error_log_level.unwrap_or(Severity::Info));
        self.shared.config.store(Arc::new(new));

        for mut l in added {
            l.start(&self.shared);
            errlog::emit(Severity::Notice, format_args!("listening on {}", l.local));
            self.listeners.push(l);
        }
        let mut i = 0;
        while i < self.listeners.len() {
            let l = &self.listeners[i];
            if want.contains(&(l.kind, l.configured)) {
                i += 1;
                continue;
            }
            let mut l = self.listeners.remove(i);
            errlog::emit(
                Severity::Notice,
                format_args!("stopped listening on {}", l.local),
            );
            // Its connections drain in the background.
            drop(l.stop(drain).await);
        }
        errlog::emit(Severity::Notice, format_args!("{summary}"));
        Ok(())
    }

    /// Stop gracefully: stop accepting at once; in-flight requests, delayed
    /// ones included, finish within `shutdown_timeout`, then idle
    /// connections are closed; the admin listener answers (`/healthz` 503)
    /// until then.
    pub async fn stop(mut self) {
        let timeout = self.shared.config().shutdown_timeout();
        let deadline = Instant::now() + timeout;
        self.shared.draining.store(true, Ordering::Relaxed);
        errlog::emit(
            Severity::Notice,
            format_args!(
                "gracefully shutting down ({} connection(s) open, shutdown_timeout {}ms)",
                self.shared.metrics.connections(),
                timeout.as_millis()
            ),
        );
        let mut proxies = Vec::new();
        for l in self.listeners.iter_mut().filter(|l| l.kind == Kind::Proxy) {
            proxies.extend(l.stop(deadline).await);
        }
        for t in proxies {
            let _ = t.await;
        }
        let left = self.shared.metrics.connections();
        if left > 0 {
            errlog::emit(
                Severity::Warn,
                format_args!(
                    "{left} connection(s) still open after shutdown_timeout, closing them"
                ),
            );
        }
        for l in &mut self.listeners {
            for t in l.stop(Instant::now()).await {
                let _ = t.await;
            }
        }
        // The last requests' log lines, before the process exits.
        self.shared.workers.flush_logs().await;
    }
}

/// The listeners a configuration asks for.
fn wanted(rt: &Config) -> Vec<(Kind, SocketAddr)> {
    rt.servers
        .iter()
        .map(|s| (Kind::Proxy, s.listen))
        .chain(rt.ops.admin.map(|a| (Kind::Admin, a)))
        .collect()
}

/// nginx logs a failed reload's reasons as `[emerg]` and keeps running.
fn log_reload_error(e: &ReloadError) {
    match e {
        ReloadError::Load(LoadError::Invalid(errors)) => {
            for e in &errors.0 {
                errlog::emit(Severity::Emerg, format_args!("{e}"));
            }
        }
        e => errlog::emit(Severity::Emerg, format_args!("{e}")),
    }
    errlog::emit(
        Severity::Error,
        format_args!("reload failed, still running the previous configuration"),
    );
}

async fn accept_loop(
    shared: Arc<Shared>,
    kind: Kind,
    configured: SocketAddr,
    listener: TcpListener,
    mut stop: oneshot::Receiver<StopAccepting>,
) {
    let graceful = GracefulShutdown::new();
    // Client connections watch this to stop (they are not hyper-util's
    // graceful connections: they leave hyper while idle).
    let (stop_clients, stopping) = tokio::sync::watch::channel(false);
    let (deadline, closed) = loop {
        let (stream, remote) = tokio::select! {
            d = &mut stop => break match d {
                Ok(s) => (s.deadline, Some(s.closed)),
                Err(_) => (Instant::now(), None),
            },
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    errlog::emit(Severity::Alert, format_args!("accept() failed ({e})"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let slot = match kind {
            Kind::Proxy => match worker_slot(&shared) {
                Some(slot) => Some(slot),
                // Closed at once: nothing was allocated for it.
                None => continue,
            },
            Kind::Admin => None,
        };
        let _ = stream.set_nodelay(true);
        match (kind, slot) {
            (Kind::Proxy, Some(slot)) => {
                serve_client(&shared, &stopping, configured, stream, remote, slot)
            }
            (Kind::Proxy, None) => {}
            (Kind::Admin, _) => serve_admin(&shared, &graceful, stream),
        }
    };
    drop(listener);
    if let Some(closed) = closed {
        let _ = closed.send(());
    }
    let _ = stop_clients.send(true);
    drop(stopping);
    let _ = tokio::time::timeout_at(deadline, async {
        graceful.shutdown().await;
        // Every client connection's receiver is gone: all closed.
        stop_clients.closed().await;
    })
    .await;
}

/// `worker_connections`: a slot for one more client connection on this
/// worker thread, or `None` when it has them all open (nginx's alert, at
/// most once a second per worker; every refusal counted).
fn worker_slot(shared: &Shared) -> Option<WorkerSlot> {
    let max = shared.config.load().worker_connections();
    match WorkerSlot::take(max, shared.clock.now_ms() / 1000) {
        Ok(slot) => Some(slot),
        Err(refused) => {
            shared.metrics.connection_refused();
            if refused.alert {
                errlog::emit(
                    Severity::Alert,
                    format_args!("{max} worker_connections are not enough"),
                );
            }
            None
        }
    }
}

/// Tells an accept loop to close its socket (and say so), then drain its
/// connections until `deadline`.
struct StopAccepting {
    deadline: Instant,
    closed: oneshot::Sender<()>,
}

/// One client connection of a server: nginx's timeouts around hyper's
/// HTTP/1.1, the request handled by [`handle`].
fn serve_client(
    shared: &Arc<Shared>,
    stopping: &tokio::sync::watch::Receiver<bool>,
    configured: SocketAddr,
    stream: tokio::net::TcpStream,
    remote: SocketAddr,
    slot: WorkerSlot,
) {
    let local = stream.local_addr().unwrap_or(configured);
    let id = shared.connections.fetch_add(1, Ordering::Relaxed) + 1;
    let (timeouts, server_name, head_rules) = shared
        .config()
        .servers
        .iter()
        .find(|s| s.listen == configured)
        .map(|s| {
            (
                Timeouts {
                    client_header: s.client_header_timeout,
                    keepalive: s.keepalive_timeout,
                    send: s.send_timeout,
                },
                s.name.clone(),
                s.head_rules,
            )
        })
        .unwrap_or((
            Timeouts {
                client_header: crate::config::DEFAULT_TIMEOUT,
                keepalive: crate::config::DEFAULT_KEEPALIVE_TIMEOUT,
                send: crate::config::DEFAULT_TIMEOUT,
            },
            String::new(),
            crate::http1::HeadRules::default(),
        ));
    let state = ConnState::new(timeouts);
    let conn = Arc::new(Conn {
        id,
        remote,
        local,
        listen: configured,
        state: state.clone(),
    });
    let mut io = TimedIo::new(stream, state.clone(), head_rules);
    let keepalive = !timeouts.keepalive.is_zero();
    io.park_when_idle(keepalive);
    let svc = {
        let (shared, state) = (shared.clone(), state.clone());
        hyper::service::service_fn(move |req: Request<Incoming>| {
            state.busy_with(!hyper::body::Body::is_end_stream(req.body()));
            let (shared, conn, state) = (shared.clone(), conn.clone(), state.clone());
            // Boxed: hyper keeps room for one request's future in every
            // connection for its whole life (about 3 KB for this one); boxed,
            // an idle keep-alive connection holds a pointer instead.
            Box::pin(async move {
                let start = Instant::now();
                let resp = handle(shared.clone(), conn, req, start).await;
                let status = resp
                    .as_ref()
                    .map_or_else(|c| c.status, |r| r.status().as_u16());
                shared.metrics.response(status, start.elapsed());
                resp.map(|r| r.map(|b| UntilEnd::new(b, Idle(state))))
            })
        })
    };
    let mut stopping = stopping.clone();
    let shared = shared.clone();
    tokio::spawn(async move {
        // Counted against worker_connections until this task ends.
        let _slot = slot;
        shared.metrics.connection_opened();
        // Each burst of requests gets a hyper connection once a whole head
        // has arrived: a connection waiting for (the rest of) a head, or
        // idle and handed back by TimedIo::park_when_idle, holds no buffer
        // but the bytes it sent, until its next request, a timeout or a stop.
        let served = loop {
            let next = tokio::select! {
                next = io.next_head() => next,
                _ = stopping.wait_for(|stop| *stop) => break Ok(()),
            };
            if !matches!(next, Ok(Filled::Data)) {
                break Ok(());
            }
            log_dropped_headers(&mut io, id, remote, &server_name);
            io.enter_hyper();
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
            io.leave_hyper();
            if served.is_err() || !io.take_parked() {
                break served;
            }
            // (An empty read_buf still holds hyper's whole read buffer.)
            if !parts.read_buf.is_empty() {
                io.unread(&parts.read_buf);
            }
        };
        if let Some(refusal) = io.take_refusal() {
            let server = shared
                .config()
                .servers
                .iter()
                .find(|s| s.listen == configured)
                .cloned();
            shared.metrics.response(refusal.status, Duration::ZERO);
            // Boxed: every waiting connection's task would keep room for it.
            Box::pin(refuse(
                io,
                &refusal,
                server.as_deref(),
                (id, remote, local, &server_name),
                timeouts.send,
            ))
            .await;
            shared.metrics.connection_closed();
            return;
        }
        drop(io);
        shared.metrics.connection_closed();
        // An upstream body that broke off ended the client connection.
        if let Some(f) = served.as_ref().err().and_then(upstream_body_failure) {
            errlog::emit(
                Severity::Error,
                format_args!("*{id} {f}, client: {}, server: {server_name}", remote.ip()),
            );
            return;
        }
        let what = match state.expired() {
            Some(Expired::Header) => "while reading client request headers",
            Some(Expired::Send) => "while sending response to client",
            Some(Expired::Idle) | None => return,
        };
        errlog::emit(
            Severity::Info,
            format_args!(
                "*{id} client timed out (110: Connection timed out) {what}, client: {}, server: {server_name}",
                remote.ip()
            ),
        );
    });
}

/// nginx's info line for each header field a head dropped as invalid.
fn log_dropped_headers(
    io: &mut TimedIo<tokio::net::TcpStream>,
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

/// Answers a refused head as nginx does: its status (the server's error
/// page or the problem body), `Connection: close`, an info line; then the
/// connection is closed the way nginx's lingering close does it (the write
/// side first, the rest of what the client sends read and dropped for a
/// while), so that the client reads the answer instead of a reset.
async fn refuse(
    mut io: TimedIo<tokio::net::TcpStream>,
    refusal: &crate::http1::Refusal,
    srv: Option<&Server>,
    (id, remote, local, server): (u64, SocketAddr, SocketAddr, &str),
    send_timeout: Duration,
) {
    let start = Instant::now();
    errlog::emit_with(Severity::Info, |out| {
        out.push(b'*');
        errlog::push_u64(out, id);
        out.push(b' ');
        errlog::push_fmt(out, format_args!("{refusal}"));
        out.extend_from_slice(if refusal.in_headers {
            b" while reading client request headers"
        } else {
            b" while reading client request line"
        });
        out.extend_from_slice(b", client: ");
        errlog::push_ip(out, remote.ip());
        out.extend_from_slice(b", server: ");
        out.extend_from_slice(server.as_bytes());
        if let Some(line) = &refusal.request_line {
            out.extend_from_slice(b", request: \"");
            out.extend_from_slice(line);
            out.push(b'"');
        }
    });
    let no_pages = crate::respond::ErrorPages::default();
    let pages = srv.map_or(&no_pages, |s| &*s.error_pages);
    let resp = respond::error_response(pages, None, &made(refusal.status, refusal.to_string()));
    let (bytes, body_len) = Box::pin(serialize(resp)).await;
    if let Some(log) = srv.and_then(|s| s.access_log.as_ref()) {
        access_refused(log, refusal, (id, remote, local, server), start, body_len);
    }
    let stream = io.get_mut();
    let _ = tokio::time::timeout(send_timeout, async {
        use tokio::io::AsyncWriteExt;
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    })
    .await;
    Box::pin(linger(stream)).await;
}

/// The access-log line of a refused head, as nginx writes one: `$request`
/// is the line as sent (nothing of it could be trusted further),
/// `$request_method` its first word if that is a token.
fn access_refused(
    log: &Arc<AccessLog>,
    refusal: &crate::http1::Refusal,
    (id, remote, local, server): (u64, SocketAddr, SocketAddr, &str),
    start: Instant,
    body_len: u64,
) {
    let line = refusal.request_line.as_deref().unwrap_or(b"");
    let method = line
        .split(|&b| b == b' ')
        .next()
        .and_then(|m| http::Method::from_bytes(m).ok())
        .unwrap_or_else(|| http::Method::from_bytes(b"-").unwrap_or_default());
    let (uri, headers) = (Uri::from_static("/"), HeaderMap::new());
    let vars = RequestVars {
        remote,
        local,
        server_name: server,
        method: &method,
        uri: &uri,
        version: http::Version::HTTP_11,
        path: "",
        headers: &headers,
        raw_request_line: Some(line),
    };
    let mut r = Record::new(log.clone(), &vars, id, start);
    r.status = refusal.status;
    r.write(body_len);
}

/// nginx's lingering close (`lingering_time` 30 s, `lingering_timeout` 5 s):
/// read and drop what the client still sends, until it stops or closes.
async fn linger(stream: &mut tokio::net::TcpStream) {
    use tokio::io::AsyncReadExt;
    let end = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 4096];
    loop {
        let wait = Duration::from_secs(5).min(end.saturating_duration_since(Instant::now()));
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => continue,
            _ => return,
        }
    }
}

/// A response sluice made, as HTTP/1.1 bytes that close the connection,
/// and the length of its body.
async fn serialize(resp: Response<Body>) -> (Vec<u8>, u64) {
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(256 + body.len());
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(parts.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(parts.status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    out.extend_from_slice(
        crate::errlog::Timestamp::coarse_now()
            .http_date()
            .as_bytes(),
    );
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if name == header::CONTENT_LENGTH || name == header::CONNECTION {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Content-Length: ");
    errlog::push_u64(&mut out, body.len() as u64);
    out.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    out.extend_from_slice(&body);
    (out, body.len() as u64)
}

/// The upstream body failure behind a client connection's error, if that
/// was what ended it.
fn upstream_body_failure(e: &hyper::Error) -> Option<&upstream::BodyFailure> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(f) = err.downcast_ref::<upstream::BodyFailure>() {
            return Some(f);
        }
        cur = err.source();
    }
    None
}

/// One connection to the admin listener.
fn serve_admin(shared: &Arc<Shared>, graceful: &GracefulShutdown, stream: tokio::net::TcpStream) {
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
fn admin(shared: &Shared, req: &Request<Incoming>) -> Response<Body> {
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
            shared.metrics.render(&shared.config()),
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

/// One client connection.
struct Conn {
    id: u64,
    remote: SocketAddr,
    local: SocketAddr,
    /// The configured `listen` of its server.
    listen: SocketAddr,
    /// Its phase and what its reader saw.
    state: Arc<ConnState>,
}

/// Returned by the service to close the connection without a response:
/// nginx's 444, or a client that went away mid-request (logged 499).
#[derive(Debug)]
struct CloseConnection {
    /// The status the logs and metrics record.
    status: u16,
}

impl CloseConnection {
    const NO_RESPONSE: CloseConnection = CloseConnection { status: 444 };
}

impl std::fmt::Display for CloseConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "connection closed without a response ({})", self.status)
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

/// Appends `, client: …, server: …, request: "…", host: "…"`: nginx's
/// context of a line about a request.
fn push_context(out: &mut Vec<u8>, r: &RequestVars) {
    push_context_upstream(out, r, None)
}

/// [`push_context`] with nginx's `upstream: "…"` (after the request, before
/// the host).
fn push_context_upstream(out: &mut Vec<u8>, r: &RequestVars, upstream: Option<(&str, &str)>) {
    out.extend_from_slice(b", client: ");
    errlog::push_ip(out, r.remote.ip());
    out.extend_from_slice(b", server: ");
    out.extend_from_slice(r.server_name.as_bytes());
    out.extend_from_slice(b", request: \"");
    out.extend_from_slice(r.method.as_str().as_bytes());
    out.push(b' ');
    let target = r.uri.path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(target.as_bytes());
    out.push(b' ');
    out.extend_from_slice(crate::vars::version_str(r.version).as_bytes());
    out.push(b'"');
    if let Some((authority, target)) = upstream {
        out.extend_from_slice(b", upstream: \"http://");
        out.extend_from_slice(authority.as_bytes());
        out.extend_from_slice(target.as_bytes());
        out.push(b'"');
    }
    if let Some(h) = r.headers.get(header::HOST) {
        out.extend_from_slice(b", host: \"");
        out.extend_from_slice(h.as_bytes());
        out.push(b'"');
    }
}

/// `*CONN message, client: …`: the whole line about a request, `msg`
/// appending the message.
fn push_req_line(
    out: &mut Vec<u8>,
    conn: &Conn,
    vars: &RequestVars,
    msg: impl FnOnce(&mut Vec<u8>),
) {
    out.push(b'*');
    errlog::push_u64(out, conn.id);
    out.push(b' ');
    msg(out);
    push_context(out, vars);
}

/// An error about the upstream of a request, with nginx's `upstream:` field.
fn log_upstream(
    conn: &Conn,
    vars: &RequestVars,
    upstream: (&str, &str),
    msg: std::fmt::Arguments<'_>,
) {
    errlog::emit_with(Severity::Error, |out| {
        out.push(b'*');
        errlog::push_u64(out, conn.id);
        out.push(b' ');
        errlog::push_fmt(out, msg);
        push_context_upstream(out, vars, Some(upstream));
    });
}

/// One error-log line about a request: `*CONN message, client: …`.
fn log_req(sev: Severity, conn: &Conn, vars: &RequestVars, msg: std::fmt::Arguments<'_>) {
    errlog::emit_with(sev, |out| {
        push_req_line(out, conn, vars, |out| errlog::push_fmt(out, msg))
    });
}

/// Logs nginx's "client prematurely closed connection" (and a 499 in the
/// access log) if a delayed request is dropped before its delay ends: the
/// client went away. The slot stays charged, as in nginx.
struct DelayGuard<'a> {
    armed: bool,
    line: Vec<u8>,
    record: &'a mut Option<Record>,
    /// The 499 is counted in `sluice_http_responses` too.
    metrics: &'a Metrics,
    start: Instant,
}

impl Drop for DelayGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            errlog::emit_with(Severity::Info, |out| out.extend_from_slice(&self.line));
            self.metrics.response(499, self.start.elapsed());
            if let Some(r) = self.record.as_mut() {
                r.status = 499;
                r.write(0);
            }
        }
    }
}

/// The request's access-log record gets the response's status and writes
/// itself when the body is done.
fn finish(
    resp: Result<Response<Body>, CloseConnection>,
    record: Option<Record>,
    limit_req_status: &'static str,
    zone: &str,
) -> Result<Response<Body>, CloseConnection> {
    let Some(mut r) = record else { return resp };
    r.limit_req_status = limit_req_status;
    r.zone = zone.to_string();
    match resp {
        Ok(resp) => {
            r.status = resp.status().as_u16();
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

async fn handle(
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    req: Request<Incoming>,
    start: Instant,
) -> Result<Response<Body>, CloseConnection> {
    let rt = shared.config();
    let Some(server) = rt.servers.iter().find(|s| s.listen == conn.listen) else {
        return Ok(plain_status(StatusCode::SERVICE_UNAVAILABLE));
    };
    let (parts, body) = req.into_parts();
    let path = normalize_path(parts.uri.path());
    let remote = match &server.real_ip {
        Some(r) => SocketAddr::new(
            r.resolve(conn.remote.ip(), &parts.headers),
            conn.remote.port(),
        ),
        None => conn.remote,
    };
    let vars = request_vars(remote, &conn, server, &parts, path.as_deref().unwrap_or(""));
    let record = |log: &Option<Arc<AccessLog>>| {
        log.as_ref()
            .map(|l| Record::new(l.clone(), &vars, conn.id, start))
    };
    let Some(path) = path.as_deref() else {
        let resp = respond::error_response(
            &server.error_pages,
            Some(&vars),
            &made(400, "The request path is invalid.".into()),
        );
        return finish(Ok(resp), record(&server.access_log), "-", "");
    };
    let Some(loc) = server.locations.find(path) else {
        let resp = respond::error_response(
            &server.error_pages,
            Some(&vars),
            &made(404, format!("No location matches \"{path}\".")),
        );
        return finish(Ok(resp), record(&server.access_log), "-", "");
    };
    let mut record = record(&loc.access_log);
    if let Some(resp) = body_too_large(loc, &conn, &vars, &parts.headers) {
        return finish(Ok(resp), record, "-", "");
    }

    // Limits (nginx's preaccess phase).
    let now = shared.clock.ms_at(start);
    thread_local! {
        static KEY_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let outcome = limiter::decide(&loc.limits, now, |i| {
        KEY_BUF.with_borrow_mut(|key_buf| {
            let zone = &loc.zones[i];
            let ip = zone.client(vars.remote.ip())?;
            key_buf.clear();
            if ip == vars.remote.ip() {
                zone.key.eval(&vars, None, key_buf);
            } else {
                let v = RequestVars {
                    remote: SocketAddr::new(ip, vars.remote.port()),
                    ..vars
                };
                zone.key.eval(&v, None, key_buf);
            }
            if key_buf.is_empty() {
                return None;
            }
            if key_buf.len() > 65_535 {
                log_req(
                    Severity::Error,
                    &conn,
                    &vars,
                    format_args!(
                        "the value of the \"{}\" key is more than 65535 bytes: \"{}...\"",
                        zone.key.source(),
                        String::from_utf8_lossy(&key_buf[..64]),
                    ),
                );
                return None;
            }
            Some(Key::new(key_buf))
        })
    })
    .await;
    let lrs = status_name(&outcome, loc.dry_run);
    let dry = if loc.dry_run { ", dry run" } else { "" };
    let decided_by = match outcome {
        Outcome::Unlimited => None,
        Outcome::Accepted { limit, .. }
        | Outcome::Rejected { limit, .. }
        | Outcome::NoMemory { limit }
        | Outcome::Unavailable { limit } => Some(&loc.limits[limit].zone),
    };
    let zone: &str = decided_by.map_or("", |z| &z.name);
    if let Some(z) = decided_by {
        z.counts.record(lrs);
    }
    match outcome {
        Outcome::Unlimited | Outcome::Accepted { delay_ms: 0, .. } => {}
        Outcome::Accepted {
            delay_ms, excess, ..
        } => {
            log_req(
                loc.log_level.lower(),
                &conn,
                &vars,
                format_args!(
                    "delaying request{dry}, excess: {}, by zone \"{zone}\"",
                    Excess(excess),
                ),
            );
            if !loc.dry_run {
                if let Some(r) = record.as_mut() {
                    r.limit_req_status = lrs;
                    r.zone = zone.to_string();
                }
                let mut guard = DelayGuard {
                    armed: true,
                    line: {
                        let mut l = Vec::new();
                        push_req_line(&mut l, &conn, &vars, |out| {
                            out.extend_from_slice(b"client prematurely closed connection")
                        });
                        l
                    },
                    record: &mut record,
                    metrics: &shared.metrics,
                    start,
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
            // The hottest line of all: written piece by piece.
            errlog::emit_with(loc.log_level, |out| {
                push_req_line(out, &conn, &vars, |out| {
                    out.extend_from_slice(b"limiting requests");
                    out.extend_from_slice(dry.as_bytes());
                    out.extend_from_slice(b", excess: ");
                    errlog::push_excess(out, excess);
                    out.extend_from_slice(b" by zone \"");
                    out.extend_from_slice(zone.as_bytes());
                    out.push(b'"');
                })
            });
            if !loc.dry_run {
                let resp =
                    reject(loc, &vars, limit, Some(wait_ms)).map(|r| with_quota(r, loc, &outcome));
                return finish(resp, record, lrs, zone);
            }
        }
        Outcome::NoMemory { limit } => {
            log_req(
                Severity::Alert,
                &conn,
                &vars,
                format_args!("could not allocate node in limit_req zone \"{zone}\""),
            );
            if !loc.dry_run {
                return finish(reject(loc, &vars, limit, None), record, lrs, zone);
            }
        }
        // Redis failed and on_error = "deny": already logged (rate-limited)
        // and counted by the zone.
        Outcome::Unavailable { .. } => {
            if !loc.dry_run {
                return finish(reject_unavailable(loc, &vars, zone), record, lrs, zone);
            }
        }
    }

    // limit_conn, after limit_req as in nginx's preaccess phase: a request
    // limit_req rejected or still delays is not counted.
    let held = match limit_conn(loc, &conn, &vars, &mut record, (lrs, zone)) {
        ConnCheck::Go(held) => held,
        ConnCheck::Answer(resp) => return finish(resp, record, lrs, zone),
    };

    let resp = match &loc.action {
        Action::Return(ret) => Ok(respond::return_response(ret, &vars, lrs)),
        Action::Proxy(pp) => {
            let target = upstream_target(pp, loc, &parts.uri, path);
            let up_start = record.as_ref().map(|_| Instant::now());
            let resp = forward(
                &shared,
                loc,
                &conn,
                &vars,
                (lrs, zone),
                &parts,
                body,
                &target,
                pp,
            )
            .await;
            if let Some(r) = record.as_mut() {
                r.upstream_ms = up_start.map(|t| t.elapsed().as_millis() as u64);
            }
            resp
        }
    };
    // The counts are held until the response body has been sent (or
    // dropped), as nginx releases them when the request is freed.
    finish(
        resp.map(|r| with_quota(r, loc, &outcome)),
        record,
        lrs,
        zone,
    )
    .map(|r| held.keep_until_sent(r))
}

/// What `limit_conn` made of a request.
enum ConnCheck {
    /// Go on, holding these counts.
    Go(Held),
    /// Rejected: answer this.
    Answer(Result<Response<Body>, CloseConnection>),
}

/// nginx's `limit_conn` for a request `limit_req` let through: what the
/// request holds, or its rejection. Sets `$limit_conn_status` in `record`.
fn limit_conn(
    loc: &Location,
    conn: &Conn,
    vars: &RequestVars,
    record: &mut Option<Record>,
    (lrs, req_zone): (&'static str, &str),
) -> ConnCheck {
    if loc.conn_limits.is_empty() {
        return ConnCheck::Go(Held::default());
    }
    thread_local! {
        static KEY_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let decision = connlimit::check(&loc.conn_limits, loc.conn_dry_run, |i| {
        KEY_BUF.with_borrow_mut(|buf| {
            let zone = &loc.conn_limits[i].zone;
            buf.clear();
            zone.key.eval(vars, None, buf);
            if buf.is_empty() {
                return None;
            }
            if buf.len() > connlimit::MAX_KEY_LEN {
                log_req(
                    Severity::Error,
                    conn,
                    vars,
                    format_args!(
                        "the value of the \"{}\" key is more than {} bytes: \"{}\"",
                        zone.key.source(),
                        connlimit::MAX_KEY_LEN,
                        String::from_utf8_lossy(buf),
                    ),
                );
                return None;
            }
            Some(Key::new(buf))
        })
    });
    let set = |record: &mut Option<Record>, status| {
        if let Some(r) = record.as_mut() {
            r.limit_conn_status = status;
        }
    };
    let (limit, full) = match decision {
        connlimit::Decision::Unlimited => return ConnCheck::Go(Held::default()),
        connlimit::Decision::Passed(held) => {
            set(record, connlimit::PASSED);
            return ConnCheck::Go(held);
        }
        connlimit::Decision::Rejected { limit, full } => (limit, full),
    };
    let l = &loc.conn_limits[limit];
    let name = &*l.zone.name;
    if full {
        // nginx's line comes from its slab allocator, without the request.
        errlog::emit(
            Severity::Crit,
            format_args!("ngx_slab_alloc() failed: no memory in limit_conn_zone \"{name}\""),
        );
    } else {
        let dry = if loc.conn_dry_run { ", dry run," } else { "" };
        log_req(
            loc.conn_log_level,
            conn,
            vars,
            format_args!("limiting connections{dry} by zone \"{name}\""),
        );
    }
    if loc.conn_dry_run {
        set(record, connlimit::REJECTED_DRY_RUN);
        return ConnCheck::Go(Held::default());
    }
    set(record, connlimit::REJECTED);
    if loc.conn_status == 444 {
        return ConnCheck::Answer(Err(CloseConnection::NO_RESPONSE));
    }
    let detail = if full {
        format!("The limit_conn zone \"{name}\" is full.")
    } else {
        format!(
            "Too many requests of this client are being processed at once (at most {} in limit_conn zone \"{name}\").",
            l.conn
        )
    };
    ConnCheck::Answer(Ok(respond::error_response(
        &loc.error_pages,
        Some(vars),
        &Made {
            status: loc.conn_status,
            retry_after: None,
            limit_req_status: lrs,
            zone: req_zone,
            detail,
            violated: None,
        },
    )))
}

/// A limit's key, inline when short (addresses, most header values).
enum Key {
    Inline(u8, [u8; Key::INLINE]),
    Heap(Vec<u8>),
}

impl Key {
    const INLINE: usize = 46;

    fn new(k: &[u8]) -> Key {
        if k.len() <= Key::INLINE {
            let mut b = [0; Key::INLINE];
            b[..k.len()].copy_from_slice(k);
            Key::Inline(k.len() as u8, b)
        } else {
            Key::Heap(k.to_vec())
        }
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        match self {
            Key::Inline(n, b) => &b[..*n as usize],
            Key::Heap(v) => v,
        }
    }
}

fn with_quota(mut resp: Response<Body>, loc: &Location, outcome: &Outcome) -> Response<Body> {
    if loc.ratelimit_headers != crate::respond::RateLimitHeaders::Off {
        if let Some(state) = quota_state(loc, outcome) {
            respond::add_quota_headers(
                resp.headers_mut(),
                loc.ratelimit_headers,
                &loc.limits,
                state,
            );
        }
    }
    resp
}

fn made(status: u16, detail: String) -> Made<'static> {
    Made {
        status,
        retry_after: None,
        limit_req_status: "-",
        zone: "",
        detail,
        violated: None,
    }
}

fn plain_status(s: StatusCode) -> Response<Body> {
    let mut r = Response::new(respond::full(Bytes::new()));
    *r.status_mut() = s;
    r
}

/// Whole seconds, rounded up, at least 1: `Retry-After` for a wait.
fn retry_after_secs(wait_ms: u64) -> u64 {
    wait_ms.div_ceil(1000).max(1)
}

/// The answer to a rejected request: limit `limit`'s error page, or the
/// quota-exceeded problem; `wait_ms` is until this key is accepted again.
fn reject(
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

/// Where this request leaves the client against the location's limits.
fn quota_state(loc: &Location, outcome: &Outcome) -> Option<respond::QuotaState> {
    match *outcome {
        Outcome::Accepted {
            tightest: (limit, excess),
            ..
        } => {
            let l = &loc.limits[limit];
            Some(respond::QuotaState {
                limit,
                remaining: l.remaining(excess),
                reset: l.next_unit_ms(excess).div_ceil(1000),
            })
        }
        Outcome::Rejected { limit, wait_ms, .. } => Some(respond::QuotaState {
            limit,
            remaining: 0,
            reset: retry_after_secs(wait_ms),
        }),
        Outcome::Unlimited | Outcome::NoMemory { .. } | Outcome::Unavailable { .. } => None,
    }
}

/// A rejection because the Redis zone could not decide (`on_error = "deny"`):
/// `limit_req_status`, no `Retry-After` (there is no bucket to compute it from).
fn reject_unavailable(
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

fn request_vars<'a>(
    remote: SocketAddr,
    conn: &Conn,
    server: &'a Server,
    parts: &'a http::request::Parts,
    path: &'a str,
) -> RequestVars<'a> {
    RequestVars {
        remote,
        local: conn.local,
        server_name: &server.name,
        method: &parts.method,
        uri: &parts.uri,
        version: parts.version,
        path,
        headers: &parts.headers,
        raw_request_line: None,
    }
}

/// nginx's `$uri`: percent-decoded, `//` merged, `.` and `..` resolved.
/// `None` when `..` climbs above the root or the path is not absolute.
pub fn normalize_path(raw: &str) -> Option<std::borrow::Cow<'_, str>> {
    if !raw.starts_with('/') {
        return None;
    }
    // Most paths are already normal: no copy.
    if !raw.contains('%') && !raw.contains("//") && !raw.split('/').any(|s| s == "." || s == "..") {
        return Some(raw.into());
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
    Some(out.into())
}

/// nginx's `proxy_pass` URI rule: with a URI part, the matched location
/// prefix is replaced by it; without one, the request URI goes unchanged.
/// The result is the upstream request's target (path and query).
fn upstream_target<'a>(
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

/// nginx's find-config check: a request whose Content-Length exceeds
/// `client_max_body_size` gets 413 before any limit is applied (so it is
/// not counted by `limit_req`, as in nginx).
fn body_too_large(
    loc: &Location,
    conn: &Conn,
    vars: &RequestVars,
    headers: &HeaderMap,
) -> Option<Response<Body>> {
    let max = loc.client_max_body_size;
    let len: u64 = headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if max == 0 || len <= max {
        return None;
    }
    log_req(
        Severity::Error,
        conn,
        vars,
        format_args!("client intended to send too large body: {len} bytes"),
    );
    Some(too_large(loc, vars))
}

/// 413, closing the connection: the rest of the body is not read.
fn too_large(loc: &Location, vars: &RequestVars) -> Response<Body> {
    let mut resp = respond::error_response(
        &loc.error_pages,
        Some(vars),
        &made(
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

#[allow(clippy::too_many_arguments)]
async fn forward(
    shared: &Shared,
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
        ..made(status, detail.to_string())
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

/// Whether a request body failed because its chunked framing broke nginx's
/// grammar (see [`crate::http1::chunked`]), rather than the client leaving.
fn invalid_chunked(e: &(dyn std::error::Error + 'static)) -> bool {
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
