//! A request's header fields as the phases read them: where they are in
//! the gate's canonical head ([`Wire`], HTTP/1.1), or hyper's `HeaderMap`
//! (HTTP/2).
//!
//! Why not always a `HeaderMap`: the gate has already read every field
//! with nginx's rules and written it in one narrow form (`name: value`
//! CRLF, the name lowercased, the value a valid field value). Building a
//! map of it cost each request a `HeaderName` and a `HeaderValue` per field
//! and the map's own hashing (issue #31), only for the phases to look a few
//! names up and for the upstream writer to copy every field out again. The
//! gate notes where each field is as it writes it ([`Span`]); a lookup is a
//! walk of that short list, as nginx's own `headers_in` list is.
//!
//! What a reader sees is the same either way: lowercase names, values
//! without their surrounding spaces and tabs, repeated fields in order. One
//! difference, on purpose: [`Fields::iter`] yields a head's fields in the
//! order the client sent them (nginx forwards them so), where a
//! `HeaderMap` groups each name's values at its first.

use bytes::Bytes;
use http::{HeaderMap, HeaderName};

/// Where one field is in the head: name offset and length, value offset
/// and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    name: u32,
    name_len: u32,
    value: u32,
    value_len: u32,
}

impl Span {
    /// A field whose name is at `head[name..name + name_len]` and value at
    /// `head[value..value + value_len]`: a head is far below 4 GB (the
    /// gate's buffers are kilobytes), so the offsets fit.
    pub(crate) fn new(name: usize, name_len: usize, value: usize, value_len: usize) -> Span {
        Span {
            name: name as u32,
            name_len: name_len as u32,
            value: value as u32,
            value_len: value_len as u32,
        }
    }

    /// The name and the value in `head`, the canonical head this span is
    /// in (empty where it is not: never a panic).
    pub(crate) fn field_in<'a>(&self, head: &'a [u8]) -> (&'a [u8], &'a [u8]) {
        let at = |from: u32, len: u32| {
            let from = from as usize;
            head.get(from..from + len as usize).unwrap_or_default()
        };
        (at(self.name, self.name_len), at(self.value, self.value_len))
    }
}

/// Fields in place in a canonical head: the head, and where each field is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wire {
    head: Bytes,
    at: Vec<Span>,
}

impl Wire {
    /// The fields at `at` in `head` (a canonical head, as the gate wrote
    /// it and noted where each field is).
    pub fn new(head: Bytes, at: Vec<Span>) -> Wire {
        Wire { head, at }
    }

    // (A span is the gate's, inside its head; were one not, it would read
    // as empty rather than panic.)
    fn name(&self, s: &Span) -> &[u8] {
        s.field_in(&self.head).0
    }

    fn value(&self, s: &Span) -> &[u8] {
        s.field_in(&self.head).1
    }
}

/// A value as text if it is visible ASCII (and tabs) only, as
/// `HeaderValue::to_str` reads one.
pub fn as_str(value: &[u8]) -> Option<&str> {
    if value
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        std::str::from_utf8(value).ok()
    } else {
        None
    }
}

/// Lowercases a field name in place, eight bytes at a time: every name
/// read (the client's, the upstream's) is lowercased once, and most names
/// are longer than eight bytes, where a byte at a time cost ~10
/// instructions a byte. Bytes that are not ASCII letters stay as they are.
pub fn lowercase(name: &mut [u8]) {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Per byte, with the top bit cleared so that no sum carries over: its
    // top bit set by +0x3f if it is 'A' or above, by +0x25 if it is above
    // 'Z'; an upper-case ASCII letter is the first and not the second, and
    // had no top bit of its own. Its 0x20 bit is then set.
    let word = |w: &mut [u8]| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(w);
        let v = u64::from_ne_bytes(bytes);
        let low = v & !HIGH;
        let upper = (low + 0x3f3f_3f3f_3f3f_3f3f) & !(low + 0x2525_2525_2525_2525) & !v & HIGH;
        w.copy_from_slice(&(v | (upper >> 2)).to_ne_bytes());
    };
    let len = name.len();
    if len < 8 {
        name.make_ascii_lowercase();
        return;
    }
    for w in name.chunks_exact_mut(8) {
        word(w);
    }
    // The tail as the last eight bytes (lowercasing twice changes nothing).
    if len % 8 != 0 {
        word(&mut name[len - 8..]);
    }
}

/// A request's header fields.
#[derive(Clone, Debug)]
pub enum Fields {
    /// In place in the HTTP/1.1 gate's canonical head.
    Wire(Wire),
    /// As hyper read them (HTTP/2).
    Map(HeaderMap),
}

impl Default for Fields {
    fn default() -> Self {
        Fields::Wire(Wire::default())
    }
}

impl Fields {
    /// The first value of `name`.
    pub fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        match self {
            Fields::Wire(w) => {
                let name = name.as_str().as_bytes();
                w.at.iter().find(|s| w.name(s) == name).map(|s| w.value(s))
            }
            Fields::Map(m) => m.get(name).map(http::HeaderValue::as_bytes),
        }
    }

    /// Every value of `name`, in order.
    pub fn get_all<'a, 'n>(&'a self, name: &'n HeaderName) -> Values<'a, 'n> {
        match self {
            Fields::Wire(w) => Values(ValuesOf::Wire {
                wire: w,
                at: w.at.iter(),
                name: name.as_str().as_bytes(),
            }),
            Fields::Map(m) => Values(ValuesOf::Map(m.get_all(name).into_iter())),
        }
    }

    /// Whether `name` is among them.
    pub fn contains(&self, name: &HeaderName) -> bool {
        self.get(name).is_some()
    }

    /// Every field, name and value (see the module's note on order).
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Fields::Wire(w) => Iter(IterOf::Wire(w, w.at.iter())),
            Fields::Map(m) => Iter(IterOf::Map(m.iter())),
        }
    }
}

impl From<HeaderMap> for Fields {
    fn from(m: HeaderMap) -> Fields {
        Fields::Map(m)
    }
}

/// The values of one name.
pub struct Values<'a, 'n>(ValuesOf<'a, 'n>);

enum ValuesOf<'a, 'n> {
    Wire {
        wire: &'a Wire,
        at: std::slice::Iter<'a, Span>,
        name: &'n [u8],
    },
    Map(http::header::ValueIter<'a, http::HeaderValue>),
}

impl<'a> Iterator for Values<'a, '_> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match &mut self.0 {
            ValuesOf::Wire { wire, at, name } => {
                let wire: &'a Wire = wire;
                at.find(|s| wire.name(s) == *name).map(|s| wire.value(s))
            }
            ValuesOf::Map(v) => v.next().map(http::HeaderValue::as_bytes),
        }
    }
}

/// Every field: its lowercase name and its value.
pub struct Iter<'a>(IterOf<'a>);

enum IterOf<'a> {
    Wire(&'a Wire, std::slice::Iter<'a, Span>),
    Map(http::header::Iter<'a, http::HeaderValue>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterOf::Wire(w, at) => {
                let w: &'a Wire = w;
                at.next().map(|s| (w.name(s), w.value(s)))
            }
            IterOf::Map(m) => m.next().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header;

    /// The fields of a head the gate reads.
    fn wire(fields: &str) -> Fields {
        let head = format!("GET / HTTP/1.1\r\n{fields}\r\n");
        match crate::http1::parse_head(head.as_bytes(), &crate::http1::HeadRules::default()) {
            crate::http1::Parsed::Head(h) => Fields::Wire(Wire::new(h.canonical.into(), h.spans)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn wire_fields_read_as_a_map_would() {
        let f = wire("Host: a\r\nX-A:  1 \t\r\nx-b: 2\r\nx-A: 3\r\nX-Empty: \r\n");
        let mut m = HeaderMap::new();
        for (n, v) in [
            ("host", "a"),
            ("x-a", "1"),
            ("x-b", "2"),
            ("x-a", "3"),
            ("x-empty", ""),
        ] {
            m.append(n, v.parse().unwrap());
        }
        let m = Fields::Map(m);
        let xa = HeaderName::from_static("x-a");
        for f in [&f, &m] {
            assert_eq!(f.get(&header::HOST), Some(&b"a"[..]));
            assert_eq!(f.get_all(&xa).collect::<Vec<_>>(), [b"1", b"3"]);
            assert_eq!(f.get(&HeaderName::from_static("x-empty")), Some(&b""[..]));
            assert!(!f.contains(&header::COOKIE));
        }
        // The wire's order is the client's; a map groups a name's values.
        let order = |f: &Fields| f.iter().map(|(n, _)| n.to_vec()).collect::<Vec<_>>();
        assert_eq!(
            order(&f),
            [&b"host"[..], b"x-a", b"x-b", b"x-a", b"x-empty"]
        );
        assert_eq!(
            order(&m),
            [&b"host"[..], b"x-a", b"x-a", b"x-b", b"x-empty"]
        );
    }

    /// `lowercase` is `make_ascii_lowercase`, for every byte at every place of
    /// a word and in the tail.
    #[test]
    fn lowercase_is_ascii_lowercase() {
        for b in 0..=255u8 {
            for len in [1, 7, 8, 9, 16, 17] {
                for at in 0..len {
                    let mut name: Vec<u8> = (0..len).map(|i| b"aZ-9"[i % 4]).collect();
                    name[at] = b;
                    let mut want = name.clone();
                    want.make_ascii_lowercase();
                    lowercase(&mut name);
                    assert_eq!(name, want, "byte {b:#x} at {at} of {len}");
                }
            }
        }
    }
}
