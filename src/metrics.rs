//! Prometheus metrics, served on the admin listener at `/metrics`.
//!
//! Counters are bumped on the request path by one small call each
//! ([`Metrics::record`], [`Metrics::upstream_error`], …); per-zone gauges
//! (states tracked, evictions) are read from the current configuration at
//! scrape time. Labels are bounded by the configuration: zone names,
//! outcomes, error kinds, status codes — never a client key.

use crate::limiter::Store;
use crate::runtime::Runtime;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

/// The `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZoneStatus {
    zone: String,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZoneKind {
    zone: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Code {
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    result: &'static str,
}

/// Why a request to an upstream failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamError {
    /// No connection (refused, unreachable, `proxy_connect_timeout`): 502.
    Connect,
    /// No response header within `proxy_read_timeout`: 504.
    Timeout,
    /// Anything else (connection closed early, bad response): 502.
    Other,
}

impl UpstreamError {
    fn label(self) -> &'static str {
        match self {
            UpstreamError::Connect => "connect",
            UpstreamError::Timeout => "timeout",
            UpstreamError::Other => "other",
        }
    }
}

/// Every metric sluice keeps.
pub struct Metrics {
    registry: Registry,
    limit_req: Family<ZoneStatus, Counter>,
    upstream_errors: Family<Kind, Counter>,
    store_errors: Family<ZoneKind, Counter>,
    responses: Family<Code, Counter>,
    duration: Histogram,
    reloads: Family<Outcome, Counter>,
    last_reload_ok: Gauge,
    connections: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let limit_req = Family::<ZoneStatus, Counter>::default();
        registry.register(
            "sluice_limit_req_requests",
            "Requests by zone and $limit_req_status (passed, delayed, rejected, delayed_dry_run, rejected_dry_run), counted for the zone that decided",
            limit_req.clone(),
        );
        let upstream_errors = Family::<Kind, Counter>::default();
        registry.register(
            "sluice_upstream_errors",
            "Failed requests to upstreams by kind (connect, timeout, other)",
            upstream_errors.clone(),
        );
        let store_errors = Family::<ZoneKind, Counter>::default();
        registry.register(
            "sluice_limit_req_store_errors",
            "Errors of remote zone stores (Redis) by zone and kind",
            store_errors.clone(),
        );
        let responses = Family::<Code, Counter>::default();
        registry.register(
            "sluice_http_responses",
            "Responses sent to clients by status code",
            responses.clone(),
        );
        let duration = Histogram::new([
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
        ]);
        registry.register(
            "sluice_http_request_duration_seconds",
            "Time from a request's header to its response header, delays included",
            duration.clone(),
        );
        let reloads = Family::<Outcome, Counter>::default();
        registry.register(
            "sluice_config_reloads",
            "Configuration reloads by result (ok, failed)",
            reloads.clone(),
        );
        let last_reload_ok = Gauge::default();
        last_reload_ok.set(1);
        registry.register(
            "sluice_config_last_reload_successful",
            "1 if the last reload succeeded (or none was tried), 0 if it failed",
            last_reload_ok.clone(),
        );
        // Series that exist from the start, so that rate() sees their first increase.
        for kind in [
            UpstreamError::Connect,
            UpstreamError::Timeout,
            UpstreamError::Other,
        ] {
            drop(upstream_errors.get_or_create(&Kind { kind: kind.label() }));
        }
        for result in ["ok", "failed"] {
            drop(reloads.get_or_create(&Outcome { result }));
        }
        let connections = Gauge::default();
        registry.register(
            "sluice_connections_active",
            "Client connections open",
            connections.clone(),
        );
        Metrics {
            registry,
            limit_req,
            upstream_errors,
            store_errors,
            responses,
            duration,
            reloads,
            last_reload_ok,
            connections,
        }
    }

    /// Count a limiting decision: `status` is `$limit_req_status`; `-` (no
    /// limit applied) is not counted.
    pub fn record(&self, zone: &str, status: &str) {
        let status = match status {
            "PASSED" => "passed",
            "DELAYED" => "delayed",
            "REJECTED" => "rejected",
            "DELAYED_DRY_RUN" => "delayed_dry_run",
            "REJECTED_DRY_RUN" => "rejected_dry_run",
            _ => return,
        };
        self.limit_req
            .get_or_create(&ZoneStatus {
                zone: zone.to_string(),
                status,
            })
            .inc();
    }

    pub fn upstream_error(&self, kind: UpstreamError) {
        self.upstream_errors
            .get_or_create(&Kind { kind: kind.label() })
            .inc();
    }

    /// A remote zone store failed (`kind`: e.g. `timeout`, `connection`).
    /// For the Redis backend.
    pub fn store_error(&self, zone: &str, kind: &'static str) {
        self.store_errors
            .get_or_create(&ZoneKind {
                zone: zone.to_string(),
                kind,
            })
            .inc();
    }

    /// A response was sent: its status and how long it took.
    pub fn response(&self, status: u16, elapsed: Duration) {
        self.responses.get_or_create(&Code { code: status }).inc();
        self.duration.observe(elapsed.as_secs_f64());
    }

    pub fn reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.reloads.get_or_create(&Outcome { result }).inc();
        self.last_reload_ok.set(i64::from(ok));
    }

    pub fn connection_opened(&self) {
        self.connections.inc();
    }

    pub fn connection_closed(&self) {
        self.connections.dec();
    }

    /// Connections open now.
    pub fn connections(&self) -> i64 {
        self.connections.get()
    }

    /// The text exposition: the counters, then the zones of `rt`.
    pub fn render(&self, rt: &Runtime) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.registry);
        let mut zones = Registry::default();
        zones.register_collector(Box::new(Zones::of(rt)));
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &zones);
        let _ = prometheus_client::encoding::text::encode_eof(&mut out);
        out
    }
}

/// Per-zone values read at scrape time.
#[derive(Debug)]
struct Zones(Vec<ZoneValues>);

#[derive(Debug)]
struct ZoneValues {
    name: String,
    states: usize,
    capacity: Option<usize>,
    evictions: Option<u64>,
}

impl Zones {
    fn of(rt: &Runtime) -> Zones {
        Zones(
            rt.zones
                .iter()
                .map(|z| {
                    let store = &z.limiter.store;
                    #[allow(unreachable_patterns)] // remote stores have no local bound
                    let (capacity, evictions) = match &**store {
                        Store::Memory(m) => (Some(m.capacity()), Some(m.evictions())),
                        _ => (None, None),
                    };
                    ZoneValues {
                        name: z.name().to_string(),
                        states: store.len(),
                        capacity,
                        evictions,
                    }
                })
                .collect(),
        )
    }
}

impl Collector for Zones {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let label = |z: &ZoneValues| [("zone", z.name.clone())];
        {
            let mut family = encoder.encode_descriptor(
                "sluice_limit_req_zone_states",
                "Client states (keys) a zone tracks now.",
                None,
                ConstGauge::new(0i64).metric_type(),
            )?;
            for z in &self.0 {
                let l = label(z);
                ConstGauge::new(z.states as i64).encode(family.encode_family(&l)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "sluice_limit_req_zone_capacity",
                "Client states a zone's size holds before the least recently used is evicted.",
                None,
                ConstGauge::new(0i64).metric_type(),
            )?;
            for z in &self.0 {
                if let Some(c) = z.capacity {
                    let l = label(z);
                    ConstGauge::new(c as i64).encode(family.encode_family(&l)?)?;
                }
            }
        }
        let mut family = encoder.encode_descriptor(
            "sluice_limit_req_zone_evictions",
            "States evicted from a full zone (their excess is forgotten), since the zone was created.",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for z in &self.0 {
            if let Some(e) = z.evictions {
                let l = label(z);
                ConstCounter::new(e).encode(family.encode_family(&l)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_zones() {
        let spec = crate::config::parse_str(
            "t.toml",
            r#"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/s"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/"
return = { status = 200 }
"#,
        )
        .unwrap();
        let rt = Runtime::build(spec, None).unwrap();
        let m = Metrics::new();
        m.record("z", "PASSED");
        m.record("z", "PASSED");
        m.record("z", "REJECTED_DRY_RUN");
        m.record("", "-");
        m.upstream_error(UpstreamError::Timeout);
        m.response(200, Duration::from_millis(3));
        m.reload(false);
        let text = m.render(&rt);
        for line in [
            "sluice_limit_req_requests_total{zone=\"z\",status=\"passed\"} 2",
            "sluice_limit_req_requests_total{zone=\"z\",status=\"rejected_dry_run\"} 1",
            "sluice_upstream_errors_total{kind=\"timeout\"} 1",
            "sluice_http_responses_total{code=\"200\"} 1",
            "sluice_http_request_duration_seconds_count 1",
            "sluice_config_reloads_total{result=\"failed\"} 1",
            "sluice_config_last_reload_successful 0",
            "sluice_limit_req_zone_states{zone=\"z\"} 0",
            "sluice_limit_req_zone_evictions_total{zone=\"z\"} 0",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(text.matches("# EOF").count(), 1);
    }
}
