//! One client connection's request stream, between the socket and hyper.
//!
//! The [`Gate`] takes the bytes read from the socket ([`Gate::input`]) and
//! gives hyper only canonical requests ([`Gate::output`]): each head as
//! [`super::head`] rewrote it, then exactly its body (a `Content-Length`'s
//! bytes, or a chunked body re-framed by [`super::chunked`]), then the next
//! head. A refused head ends the stream for hyper (it finishes the requests
//! before it, then sees an end of file), and the connection answers the
//! refusal itself and closes.
//!
//! A request that asks to switch protocols ([`super::upgrade_asked`]) may be
//! the last HTTP on its connection: the bytes after it (and after its body)
//! are held, unread, until its answer is known. A 101 makes the connection a
//! tunnel ([`Gate::tunnel`]: the held bytes go to the upstream as they are,
//! the gate reads nothing more); any other answer lets the gate read them as
//! the next request ([`Gate::resume`]), as nginx does.
//!
//! The gate holds no buffer while a connection is idle: [`Gate::input`]
//! keeps only the bytes of a head still incomplete (a slowloris costs the
//! bytes it sent, as in nginx), and both buffers are released whenever they
//! empty.

use super::chunked::{ChunkError, Chunked};
use super::head::{Framing, Head, HeadParser, HeadRules, Parsed, Refusal};
use bytes::{Buf, BytesMut};

// Inline: a connection's gate is reading a head most of its life.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum State {
    Head(HeadParser),
    Length(u64),
    Chunked(Chunked),
    Refused,
    /// After an upgrade request: waiting for its answer.
    Held,
    /// The connection switched protocols: nothing more is HTTP.
    Tunnel,
}

/// What [`Gate::process`] left for the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// [`Gate::output`] has bytes for hyper.
    Data,
    /// More bytes from the socket are needed.
    NeedInput,
    /// A head was refused ([`Gate::take_refusal`]); nothing more for hyper.
    Refused,
    /// Held after an upgrade request, or a tunnel: nothing for hyper, and
    /// nothing to read for it (see the module doc).
    Held,
    /// A whole head, to take ([`Gate::take_head`]): only for a gate that
    /// gives heads whole ([`Gate::whole_heads`]).
    Head,
    /// The current request's body has ended (all its data given): only
    /// for a gate that gives heads whole, once a body, before what follows.
    BodyEnd,
}

/// The request stream of one connection.
/// Input capacity a busy connection keeps between requests.
const KEEP: usize = 4096;

#[derive(Debug)]
pub struct Gate {
    rules: HeadRules,
    state: State,
    input: BytesMut,
    output: BytesMut,
    refusal: Option<Refusal>,
    /// Invalid header lines of the last head, for nginx's info lines.
    dropped: Vec<Vec<u8>>,
    /// The current request asked to switch protocols: what follows it is
    /// held.
    hold: bool,
    /// Heads are given whole and bodies as their data alone, for sluice's
    /// own server loop, instead of one canonical byte stream for hyper.
    whole: bool,
    /// A head read and not taken yet (with `whole`).
    head: Option<Head>,
    /// A body ended and [`Fill::BodyEnd`] is still to be said (with `whole`).
    body_ended: bool,
}

impl Gate {
    pub fn new(rules: HeadRules) -> Gate {
        Gate {
            rules,
            state: State::Head(HeadParser::new(rules)),
            input: BytesMut::new(),
            output: BytesMut::new(),
            refusal: None,
            dropped: Vec::new(),
            hold: false,
            whole: false,
            head: None,
            body_ended: false,
        }
    }

    /// A gate for sluice's own server loop: each head is taken whole
    /// ([`Fill::Head`], [`Gate::take_head`]), and [`Gate::output`] holds the
    /// current request's body data alone (a chunked body decoded).
    pub fn whole_heads(rules: HeadRules) -> Gate {
        Gate {
            whole: true,
            ..Gate::new(rules)
        }
    }

    /// The body whose last data [`Gate::output`] holds has ended: the next
    /// [`Gate::process`] says [`Fill::BodyEnd`].
    pub fn body_ending(&self) -> bool {
        self.body_ended
    }

    /// The head [`Fill::Head`] announced.
    pub fn take_head(&mut self) -> Option<Head> {
        self.head.take()
    }

    /// Bytes received and not yet looked at: the socket's reads go here.
    pub fn input(&mut self) -> &mut BytesMut {
        &mut self.input
    }

    /// Canonical bytes for hyper; take from the front.
    pub fn output(&mut self) -> &mut BytesMut {
        &mut self.output
    }

    /// Bytes hyper had taken but not used, given back (they come first).
    pub fn unread(&mut self, bytes: &[u8]) {
        let mut b = BytesMut::with_capacity(bytes.len() + self.output.len());
        b.extend_from_slice(bytes);
        b.extend_from_slice(&self.output);
        self.output = b;
    }

    /// How much a read should ask for: a head grows as nginx's buffers do
    /// (1 KB first), a body comes in larger pieces.
    pub fn want(&self) -> usize {
        match self.state {
            State::Head(_) => super::head::CLIENT_HEADER_BUFFER.max(self.input.len()),
            State::Length(n) => usize::try_from(n).unwrap_or(usize::MAX).clamp(1, 16 * 1024),
            State::Chunked(_) => 16 * 1024,
            State::Refused | State::Held | State::Tunnel => 0,
        }
    }

    /// The upgrade request was answered without a switch: the bytes held
    /// after it are read as the next request.
    pub fn resume(&mut self) {
        if matches!(self.state, State::Held) {
            self.state = State::Head(HeadParser::new(self.rules));
        }
    }

    /// The connection switched protocols: the gate steps aside for good,
    /// and gives back what it held (bytes hyper had not taken first), to be
    /// passed on as they are.
    pub fn tunnel(&mut self) -> BytesMut {
        self.state = State::Tunnel;
        let mut held = std::mem::take(&mut self.output);
        held.extend_from_slice(&self.input);
        self.input = BytesMut::new();
        held
    }

    /// Between requests with nothing held: no head begun, nothing buffered.
    pub fn idle(&self) -> bool {
        matches!(&self.state, State::Head(p) if !p.started())
            && self.input.is_empty()
            && self.output.is_empty()
            && self.head.is_none()
    }

    /// The size the current chunked body has announced so far (0 for any
    /// other body).
    pub fn declared_body(&self) -> u64 {
        match &self.state {
            State::Chunked(c) => c.declared(),
            _ => 0,
        }
    }

    pub fn take_refusal(&mut self) -> Option<Refusal> {
        self.refusal.take()
    }

    /// The invalid header lines the last head dropped.
    pub fn take_dropped(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.dropped)
    }

    /// Moves what [`Gate::input`] holds on, as far as it goes.
    pub fn process(&mut self) -> Result<Fill, ChunkError> {
        let fill = self.step();
        // Nothing held: a large buffer goes back at once; a small one is
        // kept for the next request of a busy connection (see
        // [`Gate::release`]).
        if self.input.is_empty() && self.input.capacity() > KEEP {
            self.input = BytesMut::new();
        }
        fill
    }

    /// A connection leaves hyper to wait: it keeps no buffer while it waits.
    pub fn release(&mut self) {
        if self.input.is_empty() {
            self.input = BytesMut::new();
        }
        if self.output.is_empty() {
            self.output = BytesMut::new();
        }
    }

    fn step(&mut self) -> Result<Fill, ChunkError> {
        loop {
            if !self.output.is_empty() {
                return Ok(Fill::Data);
            }
            if self.head.is_some() {
                return Ok(Fill::Head);
            }
            if std::mem::take(&mut self.body_ended) {
                return Ok(Fill::BodyEnd);
            }
            match &mut self.state {
                State::Refused => return Ok(Fill::Refused),
                State::Held | State::Tunnel => return Ok(Fill::Held),
                _ if self.input.is_empty() => return Ok(Fill::NeedInput),
                State::Head(parser) => match parser.advance(&self.input) {
                    Parsed::Partial => return Ok(Fill::NeedInput),
                    Parsed::Refused(r) => {
                        self.refusal = Some(r);
                        self.input = BytesMut::new();
                        self.state = State::Refused;
                    }
                    Parsed::Head(mut h) => {
                        self.input.advance(h.len);
                        self.dropped = std::mem::take(&mut h.dropped);
                        self.hold = h.upgrade;
                        self.state = match h.framing {
                            Framing::None | Framing::Length(0) => self.next_request(),
                            Framing::Length(n) => State::Length(n),
                            Framing::Chunked if self.whole => State::Chunked(Chunked::decoding()),
                            Framing::Chunked => State::Chunked(Chunked::new()),
                        };
                        if self.whole {
                            self.head = Some(h);
                            return Ok(Fill::Head);
                        }
                        if self.output.is_empty() {
                            // The head's own buffer, not a copy of it.
                            self.output = bytes::Bytes::from(h.canonical)
                                .try_into_mut()
                                .unwrap_or_else(|b| BytesMut::from(&b[..]));
                        } else {
                            self.output.extend_from_slice(&h.canonical);
                        }
                    }
                },
                State::Length(n) => {
                    let k = usize::try_from(*n)
                        .unwrap_or(usize::MAX)
                        .min(self.input.len());
                    self.output = self.input.split_to(k);
                    *n -= k as u64;
                    if *n == 0 {
                        self.state = self.next_request();
                        self.body_ended = self.whole;
                    }
                }
                State::Chunked(c) => {
                    // (The output is empty here: straight into it.)
                    let used = c.feed_into(&self.input, Some(&mut self.output))?;
                    self.input.advance(used);
                    if c.done() {
                        self.state = self.next_request();
                        self.body_ended = self.whole;
                    }
                }
            }
        }
    }

    /// What comes after a request (its head and body): the next head, or
    /// held bytes after an upgrade request.
    fn next_request(&self) -> State {
        if self.hold {
            State::Held
        } else {
            State::Head(HeadParser::new(self.rules))
        }
    }

    /// hyper took `n` bytes of [`Gate::output`].
    pub fn consumed(&mut self, n: usize) {
        self.output.advance(n);
        if self.output.is_empty() {
            self.output = BytesMut::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(gate: &mut Gate, input: &[u8]) -> (Vec<u8>, Fill) {
        gate.input().extend_from_slice(input);
        let mut out = Vec::new();
        loop {
            match gate.process().expect("valid body") {
                Fill::Data => {
                    let n = gate.output().len();
                    out.extend_from_slice(gate.output());
                    gate.consumed(n);
                }
                f => return (out, f),
            }
        }
    }

    #[test]
    fn pipelined_requests_come_out_canonical() {
        let mut g = Gate::new(HeadRules::default());
        let (out, fill) = run(
            &mut g,
            b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcPOST /b HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n2;x\nhi\n0\n\nGET /c HTTP/1.1\r\nHo",
        );
        assert_eq!(fill, Fill::NeedInput);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\nabc\
             POST /b HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
        );
        assert!(!g.idle());
        let (out, _) = run(&mut g, b"st: x\r\n\r\n");
        assert_eq!(out, b"GET /c HTTP/1.1\r\nhost: x\r\n\r\n");
        assert!(g.idle());
        g.release();
        assert_eq!(g.input.capacity(), 0, "a waiting gate holds no buffer");
    }

    #[test]
    fn a_refused_head_ends_the_stream_after_the_requests_before_it() {
        let mut g = Gate::new(HeadRules::default());
        let (out, fill) = run(
            &mut g,
            b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        );
        assert_eq!(out, b"GET /ok HTTP/1.1\r\nhost: x\r\n\r\n");
        assert_eq!(fill, Fill::Refused);
        assert_eq!(g.take_refusal().map(|r| r.status), Some(400));
    }

    /// After an upgrade request (and its body) the gate gives hyper nothing
    /// more until the answer is known: read on after any other answer, the
    /// bytes held as they came for a tunnel.
    #[test]
    fn what_follows_an_upgrade_request_waits_for_its_answer() {
        let ws = "GET /ws HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: keep-alive, Upgrade\r\n\r\n";
        let next = "GET /next HTTP/1.1\r\nhost: x\r\n\r\n";
        let mut g = Gate::new(HeadRules::default());
        let (out, fill) = run(&mut g, format!("{ws}{next}").as_bytes());
        assert_eq!(String::from_utf8(out).unwrap(), ws);
        assert_eq!(fill, Fill::Held);
        assert_eq!(g.want(), 0, "nothing more is read while held");
        g.resume();
        let (out, fill) = run(&mut g, b"");
        assert_eq!(String::from_utf8(out).unwrap(), next);
        assert_eq!(fill, Fill::NeedInput);

        // A body first, then the hold; a tunnel takes the bytes unparsed.
        let post = "POST /ws HTTP/1.1\r\nhost: x\r\nupgrade: h2c\r\nconnection: upgrade\r\ncontent-length: 3\r\n\r\n";
        let mut g = Gate::new(HeadRules::default());
        let mut sent = format!("{post}abc").into_bytes();
        sent.extend_from_slice(b"\x81\x05hello");
        let (out, fill) = run(&mut g, &sent);
        assert_eq!(out, format!("{post}abc").as_bytes());
        assert_eq!(fill, Fill::Held);
        g.input().extend_from_slice(b"\x88\x00");
        assert_eq!(&g.tunnel()[..], b"\x81\x05hello\x88\x00");
        assert_eq!(
            run(&mut g, b"GET / HTTP/1.1\r\n\r\n"),
            (Vec::new(), Fill::Held)
        );
    }

    /// Only an HTTP/1.1 request with `Connection: upgrade` asks to switch
    /// (RFC 9110 §7.8): nothing is held after the others.
    #[test]
    fn only_a_complete_upgrade_request_holds() {
        for head in [
            "GET / HTTP/1.0\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nUpgrade:  \r\nConnection: upgrade\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgraded\r\n\r\n",
        ] {
            let mut g = Gate::new(HeadRules::default());
            let (_, fill) = run(
                &mut g,
                format!("{head}GET /2 HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
            );
            assert_eq!(fill, Fill::NeedInput, "{head:?}");
            assert!(g.idle(), "{head:?}: both requests went through");
        }
    }

    #[test]
    fn an_invalid_chunked_body_is_an_error() {
        let mut g = Gate::new(HeadRules::default());
        g.input().extend_from_slice(
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        );
        assert_eq!(g.process(), Ok(Fill::Data));
        let n = g.output().len();
        g.consumed(n);
        assert_eq!(g.process(), Err(ChunkError));
    }
}
