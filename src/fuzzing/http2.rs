//! The `http2` fuzz target: HTTP/2 request heads through the gate that
//! stands before hyper, checked against the HTTP/1.1 gate, and a client's
//! raw frames through [`crate::http2::Inbound`], checked for what hyper is
//! handed.
//!
//! Why these checks: the gate's promise is that HTTP/2 is never looser
//! than HTTP/1.1 and that hyper reads exactly the heads the gate wrote. So
//! a head the HTTP/2 gate accepts must be accepted by the HTTP/1.1 gate as
//! the same canonical head, must be a fixed point (judged again, it gives
//! the same block), and every header block the reader writes must decode
//! on its own (plain literals, which never touch hyper's HPACK table).

use super::{Reader, pieces};
use crate::http1::{HeadRules, Parsed, parse_head};
use crate::http2::Inbound;
use crate::http2::hpack::{self, Decoder, Field};
use crate::http2::request::{self, Limits, Verdict};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Byte 0 picks the rules as for `http1` (bits 0–2, 3–7) and the mode
/// (bit 3): set, the rest is a list of fields (see [`fields`]) judged as
/// one request head; clear, the rest is what a client sent after the
/// preface (frames, HPACK and all). Byte 1 cuts the input into pieces.
///
/// Checked: no panic; the reader's output, refusals, log lines and verdict
/// do not depend on how the bytes arrive; every block it writes decodes
/// alone; an accepted head is accepted again unchanged and by the
/// HTTP/1.1 gate as the same head; a refusal is a 4xx.
pub fn http2(data: &[u8]) {
    let mut r = Reader(data);
    let flags = r.u8();
    let seed = r.u8();
    let rules = super::http1::fuzz_rules(flags & !0x08);
    if flags & 0x08 != 0 {
        let fields = fields(&mut r);
        let verdict = check_head(&rules, &fields);
        check_through_reader(&rules, &fields, &verdict, seed);
    } else {
        check_frames(&rules, r.0, seed);
    }
}

/// Names the fields are mostly drawn from: the ones the gate treats
/// specially, and some it drops.
const NAMES: &[&[u8]] = &[
    b":method",
    b":scheme",
    b":authority",
    b":path",
    b"host",
    b"content-length",
    b"transfer-encoding",
    b"te",
    b"connection",
    b"cookie",
    b"upgrade",
    b"expect",
    b"x_a",
    b"x-a",
    b":protocol",
    b"Host",
];

/// Values drawn for some fields, so that valid requests are common.
const VALUES: &[&[u8]] = &[
    b"GET",
    b"POST",
    b"http",
    b"example.com",
    b"/",
    b"/a?b=c",
    b"5",
    b"chunked",
    b"trailers",
    b"a=b",
    b"",
    b"CONNECT",
];

/// Up to 24 fields, each: a name (from [`NAMES`] or the input's bytes), a
/// value (from [`VALUES`] or the input's bytes, some long).
pub(super) fn fields(r: &mut Reader<'_>) -> Vec<Field> {
    let n = r.u8() % 25;
    let mut out = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        if r.is_empty() {
            break;
        }
        let k = r.u8();
        let name = match NAMES.get(usize::from(k & 0x1f)) {
            Some(n) => n.to_vec(),
            None => bytes(r, 32),
        };
        let value = match (k >> 5, VALUES.get(usize::from(r.u8() % 16))) {
            (0..=3, Some(v)) => v.to_vec(),
            (7, _) => {
                let mut v = bytes(r, 16);
                v.resize(usize::from(r.u16()) % 10_000, b'v');
                v
            }
            _ => bytes(r, 64),
        };
        out.push(Field {
            name: name.into(),
            value: value.into(),
        });
    }
    out
}

/// Up to `most` bytes off the input, their number first.
fn bytes(r: &mut Reader<'_>, most: u8) -> Vec<u8> {
    let n = usize::from(r.u8() % most);
    let n = n.min(r.0.len());
    let (b, rest) = r.0.split_at(n);
    r.0 = rest;
    b.to_vec()
}

/// Judges the head and checks an accepted one against itself and the
/// HTTP/1.1 gate.
fn check_head(rules: &HeadRules, fields: &[Field]) -> Verdict {
    let limits = Limits::of(rules);
    let verdict = request::judge(fields, false, rules, limits);
    match &verdict {
        Verdict::Refuse(r) => assert!((400..500).contains(&r.status), "refused with {r:?}"),
        Verdict::Reset(_) => {}
        Verdict::Accept { block, .. } => {
            let again = decode_alone(block);
            match request::judge(&again, false, rules, limits) {
                Verdict::Accept { block: b2, .. } => {
                    assert_eq!(&b2, block, "an accepted head judged again changed");
                }
                v => panic!("an accepted head judged again: {v:?}"),
            }
            let h1 = as_http1(fields);
            let head = match parse_head(&h1, rules) {
                Parsed::Head(h) => h,
                // The sizes differ by design: HTTP/1.1 bounds each line,
                // HTTP/2 (as nginx) the name and the value each.
                Parsed::Refused(r) if r.reason.contains("too l") => return verdict,
                other => panic!(
                    "HTTP/2 accepted what HTTP/1.1 does not: {} -> {}",
                    show(&h1),
                    show(format!("{other:?}").as_bytes())
                ),
            };
            assert_eq!(
                lines(&head.canonical),
                block_lines(&again),
                "the two gates wrote different heads for {}",
                show(&h1)
            );
        }
    }
    verdict
}

/// Bytes for a panic message: escaped, at most 300 of them.
fn show(b: &[u8]) -> String {
    let s = b.escape_ascii().to_string();
    if s.len() > 300 {
        format!("{}… ({} bytes)", &s[..300], b.len())
    } else {
        s
    }
}

/// The same request as an HTTP/1.1 head: `:method :path HTTP/1.1`, `Host`
/// from `:authority`, the fields in their order.
fn as_http1(fields: &[Field]) -> Vec<u8> {
    let get = |n: &[u8]| fields.iter().find(|f| f.name == n).map(|f| &f.value[..]);
    let mut h = Vec::new();
    h.extend_from_slice(get(b":method").unwrap_or_default());
    h.push(b' ');
    h.extend_from_slice(get(b":path").unwrap_or_default());
    h.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(a) = get(b":authority") {
        h.extend_from_slice(b"host: ");
        h.extend_from_slice(a);
        h.extend_from_slice(b"\r\n");
    }
    for f in fields.iter().filter(|f| !f.name.starts_with(b":")) {
        h.extend_from_slice(&f.name);
        h.extend_from_slice(b": ");
        h.extend_from_slice(&f.value);
        h.extend_from_slice(b"\r\n");
    }
    h.extend_from_slice(b"\r\n");
    h
}

/// A canonical HTTP/1.1 head as (name, value) lines, the request line
/// first as (method, target); names lowercase.
fn lines(canonical: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, l) in canonical.split(|&b| b == b'\n').enumerate() {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if l.is_empty() {
            continue;
        }
        if i == 0 {
            let mut p = l.splitn(3, |&b| b == b' ');
            let (m, t) = (p.next().unwrap_or_default(), p.next().unwrap_or_default());
            out.push((m.to_vec(), t.to_vec()));
        } else {
            let c = l.iter().position(|&b| b == b':').expect("a field line");
            let v = l[c + 1..].trim_ascii_start();
            out.push((l[..c].to_ascii_lowercase(), v.to_vec()));
        }
    }
    out
}

/// An accepted block's fields in the same shape as [`lines`]: `:scheme`
/// and the stream-id field left out.
fn block_lines(fields: &[Field]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let get = |n: &[u8]| {
        fields
            .iter()
            .find(|f| f.name == n)
            .map(|f| f.value.to_vec())
    };
    let mut out = vec![(
        get(b":method").expect(":method"),
        get(b":path").expect(":path"),
    )];
    for f in fields.iter().filter(|f| !f.name.starts_with(b":")) {
        out.push((f.name.to_vec(), f.value.to_vec()));
    }
    out
}

/// A block the gate wrote, decoded by a decoder that never saw another:
/// it must not depend on any table.
fn decode_alone(block: &[u8]) -> Vec<Field> {
    let d = Decoder::new()
        .decode(block, usize::MAX)
        .expect("a block the gate wrote decodes alone");
    assert!(!d.over);
    d.fields
}

/// The same head as a client's HEADERS (and CONTINUATION) frames through
/// the reader: the same verdict, the same block.
fn check_through_reader(rules: &HeadRules, fields: &[Field], verdict: &Verdict, seed: u8) {
    let mut block = Vec::new();
    for f in fields {
        hpack::encode(&mut block, &f.name, &f.value);
    }
    let mut input = PREFACE.to_vec();
    let cuts = pieces(seed, block.len(), 4096);
    let mut at = 0;
    for (i, n) in cuts.iter().enumerate() {
        let kind = if i == 0 { 1 } else { 9 };
        let mut flags = if i == 0 { 0x1 } else { 0 };
        if i + 1 == cuts.len() {
            flags |= 0x4;
        }
        push_frame(&mut input, kind, flags, 1, &block[at..at + n]);
        at += n;
    }
    if cuts.is_empty() {
        push_frame(&mut input, 1, 0x5, 1, &[]);
    }
    let run = run(rules, &input, &[input.len()]);
    let size: usize = fields.iter().map(Field::size).sum();
    if size > Limits::of(rules).list {
        // The reader answers a list past its bound before judging it.
        return;
    }
    if run.abort.is_some() {
        // Only sizes end the connection here (a list past its bound, an
        // empty name): nothing was handed on.
        assert!(
            run.blocks.is_empty(),
            "{}",
            show(format!("{run:?}").as_bytes())
        );
        return;
    }
    let written = &run.blocks[0].1;
    match verdict {
        Verdict::Accept { block, .. } => {
            assert_eq!(
                &written[..block.len()],
                &block[..],
                "the reader wrote another block"
            );
            assert_eq!(
                decode_alone(&written[block.len()..])[0].name,
                request::STREAM_FIELD.as_bytes()
            );
        }
        Verdict::Refuse(_) => assert_eq!(run.refused.len(), 1),
        Verdict::Reset(_) => assert!(
            decode_alone(written)
                .iter()
                .any(|f| f.name.as_ref() == b"connection"),
            "a reset must reach hyper as a malformed block"
        ),
    }
}

fn push_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let l = u32::try_from(payload.len())
        .expect("a frame's length")
        .to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// What the reader made of some input.
#[derive(Debug, PartialEq)]
struct Run {
    out: Vec<u8>,
    /// The header blocks it wrote: (stream, block).
    blocks: Vec<(u32, Vec<u8>)>,
    refused: Vec<String>,
    notices: Vec<String>,
    abort: Option<crate::http2::Abort>,
}

/// `input` through a reader in `cuts` pieces, until it ends or is aborted.
fn run(rules: &HeadRules, input: &[u8], cuts: &[usize]) -> Run {
    let mut i = Inbound::new(*rules);
    let mut out = Vec::new();
    let (mut refused, mut notices) = (Vec::new(), Vec::new());
    let mut abort = None;
    let mut at = 0;
    for &n in cuts {
        i.input().extend_from_slice(&input[at..at + n]);
        at += n;
        let mut r = i.process();
        // (It stops after each RST_STREAM, as the server lets the stream go.)
        while r.is_ok() && i.stopped() {
            r = i.process();
        }
        out.extend_from_slice(&i.output().split());
        refused.extend(i.take_refused().into_iter().map(|r| r.refusal.to_string()));
        notices.extend(i.take_notices().iter().map(ToString::to_string));
        if let Err(a) = r {
            abort = Some(a);
            break;
        }
    }
    let blocks = written_blocks(&out);
    Run {
        out,
        blocks,
        refused,
        notices,
        abort,
    }
}

/// The header blocks in what the reader wrote (frames; the last may be a
/// DATA frame cut short, never a header frame).
fn written_blocks(out: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut rest = out.strip_prefix(PREFACE).unwrap_or_default();
    let mut blocks: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut open = false;
    while rest.len() >= 9 {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        let (kind, flags) = (rest[3], rest[4]);
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        let whole = rest.len() >= 9 + len;
        if kind == 1 || kind == 9 {
            assert!(whole, "a header frame written in part");
            assert_eq!(
                flags & 0x28,
                0,
                "padding or priority in a written header frame"
            );
            assert_eq!(kind == 9, open, "CONTINUATION out of place");
            let payload = &rest[9..9 + len];
            if kind == 1 {
                blocks.push((stream, payload.to_vec()));
            } else {
                let last = blocks.last_mut().expect("a block");
                assert_eq!(last.0, stream);
                last.1.extend_from_slice(payload);
            }
            open = flags & 0x4 == 0;
        } else {
            assert!(!open, "a frame inside a header block");
        }
        if !whole {
            break;
        }
        rest = &rest[9 + len..];
    }
    blocks
}

/// A client's frames after the preface: whole and in pieces alike, every
/// block written decodes alone, and an accepted one passes the checks of
/// [`check_head`].
fn check_frames(rules: &HeadRules, frames: &[u8], seed: u8) {
    let mut input = PREFACE.to_vec();
    input.extend_from_slice(frames);
    let whole = run(rules, &input, &[input.len()]);
    let cuts = pieces(seed, input.len(), 64);
    let split = run(rules, &input, &cuts);
    if whole.abort.is_some() || split.abort.is_some() {
        // Where in the input the reader stops may depend on the pieces
        // (a flood is cut as soon as it is seen); what it stopped for may not.
        assert_eq!(
            whole.abort, split.abort,
            "pieces {cuts:?} changed the abort"
        );
        return;
    }
    assert_eq!(whole, split, "pieces {cuts:?} changed the reader's output");
    for (stream, block) in &whole.blocks {
        let fields = decode_alone(block);
        let is_request = fields
            .first()
            .is_some_and(|f| f.name.as_ref() == b":method");
        let accepted = is_request
            && fields[0].value != request::STAND_IN_METHOD.as_bytes()
            && !fields.iter().any(|f| f.name.as_ref() == b"connection");
        if accepted {
            let last = fields.last().expect("the stream field");
            assert_eq!(last.name, request::STREAM_FIELD.as_bytes());
            assert_eq!(last.value, stream.to_string().as_bytes());
            let head = &fields[..fields.len() - 1];
            match check_head(rules, head) {
                Verdict::Accept { .. } => {}
                v => panic!("a head the reader let through is refused: {v:?}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_head_passes_both_gates_and_the_reader() {
        let mut input = vec![0x08, 7, 5];
        for (k, v) in [(0u8, 0u8), (1, 2), (2, 3), (3, 5), (13, 9)] {
            input.extend_from_slice(&[k, v]);
        }
        http2(&input);
        let mut r = Reader(&input[2..]);
        let f = fields(&mut r);
        assert_eq!(f.len(), 5);
        assert!(matches!(
            check_head(&HeadRules::default(), &f),
            Verdict::Accept { .. }
        ));
    }

    #[test]
    fn frames_in_any_pieces_read_the_same() {
        let mut block = Vec::new();
        for (n, v) in [
            (&b":method"[..], &b"GET"[..]),
            (b":scheme", b"http"),
            (b":authority", b"a"),
            (b":path", b"/"),
        ] {
            hpack::encode(&mut block, n, v);
        }
        let mut data = vec![0u8, 3];
        push_frame(&mut data, 1, 0x5, 1, &block);
        push_frame(&mut data, 0, 0x1, 3, b"xyz");
        http2(&data);
        let input = [PREFACE, &data[2..]].concat();
        let r = run(&HeadRules::default(), &input, &[input.len()]);
        assert_eq!(r.blocks.len(), 1);
    }
}
