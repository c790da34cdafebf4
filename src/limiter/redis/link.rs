//! What a backend runs its script on, in one shape whatever serves the
//! zones: one server (`url`), a Redis Cluster (`cluster`), or the master
//! Redis Sentinel names (`sentinel` + `master_name`).
//!
//! [`Link`] holds the client and its long-lived connection; [`Link::conn`]
//! gives a [`Conn`], a cheap clone of a multiplexed connection that any
//! number of decisions share, and that implements the redis crate's
//! `ConnectionLike`, so the script call ([`super::script`]) and the rest of
//! the backend do not know which kind they talk to. What differs stays here:
//!
//! - one server: a `ConnectionManager` that reconnects by itself;
//! - Cluster: the crate's async cluster connection, which routes each call
//!   by the slot of its keys (every key of one call shares the client key's
//!   hash tag, so one slot), follows `MOVED`/`ASK`, refreshes the topology
//!   on redirections and connection errors, and so follows a failover;
//! - Sentinel: a `ConnectionManager` to the master the sentinels name,
//!   asked again after a failure ([`Link::failed`], `sentinel`).
//!
//! Nothing connects while the link is built: the first call does (or
//! [`super::RedisBackend::connect_in_background`]).
//!
//! `[redis] connections = N` ([`Slots`]): one server or a Cluster gets N
//! such connections (a Cluster: N per node), each made by the first worker
//! thread that asks for it, so that its driver task runs on that thread's
//! runtime; a thread always uses the same one. A multiplexed connection
//! already pipelines: the decisions queued while its task waits go out in
//! one write and come back in one read.

use super::sentinel::SentinelLink;
use super::{RedisConfig, RedisServers};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, IntoConnectionInfo, Pipeline, RedisError, RedisFuture, TlsCertificates, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A connection that can run the script: a clone of the link's
/// multiplexed connection.
#[derive(Clone)]
pub(super) enum Conn {
    /// One server, or the current master of a Sentinel setup.
    Server(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Server(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Server(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Server(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The client of the configured servers and its connection, made on first use.
// One per backend, built once: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum Link {
    Single {
        client: redis::Client,
        managers: Slots<ConnectionManager>,
        timeout: Duration,
    },
    Cluster {
        client: ClusterClient,
        conns: Slots<ClusterConnection>,
        timeout: Duration,
        /// A client of each seed, for the forgiveness subscriber.
        seeds: Vec<redis::Client>,
    },
    Sentinel(Arc<SentinelLink>),
}

impl Link {
    /// The link for `config` (its TLS files are read here). Connects nothing.
    pub(super) fn new(config: &RedisConfig) -> Result<Link, String> {
        let certs = certificates(config)?;
        let timeout = config.timeout.max(Duration::from_millis(1));
        Ok(match &config.servers {
            RedisServers::Url(url) => Link::Single {
                client: server_client(url.as_str(), config.password.as_deref(), certs)?,
                managers: Slots::new(config.connections),
                timeout,
            },
            RedisServers::Cluster(seeds) => Link::Cluster {
                client: cluster_client(seeds, config, certs.clone())?,
                conns: Slots::new(config.connections),
                timeout,
                seeds: seeds
                    .iter()
                    .map(|u| server_client(u.as_str(), config.password.as_deref(), certs.clone()))
                    .collect::<Result<_, _>>()?,
            },
            RedisServers::Sentinel {
                sentinels,
                master_name,
            } => Link::Sentinel(Arc::new(SentinelLink::new(
                sentinels,
                master_name,
                config,
                certs,
            )?)),
        })
    }

    /// A connection to run a command on. Must be called inside the tokio
    /// runtime. For Sentinel, an error while no master is known (the
    /// sentinels are being asked).
    pub(super) fn conn(&self) -> Result<Conn, RedisError> {
        match self {
            Link::Single {
                client,
                managers,
                timeout,
            } => {
                let manager = managers.mine();
                if let Some(m) = manager.get() {
                    return Ok(Conn::Server(m.clone()));
                }
                let m = ConnectionManager::new_lazy_with_config(
                    client.clone(),
                    manager_config(*timeout),
                )?;
                Ok(Conn::Server(manager.get_or_init(|| m).clone()))
            }
            Link::Cluster {
                client,
                conns,
                timeout,
                ..
            } => {
                let c = conns.mine().get_or_init(|| {
                    // Connects in the background; calls wait for it (each
                    // bounded by its own deadline).
                    let cfg = ClusterConfig::new()
                        .set_connection_timeout(connect_timeout(*timeout))
                        .set_response_timeout(*timeout);
                    client.get_pending_async_connection_with_config(cfg)
                });
                Ok(Conn::Cluster(c.clone()))
            }
            Link::Sentinel(s) => s.conn().map(Conn::Server),
        }
    }

    /// A call on a connection from [`Link::conn`] failed with `error`
    /// (`None`: no answer in time). Sentinel asks the sentinels again, in
    /// the background; the others repair themselves.
    pub(super) fn failed(&self, error: Option<&RedisError>) {
        if let Link::Sentinel(s) = self {
            s.failed(error);
        }
    }

    /// A client for the forgiveness subscriber ([`super::forgive`]): the
    /// server; the seed after `*seed` (any node of a Cluster hears every
    /// `PUBLISH`); the current Sentinel master, with its address.
    pub(super) fn pubsub_client(
        &self,
        seed: &mut usize,
    ) -> Result<(redis::Client, Option<(String, u16)>), String> {
        match self {
            Link::Single { client, .. } => Ok((client.clone(), None)),
            Link::Cluster { seeds, .. } => {
                let c = seeds.get(*seed % seeds.len().max(1)).ok_or("no seed")?;
                *seed = seed.wrapping_add(1);
                Ok((c.clone(), None))
            }
            Link::Sentinel(s) => {
                let (client, at) = s.master_client()?;
                Ok((client, Some(at)))
            }
        }
    }

    /// The master the Sentinel link uses now (`None` for the others, or
    /// while none is known).
    pub(super) fn sentinel_master(&self) -> Option<(String, u16)> {
        match self {
            Link::Sentinel(s) => s.master(),
            _ => None,
        }
    }
}

/// `[redis] connections` connections of one kind, each made on first use.
pub(super) struct Slots<T> {
    slots: Box<[OnceLock<T>]>,
}

impl<T> Slots<T> {
    fn new(n: usize) -> Slots<T> {
        Slots {
            slots: (0..n.max(1)).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The calling thread's slot: threads are numbered as they first ask,
    /// and share the slots in turn (sluice's workers, one per core, each
    /// get their own while `connections` is at least their number).
    fn mine(&self) -> &OnceLock<T> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static THREAD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
        }
        &self.slots[THREAD.with(|t| *t) % self.slots.len()]
    }
}

/// How long a connection attempt may take: the decision's timeout, but
/// at least 500 ms (a connection outlives the decision that opened it).
pub(super) fn connect_timeout(timeout: Duration) -> Duration {
    timeout.max(Duration::from_millis(500))
}

/// The connection manager's settings: up to 6 reconnection tries, 50 ms
/// doubling to at most 1 s, then the next call starts again. Each call has
/// its own deadline anyway.
pub(super) fn manager_config(timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_secs(1))
        .set_number_of_retries(6)
        .set_connection_timeout(Some(connect_timeout(timeout)))
        .set_response_timeout(Some(timeout))
}

/// rustls needs one process-wide crypto provider: ring (the only one built).
/// Installed when a backend is built, not when the configuration is checked.
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The configured CA and client certificate, read; `None` when neither is
/// set (TLS then trusts the system's roots).
fn certificates(config: &RedisConfig) -> Result<Option<TlsCertificates>, String> {
    install_tls_provider();
    if config.tls_ca.is_none() && config.tls_cert.is_none() {
        return Ok(None);
    }
    let read =
        |p: &PathBuf| std::fs::read(p).map_err(|e| format!("cannot read \"{}\": {e}", p.display()));
    let root_cert = config.tls_ca.as_ref().map(read).transpose()?;
    let client_tls = match (&config.tls_cert, &config.tls_key) {
        (Some(c), Some(k)) => Some(redis::ClientTlsConfig {
            client_cert: read(c)?,
            client_key: read(k)?,
        }),
        (None, None) => None,
        _ => return Err("tls_cert and tls_key go together".into()),
    };
    Ok(Some(TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// A client for one server: `url` (or a `host:port` as connection info),
/// with `password` instead of the URL's, and the configured certificates.
pub(super) fn server_client(
    url: impl IntoConnectionInfo,
    password: Option<&str>,
    certs: Option<TlsCertificates>,
) -> Result<redis::Client, String> {
    let mut info = url
        .into_connection_info()
        .map_err(|e| format!("invalid redis url: {e}"))?;
    if let Some(pw) = password {
        let settings = info.redis_settings().clone().set_password(pw);
        info = info.set_redis_settings(settings);
    }
    match certs {
        None => redis::Client::open(info).map_err(|e| format!("invalid redis url: {e}")),
        Some(certs) => redis::Client::build_with_tls(info, certs)
            .map_err(|e| format!("[redis] TLS settings: {e}")),
    }
}

/// The cluster client of `seeds`: their TLS mode (all alike), `password`
/// instead of the URLs' one, the configured certificates.
fn cluster_client(
    seeds: &[String],
    config: &RedisConfig,
    certs: Option<TlsCertificates>,
) -> Result<ClusterClient, String> {
    let mut b = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
        .connection_timeout(connect_timeout(config.timeout))
        .response_timeout(config.timeout.max(Duration::from_millis(1)));
    if let Some(pw) = &config.password {
        b = b.password(pw);
    }
    if let Some(certs) = certs {
        b = b.certs(certs);
    }
    b.build().map_err(|e| format!("[redis] cluster: {e}"))
}
