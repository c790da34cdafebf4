//! HTTP/3's own metrics: `sluice_http3_floods` (connections cut for a
//! flood of one kind, with `H3_EXCESSIVE_LOAD`) and
//! `sluice_http3_protocol_errors` (connections closed for breaking HTTP/3
//! or QPACK, by error code), so that an attack shows as a rate and not
//! only as log lines.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The label of `sluice_http3_floods`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: &'static str,
}

/// The label of `sluice_http3_protocol_errors`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorCode {
    code: &'static str,
}

pub(super) struct Http3 {
    floods: Family<Kind, Counter>,
    protocol_errors: Family<ErrorCode, Counter>,
}

impl Http3 {
    pub(super) fn register(registry: &mut Registry) -> Http3 {
        let floods = Family::<Kind, Counter>::default();
        registry.register(
            "sluice_http3_floods",
            "HTTP/3 connections closed with H3_EXCESSIVE_LOAD for a flood, by kind",
            floods.clone(),
        );
        let protocol_errors = Family::<ErrorCode, Counter>::default();
        registry.register(
            "sluice_http3_protocol_errors",
            "HTTP/3 connections closed for a protocol error of the client's, by error code",
            protocol_errors.clone(),
        );
        Http3 {
            floods,
            protocol_errors,
        }
    }

    pub(super) fn flood(&self, kind: &'static str) {
        self.floods.get_or_create(&Kind { kind }).inc();
    }

    pub(super) fn protocol_error(&self, code: &'static str) {
        self.protocol_errors
            .get_or_create(&ErrorCode { code })
            .inc();
    }
}
