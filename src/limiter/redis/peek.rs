//! One key of a Redis zone looked at or forgotten (the admin API): its
//! state read with Redis's clock, so that it is described exactly as the
//! next decision would find it, and `DEL` for every instance at once,
//! with a `PUBLISH` that tells every instance to drop what it remembers
//! of the key ([`super::forgive`]).

use super::script::hash_fields;
use super::{CallError, RedisZone};
use crate::limiter::algorithm::{Algorithm, Cell, Log};

/// Reads a state and the server's time in one call (one clock with the
/// decisions).
const PEEK: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == 'log' then
  return {now, redis.call('LRANGE', KEYS[1], 0, -1)}
end
return {now, redis.call('HMGET', KEYS[1], unpack(ARGV, 2))}
";

/// Deletes a state and tells every instance, in one call: the message
/// leaves after the key is gone.
const FORGET: &str = r"
local n = redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], KEYS[1])
return n
";

impl RedisZone {
    /// The state of client key `key` under `algorithm`, and Redis's `now`;
    /// `None` for the state when the key has none.
    pub async fn peek(
        &self,
        key: &[u8],
        algorithm: Algorithm,
    ) -> Result<(u64, Option<(Cell, Log)>), CallError> {
        let mut conn = self.backend.conn().map_err(CallError::Redis)?;
        // EVAL, not EVALSHA: a rare call, routed by its key in a Cluster.
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(PEEK).arg(1).arg(self.redis_key(key));
        cmd.arg(if algorithm == Algorithm::SlidingLog {
            "log"
        } else {
            "hash"
        });
        for f in hash_fields(algorithm) {
            cmd.arg(*f);
        }
        let call = cmd.query_async::<(u64, Vec<Option<u64>>)>(&mut conn);
        let deadline = self
            .backend
            .config
            .timeout
            .max(std::time::Duration::from_secs(1));
        let (now, values) = match tokio::time::timeout(deadline, call).await {
            Ok(r) => r.map_err(CallError::Redis)?,
            Err(_) => return Err(CallError::Timeout(deadline)),
        };
        if algorithm == Algorithm::SlidingLog {
            let log: Log = values.into_iter().flatten().collect();
            return Ok((now, (!log.is_empty()).then(|| (Cell::default(), log))));
        }
        if values.iter().all(Option::is_none) {
            return Ok((now, None));
        }
        let get = |i: usize| values.get(i).copied().flatten().unwrap_or(0);
        let cell = Cell {
            last: get(0),
            value: get(1),
            aux: get(2),
        };
        Ok((now, Some((cell, Log::new()))))
    }

    /// Forget client key `key` for every instance (its state, and what
    /// each instance remembers of it); whether it had a state.
    pub async fn forget(&self, key: &[u8]) -> Result<bool, CallError> {
        let mut conn = self.backend.conn().map_err(CallError::Redis)?;
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(FORGET).arg(1).arg(self.redis_key(key));
        cmd.arg(super::forgive::channel(&self.backend.config.prefix));
        let del = cmd.query_async::<u64>(&mut conn);
        let deadline = self
            .backend
            .config
            .timeout
            .max(std::time::Duration::from_secs(1));
        match tokio::time::timeout(deadline, del).await {
            Ok(r) => r.map(|n| n > 0).map_err(CallError::Redis),
            Err(_) => Err(CallError::Timeout(deadline)),
        }
    }
}
