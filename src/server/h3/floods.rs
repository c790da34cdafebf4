//! What an HTTP/3 client may send that serves no request, counted per
//! connection, and the cut past it: `H3_EXCESSIVE_LOAD`, one info line
//! (nginx's "http3 flood detected"), `sluice_http3_floods_total{kind}`.
//! Also the connection's protocol errors (sluice's own and h3's): one info
//! line and `sluice_http3_protocol_errors_total{code}`.
//!
//! What the stack bounds already, measured against h3 0.0.8 and quinn 0.11
//! (tests/it/h3/floods.rs drives each): a second SETTINGS, DATA or HEADERS
//! on the control stream (`H3_FRAME_UNEXPECTED`), a control stream ended
//! or reset (`H3_CLOSED_CRITICAL_STREAM`), a second control stream
//! (`H3_STREAM_CREATION_ERROR`), a header block that refers to the dynamic
//! table (`QPACK_DECOMPRESSION_FAILED`): h3 closes the connection, sluice
//! logs and counts it. QUIC's stream credit bounds how many streams are
//! open at once, never how many come and go.
//!
//! What nothing bounded, and is counted here: request streams reset before
//! their answer (rapid reset), DATA frames without payload or with little,
//! frames of unknown or reserved types, PRIORITY_UPDATE, GOAWAY /
//! MAX_PUSH_ID / CANCEL_PUSH on the control stream, unidirectional streams
//! of unknown types (QUIC's credit comes back as each one closes), and the
//! QPACK streams, which h3 never reads: their instructions are sluice's to
//! judge ([`super::framing`]).
//!
//! The budgets are HTTP/2's ([`crate::http2::inbound`]): each kind
//! [`BASE`] times plus [`PER_STREAM`] for each request stream the client
//! opened; DATA frames also earn one for each [`DATA_BYTES_PER_FRAME`]
//! bytes they carry, so a body in frames of any usual size never runs out;
//! [`UNI_STREAMS_MAX`] unidirectional streams beside the three critical
//! ones (nginx allows none); resets past twice `http3_max_concurrent_streams`
//! and past the streams answered, as HTTP/2's rapid-reset bound.

use super::framing::{Fate, Header};
use crate::errlog::{self, Severity};
use crate::request::Env;
use h3::error::Code;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Frames of each kind any connection may send.
pub(super) const BASE: u64 = 1000;
/// More of each kind for every request stream the client opened.
pub(super) const PER_STREAM: u64 = 4;
/// DATA frames earn one more frame for every so many bytes they carry: a
/// body in frames of 64 bytes or more is never cut, one of a byte a frame
/// is after about a thousand.
pub(super) const DATA_BYTES_PER_FRAME: u64 = 64;
/// Unidirectional streams of unknown or reserved types (or ended before
/// their type) in a connection's life.
pub(super) const UNI_STREAMS_MAX: u64 = 100;

/// The kinds counted, with their label and their words in the log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flood {
    Reset,
    EmptyData,
    SmallData,
    Unknown,
    PriorityUpdate,
    Control,
    UniStream,
    Qpack,
}

const KINDS: usize = 8;

impl Flood {
    /// The `kind` label of `sluice_http3_floods_total`.
    pub(super) fn label(self) -> &'static str {
        match self {
            Flood::Reset => "reset",
            Flood::EmptyData => "empty_data",
            Flood::SmallData => "small_data",
            Flood::Unknown => "unknown_frame",
            Flood::PriorityUpdate => "priority_update",
            Flood::Control => "control_frame",
            Flood::UniStream => "uni_stream",
            Flood::Qpack => "qpack_instruction",
        }
    }

    /// What the client sent too many of.
    fn words(self) -> &'static str {
        match self {
            Flood::Reset => "streams reset before their response",
            Flood::EmptyData => "empty DATA frames",
            Flood::SmallData => "small DATA frames",
            Flood::Unknown => "frames of unknown types",
            Flood::PriorityUpdate => "PRIORITY_UPDATE frames",
            Flood::Control => "GOAWAY, MAX_PUSH_ID or CANCEL_PUSH frames",
            Flood::UniStream => "unidirectional streams of unknown types",
            Flood::Qpack => "QPACK instructions that change nothing",
        }
    }
}

/// Which stream a frame came on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Request,
    Control,
}

/// How a request stream ended, for the rapid-reset bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Its response (or refusal) was written whole.
    Answered,
    /// The client reset it (or stopped reading it) before that.
    Cancelled,
    /// Anything else (malformed, timed out, the upstream broke off).
    Other,
}

/// The connection is being closed: read no further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Closing;

const DATA: u64 = 0x0;
const CANCEL_PUSH: u64 = 0x3;
const GOAWAY: u64 = 0x7;
const MAX_PUSH_ID: u64 = 0xd;
/// RFC 9218's PRIORITY_UPDATE, for a request and for a push.
const PRIORITY_UPDATE: [u64; 2] = [0xf0700, 0xf0701];

/// Frame types h3 knows (RFC 9114 §7.2, and HTTP/2's reserved ones, which
/// h3 refuses): passed on for h3 to act on.
fn known(ty: u64) -> bool {
    ty <= 0x9 || ty == MAX_PUSH_ID
}

/// One connection's counts, shared by its streams' tasks.
pub(super) struct Guard {
    id: u64,
    client: IpAddr,
    quic: quinn::Connection,
    env: Arc<Env>,
    cancelled_max: u64,
    counts: [AtomicU64; KINDS],
    opened: AtomicU64,
    payload: AtomicU64,
    answered: AtomicU64,
    /// Request streams that ended without their whole answer.
    aborted: AtomicU64,
    closing: AtomicBool,
}

impl Guard {
    pub(super) fn new(
        (id, client): (u64, IpAddr),
        quic: quinn::Connection,
        env: Arc<Env>,
        max_streams: u32,
    ) -> Arc<Guard> {
        Arc::new(Guard {
            id,
            client,
            quic,
            env,
            cancelled_max: 2 * u64::from(max_streams),
            counts: Default::default(),
            opened: AtomicU64::new(0),
            payload: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            aborted: AtomicU64::new(0),
            closing: AtomicBool::new(false),
        })
    }

    /// The client opened a request stream.
    pub(super) fn opened(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the connection is being closed (by the guard or for h3's
    /// protocol error, already logged).
    pub(super) fn closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    fn allowed(&self, kind: Flood) -> u64 {
        let opened = self.opened.load(Ordering::Relaxed);
        match kind {
            Flood::UniStream => UNI_STREAMS_MAX,
            Flood::Reset => self
                .cancelled_max
                .max(self.answered.load(Ordering::Relaxed)),
            Flood::SmallData => {
                BASE + PER_STREAM * opened
                    + self.payload.load(Ordering::Relaxed) / DATA_BYTES_PER_FRAME
            }
            _ => BASE + PER_STREAM * opened,
        }
    }

    /// `n` more of `kind`: past the budget, the connection is cut.
    pub(super) fn spend(&self, kind: Flood, n: u64) -> Result<(), Closing> {
        let count = self.counts[kind as usize].fetch_add(n, Ordering::Relaxed) + n;
        if count > self.allowed(kind) {
            self.flood(kind, count);
            return Err(Closing);
        }
        if self.closing() {
            return Err(Closing);
        }
        Ok(())
    }

    /// A frame's header on a request or control stream: whether h3 gets
    /// it, and what it costs.
    pub(super) fn frame(&self, role: Role, h: Header) -> Result<Fate, Closing> {
        let (fate, cost) = match (role, h.ty) {
            (Role::Request, DATA) if h.len == 0 => (Fate::Drop, Some(Flood::EmptyData)),
            (Role::Request, DATA) => {
                self.payload.fetch_add(h.len, Ordering::Relaxed);
                (Fate::Keep, Some(Flood::SmallData))
            }
            (Role::Control, CANCEL_PUSH | GOAWAY | MAX_PUSH_ID) => {
                (Fate::Keep, Some(Flood::Control))
            }
            (Role::Control, ty) if PRIORITY_UPDATE.contains(&ty) => {
                (Fate::Drop, Some(Flood::PriorityUpdate))
            }
            (_, ty) if known(ty) => (Fate::Keep, None),
            _ => (Fate::Drop, Some(Flood::Unknown)),
        };
        match cost {
            Some(kind) => self.spend(kind, 1).map(|()| fate),
            None => Ok(fate),
        }
    }

    /// A request stream ended so: past the bound of streams reset before
    /// their answer, the connection is cut; any not answered whole counts
    /// toward [`Guard::too_many_aborted`].
    pub(super) fn ended(&self, outcome: Outcome) {
        match outcome {
            Outcome::Answered => {
                self.answered.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Cancelled => {
                self.aborted.fetch_add(1, Ordering::Relaxed);
                let _ = self.spend(Flood::Reset, 1);
            }
            Outcome::Other => {
                self.aborted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The connection has had [`super::quic::ABORTED_MAX`] request streams
    /// end without their whole answer: it is asked to go.
    pub(super) fn too_many_aborted(&self) -> bool {
        self.aborted.load(Ordering::Relaxed) >= u64::from(super::quic::ABORTED_MAX)
    }

    fn flood(&self, kind: Flood, count: u64) {
        if self.closing.swap(true, Ordering::Relaxed) {
            return;
        }
        self.env.metrics.h3_flood(kind.label());
        errlog::emit(
            Severity::Info,
            format_args!(
                "*{} http3 flood detected: client sent too many {} ({count}), closing the \
                 connection (H3_EXCESSIVE_LOAD) while reading client request, client: {}",
                self.id,
                kind.words(),
                self.client
            ),
        );
        let why = format!("too many {}", kind.words());
        self.close(Code::H3_EXCESSIVE_LOAD, why.as_bytes());
    }

    /// What the client sent breaks HTTP/3 where sluice reads it (a QPACK
    /// stream, a stream type): the connection is closed with `code`.
    pub(super) fn invalid(&self, code: Code, why: &str) {
        if self.report(code, why) {
            self.close(code, why.as_bytes());
        }
    }

    /// h3 closed the connection with `code` for `why` (its words).
    pub(super) fn h3_closed(&self, code: Code, why: &str) {
        self.report(code, why);
    }

    /// One line and the counter, once per connection: false if the
    /// connection was already being closed.
    fn report(&self, code: Code, why: &str) -> bool {
        if self.closing.swap(true, Ordering::Relaxed) {
            return false;
        }
        let name = code_name(code.value());
        self.env.metrics.h3_protocol_error(name);
        errlog::emit(
            Severity::Info,
            format_args!(
                "*{} client sent invalid HTTP/3 ({why}), closing the connection ({name}) while \
                 reading client request, client: {}",
                self.id, self.client
            ),
        );
        true
    }

    fn close(&self, code: Code, why: &[u8]) {
        let code = quinn::VarInt::from_u64(code.value()).unwrap_or(quinn::VarInt::from_u32(0x102));
        self.quic.close(code, why);
    }
}

/// The name of an HTTP/3 or QPACK error code (RFC 9114 §8.1, RFC 9204
/// §6), the `code` label of `sluice_http3_protocol_errors_total`.
pub(super) fn code_name(code: u64) -> &'static str {
    match code {
        0x100 => "H3_NO_ERROR",
        0x101 => "H3_GENERAL_PROTOCOL_ERROR",
        0x102 => "H3_INTERNAL_ERROR",
        0x103 => "H3_STREAM_CREATION_ERROR",
        0x104 => "H3_CLOSED_CRITICAL_STREAM",
        0x105 => "H3_FRAME_UNEXPECTED",
        0x106 => "H3_FRAME_ERROR",
        0x107 => "H3_EXCESSIVE_LOAD",
        0x108 => "H3_ID_ERROR",
        0x109 => "H3_SETTINGS_ERROR",
        0x10a => "H3_MISSING_SETTINGS",
        0x10b => "H3_REQUEST_REJECTED",
        0x10c => "H3_REQUEST_CANCELLED",
        0x10d => "H3_REQUEST_INCOMPLETE",
        0x10e => "H3_MESSAGE_ERROR",
        0x10f => "H3_CONNECT_ERROR",
        0x110 => "H3_VERSION_FALLBACK",
        0x200 => "QPACK_DECOMPRESSION_FAILED",
        0x201 => "QPACK_ENCODER_STREAM_ERROR",
        0x202 => "QPACK_DECODER_STREAM_ERROR",
        _ => "other",
    }
}
