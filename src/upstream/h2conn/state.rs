//! One upstream connection's protocol state, without I/O: the streams,
//! both windows, the HPACK decoder, and the bytes to write. The driver
//! ([`super::driver`]) hands it every frame it reads and writes what it
//! queues; the calls' handles ([`super::Stream`]) open streams, send and
//! take through it. All of it under one lock, held for a frame or a call's
//! step, never across an await.

use super::Failure;
use super::fields::{self, Head};
use crate::http2::hpack::Decoder;
use crate::http2::inbound::goaway;
use crate::http2::write_headers;
use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use std::collections::{HashMap, VecDeque};
use std::task::{Context, Poll, Waker};

mod recv;
#[cfg(test)]
mod tests;

pub(super) const DATA: u8 = 0;
pub(super) const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;

pub(super) const NO_ERROR: u32 = 0;
pub(super) const PROTOCOL_ERROR: u32 = 1;
const FLOW_CONTROL_ERROR: u32 = 3;
pub(super) const FRAME_SIZE_ERROR: u32 = 6;
pub(super) const CANCEL: u32 = 8;
const COMPRESSION_ERROR: u32 = 9;
const ENHANCE_YOUR_CALM: u32 = 11;

/// The largest window the protocol allows (RFC 9113 §6.9.1).
const WINDOW_MAX: i64 = (1 << 31) - 1;

/// What sluice offers the upstream (see [`super`]'s constants).
pub(super) use super::{CONNECTION_WINDOW, MAX_FRAME, MAX_HEADER_LIST, STREAM_WINDOW};

/// Bytes queued to write past which no more request DATA is framed (it
/// waits in its stream) and, at four times as many, nothing more is read:
/// an upstream that sends PINGs or SETTINGS and never reads the answers
/// stops being read.
pub(super) const OUT_HIGH: usize = 128 * 1024;
pub(super) const READ_PAUSE: usize = 4 * OUT_HIGH;

/// A header block is at most this many bytes and frames: past either the
/// connection ends (ENHANCE_YOUR_CALM). A block between the list bound
/// and this is decoded, for the table, and its stream refused.
const BLOCK_BYTES_MAX: usize = 2 * MAX_HEADER_LIST as usize;
const BLOCK_FRAMES_MAX: u32 = 128;

/// Empty DATA frames (without END_STREAM) in a row past which the
/// connection ends: they carry nothing and cost a frame each.
const EMPTY_DATA_MAX: u32 = 100;

/// A header block being continued.
struct Block {
    stream: u32,
    end_stream: bool,
    bytes: BytesMut,
    frames: u32,
}

/// One stream of a call.
#[derive(Default)]
struct Slot {
    head: Option<Head>,
    got_head: bool,
    data: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
    recv_end: bool,
    failure: Option<Failure>,
    recv_window: i64,
    released: u32,
    /// What is left of the response's `content-length`.
    length: Option<u64>,
    send_window: i64,
    queued: VecDeque<Bytes>,
    queued_len: usize,
    /// END_STREAM goes after what is queued (with the trailers, if any).
    end_queued: bool,
    trailers_queued: Option<Vec<u8>>,
    send_done: bool,
    /// Counted against the upstream's SETTINGS_MAX_CONCURRENT_STREAMS.
    counted: bool,
    waker: Option<Waker>,
}

impl Slot {
    fn wake(&mut self) {
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    fn recv_closed(&self) -> bool {
        self.recv_end || self.failure.is_some()
    }
}

fn register(slot: &mut Option<Waker>, cx: &Context<'_>) {
    match slot {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => *slot = Some(cx.waker().clone()),
    }
}

pub(super) struct State {
    streams: HashMap<u32, Slot, foldhash::fast::RandomState>,
    next_id: u32,
    open: usize,
    max_open: usize,
    initial_window: i64,
    max_frame: usize,
    send_window: i64,
    recv_window: i64,
    released: u32,
    pub(super) out: BytesMut,
    pub(super) driver: Option<Waker>,
    waiting: VecDeque<Waker>,
    /// The connection's handles (the pool's and the calls'): with none and
    /// no stream left, the driver closes it.
    pub(super) handles: usize,
    /// The connection is over (for every stream that has not ended).
    pub(super) ended: Option<Failure>,
    /// The upstream's GOAWAY came: no new stream.
    goaway: bool,
    decoder: Decoder,
    block: Option<Block>,
    empty_data: u32,
    blocked: Vec<u32>,
}

impl State {
    /// A new connection's state, its preface and settings queued.
    pub(super) fn new(max_open: usize) -> State {
        let mut out = BytesMut::with_capacity(16 * 1024);
        out.extend_from_slice(crate::http2::inbound::PREFACE);
        let settings: [(u16, u32); 3] = [(2, 0), (4, STREAM_WINDOW), (6, MAX_HEADER_LIST)];
        frame(&mut out, settings.len() * 6, SETTINGS, 0, 0);
        for (id, v) in settings {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&v.to_be_bytes());
        }
        window_update(&mut out, 0, CONNECTION_WINDOW - 65_535);
        State {
            streams: HashMap::default(),
            next_id: 1,
            open: 0,
            max_open,
            initial_window: 65_535,
            max_frame: 16_384,
            send_window: 65_535,
            recv_window: i64::from(CONNECTION_WINDOW),
            released: 0,
            out,
            driver: None,
            waiting: VecDeque::new(),
            handles: 0,
            ended: None,
            goaway: false,
            decoder: Decoder::new(),
            block: None,
            empty_data: 0,
            blocked: Vec::new(),
        }
    }

    /// The bookkeeping's invariants (for the fuzz target).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(super) fn check(&self) {
        let counted = self.streams.values().filter(|s| s.counted).count();
        assert_eq!(counted, self.open, "streams counted against the limit");
        assert!((0..=i64::from(CONNECTION_WINDOW)).contains(&self.recv_window));
        let unread = |s: &Slot| s.data.iter().map(Bytes::len).sum::<usize>() as i64;
        assert_eq!(
            self.recv_window + i64::from(self.released),
            i64::from(CONNECTION_WINDOW),
            "the connection's window: open or owed"
        );
        for s in self.streams.values() {
            assert!((0..=i64::from(STREAM_WINDOW)).contains(&s.recv_window));
            if !s.recv_closed() {
                assert_eq!(
                    s.recv_window + i64::from(s.released) + unread(s),
                    i64::from(STREAM_WINDOW),
                    "a stream's window: open, owed, or held unread"
                );
            }
            assert_eq!(s.queued_len, s.queued.iter().map(Bytes::len).sum::<usize>());
            assert!(
                !s.send_done || s.queued.is_empty(),
                "data queued after the end"
            );
        }
    }

    pub(super) fn wake_driver(&mut self) {
        if let Some(w) = &self.driver {
            w.wake_by_ref();
        }
    }

    /// Whether the connection takes no new stream.
    /// (An upstream that allows no stream at all is as good as gone: the
    /// calls go to a new connection.)
    pub(super) fn refuses(&self) -> bool {
        self.ended.is_some()
            || self.goaway
            || self.max_open == 0
            || self.next_id > WINDOW_MAX as u32
    }

    /// Whether the driver is done: the connection ended, or nobody holds it
    /// and no stream is left.
    pub(super) fn finished(&self) -> bool {
        self.ended.is_some()
            || (self.handles == 0 && self.streams.is_empty())
            || (self.goaway && self.streams.is_empty())
    }

    /// Ends the connection: every stream not over fails with `why`, waiters
    /// are woken; the driver writes what is queued and closes.
    pub(super) fn end(&mut self, why: Failure) {
        if self.ended.is_some() {
            return;
        }
        let ids: Vec<u32> = self.streams.keys().copied().collect();
        for id in ids {
            self.fail(id, why.clone());
        }
        self.ended = Some(why);
        for w in self.waiting.drain(..) {
            w.wake();
        }
        self.wake_driver();
    }

    /// Ends the connection for a fault of the upstream's: GOAWAY `code`.
    pub(super) fn error(&mut self, code: u32) {
        if self.ended.is_none() {
            self.out.extend_from_slice(&goaway(0, code));
        }
        self.end(Failure::GoAway(code));
    }

    /// Closes the connection politely (nobody holds it any more).
    pub(super) fn close(&mut self) {
        if self.ended.is_none() {
            self.out.extend_from_slice(&goaway(0, NO_ERROR));
            self.end(Failure::Closed);
        }
    }

    // The calls' side.

    /// Ready once a new stream may be opened (or never will be).
    pub(super) fn poll_open(&mut self, cx: &Context<'_>) -> Poll<Result<(), Failure>> {
        if let Some(why) = &self.ended {
            return Poll::Ready(Err(why.clone()));
        }
        if self.refuses() {
            return Poll::Ready(Err(Failure::GoAway(NO_ERROR)));
        }
        if self.open < self.max_open {
            return Poll::Ready(Ok(()));
        }
        if !self.waiting.iter().any(|w| w.will_wake(cx.waker())) {
            self.waiting.push_back(cx.waker().clone());
        }
        Poll::Pending
    }

    /// A new stream: its HEADERS (and END_STREAM when `end`) queued.
    pub(super) fn open(&mut self, block: &[u8], end: bool) -> u32 {
        let id = self.next_id;
        self.next_id += 2;
        write_headers(&mut self.out, id, end, block);
        self.open += 1;
        self.streams.insert(
            id,
            Slot {
                recv_window: i64::from(STREAM_WINDOW),
                send_window: self.initial_window,
                send_done: end,
                counted: true,
                ..Slot::default()
            },
        );
        self.wake_driver();
        id
    }

    pub(super) fn poll_head(&mut self, id: u32, cx: &Context<'_>) -> Poll<Result<Head, Failure>> {
        let Some(slot) = self.streams.get_mut(&id) else {
            return Poll::Ready(Err(Failure::Closed));
        };
        if let Some(head) = slot.head.take() {
            return Poll::Ready(Ok(head));
        }
        if let Some(why) = &slot.failure {
            return Poll::Ready(Err(why.clone()));
        }
        register(&mut slot.waker, cx);
        Poll::Pending
    }

    /// The next piece of the body, released to both windows as it is taken.
    pub(super) fn poll_data(
        &mut self,
        id: u32,
        cx: &Context<'_>,
    ) -> Poll<Option<Result<Bytes, Failure>>> {
        let Some(slot) = self.streams.get_mut(&id) else {
            return Poll::Ready(None);
        };
        if let Some(data) = slot.data.pop_front() {
            self.give_back(id, data.len() as u32);
            return Poll::Ready(Some(Ok(data)));
        }
        if let Some(why) = &slot.failure {
            return Poll::Ready(Some(Err(why.clone())));
        }
        if slot.recv_end {
            return Poll::Ready(None);
        }
        register(&mut slot.waker, cx);
        Poll::Pending
    }

    /// Gives `n` bytes back to the window of `id` (once half of it is
    /// owed: one WINDOW_UPDATE per megabyte), while the upstream may still
    /// send on it.
    fn give_back(&mut self, id: u32, n: u32) {
        let Some(slot) = self.streams.get_mut(&id) else {
            return;
        };
        slot.released += n;
        if !slot.recv_closed() && slot.released >= STREAM_WINDOW / 2 {
            window_update(&mut self.out, id, slot.released);
            slot.recv_window += i64::from(slot.released);
            slot.released = 0;
            self.wake_driver();
        }
    }

    /// Gives `n` bytes back to the connection's window (as they arrive: the
    /// streams' windows bound what is held, and one stream's client that
    /// reads nothing must not stall the others sharing the connection).
    fn release(&mut self, n: u32) {
        self.released += n;
        if self.released >= CONNECTION_WINDOW / 2 && self.ended.is_none() {
            window_update(&mut self.out, 0, self.released);
            self.recv_window += i64::from(self.released);
            self.released = 0;
            self.wake_driver();
        }
    }

    pub(super) fn poll_trailers(
        &mut self,
        id: u32,
        cx: &Context<'_>,
    ) -> Poll<Result<Option<HeaderMap>, Failure>> {
        let Some(slot) = self.streams.get_mut(&id) else {
            return Poll::Ready(Ok(None));
        };
        if let Some(t) = slot.trailers.take() {
            return Poll::Ready(Ok(Some(t)));
        }
        if let Some(why) = &slot.failure {
            return Poll::Ready(Err(why.clone()));
        }
        if slot.recv_end {
            return Poll::Ready(Ok(None));
        }
        register(&mut slot.waker, cx);
        Poll::Pending
    }

    /// The response has nothing more to give.
    pub(super) fn is_end_stream(&self, id: u32) -> bool {
        self.streams
            .get(&id)
            .is_none_or(|s| s.recv_end && s.data.is_empty() && s.trailers.is_none())
    }

    /// Ready once all that was given to send is framed (or never will be).
    pub(super) fn poll_room(&mut self, id: u32, cx: &Context<'_>) -> Poll<Result<(), Failure>> {
        let Some(slot) = self.streams.get_mut(&id) else {
            return Poll::Ready(Err(Failure::Closed));
        };
        if let Some(why) = &slot.failure {
            return Poll::Ready(Err(why.clone()));
        }
        if slot.queued_len == 0 {
            return Poll::Ready(Ok(()));
        }
        register(&mut slot.waker, cx);
        Poll::Pending
    }

    /// Queues a piece of the request body (and END_STREAM when `end`).
    pub(super) fn send_data(&mut self, id: u32, data: Bytes, end: bool) -> Result<(), Failure> {
        let slot = self.streams.get_mut(&id).ok_or(Failure::Closed)?;
        if let Some(why) = &slot.failure {
            return Err(why.clone());
        }
        if slot.send_done || slot.end_queued {
            return Ok(());
        }
        slot.queued_len += data.len();
        if !data.is_empty() {
            slot.queued.push_back(data);
        }
        slot.end_queued = end;
        self.pump(id, false);
        Ok(())
    }

    /// Queues the request's trailers (a header block), which end it.
    pub(super) fn send_trailers(&mut self, id: u32, block: Vec<u8>) {
        if let Some(slot) = self.streams.get_mut(&id)
            && !slot.send_done
            && !slot.end_queued
        {
            slot.trailers_queued = Some(block);
            slot.end_queued = true;
            self.pump(id, false);
        }
    }

    /// Resets the stream (RST_STREAM `code`) unless it is over.
    pub(super) fn reset(&mut self, id: u32, code: u32) {
        let Some(slot) = self.streams.get_mut(&id) else {
            return;
        };
        if !(slot.send_done && slot.recv_closed()) && self.ended.is_none() {
            rst_stream(&mut self.out, id, code);
            self.wake_driver();
        }
        self.fail(id, Failure::Reset(code));
    }

    /// The stream is over both ways: `why`, unless its answer was whole
    /// already; nothing more goes up.
    fn fail(&mut self, id: u32, why: Failure) {
        let Some(slot) = self.streams.get_mut(&id) else {
            return;
        };
        if !slot.recv_closed() {
            slot.failure = Some(why);
        }
        slot.send_done = true;
        slot.queued.clear();
        slot.queued_len = 0;
        slot.wake();
        self.settle(id);
    }

    /// The call let go of its stream: reset (CANCEL) if not over, forgotten.
    pub(super) fn forget(&mut self, id: u32) {
        self.reset(id, CANCEL);
        self.discard(id);
        self.streams.remove(&id);
        if self.finished() {
            self.wake_driver();
        }
    }

    /// Drops what `id` received and nobody will read.
    fn discard(&mut self, id: u32) {
        if let Some(slot) = self.streams.get_mut(&id) {
            slot.data.clear();
        }
    }

    /// A stream over both ways no longer counts against the upstream's
    /// limit: a waiting call may open one.
    fn settle(&mut self, id: u32) {
        if let Some(slot) = self.streams.get_mut(&id)
            && slot.counted
            && slot.send_done
            && slot.recv_closed()
        {
            slot.counted = false;
            self.open -= 1;
            // All of them: one woken may have given up meanwhile.
            for w in self.waiting.drain(..) {
                w.wake();
            }
        }
    }

    /// Frames what `id` has queued, as far as both windows and the write
    /// buffer allow; the rest waits (the stream is noted as blocked). The
    /// stream's task is woken when `wake` (when it is not the caller).
    fn pump(&mut self, id: u32, wake: bool) {
        let Some(slot) = self.streams.get_mut(&id) else {
            return;
        };
        while let Some(front) = slot.queued.front_mut() {
            let n = front
                .len()
                .min(slot.send_window.max(0) as usize)
                .min(self.send_window.max(0) as usize)
                .min(self.max_frame);
            if n == 0 || self.out.len() >= OUT_HIGH {
                if !self.blocked.contains(&id) {
                    self.blocked.push(id);
                }
                return;
            }
            let piece = front.split_to(n);
            if front.is_empty() {
                slot.queued.pop_front();
            }
            slot.queued_len -= n;
            slot.send_window -= n as i64;
            self.send_window -= n as i64;
            let end = slot.queued.is_empty() && slot.end_queued && slot.trailers_queued.is_none();
            frame(&mut self.out, n, DATA, if end { END_STREAM } else { 0 }, id);
            self.out.extend_from_slice(&piece);
            slot.send_done |= end;
        }
        if slot.end_queued && !slot.send_done {
            match slot.trailers_queued.take() {
                Some(block) => write_headers(&mut self.out, id, true, &block),
                None => frame(&mut self.out, 0, DATA, END_STREAM, id),
            }
            slot.send_done = true;
        }
        if wake {
            slot.wake();
        }
        self.wake_driver();
        self.settle(id);
    }

    /// Frames what blocked streams can send now.
    pub(super) fn pump_blocked(&mut self) {
        if self.blocked.is_empty() || self.out.len() >= OUT_HIGH {
            return;
        }
        let blocked = std::mem::take(&mut self.blocked);
        for id in blocked {
            self.pump(id, true);
        }
    }
}

/// A frame's head.
pub(super) fn frame(out: &mut BytesMut, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&crate::http2::ledger::frame_head(len, kind, flags, stream));
}

fn window_update(out: &mut BytesMut, stream: u32, increment: u32) {
    out.extend_from_slice(&crate::http2::ledger::window_update(stream, increment));
}

fn rst_stream(out: &mut BytesMut, stream: u32, code: u32) {
    frame(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}
