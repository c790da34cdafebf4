//! HPACK's Huffman code (RFC 7541 Appendix B), decoding only: sluice never
//! Huffman-encodes (the blocks it hands hyper are plain literals).
//!
//! Why the table is only code lengths: the code is canonical (codes of one
//! length are consecutive, in symbol order, and shorter codes come first),
//! so the lengths determine every code; the test checks a few of the RFC's
//! codes against the derived ones.

/// The code length of each symbol, 0–255 and EOS (256), from RFC 7541.
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

const EOS: u16 = 256;
const MAX_LEN: usize = 30;

/// The canonical code as decoding tables: per length, the first code of
/// that length and where its symbols start in `symbols` (symbols sorted by
/// length, then value).
struct Canonical {
    first: [u32; MAX_LEN + 1],
    count: [u16; MAX_LEN + 1],
    start: [u16; MAX_LEN + 1],
    symbols: [u16; 257],
}

const fn canonical() -> Canonical {
    let mut c = Canonical {
        first: [0; MAX_LEN + 1],
        count: [0; MAX_LEN + 1],
        start: [0; MAX_LEN + 1],
        symbols: [0; 257],
    };
    let mut s = 0;
    while s < 257 {
        c.count[LENGTHS[s] as usize] += 1;
        s += 1;
    }
    let mut code: u32 = 0;
    let mut at: u16 = 0;
    let mut len = 1;
    while len <= MAX_LEN {
        code <<= 1;
        c.first[len] = code;
        c.start[len] = at;
        code += c.count[len] as u32;
        at += c.count[len];
        len += 1;
    }
    // Symbols in (length, value) order.
    let mut fill = c.start;
    let mut s = 0;
    while s < 257 {
        let l = LENGTHS[s] as usize;
        c.symbols[fill[l] as usize] = s as u16;
        fill[l] += 1;
        s += 1;
    }
    c
}

static CODE: Canonical = canonical();

/// A Huffman string could not be decoded: an EOS inside it, or padding
/// that is longer than 7 bits or not all ones (RFC 7541 §5.2).
#[derive(Debug, PartialEq, Eq)]
pub struct BadHuffman;

/// Codes of at most 8 bits by the byte they begin: their symbol and
/// length (length 0: the code at that byte is longer). Nearly every byte
/// of a URL, a token or a number has such a code.
static SHORT: [(u8, u8); 256] = short();

const fn short() -> [(u8, u8); 256] {
    let mut t = [(0u8, 0u8); 256];
    let mut len = 5;
    while len <= 8 {
        let mut i = 0;
        while i < CODE.count[len] as usize {
            let sym = CODE.symbols[CODE.start[len] as usize + i] as u8;
            let first = ((CODE.first[len] + i as u32) << (8 - len)) as usize;
            let mut b = 0;
            while b < 1 << (8 - len) {
                t[first + b] = (sym, len as u8);
                b += 1;
            }
            i += 1;
        }
        len += 1;
    }
    t
}

/// Decodes `src` onto `out`, which may be given at most `limit` bytes
/// (the caller's bound on a field; `Err` past it too).
///
/// A symbol at a time, not a bit: the next 30 bits (the longest code;
/// past the end, padded with ones as the string's own padding is) name
/// their code by their first byte ([`SHORT`]), or by the canonical
/// ranges of the longer lengths. A code longer than the bits left is the
/// padding: at most 7 bits, all ones (RFC 7541 §5.2).
pub fn decode(src: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), BadHuffman> {
    const MASK: u64 = (1 << MAX_LEN) - 1;
    let (mut acc, mut bits, mut next) = (0u64, 0usize, 0usize);
    loop {
        while bits <= 56 && next < src.len() {
            acc = (acc << 8) | u64::from(src[next]);
            bits += 8;
            next += 1;
        }
        if bits == 0 {
            return Ok(());
        }
        let peek = if bits >= MAX_LEN {
            (acc >> (bits - MAX_LEN)) & MASK
        } else {
            ((acc << (MAX_LEN - bits)) | ((1 << (MAX_LEN - bits)) - 1)) & MASK
        };
        let (sym, len) = match SHORT[(peek >> (MAX_LEN - 8)) as usize] {
            (sym, len) if len != 0 => (u16::from(sym), usize::from(len)),
            _ => long(peek),
        };
        if len > bits {
            // The padding: fewer than 8 bits, all ones.
            let ones = (1u64 << bits) - 1;
            return if bits <= 7 && acc & ones == ones {
                Ok(())
            } else {
                Err(BadHuffman)
            };
        }
        if sym == EOS || out.len() >= limit {
            return Err(BadHuffman);
        }
        out.push(sym as u8);
        bits -= len;
        acc &= (1u64 << bits) - 1;
    }
}

/// The symbol and length of a code longer than 8 bits at the front of
/// `peek` (30 bits): the canonical range of one length holds it.
fn long(peek: u64) -> (u16, usize) {
    for len in 9..=MAX_LEN {
        let code = (peek >> (MAX_LEN - len)) as u32;
        let offset = code.wrapping_sub(CODE.first[len]);
        if code >= CODE.first[len] && offset < u32::from(CODE.count[len]) {
            return (
                CODE.symbols[usize::from(CODE.start[len]) + offset as usize],
                len,
            );
        }
    }
    // Every 30 bits begin some code (EOS is all ones): not reached.
    (EOS, MAX_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code read a bit at a time: the reference [`decode`] must match.
    fn bitwise(src: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), BadHuffman> {
        let (mut code, mut len, mut ones) = (0u32, 0usize, true);
        for &byte in src {
            for bit in (0..8).rev() {
                let b = u32::from((byte >> bit) & 1);
                code = (code << 1) | b;
                len += 1;
                ones &= b == 1;
                if len > MAX_LEN {
                    return Err(BadHuffman);
                }
                let offset = code.wrapping_sub(CODE.first[len]);
                if code >= CODE.first[len] && offset < u32::from(CODE.count[len]) {
                    let sym = CODE.symbols[usize::from(CODE.start[len]) + offset as usize];
                    if sym == EOS || out.len() >= limit {
                        return Err(BadHuffman);
                    }
                    out.push(sym as u8);
                    (code, len, ones) = (0, 0, true);
                }
            }
        }
        if len > 7 || !ones {
            return Err(BadHuffman);
        }
        Ok(())
    }

    /// `text` Huffman-encoded, padded with ones.
    fn encode(text: &[u8]) -> Vec<u8> {
        let (mut acc, mut bits, mut out) = (0u64, 0usize, Vec::new());
        for &c in text {
            let (code, len) = code_of(u16::from(c));
            acc = (acc << len) | u64::from(code);
            bits += len;
            while bits >= 8 {
                out.push((acc >> (bits - 8)) as u8);
                bits -= 8;
            }
        }
        if bits > 0 {
            out.push(((acc << (8 - bits)) as u8) | ((1u8 << (8 - bits)) - 1));
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn decodes_as_the_bitwise_reference(src in proptest::collection::vec(proptest::num::u8::ANY, 0..40), limit in 0usize..50) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (ra, rb) = (decode(&src, &mut a, limit), bitwise(&src, &mut b, limit));
            proptest::prop_assert_eq!(&ra, &rb);
            if ra.is_ok() {
                proptest::prop_assert_eq!(a, b);
            }
        }

        #[test]
        fn decodes_what_was_encoded(text in proptest::collection::vec(proptest::num::u8::ANY, 0..60)) {
            let mut out = Vec::new();
            proptest::prop_assert_eq!(decode(&encode(&text), &mut out, 100), Ok(()));
            proptest::prop_assert_eq!(out, text);
        }
    }

    /// The code of `sym` as the canonical tables give it.
    fn code_of(sym: u16) -> (u32, usize) {
        let len = usize::from(LENGTHS[usize::from(sym)]);
        let start = usize::from(CODE.start[len]);
        let pos = CODE.symbols[start..start + usize::from(CODE.count[len])]
            .iter()
            .position(|&s| s == sym)
            .unwrap();
        (CODE.first[len] + pos as u32, len)
    }

    #[test]
    fn derived_codes_are_the_rfcs() {
        // A few of RFC 7541 Appendix B's rows.
        assert_eq!(code_of(u16::from(b'0')), (0x0, 5));
        assert_eq!(code_of(u16::from(b'a')), (0x3, 5));
        assert_eq!(code_of(u16::from(b' ')), (0x14, 6));
        assert_eq!(code_of(u16::from(b'A')), (0x21, 6));
        assert_eq!(code_of(0), (0x1ff8, 13));
        assert_eq!(code_of(255), (0x3ffffee, 26));
        assert_eq!(code_of(EOS), (0x3fffffff, 30));
    }

    #[test]
    fn decodes_the_rfc_examples() {
        // RFC 7541 C.4.1: "www.example.com".
        let src = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        let mut out = Vec::new();
        decode(&src, &mut out, 100).unwrap();
        assert_eq!(out, b"www.example.com");
        // C.4.2: "no-cache".
        let mut out = Vec::new();
        decode(&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf], &mut out, 100).unwrap();
        assert_eq!(out, b"no-cache");
    }

    #[test]
    fn refuses_bad_padding_eos_and_overflow() {
        let mut out = Vec::new();
        // "0" (00000) padded with zeros instead of ones.
        assert_eq!(decode(&[0x00], &mut out, 10), Err(BadHuffman));
        // Padding of more than 7 bits: a whole byte of ones after "0".
        out.clear();
        assert_eq!(decode(&[0x07, 0xff], &mut out, 10), Err(BadHuffman));
        // The EOS symbol itself (30 ones).
        out.clear();
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut out, 10),
            Err(BadHuffman)
        );
        // Past the limit.
        out.clear();
        assert_eq!(
            decode(&[0xf1, 0xe3, 0xc2, 0xe5], &mut out, 2),
            Err(BadHuffman)
        );
    }
}
