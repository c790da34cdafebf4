//! Where the zones of a location live, for tests that decide the same
//! requests in memory and in Redis (`vectors`, `algorithms`), and the
//! comparison of one request across those layouts.

use super::*;

/// Where each zone of a location lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    Memory,
    Redis,
    /// Even zones in memory, odd in Redis.
    MemoryThenRedis,
    /// Even zones in Redis, odd in memory.
    RedisThenMemory,
    /// All in Redis, each limit's key different so that they fall in
    /// different slots (one script call per limit, nginx's hold protocol).
    RedisSplitSlots,
}

impl Layout {
    pub(super) fn redis(self, zone: usize) -> bool {
        match self {
            Layout::Memory => false,
            Layout::Redis | Layout::RedisSplitSlots => true,
            Layout::MemoryThenRedis => zone % 2 == 1,
            Layout::RedisThenMemory => zone % 2 == 0,
        }
    }
}

/// The same location in memory (`mem`, and `mem_split` for the split
/// keys) and on every other layout decides one request at `now` alike;
/// `what` describes the case for the failure message.
pub(super) async fn same_everywhere(
    mem: &[Limit],
    mem_split: &[Limit],
    others: &[(Layout, Vec<Limit>)],
    keys: &[Option<String>],
    now: u64,
    what: &str,
) {
    // Each limit's own key, so that every limit falls in its own slot.
    let split: Vec<Option<String>> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| k.as_ref().map(|k| format!("{k}#{i}")))
        .collect();
    let want = limiter::decide(mem, now, |i| keys[i].clone()).await;
    let want_split = limiter::decide(mem_split, now, |i| split[i].clone()).await;
    for (layout, limits) in others {
        let (keys, want) = match layout {
            Layout::RedisSplitSlots => (&split, &want_split),
            _ => (&keys.to_vec(), &want),
        };
        let got = limiter::decide(limits, now, |i| keys[i].clone()).await;
        assert_eq!(&got, want, "{what} {layout:?}: keys {keys:?}");
    }
}
