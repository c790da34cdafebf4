//! HTTP/3 to clients: `listen = ["ADDR ssl", "ADDR quic"]` opens a UDP
//! socket on the TCP listen's address, served by quinn (QUIC) and h3
//! (HTTP/3 framing, QPACK). Each request stream goes through the same gate
//! as an HTTP/2 head (and so HTTP/1.1's rules) and then through
//! [`crate::request::handle`], exactly as a request over TCP: its limits,
//! delays, logs and metrics ([`stream`]).
//!
//! What a connection obeys, with nginx's defaults:
//! - the handshake: TLS 1.3 only, ALPN `h3`, the certificate of the server
//!   the SNI name chooses among the address's servers (the configuration
//!   generation current at the handshake, as on TCP), within the default
//!   server's `client_header_timeout`; 0-RTT only where a server of the
//!   address has `ssl_early_data`, its early requests marked ([`early`]);
//! - 128 concurrent request streams (`http3_max_concurrent_streams`) and
//!   3 unidirectional ones (control and QPACK's two), as QUIC stream
//!   credit: a client cannot open more at once; how many come and go,
//!   and every frame that serves no request, is counted by a guard that
//!   reads each stream on its way to h3 ([`guarded`], [`floods`]);
//! - idle: `keepalive_timeout` of the default server, as QUIC's idle
//!   timeout (nginx's `quic` uses `keepalive_timeout` the same way);
//! - `quic_retry`: a client whose address is not yet validated gets a
//!   Retry first (its Initial costs no handshake work);
//! - a stop (SIGTERM, or a reload that drops the listen) sends GOAWAY and
//!   lets the open streams finish within `shutdown_timeout`.
//!
//! h3 runs over [`quic`], sluice's own mapping of h3's transport traits
//! onto quinn, so that a client's STOP_SENDING drops its request at once
//! (its `limit_conn` count with it), as an HTTP/2 RST_STREAM does.
//!
//! Workers: one reads a listener's UDP socket (quinn's endpoint driver:
//! datagrams in, each handed to its connection by connection id), and each
//! new connection is served by the least busy worker — its handshake, its
//! packets' decryption, its streams, its upstream requests — so HTTP/3
//! uses every core as TCP does. nginx instead gives every worker its own
//! socket (`reuseport`) and steers datagrams by connection id with eBPF;
//! one reading socket keeps a migrated connection (a new address, the same
//! ids) found without that.

mod body;
mod early;
mod floods;
mod framing;
mod guarded;
mod quic;
mod stream;
mod transport;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use self::stream::{Head, fields_of, head};

use super::Shared;
use super::listener::{ListenerState, StopAccepting, worker_slot};
use crate::conn_state::{Conn, ConnState};
use crate::connlimit::WorkerSlot;
use crate::errlog::{self, Severity};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use transport::{Transport, Transports};

/// A `quic` listener's socket, bound (`SO_REUSEADDR` is TCP's; a UDP
/// socket on a port another process holds fails here, before a reload
/// switches).
pub(super) fn bind(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind(addr).map_err(|e| {
        std::io::Error::new(e.kind(), format!("bind() to {addr} (udp) failed ({e})"))
    })?;
    socket.set_nonblocking(true)?;
    Ok(socket)
}

/// Read `socket` on the first worker; the state to stop it by.
pub(super) fn start(
    shared: &Arc<Shared>,
    configured: SocketAddr,
    socket: std::net::UdpSocket,
) -> ListenerState {
    let (stop, stopped) = oneshot::channel();
    let Some(rt) = shared.workers.handles.first() else {
        return ListenerState::Stopped;
    };
    let shared = shared.clone();
    let task = rt.spawn(async move {
        match endpoint(&shared, configured, socket) {
            Ok((e, transports)) => serve(shared, configured, (e, transports), stopped).await,
            Err(e) => errlog::emit(
                Severity::Alert,
                format_args!("quic listener on {configured} failed ({e})"),
            ),
        }
    });
    ListenerState::Accepting {
        stops: vec![stop],
        tasks: vec![task],
    }
}

/// The certificate of the server a ClientHello's name chooses, read from
/// the configuration current at that handshake.
struct Certificates {
    env: Arc<crate::request::Env>,
    listen: SocketAddr,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Certificates({})", self.listen)
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let config = self.env.config();
        let address = config.address(self.listen)?;
        let server = address.server_for(None, hello.server_name());
        server.tls.as_ref()?.config.cert_resolver.resolve(hello)
    }
}

fn endpoint(
    shared: &Arc<Shared>,
    configured: SocketAddr,
    socket: std::net::UdpSocket,
) -> std::io::Result<(quinn::Endpoint, Transports)> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let certs = Arc::new(Certificates {
        env: shared.env.clone(),
        listen: configured,
    });
    let mut transports = Transports::new(certs).map_err(invalid)?;
    let (server, _, _) = transports.for_now(shared, configured);
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server.as_ref().clone()),
        socket,
        Arc::new(quinn::TokioRuntime),
    )?;
    Ok((endpoint, transports))
}

/// Accepts connections until told to stop; then GOAWAY to each, and the
/// endpoint closed once they are done or `shutdown_timeout` passed.
async fn serve(
    shared: Arc<Shared>,
    configured: SocketAddr,
    (endpoint, mut transports): (quinn::Endpoint, Transports),
    mut stop: oneshot::Receiver<StopAccepting>,
) {
    let (stop_clients, stopping) = watch::channel(false);
    let (deadline, closed) = loop {
        let incoming = tokio::select! {
            s = &mut stop => break match s {
                Ok(s) => (s.deadline, Some(s.closed)),
                Err(_) => (Instant::now(), None),
            },
            i = endpoint.accept() => i,
        };
        let Some(incoming) = incoming else {
            break (Instant::now(), None);
        };
        let retry = shared
            .config()
            .address(configured)
            .is_some_and(|a| a.default_server().quic_retry);
        if retry && !incoming.remote_address_validated() {
            shared.env.metrics.quic_handshake("retry");
            let _ = incoming.retry();
            continue;
        }
        let transport = transports.for_now(&shared, configured);
        let Some(worker) = shared.workers.least_busy() else {
            incoming.refuse();
            continue;
        };
        let (shared, stopping) = (shared.clone(), stopping.clone());
        worker.spawn(crate::clock::Fresh::new(async move {
            // Counted against the worker that serves it.
            let Some(slot) = worker_slot(&shared) else {
                incoming.refuse();
                return;
            };
            connection(&shared, (configured, transport), incoming, stopping, slot).await;
        }));
    };
    // New handshakes are refused from here on.
    endpoint.set_server_config(None);
    if let Some(closed) = closed {
        let _ = closed.send(());
    }
    let _ = stop_clients.send(true);
    drop(stopping);
    let drained = async {
        stop_clients.closed().await;
        endpoint.wait_idle().await;
    };
    let _ = tokio::time::timeout_at(deadline, drained).await;
    endpoint.close(0u32.into(), b"");
}

/// One QUIC connection: its handshake, then its request streams, each in
/// its own task, until the client closes it, it idles out, or a stop.
async fn connection(
    shared: &Arc<Shared>,
    (configured, (server, transport, early)): (
        SocketAddr,
        (Arc<quinn::ServerConfig>, Transport, bool),
    ),
    incoming: quinn::Incoming,
    mut stopping: watch::Receiver<bool>,
    mut slot: WorkerSlot,
) {
    let id = shared.connections.fetch_add(1, Ordering::Relaxed) + 1;
    shared.env.metrics.connection_opened();
    let remote = incoming.remote_address();
    let accepted = (incoming, server, early);
    if let Some(conn) = handshake(shared, configured, accepted, (id, remote)).await {
        shared
            .env
            .metrics
            .speaks(&mut slot, crate::metrics::Protocol::Http3);
        let max_streams = transport.tuning.max_concurrent_streams;
        requests(shared, conn, max_streams, &mut stopping).await;
    }
    shared.env.metrics.connection_closed();
    drop(slot);
}

/// A connection far enough into its handshake to be served: its state,
/// the QUIC connection, and whether the handshake has completed.
type Served = (Arc<Conn>, quinn::Connection, early::Completed);

/// The handshake, within the default server's `client_header_timeout`;
/// failures are one info line and a counter, as on TCP. With 0-RTT on, the
/// connection is served from its first flight, as soon as its ClientHello
/// was read ([`from_first_flight`]).
async fn handshake(
    shared: &Arc<Shared>,
    configured: SocketAddr,
    (incoming, server, early): (quinn::Incoming, Arc<quinn::ServerConfig>, bool),
    (id, remote): (u64, SocketAddr),
) -> Option<Served> {
    let config = shared.config();
    let address = config.address(configured)?;
    let default = address.default_server();
    let deadline = crate::clock::now() + default.client_header_timeout;
    let report = Report {
        shared: shared.clone(),
        id,
        remote,
        configured,
    };
    let connecting = match incoming.accept_with(server) {
        Ok(c) => c,
        Err(e) => {
            report.failed(&e);
            return None;
        }
    };
    let (quic, completed) = if early {
        from_first_flight(connecting, deadline, report).await?
    } else {
        completed(connecting, deadline, &report).await?
    };
    let sni = quic
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.server_name)
        .map(Box::<str>::from);
    let server = address.server_for(None, sni.as_deref());
    if !server.http3 {
        // `http3 = false`: the handshake was QUIC's; no requests here.
        quic.close(quinn::VarInt::from_u32(0x100), b"");
        return None;
    }
    let timeouts = server.client_timeouts();
    let conn = Conn {
        id,
        remote,
        local: configured,
        proxy: None,
        listen: configured,
        state: ConnState::until(timeouts, deadline),
        tls: Some(Arc::new(crate::tls::Session {
            protocol: crate::tls::Protocol::Tls13,
            server_name: sni,
            cipher: crate::tls::QUIC_CIPHER,
            h2: false,
            early_data: false,
        })),
        plain_on_https: false,
    };
    Some((Arc::new(conn), quic, completed))
}

/// What a handshake's end is told by: a counter, and for a failure one
/// `[info]` line, as nginx logs it.
struct Report {
    shared: Arc<Shared>,
    id: u64,
    remote: SocketAddr,
    configured: SocketAddr,
}

impl Report {
    fn failed(&self, what: &dyn std::fmt::Display) {
        self.line(what, "failed");
    }

    fn timed_out(&self) {
        self.line(&"client timed out (110: Connection timed out)", "timeout");
    }

    fn line(&self, what: &dyn std::fmt::Display, result: &'static str) {
        self.shared.env.metrics.tls_handshake(result);
        self.shared.env.metrics.quic_handshake(result);
        errlog::emit(
            Severity::Info,
            format_args!(
                "*{} {what} while SSL handshaking, client: {}, server: {}",
                self.id,
                self.remote.ip(),
                self.configured
            ),
        );
    }

    fn completed(&self) {
        self.shared.env.metrics.tls_handshake("ok");
        self.shared.env.metrics.quic_handshake("ok");
    }
}

/// The whole handshake, before any request is taken.
async fn completed(
    connecting: quinn::Connecting,
    deadline: Instant,
    report: &Report,
) -> Option<(quinn::Connection, early::Completed)> {
    match tokio::time::timeout_at(deadline, connecting).await {
        Ok(Ok(quic)) => {
            report.completed();
            Some((quic, early::Completed::already()))
        }
        Ok(Err(e)) => {
            report.failed(&e);
            None
        }
        Err(_) => {
            report.timed_out();
            None
        }
    }
}

/// A connection that may send 0-RTT: served once its ClientHello was read
/// (its name chooses the server), so that the requests of its first
/// flight are taken while the handshake goes on, marked early until it
/// completes; the rest of the handshake is awaited beside them.
async fn from_first_flight(
    mut connecting: quinn::Connecting,
    deadline: Instant,
    report: Report,
) -> Option<(quinn::Connection, early::Completed)> {
    match tokio::time::timeout_at(deadline, connecting.handshake_data()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            report.failed(&e);
            return None;
        }
        Err(_) => {
            report.timed_out();
            return None;
        }
    }
    let (quic, accepted) = match connecting.into_0rtt() {
        Ok(started) => started,
        // (Never for a server: quinn's own word.)
        Err(connecting) => return completed(connecting, deadline, &report).await,
    };
    let (completed, flag) = early::Completed::pending();
    let watched = quic.clone();
    tokio::spawn(crate::clock::Fresh::new(async move {
        match early::complete(watched, accepted, deadline, flag).await {
            early::Ended::Completed => report.completed(),
            early::Ended::Closed => {}
            early::Ended::Failed(e) => report.failed(&e),
            early::Ended::TimedOut => report.timed_out(),
        }
    }));
    Some((quic, completed))
}

/// The connection as a new stream sees it: a client that migrated (QUIC
/// moves a connection to a new address once the path is validated) is
/// the address its requests now come from, as nginx's streams take the
/// connection's current address.
fn from_where(conn: &Arc<Conn>, quic: &quinn::Connection) -> Arc<Conn> {
    let now = quic.remote_address();
    if now == conn.remote {
        return conn.clone();
    }
    Arc::new(Conn {
        id: conn.id,
        remote: now,
        local: conn.local,
        proxy: None,
        listen: conn.listen,
        state: conn.state.clone(),
        tls: conn.tls.clone(),
        plain_on_https: false,
    })
}

/// The connection's request streams, each served in its own task; a stop
/// sends GOAWAY and lets those open finish.
async fn requests(
    shared: &Arc<Shared>,
    (conn, quic, completed): Served,
    max_streams: u32,
    stopping: &mut watch::Receiver<bool>,
) {
    let config = shared.config();
    let rules = config
        .address(conn.listen)
        .map(|a| {
            a.server_for(
                None,
                conn.tls.as_ref().and_then(|t| t.server_name.as_deref()),
            )
        })
        .map_or_else(crate::http1::HeadRules::default, |s| s.head_rules);
    drop(config);
    let limits = crate::http2::request::Limits::of(&rules);
    let guard = floods::Guard::new(
        (conn.id, conn.remote.ip()),
        quic.clone(),
        shared.env.clone(),
        max_streams,
    );
    let stops = Arc::new(quic::Stops::default());
    let transport = quic::Transport::new(quic.clone(), stops.clone());
    let built = h3::server::builder()
        .max_field_section_size(limits.list as u64)
        .build::<_, bytes::Bytes>(guarded::Guarded::new(transport, guard.clone()))
        .await;
    let Ok(mut h3c) = built else {
        return;
    };
    let mut stopped = *stopping.borrow();
    loop {
        let accepted = tokio::select! {
            _ = stopping.changed(), if !stopped => {
                stopped = true;
                // GOAWAY: the streams open go on, no new one is taken.
                let _ = h3c.shutdown(0).await;
                continue;
            }
            a = h3c.accept() => a,
        };
        match accepted {
            Ok(Some(resolver)) => {
                if !stopped && guard.too_many_aborted() {
                    // The streams it has go on; the client takes a new
                    // connection for more ([`quic::ABORTED_MAX`]).
                    stopped = true;
                    let _ = h3c.shutdown(0).await;
                }
                let (shared, conn) = (shared.clone(), from_where(&conn, &quic));
                stream::spawn(
                    shared,
                    (conn, completed.clone(), guard.clone()),
                    resolver,
                    (rules, stops.clone()),
                );
            }
            Ok(None) => break,
            Err(e) => {
                // The client's close or an idle timeout end it quietly;
                // h3's closes over a protocol error are logged and
                // counted (the guard's own were, when it closed).
                if let h3::error::ConnectionError::Local {
                    error: h3::error::LocalError::Application { code, reason, .. },
                    ..
                } = &e
                {
                    if !e.is_h3_no_error() {
                        guard.h3_closed(*code, reason);
                    }
                }
                break;
            }
        }
    }
}
