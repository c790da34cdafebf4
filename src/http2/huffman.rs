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

/// Decodes `src` onto `out`, which may be given at most `limit` bytes
/// (the caller's bound on a field; `Err` past it too).
pub fn decode(src: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), BadHuffman> {
    let mut code: u32 = 0;
    let mut len = 0usize;
    // Bits since the last symbol, all ones so far (for the padding check).
    let mut ones = true;
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

#[cfg(test)]
mod tests {
    use super::*;

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
