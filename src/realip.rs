//! nginx's realip module: take the client address from a header, but only
//! when the connection comes from a trusted proxy.
//!
//! `X-Forwarded-For` is never trusted by default: without `[real_ip]`, the
//! client is the TCP peer. With it, a peer inside `from` may name the client
//! in `header`; `recursive` walks `X-Forwarded-For` from the right past every
//! trusted address (nginx's `real_ip_recursive on`), otherwise the rightmost
//! entry is taken.

use crate::http1::Fields;
use crate::http1::fields::as_str;
use http::HeaderName;
use ipnet::IpNet;
use std::net::IpAddr;

#[derive(Clone, Debug)]
pub struct RealIp {
    /// `set_real_ip_from`.
    pub from: Vec<IpNet>,
    /// `real_ip_header`: `X-Forwarded-For`, `X-Real-IP` or another header.
    pub header: HeaderName,
    /// `real_ip_recursive`.
    pub recursive: bool,
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

    /// The client address for a connection from `peer` with `headers`.
    pub fn resolve(&self, peer: IpAddr, headers: &Fields) -> IpAddr {
        if !self.trusted(peer) {
            return peer;
        }
        let values: Vec<&str> = headers.get_all(&self.header).filter_map(as_str).collect();
        if values.is_empty() {
            return peer;
        }
        if self.header != "x-forwarded-for" {
            return values[0]
                .trim()
                .parse::<IpAddr>()
                .map(|ip| ip.to_canonical())
                .unwrap_or(peer);
        }
        let list: Vec<&str> = values
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let mut found = peer;
        for entry in list.iter().rev() {
            let Ok(ip) = entry.parse::<IpAddr>() else {
                // nginx stops at an entry it cannot parse.
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
            header: HeaderName::from_static("x-forwarded-for"),
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
            header: HeaderName::from_static("x-real-ip"),
            ..ri(false)
        };
        let mut m = http::HeaderMap::new();
        m.insert("x-real-ip", "203.0.113.9".parse().unwrap());
        assert_eq!(
            r.resolve("127.0.0.1".parse().unwrap(), &Fields::Map(m)),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
    }
}
