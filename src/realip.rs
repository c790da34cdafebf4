//! nginx's realip module: take the client address from a header or from the
//! connection's PROXY protocol header, but only when the connection comes
//! from a trusted proxy.
//!
//! `X-Forwarded-For` is never trusted by default: without `[real_ip]`, the
//! client is the TCP peer. With it, a peer inside `from` may name the client
//! in `header`; `recursive` walks `X-Forwarded-For` from the right past every
//! trusted address (nginx's `real_ip_recursive on`), otherwise the rightmost
//! entry is taken.
//!
//! `header = "proxy_protocol"` (nginx's `real_ip_header proxy_protocol`)
//! takes the client, address and port, from the PROXY protocol header its
//! load balancer sent (a connection without one keeps its own).
//! `header = "Forwarded"`, beyond nginx, reads RFC 7239's `for=` elements
//! as `X-Forwarded-For`'s entries, by the same walk ([`RealIp::walk`]):
//! right to left, through the trusted proxies; an `unknown` or obfuscated
//! node (`_hidden`), or an element that is not the grammar, names no
//! address, so the walk stops there.

use crate::http1::Fields;
use crate::proxy_protocol::Addresses;
use http::HeaderName;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};

mod forwarded;

#[derive(Clone, Debug)]
pub struct RealIp {
    /// `set_real_ip_from`.
    pub from: Vec<IpNet>,
    /// `real_ip_header`.
    pub source: Source,
    /// `real_ip_recursive`.
    pub recursive: bool,
}

/// Where a trusted peer names the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `X-Forwarded-For`, `X-Real-IP` or another header.
    Header(HeaderName),
    /// The connection's PROXY protocol header.
    ProxyProtocol,
    /// RFC 7239's `Forwarded` field.
    Forwarded,
}

impl Source {
    /// `real_ip.header`'s value: `proxy_protocol` and `Forwarded` are
    /// keywords, anything else a header's name.
    pub fn parse(s: &str) -> Option<Source> {
        if s.eq_ignore_ascii_case("proxy_protocol") {
            return Some(Source::ProxyProtocol);
        }
        if s.eq_ignore_ascii_case("forwarded") {
            return Some(Source::Forwarded);
        }
        HeaderName::from_bytes(s.to_ascii_lowercase().as_bytes())
            .ok()
            .map(Source::Header)
    }
}

/// An address written as text (spaces around it allowed).
fn as_ip(v: &[u8]) -> Option<IpAddr> {
    std::str::from_utf8(v.trim_ascii()).ok()?.parse().ok()
}

/// Parse `"10.0.0.0/8"` or a bare address (a /32 or /128).
pub fn parse_cidr(s: &str) -> Result<IpNet, String> {
    if let Ok(n) = s.parse::<IpNet>() {
        return Ok(n.trunc());
    }
    s.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("invalid address or network \"{s}\""))
}

impl RealIp {
    fn trusted(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.from.iter().any(|n| n.contains(&ip))
    }

    /// The client of a connection from `peer`, which may have sent a
    /// PROXY protocol header naming `proxy`, with `headers`.
    pub fn client(
        &self,
        peer: SocketAddr,
        proxy: Option<&Addresses>,
        headers: &Fields,
    ) -> SocketAddr {
        match &self.source {
            Source::ProxyProtocol => match proxy {
                Some(p) if self.trusted(peer.ip()) => {
                    SocketAddr::new(p.source.ip().to_canonical(), p.source.port())
                }
                _ => peer,
            },
            _ => SocketAddr::new(self.resolve(peer.ip(), headers), peer.port()),
        }
    }

    /// `from` holds a network of every address (`0.0.0.0/0`, `::/0`).
    pub fn trusts_everyone(&self) -> bool {
        self.from.iter().any(|n| n.prefix_len() == 0)
    }

    /// The client address for a connection from `peer` with `headers` (a
    /// header source; the PROXY protocol's is [`RealIp::client`]'s).
    pub fn resolve(&self, peer: IpAddr, headers: &Fields) -> IpAddr {
        let header = match &self.source {
            Source::Header(h) => h,
            Source::Forwarded => return self.forwarded(peer, headers),
            Source::ProxyProtocol => return peer,
        };
        if !self.trusted(peer) {
            return peer;
        }
        // Bytes, not text: an entry a client wrote in bytes that are not
        // text must not hide the entries its proxies appended after it.
        let values: Vec<&[u8]> = headers.get_all(header).collect();
        if values.is_empty() {
            return peer;
        }
        if header != "x-forwarded-for" {
            return as_ip(values[0]).map_or(peer, |ip| ip.to_canonical());
        }
        // nginx stops at an entry it cannot parse: `None`.
        let entries: Vec<Option<IpAddr>> = values
            .iter()
            .flat_map(|v| v.split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|s| !s.is_empty())
            .map(as_ip)
            .collect();
        self.walk(peer, &entries)
    }

    /// `Forwarded`'s `for=` nodes, by the same walk.
    fn forwarded(&self, peer: IpAddr, headers: &Fields) -> IpAddr {
        if !self.trusted(peer) {
            return peer;
        }
        let nodes = forwarded::for_nodes(headers.get_all(&http::header::FORWARDED));
        self.walk(peer, &nodes)
    }

    /// The client named by a trusted `peer`'s list of hops (the nearest
    /// last): the rightmost, or with `recursive` the first outside `from`
    /// from the right. A hop naming no address (`None`: unreadable,
    /// `unknown`) stops the walk at the last address found.
    fn walk(&self, peer: IpAddr, hops: &[Option<IpAddr>]) -> IpAddr {
        let mut found = peer;
        for hop in hops.iter().rev() {
            let Some(ip) = hop else {
                return found;
            };
            found = ip.to_canonical();
            if !self.recursive || !self.trusted(found) {
                return found;
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ri(recursive: bool) -> RealIp {
        RealIp {
            from: vec![
                parse_cidr("127.0.0.1").unwrap(),
                parse_cidr("10.0.0.0/8").unwrap(),
            ],
            source: Source::Header(HeaderName::from_static("x-forwarded-for")),
            recursive,
        }
    }

    fn h(xff: &str) -> Fields {
        let mut m = http::HeaderMap::new();
        m.insert("x-forwarded-for", xff.parse().unwrap());
        Fields::Map(m)
    }

    #[test]
    fn untrusted_peers_are_never_believed() {
        let peer: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(ri(true).resolve(peer, &h("1.2.3.4")), peer);
    }

    #[test]
    fn rightmost_without_recursion() {
        let peer = "127.0.0.1".parse().unwrap();
        assert_eq!(
            ri(false).resolve(peer, &h("1.2.3.4, 10.0.0.5")),
            "10.0.0.5".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn recursion_skips_trusted_hops() {
        let peer = "127.0.0.1".parse().unwrap();
        assert_eq!(
            ri(true).resolve(peer, &h("6.6.6.6, 1.2.3.4, 10.0.0.5")),
            "1.2.3.4".parse::<IpAddr>().unwrap()
        );
        // all trusted: the leftmost
        assert_eq!(
            ri(true).resolve(peer, &h("10.1.1.1, 10.0.0.5")),
            "10.1.1.1".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn x_real_ip() {
        let r = RealIp {
            source: Source::Header(HeaderName::from_static("x-real-ip")),
            ..ri(false)
        };
        let mut m = http::HeaderMap::new();
        m.insert("x-real-ip", "203.0.113.9".parse().unwrap());
        assert_eq!(
            r.resolve("127.0.0.1".parse().unwrap(), &Fields::Map(m)),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn proxy_protocol_source_follows_the_header_from_trusted_peers_only() {
        let r = RealIp {
            source: Source::ProxyProtocol,
            ..ri(false)
        };
        let pp = Addresses {
            source: "[::ffff:192.0.2.7]:5555".parse().unwrap(),
            destination: "198.51.100.1:443".parse().unwrap(),
        };
        let lb: SocketAddr = "10.1.2.3:40000".parse().unwrap();
        let empty = Fields::Map(http::HeaderMap::new());
        // Address and port both follow; a mapped address reads as IPv4.
        assert_eq!(
            r.client(lb, Some(&pp), &empty),
            "192.0.2.7:5555".parse::<SocketAddr>().unwrap()
        );
        // No header (LOCAL, UNKNOWN): the connection's own.
        assert_eq!(r.client(lb, None, &empty), lb);
        // An untrusted peer's header names nobody; nor do fields.
        let stranger: SocketAddr = "203.0.113.1:1".parse().unwrap();
        assert_eq!(r.client(stranger, Some(&pp), &h("1.2.3.4")), stranger);
        assert_eq!(r.client(lb, None, &h("1.2.3.4")), lb);
    }

    #[test]
    fn forwarded_walks_for_nodes_through_trusted_proxies() {
        let r = |recursive| RealIp {
            source: Source::Forwarded,
            ..ri(recursive)
        };
        let fwd = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert("forwarded", v.parse().unwrap());
            Fields::Map(m)
        };
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let chain = fwd("for=6.6.6.6, for=\"[2001:db8::1]:80\";proto=https, for=10.0.0.5");
        assert_eq!(r(false).resolve(peer, &chain), ip("10.0.0.5"));
        assert_eq!(r(true).resolve(peer, &chain), ip("2001:db8::1"));
        // `unknown` stops the walk at the last trusted hop.
        let unknown = fwd("for=6.6.6.6, for=unknown, for=10.0.0.5");
        assert_eq!(r(true).resolve(peer, &unknown), ip("10.0.0.5"));
        assert_eq!(r(false).resolve(peer, &fwd("for=_hidden")), peer);
        // A broken element names nobody: the walk stops before it.
        let broken = fwd("for=1.2.3.4;for=5.6.7.8, for=203.0.113.9");
        assert_eq!(r(false).resolve(peer, &broken), ip("203.0.113.9"));
        let broken = fwd("for=1.2.3.4;for=5.6.7.8, for=10.0.0.7");
        assert_eq!(r(true).resolve(peer, &broken), ip("10.0.0.7"));
        // An untrusted peer: the peer.
        let stranger = ip("203.0.113.1");
        assert_eq!(r(true).resolve(stranger, &chain), stranger);
    }

    #[test]
    fn a_client_entry_that_is_not_text_does_not_hide_its_proxies_entries() {
        let mut m = http::HeaderMap::new();
        let v = http::HeaderValue::from_bytes(b"\xff\xfe, 203.0.113.9").unwrap();
        m.insert("x-forwarded-for", v);
        let peer = "127.0.0.1".parse().unwrap();
        assert_eq!(
            ri(false).resolve(peer, &Fields::Map(m)),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
    }
}
