//! RFC 7239's `Forwarded` field, as far as the client goes: each element's
//! `for=` node, in order (the last is the nearest proxy's).
//!
//! `Forwarded: for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https,
//! for=unknown`. Elements are separated by commas (within a field and
//! across fields), pairs by semicolons; a value is a token or a quoted
//! string (with `\` escapes); parameter names are case-insensitive.
//!
//! Each element is read on its own, and a broken one names no address:
//! the client writes the left part of the field and each proxy appends its
//! element on the right, so nothing the client writes may change how the
//! proxies' elements read. Hence elements are cut at every comma, quoted or
//! not (no node, port or RFC 7239 parameter value holds one; a quoted comma
//! only breaks its own element), and an element that is not the grammar
//! (an unterminated quote, `for` twice, a stray byte) is like `unknown`: the
//! walk through the trusted proxies stops there. A node is an IPv4 address
//! or a bracketed IPv6 address, each with an optional port (digits or an
//! obfuscated `_port`); `unknown`, an obfuscated identifier (`_hidden`), an
//! element without `for`, or a node that is neither, names no address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Each element's client, in order; `None` where it names no address.
pub(super) fn for_nodes<'a>(values: impl Iterator<Item = &'a [u8]>) -> Vec<Option<IpAddr>> {
    let mut nodes = Vec::new();
    for v in values {
        for piece in v.split(|&b| b == b',') {
            if piece.iter().all(|&b| b == b' ' || b == b'\t') {
                continue; // an empty list element
            }
            let mut p = Cursor { b: piece, i: 0 };
            nodes.push(p.element().flatten());
        }
    }
    nodes
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// One element's node: `Some(None)` when it names no address, `None`
    /// when it is not the grammar.
    fn element(&mut self) -> Option<Option<IpAddr>> {
        let mut node: Option<Option<IpAddr>> = None;
        loop {
            self.ows();
            if !matches!(self.peek(), None | Some(b';')) {
                let name = self.token()?;
                if self.peek() != Some(b'=') {
                    return None;
                }
                self.i += 1;
                let value = self.value()?;
                if name.eq_ignore_ascii_case(b"for") {
                    if node.is_some() {
                        return None;
                    }
                    node = Some(parse_node(&value));
                }
            }
            self.ows();
            match self.peek() {
                None => return Some(node.flatten()),
                Some(b';') => self.i += 1,
                Some(_) => return None,
            }
        }
    }

    /// A token (a value's may also hold `:`, `[` and `]`: senders write
    /// `for=192.0.2.1:80` unquoted).
    fn token(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| tchar(c) || matches!(c, b':' | b'[' | b']'))
        {
            self.i += 1;
        }
        (self.i > start).then(|| &self.b[start..self.i])
    }

    fn value(&mut self) -> Option<Vec<u8>> {
        if self.peek() != Some(b'"') {
            return self.token().map(<[u8]>::to_vec);
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let c = self.peek()?;
            self.i += 1;
            match c {
                b'"' => return Some(out),
                b'\\' => {
                    out.push(self.peek()?);
                    self.i += 1;
                }
                c if c < 0x20 && c != b'\t' || c == 0x7f => return None,
                c => out.push(c),
            }
        }
    }
}

fn tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// A node's address: `192.0.2.1`, `192.0.2.1:80`, `[2001:db8::1]`,
/// `[2001:db8::1]:_p`; else `None` (`unknown`, `_hidden`, anything else).
fn parse_node(v: &[u8]) -> Option<IpAddr> {
    let v = std::str::from_utf8(v).ok()?;
    let (ip, port) = if let Some(rest) = v.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (IpAddr::V6(ip.parse::<Ipv6Addr>().ok()?), port)
    } else {
        let (ip, port) = match v.split_once(':') {
            Some((ip, port)) => (ip, Some(port)),
            None => (v, None),
        };
        (IpAddr::V4(ip.parse::<Ipv4Addr>().ok()?), port)
    };
    match port {
        None => Some(ip),
        Some(p) if valid_port(p) => Some(ip),
        Some(_) => None,
    }
}

/// `1`–`65535` in at most five digits, or an obfuscated `_port`.
fn valid_port(p: &str) -> bool {
    if let Some(obf) = p.strip_prefix('_') {
        return !obf.is_empty()
            && obf
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
    }
    p.len() <= 5
        && !p.is_empty()
        && p.bytes().all(|c| c.is_ascii_digit())
        && p.parse::<u32>().is_ok_and(|n| n <= 65535)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(fields: &[&str]) -> Vec<Option<String>> {
        for_nodes(fields.iter().map(|f| f.as_bytes()))
            .into_iter()
            .map(|n| n.map(|ip| ip.to_string()))
            .collect()
    }

    fn list(l: &[Option<&str>]) -> Vec<Option<String>> {
        l.iter().map(|n| n.map(str::to_string)).collect()
    }

    #[test]
    fn rfc_7239_examples() {
        assert_eq!(nodes(&["for=\"_gazonk\""]), list(&[None]));
        assert_eq!(
            nodes(&["For=\"[2001:db8:cafe::17]:4711\""]),
            list(&[Some("2001:db8:cafe::17")])
        );
        assert_eq!(
            nodes(&["for=192.0.2.60;proto=http;by=203.0.113.43"]),
            list(&[Some("192.0.2.60")])
        );
        assert_eq!(
            nodes(&["for=192.0.2.43, for=198.51.100.17"]),
            list(&[Some("192.0.2.43"), Some("198.51.100.17")])
        );
        assert_eq!(
            nodes(&["for=192.0.2.43,for=\"[2001:db8:cafe::17]\",for=unknown"]),
            list(&[Some("192.0.2.43"), Some("2001:db8:cafe::17"), None])
        );
    }

    #[test]
    fn elements_across_fields_ports_and_odd_nodes() {
        assert_eq!(
            nodes(&[
                "for=192.0.2.1:8080",
                "proto=https, for=\"192.0.2.2:_p1\";by=_x"
            ]),
            list(&[Some("192.0.2.1"), None, Some("192.0.2.2")])
        );
        for odd in [
            "for=unknown",
            "for=UNKNOWN",
            "for=_hidden",
            "for=\"[::1\"",
            "for=2001:db8::1",
            "for=1.2.3.4:99999",
            "for=\"1.2.3.4:\"",
            "for=example.com",
        ] {
            assert_eq!(nodes(&[odd]), list(&[None]), "{odd}");
        }
        // Escapes in a quoted string; empty list elements; an empty pair.
        assert_eq!(
            nodes(&[" , for=\"192.0.2.\\9\" ,, for=1.2.3.4;;"]),
            list(&[Some("192.0.2.9"), Some("1.2.3.4")])
        );
        assert_eq!(nodes(&[""]), list(&[]));
    }

    #[test]
    fn a_broken_element_names_nobody_and_leaves_the_others_alone() {
        // What a client writes on the left cannot change the proxies'
        // elements on its right, in the same field or another.
        for bad in [
            "for=1.2.3.4;for=5.6.7.8",
            "for",
            "for=",
            "=1.2.3.4",
            "for=\"1.2.3.4",
            "for=1.2.3.4 for=5.6.7.8",
            "for=\"1.2.3.4\x01\"",
            "for=\"a,b\"",
        ] {
            let same_field = format!("{bad}, for=203.0.113.9");
            let got = nodes(&[&same_field]);
            assert_eq!(got.last(), Some(&Some("203.0.113.9".into())), "{bad:?}");
            assert!(
                got[..got.len() - 1].iter().all(Option::is_none),
                "{bad:?}: {got:?}"
            );
            assert_eq!(
                nodes(&[bad, "for=203.0.113.9"]).last(),
                Some(&Some("203.0.113.9".into()))
            );
        }
        // Bytes that are not text on the client's side do not hide the rest.
        let fields: [&[u8]; 1] = [b"for=\"\xff\xfe\", for=203.0.113.9"];
        assert_eq!(
            for_nodes(fields.into_iter()),
            vec![None, Some("203.0.113.9".parse().unwrap())]
        );
    }
}
