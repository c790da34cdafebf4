//! 0-RTT (`ssl_early_data`): a QUIC client resuming a session may send
//! its requests with its first flight, before its handshake completes.
//! Anyone who saw that flight can send it again (RFC 8446 §8, RFC 9001
//! §9.2), so sluice marks what arrives before the handshake completed as
//! early data (`$ssl_early_data`), and [`crate::request`] answers an early
//! request 425 Too Early unless its server has `ssl_early_data` on and its
//! method is safe.
//!
//! Why "before the handshake completed" rather than "in a 0-RTT packet":
//! it is what nginx's `$ssl_early_data` says (OpenSSL's
//! `SSL_in_early_data`), and it is the property that matters: a replayed
//! flight never completes a handshake (the replayer lacks the keys), so
//! whatever a connection asks once its handshake completed comes from the
//! client that holds them; whatever it asks before may be a replay.
//!
//! Whether a listener's handshakes accept 0-RTT is chosen per connection,
//! from the configuration current when its first packet came: on when any
//! server of the address has `ssl_early_data` (the ClientHello's name is
//! not read yet when TLS decides); a server with it off then answers its
//! early requests 425, whatever their method.

use super::Conn;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::time::Instant;

/// A listener's two QUIC configurations, which share one ticket store:
/// 0-RTT accepted, or not.
pub(super) struct Configs {
    early: Arc<quinn::ServerConfig>,
    plain: Arc<quinn::ServerConfig>,
}

impl Configs {
    /// Both, from the certificate `resolver` and `transport`.
    pub(super) fn new(
        resolver: Arc<dyn rustls::server::ResolvesServerCert>,
        transport: Arc<quinn::TransportConfig>,
    ) -> Result<Configs, String> {
        let sessions = crate::tls::quic_sessions();
        let make = |early| -> Result<Arc<quinn::ServerConfig>, String> {
            let tls = crate::tls::quic_server_config(resolver.clone(), early, sessions.clone())?;
            let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
                .map_err(|e| e.to_string())?;
            let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
            server.transport_config(transport.clone());
            Ok(Arc::new(server))
        };
        Ok(Configs {
            early: make(true)?,
            plain: make(false)?,
        })
    }

    /// The configuration of a connection to `address`, and whether it
    /// accepts 0-RTT.
    pub(super) fn of(&self, address: &crate::config::Address) -> (Arc<quinn::ServerConfig>, bool) {
        if address.servers.iter().any(|s| s.ssl_early_data) {
            (self.early.clone(), true)
        } else {
            (self.plain.clone(), false)
        }
    }

    /// The endpoint's own (what a connection accepted without a choice
    /// gets): no 0-RTT.
    pub(super) fn plain(&self) -> Arc<quinn::ServerConfig> {
        self.plain.clone()
    }
}

/// Whether a connection's handshake has completed, as its request streams
/// ask when their heads arrive.
#[derive(Clone)]
pub(super) struct Completed(Option<Arc<AtomicBool>>);

impl Completed {
    /// A connection served only once its handshake completed.
    pub(super) fn already() -> Completed {
        Completed(None)
    }

    /// A connection served from its first flight on; the flag is set once
    /// its handshake completes.
    pub(super) fn pending() -> (Completed, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(false));
        (Completed(Some(flag.clone())), flag)
    }

    /// The connection as a request that arrives now sees it: marked early
    /// (`$ssl_early_data`) while the handshake has not completed.
    pub(super) fn conn_now(&self, conn: Arc<Conn>) -> Arc<Conn> {
        let done = self.0.as_ref().is_none_or(|f| f.load(Ordering::Acquire));
        match &conn.tls {
            Some(tls) if !done => {
                let tls = Some(Arc::new(crate::tls::Session {
                    early_data: true,
                    ..(**tls).clone()
                }));
                Arc::new(Conn {
                    id: conn.id,
                    remote: conn.remote,
                    local: conn.local,
                    proxy: None,
                    listen: conn.listen,
                    state: conn.state.clone(),
                    tls,
                    plain_on_https: false,
                })
            }
            _ => conn,
        }
    }
}

/// How an early connection's handshake ended.
pub(super) enum Ended {
    Completed,
    /// sluice closed it first (`http3 = false`, a stop): nothing to say.
    Closed,
    Failed(quinn::ConnectionError),
    TimedOut,
}

/// Waits for the handshake of a connection served from its first flight,
/// until `deadline`; marks it completed (`flag`) or closes it.
pub(super) async fn complete(
    quic: quinn::Connection,
    accepted: quinn::ZeroRttAccepted,
    deadline: Instant,
    flag: Arc<AtomicBool>,
) -> Ended {
    // (It resolves when the handshake completed, or the connection failed
    // before: its close reason tells which.)
    if tokio::time::timeout_at(deadline, accepted).await.is_err() {
        quic.close(quinn::VarInt::from_u32(0), b"");
        return Ended::TimedOut;
    }
    match quic.close_reason() {
        Some(quinn::ConnectionError::LocallyClosed) => Ended::Closed,
        Some(e) => Ended::Failed(e),
        None => {
            flag.store(true, Ordering::Release);
            Ended::Completed
        }
    }
}
