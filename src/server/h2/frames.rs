//! The frames hyper writes to the client, followed as they go out: where a
//! frame ends (so that sluice's own frames go only between hyper's), what
//! each one was (for the ledger, the budgets and the ends of streams), and
//! which of a freshly started connection's first frames the client must
//! not see (see [`super`]'s parking).

use crate::http2::inbound::{SETTINGS, WINDOW_UPDATE};
use crate::http2::ledger::frame_head;
use bytes::BytesMut;

/// One frame written whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sent {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub len: usize,
    /// The first bytes of its payload (up to four: a WINDOW_UPDATE's
    /// increment).
    pub lead: [u8; 4],
    pub lead_len: usize,
}

impl Sent {
    pub fn lead(&self) -> &[u8] {
        &self.lead[..self.lead_len]
    }
}

/// Where the written bytes are in hyper's frames.
#[derive(Default)]
pub(super) struct Outbound {
    head: [u8; 9],
    /// Bytes of the current frame's head written so far.
    have: usize,
    /// Bytes of its payload still to be written.
    left: usize,
    lead: [u8; 4],
    lead_len: usize,
}

impl Outbound {
    /// Every frame written so far is whole: a frame of sluice's may go next.
    pub fn at_boundary(&self) -> bool {
        self.have == 0 && self.left == 0
    }

    /// `bytes` were written: calls `out` with each frame now out whole.
    pub fn wrote(&mut self, mut bytes: &[u8], out: &mut impl FnMut(Sent)) {
        while !bytes.is_empty() {
            if self.left > 0 {
                let n = self.left.min(bytes.len());
                let k = (4 - self.lead_len).min(n);
                self.lead[self.lead_len..self.lead_len + k].copy_from_slice(&bytes[..k]);
                self.lead_len += k;
                self.left -= n;
                bytes = &bytes[n..];
            } else {
                let n = (9 - self.have).min(bytes.len());
                self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have < 9 {
                    return;
                }
                self.have = 0;
                self.lead_len = 0;
                self.left = frame_len(&self.head);
            }
            if self.left == 0 && self.have == 0 {
                let h = self.head;
                out(Sent {
                    kind: h[3],
                    flags: h[4],
                    stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
                    len: frame_len(&h),
                    lead: self.lead,
                    lead_len: self.lead_len,
                });
            }
        }
    }
}

fn frame_len(head: &[u8]) -> usize {
    usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2])
}

/// A connection started afresh after a park, until it is in step: hyper's
/// first frames that only restate what the client already has are kept
/// from it (its SETTINGS, the same as before; its acknowledgement of the
/// client's settings as the replay restated them; its first connection
/// WINDOW_UPDATE, as the replay already brought the client's window in
/// step), and, while hyper believes the client's window larger than it is
/// (see [`crate::http2::ledger::Replay::deficit`]), its DATA waits for the
/// client's true window (a frame is cut to fit it).
pub(super) struct Waking {
    settings: bool,
    ack: bool,
    window: bool,
    /// What the client lets sluice send now, less what went to `ahead`.
    credit: i64,
    /// hyper's bytes not yet sifted: a partial frame, or frames behind
    /// DATA that waits for the client's window.
    pending: BytesMut,
    /// Reads held back so far (see [`Waking::hold_reads`]).
    holds: u8,
}

impl Waking {
    /// `window`: whether the fresh connection raises its window at start
    /// (a connection window above the initial 65 535); `credit`: what the
    /// client lets sluice send.
    pub fn new(window: bool, credit: i64) -> Waking {
        Waking {
            settings: true,
            ack: true,
            window,
            credit,
            pending: BytesMut::new(),
            holds: 0,
        }
    }

    /// hyper has not raised its connection window yet: until it does, it
    /// would take the client's DATA (sent to the window the client knows)
    /// for a breach of its initial 65 535. The client's bytes wait for it,
    /// a few polls at most (hyper raises it as soon as it writes).
    pub fn hold_reads(&mut self) -> bool {
        if !self.window || self.holds >= 16 {
            return false;
        }
        self.holds += 1;
        true
    }

    /// hyper wrote `bytes`.
    pub fn take(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// The client opened its connection window by `n`.
    pub fn grant(&mut self, n: u64) {
        self.credit = self.credit.saturating_add(n as i64);
    }

    /// Moves the whole frames the client is to see, as far as its window
    /// lets DATA go, to `ahead`.
    pub fn sift(&mut self, ahead: &mut BytesMut) {
        while let Some(h) = self.pending.get(..9) {
            let len = frame_len(h);
            if self.pending.len() < 9 + len {
                return;
            }
            let (kind, flags) = (h[3], h[4]);
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]);
            if kind == DATA && len as i64 > self.credit {
                if self.credit <= 0 || flags & PADDED != 0 {
                    return;
                }
                // As much as the window takes now; the rest stays.
                let n = self.credit as usize;
                ahead.extend_from_slice(&frame_head(n, DATA, flags & !END_STREAM, stream));
                ahead.extend_from_slice(&self.pending[9..9 + n]);
                let rest = frame_head(len - n, DATA, flags, stream);
                self.pending[n..9 + n].copy_from_slice(&rest);
                let _ = self.pending.split_to(n);
                self.credit = 0;
                return;
            }
            let slot = match kind {
                SETTINGS if flags & 0x1 != 0 => &mut self.ack,
                SETTINGS => &mut self.settings,
                WINDOW_UPDATE if stream == 0 => &mut self.window,
                _ => &mut false,
            };
            let frame = self.pending.split_to(9 + len);
            if !std::mem::replace(slot, false) {
                if kind == DATA {
                    self.credit -= len as i64;
                }
                ahead.extend_from_slice(&frame);
            }
        }
    }

    /// In step: nothing left to keep back or hold, and hyper's idea of the
    /// client's window is the true one (`deficit` 0).
    pub fn done(&self, deficit: u32) -> bool {
        self.settled() && deficit == 0
    }

    /// Nothing left to keep back or hold (the connection may be parked
    /// again: a park starts from the true window).
    pub fn settled(&self) -> bool {
        !(self.settings || self.ack || self.window) && self.pending.is_empty()
    }
}

const DATA: u8 = 0;
const END_STREAM: u8 = 0x1;
const PADDED: u8 = 0x8;

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, len: usize) -> Vec<u8> {
        let l = (len as u32).to_be_bytes();
        let mut f = vec![l[1], l[2], l[3], kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend((0..len).map(|i| i as u8 + 1));
        f
    }

    /// Frames are found however the writes cut them.
    #[test]
    fn frames_are_seen_across_any_cut() {
        let mut bytes = frame(1, 0x4, 1, 20); // HEADERS, not the end
        bytes.extend(frame(0, 0, 1, 100)); // DATA
        bytes.extend(frame(0, 0x1, 1, 5)); // DATA, END_STREAM
        bytes.extend(frame(1, 0x5, 3, 7)); // HEADERS, END_STREAM
        bytes.extend(frame(6, 0, 0, 8)); // PING
        bytes.extend(frame(3, 0, 5, 4)); // RST_STREAM
        bytes.extend(frame(8, 0, 0, 4)); // WINDOW_UPDATE
        bytes.extend(frame(4, 1, 0, 0)); // SETTINGS ACK
        for cut in 1..bytes.len() {
            let mut o = Outbound::default();
            let mut ended = Vec::new();
            for piece in bytes.chunks(cut) {
                o.wrote(piece, &mut |f| {
                    ended.push((f.kind, f.flags, f.stream, f.len, f.lead().to_vec()))
                });
            }
            let want = [
                (1, 4, 1, 20, vec![1, 2, 3, 4]),
                (0, 0, 1, 100, vec![1, 2, 3, 4]),
                (0, 1, 1, 5, vec![1, 2, 3, 4]),
                (1, 5, 3, 7, vec![1, 2, 3, 4]),
                (6, 0, 0, 8, vec![1, 2, 3, 4]),
                (3, 0, 5, 4, vec![1, 2, 3, 4]),
                (8, 0, 0, 4, vec![1, 2, 3, 4]),
                (4, 1, 0, 0, vec![]),
            ];
            assert_eq!(ended, want, "cut {cut}");
            assert!(o.at_boundary());
        }
        // Not before its last byte.
        let mut o = Outbound::default();
        let mut ended = Vec::new();
        let end = frame(0, 0x1, 7, 5);
        o.wrote(&end[..end.len() - 1], &mut |f| ended.push(f.stream));
        assert!(ended.is_empty());
        assert!(!o.at_boundary());
        o.wrote(&end[end.len() - 1..], &mut |f| ended.push(f.stream));
        assert_eq!(ended, [7]);
    }

    /// Only the first SETTINGS, SETTINGS ACK and connection WINDOW_UPDATE
    /// are kept back, however hyper's writes cut them.
    #[test]
    fn a_fresh_connection_restates_nothing() {
        let mut bytes = frame(4, 0, 0, 18); // its SETTINGS
        bytes.extend(frame(8, 0, 0, 4)); // its window raised
        bytes.extend(frame(6, 1, 0, 8)); // a PING answered
        bytes.extend(frame(4, 1, 0, 0)); // the replayed SETTINGS acknowledged
        bytes.extend(frame(8, 0, 3, 4)); // a stream's WINDOW_UPDATE
        bytes.extend(frame(1, 5, 3, 9)); // a response
        let mut want = frame(6, 1, 0, 8);
        want.extend(frame(8, 0, 3, 4));
        want.extend(frame(1, 5, 3, 9));
        // Not done before the acknowledgement is whole.
        let ack_end = 9 + 18 + 13 + 17 + 9;
        for cut in 1..bytes.len() {
            let mut w = Waking::new(true, 1 << 20);
            let mut ahead = BytesMut::new();
            let mut taken = 0;
            for piece in bytes.chunks(cut) {
                assert!(taken >= ack_end || !w.done(0), "cut {cut}: done at {taken}");
                w.take(piece);
                taken += piece.len();
                w.sift(&mut ahead);
            }
            assert!(w.done(0), "cut {cut}");
            assert!(
                !w.done(1),
                "cut {cut}: hyper's window is not the client's yet"
            );
            assert_eq!(ahead.as_ref(), want.as_slice(), "cut {cut}");
        }
        // Later ones go through.
        let mut w = Waking::new(false, 0);
        let mut ahead = BytesMut::new();
        w.take(&frame(4, 0, 0, 6));
        w.take(&frame(4, 1, 0, 0));
        w.sift(&mut ahead);
        assert!(w.done(0));
        assert!(ahead.is_empty());
    }

    /// DATA goes as far as the client's window, cut to fit it; what is
    /// behind it waits; a window opened lets it go.
    #[test]
    fn data_waits_for_the_true_window() {
        let mut w = Waking::new(false, 100);
        let mut ahead = BytesMut::new();
        w.take(&frame(4, 0, 0, 0));
        w.take(&frame(4, 1, 0, 0));
        w.take(&frame(1, 4, 1, 5)); // a response's head
        w.take(&frame(0, 0, 1, 60)); // DATA, fits
        w.take(&frame(0, 1, 1, 70)); // DATA, END_STREAM: 40 fit
        w.take(&frame(6, 1, 0, 8)); // a PING answer behind it
        w.sift(&mut ahead);
        let mut want = frame(1, 4, 1, 5);
        want.extend(frame(0, 0, 1, 60));
        let mut cut = frame(0, 0, 1, 40);
        want.extend_from_slice(&cut);
        assert_eq!(ahead.split().as_ref(), want.as_slice());
        assert!(!w.done(0));
        w.grant(10);
        w.sift(&mut ahead);
        cut = frame(0, 0, 1, 10);
        cut[9..].copy_from_slice(&frame(0, 1, 1, 70)[9 + 40..9 + 50]);
        assert_eq!(ahead.split().as_ref(), cut.as_slice());
        w.grant(1000);
        w.sift(&mut ahead);
        let mut rest = frame(0, 1, 1, 20);
        rest[9..].copy_from_slice(&frame(0, 1, 1, 70)[9 + 50..]);
        rest.extend(frame(6, 1, 0, 8));
        assert_eq!(ahead.split().as_ref(), rest.as_slice());
        assert!(w.done(0));
    }
}
