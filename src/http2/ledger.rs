//! What the two sides of one HTTP/2 connection have agreed, followed frame
//! by frame in both directions, so that hyper's connection can be let go
//! while the client is idle and a fresh one started, in step with the
//! client, when it speaks again ("parking", see `server::h2`).
//!
//! Why: hyper's HTTP/2 connection holds the h2 crate's buffers (16 KB to
//! write, 8 KB to read, 4 KB of HPACK) for as long as the client stays,
//! about 29 KB per idle connection where nginx holds almost nothing. Once
//! every stream is over, what a fresh connection must be told so that the
//! client cannot tell the difference is small, and all of it is here:
//! - the client's settings (stream windows, frame size, table size): sent
//!   to the fresh connection as the client's first SETTINGS;
//! - the connection's flow-control windows: the client's (what sluice may
//!   send) is raised to its true size with a WINDOW_UPDATE given to the
//!   fresh connection; sluice's (what the client may send) is brought to
//!   what the fresh connection believes with a WINDOW_UPDATE to the client;
//! - the HPACK tables: the client's encoder and the gate's decoder live on
//!   (in [`super::Inbound`]); hyper's decoder never holds entries (the gate
//!   writes plain literals); hyper's encoder starts empty, which the
//!   client's decoder follows (its older entries sit behind the new ones
//!   and are evicted first);
//! - the streams already used: the fresh connection would take a frame on
//!   one of them for a new stream, so the gate answers those frames itself
//!   as h2 answers a closed stream (`floor`).
//!
//! A connection is parked only when nothing is in flight: no stream open in
//! either direction, every SETTINGS acknowledged both ways, every PING
//! answered, and windows that a fresh connection can be brought to.

use super::inbound::{PING, RST_STREAM, SETTINGS, WINDOW_UPDATE};

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;

/// The initial window of a connection (RFC 9113 §6.9.2): a fresh one
/// starts here whatever the settings.
pub const INITIAL_WINDOW: i64 = 65_535;
/// The largest window RFC 9113 allows.
const WINDOW_MAX: i64 = (1 << 31) - 1;

/// The client's end of a stream is over.
const CLIENT_DONE: u8 = 1;
/// sluice's end of a stream is over.
const SERVER_DONE: u8 = 2;

/// One connection's agreements. Fed every frame either side sends, whole
/// (its kind, flags, stream, length and, for SETTINGS and WINDOW_UPDATE,
/// its payload).
#[derive(Debug)]
pub struct Ledger {
    /// The client's settings by identifier (1 to 9), as last sent.
    settings: [Option<u32>; 9],
    /// SETTINGS the client sent that sluice has not acknowledged.
    theirs_unacked: u32,
    /// SETTINGS sluice sent that the client has not acknowledged.
    ours_unacked: u32,
    /// PINGs of the client not yet answered.
    pings: u32,
    /// What sluice may still send on the connection.
    send: i64,
    /// What the client may still send on the connection.
    recv: i64,
    /// Streams not over in both directions, with which ends are.
    live: Vec<(u32, u8)>,
    /// Something was seen that a fresh connection cannot be told (a
    /// frame too long to read whole, a GOAWAY): never parked again.
    unsure: bool,
}

/// What starts a fresh connection in step with the client.
#[derive(Debug, PartialEq, Eq)]
pub struct Replay {
    /// For hyper, as if from the client: the preface, the client's
    /// settings, the acknowledgement of hyper's own, the client's window.
    pub to_hyper: Vec<u8>,
    /// For the client: a WINDOW_UPDATE bringing what it may send to what
    /// the fresh connection allows, if it is below.
    pub to_client: Option<[u8; 13]>,
    /// How much less than a fresh connection's 65 535 the client lets
    /// sluice send (it has not yet given back what it read): hyper will
    /// believe the window this much larger until the client's next
    /// WINDOW_UPDATEs, whose increments it does not see up to this.
    pub deficit: u32,
}

impl Default for Ledger {
    fn default() -> Ledger {
        Ledger {
            settings: [None; 9],
            theirs_unacked: 0,
            ours_unacked: 0,
            pings: 0,
            send: INITIAL_WINDOW,
            recv: INITIAL_WINDOW,
            live: Vec::new(),
            unsure: false,
        }
    }
}

impl Ledger {
    /// The client opened `stream` (its request head went to hyper).
    pub fn opened(&mut self, stream: u32, end_stream: bool) {
        self.live.push((stream, 0));
        if end_stream {
            self.end(stream, CLIENT_DONE);
        }
    }

    /// A frame the client sent, other than a request's opening head.
    pub fn client_frame(&mut self, kind: u8, flags: u8, stream: u32, len: usize, payload: &[u8]) {
        match kind {
            DATA => {
                self.recv -= len as i64;
                if flags & END_STREAM != 0 {
                    self.end(stream, CLIENT_DONE);
                }
            }
            HEADERS if flags & END_STREAM != 0 => self.end(stream, CLIENT_DONE),
            RST_STREAM => self.end(stream, CLIENT_DONE | SERVER_DONE),
            SETTINGS if flags & ACK != 0 => self.ours_unacked = self.ours_unacked.saturating_sub(1),
            SETTINGS => {
                self.theirs_unacked += 1;
                self.record_settings(len, payload);
            }
            PING if flags & ACK == 0 => self.pings += 1,
            WINDOW_UPDATE if stream == 0 => match window_increment(len, payload) {
                Some(n) => self.send += i64::from(n),
                None => self.unsure = true,
            },
            GOAWAY => self.unsure = true,
            _ => {}
        }
    }

    /// A frame sluice sent the client (`payload`: at least its first four
    /// bytes when it has them).
    pub fn server_frame(&mut self, kind: u8, flags: u8, stream: u32, len: usize, payload: &[u8]) {
        match kind {
            DATA => {
                self.send -= len as i64;
                if flags & END_STREAM != 0 {
                    self.end(stream, SERVER_DONE);
                }
            }
            HEADERS if flags & END_STREAM != 0 => self.end(stream, SERVER_DONE),
            RST_STREAM => self.end(stream, CLIENT_DONE | SERVER_DONE),
            SETTINGS if flags & ACK != 0 => {
                self.theirs_unacked = self.theirs_unacked.saturating_sub(1)
            }
            SETTINGS => self.ours_unacked += 1,
            PING if flags & ACK != 0 => self.pings = self.pings.saturating_sub(1),
            WINDOW_UPDATE if stream == 0 => match window_increment(len, payload) {
                Some(n) => self.recv += i64::from(n),
                None => self.unsure = true,
            },
            GOAWAY => self.unsure = true,
            _ => {}
        }
    }

    /// What the client lets sluice send on the connection now.
    pub fn send_window(&self) -> i64 {
        self.send
    }

    /// Nothing in flight: a fresh connection given [`Ledger::replay`] would
    /// be in step with the client.
    pub fn quiet(&self, connection_window: u32) -> bool {
        self.live.is_empty()
            && self.theirs_unacked == 0
            && self.ours_unacked == 0
            && self.pings == 0
            && !self.unsure
            && (0..=WINDOW_MAX).contains(&self.send)
            && (0..=i64::from(connection_window)).contains(&self.recv)
    }

    /// The bytes that start a fresh hyper connection whose receive window
    /// is `connection_window`, in step with the client; `None` unless
    /// [`Ledger::quiet`]. What goes to the client is counted here as sent.
    pub fn replay(&mut self, connection_window: u32) -> Option<Replay> {
        if !self.quiet(connection_window) {
            return None;
        }
        let mut to_hyper = super::inbound::PREFACE.to_vec();
        let mut settings = Vec::new();
        for (id, value) in (1u16..).zip(self.settings) {
            if let Some(v) = value {
                settings.extend_from_slice(&id.to_be_bytes());
                settings.extend_from_slice(&v.to_be_bytes());
            }
        }
        to_hyper.extend_from_slice(&frame_head(settings.len(), SETTINGS, 0, 0));
        to_hyper.extend_from_slice(&settings);
        to_hyper.extend_from_slice(&frame_head(0, SETTINGS, ACK, 0));
        let raise = self.send - INITIAL_WINDOW;
        if raise > 0 {
            to_hyper.extend_from_slice(&window_update(0, raise as u32));
        }
        let lift = i64::from(connection_window) - self.recv;
        Some(Replay {
            to_hyper,
            to_client: (lift > 0).then(|| window_update(0, lift as u32)),
            deficit: u32::try_from(-raise).unwrap_or(0),
        })
    }

    fn end(&mut self, stream: u32, done: u8) {
        if let Some(i) = self.live.iter().position(|(s, _)| *s == stream) {
            self.live[i].1 |= done;
            if self.live[i].1 == CLIENT_DONE | SERVER_DONE {
                self.live.swap_remove(i);
            }
        }
    }

    fn record_settings(&mut self, len: usize, payload: &[u8]) {
        if payload.len() != len || len % 6 != 0 {
            // Too long to be read whole, or malformed (hyper ends the
            // connection over it).
            self.unsure = true;
            return;
        }
        for s in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([s[0], s[1]]);
            let value = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
            if let Some(slot) = usize::from(id)
                .checked_sub(1)
                .and_then(|i| self.settings.get_mut(i))
            {
                *slot = Some(value);
            }
        }
    }
}

/// A WINDOW_UPDATE's increment, if its payload is whole and well formed
/// (anything else ends the connection in hyper, or is not seen whole).
fn window_increment(len: usize, payload: &[u8]) -> Option<u32> {
    let p: [u8; 4] = payload.get(..4)?.try_into().ok()?;
    (len == 4).then(|| u32::from_be_bytes(p) & 0x7fff_ffff)
}

/// A frame's 9-byte head (RFC 9113 §4.1).
pub fn frame_head(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; 9] {
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// A WINDOW_UPDATE frame.
pub fn window_update(stream: u32, increment: u32) -> [u8; 13] {
    let mut f = [0u8; 13];
    f[..9].copy_from_slice(&frame_head(4, WINDOW_UPDATE, 0, stream));
    f[9..].copy_from_slice(&increment.to_be_bytes());
    f
}

/// An RST_STREAM frame.
pub fn rst_stream(stream: u32, code: u32) -> [u8; 13] {
    let mut f = [0u8; 13];
    f[..9].copy_from_slice(&frame_head(4, RST_STREAM, 0, stream));
    f[9..].copy_from_slice(&code.to_be_bytes());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: u32 = 1 << 20;

    /// A connection as hyper starts it: its SETTINGS acknowledged, the
    /// client's too, its window raised to `WINDOW`.
    fn started() -> Ledger {
        let mut l = Ledger::default();
        l.client_frame(SETTINGS, 0, 0, 6, &[0, 4, 0, 0, 0x10, 0]);
        l.server_frame(SETTINGS, 0, 0, 18, &[]);
        l.server_frame(WINDOW_UPDATE, 0, 0, 4, &(WINDOW - 65_535).to_be_bytes());
        l.server_frame(SETTINGS, ACK, 0, 0, &[]);
        l.client_frame(SETTINGS, ACK, 0, 0, &[]);
        l
    }

    #[test]
    fn quiet_only_when_nothing_is_in_flight() {
        let mut l = started();
        assert!(l.quiet(WINDOW));
        l.opened(1, true);
        assert!(!l.quiet(WINDOW), "a request not yet answered");
        l.server_frame(HEADERS, 0, 1, 30, &[]);
        assert!(!l.quiet(WINDOW));
        l.server_frame(DATA, END_STREAM, 1, 100, &[]);
        assert!(l.quiet(WINDOW));
        l.opened(3, false);
        l.server_frame(HEADERS, END_STREAM, 3, 30, &[]);
        assert!(!l.quiet(WINDOW), "the client's body is still coming");
        l.client_frame(RST_STREAM, 0, 3, 4, &[]);
        assert!(l.quiet(WINDOW));
        l.client_frame(PING, 0, 0, 8, &[]);
        assert!(!l.quiet(WINDOW), "a PING unanswered");
        l.server_frame(PING, ACK, 0, 8, &[]);
        l.client_frame(SETTINGS, 0, 0, 0, &[]);
        assert!(!l.quiet(WINDOW), "SETTINGS not acknowledged");
        l.server_frame(SETTINGS, ACK, 0, 0, &[]);
        assert!(l.quiet(WINDOW));
        l.client_frame(GOAWAY, 0, 0, 8, &[]);
        assert!(!l.quiet(WINDOW), "going away");
    }

    #[test]
    fn the_replay_brings_both_windows_in_step() {
        let mut l = started();
        // The client raised what sluice may send, then took 100 000 bytes.
        l.client_frame(WINDOW_UPDATE, 0, 0, 4, &1_000_000u32.to_be_bytes());
        l.opened(1, false);
        l.client_frame(DATA, END_STREAM, 1, 30_000, &[]);
        l.server_frame(DATA, END_STREAM, 1, 100_000, &[]);
        assert!(l.quiet(WINDOW));
        let r = l.replay(WINDOW).unwrap();
        let mut want = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        want.extend_from_slice(&[0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0x10, 0]);
        want.extend_from_slice(&[0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0]);
        // 65 535 + 1 000 000 - 100 000, from the 65 535 a fresh one assumes.
        want.extend_from_slice(&window_update(0, 900_000));
        assert_eq!(r.to_hyper, want);
        // The client may send 30 000 less than hyper will allow.
        assert_eq!(r.to_client, Some(window_update(0, 30_000)));
    }

    #[test]
    fn a_client_window_below_a_fresh_start_is_a_deficit() {
        let mut l = started();
        l.opened(1, true);
        l.server_frame(DATA, END_STREAM, 1, 60_000, &[]);
        // The client lets sluice send 5 535 more: below a fresh start.
        let r = l.replay(WINDOW).unwrap();
        assert_eq!(r.deficit, 60_000);
        assert_eq!(r.to_hyper.len(), 24 + 15 + 9, "no WINDOW_UPDATE for hyper");
        l.client_frame(WINDOW_UPDATE, 0, 0, 4, &60_000u32.to_be_bytes());
        assert_eq!(l.replay(WINDOW).unwrap().deficit, 0);
        // What the client may send above what a fresh connection allows: no.
        assert!(!l.quiet(1000));
    }

    #[test]
    fn settings_keep_their_last_value_and_unknown_ones_are_left_out() {
        let mut l = started();
        let mut p = Vec::new();
        for (id, v) in [(1u16, 0u32), (4, 100), (4, 200), (0x99, 7), (0, 1)] {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        l.client_frame(SETTINGS, 0, 0, p.len(), &p);
        l.server_frame(SETTINGS, ACK, 0, 0, &[]);
        let r = l.replay(WINDOW).unwrap();
        let settings = &r.to_hyper[24..24 + 9 + 12];
        assert_eq!(settings[..9], [0, 0, 12, SETTINGS, 0, 0, 0, 0, 0]);
        assert_eq!(settings[9..], [0, 1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 200]);
        // A SETTINGS not seen whole: never parked.
        l.client_frame(SETTINGS, 0, 0, 6000, &[]);
        l.server_frame(SETTINGS, ACK, 0, 0, &[]);
        assert!(!l.quiet(WINDOW));
    }
}
