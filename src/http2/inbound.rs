//! The frames one client connection sends, on their way to hyper: header
//! blocks gathered, decoded, judged and written again; every other frame
//! passed on unchanged (a DATA frame's payload as it arrives, not held);
//! each frame counted against its kind's budget.
//!
//! The budgets: a client may send each kind of frame that serves no
//! request (PING, SETTINGS, WINDOW_UPDATE, PRIORITY, RST_STREAM, DATA
//! without payload or end, a header fragment without bytes, unknown kinds)
//! [`BASE`] times, plus [`PER_STREAM`] for each stream it opened, plus
//! [`PER_FRAME_SERVED`] for each DATA or HEADERS frame sluice wrote to it
//! (control frames sluice writes, PING and SETTINGS answers, earn nothing).
//! A browser's few
//! PINGs and SETTINGS, a PRIORITY per stream, a WINDOW_UPDATE per DATA
//! frame it read, stay far inside; a flood is cut after about a thousand
//! frames, a millisecond of work. nginx does the same with its own counts
//! (control frames against the payload it received and sent).
//!
//! A header block may come in any number of CONTINUATION frames (nginx
//! serves one of 59); what is bounded is its bytes: [`Inbound::new`]'s
//! `block_max`.

pub use super::frames::goaway;
use super::frames::{headers_fragment, write_headers};
use super::hpack::{self, CompressionError, Decoder};
use super::ledger::{self, Ledger, Replay};
use super::request::{self, Limits, Verdict};
use crate::http1::{HeadRules, Refusal};
use bytes::{Buf, BytesMut};

const DATA: u8 = 0;
pub(super) const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PING: u8 = 6;
pub const WINDOW_UPDATE: u8 = 8;
pub(super) const CONTINUATION: u8 = 9;

pub(super) const END_STREAM: u8 = 0x1;
pub(super) const END_HEADERS: u8 = 0x4;

/// The client connection preface (RFC 9113 §3.4): passed on as it is
/// (hyper checks it).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// RST_STREAM's and GOAWAY's `STREAM_CLOSED`.
const STREAM_CLOSED: u32 = 0x5;
/// The largest frame hyper accepts (`SETTINGS_MAX_FRAME_SIZE`, its
/// default): the blocks written for it are cut to this.
pub(super) const FRAME_MAX: usize = 16 * 1024;

/// Frames of each kind any connection may send.
pub const BASE: u32 = 1000;
/// DATA frames without payload or end a connection may send in its life:
/// the h2 crate's own bound (`MAX_RECV_EMPTY_DATA_FRAMES`), met here first
/// so that the cut is logged and counted like the others.
pub const EMPTY_DATA_MAX: u64 = 100;
/// More of each kind for every stream the client opened.
pub const PER_STREAM: u32 = 4;
/// More of each kind for every DATA or HEADERS frame written to the client
/// (a client may answer each DATA frame with two WINDOW_UPDATEs, its
/// stream's and its connection's).
pub const PER_FRAME_SERVED: u64 = 2;

/// The kinds of frames that are budgeted, with their names for the log
/// and the `frame` label of `sluice_http2_floods`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flood {
    Data,
    Headers,
    Continuation,
    Priority,
    RstStream,
    Settings,
    Ping,
    WindowUpdate,
    Unknown,
}

impl Flood {
    pub fn label(self) -> &'static str {
        match self {
            Flood::Data => "data",
            Flood::Headers => "headers",
            Flood::Continuation => "continuation",
            Flood::Priority => "priority",
            Flood::RstStream => "rst_stream",
            Flood::Settings => "settings",
            Flood::Ping => "ping",
            Flood::WindowUpdate => "window_update",
            Flood::Unknown => "unknown",
        }
    }

    /// The log's name of the frame kind.
    pub fn frame_name(self) -> &'static str {
        match self {
            Flood::Data => "empty DATA",
            Flood::Headers => "empty HEADERS",
            Flood::Continuation => "CONTINUATION",
            Flood::Priority => "PRIORITY",
            Flood::RstStream => "RST_STREAM",
            Flood::Settings => "SETTINGS",
            Flood::Ping => "PING",
            Flood::WindowUpdate => "WINDOW_UPDATE",
            Flood::Unknown => "unknown",
        }
    }
}

/// Why the connection must end (a GOAWAY with [`Abort::code`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Abort {
    /// Past a budget: `count` frames of one kind (or a header block past
    /// its bytes).
    Flood { kind: Flood, count: u32 },
    /// A header block HPACK cannot decode.
    Compression(&'static str),
    /// Framing that breaks RFC 9113 where only the reader can see it
    /// (padding, a block interrupted).
    Protocol(&'static str),
    /// A header block nginx takes for a connection error (an empty field
    /// name): what the client sent, in nginx's words.
    Field(&'static str),
}

impl Abort {
    /// The GOAWAY's error code.
    pub fn code(&self) -> u32 {
        match self {
            Abort::Flood { .. } => 0xb,
            Abort::Compression(_) => 0x9,
            Abort::Protocol(_) | Abort::Field(_) => 0x1,
        }
    }
}

/// A header block being gathered.
struct Block {
    stream: u32,
    end_stream: bool,
    /// Its priority fields name its own stream (RFC 9113 §5.3.1: a stream
    /// error, as nginx answers it).
    self_dependent: bool,
    bytes: Vec<u8>,
}

/// A request the gate refused: the service answers it on its stream,
/// finding it by `token` (see [`request::stand_in`]).
#[derive(Debug)]
pub struct Refused {
    pub token: u64,
    pub refusal: Refusal,
}

/// One connection's inbound frames.
pub struct Inbound {
    rules: HeadRules,
    limits: Limits,
    block_max: usize,
    /// Bytes read and not yet looked at (a frame's head, or a header frame
    /// not yet whole).
    raw: BytesMut,
    /// Bytes for hyper.
    out: BytesMut,
    preface: usize,
    /// Bytes of a passed-on frame's payload still to come.
    pass: usize,
    /// Bytes of a dropped frame's payload still to come.
    skip: usize,
    block: Option<Block>,
    decoder: Decoder,
    last_stream: u32,
    opened: u32,
    /// DATA and HEADERS frames written to the client.
    served: u64,
    counts: [u32; 9],
    refused: Vec<Refused>,
    /// nginx's info lines about heads let through (fields dropped) or
    /// streams reset, for the log.
    notices: Vec<Refusal>,
    next_token: u64,
    aborted: Option<Abort>,
    /// What both sides agreed (for parking).
    ledger: Ledger,
    /// The highest stream opened before the connection was last parked:
    /// frames on those streams are answered here (see [`ledger`]).
    floor: u32,
    /// Frames for the client that the gate itself writes (answers on
    /// streams below `floor`).
    to_client: Vec<u8>,
    /// How much of the client's connection WINDOW_UPDATEs hyper is not to
    /// see (see [`Replay::deficit`]).
    deficit: u32,
    /// The client's connection WINDOW_UPDATE increments since last taken.
    granted: u64,
    /// Requests reset for a malformed head since last taken (each gets
    /// nginx's access-log line).
    resets: u32,
    /// A client's RST_STREAM being passed on, those passed whole, stopped after one.
    resetting: Option<u32>,
    client_resets: Vec<u32>,
    stopped: bool,
}

impl Inbound {
    pub fn new(rules: HeadRules) -> Inbound {
        let limits = Limits::of(&rules);
        Inbound {
            rules,
            limits,
            // Room for the whole list plus a frame's worth of HPACK's
            // overhead and padding.
            block_max: limits.list + FRAME_MAX,
            raw: BytesMut::new(),
            out: BytesMut::new(),
            preface: PREFACE.len(),
            pass: 0,
            skip: 0,
            block: None,
            decoder: Decoder::new(),
            last_stream: 0,
            opened: 0,
            served: 0,
            counts: [0; 9],
            refused: Vec::new(),
            notices: Vec::new(),
            next_token: 0,
            aborted: None,
            ledger: Ledger::default(),
            floor: 0,
            to_client: Vec::new(),
            deficit: 0,
            granted: 0,
            resets: 0,
            resetting: None,
            client_resets: Vec::new(),
            stopped: false,
        }
    }

    /// Where the socket's bytes go.
    pub fn input(&mut self) -> &mut BytesMut {
        &mut self.raw
    }

    /// What hyper may read now; take from the front.
    pub fn output(&mut self) -> &mut BytesMut {
        &mut self.out
    }

    /// The highest stream the client opened (a GOAWAY's last stream).
    pub fn last_stream(&self) -> u32 {
        self.last_stream
    }

    /// sluice wrote a DATA or HEADERS frame to the client: the budgets grow.
    pub fn served(&mut self) {
        self.served = self.served.saturating_add(1);
    }

    /// The refusals since the last call, for the streams' service.
    pub fn take_refused(&mut self) -> Vec<Refused> {
        std::mem::take(&mut self.refused)
    }

    /// The info lines nginx would have logged since the last call: fields
    /// dropped, streams reset and why.
    /// How many requests were reset for a malformed head since the last
    /// call.
    pub fn take_resets(&mut self) -> u32 {
        std::mem::take(&mut self.resets)
    }

    /// The streams the client reset since the last call (see [`Inbound::stopped`]).
    pub fn take_client_resets(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.client_resets)
    }

    /// Stopped after a client's RST_STREAM, for its stream to be let go
    /// before hyper reads on: go on before reading more.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    pub fn take_notices(&mut self) -> Vec<Refusal> {
        std::mem::take(&mut self.notices)
    }

    /// Nothing held: no partial frame, nothing for hyper (the buffers may
    /// be released).
    pub fn idle(&self) -> bool {
        self.raw.is_empty() && self.out.is_empty() && self.block.is_none()
    }

    /// Gives the buffers back while nothing is held in them.
    pub fn release(&mut self) {
        if self.raw.is_empty() {
            self.raw = BytesMut::new();
        }
        if self.out.is_empty() {
            self.out = BytesMut::new();
        }
    }

    /// See [`Replay::deficit`]: 0 once hyper's idea of the client's window
    /// is the true one.
    pub fn deficit(&self) -> u32 {
        self.deficit
    }

    /// The client's connection WINDOW_UPDATE increments since the last call.
    pub fn take_granted(&mut self) -> u64 {
        std::mem::take(&mut self.granted)
    }

    /// Frames the gate answers itself, for the client: take them from the
    /// front, between hyper's frames.
    pub fn answers(&mut self) -> &mut Vec<u8> {
        &mut self.to_client
    }

    /// What both sides agreed: sluice's frames are recorded here as they
    /// are written.
    pub fn ledger(&mut self) -> &mut Ledger {
        &mut self.ledger
    }

    /// Nothing is in flight in either direction: the connection may be
    /// parked (see [`ledger`]), its hyper connection started afresh with a
    /// window of `connection_window`.
    pub fn parkable(&self, connection_window: u32) -> bool {
        self.idle()
            && self.pass == 0
            && self.skip == 0
            && self.to_client.is_empty()
            && self.aborted.is_none()
            && self.ledger.quiet(connection_window)
    }

    /// Parks the connection, if [`Inbound::parkable`]: what starts a fresh
    /// hyper connection in step with the client. Frames on the streams
    /// used so far are answered here from now on.
    pub fn park(&mut self, connection_window: u32) -> Option<Replay> {
        if !self.parkable(connection_window) {
            return None;
        }
        let replay = self.ledger.replay(connection_window)?;
        self.floor = self.last_stream;
        self.deficit = replay.deficit;
        self.release();
        self.to_client = Vec::new();
        self.refused = Vec::new();
        self.notices = Vec::new();
        Some(replay)
    }

    /// Moves what [`Inbound::input`] holds on to [`Inbound::output`], as far
    /// as whole frames (or a DATA payload's bytes) allow.
    pub fn process(&mut self) -> Result<(), Abort> {
        if let Some(a) = &self.aborted {
            return Err(a.clone());
        }
        self.stopped = false;
        let r = self.step();
        if let Err(a) = &r {
            self.aborted = Some(a.clone());
            self.raw = BytesMut::new();
        }
        r
    }

    fn step(&mut self) -> Result<(), Abort> {
        loop {
            if self.skip > 0 {
                let n = self.skip.min(self.raw.len());
                if n == 0 {
                    return Ok(());
                }
                self.raw.advance(n);
                self.skip -= n;
                continue;
            }
            if self.preface > 0 || self.pass > 0 {
                let want = self.preface.max(self.pass);
                let n = want.min(self.raw.len());
                if n == 0 {
                    return Ok(());
                }
                self.out.extend_from_slice(&self.raw[..n]);
                self.raw.advance(n);
                if self.preface > 0 {
                    self.preface -= n;
                } else {
                    self.pass -= n;
                }
                continue;
            }
            if self.reset_passed() {
                return Ok(());
            }
            let Some(head) = self.raw.get(..9) else {
                return Ok(());
            };
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let (kind, flags) = (head[3], head[4]);
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            if kind == HEADERS || kind == CONTINUATION {
                if len > FRAME_MAX {
                    // hyper refuses it (FRAME_SIZE_ERROR); so do we.
                    return Err(Abort::Protocol("header frame over the maximum size"));
                }
                if self.raw.len() < 9 + len {
                    return Ok(());
                }
                let frame = self.raw.split_to(9 + len);
                self.header_frame(kind, flags, stream, &frame[9..])?;
                continue;
            }
            if self.block.is_some() {
                return Err(Abort::Protocol("a header block was interrupted"));
            }
            // SETTINGS and WINDOW_UPDATE are read whole, for the ledger.
            let whole = (kind == SETTINGS || kind == WINDOW_UPDATE) && len <= FRAME_MAX;
            if whole && self.raw.len() < 9 + len {
                return Ok(());
            }
            self.count_frame(kind, flags, len)?;
            let payload = if whole { &self.raw[9..9 + len] } else { &[] };
            self.ledger.client_frame(kind, flags, stream, len, payload);
            if kind == WINDOW_UPDATE && stream == 0 && whole && len == 4 && self.window_update() {
                continue;
            }
            if self.closed_before(stream)
                && matches!(kind, DATA | PRIORITY | RST_STREAM | WINDOW_UPDATE)
            {
                // A stream of before the connection was parked: what h2
                // does on a closed stream (DATA reset, the rest ignored).
                if kind == DATA {
                    self.answer_closed(stream, len)?;
                }
                self.raw.advance(9);
                self.skip = len;
                continue;
            }
            self.resetting = (kind == RST_STREAM && stream != 0).then_some(stream);
            self.out.extend_from_slice(&self.raw[..9]);
            self.raw.advance(9);
            self.pass = len;
        }
    }

    /// A client's RST_STREAM is whole with hyper: what follows it waits.
    fn reset_passed(&mut self) -> bool {
        let passed = self.resetting.take().map(|s| self.client_resets.push(s));
        self.stopped = passed.is_some();
        self.stopped
    }

    /// The client's connection WINDOW_UPDATE, whole at the front of `raw`:
    /// counted as granted, and while hyper believes the window larger than
    /// it is, its increment goes to hyper less the difference (or not at
    /// all). True when it was dealt with here.
    fn window_update(&mut self) -> bool {
        let increment = u32::from_be_bytes([self.raw[9], self.raw[10], self.raw[11], self.raw[12]])
            & 0x7fff_ffff;
        self.granted += u64::from(increment);
        if self.deficit == 0 || increment == 0 {
            return false;
        }
        let kept = increment.min(self.deficit);
        self.deficit -= kept;
        if increment > kept {
            self.out
                .extend_from_slice(&ledger::window_update(0, increment - kept));
        }
        self.raw.advance(13);
        true
    }

    /// `stream` was over before the connection was last parked: hyper now
    /// would take it for a new one.
    fn closed_before(&self, stream: u32) -> bool {
        stream % 2 == 1 && stream <= self.floor
    }

    /// A frame on a stream closed before the park: `RST_STREAM
    /// STREAM_CLOSED`, as h2 answers it, and the connection window its
    /// `len` bytes took, given back. Counted as a reset that serves
    /// nothing.
    fn answer_closed(&mut self, stream: u32, len: usize) -> Result<(), Abort> {
        self.spend(Flood::RstStream)?;
        self.to_client
            .extend_from_slice(&ledger::rst_stream(stream, STREAM_CLOSED));
        if len > 0 {
            self.to_client
                .extend_from_slice(&ledger::window_update(0, len as u32));
        }
        Ok(())
    }

    /// Counts a frame that is passed on against its kind's budget.
    fn count_frame(&mut self, kind: u8, flags: u8, len: usize) -> Result<(), Abort> {
        let flood = match kind {
            DATA if len == 0 && flags & END_STREAM == 0 => Flood::Data,
            DATA => return Ok(()),
            PRIORITY => Flood::Priority,
            RST_STREAM => Flood::RstStream,
            SETTINGS => Flood::Settings,
            PING => Flood::Ping,
            WINDOW_UPDATE => Flood::WindowUpdate,
            // PUSH_PROMISE and GOAWAY: hyper ends the connection.
            5 | 7 => return Ok(()),
            _ => Flood::Unknown,
        };
        self.spend(flood)
    }

    fn spend(&mut self, kind: Flood) -> Result<(), Abort> {
        let i = kind as usize;
        self.counts[i] = self.counts[i].saturating_add(1);
        let allowed = match kind {
            Flood::Data => EMPTY_DATA_MAX,
            _ => {
                u64::from(BASE)
                    + u64::from(PER_STREAM) * u64::from(self.opened)
                    + self.served * PER_FRAME_SERVED
            }
        };
        if u64::from(self.counts[i]) > allowed {
            return Err(Abort::Flood {
                kind,
                count: self.counts[i],
            });
        }
        Ok(())
    }

    fn header_frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
    ) -> Result<(), Abort> {
        let fragment = if kind == HEADERS {
            if self.block.is_some() {
                return Err(Abort::Protocol("a header block was interrupted"));
            }
            if stream % 2 == 0 {
                // A stream only the server may open (or the connection's):
                // RFC 9113 §5.1.1's connection error, as nginx's "client
                // sent HEADERS frame with incorrect identifier".
                return Err(Abort::Protocol("HEADERS frame with incorrect identifier"));
            }
            let (fragment, depends) = headers_fragment(flags, payload)?;
            self.block = Some(Block {
                stream,
                end_stream: flags & END_STREAM != 0,
                self_dependent: depends == Some(stream),
                bytes: Vec::with_capacity(fragment.len()),
            });
            if fragment.is_empty() && flags & END_HEADERS == 0 {
                self.spend(Flood::Headers)?;
            }
            fragment
        } else {
            match &self.block {
                Some(b) if b.stream == stream => {}
                _ => return Err(Abort::Protocol("CONTINUATION without its HEADERS")),
            }
            if payload.is_empty() {
                self.spend(Flood::Continuation)?;
            }
            payload
        };
        let Some(block) = self.block.as_mut() else {
            return Ok(());
        };
        block.bytes.extend_from_slice(fragment);
        if block.bytes.len() > self.block_max {
            return Err(Abort::Flood {
                kind: Flood::Continuation,
                count: u32::try_from(block.bytes.len()).unwrap_or(u32::MAX),
            });
        }
        if flags & END_HEADERS != 0 {
            if let Some(block) = self.block.take() {
                self.whole_block(block)?;
            }
        }
        Ok(())
    }

    /// A whole header block: decoded (always: the table is shared by every
    /// block), judged, and written for hyper on the same stream.
    fn whole_block(&mut self, block: Block) -> Result<(), Abort> {
        let decoded = self
            .decoder
            .decode(&block.bytes, self.limits.list)
            .map_err(|CompressionError(why)| Abort::Compression(why))?;
        if decoded.fields.iter().any(|f| f.name.is_empty()) {
            return Err(Abort::Field("zero header name length"));
        }
        let new_request = block.stream % 2 == 1 && block.stream > self.last_stream;
        if !new_request && self.closed_before(block.stream) {
            return self.answer_closed(block.stream, 0);
        }
        let out = if new_request {
            self.last_stream = block.stream;
            self.opened = self.opened.saturating_add(1);
            self.ledger.opened(block.stream, block.end_stream);
            if block.self_dependent {
                // Reset before it is a request (nginx logs no access line).
                let out = request::reset_block();
                write_headers(&mut self.out, block.stream, block.end_stream, &out);
                return Ok(());
            }
            match request::judge(&decoded.fields, decoded.over, &self.rules, self.limits) {
                Verdict::Accept {
                    block: mut b,
                    dropped,
                } => {
                    self.notices
                        .extend(dropped.into_iter().map(request::dropped_notice));
                    let mut id = itoa::Buffer::new();
                    hpack::encode(
                        &mut b,
                        request::STREAM_FIELD.as_bytes(),
                        id.format(block.stream).as_bytes(),
                    );
                    b
                }
                Verdict::Reset(why) => {
                    self.notices.extend(why);
                    self.resets += 1;
                    request::reset_block()
                }
                Verdict::Refuse(refusal) => {
                    let token = self.next_token;
                    self.next_token += 1;
                    self.refused.push(Refused { token, refusal });
                    request::stand_in(token)
                }
            }
        } else {
            // Trailers, or a block on a stream hyper will refuse anyway.
            let flags = if block.end_stream { END_STREAM } else { 0 };
            self.ledger
                .client_frame(HEADERS, flags, block.stream, 0, &[]);
            request::trailers(&decoded.fields)
        };
        write_headers(&mut self.out, block.stream, block.end_stream, &out);
        Ok(())
    }
}

#[cfg(test)]
#[path = "inbound_tests.rs"]
mod tests;
