//! The backend shared by the zones in Redis: its link to the servers
//! ([`super::link`]: one server, a Cluster, or a Sentinel master), the
//! breaker that leaves a failing Redis alone for a moment, the connection
//! events, and one bounded script call ([`RedisBackend::call`]).
//!
//! Building a backend does the work that the configuration check leaves
//! out (it only validates the URLs): installing rustls's crypto provider,
//! reading the TLS files, building the client. Nothing connects until the
//! first decision or [`RedisBackend::connect_in_background`].

use super::events::{EventSink, RedisEvent, ignore_events};
use super::forgive::Forgiveness;
use super::link::Link;
use super::script::{LimitScript, Mode, Reply, ScriptKey, TimeSource};
use super::{CallError, RedisConfig, RedisServers, check_url};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How long Redis is left alone after a failed call: decisions meanwhile go
/// straight to `on_error` instead of each waiting for `timeout`.
pub const BREAKER: Duration = Duration::from_millis(500);

/// The Redis servers of the zones and the connection to them, shared by
/// the zones that use them.
pub struct RedisBackend {
    pub(super) config: RedisConfig,
    /// The servers as the events name them, passwords masked.
    pub(super) shown_url: String,
    pub(super) events: EventSink,
    pub(super) link: Link,
    script: LimitScript,
    epoch: Instant,
    /// Milliseconds since `epoch` before which Redis is not called.
    breaker_until: AtomicU64,
    /// A failure was seen and no success since (for the recovery notice).
    failing: AtomicBool,
    /// Failed calls since the backend was built: a rejection cache entry
    /// made before the latest failure is not used (Redis may have lost the
    /// state it describes).
    failures: AtomicU64,
    /// Keys forgiven by any instance, heard ([`super::forgive`]).
    pub(super) forgiveness: Forgiveness,
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
        for url in config.servers.urls() {
            check_url(url)?;
        }
        let link = Link::new(&config)?;
        let script = LimitScript::new(time, super::link::connect_timeout(config.timeout));
        Ok(Arc::new(RedisBackend {
            shown_url: shown(&config.servers),
            config,
            events,
            link,
            script,
            epoch: Instant::now(),
            breaker_until: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            forgiveness: Forgiveness::default(),
        }))
    }

    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// Whose clock the script decides on.
    pub fn time_source(&self) -> TimeSource {
        self.script.time()
    }

    /// The Redis function library the decisions are called from when the
    /// server has it (`FUNCTION LIST LIBRARYNAME` finds it).
    pub fn function_library(&self) -> &str {
        self.script.library()
    }

    /// Failed calls so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The rejection caches' epoch: failed calls, subscriptions to and
    /// messages of forgiven keys; an entry made in another epoch is not
    /// used. `None` while the forgiveness subscriber is not subscribed:
    /// the caches are not used then ([`super::forgive`]).
    pub fn cache_epoch(&self) -> Option<u64> {
        let f = &self.forgiveness;
        f.usable().then(|| self.failures() + f.epoch())
    }

    /// Start connecting now, without waiting (call from inside the runtime):
    /// the first request then finds the connection ready. Reports the
    /// outcome as an event.
    pub fn connect_in_background(self: &Arc<Self>) {
        self.listen();
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
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            let ping = async {
                let mut c = self.link.conn()?;
                redis::cmd("PING").query_async::<String>(&mut c).await
            };
            let error = match tokio::time::timeout_at(deadline, ping).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => e.to_string(),
                Err(_) => return Err("no answer to PING within 1 s".into()),
            };
            // Sentinel: the first lookup of the master is under way.
            if !matches!(self.config.servers, RedisServers::Sentinel { .. })
                || Instant::now() + Duration::from_millis(20) > deadline
            {
                return Err(error);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
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
        self.failures.fetch_add(1, Ordering::Relaxed);
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

    /// A connection for one command outside the decisions (the admin
    /// API's key lookups); a failure is reported to the link as a call's.
    pub(super) fn conn(&self) -> Result<super::link::Conn, redis::RedisError> {
        self.link.conn().inspect_err(|e| self.link.failed(Some(e)))
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
        let mut conn = self.link.conn().map_err(|e| {
            self.link.failed(Some(&e));
            CallError::Redis(e)
        })?;
        let run = self.script.run(&mut conn, mode, keys, now);
        match tokio::time::timeout_at(deadline, run).await {
            Ok(Err(CallError::Redis(e))) => {
                self.link.failed(Some(&e));
                Err(CallError::Redis(e))
            }
            Ok(reply) => reply,
            Err(_) => {
                self.link.failed(None);
                Err(CallError::Timeout(self.config.timeout))
            }
        }
    }
}

/// The servers as the events name them, passwords masked: the `url`,
/// `cluster URL,…`, or `sentinel NAME via URL,…`.
fn shown(servers: &RedisServers) -> String {
    let list = |urls: &[String]| urls.iter().map(|u| redact(u)).collect::<Vec<_>>().join(",");
    match servers {
        RedisServers::Url(url) => redact(url),
        RedisServers::Cluster(seeds) => format!("cluster {}", list(seeds)),
        RedisServers::Sentinel {
            sentinels,
            master_name,
        } => format!("sentinel master \"{master_name}\" via {}", list(sentinels)),
    }
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
