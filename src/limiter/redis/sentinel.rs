//! Redis Sentinel: the master the sentinels name, followed through a
//! failover.
//!
//! The link keeps one connection manager to the current master. The
//! sentinels are asked again, in the background and once at a time
//! (`SENTINEL get-master-addr-by-name` to each sentinel in order until one
//! answers):
//! - after any failed call (a dropped connection, a refused one, a timeout,
//!   or `READONLY` from a master that was demoted to replica); meanwhile
//!   the failed call and the breaker give the decisions to `on_error`, so
//!   no decision waits for the sentinels;
//! - every [`POLL`], because a failover the old master survives (`SENTINEL
//!   FAILOVER`, a partition) raises no error here: the old master keeps
//!   accepting writes until the sentinels get round to demoting it (seconds
//!   later), and what is written there then is lost.
//!
//! A new address is taken only once the server there says `ROLE` master;
//! the same address keeps its connection (the manager reconnects by itself).
//!
//! Why not the crate's `SentinelClient`: it names a master once per call
//! and leaves following a failover to the caller; this is that following,
//! with the backend's timeouts and without a lookup in the request path.

use super::RedisConfig;
use super::link::{connect_timeout, manager_config, server_client};
use redis::aio::ConnectionManager;
use redis::{ConnectionAddr, ErrorKind, RedisError, TlsCertificates, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How often the sentinels are asked for the master when nothing fails.
pub const POLL: Duration = Duration::from_millis(500);

/// The sentinels of one master, and the connection to it.
pub(super) struct SentinelLink {
    sentinels: Vec<redis::Client>,
    master_name: String,
    /// The master's password (`password`).
    password: Option<String>,
    /// TLS to the master (with `rediss://` sentinels) and its certificates.
    tls: bool,
    certs: Option<TlsCertificates>,
    timeout: Duration,
    current: Mutex<Option<Master>>,
    /// A lookup is running.
    asking: Arc<AtomicBool>,
    /// The periodic lookup runs.
    polling: AtomicBool,
}

/// The master in use.
#[derive(Clone)]
struct Master {
    host: String,
    port: u16,
    manager: ConnectionManager,
}

impl SentinelLink {
    pub(super) fn new(
        sentinels: &[String],
        master_name: &str,
        config: &RedisConfig,
        certs: Option<TlsCertificates>,
    ) -> Result<SentinelLink, String> {
        let sentinels = sentinels
            .iter()
            .map(|url| {
                server_client(
                    url.as_str(),
                    config.sentinel_password.as_deref(),
                    certs.clone(),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let tls = sentinels.first().is_some_and(|c| {
            matches!(
                c.get_connection_info().addr(),
                ConnectionAddr::TcpTls { .. }
            )
        });
        Ok(SentinelLink {
            sentinels,
            master_name: master_name.to_string(),
            password: config.password.clone(),
            tls,
            certs,
            timeout: config.timeout.max(Duration::from_millis(1)),
            current: Mutex::new(None),
            asking: Arc::new(AtomicBool::new(false)),
            polling: AtomicBool::new(false),
        })
    }

    /// The current master's connection; while none is known, an error (and
    /// the sentinels are asked, if they are not already).
    pub(super) fn conn(self: &Arc<Self>) -> Result<ConnectionManager, RedisError> {
        self.poll();
        if let Some(m) = self.lock().as_ref() {
            return Ok(m.manager.clone());
        }
        self.ask_in_background();
        Err(RedisError::from((
            ErrorKind::Io,
            "no master yet",
            format!("asking the sentinels for \"{}\"", self.master_name),
        )))
    }

    /// A call failed: ask the sentinels whether the master moved.
    pub(super) fn failed(self: &Arc<Self>, _error: Option<&RedisError>) {
        self.ask_in_background();
    }

    /// The address of the master in use, if one is known.
    pub(super) fn master(&self) -> Option<(String, u16)> {
        self.lock().as_ref().map(|m| (m.host.clone(), m.port))
    }

    /// A client of the master in use (for the forgiveness subscriber), and
    /// its address; while none is known, an error (and the sentinels are
    /// asked).
    pub(super) fn master_client(
        self: &Arc<Self>,
    ) -> Result<(redis::Client, (String, u16)), String> {
        self.poll();
        let Some((host, port)) = self.master() else {
            self.ask_in_background();
            return Err(format!("asking the sentinels for \"{}\"", self.master_name));
        };
        let client = server_client(
            self.address(&host, port),
            self.password.as_deref(),
            self.certs.clone(),
        )?;
        Ok((client, (host, port)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Master>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start the periodic lookup, once (inside the tokio runtime); it ends
    /// when the link is dropped (a reload that changed `[redis]`).
    fn poll(self: &Arc<Self>) {
        if self.polling.swap(true, Ordering::AcqRel) {
            return;
        }
        let link: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(POLL).await;
                match link.upgrade() {
                    Some(link) => link.ask_in_background(),
                    None => return,
                }
            }
        });
    }

    /// Start a lookup unless one runs (inside the tokio runtime).
    fn ask_in_background(self: &Arc<Self>) {
        if self.asking.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            // Bounded: a sentinel that does not answer cannot keep the
            // next lookup from starting.
            let bound = connect_timeout(this.timeout) * (this.sentinels.len() as u32 + 2);
            let _ = tokio::time::timeout(bound, this.ask()).await;
            this.asking.store(false, Ordering::Release);
        });
    }

    /// Ask the sentinels in order; switch to the master named by the first
    /// that answers, if it is new and says it is a master.
    async fn ask(&self) {
        let Some((host, port)) = self.master_address().await else {
            return;
        };
        let known = self
            .lock()
            .as_ref()
            .is_some_and(|m| m.host == host && m.port == port);
        if known {
            return;
        }
        if let Ok(manager) = self.connect_master(&host, port).await {
            *self.lock() = Some(Master {
                host,
                port,
                manager,
            });
        }
    }

    /// `SENTINEL get-master-addr-by-name` to each sentinel until one names
    /// the master.
    async fn master_address(&self) -> Option<(String, u16)> {
        let limit = connect_timeout(self.timeout);
        for s in &self.sentinels {
            let ask = async {
                let mut c = s.get_multiplexed_async_connection().await.ok()?;
                let reply = redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&self.master_name)
                    .query_async::<Option<(String, u16)>>(&mut c)
                    .await;
                reply.ok().flatten()
            };
            if let Ok(Some(addr)) = tokio::time::timeout(limit, ask).await {
                return Some(addr);
            }
        }
        None
    }

    /// A connection manager to `host:port`, once the server there says it
    /// is a master.
    async fn connect_master(&self, host: &str, port: u16) -> Result<ConnectionManager, String> {
        let addr = self.address(host, port);
        let client = server_client(addr, self.password.as_deref(), self.certs.clone())?;
        let connect = async {
            let mut m = ConnectionManager::new_with_config(client, manager_config(self.timeout))
                .await
                .map_err(|e| e.to_string())?;
            let role = redis::cmd("ROLE")
                .query_async::<Value>(&mut m)
                .await
                .map_err(|e| e.to_string())?;
            match role_name(&role) {
                Some(r) if r == "master" => Ok(m),
                other => Err(format!("{host}:{port} is not a master ({other:?})")),
            }
        };
        tokio::time::timeout(connect_timeout(self.timeout) * 2, connect)
            .await
            .map_err(|_| format!("{host}:{port}: no answer"))?
    }
}

impl SentinelLink {
    /// `host:port` of a data node, with TLS when the sentinels have it.
    fn address(&self, host: &str, port: u16) -> ConnectionAddr {
        if self.tls {
            ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(host.to_string(), port)
        }
    }
}

/// The first element of a `ROLE` reply (`master`, `slave`, `sentinel`).
fn role_name(v: &Value) -> Option<String> {
    match v {
        Value::Array(items) => match items.first()? {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles() {
        let role = |name: &str| Value::Array(vec![Value::BulkString(name.as_bytes().to_vec())]);
        assert_eq!(role_name(&role("master")).as_deref(), Some("master"));
        assert_eq!(role_name(&role("slave")).as_deref(), Some("slave"));
        assert_eq!(role_name(&Value::Nil), None);
        assert_eq!(role_name(&Value::Array(vec![])), None);
    }
}
