//! HPACK (RFC 7541): sluice's own decoder of the header blocks clients
//! send, and the plain encoding of the blocks it hands hyper.
//!
//! Why decode here rather than let the h2 crate do it: the h2 crate turns
//! every field into `http` types as it decodes, and those types lowercase
//! an uppercase name and refuse a byte they cannot hold by failing the
//! *connection*. nginx answers both per stream, and an uppercase name must
//! be seen to be refused. So each block is decoded here to the bytes the
//! client sent, judged ([`super::request`]), and written again for hyper as
//! literals that never touch its dynamic table: hyper's decoder only reads
//! what sluice wrote.

use super::huffman;
use bytes::Bytes;
use std::collections::VecDeque;

/// The dynamic table size sluice's decoder allows: the protocol's initial
/// `SETTINGS_HEADER_TABLE_SIZE`, which hyper's server never changes.
pub const TABLE_SIZE: usize = 4096;

/// RFC 7541 Appendix A.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// A block that cannot be decoded: a connection error (`COMPRESSION_ERROR`,
/// RFC 9113 §4.3), since the table the client and sluice share is lost.
#[derive(Debug, PartialEq, Eq)]
pub struct CompressionError(pub &'static str);

/// One decoded field, as the client sent its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: Bytes,
    pub value: Bytes,
}

impl Field {
    /// RFC 7541 §4.1's size: what the field costs in a table, and in the
    /// header list bounded by `SETTINGS_MAX_HEADER_LIST_SIZE`.
    pub fn size(&self) -> usize {
        self.name.len() + self.value.len() + 32
    }
}

/// A decoded block: its fields until the list passed the caller's bound,
/// and whether it did (the rest was decoded for the table, not kept).
#[derive(Debug, Default)]
pub struct Decoded {
    pub fields: Vec<Field>,
    pub over: bool,
}

/// The connection's decoding state: the dynamic table.
#[derive(Debug, Default)]
pub struct Decoder {
    table: VecDeque<Field>,
    size: usize,
    max: usize,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
        }
    }

    /// Decodes one whole header block, keeping fields while the list's size
    /// stays within `list_max`.
    pub fn decode(&mut self, mut src: &[u8], list_max: usize) -> Result<Decoded, CompressionError> {
        // Room for a browser's or a gRPC client's head without growing.
        let mut out = Decoded {
            fields: Vec::with_capacity(16),
            over: false,
        };
        let mut list = 0usize;
        let mut first = true;
        while let Some(&b) = src.first() {
            let field = if b & 0x80 != 0 {
                let i = integer(&mut src, 7)?;
                self.get(i)?
            } else if b & 0xc0 == 0x40 {
                let f = self.literal(&mut src, 6)?;
                self.insert(f.clone());
                f
            } else if b & 0xe0 == 0x20 {
                // A table size update: only before the first field.
                if !first {
                    return Err(CompressionError("table size update after a field"));
                }
                let size = integer(&mut src, 5)?;
                if size > TABLE_SIZE {
                    return Err(CompressionError("table size update over the setting"));
                }
                self.max = size;
                self.evict(0);
                continue;
            } else {
                // Without indexing (0000) or never indexed (0001).
                self.literal(&mut src, 4)?
            };
            first = false;
            list = list.saturating_add(field.size());
            if list > list_max {
                out.over = true;
            }
            if !out.over {
                out.fields.push(field);
            }
        }
        Ok(out)
    }

    fn get(&self, i: usize) -> Result<Field, CompressionError> {
        match i {
            0 => Err(CompressionError("index 0")),
            1..=61 => {
                let (n, v) = STATIC[i - 1];
                Ok(Field {
                    name: Bytes::from_static(n),
                    value: Bytes::from_static(v),
                })
            }
            _ => self
                .table
                .get(i - 62)
                .cloned()
                .ok_or(CompressionError("index past the table")),
        }
    }

    fn literal(&self, src: &mut &[u8], prefix: u32) -> Result<Field, CompressionError> {
        let i = integer(src, prefix)?;
        let name = if i == 0 {
            string(src)?
        } else {
            self.get(i)?.name
        };
        let value = string(src)?;
        Ok(Field { name, value })
    }

    fn insert(&mut self, f: Field) {
        let size = f.size();
        self.evict(size);
        if size <= self.max {
            self.size += size;
            self.table.push_front(f);
        }
    }

    /// Evicts the oldest entries until `room` more bytes fit (all of them if
    /// `room` is more than the table holds, RFC 7541 §4.4).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some(old) => self.size -= old.size(),
                None => break,
            }
        }
    }
}

/// The longest string sluice decodes: longer than any field a request may
/// keep (one `large_client_header_buffers` buffer), short of what would let
/// a client make it allocate without bound.
const STRING_MAX: usize = 1 << 20;

/// An integer with an `n`-bit prefix (RFC 7541 §5.1), at most 2^28.
fn integer(src: &mut &[u8], n: u32) -> Result<usize, CompressionError> {
    let short = CompressionError("truncated integer");
    let (&first, rest) = src.split_first().ok_or(short)?;
    *src = rest;
    let max = (1usize << n) - 1;
    let mut v = usize::from(first) & max;
    if v < max {
        return Ok(v);
    }
    let mut shift = 0;
    loop {
        let (&b, rest) = src
            .split_first()
            .ok_or(CompressionError("truncated integer"))?;
        *src = rest;
        v += usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(v);
        }
        if shift > 21 {
            return Err(CompressionError("integer too large"));
        }
    }
}

/// A string literal: its length, then its bytes, Huffman-coded or not.
fn string(src: &mut &[u8]) -> Result<Bytes, CompressionError> {
    let huffman = src.first().is_some_and(|b| b & 0x80 != 0);
    let len = integer(src, 7)?;
    if len > src.len() {
        return Err(CompressionError("truncated string"));
    }
    let (bytes, rest) = src.split_at(len);
    *src = rest;
    if !huffman {
        if len > STRING_MAX {
            return Err(CompressionError("string too long"));
        }
        return Ok(Bytes::copy_from_slice(bytes));
    }
    let mut out = Vec::with_capacity(len + len / 2);
    huffman::decode(bytes, &mut out, STRING_MAX)
        .map_err(|_| CompressionError("invalid Huffman string"))?;
    Ok(Bytes::from(out))
}

/// Appends a field: one of the static table's whole (`:method GET`,
/// `:scheme https`, …) as its index; any other as a literal without
/// indexing, its name by its static table index when it has one (the peer
/// then takes a name it knows rather than parsing one), no Huffman.
pub fn encode(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let index = name_index(name);
    if index != 0 && !STATIC[index - 1].1.is_empty() {
        // Names whose first entry has a value: `:method`, `:path`,
        // `:scheme`, `accept-encoding`; their value may be one of the next.
        let same = STATIC[index - 1..]
            .iter()
            .take_while(|(n, _)| *n == name)
            .position(|(_, v)| *v == value);
        if let Some(i) = same {
            push_integer(out, 0x80, 7, index + i);
            return;
        }
    }
    push_integer(out, 0x00, 4, index);
    if index == 0 {
        push_integer(out, 0x00, 7, name.len());
        out.extend_from_slice(name);
    }
    push_integer(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// The static table's first index for `name` (RFC 7541 Appendix A), 0 if
/// it has none. (`:status` is a response's: never encoded here.)
fn name_index(name: &[u8]) -> usize {
    match name {
        b":authority" => 1,
        b":method" => 2,
        b":path" => 4,
        b":scheme" => 6,
        b"accept-charset" => 15,
        b"accept-encoding" => 16,
        b"accept-language" => 17,
        b"accept-ranges" => 18,
        b"accept" => 19,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"authorization" => 23,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"cookie" => 32,
        b"date" => 33,
        b"etag" => 34,
        b"expect" => 35,
        b"expires" => 36,
        b"from" => 37,
        b"host" => 38,
        b"if-match" => 39,
        b"if-modified-since" => 40,
        b"if-none-match" => 41,
        b"if-range" => 42,
        b"if-unmodified-since" => 43,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"max-forwards" => 47,
        b"proxy-authenticate" => 48,
        b"proxy-authorization" => 49,
        b"range" => 50,
        b"referer" => 51,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"transfer-encoding" => 57,
        b"user-agent" => 58,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => 0,
    }
}

fn push_integer(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(d: &Decoded) -> Vec<(String, String)> {
        d.fields
            .iter()
            .map(|f| {
                (
                    String::from_utf8_lossy(&f.name).into_owned(),
                    String::from_utf8_lossy(&f.value).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn decodes_rfc_7541_c3_requests_in_sequence() {
        // Appendix C.3: three requests without Huffman, sharing the table.
        let mut d = Decoder::new();
        let one = d
            .decode(
                &[
                    0x82, 0x86, 0x84, 0x41, 0x0f, b'w', b'w', b'w', b'.', b'e', b'x', b'a', b'm',
                    b'p', b'l', b'e', b'.', b'c', b'o', b'm',
                ],
                1 << 16,
            )
            .unwrap();
        assert_eq!(
            fields(&one)[3],
            (":authority".to_string(), "www.example.com".to_string())
        );
        let mut two = vec![0x82, 0x86, 0x84, 0xbe, 0x58, 0x08];
        two.extend_from_slice(b"no-cache");
        let two = d.decode(&two, 1 << 16).unwrap();
        assert_eq!(fields(&two)[3].1, "www.example.com");
        assert_eq!(fields(&two)[4], ("cache-control".into(), "no-cache".into()));
        assert_eq!(d.size, 110);
    }

    #[test]
    fn decodes_huffman_c4() {
        let mut d = Decoder::new();
        let block = [
            0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab,
            0x90, 0xf4, 0xff,
        ];
        let got = d.decode(&block, 1 << 16).unwrap();
        assert_eq!(fields(&got)[3].1, "www.example.com");
    }

    #[test]
    fn keeps_bytes_as_sent() {
        let mut block = Vec::new();
        encode(&mut block, b"Content_Length", b"a\0b\r\n");
        let got = Decoder::new().decode(&block, 1 << 16).unwrap();
        assert_eq!(got.fields[0].name.as_ref(), b"Content_Length");
        assert_eq!(got.fields[0].value.as_ref(), b"a\0b\r\n");
    }

    #[test]
    fn encodes_static_fields_by_index_and_reads_them_back() {
        let fields_in: [(&[u8], &[u8]); 7] = [
            (b":method", b"POST"),
            (b":scheme", b"https"),
            (b":path", b"/x"),
            (b"accept-encoding", b"gzip, deflate"),
            (b"accept-encoding", b"br"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
        ];
        let mut block = Vec::new();
        for (n, v) in fields_in {
            encode(&mut block, n, v);
        }
        // Whole fields by index: `:method POST` 3, `:scheme https` 7.
        assert_eq!(&block[..2], &[0x83, 0x87]);
        // `:path` by its name's index (4), then the value.
        assert_eq!(&block[2..5], &[0x04, 0x02, b'/']);
        let got = Decoder::new().decode(&block, 1 << 16).unwrap();
        let want: Vec<(String, String)> = fields_in
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect();
        assert_eq!(fields(&got), want);
    }

    #[test]
    fn refuses_broken_blocks() {
        let mut d = Decoder::new();
        assert!(d.decode(&[0x80], 1000).is_err(), "index 0");
        assert!(d.decode(&[0xbe], 1000).is_err(), "empty dynamic table");
        assert!(d.decode(&[0x0f], 1000).is_err(), "truncated integer");
        assert!(d.decode(&[0x00, 0x05, b'a'], 1000).is_err(), "truncated");
        assert!(d.decode(&[0x82, 0x20], 1000).is_err(), "late size update");
        assert!(
            d.decode(&[0x3f, 0xe2, 0x1f], 1000).is_err(),
            "size over 4096"
        );
        assert!(
            d.decode(&[0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 1000)
                .is_err(),
            "integer overflow"
        );
    }

    #[test]
    fn a_list_over_the_bound_is_decoded_but_not_kept() {
        let mut block = Vec::new();
        for _ in 0..10 {
            block.extend_from_slice(&[0x40, 0x01, b'x', 0x03, b'a', b'b', b'c']);
        }
        let mut d = Decoder::new();
        let got = d.decode(&block, 36 * 3).unwrap();
        assert!(got.over);
        assert_eq!(got.fields.len(), 3);
        // The table still took all ten (decoding went on).
        assert_eq!(d.table.len(), 10);
    }

    #[test]
    fn size_update_evicts() {
        let mut d = Decoder::new();
        d.decode(&[0x40, 0x01, b'x', 0x01, b'y'], 1000).unwrap();
        assert_eq!(d.table.len(), 1);
        d.decode(&[0x20], 1000).unwrap();
        assert_eq!(d.table.len(), 0);
        assert!(d.decode(&[0xbe], 1000).is_err());
    }
}
