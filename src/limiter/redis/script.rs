//! The Lua script ([`SCRIPT`], `limit_req.lua`) and its calling
//! convention: what is sent (mode, time, and per key its limit: algorithm,
//! count, period, burst, nginx's rate; [`ScriptKey`]) and what comes back
//! ([`Reply`]: per key what it stored and where it stands, or the limit
//! that refused, with the time it decided at and that key's stored state).
//!
//! The script is sent with `EVALSHA`; when the server answers `NOSCRIPT`
//! (after a restart, a failover to a replica that never ran it, or `SCRIPT
//! FLUSH`) the same call is sent again as `EVAL` with the script's text,
//! which runs it and caches it on that server. Not `SCRIPT LOAD` then
//! `EVALSHA`, as `redis::Script` does: in a Cluster `SCRIPT LOAD` goes to
//! every node and fails while one is down, whereas `EVAL` is routed by its
//! keys like `EVALSHA`, to the node that owns their slot.
//!
//! On Redis 7 the same scripts are also a function library, and calls go by
//! `FCALL` (same keys, same arguments, same reply) once it is loaded: less
//! time inside Redis. The `EVALSHA` path above stays the fallback for every
//! case `FCALL` cannot serve (`function`).

use super::function::Functions;
use crate::limiter::algorithm::Cell;
use crate::limiter::{Algorithm, Policy, Standing, Stored, algorithm};
use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, ServerErrorKind};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The Lua script: nginx's lookup and accounting over several keys, for
/// every algorithm.
pub const SCRIPT: &str = include_str!("../limit_req.lua");

/// The script for calls whose keys are all leaky buckets (`leaky_bucket.lua`):
/// the same decisions as [`SCRIPT`], for less time inside Redis.
pub const LEAKY_SCRIPT: &str = include_str!("../leaky_bucket.lua");

/// The hash fields `limit_req.lua` keeps a cell of `algorithm` in, in the
/// order `last`, `value`, `aux` of [`crate::limiter::algorithm::Cell`] (the
/// sliding log keeps a list of times instead: none). For the tests and for
/// clients that read or write the same state without the script.
pub fn hash_fields(algorithm: Algorithm) -> &'static [&'static str] {
    match algorithm {
        Algorithm::LeakyBucket => &["l", "e"],
        Algorithm::TokenBucket => &["last", "deficit"],
        Algorithm::Gcra => &["tat", "frac"],
        Algorithm::FixedWindow => &["window", "count"],
        Algorithm::SlidingWindow => &["window", "count", "prev"],
        Algorithm::SlidingLog => &[],
    }
}

/// Where the script takes `now` from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// Redis `TIME`: one clock for every instance (the product).
    Server,
    /// The `now` passed to [`crate::limiter::decide`]: for tests and replays
    /// that need exact, repeatable times. Never from the configuration file.
    Caller,
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

/// One key of a call: the Redis key and the limit that decides it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptKey {
    pub key: Vec<u8>,
    pub policy: Policy,
    /// `burst*1000`.
    pub burst: u64,
}

/// The script's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Accepted; per key, in order, the excess it stored (or would store,
    /// for [`Mode::Check`]) and where it stands: what the memory store's
    /// lookup or accounting answers.
    Accepted(Vec<Stored>),
    /// Key `index` (0-based) refuses.
    Busy {
        index: usize,
        excess: u64,
        wait_ms: u64,
        /// The script's `now` (Redis's clock, or the caller's with
        /// [`TimeSource::Caller`]).
        at: u64,
        /// That key's stored cell, which the refusal left unchanged (all
        /// zero for a sliding log): what the rejection cache decides from.
        cell: Cell,
    },
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

/// One of the two scripts: its text and its SHA1.
struct Lua {
    code: &'static str,
    sha: String,
}

impl Lua {
    fn new(code: &'static str) -> Lua {
        Lua {
            code,
            sha: redis::Script::new(code).get_hash().to_string(),
        }
    }
}

/// The script, with the clock it is told to use.
pub(super) struct LimitScript {
    script: Lua,
    leaky: Lua,
    /// The same scripts as a function library, when the server has it.
    functions: Arc<Functions>,
    time: TimeSource,
}

impl LimitScript {
    /// The scripts on the clock `time`; a load of their function library
    /// takes at most `load_timeout`.
    pub(super) fn new(time: TimeSource, load_timeout: Duration) -> LimitScript {
        LimitScript {
            script: Lua::new(SCRIPT),
            leaky: Lua::new(LEAKY_SCRIPT),
            functions: Functions::new(SCRIPT, LEAKY_SCRIPT, load_timeout),
            time,
        }
    }

    /// The name of the function library the calls use when they can.
    pub(super) fn library(&self) -> &str {
        self.functions.library()
    }

    pub(super) fn time(&self) -> TimeSource {
        self.time
    }

    /// One run over `keys` on `conn`, not bounded in time (the caller
    /// is). `now` is sent only with [`TimeSource::Caller`].
    pub(super) async fn run<C>(
        &self,
        conn: &mut C,
        mode: Mode,
        keys: &[ScriptKey],
        now: u64,
    ) -> Result<Reply, CallError>
    where
        C: ConnectionLike + Clone + Send + 'static,
    {
        if keys
            .iter()
            .all(|k| k.policy.algorithm == Algorithm::LeakyBucket)
        {
            // Per key its rate and burst; the standings come from the excess.
            let reply = self
                .invoke(conn, Which::Leaky, mode, now, keys, |cmd, k| {
                    cmd.arg(k.policy.rate.milli()).arg(k.burst);
                })
                .await?;
            return parse_leaky_reply(&reply, keys);
        }
        let reply = self
            .invoke(conn, Which::General, mode, now, keys, |cmd, k| {
                let p = &k.policy;
                cmd.arg(p.algorithm.name())
                    .arg(p.count)
                    .arg(p.period_ms)
                    .arg(k.burst)
                    .arg(p.rate.milli());
            })
            .await?;
        parse_reply(&reply, keys.len())
    }

    /// `FCALL` of `which` over `keys`, each key's arguments written by
    /// `args` after the mode and the time, when the library is loaded;
    /// else, or when the server cannot run it, `EVALSHA` of the script,
    /// and `EVAL` on `NOSCRIPT`.
    async fn invoke<C>(
        &self,
        conn: &mut C,
        which: Which,
        mode: Mode,
        now: u64,
        keys: &[ScriptKey],
        args: impl Fn(&mut Cmd, &ScriptKey),
    ) -> Result<Vec<i64>, CallError>
    where
        C: ConnectionLike + Clone + Send + 'static,
    {
        let (lua, function) = match which {
            Which::General => (&self.script, &self.functions.general),
            Which::Leaky => (&self.leaky, &self.functions.leaky),
        };
        let command = |eval: &str, body: &str| {
            let mut cmd = redis::cmd(eval);
            cmd.arg(body).arg(keys.len());
            for k in keys {
                cmd.arg(k.key.as_slice());
            }
            cmd.arg(mode.as_str());
            match self.time {
                TimeSource::Server => cmd.arg(""),
                TimeSource::Caller => cmd.arg(now),
            };
            for k in keys {
                args(&mut cmd, k);
            }
            cmd
        };
        if self.functions.ready(conn) {
            match command("FCALL", function).query_async(conn).await {
                Err(e) if self.functions.fall_back(&e) => {}
                reply => return reply.map_err(CallError::Redis),
            }
        }
        match command("EVALSHA", &lua.sha).query_async(conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                command("EVAL", lua.code).query_async(conn).await
            }
            reply => reply,
        }
        .map_err(CallError::Redis)
    }
}

/// Which of the two scripts a call runs.
#[derive(Clone, Copy)]
enum Which {
    General,
    Leaky,
}

/// The leaky script's reply over `keys`: `{1, e1..en}` or `{0, i, excess,
/// wait, now, l, e, 0}`.
fn parse_leaky_reply(v: &[i64], keys: &[ScriptKey]) -> Result<Reply, CallError> {
    let bad = || CallError::Reply(format!("{v:?}"));
    let u = |x: i64| u64::try_from(x).map_err(|_| bad());
    match v.first() {
        Some(1) if v.len() == keys.len() + 1 => Ok(Reply::Accepted(
            v[1..]
                .iter()
                .zip(keys)
                .map(|(&e, k)| {
                    let excess = u(e)?;
                    // Past the burst only in "account" mode, where the
                    // memory store reports no standing either.
                    let standing = if excess > k.burst {
                        Standing::default()
                    } else {
                        algorithm::leaky_standing(k.policy.rate, k.burst, excess)
                    };
                    Ok(Stored { excess, standing })
                })
                .collect::<Result<_, _>>()?,
        )),
        Some(0) => parse_reply(v, keys.len()),
        _ => Err(bad()),
    }
}

/// The script's reply over `n` keys: `{1, e1, r1, t1, .., en, rn, tn}`
/// (excess, remaining, reset_ms) or `{0, i, excess, wait, now, last,
/// value, aux}`.
fn parse_reply(v: &[i64], n: usize) -> Result<Reply, CallError> {
    let bad = || CallError::Reply(format!("{v:?}"));
    let u = |x: i64| u64::try_from(x).map_err(|_| bad());
    match v.first() {
        Some(1) if v.len() == 3 * n + 1 => Ok(Reply::Accepted(
            v[1..]
                .chunks_exact(3)
                .map(|s| {
                    Ok(Stored {
                        excess: u(s[0])?,
                        standing: Standing {
                            remaining: u(s[1])?,
                            reset_ms: u(s[2])?,
                        },
                    })
                })
                .collect::<Result<_, _>>()?,
        )),
        Some(0) if v.len() == 8 => {
            let index = u(v[1])? as usize;
            if index == 0 || index > n {
                return Err(bad());
            }
            Ok(Reply::Busy {
                index: index - 1,
                excess: u(v[2])?,
                wait_ms: u(v[3])?,
                at: u(v[4])?,
                cell: Cell {
                    last: u(v[5])?,
                    value: u(v[6])?,
                    aux: u(v[7])?,
                },
            })
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies() {
        let stored = |excess, remaining, reset_ms| Stored {
            excess,
            standing: Standing {
                remaining,
                reset_ms,
            },
        };
        assert_eq!(
            parse_reply(&[1, 0, 5, 200, 2000, 0, 500], 2).unwrap(),
            Reply::Accepted(vec![stored(0, 5, 200), stored(2000, 0, 500)])
        );
        assert_eq!(
            parse_reply(&[0, 2, 6000, 500, 9000, 8000, 5000, 0], 2).unwrap(),
            Reply::Busy {
                index: 1,
                excess: 6000,
                wait_ms: 500,
                at: 9000,
                cell: Cell {
                    last: 8000,
                    value: 5000,
                    aux: 0
                },
            }
        );
        assert!(parse_reply(&[0, 3, 1, 1, 0, 0, 0, 0], 2).is_err());
        assert!(
            parse_reply(&[0, 2, 6000, 500], 2).is_err(),
            "the old short refusal"
        );
        assert!(parse_reply(&[1, 0, 2000], 2).is_err());
        assert!(parse_reply(&[1, 0, -1, 0], 1).is_err());
    }
}
