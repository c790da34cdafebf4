//! The two scripts as a Redis 7 function library, called with `FCALL`,
//! and when a server cannot (or no longer does) run it.
//!
//! Why: `FCALL` saves Redis 1–5 µs per decision against `EVALSHA` (no
//! SHA lookup, no per-call script setup; scripts/benchmarks.md "Redis
//! zones"), and a decision is mostly Redis time. But functions need Redis
//! 7, must be loaded (`FUNCTION LOAD`) before they can be called, and are
//! lost by a restart without persistence, `FUNCTION FLUSH` or a failover
//! to a node that never had them. So [`Functions`] keeps, per backend (one
//! link), whether decisions go by `FCALL`, and every path that cannot use
//! it falls back to the script path (`EVALSHA`, `EVAL` on `NOSCRIPT`),
//! which needs no load:
//!
//! - the load runs in the background, started by the first call that finds
//!   it due; that call and every other until it succeeds use the script
//!   path, so no decision waits for a load nor fails because of one;
//! - a server that does not know `FUNCTION` or `FCALL` (Redis < 7, the
//!   command renamed away, an ACL without them): the script path from then
//!   on;
//! - a call answered "function not found": that call goes the script path
//!   and a new load is started (at once; after a failed load, a second
//!   later): it never fails the request;
//! - a load that fails otherwise (a Cluster master down: `FUNCTION LOAD`
//!   goes to every master and fails if one does not answer) is tried again
//!   a second later, the script path meanwhile.
//!
//! The library's name holds a hash of its code (`sluice_<hash>`, and so do
//! its functions' names, which Redis keeps in one namespace): two sluice
//! versions with different scripts load two libraries side by side, and
//! `FUNCTION LOAD REPLACE` of a name can only put back the same code. A
//! replica gets the library from its master, so a promoted replica has it.

use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, ServerErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How long after a failed load the next one is tried.
const RELOAD_AFTER: Duration = Duration::from_secs(1);

const NEEDED: u8 = 0;
const LOADING: u8 = 1;
const LOADED: u8 = 2;
const UNSUPPORTED: u8 = 3;

/// The library, its two functions, and whether calls use them.
pub(super) struct Functions {
    /// `#!lua name=…` and both scripts, each wrapped in a function of
    /// `(KEYS, ARGV)`: the bodies run unchanged.
    code: String,
    /// The function running `limit_req.lua`.
    pub(super) general: String,
    /// The function running `leaky_bucket.lua`.
    pub(super) leaky: String,
    /// One of NEEDED, LOADING, LOADED, UNSUPPORTED.
    state: AtomicU8,
    /// Milliseconds since `epoch` before which a load is not tried again.
    retry_at: AtomicU64,
    epoch: Instant,
    /// The most a load may take.
    timeout: Duration,
}

impl Functions {
    /// The library of `general` (`limit_req.lua`) and `leaky`
    /// (`leaky_bucket.lua`); a load takes at most `timeout`.
    pub(super) fn new(general: &str, leaky: &str, timeout: Duration) -> Arc<Functions> {
        let body = format!(
            "local function general(KEYS, ARGV)\n{general}\nend\n\
             local function leaky(KEYS, ARGV)\n{leaky}\nend\n"
        );
        let hash = redis::Script::new(&body).get_hash().to_string();
        let name = format!("sluice_{}", &hash[..16]);
        let (general, leaky) = (format!("{name}_limit_req"), format!("{name}_leaky"));
        let code = format!(
            "#!lua name={name}\n{body}\
             redis.register_function('{general}', general)\n\
             redis.register_function('{leaky}', leaky)\n"
        );
        Arc::new(Functions {
            code,
            general,
            leaky,
            state: AtomicU8::new(NEEDED),
            retry_at: AtomicU64::new(0),
            epoch: Instant::now(),
            timeout,
        })
    }

    /// The library's name (`sluice_<hash>`).
    pub(super) fn library(&self) -> &str {
        self.general.trim_end_matches("_limit_req")
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Whether a call may go by `FCALL` now. When a load is due, starts
    /// it in the background on a clone of `conn` (answering no: this call
    /// takes the script path).
    pub(super) fn ready<C>(self: &Arc<Self>, conn: &C) -> bool
    where
        C: ConnectionLike + Clone + Send + 'static,
    {
        match self.state.load(Ordering::Acquire) {
            LOADED => true,
            NEEDED if self.now_ms() >= self.retry_at.load(Ordering::Relaxed) => {
                self.start_load(conn.clone());
                false
            }
            _ => false,
        }
    }

    fn start_load<C>(self: &Arc<Self>, mut conn: C)
    where
        C: ConnectionLike + Send + 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self
            .state
            .compare_exchange(NEEDED, LOADING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return; // another call started it
        }
        // A load dropped unfinished, even unstarted (its runtime shut
        // down), is due again: the guard goes with the task.
        let guard = Unfinished(self.clone());
        runtime.spawn(async move {
            let this = &guard.0;
            let mut cmd = redis::cmd("FUNCTION");
            cmd.arg("LOAD").arg("REPLACE").arg(&this.code);
            let load = cmd.query_async::<redis::Value>(&mut conn);
            let next = match tokio::time::timeout(this.timeout, load).await {
                Ok(Ok(_)) => LOADED,
                Ok(Err(e)) if already_loaded(&e) => LOADED,
                Ok(Err(e)) if unsupported(&e) => UNSUPPORTED,
                _ => {
                    let at = this.now_ms() + RELOAD_AFTER.as_millis() as u64;
                    this.retry_at.store(at, Ordering::Relaxed);
                    NEEDED
                }
            };
            let _ = this
                .state
                .compare_exchange(LOADING, next, Ordering::AcqRel, Ordering::Relaxed);
        });
    }

    /// An `FCALL` failed with `e`: whether the call should go the script
    /// path instead (and what that says about the server, noted).
    pub(super) fn fall_back(&self, e: &RedisError) -> bool {
        if unsupported(e) {
            self.state.store(UNSUPPORTED, Ordering::Release);
            true
        } else if missing(e) {
            // Lost (restart, FUNCTION FLUSH, failover): load it again.
            let _ =
                self.state
                    .compare_exchange(LOADED, NEEDED, Ordering::AcqRel, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

/// Puts a load that never finished back to due: dropped with its task.
struct Unfinished(Arc<Functions>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        let _ = self
            .0
            .state
            .compare_exchange(LOADING, NEEDED, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The server answered that no such function is loaded.
fn missing(e: &RedisError) -> bool {
    e.to_string()
        .to_ascii_lowercase()
        .contains("function not found")
}

/// `FUNCTION LOAD` of a library that is there: its name says it is ours.
fn already_loaded(e: &RedisError) -> bool {
    e.to_string()
        .to_ascii_lowercase()
        .contains("already exists")
}

/// The server does not know the command (Redis < 7, renamed away) or
/// this user may not run it.
fn unsupported(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm)
        || e.to_string()
            .to_ascii_lowercase()
            .contains("unknown command")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_code() {
        let t = Duration::from_secs(1);
        let a = Functions::new("return 1", "return 2", t);
        let b = Functions::new("return 1", "return 3", t);
        assert_ne!(a.library(), b.library());
        assert_ne!(a.general, b.general);
        assert!(a.library().starts_with("sluice_") && a.library().len() == 23);
        assert!(a.code.starts_with(&format!("#!lua name={}\n", a.library())));
        assert!(a.leaky.starts_with(a.library()) && a.leaky.ends_with("_leaky"));
    }
}
