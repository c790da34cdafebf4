//! A key forgiven on one instance is forgotten by every instance.
//!
//! Why: `DELETE …/keys/KEY` (the admin API) deletes the key's state in
//! Redis, which every instance reads, but each instance also remembers
//! refusals in its own rejection cache ([`super::RejectCache`]), and
//! keeps its own `on_error = "local"` fallback and most-limited-keys
//! sketch. Without a word from the instance that forgave the key, another
//! would go on refusing it from its cache until Redis would have admitted
//! it anyway.
//!
//! How: the deletion and a `PUBLISH` of the key's Redis key
//! (`PREFIX:ZONE:{HEX}`) on [`channel`] are one script call
//! ([`super::RedisZone::forget`]), so the message leaves after the key is
//! gone. Every backend keeps one subscriber connection on its own task
//! ([`RedisBackend::listen`]) to the server that serves the zones: the
//! `url`, the first Cluster seed that answers (a Cluster broadcasts
//! `PUBLISH` to every node, replicas included), or the master the
//! sentinels name (followed: a new master is subscribed to at once). What
//! it hears, it forgets in every zone of that name the backend serves
//! ([`RedisBackend::watch`]), in every configuration generation still
//! alive, and counts (`invalidations`).
//!
//! Exactness: a message also retires every cached refusal of the backend
//! made before it (the cache's epoch, as a failed call does), so a refusal
//! Redis answered before the deletion but that arrived after the message
//! is never used. Messages are not stored: one sent while the subscriber
//! was not connected is lost. So the caches are not used at all while it
//! is not subscribed, and every (re)subscription retires every entry made
//! before it: the cache only saves round trips, Redis still decides.
//!
//! Outages: the subscriber reconnects by itself, 100 ms doubling to 5 s;
//! `PING` every second finds a connection that died silently. An outage is
//! reported once ([`RedisEvent::Unsubscribed`]), and its end once
//! ([`RedisEvent::Resubscribed`]). The task ends with the backend (a
//! reload that changed `[redis]`).

use super::RedisBackend;
use super::events::RedisEvent;
use super::link::connect_timeout;
use crate::limiter::top::TopKeys;
use crate::limiter::{Store, ZoneRef};
use futures_core::Stream;
use redis::aio::{PubSubSink, PubSubStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The first part of the channel: `sluice:forget:PREFIX`.
pub const CHANNEL_HEAD: &str = "sluice:forget:";

/// How often the subscriber's connection is checked (`PING`).
const CHECK: Duration = Duration::from_secs(1);
/// Reconnection backoff: from `MIN_BACKOFF`, doubling to `MAX_BACKOFF`.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The channel forgiven keys of the zones under `prefix` are published on.
pub fn channel(prefix: &str) -> String {
    format!("{CHANNEL_HEAD}{prefix}")
}

/// No subscriber (tests and tools that build zones by hand): the caches
/// are used as they are.
const NOT_LISTENING: u8 = 0;
const SUBSCRIBED: u8 = 1;
/// A subscriber runs but is not subscribed: the caches are not used.
const DOWN: u8 = 2;

/// One zone of one generation that a backend serves.
struct Watched {
    zone: Weak<ZoneRef>,
    top: Weak<TopKeys>,
}

/// A backend's side of forgiveness: its zones, its subscriber's state.
#[derive(Default)]
pub(super) struct Forgiveness {
    zones: Mutex<Vec<Watched>>,
    state: AtomicU8,
    started: AtomicBool,
    /// Subscriptions made and messages heard: part of the caches' epoch.
    events: AtomicU64,
}

impl Forgiveness {
    /// The caches may be used (`false`: the subscriber is not subscribed).
    pub(super) fn usable(&self) -> bool {
        matches!(
            self.state.load(Ordering::Acquire),
            NOT_LISTENING | SUBSCRIBED
        )
    }

    /// Bumped by every subscription and every message heard.
    pub(super) fn epoch(&self) -> u64 {
        self.events.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Watched>> {
        self.zones.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why a subscription ended.
enum Ended {
    /// The backend is gone.
    Dropped,
    /// The Sentinel master moved: subscribe to the new one.
    Moved,
    Lost(String),
}

impl RedisBackend {
    /// Forget a forgiven key in `zone` (this generation's) and `top`, when
    /// another instance (or this one) forgives it; starts the subscriber
    /// if it does not run yet (inside the tokio runtime; else
    /// [`RedisBackend::connect_in_background`] starts it).
    pub fn watch(self: &Arc<Self>, zone: &Arc<ZoneRef>, top: &Arc<TopKeys>) {
        let mut zones = self.forgiveness.lock();
        zones.retain(|w| w.zone.strong_count() > 0);
        zones.push(Watched {
            zone: Arc::downgrade(zone),
            top: Arc::downgrade(top),
        });
        drop(zones);
        if tokio::runtime::Handle::try_current().is_ok() {
            self.listen();
        }
    }

    /// Start the subscriber, once (inside the tokio runtime).
    pub(super) fn listen(self: &Arc<Self>) {
        let f = &self.forgiveness;
        if f.started.swap(true, Ordering::AcqRel) {
            return;
        }
        f.state.store(DOWN, Ordering::Release);
        tokio::spawn(subscriber(Arc::downgrade(self)));
    }

    /// Forgiven keys heard so far (every zone).
    pub fn forgiveness_epoch(&self) -> u64 {
        self.forgiveness.epoch()
    }

    /// A message: `payload` is the Redis key of a forgiven client key.
    fn heard(&self, payload: &[u8]) {
        self.forgiveness.events.fetch_add(1, Ordering::AcqRel);
        let Some((zone, key)) = parse(payload, &self.config.prefix) else {
            return;
        };
        let watched: Vec<(Arc<ZoneRef>, Option<Arc<TopKeys>>)> = self
            .forgiveness
            .lock()
            .iter()
            .filter_map(|w| Some((w.zone.upgrade()?, w.top.upgrade())))
            .filter(|(z, _)| z.name.as_bytes() == zone)
            .collect();
        let mut counted = false;
        for (z, top) in watched {
            if let Some(c) = &z.reject_cache {
                c.forget(&key);
            }
            if let Some(t) = top {
                t.forget(&key);
            }
            if let Store::Redis(r) = &*z.store {
                r.local().forget(&key);
                if !counted {
                    r.stats.invalidations.fetch_add(1, Ordering::Relaxed);
                    counted = true;
                }
            }
        }
    }

    /// One subscription: connected and subscribed, the sink and stream,
    /// and for Sentinel the master's address.
    async fn subscribe(
        &self,
        seed: &mut usize,
    ) -> Result<(PubSubSink, PubSubStream, Option<(String, u16)>), String> {
        let (client, master) = self.link.pubsub_client(seed)?;
        let channel = channel(&self.config.prefix);
        let connect = async {
            let mut p = client.get_async_pubsub().await?;
            p.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(p.split())
        };
        match tokio::time::timeout(connect_timeout(self.config.timeout) * 2, connect).await {
            Ok(Ok((sink, stream))) => Ok((sink, stream, master)),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer to SUBSCRIBE".into()),
        }
    }
}

/// The subscriber: subscribe, listen until the connection ends, again
/// after a backoff; until the backend is dropped.
async fn subscriber(backend: Weak<RedisBackend>) {
    let (mut backoff, mut seed, mut reported) = (MIN_BACKOFF, 0, false);
    loop {
        let Some(b) = backend.upgrade() else { return };
        let (b, error) = match b.subscribe(&mut seed).await {
            Ok((sink, stream, master)) => {
                b.forgiveness.events.fetch_add(1, Ordering::AcqRel);
                b.forgiveness.state.store(SUBSCRIBED, Ordering::Release);
                if std::mem::take(&mut reported) {
                    (b.events)(RedisEvent::Resubscribed { url: &b.shown_url });
                }
                backoff = MIN_BACKOFF;
                drop(b);
                let ended = listen(&backend, sink, stream, master).await;
                let Some(b) = backend.upgrade() else { return };
                b.forgiveness.state.store(DOWN, Ordering::Release);
                match ended {
                    Ended::Dropped => return,
                    Ended::Moved => continue,
                    Ended::Lost(e) => (b, e),
                }
            }
            Err(e) => {
                b.forgiveness.state.store(DOWN, Ordering::Release);
                (b, e)
            }
        };
        if !std::mem::replace(&mut reported, true) {
            let url = &b.shown_url;
            (b.events)(RedisEvent::Unsubscribed { url, error: &error });
        }
        drop(b);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Hear messages until the connection ends (or the backend is dropped, or
/// the Sentinel master moves away from `master`).
async fn listen(
    backend: &Weak<RedisBackend>,
    mut sink: PubSubSink,
    mut stream: PubSubStream,
    master: Option<(String, u16)>,
) -> Ended {
    let mut check = tokio::time::interval(CHECK);
    check.tick().await;
    loop {
        let next = std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx));
        tokio::select! {
            msg = next => {
                let Some(msg) = msg else {
                    return Ended::Lost("the connection closed".into());
                };
                let Some(b) = backend.upgrade() else { return Ended::Dropped };
                b.heard(msg.get_payload_bytes());
            }
            _ = check.tick() => {
                let Some(b) = backend.upgrade() else { return Ended::Dropped };
                if master.is_some() && b.link.sentinel_master() != master {
                    return Ended::Moved;
                }
                let limit = connect_timeout(b.config.timeout);
                drop(b);
                match tokio::time::timeout(limit, sink.ping::<redis::Value>()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Ended::Lost(e.to_string()),
                    Err(_) => return Ended::Lost("no answer to PING".into()),
                }
            }
        }
    }
}

/// `PREFIX:ZONE:{HEX}` → (zone, client key); `None` for anything else.
fn parse<'a>(redis_key: &'a [u8], prefix: &str) -> Option<(&'a [u8], Vec<u8>)> {
    let rest = redis_key
        .strip_prefix(prefix.as_bytes())?
        .strip_prefix(b":")?;
    let open = rest.windows(2).rposition(|w| w == b":{")?;
    let hex = rest[open + 2..].strip_suffix(b"}")?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let digit = |b: u8| (b as char).to_digit(16);
    let key = hex
        .chunks(2)
        .map(|p| Some((digit(p[0])? * 16 + digit(p[1])?) as u8))
        .collect::<Option<Vec<u8>>>()?;
    Some((&rest[..open], key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_a_zone_and_a_key() {
        fn p(k: &[u8]) -> Option<(&[u8], Vec<u8>)> {
            parse(k, "sluice")
        }
        assert_eq!(
            p(b"sluice:z_a:{7f000001}"),
            Some((&b"z_a"[..], vec![127, 0, 0, 1]))
        );
        assert_eq!(p(b"sluice:z:{7d7b}"), Some((&b"z"[..], b"}{".to_vec())));
        assert_eq!(p(b"sluice:z:{}"), Some((&b"z"[..], vec![])));
        assert_eq!(p(b"other:z:{7f}"), None);
        assert_eq!(p(b"sluice:z:{7}"), None);
        assert_eq!(p(b"sluice:z:{zz}"), None);
        assert_eq!(p(b"sluice:z:7f"), None);
        assert_eq!(channel("sluice"), "sluice:forget:sluice");
    }
}
