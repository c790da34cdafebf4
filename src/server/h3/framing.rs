//! The bytes a client sends on its HTTP/3 streams, read on their way to h3
//! so that what h3 does not bound is counted ([`super::floods`]): each
//! frame's header on a request or control stream, the stream type of a
//! unidirectional stream, and the instructions of the QPACK streams, which
//! sluice reads itself (h3 0.0.8 accepts them and never reads a byte).
//!
//! Pure: bytes in, judgements out; the unit tests below feed them cut at
//! every byte.
//!
//! Frames whose only meaning is "ignore me" (RFC 9114 §9: unknown and
//! reserved types; PRIORITY_UPDATE, RFC 9218, which sluice does not act
//! on; a DATA frame without payload) are dropped here, as they arrive:
//! h3 would otherwise buffer an unknown frame whole before skipping it,
//! and takes an empty DATA frame for the end of the body (its
//! `poll_recv_data` answers `None` for one), which cut a request short.

use bytes::Bytes;
use std::collections::VecDeque;

/// A frame's type and payload length, as its header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header {
    pub ty: u64,
    pub len: u64,
}

/// What becomes of a frame: passed on to h3 whole, or dropped here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    Keep,
    Drop,
}

/// A QUIC variable-length integer at the start of `bytes` (RFC 9000
/// §16), and its length; `None` until it is whole.
pub(super) fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let first = *bytes.first()?;
    let len = 1usize << (first >> 6);
    let bytes = bytes.get(..len)?;
    let value = bytes[1..]
        .iter()
        .fold(u64::from(first & 0x3f), |v, b| (v << 8) | u64::from(*b));
    Some((value, len))
}

/// A frame header at the start of `bytes`, and its length.
fn header(bytes: &[u8]) -> Option<(Header, usize)> {
    let (ty, a) = varint(bytes)?;
    let (len, b) = varint(&bytes[a..])?;
    Some((Header { ty, len }, a + b))
}

/// A stream's frames as they pass: each header judged once whole, the
/// bytes of kept frames passed on as slices of what arrived (a header cut
/// across two reads, as a copy), those of dropped frames let go.
#[derive(Default)]
pub(super) struct Frames {
    /// A header not yet whole (its first bytes).
    partial: Vec<u8>,
    /// Payload bytes left of the current frame, and whether they pass.
    left: u64,
    keep: bool,
    /// The header of the dropped frame whose payload is still coming: if
    /// the stream ends first, h3 gets it and refuses the cut-off frame, as
    /// it would have without sluice.
    dropped: Vec<u8>,
}

impl Frames {
    /// Reads `chunk`, pushing what passes on to `out`; `judge` decides each
    /// frame (an `Err` stops the reading: the connection is being closed).
    pub(super) fn feed<E>(
        &mut self,
        chunk: &Bytes,
        out: &mut VecDeque<Bytes>,
        judge: &mut dyn FnMut(Header) -> Result<Fate, E>,
    ) -> Result<(), E> {
        let mut pos = 0;
        // Where the run of kept bytes not yet pushed began.
        let mut run: Option<usize> = None;
        let flush = |run: &mut Option<usize>, end: usize, out: &mut VecDeque<Bytes>| {
            if let Some(start) = run.take() {
                if end > start {
                    out.push_back(chunk.slice(start..end));
                }
            }
        };
        while pos < chunk.len() {
            if self.left > 0 {
                let n = self.left.min((chunk.len() - pos) as u64) as usize;
                if self.keep {
                    run.get_or_insert(pos);
                }
                pos += n;
                self.left -= n as u64;
                if self.left == 0 {
                    self.dropped.clear();
                }
                continue;
            }
            let start = pos;
            let (h, whole) = if self.partial.is_empty() {
                match header(&chunk[pos..]) {
                    Some((h, used)) => {
                        pos += used;
                        (h, true)
                    }
                    None => {
                        flush(&mut run, pos, out);
                        self.partial.extend_from_slice(&chunk[pos..]);
                        return Ok(());
                    }
                }
            } else {
                self.partial.push(chunk[pos]);
                pos += 1;
                // Two varints are whole within 16 bytes: `partial` never
                // holds more.
                match header(&self.partial) {
                    Some((h, _)) => (h, false),
                    None => continue,
                }
            };
            let fate = judge(h)?;
            self.keep = fate == Fate::Keep;
            self.left = h.len;
            match (fate, whole) {
                (Fate::Keep, true) => {
                    run.get_or_insert(start);
                }
                (Fate::Keep, false) => {
                    flush(&mut run, start, out);
                    out.push_back(Bytes::from(std::mem::take(&mut self.partial)));
                }
                (Fate::Drop, _) => {
                    flush(&mut run, start, out);
                    let bytes = if whole {
                        &chunk[start..pos]
                    } else {
                        &self.partial[..]
                    };
                    if h.len > 0 {
                        self.dropped = bytes.to_vec();
                    }
                    self.partial.clear();
                }
            }
        }
        flush(&mut run, chunk.len(), out);
        Ok(())
    }

    /// The stream ended: a frame cut off (its header, or a dropped frame's
    /// payload) is passed on as far as it came, for h3 to refuse.
    pub(super) fn end(&mut self, out: &mut VecDeque<Bytes>) {
        if !self.partial.is_empty() {
            out.push_back(Bytes::from(std::mem::take(&mut self.partial)));
        } else if self.left > 0 && !self.keep {
            out.push_back(Bytes::from(std::mem::take(&mut self.dropped)));
        }
    }
}

/// Why a QPACK stream's bytes end the connection (RFC 9204 §4.3, §4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Invalid(pub &'static str);

/// The client's QPACK encoder stream, read against the dynamic table
/// sluice allows: none (`SETTINGS_QPACK_MAX_TABLE_CAPACITY` 0, h3's
/// default). The one instruction that fits is "Set Dynamic Table Capacity
/// 0", byte 0x20, which changes nothing; any insertion or duplication, or
/// a capacity above 0, is `QPACK_ENCODER_STREAM_ERROR`.
///
/// Returns how many instructions changed nothing (each is counted).
pub(super) fn encoder_instructions(bytes: &[u8]) -> Result<u64, Invalid> {
    for b in bytes {
        match b {
            0x20 => {}
            0x80.. => return Err(Invalid("Insert With Name Reference into a table of 0")),
            0x40.. => return Err(Invalid("Insert With Literal Name into a table of 0")),
            0x21.. => return Err(Invalid("Set Dynamic Table Capacity above 0")),
            _ => return Err(Invalid("Duplicate in an empty table")),
        }
    }
    Ok(bytes.len() as u64)
}

/// The client's QPACK decoder stream. sluice's field sections never refer
/// to the dynamic table (h3 encodes without one), so a Section
/// Acknowledgment (RFC 9204 §4.4.1) or an Insert Count Increment (§4.4.3)
/// is `QPACK_DECODER_STREAM_ERROR`; a Stream Cancellation (§4.4.2) is
/// allowed, changes nothing, and is counted.
#[derive(Default)]
pub(super) struct DecoderStream {
    /// Continuation bytes read of a Stream Cancellation's stream id.
    more: Option<u8>,
}

/// The most continuation bytes of a 62-bit integer with a 6-bit prefix.
const INT_MORE_MAX: u8 = 9;

impl DecoderStream {
    /// Reads `bytes`: the Stream Cancellations they complete.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Result<u64, Invalid> {
        let mut done = 0;
        for b in bytes {
            if let Some(n) = self.more {
                if n >= INT_MORE_MAX {
                    return Err(Invalid("an integer longer than 62 bits"));
                }
                if b & 0x80 == 0 {
                    self.more = None;
                    done += 1;
                } else {
                    self.more = Some(n + 1);
                }
                continue;
            }
            match b {
                0x80.. => return Err(Invalid("Section Acknowledgment with no dynamic reference")),
                0x7f => self.more = Some(0),
                0x40.. => done += 1,
                _ => return Err(Invalid("Insert Count Increment with no insertion")),
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame's bytes: a one- or two-byte type, a one-byte length.
    fn frame(ty: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        if ty < 64 {
            v.push(ty as u8);
        } else {
            v.extend_from_slice(&(0x4000u16 | ty as u16).to_be_bytes());
        }
        v.push(payload.len() as u8);
        v.extend_from_slice(payload);
        v
    }

    /// Feeds `input` cut at every `step` bytes; what passes, and the
    /// headers judged.
    fn pass(input: &[u8], step: usize, drop: &[u64]) -> (Vec<u8>, Vec<Header>) {
        let mut f = Frames::default();
        let mut out = VecDeque::new();
        let mut seen = Vec::new();
        for piece in input.chunks(step) {
            let chunk = Bytes::copy_from_slice(piece);
            let r: Result<(), ()> = f.feed(&chunk, &mut out, &mut |h| {
                seen.push(h);
                Ok(if drop.contains(&h.ty) || h.ty == 0 && h.len == 0 {
                    Fate::Drop
                } else {
                    Fate::Keep
                })
            });
            assert!(r.is_ok());
        }
        f.end(&mut out);
        (out.iter().flat_map(|b| b.to_vec()).collect(), seen)
    }

    #[test]
    fn dropped_frames_vanish_in_any_split_and_the_rest_passes_unchanged() {
        let headers = frame(1, b"\x00\x00\xd1");
        let data = frame(0, b"hello");
        let mut input = headers.clone();
        input.extend(frame(0x21, b"ignored payload"));
        input.extend(frame(0, b""));
        input.extend(&data);
        input.extend(frame(0x21, b""));
        input.extend(frame(0x1f * 3 + 0x21, b"grease"));
        input.extend(&data);
        let mut want = headers.clone();
        want.extend(&data);
        want.extend(&data);
        for step in 1..=input.len() {
            let (out, seen) = pass(&input, step, &[0x21, 0x1f * 3 + 0x21]);
            assert_eq!(out, want, "split every {step}");
            assert_eq!(seen.len(), 7, "split every {step}");
            assert_eq!(seen[4], Header { ty: 0x21, len: 0 });
        }
    }

    #[test]
    fn a_frame_cut_off_by_the_end_reaches_h3_as_far_as_it_came() {
        // A dropped frame whose payload never came whole: its header passes.
        let mut input = frame(0x21, b"abcdef");
        input.truncate(4);
        for step in 1..=4 {
            assert_eq!(pass(&input, step, &[0x21]).0, [0x21, 6], "every {step}");
        }
        // Half a header.
        assert_eq!(pass(&[0x40], 1, &[]).0, [0x40]);
    }

    #[test]
    fn a_judgement_that_fails_stops_the_reading() {
        let mut f = Frames::default();
        let mut out = VecDeque::new();
        let input = Bytes::from([frame(0x21, b""), frame(0, b"x")].concat());
        let r = f.feed(&input, &mut out, &mut |h| {
            if h.ty == 0 {
                Err("data")
            } else {
                Ok(Fate::Drop)
            }
        });
        assert_eq!(r, Err("data"));
    }

    /// `v` as a QUIC varint of `len` bytes (1, 2, 4 or 8; at least what `v`
    /// needs): non-minimal encodings are valid too.
    fn encode_varint(v: u64, len: usize) -> Vec<u8> {
        let tag = match len {
            1 => 0u8,
            2 => 1,
            4 => 2,
            _ => 3,
        };
        let bytes = v.to_be_bytes();
        let mut out = bytes[8 - len..].to_vec();
        out[0] |= tag << 6;
        out
    }

    fn min_len(v: u64) -> usize {
        match v {
            0..64 => 1,
            64..16384 => 2,
            16384..1073741824 => 4,
            _ => 8,
        }
    }

    proptest::proptest! {
        /// Frames of kept and dropped types, their varints of any valid
        /// length, cut anywhere: what passes is the kept frames, byte for
        /// byte, and each header is judged once, in order.
        #[test]
        fn any_frames_cut_anywhere_pass_as_a_whole_read_would(
            frames in proptest::collection::vec(
                (
                    proptest::sample::select(vec![0u64, 1, 4, 7, 0x21, 0x40, 0xf0700, 0x1f * 1000 + 0x21]),
                    proptest::collection::vec(proptest::num::u8::ANY, 0..40),
                    0usize..4,
                    0usize..4,
                ),
                0..12,
            ),
            cuts in proptest::collection::vec(1usize..50, 0..20),
        ) {
            let dropped = |ty: u64, len: usize| [0x21, 0x40, 0xf0700, 0x1f * 1000 + 0x21].contains(&ty) || ty == 0 && len == 0;
            let (mut input, mut want, mut headers) = (Vec::new(), Vec::<u8>::new(), Vec::new());
            for (ty, payload, a, b) in &frames {
                let ty_len = [1, 2, 4, 8][*a].max(min_len(*ty));
                let len_len = [1, 2, 4, 8][*b].max(min_len(payload.len() as u64));
                let mut f = encode_varint(*ty, ty_len);
                f.extend(encode_varint(payload.len() as u64, len_len));
                f.extend(payload);
                if !dropped(*ty, payload.len()) {
                    want.extend(&f);
                }
                input.extend(f);
                headers.push(Header { ty: *ty, len: payload.len() as u64 });
            }
            let mut f = Frames::default();
            let (mut out, mut seen) = (VecDeque::new(), Vec::new());
            let mut rest = &input[..];
            for cut in cuts.iter().chain(std::iter::once(&usize::MAX)) {
                let (now, later) = rest.split_at((*cut).min(rest.len()));
                let r: Result<(), ()> = f.feed(&Bytes::copy_from_slice(now), &mut out, &mut |h| {
                    seen.push(h);
                    Ok(if dropped(h.ty, h.len as usize) { Fate::Drop } else { Fate::Keep })
                });
                proptest::prop_assert!(r.is_ok());
                rest = later;
            }
            f.end(&mut out);
            let got: Vec<u8> = out.iter().flat_map(|b| b.to_vec()).collect();
            proptest::prop_assert_eq!(got, want);
            proptest::prop_assert_eq!(seen, headers);
        }

        /// Any bytes at all, cut anywhere: no panic, and nothing passes that
        /// did not come.
        #[test]
        fn any_bytes_never_panic(
            input in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            step in 1usize..20,
        ) {
            let mut f = Frames::default();
            let mut out = VecDeque::new();
            for piece in input.chunks(step) {
                let r: Result<(), ()> = f.feed(&Bytes::copy_from_slice(piece), &mut out, &mut |h| {
                    Ok(if h.ty % 2 == 0 { Fate::Drop } else { Fate::Keep })
                });
                proptest::prop_assert!(r.is_ok());
            }
            f.end(&mut out);
            let passed: usize = out.iter().map(Bytes::len).sum();
            proptest::prop_assert!(passed <= input.len());
            let _ = encoder_instructions(&input);
            let _ = DecoderStream::default().feed(&input);
        }
    }

    #[test]
    fn varints_of_every_length() {
        assert_eq!(varint(&[0x25]), Some((0x25, 1)));
        assert_eq!(varint(&[0x7b, 0xbd]), Some((15293, 2)));
        assert_eq!(varint(&[0x9d, 0x7f, 0x3e, 0x7d]), Some((494878333, 4)));
        let eight = [0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c];
        assert_eq!(varint(&eight), Some((151288809941952652, 8)));
        assert_eq!(varint(&eight[..7]), None);
        assert_eq!(varint(&[]), None);
    }

    #[test]
    fn the_encoder_stream_allows_only_a_capacity_of_zero() {
        assert_eq!(encoder_instructions(&[0x20, 0x20]), Ok(2));
        for (bytes, why) in [
            (&[0xc0u8][..], "Insert With Name Reference"),
            (&[0x41, b'a', 0x01, b'b'], "Insert With Literal Name"),
            (&[0x3f, 0x45], "Set Dynamic Table Capacity above 0"),
            (&[0x00], "Duplicate"),
        ] {
            let e = encoder_instructions(bytes).expect_err(why);
            assert!(e.0.starts_with(why), "{e:?}");
        }
    }

    #[test]
    fn the_decoder_stream_allows_stream_cancellations_in_any_split() {
        // Stream 4, then stream 1000 (0x3f + 937 as 0xa9 0x07).
        let input = [0x44, 0x7f, 0xa9, 0x07, 0x41];
        for step in 1..=input.len() {
            let mut d = DecoderStream::default();
            let n: u64 = input.chunks(step).map(|c| d.feed(c).expect("valid")).sum();
            assert_eq!(n, 3, "split every {step}");
        }
        assert!(DecoderStream::default().feed(&[0x81]).is_err());
        assert!(DecoderStream::default().feed(&[0x01]).is_err());
        let endless = [
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ];
        assert!(DecoderStream::default().feed(&endless).is_err());
    }
}
