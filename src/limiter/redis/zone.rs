//! A zone whose states live in Redis: its key layout, its counters, and its
//! local in-memory fallback.
//!
//! Keys: `PREFIX:ZONE:{HEX}`, the client key hex-encoded (binary keys such
//! as `$binary_remote_addr` are safe) and used as the Redis Cluster hash tag,
//! so that the limits of one location sharing a client key share a slot
//! ([`key_slot`]) and are decided by one script call.

use super::events::RedisEvent;
use super::{CallError, RedisBackend};
use crate::limiter::memory::MemoryZone;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one Redis zone, for its error log lines and `/metrics`.
#[derive(Debug, Default)]
pub struct ZoneStats {
    /// Redis calls for this zone that failed or timed out.
    pub errors: AtomicU64,
    /// Decisions for this zone made by `on_error` (failures, and decisions
    /// taken while the breaker was open).
    pub fallbacks: AtomicU64,
    /// Refusals answered by the zone's rejection cache, without Redis.
    pub cache_hits: AtomicU64,
    /// Keys of this zone forgiven on any instance, heard
    /// ([`super::forgive`]).
    pub invalidations: AtomicU64,
    /// Seconds (since the backend's start) of the last reported error, + 1.
    last_logged: AtomicU64,
    suppressed: AtomicU64,
}

/// A zone whose states live in Redis.
pub struct RedisZone {
    pub(super) backend: Arc<RedisBackend>,
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

    /// Count a failed call for this zone, and report it as an event at most
    /// once a second (the others are counted as suppressed, and the next
    /// report says how many).
    pub(super) fn report(&self, err: &CallError) {
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
            (self.backend.events)(RedisEvent::ZoneError {
                zone: &self.name,
                error: err,
                on_error: self.backend.config.on_error,
                suppressed: self.stats.suppressed.swap(0, Ordering::Relaxed),
            });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::redis::{OnError, RedisConfig, TimeSource};
    use std::sync::Mutex;
    use std::time::Duration;

    fn config(on_error: OnError) -> RedisConfig {
        RedisConfig {
            on_error,
            ..RedisConfig::url("redis://127.0.0.1:1")
        }
    }

    fn backend(on_error: OnError) -> Arc<RedisBackend> {
        RedisBackend::with_time_source(config(on_error), TimeSource::Server).unwrap()
    }

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
        let z = RedisZone::new(backend(OnError::Allow), "z_a", 1 << 20);
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
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let b = RedisBackend::build(
            config(OnError::Local),
            TimeSource::Server,
            Arc::new(move |e| sink.lock().unwrap().push(e.to_string())),
        )
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
        assert_eq!(
            *lines.lock().unwrap(),
            [
                "redis error in limit_req zone \"z\": no answer within 50 ms; on_error=local",
                "redis error in limit_req zone \"z\": no answer within 50 ms; on_error=local (5 similar errors suppressed)",
            ]
        );
    }
}
