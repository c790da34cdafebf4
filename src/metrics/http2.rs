//! HTTP/2's own metrics: `sluice_http2_floods` (connections cut for a
//! flood of one frame kind) and `sluice_http2_parked` (idle connections
//! whose HTTP/2 state is let go until the client speaks again).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The frame label of `sluice_http2_floods`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Frame {
    frame: &'static str,
}

pub(super) struct Http2 {
    floods: Family<Frame, Counter>,
    pub(super) parked: Gauge,
}

impl Http2 {
    pub(super) fn register(registry: &mut Registry) -> Http2 {
        let floods = Family::<Frame, Counter>::default();
        registry.register(
            "sluice_http2_floods",
            "HTTP/2 connections closed with ENHANCE_YOUR_CALM for a flood, by frame kind",
            floods.clone(),
        );
        let parked = Gauge::default();
        registry.register(
            "sluice_http2_parked",
            "Idle HTTP/2 connections parked: their protocol state let go until the client speaks",
            parked.clone(),
        );
        Http2 { floods, parked }
    }

    pub(super) fn flood(&self, frame: &'static str) {
        self.floods.get_or_create(&Frame { frame }).inc();
    }
}
