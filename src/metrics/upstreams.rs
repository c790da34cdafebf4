//! Per upstream server of each `[upstreams.NAME]` group, read from the
//! current configuration at scrape time: requests sent, failures (those
//! that count toward `max_fails`), and its state. Labels: `upstream` (the
//! group's name) and `server` (the address, as `$upstream_addr` prints it).

use crate::config::Config;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The states a server may be in, one series each (1 for the current).
const STATES: [&str; 4] = ["up", "unavailable", "down", "backup"];

/// One server's values.
#[derive(Debug)]
struct ServerValues {
    upstream: String,
    server: String,
    requests: u64,
    failures: u64,
    state: &'static str,
}

#[derive(Debug)]
pub(super) struct Upstreams(Vec<ServerValues>);

impl Upstreams {
    pub(super) fn of(rt: &Config) -> Upstreams {
        let mut out = Vec::new();
        for g in &rt.upstreams {
            for s in g.servers() {
                out.push(ServerValues {
                    upstream: g.name().to_string(),
                    server: s.peer.name.clone(),
                    requests: s.requests,
                    failures: s.failures,
                    state: s.condition,
                });
            }
        }
        Upstreams(out)
    }
}

impl Collector for Upstreams {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let labels = |s: &ServerValues| {
            [
                ("upstream", s.upstream.clone()),
                ("server", s.server.clone()),
            ]
        };
        let mut family = encoder.encode_descriptor(
            "sluice_upstream_server_requests",
            "Requests sent to an upstream group's server (each try counts)",
            None,
            MetricType::Counter,
        )?;
        for s in &self.0 {
            ConstCounter::new(s.requests).encode(family.encode_family(&labels(s))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "sluice_upstream_server_failures",
            "Tries of an upstream group's server that failed (those max_fails counts)",
            None,
            MetricType::Counter,
        )?;
        for s in &self.0 {
            ConstCounter::new(s.failures).encode(family.encode_family(&labels(s))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "sluice_upstream_server_state",
            "An upstream group's server's state: 1 for the one it is in (up, unavailable after max_fails, down as configured, backup)",
            None,
            MetricType::Gauge,
        )?;
        for s in &self.0 {
            for state in STATES {
                let [u, v] = labels(s);
                let l = [u, v, ("state", state.to_string())];
                ConstGauge::new(i64::from(s.state == state)).encode(family.encode_family(&l)?)?;
            }
        }
        Ok(())
    }
}
