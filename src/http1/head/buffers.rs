//! nginx's `client_header_buffer_size` and `large_client_header_buffers`,
//! simulated: which line of a head would not have fit, and whether nginx
//! would then have said 414 or 400.
//!
//! Why simulated rather than sized: sluice reads a head into one growing
//! buffer, but the refusals must be nginx's, and nginx's limit is not a
//! total — a line that does not fit the rest of a buffer moves, whole, to
//! the next one, so the same bytes may fit or not depending on where the
//! lines fall. Only the arithmetic is kept, no buffer.

use super::{CLIENT_HEADER_BUFFER, HeadParser, Refusal};

/// nginx's header buffers: a head starts in a 1 KB buffer; a line that does
/// not fit moves, whole, to the next large buffer; no line may be longer
/// than one large buffer, and there are only so many.
#[derive(Clone, Copy, Debug)]
pub(super) struct Buffers {
    cap: usize,
    used: usize,
    large: usize,
    rules: (usize, usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Overflow {
    /// One line is longer than a large buffer.
    Line,
    /// Every large buffer is taken.
    Head,
}

impl Buffers {
    pub(super) fn new(rules: (usize, usize)) -> Buffers {
        Buffers {
            cap: CLIENT_HEADER_BUFFER,
            used: 0,
            large: 0,
            rules,
        }
    }

    /// A line of `len` bytes (its end of line included) is appended.
    pub(super) fn take(&mut self, len: usize) -> Result<(), Overflow> {
        let (count, size) = self.rules;
        loop {
            if self.used + len <= self.cap {
                self.used += len;
                return Ok(());
            }
            // The buffer fills with the start of the line, which then moves
            // to a fresh large buffer.
            let partial = self.cap - self.used;
            if partial > 0 && partial >= size {
                return Err(Overflow::Line);
            }
            if self.large >= count {
                return Err(Overflow::Head);
            }
            self.large += 1;
            self.cap = size;
            self.used = 0;
        }
    }

    /// Would a line that has `partial` bytes so far (and no end yet) already
    /// have been refused?
    pub(super) fn refuses_partial(&self, partial: usize) -> Option<Overflow> {
        let mut probe = *self;
        probe.take(partial + 1).err()
    }
}

impl HeadParser {
    /// nginx's refusal for a line that did not fit: the request line is
    /// 414, a header line or the whole head 400.
    pub(super) fn overflow(&self, o: Overflow, line: Option<Vec<u8>>) -> Refusal {
        match (&self.line, o) {
            (None, _) => self.refuse(414, "client sent too long URI", None),
            // nginx names the line that did not fit either way.
            (Some(_), Overflow::Line | Overflow::Head) if line.is_some() => {
                let mut l = line.unwrap_or_default();
                l.truncate(64);
                self.refuse(400, "client sent too long header line", Some(l))
            }
            (Some(_), _) => self.refuse(400, "client sent too large request", None),
        }
    }
}
