//! A `geo` of 100 000 networks, as people load from country lists
//! (`cargo bench --bench geo`; `scripts/bench.sh --only geo` adds nginx's
//! load time of the same table beside sluice's):
//!
//! - load: the TOML text through sluice's configuration stages (what
//!   `sluice check` and a reload pay), and the table alone built from
//!   parsed networks;
//! - lookup: one address, random over the whole IPv4 space and inside the
//!   listed networks, and IPv6;
//! - memory: the bytes the built table keeps (printed first).

use criterion::{Criterion, criterion_group};
use sluice::vars::geo::{Entry, GeoBuilder};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

pub const NETWORKS: usize = 100_000;

/// xorshift: the same table every run.
fn rng(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// 100 000 networks: 90 % IPv4 of /12 to /32 (country lists are mostly
/// /16 to /24), 10 % IPv6 /32 to /64; values are 250 country codes.
fn networks() -> Vec<(String, String)> {
    let mut next = rng(0x9e37_79b9_7f4a_7c15);
    (0..NETWORKS)
        .map(|i| {
            let code = format!("c{}", next() % 250);
            let net = if i % 10 == 9 {
                let a = Ipv6Addr::from((next() as u128) << 64);
                format!("{}/{}", a, 32 + next() % 33)
            } else {
                let a = Ipv4Addr::from(next() as u32);
                format!("{}/{}", a, 12 + next() % 21)
            };
            (net, code)
        })
        .collect()
}

fn toml(nets: &[(String, String)]) -> String {
    let mut s = String::from("[geos.country]\ndefault = \"zz\"\n[geos.country.networks]\n");
    for (n, v) in nets {
        s.push_str(&format!("\"{n}\" = \"{v}\"\n"));
    }
    s.push_str("[[servers]]\nlisten = \"127.0.0.1:1\"\n[[servers.locations]]\npath = \"/\"\nreturn = { status = 200, body = \"$country\" }\n");
    s
}

fn build(nets: &[(String, String)]) -> sluice::vars::geo::Geo {
    let mut b = GeoBuilder::new(None, "zz");
    for (n, v) in nets {
        b.add(Entry::parse(n, false).expect("network"), v);
    }
    b.build()
}

fn memory(nets: &[(String, String)]) {
    let before = counting::live();
    let g = build(nets);
    let after = counting::live();
    let (v4, v6) = g.intervals();
    println!(
        "geo of {NETWORKS} networks: {v4} IPv4 and {v6} IPv6 intervals, {:.2} MB kept ({:.1} B a network)",
        (after - before) as f64 / 1e6,
        (after - before) as f64 / NETWORKS as f64
    );
    black_box(g);
}

fn benches(c: &mut Criterion) {
    let nets = networks();
    let text = toml(&nets);
    let mut g = c.benchmark_group("geo 100k");
    g.sample_size(10);
    g.bench_function("load: configuration stages", |b| {
        b.iter(|| sluice::config::parse_str("geo.toml", black_box(&text)).expect("valid"))
    });
    g.bench_function("load: table from parsed networks", |b| {
        b.iter(|| build(black_box(&nets)))
    });
    g.finish();

    let geo = build(&nets);
    let mut next = rng(42);
    let random: Vec<IpAddr> = (0..4096)
        .map(|_| IpAddr::V4(Ipv4Addr::from(next() as u32)))
        .collect();
    let listed: Vec<IpAddr> = nets
        .iter()
        .filter(|(n, _)| !n.contains(':'))
        .take(4096)
        .map(|(n, _)| n.split('/').next().unwrap_or("").parse().expect("address"))
        .collect();
    let v6: Vec<IpAddr> = (0..4096)
        .map(|_| IpAddr::V6(Ipv6Addr::from((next() as u128) << 64)))
        .collect();
    let mut g = c.benchmark_group("geo 100k lookup");
    for (name, addrs) in [
        ("random IPv4", &random),
        ("listed IPv4", &listed),
        ("IPv6", &v6),
    ] {
        let mut i = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(geo.lookup(addrs[i]).len())
            })
        });
    }
    g.finish();
}

criterion_group!(geo_benches, benches);

fn main() {
    memory(&networks());
    geo_benches();
    Criterion::default().configure_from_args().final_summary();
}
