//! Listening sockets: bound before a configuration is switched to, then
//! accepted on by every worker; `worker_connections` is taken here.

use super::Shared;
use super::admin::serve_admin;
use super::conn::serve_client;
use crate::connlimit::WorkerSlot;
use crate::errlog::{self, Severity};
use hyper_util::server::graceful::GracefulShutdown;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// What a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `[[servers]]` block.
    Proxy,
    /// `[admin]`: `/metrics` and `/healthz`.
    Admin,
    /// A `quic` listen: HTTP/3 on UDP at a server's address.
    Quic,
}

/// A bound listener and, once serving, its accept loop.
pub(crate) struct Listener {
    pub(crate) kind: Kind,
    /// The `listen` address as configured (servers are found by it).
    pub(crate) configured: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) state: ListenerState,
}

pub(crate) enum ListenerState {
    Bound(std::net::TcpListener),
    /// A `quic` listener's UDP socket, not yet served.
    BoundUdp(std::net::UdpSocket),
    /// Accepting, one loop per worker; send the drain deadline to stop.
    Accepting {
        stops: Vec<oneshot::Sender<StopAccepting>>,
        tasks: Vec<tokio::task::JoinHandle<()>>,
    },
    Stopped,
}

impl Listener {
    pub(crate) async fn bind(kind: Kind, addr: SocketAddr) -> std::io::Result<Listener> {
        if kind == Kind::Quic {
            let socket = super::h3::bind(addr)?;
            return Ok(Listener {
                kind,
                configured: addr,
                local: socket.local_addr()?,
                state: ListenerState::BoundUdp(socket),
            });
        }
        let l = listen(addr)?;
        Ok(Listener {
            kind,
            configured: addr,
            local: l.local_addr()?,
            state: ListenerState::Bound(l.into_std()?),
        })
    }

    /// Start accepting: for a server, on every worker (each with its own
    /// copy of the socket); the admin listener on the current runtime.
    pub(crate) fn start(&mut self, shared: &Arc<Shared>) {
        let l = match std::mem::replace(&mut self.state, ListenerState::Stopped) {
            ListenerState::Bound(l) => l,
            ListenerState::BoundUdp(socket) => {
                self.state = super::h3::start(shared, self.configured, socket);
                return;
            }
            _ => return,
        };
        let here = [tokio::runtime::Handle::current()];
        let runtimes: &[tokio::runtime::Handle] = match self.kind {
            Kind::Proxy | Kind::Quic => &shared.workers.handles,
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
    pub(crate) async fn stop(&mut self, deadline: Instant) -> Vec<tokio::task::JoinHandle<()>> {
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

/// nginx's listen backlog on Linux (`NGX_LISTEN_BACKLOG`): how many
/// connections the kernel completes and keeps for a busy worker to accept.
/// std's and mio's 128 made a burst of a few hundred clients lose SYNs, each
/// lost one a client's full second of retransmission.
pub(crate) const BACKLOG: u32 = 511;

/// A listening socket on `addr` (`SO_REUSEADDR`, as nginx and std set it),
/// with nginx's errors.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let located = |call: &str, e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("{call} to {addr} failed ({e})"))
    };
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }
    .map_err(|e| located("socket()", e))?;
    socket
        .set_reuseaddr(true)
        .map_err(|e| located("setsockopt(SO_REUSEADDR)", e))?;
    socket.bind(addr).map_err(|e| located("bind()", e))?;
    socket.listen(BACKLOG).map_err(|e| {
        let what = format!("listen() to {addr}, backlog {BACKLOG} failed ({e})");
        std::io::Error::new(e.kind(), what)
    })
}

pub(crate) async fn accept_loop(
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
    // Idle keep-alive connections of this loop wait here, without a task.
    let idle = (kind == Kind::Proxy)
        .then(|| idle_set(&shared, configured, &stopping))
        .flatten();
    let (deadline, closed) = loop {
        let (stream, remote) = tokio::select! {
            d = &mut stop => break match d {
                Ok(s) => (s.deadline, Some(s.closed)),
                Err(_) => (Instant::now(), None),
            },
            accepted = accept(&shared, kind, &listener) => match accepted {
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
            Kind::Admin | Kind::Quic => None,
        };
        let _ = stream.set_nodelay(true);
        match (kind, slot) {
            (Kind::Proxy, Some(slot)) => serve_client(
                (&shared, &stopping, idle.as_ref()),
                configured,
                stream,
                remote,
                slot,
            ),
            (Kind::Proxy | Kind::Quic, _) => {}
            (Kind::Admin, _) => serve_admin(&shared, &graceful, stream, remote.ip()),
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

/// How long a worker with more clients than another lets that one accept
/// first (it accepts after this anyway, should the other be busy).
const DEFER_ACCEPT: Duration = Duration::from_millis(1);

/// The next connection, for a proxy loop shared out among the workers: a
/// worker busier than another waits [`DEFER_ACCEPT`] first, so that the
/// other (woken by the same connection) takes it.
async fn accept(
    shared: &Shared,
    kind: Kind,
    listener: &TcpListener,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    if kind == Kind::Proxy && shared.workers.busier_than_others() {
        tokio::time::sleep(DEFER_ACCEPT).await;
    }
    listener.accept().await
}

/// Where the idle keep-alive connections of an accept loop wait, without a
/// task (none if the kernel refuses an epoll set: they wait in their tasks).
fn idle_set(
    shared: &Arc<Shared>,
    configured: SocketAddr,
    stopping: &tokio::sync::watch::Receiver<bool>,
) -> Option<Arc<super::idle::IdleSet>> {
    match super::idle::IdleSet::new(configured) {
        Ok(set) => {
            tokio::spawn(super::idle::run(
                shared.clone(),
                set.clone(),
                stopping.clone(),
            ));
            Some(set)
        }
        Err(e) => {
            errlog::emit(
                Severity::Alert,
                format_args!("epoll_create1() failed ({e})"),
            );
            None
        }
    }
}

/// `worker_connections`: a slot for one more client connection on this
/// worker thread, or `None` when it has them all open (nginx's alert, at
/// most once a second per worker; every refusal counted).
pub(crate) fn worker_slot(shared: &Shared) -> Option<WorkerSlot> {
    let max = shared.env.config().worker_connections();
    let now_s = shared.env.clock.now_ms() / 1000;
    if WorkerSlot::open_here() >= max {
        reuse_connections(shared, max, now_s);
    }
    match WorkerSlot::take(max, now_s) {
        Ok(slot) => Some(slot),
        Err(refused) => {
            shared.env.metrics.connection_refused();
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
pub(crate) struct StopAccepting {
    pub(crate) deadline: Instant,
    pub(crate) closed: oneshot::Sender<()>,
}

/// Out of `worker_connections`: closes some parked connections to make
/// room, with nginx's warning (once a second per worker).
fn reuse_connections(shared: &Shared, max: usize, now_s: u64) {
    let closed = super::idle::reuse_here();
    let reused = !closed.is_empty();
    for entry in closed {
        super::h2::closing(shared, entry);
    }
    if reused && WorkerSlot::reuse_warning_due(now_s) {
        errlog::emit(
            Severity::Warn,
            format_args!("{max} worker_connections are not enough, reusing connections"),
        );
    }
}
