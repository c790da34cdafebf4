//! The upstream response's own header fields, left in place in the head
//! they came in, in the response's extensions.
//!
//! Why not a `HeaderMap`: on the HTTP/1.1 pass path the fields go from the
//! upstream's bytes to the client's unchanged but for hop-by-hop ones, yet
//! a map cost each response a `HeaderName` and a `HeaderValue` per field,
//! the map's hashing, and its drop (about 2 800 instructions, a tenth of a
//! proxied request; issue #31). Here the response parser notes where each
//! field it passes on is ([`UpstreamFields`]), lowercases the names in
//! place, and the HTTP/1.1 writer copies them out.
//!
//! The rule every reader keeps: a response's fields are its
//! [`UpstreamFields`] first, in the order the upstream sent them, then its
//! `HeaderMap`, which holds only what sluice added (`add_header`, the quota
//! headers, a tunnel's `Connection: upgrade`). A field sluice *replaces*
//! (the quota headers) is [`UpstreamFields::remove`]d from the first.
//! hyper's servers (HTTP/2, and HTTP/1.1 behind `SLUICE_HTTP1_HYPER`) write
//! only a `HeaderMap`: [`into_header_map`] moves the fields into it, in
//! that order, at their door. The values were checked by the parser
//! (`httparse` refuses the bytes `HeaderValue` does), so none is refused
//! there.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response};

/// Where one field is in the head: name offset and length, value offset
/// and length.
pub(super) type Span = (u32, u32, u32, u32);

/// The fields of an upstream's response head that the client gets, in
/// place: lowercase names, values as sent (without surrounding spaces).
#[derive(Clone, Debug)]
pub struct UpstreamFields {
    head: Bytes,
    at: Vec<Span>,
}

impl UpstreamFields {
    /// The fields at `at` in `head` (spans inside it, names lowercase).
    pub(super) fn new(head: Bytes, at: Vec<Span>) -> UpstreamFields {
        UpstreamFields { head, at }
    }

    /// The response's upstream fields, if it has any.
    pub fn of<B>(resp: &Response<B>) -> Option<&UpstreamFields> {
        resp.extensions().get()
    }

    /// The upstream fields of a response's head, if it has any.
    pub fn of_parts(parts: &http::response::Parts) -> Option<&UpstreamFields> {
        parts.extensions.get()
    }

    fn bytes(&self, from: u32, len: u32) -> &[u8] {
        let (from, len) = (from as usize, len as usize);
        self.head.get(from..from + len).unwrap_or_default()
    }

    /// Every field, name (lowercase) and value, in the upstream's order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.at
            .iter()
            .map(|&(n, nl, v, vl)| (self.bytes(n, nl), self.bytes(v, vl)))
    }

    /// The first value of `name` (lowercase).
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// How many fields there are.
    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }

    /// Leaves out every field named `name` (lowercase).
    pub fn remove(&mut self, name: &[u8]) {
        let head = &self.head;
        self.at.retain(|&(n, nl, ..)| {
            head.get(n as usize..(n + nl) as usize)
                .is_none_or(|n| n != name)
        });
    }
}

/// The first value of `name` (lowercase) among all of `resp`'s fields.
pub fn first_value<'r, B>(resp: &'r Response<B>, name: &HeaderName) -> Option<&'r [u8]> {
    let upstream = UpstreamFields::of(resp).and_then(|f| f.get(name.as_str().as_bytes()));
    upstream.or_else(|| resp.headers().get(name).map(HeaderValue::as_bytes))
}

/// `resp`'s upstream fields moved into its `HeaderMap`, before the fields
/// sluice added, for a writer that reads only the map.
pub fn into_header_map<B>(resp: &mut Response<B>) {
    let Some(f) = resp.extensions_mut().remove::<UpstreamFields>() else {
        return;
    };
    let added = std::mem::take(resp.headers_mut());
    // (Room for hyper's own `Date` and `Content-Length` too.)
    let mut map = HeaderMap::with_capacity(f.len() + added.len() + 2);
    for &(n, nl, v, vl) in &f.at {
        let name = HeaderName::from_bytes(f.bytes(n, nl));
        let (v, vl) = (v as usize, vl as usize);
        let value = HeaderValue::from_maybe_shared(f.head.slice(v..v + vl));
        if let (Ok(name), Ok(value)) = (name, value) {
            map.append(name, value);
        }
    }
    let mut last = None;
    for (name, value) in added {
        if let Some(n) = name {
            last = Some(n);
        }
        if let Some(n) = &last {
            map.append(n.clone(), value);
        }
    }
    *resp.headers_mut() = map;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response() -> Response<()> {
        let head = Bytes::from_static(b"x-a: 1\r\nretry-after: 5\r\nx-a: 2\r\n");
        let at = vec![(0, 3, 5, 1), (8, 11, 21, 1), (24, 3, 29, 1)];
        let mut resp = Response::new(());
        resp.extensions_mut().insert(UpstreamFields::new(head, at));
        resp.headers_mut()
            .append("x-a", HeaderValue::from_static("added"));
        resp.headers_mut()
            .append("x-b", HeaderValue::from_static("b"));
        resp
    }

    /// The upstream's fields come first, in its order, then sluice's; a
    /// removed name is gone from the upstream's only.
    #[test]
    fn upstream_fields_then_added_ones() {
        let mut resp = response();
        let f = UpstreamFields::of(&resp).unwrap();
        let fields: Vec<_> = f.iter().collect();
        assert_eq!(
            fields,
            [
                (&b"x-a"[..], &b"1"[..]),
                (b"retry-after", b"5"),
                (b"x-a", b"2")
            ]
        );
        assert_eq!(
            first_value(&resp, &http::header::RETRY_AFTER),
            Some(&b"5"[..])
        );
        assert_eq!(
            first_value(&resp, &HeaderName::from_static("x-b")),
            Some(&b"b"[..])
        );
        into_header_map(&mut resp);
        assert!(UpstreamFields::of(&resp).is_none());
        let all: Vec<_> = resp.headers().get_all("x-a").iter().collect();
        assert_eq!(all, ["1", "2", "added"]);
        assert_eq!(resp.headers()["retry-after"], "5");
        assert_eq!(resp.headers()["x-b"], "b");

        let mut resp = response();
        resp.extensions_mut()
            .get_mut::<UpstreamFields>()
            .unwrap()
            .remove(b"x-a");
        into_header_map(&mut resp);
        let all: Vec<_> = resp.headers().get_all("x-a").iter().collect();
        assert_eq!(all, ["added"]);
    }
}
