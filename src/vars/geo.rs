//! nginx's `geo`: a variable whose value depends on an address — the
//! client's (after `real_ip`), or another variable's.
//!
//! Networks (or, with `ranges`, IPv4 ranges) are flattened when the
//! configuration is compiled into sorted, disjoint intervals, one table
//! for IPv4 and one for IPv6, each interval with its value. The longest
//! prefix wins (a network is painted over the shorter ones it lies in);
//! ranges are painted in the order written. A lookup is one binary search:
//! at most 32 (IPv4) or 128 (IPv6) steps however many entries, the bound
//! nginx's radix tree has, in a few flat arrays instead of a tree of
//! nodes (100 000 networks are a few megabytes, built in milliseconds).

use super::{RequestVars, Template};
use crate::realip::RealIp;
use ipnet::IpNet;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

/// A `geo`, compiled.
#[derive(Debug)]
pub struct Geo {
    pub(crate) source: Option<Template>,
    /// `proxy` and `proxy_recursive`: an address inside these takes the
    /// client from `X-Forwarded-For`.
    proxy: Option<RealIp>,
    v4: Intervals<u32>,
    v6: Intervals<u128>,
    values: Vec<Box<[u8]>>,
}

/// Sorted starts; `vals[i]` covers `starts[i]` up to the next start.
#[derive(Debug)]
struct Intervals<T> {
    starts: Vec<T>,
    vals: Vec<u32>,
}

impl<T: Copy + Ord> Intervals<T> {
    fn get(&self, x: T) -> u32 {
        let i = self.starts.partition_point(|&s| s <= x);
        self.vals[i.saturating_sub(1)]
    }
}

/// What `geo` may hold: networks, or IPv4 ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    Net(IpNet),
    /// `ranges` only: first and last address, inclusive.
    Range(Ipv4Addr, Ipv4Addr),
}

impl Entry {
    /// `10.0.0.0/8`, `::1`, or with `ranges` `10.0.0.1-10.0.0.9`.
    pub fn parse(s: &str, ranges: bool) -> Result<Entry, String> {
        if ranges {
            let (a, b) = s
                .split_once('-')
                .ok_or_else(|| format!("invalid range \"{s}\" (expected ADDRESS-ADDRESS)"))?;
            let parse = |x: &str| {
                x.trim()
                    .parse::<Ipv4Addr>()
                    .map_err(|_| format!("invalid range \"{s}\" (IPv4 addresses only)"))
            };
            let (a, b) = (parse(a)?, parse(b)?);
            if a > b {
                return Err(format!(
                    "invalid range \"{s}\" (its end is before its start)"
                ));
            }
            return Ok(Entry::Range(a, b));
        }
        crate::realip::parse_cidr(s).map(Entry::Net)
    }
}

/// A geo being built.
pub struct GeoBuilder {
    source: Option<Template>,
    proxy: Option<RealIp>,
    values: Vec<Box<[u8]>>,
    /// Each value's index in `values`.
    interned: std::collections::HashMap<Box<[u8]>, u32>,
    entries: Vec<(Entry, u32)>,
}

impl GeoBuilder {
    pub fn new(source: Option<Template>, default: &str) -> GeoBuilder {
        GeoBuilder {
            source,
            proxy: None,
            values: vec![default.as_bytes().into()],
            interned: [(default.as_bytes().into(), 0)].into(),
            entries: Vec::new(),
        }
    }

    /// `proxy` networks and `proxy_recursive`.
    pub fn proxy(&mut self, from: Vec<IpNet>, recursive: bool) {
        if !from.is_empty() {
            self.proxy = Some(RealIp {
                from,
                source: crate::realip::Source::Header(http::HeaderName::from_static(
                    "x-forwarded-for",
                )),
                recursive,
            });
        }
    }

    pub fn add(&mut self, e: Entry, value: &str) {
        let next = self.values.len() as u32;
        let v = *self.interned.entry(value.as_bytes().into()).or_insert(next);
        if v == next {
            self.values.push(value.as_bytes().into());
        }
        self.entries.push((e, v));
    }

    pub fn build(mut self) -> Geo {
        // Networks: shorter prefixes first, so that longer ones paint over
        // them; the same network twice: the later wins (a stable sort).
        // Ranges keep their order.
        self.entries.sort_by_key(|(e, _)| match e {
            Entry::Net(n) => n.prefix_len(),
            Entry::Range(..) => 0,
        });
        let mut v4 = Painter::new(u32::MAX);
        let mut v6 = Painter::new(u128::MAX);
        for &(e, v) in &self.entries {
            match e {
                Entry::Net(IpNet::V4(n)) => v4.paint(n.network().into(), n.broadcast().into(), v),
                Entry::Net(IpNet::V6(n)) => v6.paint(n.network().into(), n.broadcast().into(), v),
                Entry::Range(a, b) => v4.paint(a.into(), b.into(), v),
            }
        }
        Geo {
            source: self.source,
            proxy: self.proxy,
            v4: v4.flatten(),
            v6: v6.flatten(),
            values: self.values,
        }
    }
}

/// Intervals as a map of starts while entries are painted on.
struct Painter<T> {
    max: T,
    starts: BTreeMap<T, u32>,
}

impl<T: Copy + Ord + Default + std::ops::Add<Output = T> + From<u8>> Painter<T> {
    fn new(max: T) -> Painter<T> {
        Painter {
            max,
            starts: BTreeMap::from([(T::default(), 0)]),
        }
    }

    /// `lo..=hi` gets `v`.
    fn paint(&mut self, lo: T, hi: T, v: u32) {
        let after = (hi != self.max).then(|| {
            let next = hi + T::from(1);
            let val = self
                .starts
                .range(..=next)
                .next_back()
                .map_or(0, |(_, &v)| v);
            (next, val)
        });
        let inside: Vec<T> = self.starts.range(lo..=hi).map(|(&k, _)| k).collect();
        for k in inside {
            self.starts.remove(&k);
        }
        self.starts.insert(lo, v);
        if let Some((next, val)) = after {
            self.starts.entry(next).or_insert(val);
        }
    }

    /// The intervals, neighbours with the same value merged.
    fn flatten(self) -> Intervals<T> {
        let mut out = Intervals {
            starts: Vec::new(),
            vals: Vec::new(),
        };
        for (k, v) in self.starts {
            if out.vals.last() != Some(&v) {
                out.starts.push(k);
                out.vals.push(v);
            }
        }
        out
    }
}

impl Geo {
    /// The source's templates (for the checks of the configuration).
    pub(crate) fn templates(&self) -> impl Iterator<Item = &Template> {
        self.source.iter()
    }

    /// The value for this request.
    pub(crate) fn value(&self, req: &RequestVars, out: &mut Vec<u8>) {
        let ip = match &self.source {
            None => req.remote.ip(),
            Some(t) => {
                let mut s = Vec::new();
                t.eval(req, None, &mut s);
                // nginx looks an address it cannot read up as
                // 255.255.255.255.
                std::str::from_utf8(&s)
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(IpAddr::V4(Ipv4Addr::BROADCAST))
            }
        };
        let ip = match &self.proxy {
            Some(p) => p.resolve(ip, req.headers),
            None => ip,
        };
        out.extend_from_slice(self.lookup(ip));
    }

    /// The value of `ip` (an IPv4-mapped IPv6 address is looked up as
    /// IPv4, as nginx does).
    pub fn lookup(&self, ip: IpAddr) -> &[u8] {
        let i = match ip.to_canonical() {
            IpAddr::V4(a) => self.v4.get(a.into()),
            IpAddr::V6(a) => self.v6.get(a.into()),
        };
        &self.values[i as usize]
    }

    /// How many intervals the tables hold (IPv4, IPv6).
    pub fn intervals(&self) -> (usize, usize) {
        (self.v4.starts.len(), self.v6.starts.len())
    }

    /// `$source: N values over N IPv4 and N IPv6 intervals, default "…"`,
    /// for `sluice check`.
    pub fn describe(&self) -> String {
        let source = self.source.as_ref().map_or("$remote_addr", |t| t.source());
        let proxy = match &self.proxy {
            Some(p) => format!(
                ", proxy {}{}",
                p.from
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
                if p.recursive { " (recursive)" } else { "" }
            ),
            None => String::new(),
        };
        format!(
            "{source}: {} value(s) over {} IPv4 and {} IPv6 intervals, default \"{}\"{proxy}",
            self.values.len() - 1,
            self.v4.starts.len(),
            self.v6.starts.len(),
            String::from_utf8_lossy(&self.values[0]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(ranges: bool, entries: &[(&str, &str)]) -> Geo {
        let mut b = GeoBuilder::new(None, "dflt");
        for (e, v) in entries {
            b.add(Entry::parse(e, ranges).unwrap(), v);
        }
        b.build()
    }

    fn at(g: &Geo, ip: &str) -> String {
        String::from_utf8(g.lookup(ip.parse().unwrap()).to_vec()).unwrap()
    }

    #[test]
    fn longest_prefix_wins_whatever_the_order() {
        let g = geo(
            false,
            &[
                ("10.1.2.0/24", "c"),
                ("10.0.0.0/8", "a"),
                ("10.1.0.0/16", "b"),
                ("10.1.2.3", "d"),
                ("::1", "v6"),
                ("2001:db8::/32", "doc"),
            ],
        );
        assert_eq!(at(&g, "10.9.9.9"), "a");
        assert_eq!(at(&g, "10.1.9.9"), "b");
        assert_eq!(at(&g, "10.1.2.4"), "c");
        assert_eq!(at(&g, "10.1.2.3"), "d");
        assert_eq!(at(&g, "10.1.2.2"), "c");
        assert_eq!(at(&g, "10.1.3.0"), "b");
        assert_eq!(at(&g, "11.0.0.0"), "dflt");
        assert_eq!(at(&g, "9.255.255.255"), "dflt");
        assert_eq!(at(&g, "::1"), "v6");
        assert_eq!(at(&g, "::ffff:10.1.2.3"), "d");
        assert_eq!(at(&g, "2001:db8:1::5"), "doc");
        assert_eq!(at(&g, "2001:db9::"), "dflt");
    }

    #[test]
    fn the_edges_of_the_address_space() {
        let g = geo(false, &[("0.0.0.0/0", "all"), ("255.255.255.255", "top")]);
        assert_eq!(at(&g, "0.0.0.0"), "all");
        assert_eq!(at(&g, "255.255.255.254"), "all");
        assert_eq!(at(&g, "255.255.255.255"), "top");
        assert_eq!(at(&g, "::"), "dflt");
        let g = geo(
            false,
            &[
                ("::/0", "all6"),
                ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "t"),
            ],
        );
        assert_eq!(at(&g, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), "t");
        assert_eq!(at(&g, "::2"), "all6");
    }

    #[test]
    fn the_same_network_twice_keeps_the_later() {
        let g = geo(false, &[("10.0.0.0/8", "a"), ("10.0.0.0/8", "b")]);
        assert_eq!(at(&g, "10.0.0.1"), "b");
    }

    #[test]
    fn ranges_are_painted_in_order() {
        let g = geo(
            true,
            &[("10.0.0.0-10.0.0.255", "a"), ("10.0.0.10-10.0.0.20", "b")],
        );
        assert_eq!(at(&g, "10.0.0.9"), "a");
        assert_eq!(at(&g, "10.0.0.10"), "b");
        assert_eq!(at(&g, "10.0.0.20"), "b");
        assert_eq!(at(&g, "10.0.0.21"), "a");
        assert_eq!(at(&g, "10.0.1.0"), "dflt");
        assert!(Entry::parse("10.0.0.2-10.0.0.1", true).is_err());
        assert!(Entry::parse("::1-::2", true).is_err());
    }

    /// Against a naive longest-prefix scan, on random networks.
    #[test]
    fn agrees_with_a_linear_scan() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut nets = Vec::new();
        for i in 0..400 {
            let addr = Ipv4Addr::from((next() as u32) & 0x0fff_ffff | 0x0a00_0000);
            let len = (next() % 25) as u8 + 8;
            let net = IpNet::V4(ipnet::Ipv4Net::new(addr, len).unwrap().trunc());
            nets.push((net, format!("v{i}")));
        }
        let mut b = GeoBuilder::new(None, "d");
        for (n, v) in &nets {
            b.add(Entry::Net(*n), v);
        }
        let g = b.build();
        for _ in 0..20_000 {
            let ip = IpAddr::V4(Ipv4Addr::from((next() as u32) & 0x0fff_ffff | 0x0a00_0000));
            let want = nets
                .iter()
                .enumerate()
                .filter(|(_, (n, _))| n.contains(&ip))
                .max_by_key(|(i, (n, _))| (n.prefix_len(), *i))
                .map_or("d", |(_, (_, v))| v.as_str());
            assert_eq!(g.lookup(ip), want.as_bytes(), "{ip}");
        }
    }
}
