//! Zones shared through Redis (`backend = "redis"`, config/reference.md "Zones in Redis").
//!
//! Every decision is the zone's algorithm ([`crate::limiter::algorithm`]),
//! with exactly its integer arithmetic, done inside Redis by one Lua script
//! ([`SCRIPT`], `limit_req.lua`): time from the server's `TIME` (one clock for
//! every instance), nothing stored on a rejection; the same decision, excess,
//! wait, remaining count and reset as the memory store. One call may mix
//! algorithms (each key carries its own limit). On Redis 7 the scripts are
//! loaded as a function library and called with `FCALL` (`function`: less
//! Redis time per decision); otherwise, and whenever the server lacks the
//! function, the script is sent with `EVALSHA`, and as `EVAL` on `NOSCRIPT`
//! (`script`).
//!
//! Where: one server (`url`), a Redis Cluster (`cluster`: each call goes to
//! the master of its keys' slot) or the master Redis Sentinel names
//! (`sentinel`), behind one connection shape (`link`), so that the decision
//! does not know which.
//!
//! Keys: `PREFIX:ZONE:{HEX}`, one per zone and client key, the client key
//! hex-encoded (binary keys such as `$binary_remote_addr` are safe) and used
//! as the Redis Cluster hash tag. The limits of one location that share a
//! client key therefore share a slot, and are decided by one script call over
//! all their keys: atomically. A key is a hash of the algorithm's cell
//! (leaky bucket `{e, l}`, token bucket `{last, deficit}`, GCRA `{tat,
//! frac}`, windows `{window, count[, prev]}`), or for the sliding log a list
//! of admitted times. Keys expire a second after a request would find them
//! as new ([`crate::limiter::algorithm::expired`]); the leaky bucket's once
//! a request would find them empty, and never before a minute (nginx's
//! expiry).
//!
//! Several limits in one location keep nginx's accounting (look up in order,
//! stop at the first over its burst, charge nothing on a rejection, charge
//! every limit on acceptance, the largest delay wins; `decide`):
//! - memory limits are looked up first and held (not charged);
//! - the Redis limits before the first memory rejection are decided by one
//!   script per slot group: every group but the last is checked (`check`),
//!   the last is charged if all passed (`charge`), then the earlier groups are
//!   charged (`account`) in reverse order;
//! - then the held memory limits are charged, or released on a rejection.
//!
//! With one slot group (the usual case) the Redis part is one atomic call.
//! What is not atomic is listed in config/operations.md ("Several instances").
//!
//! Failures: every call is bounded by the decision's `timeout`; an error or a
//! timeout counts against each Redis zone involved ([`ZoneStats`]), is logged
//! at most once a second per zone, opens a short breaker ([`BREAKER`]) and the
//! decision is made by `on_error`: `allow` (the Redis limits are skipped),
//! `deny` ([`super::Outcome::Unavailable`]) or `local` (an in-memory zone of the same
//! size, per instance). The connections repair themselves (the Sentinel
//! link asks the sentinels again); the first call after the breaker closes
//! tries Redis again (`connection`).
//! Connection events are values ([`RedisEvent`]) given to the sink the
//! backend was built with: the limiter writes no log itself.
//!
//! Rejections: a refusal stores nothing, and the script sends back the
//! refused key's state, so a zone's [`RejectCache`] (`[redis]
//! reject_cache`, on by default) lets this instance refuse that key itself,
//! exactly as Redis would, until the zone's widest limit would admit it
//! again (`cache`; only the first Redis limit a location asks is answered
//! from it, see `decide`).
//!
//! Files: `connection` (the backend: breaker, events, the bounded call),
//! `link` (one server, Cluster or Sentinel, as one connection shape),
//! `sentinel` (following the master through a failover), `script` (the Lua
//! script and its replies), `function` (the scripts as a Redis 7 function
//! library, and when not to use it), `zone` (keys, slots, counters), `decide` (the
//! decision), `cache` (the rejection cache), `peek` (one key looked at or
//! forgotten), [`forgive`] (a forgotten key published to every instance,
//! and heard), [`events`].

pub mod cache;
mod connection;
mod decide;
pub mod events;
pub mod forgive;
mod function;
mod link;
mod peek;
mod script;
mod sentinel;
mod zone;

pub use cache::{Refusal, RejectCache};
pub use connection::{BREAKER, RedisBackend};
pub(super) use decide::decide;
pub use events::{EventSink, RedisEvent, ignore_events};
pub use script::{
    CallError, LEAKY_SCRIPT, Mode, Reply, SCRIPT, ScriptKey, TimeSource, hash_fields,
};
pub use zone::{RedisZone, ZoneStats, key_slot};

use std::path::PathBuf;
use std::time::Duration;

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

/// Where the zones' states live: one server, a Redis Cluster, or the
/// master that Redis Sentinel names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisServers {
    /// `url`: `redis://[user:password@]host:port[/db]`, or `rediss://` for TLS.
    Url(String),
    /// `cluster`: seed nodes of a Redis Cluster (the rest is discovered).
    Cluster(Vec<String>),
    /// `sentinel` + `master_name`: the sentinels to ask for the master.
    Sentinel {
        sentinels: Vec<String>,
        master_name: String,
    },
}

impl Default for RedisServers {
    fn default() -> RedisServers {
        RedisServers::Url(String::new())
    }
}

impl RedisServers {
    /// Every URL configured (the one `url`, the seeds, or the sentinels).
    pub fn urls(&self) -> &[String] {
        match self {
            RedisServers::Url(u) => std::slice::from_ref(u),
            RedisServers::Cluster(seeds) => seeds,
            RedisServers::Sentinel { sentinels, .. } => sentinels,
        }
    }
}

/// `[redis]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedisConfig {
    pub servers: RedisServers,
    /// The password of the servers that hold the zones (the `url` server,
    /// every cluster node, the master found through the sentinels); `None`:
    /// the one in the URL(s), if any.
    pub password: Option<String>,
    /// The sentinels' own password; `None`: the one in their URLs, if any.
    pub sentinel_password: Option<String>,
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
    /// `reject_cache`: each zone refuses a key Redis refused, locally,
    /// until it would be admitted ([`RejectCache`]). The file's default is
    /// on; `Default` (for tests and tools) leaves it off.
    pub reject_cache: bool,
    /// `connections`: multiplexed connections to each server (`url`, or
    /// each node of a `cluster`), each made by the first worker thread that
    /// needs it; 0 (the `Default`) means 1. The master found through
    /// Sentinel always has one.
    pub connections: usize,
}

impl RedisConfig {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
    pub const DEFAULT_PREFIX: &'static str = "sluice";
    pub const MAX_CONNECTIONS: usize = 64;

    /// A configuration for the one server at `url`, every other setting
    /// at its default (tests and tools).
    pub fn url(url: &str) -> RedisConfig {
        RedisConfig {
            servers: RedisServers::Url(url.to_string()),
            timeout: RedisConfig::DEFAULT_TIMEOUT,
            prefix: RedisConfig::DEFAULT_PREFIX.to_string(),
            ..Default::default()
        }
    }
}

/// Check a `[redis] url`; the message is for the configuration error.
///
/// Pure: the URL is parsed as the client will parse it (the same accepted
/// URLs, the same messages), but no client is built and nothing global is
/// touched; that happens when the backend is built ([`RedisBackend::new`]).
pub fn check_url(url: &str) -> Result<(), String> {
    if !url.starts_with("redis://") && !url.starts_with("rediss://") {
        return Err(format!(
            "invalid redis url \"{url}\" (expected \"redis://HOST:PORT[/DB]\" or \"rediss://HOST:PORT[/DB]\")"
        ));
    }
    // `redis::Client::open` is exactly this parse, wrapped in a client.
    redis::IntoConnectionInfo::into_connection_info(url)
        .map(|_| ())
        .map_err(|e| format!("invalid redis url \"{url}\": {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert!(check_url("redis://127.0.0.1:6379").is_ok());
        assert!(check_url("redis://:pw@127.0.0.1:6379/2").is_ok());
        assert!(check_url("rediss://h:6380").is_ok());
        assert!(check_url("http://h").is_err());
        assert_eq!(
            connection::redact("redis://u:secret@h:1/0"),
            "redis://u:***@h:1/0".to_string()
        );
    }
}
