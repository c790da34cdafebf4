//! The body of the `h2upstream` fuzz target (`crate::fuzzing`): a
//! connection's state driven by what a hostile upstream sends, interleaved
//! with what calls do, every byte the state writes read back as an
//! upstream would.
//!
//! Checked, besides no panic: every frame written is whole and within the
//! upstream's SETTINGS_MAX_FRAME_SIZE; streams are opened in increasing
//! order and never after a GOAWAY; no DATA goes past what the upstream's
//! windows allowed (a model of them kept here, from the frames it sent);
//! sluice never gives back more of its connection window than the upstream
//! used; the state's own bookkeeping holds ([`State::check`]).

use super::state::State;
use bytes::Bytes;
use std::task::{Context, Poll, Waker};

/// What the upstream's side knows: the windows it granted, its settings.
struct Model {
    conn: i64,
    initial: i64,
    streams: std::collections::HashMap<u32, i64>,
    max_frame: usize,
    last_opened: u32,
    goaway: bool,
    /// DATA bytes fed to sluice, and connection window it gave back.
    fed: u64,
    given_back: u64,
}

pub fn frames(data: &[u8]) {
    let mut s = State::new(4);
    let mut m = Model {
        conn: 65_535,
        initial: 65_535,
        streams: Default::default(),
        max_frame: 16_384,
        last_opened: 0,
        goaway: false,
        // (The window sluice opens at the start is its own, not given back.)
        fed: u64::from(super::CONNECTION_WINDOW - 65_535),
        given_back: 0,
    };
    let preface = crate::http2::inbound::PREFACE.len();
    assert!(s.out.starts_with(crate::http2::inbound::PREFACE));
    let _ = s.out.split_to(preface);
    let cx = Context::from_waker(Waker::noop());
    let mut ids: Vec<u32> = Vec::new();
    let mut r = data;
    while let Some((&op, rest)) = r.split_first() {
        r = rest;
        let arg = r.first().copied().unwrap_or(0);
        let pick = |ids: &[u32]| ids.get(usize::from(arg) % ids.len().max(1)).copied();
        match op % 8 {
            0 => {
                r = r.get(1..).unwrap_or_default();
                if s.poll_open(&cx).is_ready() && s.ended.is_none() && !s.refuses() {
                    ids.push(s.open(b"\x83\x86\x84\x41\x01a", arg & 1 == 1));
                }
            }
            1 => {
                r = r.get(1..).unwrap_or_default();
                if let Some(id) = pick(&ids) {
                    let n = usize::from(arg) * 97;
                    let _ = s.send_data(id, Bytes::from(vec![b'd'; n]), arg & 1 == 1);
                }
            }
            2 => {
                r = r.get(1..).unwrap_or_default();
                if let Some(id) = pick(&ids) {
                    let _ = s.poll_head(id, &cx);
                    while let Poll::Ready(Some(Ok(_))) = s.poll_data(id, &cx) {}
                    let _ = s.poll_trailers(id, &cx);
                    let _ = s.is_end_stream(id);
                }
            }
            3 => {
                r = r.get(1..).unwrap_or_default();
                if let Some(id) = pick(&ids) {
                    ids.retain(|&i| i != id);
                    s.forget(id);
                }
            }
            4 => {
                r = r.get(1..).unwrap_or_default();
                if let Some(id) = pick(&ids) {
                    s.reset(id, u32::from(arg));
                }
            }
            5 => s.pump_blocked(),
            _ => r = feed(&mut s, &mut m, r),
        }
        drain(&mut s, &mut m);
        s.check();
    }
}

/// One frame from the input: kind, flags, a stream (0, or one of the
/// first few sluice may have opened), a length, the payload.
fn feed<'a>(s: &mut State, m: &mut Model, r: &'a [u8]) -> &'a [u8] {
    let [kind, flags, stream, len, rest @ ..] = r else {
        return &[];
    };
    let kind = kind % 11;
    let id = u32::from(*stream % 8);
    let n = usize::from(*len).min(rest.len());
    let (payload, rest) = rest.split_at(n);
    match kind {
        0 => m.fed += n as u64,
        4 if flags & 1 == 0 && n % 6 == 0 => settings(m, payload),
        7 if id == 0 && n >= 8 => m.goaway = true,
        8 if n == 4 => {
            let inc = i64::from(u32::from_be_bytes(payload.try_into().unwrap()) & !(1 << 31));
            if id == 0 {
                m.conn += inc;
            } else if let Some(w) = m.streams.get_mut(&id) {
                *w += inc;
            }
        }
        _ => {}
    }
    s.frame(kind, *flags, id, payload);
    rest
}

fn settings(m: &mut Model, payload: &[u8]) {
    for p in payload.chunks_exact(6) {
        let v = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
        match u16::from_be_bytes([p[0], p[1]]) {
            4 if v < (1 << 31) => {
                let delta = i64::from(v) - m.initial;
                m.initial = i64::from(v);
                m.streams.values_mut().for_each(|w| *w += delta);
            }
            5 if (16_384..=16_777_215).contains(&v) => m.max_frame = v as usize,
            _ => {}
        }
    }
}

/// Reads back what the state queued, as the upstream would.
fn drain(s: &mut State, m: &mut Model) {
    let out = std::mem::take(&mut s.out);
    let mut b = &out[..];
    while !b.is_empty() {
        assert!(b.len() >= 9, "a frame cut short");
        let len = usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]);
        let kind = b[3];
        let id = u32::from_be_bytes([b[5], b[6], b[7], b[8]]);
        assert!(b.len() >= 9 + len, "a frame cut short");
        assert!(len <= m.max_frame, "a frame over the upstream's max");
        let payload = &b[9..9 + len];
        match kind {
            0 => {
                let w = m
                    .streams
                    .get_mut(&id)
                    .expect("DATA on a stream sluice opened");
                *w -= len as i64;
                m.conn -= len as i64;
                assert!(*w >= 0 && m.conn >= 0, "DATA past the upstream's windows");
            }
            1 if id > m.last_opened => {
                assert!(!m.goaway, "a stream opened after GOAWAY");
                assert!(id % 2 == 1, "an even stream opened");
                m.last_opened = id;
                m.streams.insert(id, m.initial);
            }
            8 if id == 0 => {
                m.given_back += u64::from(u32::from_be_bytes(payload.try_into().unwrap()));
                assert!(m.given_back <= m.fed, "more window given back than used");
            }
            _ => {}
        }
        b = &b[9 + len..];
    }
}
