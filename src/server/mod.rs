//! The server: listeners bound for a configuration, the workers that serve
//! them, reload and graceful stop.
//!
//! - [`workers`]: one single-threaded tokio runtime per core;
//! - [`listener`]: the listening sockets and their accept loops;
//! - [`conn`]: one client connection, from its first byte to its close;
//! - [`h2`]: HTTP/2 on a client connection, each stream a request;
//! - [`h3`]: HTTP/3 on a `quic` listener, each stream a request;
//! - [`idle`]: idle keep-alive connections, parked without a task;
//! - [`io`]: the client socket read through the head gate, with nginx's
//!   timeouts;
//! - [`refuse`]: the answer to a head nginx refuses;
//! - [`tls`]: the TLS handshake of a connection on an `ssl` address;
//! - [`admin`]: `/metrics` and `/healthz`.
//!
//! A request itself is [`crate::request`]'s.

mod admin;
mod conn;
pub(crate) mod h1;
mod h2;
mod h3;
mod idle;
pub(crate) mod io;
mod listener;
mod proxy_protocol;
mod refuse;
mod tls;
mod workers;

/// The HTTP/3 head path, for the `http3` fuzz target.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use self::h3::{Head as H3Head, fields_of as h3_fields, head as h3_head};
use self::listener::{Kind, Listener};
use self::workers::Workers;
use crate::config::{CompileError, Config, LoadError, Spec};
use crate::errlog::{self, Severity};
use crate::request::Env;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// State shared by every connection: what requests read ([`Env`]), the
/// workers, the connection count, whether a stop began.
pub(crate) struct Shared {
    pub env: Arc<Env>,
    /// The worker threads serving client connections (see [`Workers`]).
    pub(crate) workers: Workers,
    pub(crate) connections: AtomicU64,
    /// Set once a stop began: `/healthz` answers 503.
    pub(crate) draining: AtomicBool,
}

impl Shared {
    fn new(config: Config, workers: usize) -> std::io::Result<Arc<Shared>> {
        Ok(Arc::new(Shared {
            env: Arc::new(Env::new(config)),
            workers: Workers::start(workers)?,
            connections: AtomicU64::new(0),
            draining: AtomicBool::new(false),
        }))
    }

    /// The configuration generation new requests use.
    pub(crate) fn config(&self) -> Arc<Config> {
        self.env.config()
    }
}

/// What the running proxy can be asked to do (by signals, `sluice reload`,
/// the file watcher).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command {
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
    /// Reading or compiling the configuration panicked (a bug).
    #[error("reload failed ({0})")]
    Task(#[from] tokio::task::JoinError),
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A `listen` address (or `[admin]`'s) could not be bound.
    #[error("{0}")]
    Bind(std::io::Error),
    /// A worker thread or its runtime could not be started.
    #[error("cannot start the worker threads ({0})")]
    Workers(std::io::Error),
}

/// A sluice server, embeddable: [`Server::bind`] binds every listener of a
/// configuration and starts the worker threads; [`Server::serve`] (or
/// [`Server::run`], with reloads) serves until told to stop, then stops
/// gracefully and joins the workers.
pub struct Server {
    pub(crate) shared: Arc<Shared>,
    pub(crate) listeners: Vec<Listener>,
}

impl Server {
    /// Bind every server's `listen` address and the admin listener, and
    /// start one worker per CPU (or `SLUICE_WORKERS`). Fails before serving
    /// anything if a listener cannot be bound or a worker started.
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        Self::bind_with_workers(config, 0).await
    }

    /// [`Server::bind`] with `workers` worker threads (0: the default).
    pub async fn bind_with_workers(config: Config, workers: usize) -> Result<Server, ServerError> {
        let mut listeners: Vec<Listener> = Vec::new();
        for (kind, addr) in wanted(&config) {
            let at = udp_beside(&listeners, kind, addr);
            let mut l = Listener::bind(kind, at).await.map_err(ServerError::Bind)?;
            l.configured = addr;
            listeners.push(l);
        }
        Ok(Server {
            shared: Shared::new(config, workers).map_err(ServerError::Workers)?,
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

    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Serve until `shutdown` completes, then stop gracefully (see
    /// [`Server::stop`]). No reloads: see [`Server::run`].
    pub async fn serve(mut self, shutdown: impl Future<Output = ()>) {
        self.start_all();
        shutdown.await;
        self.stop().await;
    }

    /// Serve and obey `commands` until [`Command::Stop`] (or the channel
    /// closes); `load` reads the configuration for [`Command::Reload`], on
    /// a blocking thread (so that file I/O never holds up `/healthz`).
    pub(crate) async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        load: impl Fn() -> Result<Spec, LoadError> + Send + Sync + 'static,
    ) {
        self.start_all();
        let load = Arc::new(load);
        while let Some(cmd) = commands.recv().await {
            match cmd {
                Command::Reload => {
                    let load = load.clone();
                    let loaded = tokio::task::spawn_blocking(move || load()).await;
                    let result = match loaded {
                        Ok(Ok(spec)) => self.reload(spec).await,
                        Ok(Err(e)) => Err(e.into()),
                        Err(e) => Err(e.into()),
                    };
                    self.shared.env.metrics.reload(result.is_ok());
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

    pub(crate) fn start_all(&mut self) {
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
        // Compiling opens log files (and reads certificates): not on the
        // threads that serve /healthz.
        let previous = old.clone();
        let new =
            tokio::task::spawn_blocking(move || Config::compile(spec, Some(&previous))).await??;
        let want = wanted(&new);
        let mut added = Vec::new();
        for &(kind, addr) in &want {
            if !self
                .listeners
                .iter()
                .any(|l| l.kind == kind && l.configured == addr)
            {
                // Dropping `added` on error closes what was bound so far.
                let at = udp_beside(self.listeners.iter().chain(&added), kind, addr);
                let mut l = Listener::bind(kind, at).await?;
                l.configured = addr;
                added.push(l);
            }
        }
        let summary = reconfigured(&old, &new);
        let drain = Instant::now() + new.shutdown_timeout();
        let main_log = new.error_log.clone();
        self.shared.env.switch(Arc::new(new));
        errlog::set_main(main_log);

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
                self.shared.env.metrics.connections(),
                timeout.as_millis()
            ),
        );
        let mut proxies = Vec::new();
        for l in self.listeners.iter_mut().filter(|l| l.kind != Kind::Admin) {
            proxies.extend(l.stop(deadline).await);
        }
        for t in proxies {
            let _ = t.await;
        }
        let left = self.shared.env.metrics.connections();
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
        self.shared.workers.join().await;
    }
}

/// nginx-style notice of a reload: how many zones, which kept their state.
fn reconfigured(old: &Config, new: &Config) -> String {
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
    format!(
        "reconfigured: {} zone(s), {} kept with their state{}{}",
        new.zones.len(),
        kept_zones.len(),
        if kept_zones.is_empty() { "" } else { ": " },
        kept_zones.join(", ")
    )
}

/// Where a `quic` listener binds: its address, or with port 0 (tests) the
/// port its TCP listen got, so that both share one port as configured.
fn udp_beside<'a>(
    bound: impl IntoIterator<Item = &'a Listener>,
    kind: Kind,
    addr: SocketAddr,
) -> SocketAddr {
    if kind != Kind::Quic || addr.port() != 0 {
        return addr;
    }
    bound
        .into_iter()
        .find(|l| l.kind == Kind::Proxy && l.configured == addr)
        .map_or(addr, |l| SocketAddr::new(addr.ip(), l.local.port()))
}

/// The listeners a configuration asks for.
pub(crate) fn wanted(rt: &Config) -> Vec<(Kind, SocketAddr)> {
    rt.addresses
        .iter()
        .map(|a| (Kind::Proxy, a.listen))
        .chain(
            rt.addresses
                .iter()
                .filter(|a| a.quic)
                .map(|a| (Kind::Quic, a.listen)),
        )
        .chain(rt.ops.admin.as_ref().map(|a| (Kind::Admin, a.listen)))
        .collect()
}

/// nginx logs a failed reload's reasons as `[emerg]` and keeps running.
pub(crate) fn log_reload_error(e: &ReloadError) {
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
