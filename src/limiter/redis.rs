//! Zones shared through Redis (`backend = "redis"`, SPEC §5).
//!
//! Every decision is nginx's arithmetic done inside Redis by one Lua script
//! ([`SCRIPT`], `limit_req.lua`): time from the server's `TIME` (one clock for
//! every instance), milli-requests, strict `excess > burst`, nothing stored on
//! a rejection, `last` moved only when time was credited. The script is sent
//! with `EVALSHA` and loaded on `NOSCRIPT`.
//!
//! Keys: `PREFIX:ZONE:{HEX}`, one hash `{e, l}` per zone and client key, the
//! client key hex-encoded (binary keys such as `$binary_remote_addr` are safe)
//! and used as the Redis Cluster hash tag. The limits of one location that
//! share a client key therefore share a slot, and are decided by one script
//! call over all their keys: atomically. Keys expire once a request would find
//! them empty anyway, and never before a minute (nginx's expiry).
//!
//! Several limits in one location keep nginx's accounting (look up in order,
//! stop at the first over its burst, charge nothing on a rejection, charge
//! every limit on acceptance, the largest delay wins):
//! - memory limits are looked up first and held (not charged);
//! - the Redis limits before the first memory rejection are decided by one
//!   script per slot group: every group but the last is checked (`check`),
//!   the last is charged if all passed (`charge`), then the earlier groups are
//!   charged (`account`) in reverse order;
//! - then the held memory limits are charged, or released on a rejection.
//!
//! With one slot group (the usual case) the Redis part is one atomic call.
//! What is not atomic is listed in the README ("Several instances").
//!
//! Failures: every call is bounded by the decision's `timeout`; an error or a
//! timeout counts against each Redis zone involved ([`ZoneStats`]), is logged
//! at most once a second per zone, opens a short breaker ([`BREAKER`]) and the
//! decision is made by `on_error`: `allow` (the Redis limits are skipped),
//! `deny` ([`Outcome::Unavailable`]) or `local` (an in-memory zone of the same
//! size, per instance). The connection manager reconnects by itself; the
//! first call after the breaker closes tries Redis again.

use super::memory::{Held, Lookup, MemoryZone};
use super::{Limit, LimitSet, Outcome, Store, accepted, evaluate};
use crate::errlog::{self, Severity};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// The Lua script: nginx's lookup and accounting over several keys.
pub const SCRIPT: &str = include_str!("limit_req.lua");

/// How long Redis is left alone after a failed call: decisions meanwhile go
/// straight to `on_error` instead of each waiting for `timeout`.
pub const BREAKER: Duration = Duration::from_millis(500);

/// What a decision does when Redis fails or is slower than `timeout`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnError {
    /// Skip the Redis limits (fail open).
    #[default]
    Allow,
    /// Reject with `limit_req_status` (fail closed).
    Deny,
    /// Decide with an in-memory zone of the same size, per instance.
    Local,
}

impl OnError {
    pub fn parse(s: &str) -> Option<OnError> {
        Some(match s {
            "allow" => OnError::Allow,
            "deny" => OnError::Deny,
            "local" => OnError::Local,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Allow => "allow",
            OnError::Deny => "deny",
            OnError::Local => "local",
        }
    }
}

/// `[redis]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]`, or `rediss://` for TLS.
    pub url: String,
    /// The most a decision waits for Redis.
    pub timeout: Duration,
    pub on_error: OnError,
    /// The first part of every key.
    pub prefix: String,
    /// `rediss://` only: PEM CA certificate(s) to trust instead of the
    /// system's roots.
    pub tls_ca: Option<PathBuf>,
    /// `rediss://` only: PEM client certificate and key (mutual TLS).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

impl RedisConfig {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
    pub const DEFAULT_PREFIX: &'static str = "sluice";
}

/// Check a `[redis] url`; the message is for the configuration error.
pub fn check_url(url: &str) -> Result<(), String> {
    if !url.starts_with("redis://") && !url.starts_with("rediss://") {
        return Err(format!(
            "invalid redis url \"{url}\" (expected \"redis://HOST:PORT[/DB]\" or \"rediss://HOST:PORT[/DB]\")"
        ));
    }
    install_tls_provider();
    redis::Client::open(url)
        .map(|_| ())
        .map_err(|e| format!("invalid redis url \"{url}\": {e}"))
}

/// rustls needs one process-wide crypto provider: ring (the only one built).
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The client for `config`: plain, TLS with the system's roots, or TLS with
/// the configured CA and client certificate.
fn client(config: &RedisConfig) -> Result<redis::Client, String> {
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

/// Where the script takes `now` from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// Redis `TIME`: one clock for every instance (the product).
    Server,
    /// The `now` passed to [`super::decide`]: for tests and replays that need
    /// exact, repeatable times. Never from the configuration file.
    Caller,
}

/// One Redis server and its connection, shared by the zones that use it.
pub struct RedisBackend {
    config: RedisConfig,
    client: redis::Client,
    manager: OnceLock<ConnectionManager>,
    script: redis::Script,
    time: TimeSource,
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

/// Why a Redis call gave no decision.
#[derive(Debug)]
pub enum CallError {
    Redis(redis::RedisError),
    Timeout(Duration),
    Reply(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Redis(e) => write!(f, "{e}"),
            CallError::Timeout(d) => write!(f, "no answer within {} ms", d.as_millis()),
            CallError::Reply(s) => write!(f, "unexpected reply from the script: {s}"),
        }
    }
}

/// The script's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Accepted; the excess of each key, in order.
    Accepted(Vec<u64>),
    /// Key `index` (0-based) is over its burst.
    Busy {
        index: usize,
        excess: u64,
        wait_ms: u64,
    },
}

/// What the script does with the keys (see `limit_req.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Charge,
    Check,
    Account,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Charge => "charge",
            Mode::Check => "check",
            Mode::Account => "account",
        }
    }
}

impl RedisBackend {
    /// A backend for `config`. Nothing connects yet: the first decision (or
    /// [`RedisBackend::connect_in_background`]) does, so sluice starts even
    /// when Redis is down.
    pub fn new(config: RedisConfig) -> Result<Arc<RedisBackend>, String> {
        RedisBackend::with_time_source(config, TimeSource::Server)
    }

    pub fn with_time_source(
        config: RedisConfig,
        time: TimeSource,
    ) -> Result<Arc<RedisBackend>, String> {
        check_url(&config.url)?;
        let client = client(&config)?;
        Ok(Arc::new(RedisBackend {
            config,
            client,
            manager: OnceLock::new(),
            script: redis::Script::new(SCRIPT),
            time,
            epoch: Instant::now(),
            breaker_until: AtomicU64::new(0),
            failing: AtomicBool::new(false),
        }))
    }

    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// The connection manager, created on first use (inside a tokio runtime).
    fn manager(&self) -> Result<ConnectionManager, redis::RedisError> {
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
    /// the first request then finds the connection ready. Logs the outcome.
    pub fn connect_in_background(self: &Arc<Self>) {
        let this = self.clone();
        tokio::spawn(async move {
            let r = match this.manager() {
                Ok(mut m) => {
                    let cmd = redis::cmd("PING");
                    let ping = cmd.query_async::<String>(&mut m);
                    match tokio::time::timeout(Duration::from_secs(1), ping).await {
                        Ok(r) => r.map(|_| ()).map_err(|e| e.to_string()),
                        Err(_) => Err("no answer to PING within 1 s".into()),
                    }
                }
                Err(e) => Err(e.to_string()),
            };
            match r {
                Ok(()) => errlog::emit(
                    Severity::Notice,
                    format_args!("redis {} is reachable", redact(&this.config.url)),
                ),
                Err(e) => errlog::emit(
                    Severity::Warn,
                    format_args!(
                        "redis {} is not reachable yet ({e}); on_error={} decides meanwhile",
                        redact(&this.config.url),
                        this.config.on_error.as_str()
                    ),
                ),
            }
        });
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn breaker_open(&self) -> bool {
        self.now_ms() < self.breaker_until.load(Ordering::Relaxed)
    }

    fn record_failure(&self) {
        self.failing.store(true, Ordering::Relaxed);
        self.breaker_until.store(
            self.now_ms() + BREAKER.as_millis() as u64,
            Ordering::Relaxed,
        );
    }

    fn record_success(&self) {
        if self.failing.swap(false, Ordering::Relaxed) {
            errlog::emit(
                Severity::Notice,
                format_args!("redis {} answers again", redact(&self.config.url)),
            );
        }
    }

    /// One script call over `keys` (each with its rate and burst), bounded
    /// by `deadline`. `now` is used only with [`TimeSource::Caller`].
    pub async fn call(
        &self,
        mode: Mode,
        keys: &[(Vec<u8>, u64, u64)],
        now: u64,
        deadline: Instant,
    ) -> Result<Reply, CallError> {
        let mut conn = self.manager().map_err(CallError::Redis)?;
        let mut inv = self.script.prepare_invoke();
        inv.arg(mode.as_str());
        match self.time {
            TimeSource::Server => inv.arg(""),
            TimeSource::Caller => inv.arg(now),
        };
        for (key, rate, burst) in keys {
            inv.key(key.as_slice()).arg(*rate).arg(*burst);
        }
        let reply = match tokio::time::timeout_at(deadline, inv.invoke_async::<Vec<i64>>(&mut conn))
            .await
        {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return Err(CallError::Redis(e)),
            Err(_) => return Err(CallError::Timeout(self.config.timeout)),
        };
        parse_reply(&reply, keys.len())
    }
}

fn parse_reply(v: &[i64], n: usize) -> Result<Reply, CallError> {
    let bad = || CallError::Reply(format!("{v:?}"));
    let u = |x: i64| u64::try_from(x).map_err(|_| bad());
    match v.first() {
        Some(1) if v.len() == n + 1 => Ok(Reply::Accepted(
            v[1..].iter().map(|&x| u(x)).collect::<Result<_, _>>()?,
        )),
        Some(0) if v.len() == 4 => {
            let index = u(v[1])? as usize;
            if index == 0 || index > n {
                return Err(bad());
            }
            Ok(Reply::Busy {
                index: index - 1,
                excess: u(v[2])?,
                wait_ms: u(v[3])?,
            })
        }
        _ => Err(bad()),
    }
}

/// `redis://user:secret@host` → `redis://user:***@host` for logs.
fn redact(url: &str) -> String {
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

/// Counters of one Redis zone, for its error log lines and `/metrics`.
#[derive(Debug, Default)]
pub struct ZoneStats {
    /// Redis calls for this zone that failed or timed out.
    pub errors: AtomicU64,
    /// Decisions for this zone made by `on_error` (failures, and decisions
    /// taken while the breaker was open).
    pub fallbacks: AtomicU64,
    /// Seconds (since the backend's start) of the last logged error, + 1.
    last_logged: AtomicU64,
    suppressed: AtomicU64,
}

/// A zone whose states live in Redis.
pub struct RedisZone {
    backend: Arc<RedisBackend>,
    name: String,
    /// `PREFIX:ZONE:{`.
    key_head: Vec<u8>,
    /// The in-memory zone `on_error = "local"` decides with.
    local: MemoryZone,
    pub stats: ZoneStats,
}

impl fmt::Debug for RedisZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisZone")
            .field("name", &self.name)
            .finish()
    }
}

impl RedisZone {
    /// Zone `name` of `size` bytes (the size bounds the local fallback).
    pub fn new(backend: Arc<RedisBackend>, name: &str, size: u64) -> RedisZone {
        let key_head = format!("{}:{}:{{", backend.config.prefix, name).into_bytes();
        RedisZone {
            backend,
            name: name.to_string(),
            key_head,
            local: MemoryZone::with_size(size),
            stats: ZoneStats::default(),
        }
    }

    pub fn backend(&self) -> &Arc<RedisBackend> {
        &self.backend
    }

    /// The in-memory zone used by `on_error = "local"`.
    pub fn local(&self) -> &MemoryZone {
        &self.local
    }

    /// The Redis key of client key `key`: `PREFIX:ZONE:{HEX}`.
    pub fn redis_key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.key_head.len() + key.len() * 2 + 1);
        k.extend_from_slice(&self.key_head);
        push_hex(&mut k, key);
        k.push(b'}');
        k
    }

    fn report(&self, err: &CallError) {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        let sec = self.backend.now_ms() / 1000 + 1;
        let last = self.stats.last_logged.load(Ordering::Relaxed);
        if last != sec
            && self
                .stats
                .last_logged
                .compare_exchange(last, sec, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let n = self.stats.suppressed.swap(0, Ordering::Relaxed);
            let more = if n > 0 {
                format!(" ({n} similar errors suppressed)")
            } else {
                String::new()
            };
            errlog::emit(
                Severity::Error,
                format_args!(
                    "redis error in limit_req zone \"{}\": {err}; on_error={}{more}",
                    self.name,
                    self.backend.config.on_error.as_str()
                ),
            );
        } else {
            self.stats.suppressed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
}

/// Redis Cluster's key slot: CRC16 (XMODEM) of the hash tag, mod 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tag = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    let mut crc: u16 = 0;
    for &b in tag {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

fn redis_zone(limit: &Limit) -> Option<&RedisZone> {
    match &*limit.zone.store {
        Store::Redis(r) => Some(r),
        Store::Memory(_) => None,
    }
}

/// Limits of one location that one script call decides: same backend, same slot.
struct Group<'a> {
    backend: &'a Arc<RedisBackend>,
    slot: u16,
    /// Limit indexes, in configuration order.
    limits: Vec<usize>,
    /// (redis key, rate, burst), parallel to `limits`.
    keys: Vec<(Vec<u8>, u64, u64)>,
}

/// The decision for a location with at least one Redis limit. `keys[i]` is
/// limit `i`'s evaluated key (`None`: skipped).
pub(super) async fn decide<K: AsRef<[u8]>>(
    limits: &LimitSet,
    now: u64,
    keys: &[Option<K>],
) -> Outcome {
    let n = limits.len();
    if keys.iter().all(Option::is_none) {
        return Outcome::Unlimited;
    }
    let mut excess: Vec<Option<u64>> = vec![None; n];

    // A backend known to be down: no call, on_error at once.
    let down = limits.iter().zip(keys).find_map(|(l, k)| {
        let r = redis_zone(l)?;
        (k.is_some() && r.backend.breaker_open()).then_some(r)
    });
    if let Some(r) = down {
        return fallback(limits, now, keys, r.backend.config.on_error);
    }

    // 1. Memory limits: look up and hold, up to the first that fails. The
    //    guard releases them if this future is dropped while awaiting Redis
    //    (the client went away), so a held state never stays pinned.
    let mut holds = Holds {
        limits,
        held: vec![None; n],
    };
    let mut mem_fail: Option<(usize, Lookup)> = None;
    for (i, l) in limits.iter().enumerate() {
        let (Store::Memory(m), Some(k)) = (&*l.zone.store, &keys[i]) else {
            continue;
        };
        match m.lookup(k.as_ref(), now, l.zone.rate, l.burst, false) {
            Lookup::Held { held: h, excess: e } => {
                holds.held[i] = Some(h);
                excess[i] = Some(e);
            }
            other => {
                mem_fail = Some((i, other));
                break;
            }
        }
    }
    let limit_to = mem_fail.as_ref().map_or(n, |(i, _)| *i);

    // 2. Redis limits before that point, grouped by backend and slot in the
    //    order of their first limit.
    let mut groups: Vec<Group> = Vec::new();
    for (i, l) in limits.iter().enumerate().take(limit_to) {
        let (Some(r), Some(k)) = (redis_zone(l), &keys[i]) else {
            continue;
        };
        let rk = r.redis_key(k.as_ref());
        let slot = key_slot(&rk);
        let entry = (rk, l.zone.rate.milli(), l.burst);
        match groups
            .iter_mut()
            .find(|g| Arc::ptr_eq(g.backend, &r.backend) && g.slot == slot)
        {
            Some(g) => {
                g.limits.push(i);
                g.keys.push(entry);
            }
            None => groups.push(Group {
                backend: &r.backend,
                slot,
                limits: vec![i],
                keys: vec![entry],
            }),
        }
    }

    let deadline = groups
        .iter()
        .map(|g| Instant::now() + g.backend.config.timeout)
        .min();
    let last = groups.len().wrapping_sub(1);
    for (gi, g) in groups.iter().enumerate() {
        let mode = if gi == last && mem_fail.is_none() {
            Mode::Charge
        } else {
            Mode::Check
        };
        let deadline = deadline.expect("a group exists");
        match g.backend.call(mode, &g.keys, now, deadline).await {
            Ok(Reply::Accepted(es)) => {
                g.backend.record_success();
                for (&i, e) in g.limits.iter().zip(es) {
                    excess[i] = Some(e);
                }
            }
            Ok(Reply::Busy {
                index,
                excess,
                wait_ms,
            }) => {
                g.backend.record_success();
                holds.release_all();
                return Outcome::Rejected {
                    limit: g.limits[index],
                    excess,
                    wait_ms,
                };
            }
            Err(e) => {
                // Nothing was charged in Redis by this decision yet (but a
                // timed-out "charge" may still have run there).
                g.backend.record_failure();
                for &i in &g.limits {
                    if let Some(r) = redis_zone(&limits[i]) {
                        r.report(&e);
                    }
                }
                holds.release_all();
                return fallback(limits, now, keys, g.backend.config.on_error);
            }
        }
    }

    if let Some((i, lookup)) = mem_fail {
        holds.release_all();
        return match lookup {
            Lookup::Busy { excess, wait_ms } => Outcome::Rejected {
                limit: i,
                excess,
                wait_ms,
            },
            _ => Outcome::NoMemory { limit: i },
        };
    }

    // 3. Accepted: charge the held memory limits, then the checked Redis
    //    groups, newest first (each store on its own clock; the order
    //    between stores changes no outcome).
    for j in (0..n).rev() {
        if let (Some(h), Store::Memory(m)) = (holds.held[j].take(), &*limits[j].zone.store) {
            excess[j] = Some(m.account(h, now, limits[j].zone.rate));
        }
    }
    for g in groups.iter().rev().skip(1) {
        let deadline = deadline.expect("a group exists");
        match g.backend.call(Mode::Account, &g.keys, now, deadline).await {
            Ok(Reply::Accepted(es)) => {
                for (&i, e) in g.limits.iter().zip(es) {
                    excess[i] = Some(e);
                }
            }
            Ok(Reply::Busy { .. }) => {} // account never answers busy
            Err(e) => {
                // Those limits stay uncharged for this request; their checked
                // excess still gives the delay.
                g.backend.record_failure();
                for &i in &g.limits {
                    if let Some(r) = redis_zone(&limits[i]) {
                        r.report(&e);
                    }
                }
            }
        }
    }
    accepted(limits, &excess)
}

/// Memory states held by an unfinished decision; released on drop.
struct Holds<'a> {
    limits: &'a LimitSet,
    held: Vec<Option<Held>>,
}

impl Holds<'_> {
    fn release_all(&mut self) {
        for (j, h) in self.held.iter_mut().enumerate() {
            if let (Some(h), Store::Memory(m)) = (h.take(), &*self.limits[j].zone.store) {
                m.release(h);
            }
        }
    }
}

impl Drop for Holds<'_> {
    fn drop(&mut self) {
        self.release_all();
    }
}

/// The decision when Redis cannot make it.
fn fallback<K: AsRef<[u8]>>(
    limits: &LimitSet,
    now: u64,
    keys: &[Option<K>],
    policy: OnError,
) -> Outcome {
    for (l, k) in limits.iter().zip(keys) {
        if let (Some(r), Some(_)) = (redis_zone(l), k) {
            r.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
    }
    match policy {
        // Redis zones delegate their synchronous operations to their local
        // in-memory zone: `evaluate` is the per-instance decision.
        OnError::Local => evaluate(limits, now, |i| keys[i].as_ref().map(|k| k.as_ref())),
        OnError::Allow => evaluate(limits, now, |i| {
            if redis_zone(&limits[i]).is_some() {
                None
            } else {
                keys[i].as_ref().map(|k| k.as_ref())
            }
        }),
        OnError::Deny => {
            let limit = limits
                .iter()
                .zip(keys)
                .position(|(l, k)| redis_zone(l).is_some() && k.is_some())
                .unwrap_or(0);
            Outcome::Unavailable { limit }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_cluster_spec() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
    }

    #[test]
    fn binary_keys_are_hex_in_the_hash_tag() {
        let b = RedisBackend::new(RedisConfig {
            url: "redis://127.0.0.1:1".into(),
            timeout: RedisConfig::DEFAULT_TIMEOUT,
            on_error: OnError::Allow,
            prefix: "sluice".into(),
            ..Default::default()
        })
        .unwrap();
        let z = RedisZone::new(b, "z_a", 1 << 20);
        assert_eq!(
            z.redis_key(&[127, 0, 0, 1]),
            b"sluice:z_a:{7f000001}".to_vec()
        );
        assert_eq!(z.redis_key(b"}{"), b"sluice:z_a:{7d7b}".to_vec());
        assert_eq!(
            key_slot(&z.redis_key(&[127, 0, 0, 1])),
            key_slot(b"7f000001")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn errors_are_counted_and_logged_once_a_second() {
        let b = RedisBackend::new(RedisConfig {
            url: "redis://127.0.0.1:1".into(),
            timeout: RedisConfig::DEFAULT_TIMEOUT,
            on_error: OnError::Local,
            prefix: "sluice".into(),
            ..Default::default()
        })
        .unwrap();
        let z = RedisZone::new(b, "z", 1 << 20);
        let e = CallError::Timeout(Duration::from_millis(50));
        let logged = |z: &RedisZone| z.stats.last_logged.load(Ordering::Relaxed);
        for _ in 0..5 {
            z.report(&e);
        }
        assert_eq!(z.stats.errors.load(Ordering::Relaxed), 5);
        assert_eq!(z.stats.suppressed.load(Ordering::Relaxed), 4);
        let first = logged(&z);
        tokio::time::advance(Duration::from_millis(999)).await;
        z.report(&e);
        assert_eq!(logged(&z), first, "still within the second");
        tokio::time::advance(Duration::from_millis(1)).await;
        z.report(&e);
        assert_eq!(logged(&z), first + 1, "a line in the next second");
        assert_eq!(z.stats.suppressed.load(Ordering::Relaxed), 0);
        assert_eq!(z.stats.errors.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn urls() {
        assert!(check_url("redis://127.0.0.1:6379").is_ok());
        assert!(check_url("redis://:pw@127.0.0.1:6379/2").is_ok());
        assert!(check_url("rediss://h:6380").is_ok());
        assert!(check_url("http://h").is_err());
        assert_eq!(
            redact("redis://u:secret@h:1/0"),
            "redis://u:***@h:1/0".to_string()
        );
    }

    #[test]
    fn replies() {
        assert_eq!(
            parse_reply(&[1, 0, 2000], 2).unwrap(),
            Reply::Accepted(vec![0, 2000])
        );
        assert_eq!(
            parse_reply(&[0, 2, 6000, 500], 2).unwrap(),
            Reply::Busy {
                index: 1,
                excess: 6000,
                wait_ms: 500
            }
        );
        assert!(parse_reply(&[0, 3, 1, 1], 2).is_err());
        assert!(parse_reply(&[1, 0], 2).is_err());
    }
}
