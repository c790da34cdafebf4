//! One state of a memory zone ([`Node`]), and what states and keys cost
//! against the zone's size.

use super::BYTES_PER_STATE;
use crate::limiter::algorithm::{self, Cell, Policy};
use hashbrown::HashMap;

/// Keys up to this long are stored in the node.
pub(super) const INLINE: usize = 16;

/// `Node::len` of a key longer than [`INLINE`], kept in `Shard::long`.
pub(super) const LONG: u8 = u8::MAX;

/// One state: 48 bytes on 64-bit (nginx: 128). Keys of up to 16 bytes
/// (IPv4/IPv6 addresses: `$binary_remote_addr` is 4 or 16) are inline;
/// longer keys live in the shard's `long` table, by slot, and cost their
/// bytes against the zone's size.
pub(super) struct Node {
    /// The algorithm's cell ([`algorithm::Cell`]): for nginx's leaky bucket
    /// `last` and `excess` (in milli-requests). Only the sliding window
    /// uses `aux`, two counts of at most [`algorithm::MAX_COUNT`]: then
    /// `value` holds both (`packed`).
    pub(super) last: u64,
    pub(super) value: u64,
    pub(super) key: [u8; INLINE],
    /// The key's length, or [`LONG`].
    pub(super) len: u8,
    pub(super) packed: bool,
    /// LRU links (towards the head = more recent, towards the tail = older);
    /// `next` doubles as the free-list link of an empty slot.
    pub(super) prev: u32,
    pub(super) next: u32,
    /// Requests holding this node between lookup and accounting.
    pub(super) count: u32,
}

impl Node {
    #[inline]
    pub(super) fn cell(&self) -> Cell {
        if self.packed {
            Cell {
                last: self.last,
                value: self.value & u64::from(u32::MAX),
                aux: self.value >> 32,
            }
        } else {
            Cell {
                last: self.last,
                value: self.value,
                aux: 0,
            }
        }
    }

    #[inline]
    pub(super) fn store(&mut self, c: Cell) {
        self.last = c.last;
        self.packed = c.aux != 0;
        self.value = if self.packed {
            let low = u64::from(u32::MAX);
            c.value.min(low) | (c.aux.min(low) << 32)
        } else {
            c.value
        };
    }
}

/// What a sliding log's times cost against the zone's size, in states:
/// the `VecDeque` of up to `count` times, allocated at once.
pub(super) fn log_cost(p: &Policy) -> usize {
    if p.algorithm == algorithm::Algorithm::SlidingLog {
        log_units(p.count as usize)
    } else {
        0
    }
}

/// What a log allocated for `times` times costs, in states: the
/// `VecDeque`'s 32 bytes and 8 per time (none without a log).
pub(super) fn log_units(times: usize) -> usize {
    match times {
        0 => 0,
        n => (32 + 8 * n).div_ceil(BYTES_PER_STATE as usize),
    }
}

/// The key of `slot`, inline or in the `long` table.
#[inline]
pub(super) fn key_of<'a>(
    nodes: &'a [Node],
    long: &'a HashMap<u32, Box<[u8]>>,
    slot: u32,
) -> &'a [u8] {
    let n = &nodes[slot as usize];
    if n.len == LONG {
        long.get(&slot).map_or(&[][..], |k| &k[..])
    } else {
        &n.key[..usize::from(n.len)]
    }
}

/// What a key costs against the zone's size, in states: a long key costs
/// its bytes too, so that `size` bounds memory whatever the keys (nginx
/// counts each state as 80 bytes plus its key).
pub(super) fn cost_of(key_len: usize) -> usize {
    if key_len <= INLINE {
        1
    } else {
        1 + (16 + key_len).div_ceil(BYTES_PER_STATE as usize)
    }
}
