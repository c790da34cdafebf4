//! Counts by the protocol a client speaks — HTTP/1.1, HTTP/2, HTTP/3 —
//! so that an operator sees how much of the traffic each carries and what
//! each costs: requests, connections accepted and open, and QUIC's own
//! handshakes. One atomic per value, bumped once per request or per
//! connection; the open connections are counted by each connection's
//! [`WorkerSlot`], which lives exactly as long as the connection does
//! (parked, resumed, handed on), so no close path can forget them.

use crate::connlimit::WorkerSlot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The protocol of a client connection (HTTP/1.0 is counted with 1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
    Http3,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Http1, Protocol::Http2, Protocol::Http3];

    /// Its name in the metrics and the status API: its ALPN identifier
    /// (`h2` also for h2c).
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::Http2 => "h2",
            Protocol::Http3 => "h3",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How a QUIC handshake ended, or the Retry sent before it.
pub const QUIC_RESULTS: [&str; 4] = ["ok", "failed", "timeout", "retry"];

/// The counters (cloned into the registry, which reads them at scrape).
#[derive(Clone, Debug, Default)]
pub(super) struct Protocols(Arc<Cells>);

#[derive(Debug, Default)]
struct Cells {
    requests: [AtomicU64; 3],
    accepted: [AtomicU64; 3],
    open: [Arc<AtomicI64>; 3],
    quic: [AtomicU64; QUIC_RESULTS.len()],
}

/// One protocol's values now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtocolCounts {
    pub protocol: Protocol,
    pub requests: u64,
    pub accepted: u64,
    pub open: i64,
}

impl Protocols {
    pub(super) fn request(&self, p: Protocol) {
        self.0.requests[p.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The connection of `slot` speaks `p` (again, for one resumed).
    pub(super) fn speaks(&self, slot: &mut WorkerSlot, p: Protocol) {
        if slot.counted_in(&self.0.open[p.index()]) {
            self.0.accepted[p.index()].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `result` is one of [`QUIC_RESULTS`]; another is not counted.
    pub(super) fn quic_handshake(&self, result: &str) {
        if let Some(i) = QUIC_RESULTS.iter().position(|r| *r == result) {
            self.0.quic[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn counts(&self) -> [ProtocolCounts; 3] {
        Protocol::ALL.map(|protocol| {
            let i = protocol.index();
            ProtocolCounts {
                protocol,
                requests: self.0.requests[i].load(Ordering::Relaxed),
                accepted: self.0.accepted[i].load(Ordering::Relaxed),
                open: self.0.open[i].load(Ordering::Relaxed),
            }
        })
    }

    pub(super) fn quic_handshakes(&self) -> [(&'static str, u64); QUIC_RESULTS.len()] {
        let mut out = QUIC_RESULTS.map(|r| (r, 0));
        for (o, n) in out.iter_mut().zip(&self.0.quic) {
            o.1 = n.load(Ordering::Relaxed);
        }
        out
    }
}

impl Collector for Protocols {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counts = self.counts();
        let e = &mut encoder;
        by_protocol(
            e,
            "sluice_http_requests",
            "Requests received by the client's protocol (http/1.1, h2, h3): every head read, refused ones too",
            &counts,
            |c| ConstCounter::new(c.requests),
        )?;
        by_protocol(
            e,
            "sluice_http_connections",
            "Client connections by the protocol they came to speak (after TLS's ALPN or HTTP/2's preface)",
            &counts,
            |c| ConstCounter::new(c.accepted),
        )?;
        by_protocol(
            e,
            "sluice_http_connections_active",
            "Client connections open now by protocol (those still in their TLS handshake or before their first bytes in none)",
            &counts,
            |c| ConstGauge::new(c.open),
        )?;
        let mut family = e.encode_descriptor(
            "sluice_quic_handshakes",
            "QUIC handshakes by result (ok, failed, timeout), and Retry packets sent (retry)",
            None,
            MetricType::Counter,
        )?;
        for (result, n) in self.quic_handshakes() {
            let l = [("result", result)];
            ConstCounter::new(n).encode(family.encode_family(&l)?)?;
        }
        Ok(())
    }
}

/// One family labelled by protocol.
fn by_protocol<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &'static str,
    help: &str,
    counts: &[ProtocolCounts; 3],
    value: impl Fn(&ProtocolCounts) -> M,
) -> Result<(), std::fmt::Error> {
    let metric_type = value(&counts[0]).metric_type();
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for c in counts {
        let l = [("protocol", c.protocol.label())];
        value(c).encode(family.encode_family(&l)?)?;
    }
    Ok(())
}
