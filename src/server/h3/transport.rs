//! The QUIC transport of a `quic` listener's connections: nginx 1.25's
//! `quic` transport parameters from `http3_max_concurrent_streams`,
//! `http3_stream_buffer_size`, `quic_gso` and `keepalive_timeout`, read
//! per connection so that a reload changes them for the next one (the
//! endpoint, and its socket, stay).

use super::Shared;
use crate::config::QuicTuning;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What a new connection's QUIC transport follows: the address's default
/// server in the configuration current at its first packet (a reload's
/// `keepalive_timeout`, `quic_gso` or `http3_*` apply from the next
/// connection on, as its certificates do).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Transport {
    idle: Duration,
    pub(super) tuning: QuicTuning,
}

/// The server configurations of a listener's connections, one built per
/// distinct [`Transport`] (a reload that changes none builds none), each
/// with and without 0-RTT ([`super::early`]): two TLS configurations that
/// share one ticket store.
pub(super) struct Transports {
    plain: Arc<quinn::crypto::rustls::QuicServerConfig>,
    early: Arc<quinn::crypto::rustls::QuicServerConfig>,
    current: Option<(Transport, [Arc<quinn::ServerConfig>; 2])>,
}

impl Transports {
    /// Both TLS configurations, from the certificate `resolver`.
    pub(super) fn new(
        resolver: Arc<dyn rustls::server::ResolvesServerCert>,
    ) -> Result<Transports, String> {
        let sessions = crate::tls::quic_sessions();
        let crypto = |early| -> Result<Arc<quinn::crypto::rustls::QuicServerConfig>, String> {
            let tls = crate::tls::quic_server_config(resolver.clone(), early, sessions.clone())?;
            let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
                .map_err(|e| e.to_string())?;
            Ok(Arc::new(quic))
        };
        Ok(Transports {
            plain: crypto(false)?,
            early: crypto(true)?,
            current: None,
        })
    }

    /// A new connection's server configuration, its transport, and whether
    /// its handshake accepts 0-RTT: on when any server of the address has
    /// `ssl_early_data` (TLS decides before the ClientHello's name is read).
    pub(super) fn for_now(
        &mut self,
        shared: &Shared,
        configured: SocketAddr,
    ) -> (Arc<quinn::ServerConfig>, Transport, bool) {
        let config = shared.config();
        let address = config.address(configured);
        let default = address.map(|a| a.default_server());
        let early = address.is_some_and(|a| a.servers.iter().any(|s| s.ssl_early_data));
        let now = Transport {
            idle: default.map_or(crate::config::DEFAULT_KEEPALIVE_TIMEOUT, |s| {
                s.keepalive_timeout
            }),
            tuning: default.map(|s| s.quic).unwrap_or_default(),
        };
        let servers = match &self.current {
            Some((t, servers)) if *t == now => servers.clone(),
            _ => {
                let servers = [
                    Arc::new(server_config(self.plain.clone(), now)),
                    Arc::new(server_config(self.early.clone(), now)),
                ];
                self.current = Some((now, servers.clone()));
                servers
            }
        };
        (servers[usize::from(early)].clone(), now, early)
    }
}

/// quinn's server configuration for `t`: nginx's `quic` transport
/// parameters. Each stream's window is `http3_stream_buffer_size`, the
/// connection's that times the streams it may have open (request streams
/// and the three unidirectional ones), in both directions
/// (`initial_max_data` in nginx's `ngx_quic_init_transport_params`).
fn server_config(
    crypto: Arc<quinn::crypto::rustls::QuicServerConfig>,
    t: Transport,
) -> quinn::ServerConfig {
    let mut server = quinn::ServerConfig::with_crypto(crypto);
    server.transport_config(Arc::new(transport_config(t)));
    server
}

fn transport_config(t: Transport) -> quinn::TransportConfig {
    let streams = u64::from(t.tuning.max_concurrent_streams) + 3;
    let buffer = t.tuning.stream_buffer_size;
    let window = |n: u64| quinn::VarInt::from_u64(n).unwrap_or(quinn::VarInt::MAX);
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(t.tuning.max_concurrent_streams.into())
        .max_concurrent_uni_streams(3u32.into())
        .stream_receive_window(window(buffer))
        .receive_window(window(streams * buffer))
        .send_window(streams * buffer)
        .enable_segmentation_offload(t.tuning.gso)
        .max_idle_timeout(quinn::IdleTimeout::try_from(t.idle.max(Duration::from_secs(1))).ok());
    transport
}

#[cfg(test)]
mod tests {
    use super::*;

    /// quinn keeps its settings private; its Debug shows them.
    #[test]
    fn the_tuning_reaches_quic_as_nginx_maps_it() {
        let t = Transport {
            idle: Duration::from_secs(75),
            tuning: QuicTuning {
                gso: true,
                max_concurrent_streams: 2,
                stream_buffer_size: 4096,
            },
        };
        let shown = format!("{:?}", transport_config(t));
        for want in [
            "max_concurrent_bidi_streams: 2,",
            "max_concurrent_uni_streams: 3,",
            "stream_receive_window: 4096,",
            "receive_window: 20480,",
            "send_window: 20480,",
            "enable_segmentation_offload: true",
        ] {
            assert!(shown.contains(want), "{want} in {shown}");
        }
        let nginx = Transport {
            tuning: QuicTuning::default(),
            ..t
        };
        let shown = format!("{:?}", transport_config(nginx));
        for want in [
            "max_concurrent_bidi_streams: 128,",
            "stream_receive_window: 65536,",
            "receive_window: 8585216,",
            "enable_segmentation_offload: false",
        ] {
            assert!(shown.contains(want), "{want} in {shown}");
        }
    }
}
