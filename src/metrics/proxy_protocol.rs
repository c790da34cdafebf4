//! The PROXY protocol's metric: `sluice_proxy_protocol_headers` counts
//! the headers read on `proxy_protocol` addresses by result, so that a
//! load balancer that stopped sending them (or a client reaching the
//! address around it) shows as `broken` before anyone reads the error log.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The result label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Result {
    result: &'static str,
}

/// Every result, so that each series exists from the start.
pub const RESULTS: [&str; 5] = ["client", "local", "broken", "timeout", "closed"];

/// One counter per result, taken from the family once (a count is then
/// one atomic add, no label lookup: it is paid per connection).
pub(super) struct ProxyHeaders([Counter; RESULTS.len()]);

impl ProxyHeaders {
    pub(super) fn register(registry: &mut Registry) -> ProxyHeaders {
        let family = Family::<Result, Counter>::default();
        registry.register(
            "sluice_proxy_protocol_headers",
            "PROXY protocol headers on proxy_protocol addresses by result (client: naming one; local: LOCAL, UNKNOWN or no address; broken; timeout; closed before one)",
            family.clone(),
        );
        ProxyHeaders(RESULTS.map(|result| family.get_or_create(&Result { result }).clone()))
    }

    pub(super) fn count(&self, result: &'static str) {
        if let Some(i) = RESULTS.iter().position(|r| *r == result) {
            self.0[i].inc();
        }
    }
}
