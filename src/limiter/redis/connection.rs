//! One Redis server and its connection, shared by the zones that use it:
//! the client (plain or TLS), the connection manager that reconnects by
//! itself, the breaker that leaves a failing Redis alone for a moment, and
//! one bounded script call ([`RedisBackend::call`]).
//!
//! Building a backend does the work that the configuration check leaves
//! out (it only validates the URL): installing rustls's crypto provider,
//! reading the TLS files, building the client. Nothing connects until the
//! first decision or [`RedisBackend::connect_in_background`].

use super::events::{EventSink, RedisEvent, ignore_events};
use super::script::{LimitScript, Mode, Reply, ScriptKey, TimeSource};
use super::{CallError, RedisConfig, check_url};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// How long Redis is left alone after a failed call: decisions meanwhile go
/// straight to `on_error` instead of each waiting for `timeout`.
pub const BREAKER: Duration = Duration::from_millis(500);

/// One Redis server and its connection, shared by the zones that use it.
pub struct RedisBackend {
    pub(super) config: RedisConfig,
    /// `config.url` with its password masked, for the events.
    pub(super) shown_url: String,
    pub(super) events: EventSink,
    client: redis::Client,
    manager: OnceLock<ConnectionManager>,
    script: LimitScript,
    epoch: Instant,
    /// Milliseconds since `epoch` before which Redis is not called.
    breaker_until: AtomicU64,
    /// A failure was seen and no success since (for the recovery notice).
    failing: AtomicBool,
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend")
            .field("config", &self.config)
            .finish()
    }
}

impl RedisBackend {
    /// A backend for `config` on Redis's clock, reporting to `events`.
    /// Nothing connects yet: the first decision (or
    /// [`RedisBackend::connect_in_background`]) does, so sluice starts even
    /// when Redis is down.
    pub fn new(config: RedisConfig, events: EventSink) -> Result<Arc<RedisBackend>, String> {
        RedisBackend::build(config, TimeSource::Server, events)
    }

    /// A backend on the clock `time`, whose events are dropped: for tests
    /// and replays.
    pub fn with_time_source(
        config: RedisConfig,
        time: TimeSource,
    ) -> Result<Arc<RedisBackend>, String> {
        RedisBackend::build(config, time, ignore_events())
    }

    /// A backend for `config` on the clock `time`, reporting to `events`.
    pub fn build(
        config: RedisConfig,
        time: TimeSource,
        events: EventSink,
    ) -> Result<Arc<RedisBackend>, String> {
        check_url(&config.url)?;
        let client = client(&config)?;
        Ok(Arc::new(RedisBackend {
            shown_url: redact(&config.url),
            config,
            events,
            client,
            manager: OnceLock::new(),
            script: LimitScript::new(time),
            epoch: Instant::now(),
            breaker_until: AtomicU64::new(0),
            failing: AtomicBool::new(false),
        }))
    }

    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// The connection manager, created on first use (inside a tokio runtime).
    pub(super) fn manager(&self) -> Result<ConnectionManager, redis::RedisError> {
        if let Some(m) = self.manager.get() {
            return Ok(m.clone());
        }
        // Reconnection: up to 6 tries, 50 ms doubling to at most 1 s, then
        // the next call starts again. Each call has its own deadline anyway.
        let t = self.config.timeout.max(Duration::from_millis(1));
        let cfg = ConnectionManagerConfig::new()
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1))
            .set_number_of_retries(6)
            .set_connection_timeout(Some(t.max(Duration::from_millis(500))))
            .set_response_timeout(Some(t));
        let m = ConnectionManager::new_lazy_with_config(self.client.clone(), cfg)?;
        Ok(self.manager.get_or_init(|| m).clone())
    }

    /// Start connecting now, without waiting (call from inside the runtime):
    /// the first request then finds the connection ready. Reports the
    /// outcome as an event.
    pub fn connect_in_background(self: &Arc<Self>) {
        let this = self.clone();
        tokio::spawn(async move {
            let url = &this.shown_url;
            match this.ping().await {
                Ok(()) => (this.events)(RedisEvent::Reachable { url }),
                Err(e) => (this.events)(RedisEvent::Unreachable {
                    url,
                    error: &e,
                    on_error: this.config.on_error,
                }),
            }
        });
    }

    /// `PING`, waiting at most a second for the answer.
    async fn ping(&self) -> Result<(), String> {
        let mut m = self.manager().map_err(|e| e.to_string())?;
        let cmd = redis::cmd("PING");
        let ping = cmd.query_async::<String>(&mut m);
        match tokio::time::timeout(Duration::from_secs(1), ping).await {
            Ok(r) => r.map(|_| ()).map_err(|e| e.to_string()),
            Err(_) => Err("no answer to PING within 1 s".into()),
        }
    }

    /// Milliseconds since this backend was built (the breaker's clock).
    pub(super) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub(super) fn breaker_open(&self) -> bool {
        self.now_ms() < self.breaker_until.load(Ordering::Relaxed)
    }

    pub(super) fn record_failure(&self) {
        self.failing.store(true, Ordering::Relaxed);
        self.breaker_until.store(
            self.now_ms() + BREAKER.as_millis() as u64,
            Ordering::Relaxed,
        );
    }

    pub(super) fn record_success(&self) {
        if self.failing.swap(false, Ordering::Relaxed) {
            (self.events)(RedisEvent::Recovered {
                url: &self.shown_url,
            });
        }
    }

    /// One script call over `keys` (each with its limit), bounded by
    /// `deadline`. `now` is used only with [`TimeSource::Caller`].
    pub async fn call(
        &self,
        mode: Mode,
        keys: &[ScriptKey],
        now: u64,
        deadline: Instant,
    ) -> Result<Reply, CallError> {
        let mut conn = self.manager().map_err(CallError::Redis)?;
        let run = self.script.run(&mut conn, mode, keys, now);
        match tokio::time::timeout_at(deadline, run).await {
            Ok(reply) => reply,
            Err(_) => Err(CallError::Timeout(self.config.timeout)),
        }
    }
}

/// rustls needs one process-wide crypto provider: ring (the only one built).
/// Installed when a backend is built, not when the configuration is checked.
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The client for `config`: plain, TLS with the system's roots, or TLS with
/// the configured CA and client certificate.
fn client(config: &RedisConfig) -> Result<redis::Client, String> {
    install_tls_provider();
    let url = config.url.as_str();
    let invalid = |e: redis::RedisError| format!("invalid redis url \"{url}\": {e}");
    if config.tls_ca.is_none() && config.tls_cert.is_none() {
        return redis::Client::open(url).map_err(invalid);
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
    redis::Client::build_with_tls(
        url,
        redis::TlsCertificates {
            client_tls,
            root_cert,
        },
    )
    .map_err(|e| format!("[redis] TLS settings: {e}"))
}

/// `redis://user:secret@host` → `redis://user:***@host` for logs.
pub(super) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let cred = &url[s + 3..at];
            match cred.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &cred[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}
