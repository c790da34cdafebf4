//! The zones of a new configuration. A zone that stays the same across a
//! reload (name and size, and for a limit_req zone the same place: this
//! process or the same Redis) keeps its states and counters, as nginx keeps
//! a shared memory zone; the same zone with a new key is refused, as nginx
//! refuses it. A Redis zone's rejection cache is new with every generation:
//! it is exact only for the policy and the limits it was made for.

use super::super::compiled::{CompileError, Config, Zone};
use super::super::spec::{Backend, ConnZoneSpec, Level, Spec, ZoneSpec};
use crate::connlimit::ConnZone;
use crate::errlog::{self, Severity};
use crate::limiter::redis::{EventSink, RedisEvent};
use crate::limiter::top::TopKeys;
use crate::limiter::{
    Algorithm, MemoryZone, Policy, RedisBackend, RedisZone, RejectCache, Store, ZoneRef,
};
use std::sync::Arc;

/// One backend for every Redis zone, when a zone uses it; kept across a
/// reload that does not change `[redis]` (so is its connection).
pub(super) fn redis_backend(
    spec: &Spec,
    previous: Option<&Config>,
) -> Result<Option<Arc<RedisBackend>>, CompileError> {
    let Some(cfg) = &spec.redis else {
        return Ok(None);
    };
    if !spec.zones.iter().any(|z| z.backend == Backend::Redis) {
        return Ok(None);
    }
    Ok(Some(match previous.and_then(|p| p.redis.as_ref()) {
        Some(old) if old.config() == cfg => old.clone(),
        _ => RedisBackend::new(cfg.clone(), redis_log()).map_err(CompileError::Redis)?,
    }))
}

/// The Redis backend's events as error-log lines, each at its severity.
fn redis_log() -> EventSink {
    Arc::new(|e: RedisEvent<'_>| {
        let sev = match e {
            RedisEvent::Reachable { .. }
            | RedisEvent::Recovered { .. }
            | RedisEvent::Resubscribed { .. } => Severity::Notice,
            RedisEvent::Unreachable { .. } | RedisEvent::Unsubscribed { .. } => Severity::Warn,
            RedisEvent::ZoneError { .. } => Severity::Error,
        };
        errlog::emit(sev, format_args!("{e}"));
    })
}

/// The window of a zone's most limited keys: `top` reports the last one
/// to two minutes.
pub(crate) const TOP_WINDOW_MS: u64 = 60_000;
/// Per zone (by index), the largest `burst*1000` of any `limit_req` line
/// naming it, at any level: the rejection cache keeps a refusal only while
/// no line of the zone could admit the key (a superset of the lines in
/// force is only more careful).
pub(super) fn widest_bursts(spec: &Spec) -> Vec<u64> {
    let mut widest = vec![0; spec.zones.len()];
    let levels = std::iter::once(&spec.http).chain(
        spec.servers
            .iter()
            .flat_map(|s| std::iter::once(&s.level).chain(s.locations.iter().map(|l| &l.level))),
    );
    for l in levels.flat_map(|l: &Level| l.limit_req.iter().flatten()) {
        widest[l.zone] = widest[l.zone].max(l.burst);
    }
    widest
}

/// The limit_req zones, each with its previous states when it keeps them.
/// `widest[i]`: see [`widest_bursts`].
pub(super) fn zones(
    specs: Vec<ZoneSpec>,
    previous: Option<&Config>,
    redis: Option<&Arc<RedisBackend>>,
    top_keys: usize,
    widest: &[u64],
) -> Result<Vec<Arc<Zone>>, CompileError> {
    specs
        .into_iter()
        .zip(widest)
        .map(|(z, &widest)| {
            let old = previous.and_then(|p| p.zones.iter().find(|o| *o.name() == *z.name));
            let store = store(&z, old.map(|o| &**o), redis)?;
            let cache = match &*store {
                Store::Redis(r) if r.backend().config().reject_cache => {
                    Some(RejectCache::with_size(z.size, z.policy, widest))
                }
                _ => None,
            };
            let zone = Arc::new(Zone {
                limiter: Arc::new(ZoneRef {
                    counts: old.map(|o| o.limiter.counts.clone()).unwrap_or_default(),
                    name: z.name.into(),
                    policy: z.policy,
                    store,
                    reject_cache: cache,
                }),
                // The most limited keys, kept across a reload that keeps
                // their meaning (the same key and sketch size).
                top: match old {
                    Some(o) if o.top.k() == top_keys && o.key.source() == z.key.source() => {
                        o.top.clone()
                    }
                    _ => Arc::new(TopKeys::new(top_keys, TOP_WINDOW_MS)),
                },
                key: z.key,
                ipv6_prefix: z.ipv6_prefix,
                exempt: z.exempt,
                size: z.size,
            });
            // Keys forgiven on another instance are forgotten here too.
            if let Store::Redis(r) = &*zone.limiter.store {
                r.backend().watch(&zone.limiter, &zone.top);
            }
            Ok(zone)
        })
        .collect()
}

/// Where zone `z` keeps its states: `old`'s store if it stays in the same
/// place with the same size and its states still mean the same, else a new
/// one.
fn store(
    z: &ZoneSpec,
    old: Option<&Zone>,
    redis: Option<&Arc<RedisBackend>>,
) -> Result<Arc<Store>, CompileError> {
    let same_place = |o: &Zone| match (&*o.limiter.store, z.backend, redis) {
        (Store::Memory(_), Backend::Memory, _) => true,
        (Store::Redis(r), Backend::Redis, Some(b)) => Arc::ptr_eq(r.backend(), b),
        _ => false,
    };
    Ok(match old {
        Some(o) if o.size == z.size && o.key.source() != z.key.source() => {
            return Err(CompileError::ZoneKeyChanged {
                zone: z.name.clone(),
                new: z.key.source().to_string(),
                old: o.key.source().to_string(),
            });
        }
        Some(o)
            if o.size == z.size && same_place(o) && same_states(&o.limiter.policy, &z.policy) =>
        {
            o.limiter.store.clone()
        }
        _ => match (z.backend, redis) {
            (Backend::Redis, Some(b)) => {
                Arc::new(Store::Redis(RedisZone::new(b.clone(), &z.name, z.size)))
            }
            (Backend::Redis, None) => {
                return Err(CompileError::Redis(format!(
                    "zone \"{}\" has backend = \"redis\" and there is no [redis]",
                    z.name
                )));
            }
            (Backend::Memory, _) => Arc::new(Store::Memory(MemoryZone::with_size(z.size))),
        },
    })
}

/// Whether states stored under `old` mean the same under `new`: the same
/// algorithm (a cell is read by its algorithm), and for a sliding log the
/// same count (each log is allocated for it). A new rate alone keeps the
/// states, as nginx keeps a zone whose rate changed.
fn same_states(old: &Policy, new: &Policy) -> bool {
    old.algorithm == new.algorithm
        && (new.algorithm != Algorithm::SlidingLog || old.count == new.count)
}

/// The limit_conn zones. One with the same name and size keeps its counts
/// (so the requests in flight under the previous configuration still
/// count), as nginx keeps a shared zone across a reload.
pub(super) fn conn_zones(
    specs: Vec<ConnZoneSpec>,
    previous: Option<&Config>,
) -> Result<Vec<Arc<ConnZone>>, CompileError> {
    specs
        .into_iter()
        .map(|z| {
            let old = previous.and_then(|p| p.conn_zones.iter().find(|o| *o.name == *z.name));
            Ok(match old {
                Some(o) if o.size == z.size && o.key.source() != z.key.source() => {
                    return Err(CompileError::ConnZoneKeyChanged {
                        zone: z.name,
                        new: z.key.source().to_string(),
                        old: o.key.source().to_string(),
                    });
                }
                Some(o) if o.size == z.size => o.clone(),
                _ => Arc::new(ConnZone::new(&z.name, z.key, z.size)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, parse_str};
    use std::sync::Arc;

    fn compile(zone: &str, previous: Option<&Config>) -> Config {
        let text = format!(
            "[zones.z]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\n{zone}\n[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\nlimit_req = {{ zone = \"z\" }}\n"
        );
        let spec = parse_str("t.toml", &text).unwrap_or_else(|e| panic!("{e}"));
        Config::compile(spec, previous).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A Redis zone has a rejection cache unless `reject_cache = false`,
    /// knowing the largest burst any `limit_req` line gives the zone, at
    /// any level; a memory zone has none; a reload makes a new one.
    #[test]
    fn redis_zones_get_a_rejection_cache_for_their_widest_limit() {
        let text = |cache: bool| {
            format!(
                r#"limit_req = {{ zone = "r", burst = 5 }}
[redis]
url = "redis://127.0.0.1:1"
reject_cache = {cache}
[zones.r]
key = "$binary_remote_addr"
size = "64k"
backend = "redis"
[zones.m]
key = "$binary_remote_addr"
size = "1m"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
limit_req = [{{ zone = "r", burst = 3 }}, {{ zone = "m", burst = 9 }}]
[[servers.locations]]
path = "/a"
limit_req = {{ zone = "r", burst = 7 }}
"#
            )
        };
        let compile = |cache: bool, previous: Option<&Config>| {
            let spec = parse_str("t.toml", &text(cache)).unwrap_or_else(|e| panic!("{e}"));
            Config::compile(spec, previous).unwrap_or_else(|e| panic!("{e}"))
        };
        let first = compile(true, None);
        let cache = first.zones[0].limiter.reject_cache.as_ref().unwrap();
        assert_eq!((cache.widest(), cache.capacity()), (7000, 512));
        assert!(
            first.zones[1].limiter.reject_cache.is_none(),
            "a memory zone"
        );
        let again = compile(true, Some(&first));
        let again_cache = again.zones[0].limiter.reject_cache.as_ref().unwrap();
        assert!(!std::ptr::eq(cache, again_cache), "one per generation");
        assert!(compile(false, None).zones[0].limiter.reject_cache.is_none());
    }

    /// A reload keeps a zone's states while they mean the same: a new rate
    /// keeps them (as nginx), a new algorithm or sliding-log count does not.
    #[test]
    fn a_reload_keeps_states_only_while_they_mean_the_same() {
        let store = |c: &Config| c.zones[0].limiter.store.clone();
        let first = compile("rate = \"2r/s\"", None);
        let faster = compile("rate = \"5r/s\"", Some(&first));
        assert!(Arc::ptr_eq(&store(&first), &store(&faster)));
        let tb = compile(
            "rate = \"5r/s\"\nalgorithm = \"token_bucket\"",
            Some(&faster),
        );
        assert!(!Arc::ptr_eq(&store(&faster), &store(&tb)));
        let log = compile("rate = \"5r/s\"\nalgorithm = \"sliding_log\"", Some(&tb));
        let longer = compile("rate = \"5r/2s\"\nalgorithm = \"sliding_log\"", Some(&log));
        assert!(Arc::ptr_eq(&store(&log), &store(&longer)), "same count");
        let more = compile(
            "rate = \"6r/2s\"\nalgorithm = \"sliding_log\"",
            Some(&longer),
        );
        assert!(!Arc::ptr_eq(&store(&longer), &store(&more)), "new count");
    }
}
