//! RFC 7239's `Forwarded` field, as far as the client goes: each element's
//! `for=` node, in order (the last is the nearest proxy's).
//!
//! `Forwarded: for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https,
//! for=unknown`. Elements are separated by commas (within a field and
//! across fields), pairs by semicolons; a value is a token or a quoted
//! string (with `\` escapes). Parameter names are case-insensitive; a
//! parameter twice in one element, or anything that is not this grammar,
//! makes the whole field unreadable (`None`): a sender that cannot write
//! the grammar is not believed in part. A node is an IPv4 address or a
//! bracketed IPv6 address, each with an optional port (digits or an
//! obfuscated `_port`); `unknown`, an obfuscated identifier (`_hidden`), an
//! element without `for`, or a node that is neither, names no address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Each element's client, in order; `None` where it names no address.
/// `None` as a whole when a field does not parse.
pub(super) fn for_nodes<'a>(values: impl Iterator<Item = &'a str>) -> Option<Vec<Option<IpAddr>>> {
    let mut nodes = Vec::new();
    for v in values {
        let mut p = Cursor {
            b: v.as_bytes(),
            i: 0,
        };
        while let Some(node) = p.element()? {
            nodes.push(node);
        }
    }
    Some(nodes)
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

    /// The next element's node (`Some(None)`: an element naming no
    /// address; `None`: the field ended). Empty list elements are skipped,
    /// as HTTP's list syntax allows.
    fn element(&mut self) -> Option<Option<Option<IpAddr>>> {
        loop {
            self.ows();
            match self.peek() {
                None => return Some(None),
                Some(b',') => self.i += 1,
                Some(_) => break,
            }
        }
        let mut node: Option<Option<IpAddr>> = None;
        loop {
            self.ows();
            if !matches!(self.peek(), None | Some(b';' | b',')) {
                let name = self.token()?;
                if self.peek() != Some(b'=') {
                    return None;
                }
                self.i += 1;
                let value = self.value()?;
                let seen = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
                if seen("for") {
                    if node.is_some() {
                        return None;
                    }
                    node = Some(parse_node(&value));
                }
            }
            self.ows();
            match self.peek() {
                None => break,
                Some(b';') => self.i += 1,
                Some(b',') => {
                    self.i += 1;
                    break;
                }
                Some(_) => return None,
            }
        }
        Some(Some(node.unwrap_or(None)))
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

    fn nodes(fields: &[&str]) -> Option<Vec<Option<String>>> {
        for_nodes(fields.iter().copied())
            .map(|v| v.into_iter().map(|n| n.map(|ip| ip.to_string())).collect())
    }

    fn some(list: &[Option<&str>]) -> Option<Vec<Option<String>>> {
        Some(list.iter().map(|n| n.map(str::to_string)).collect())
    }

    #[test]
    fn rfc_7239_examples() {
        assert_eq!(nodes(&["for=\"_gazonk\""]), some(&[None]));
        assert_eq!(
            nodes(&["For=\"[2001:db8:cafe::17]:4711\""]),
            some(&[Some("2001:db8:cafe::17")])
        );
        assert_eq!(
            nodes(&["for=192.0.2.60;proto=http;by=203.0.113.43"]),
            some(&[Some("192.0.2.60")])
        );
        assert_eq!(
            nodes(&["for=192.0.2.43, for=198.51.100.17"]),
            some(&[Some("192.0.2.43"), Some("198.51.100.17")])
        );
        assert_eq!(
            nodes(&["for=192.0.2.43,for=\"[2001:db8:cafe::17]\",for=unknown"]),
            some(&[Some("192.0.2.43"), Some("2001:db8:cafe::17"), None])
        );
    }

    #[test]
    fn elements_across_fields_ports_and_odd_nodes() {
        assert_eq!(
            nodes(&[
                "for=192.0.2.1:8080",
                "proto=https, for=\"192.0.2.2:_p1\";by=_x"
            ]),
            some(&[Some("192.0.2.1"), None, Some("192.0.2.2")])
        );
        // Not an address: no address, the list itself is fine.
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
            assert_eq!(nodes(&[odd]), some(&[None]), "{odd}");
        }
        // Escapes in a quoted string; empty list elements.
        assert_eq!(
            nodes(&[" , for=\"192.0.2.\\9\" ,, "]),
            some(&[Some("192.0.2.9")])
        );
        assert_eq!(nodes(&[""]), some(&[]));
    }

    #[test]
    fn what_is_not_the_grammar_is_not_read() {
        for bad in [
            "for=1.2.3.4;for=5.6.7.8",
            "for",
            "for=",
            "=1.2.3.4",
            "for=\"1.2.3.4",
            "for=1.2.3.4 for=5.6.7.8",
            "for=\"1.2.3.4\x01\"",
            "for=1.2.3.4;;",
        ] {
            let got = nodes(&[bad]);
            // `;;` is an empty pair, which the grammar allows.
            if bad.ends_with(";;") {
                assert_eq!(got, some(&[Some("1.2.3.4")]));
            } else {
                assert_eq!(got, None, "{bad:?}");
            }
        }
    }
}
