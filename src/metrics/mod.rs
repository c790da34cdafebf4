//! Prometheus metrics, served on the admin listener at `/metrics`.
//!
//! Counters are bumped on the request path by one small call each
//! ([`Metrics::response`], [`Metrics::upstream_error`], …); per-zone values
//! (decisions, states tracked, evictions, Redis errors) live with the zones
//! as plain atomics and are read from the current configuration at scrape
//! time. Labels are bounded by the configuration: zone names,
//! outcomes, error kinds, status codes — never a client key.

mod admin;
pub mod grpc;
mod http2;
mod http3;
mod protocols;
mod proxy_protocol;
mod responses;
mod syslog;
mod upstreams;

pub use admin::AdminResult;
use admin::register_admin;
use http2::Http2;
use http3::Http3;
pub use protocols::{Protocol, ProtocolCounts, QUIC_RESULTS};
use responses::{AtomicHistogram, StatusCounts};

use crate::config::Config;
use crate::limiter::{LimitReqStatus, Store};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Direction {
    direction: &'static str,
}

/// Tunnels (connections switched to another protocol by the upstream's
/// 101): opened, open now, bytes each way. The byte counters are taken
/// out of their family once, so that counting costs one atomic add.
struct Tunnels {
    opened: Counter,
    open: Gauge,
    to_client: Counter,
    to_upstream: Counter,
}

impl Tunnels {
    fn register(registry: &mut Registry) -> Tunnels {
        let opened = Counter::default();
        registry.register(
            "sluice_tunnels_opened",
            "Tunnels opened: upgrade requests (WebSocket, …) the upstream answered 101",
            opened.clone(),
        );
        let open = Gauge::default();
        registry.register("sluice_tunnels_active", "Tunnels open", open.clone());
        let bytes = Family::<Direction, Counter>::default();
        registry.register(
            "sluice_tunnel_bytes",
            "Bytes passed through tunnels, by direction (to_client, to_upstream)",
            bytes.clone(),
        );
        let counter = |direction| bytes.get_or_create(&Direction { direction }).clone();
        Tunnels {
            opened,
            open,
            to_client: counter("to_client"),
            to_upstream: counter("to_upstream"),
        }
    }
}

/// Why a request to an upstream failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamError {
    /// No connection (refused, unreachable): 502.
    Connect,
    /// `proxy_connect_timeout`, `proxy_send_timeout` or `proxy_read_timeout`
    /// passed: 504.
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
    upstream_errors: Family<Kind, Counter>,
    responses: StatusCounts,
    duration: AtomicHistogram,
    reloads: Family<Outcome, Counter>,
    last_reload_ok: Gauge,
    connections: Gauge,
    /// Connections closed at once because a worker had
    /// `worker_connections` open.
    refused: Counter,
    /// TLS handshakes of client connections, by result.
    handshakes: Family<Outcome, Counter>,
    tunnels: Tunnels,
    /// HTTP/2 floods and parked connections.
    http2: Http2,
    /// HTTP/3 floods and protocol errors.
    http3: Http3,
    proxy_headers: proxy_protocol::ProxyHeaders,
    /// gRPC calls by the status they ended with.
    grpc: grpc::GrpcCalls,
    /// Admin listener requests by result.
    admin: Family<Outcome, Counter>,
    /// Requests and connections by protocol; QUIC handshakes.
    protocols: protocols::Protocols,
}

/// Series that exist from the start, so that rate() sees their first
/// increase.
fn from_the_start(upstream_errors: &Family<Kind, Counter>, reloads: &Family<Outcome, Counter>) {
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
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let upstream_errors = Family::<Kind, Counter>::default();
        registry.register(
            "sluice_upstream_errors",
            "Failed requests to upstreams by kind (connect, timeout, other)",
            upstream_errors.clone(),
        );
        let responses = StatusCounts::default();
        registry.register_collector(Box::new(responses.clone()));
        let duration = AtomicHistogram::default();
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
        from_the_start(&upstream_errors, &reloads);
        let connections = Gauge::default();
        registry.register(
            "sluice_connections_active",
            "Client connections open",
            connections.clone(),
        );
        let refused = Counter::default();
        registry.register(
            "sluice_connections_refused",
            "Client connections closed as soon as accepted because their worker had worker_connections open",
            refused.clone(),
        );
        let handshakes = Family::<Outcome, Counter>::default();
        registry.register(
            "sluice_tls_handshakes",
            "TLS handshakes of client connections by result (ok, failed, timeout)",
            handshakes.clone(),
        );
        for result in ["ok", "failed", "timeout"] {
            drop(handshakes.get_or_create(&Outcome { result }));
        }
        let tunnels = Tunnels::register(&mut registry);
        let http2 = Http2::register(&mut registry);
        let admin = register_admin(&mut registry);
        let protocols = protocols::Protocols::default();
        registry.register_collector(Box::new(protocols.clone()));
        Metrics {
            admin,
            protocols,
            http2,
            http3: Http3::register(&mut registry),
            proxy_headers: proxy_protocol::ProxyHeaders::register(&mut registry),
            grpc: grpc::GrpcCalls::register(&mut registry),
            refused,
            handshakes,
            tunnels,
            registry,
            upstream_errors,
            responses,
            duration,
            reloads,
            last_reload_ok,
            connections,
        }
    }

    /// One admin listener request answered.
    pub fn admin_request(&self, result: AdminResult) {
        self.admin
            .get_or_create(&Outcome {
                result: result.label(),
            })
            .inc();
    }

    pub fn upstream_error(&self, kind: UpstreamError) {
        self.upstream_errors
            .get_or_create(&Kind { kind: kind.label() })
            .inc();
    }

    /// A response was sent: its status and how long it took.
    pub fn response(&self, status: u16, elapsed: Duration) {
        self.responses.inc(status);
        self.duration.observe(elapsed);
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

    /// A request's head arrived over `protocol` (refused ones too).
    pub fn request(&self, protocol: Protocol) {
        self.protocols.request(protocol);
    }

    /// The connection holding `slot` speaks `protocol`: counted among
    /// that protocol's open connections until it closes (and once among
    /// those accepted, however often it is resumed).
    pub fn speaks(&self, slot: &mut crate::connlimit::WorkerSlot, protocol: Protocol) {
        self.protocols.speaks(slot, protocol);
    }

    /// A QUIC handshake ended (`ok`, `failed`, `timeout`), or a Retry was
    /// sent before one (`retry`): [`QUIC_RESULTS`].
    pub fn quic_handshake(&self, result: &'static str) {
        self.protocols.quic_handshake(result);
    }

    /// Requests and connections of each protocol now.
    pub fn by_protocol(&self) -> [ProtocolCounts; 3] {
        self.protocols.counts()
    }

    /// QUIC handshakes by result, and Retry packets sent.
    pub fn quic_handshakes(&self) -> [(&'static str, u64); QUIC_RESULTS.len()] {
        self.protocols.quic_handshakes()
    }

    /// A client connection's TLS handshake ended: `ok`, `failed` or `timeout`.
    pub fn tls_handshake(&self, result: &'static str) {
        self.handshakes.get_or_create(&Outcome { result }).inc();
    }

    /// An HTTP/2 connection was closed for a flood of `frame` frames.
    pub fn h2_flood(&self, frame: &'static str) {
        self.http2.flood(frame);
    }

    /// An HTTP/3 connection was closed for a flood of `kind`.
    pub fn h3_flood(&self, kind: &'static str) {
        self.http3.flood(kind);
    }

    /// An HTTP/3 connection was closed for the client's protocol error
    /// `code` (its name: `H3_FRAME_UNEXPECTED`, …).
    pub fn h3_protocol_error(&self, code: &'static str) {
        self.http3.protocol_error(code);
    }

    /// HTTP/2 connections parked now: `+1` when one is, `-1` when it wakes
    /// or ends.
    pub fn h2_parked(&self, change: i64) {
        self.http2.parked.inc_by(change);
    }

    /// A PROXY protocol header was read (or not): one of
    /// [`proxy_protocol::RESULTS`].
    pub fn proxy_header(&self, result: &'static str) {
        self.proxy_headers.count(result);
    }

    /// The counters of gRPC calls by status (a call counts itself when
    /// it ends: see [`grpc`]).
    pub fn grpc_calls(&self) -> &grpc::GrpcCalls {
        &self.grpc
    }

    pub fn connection_refused(&self) {
        self.refused.inc();
    }

    /// A tunnel opened (its 101 was sent).
    pub fn tunnel_opened(&self) {
        self.tunnels.opened.inc();
        self.tunnels.open.inc();
    }

    pub fn tunnel_closed(&self) {
        self.tunnels.open.dec();
    }

    /// Bytes a tunnel passed on, as they go.
    pub fn tunnel_bytes(&self, to_client: u64, to_upstream: u64) {
        if to_client > 0 {
            self.tunnels.to_client.inc_by(to_client);
        }
        if to_upstream > 0 {
            self.tunnels.to_upstream.inc_by(to_upstream);
        }
    }

    /// Tunnels open now.
    #[cfg(test)]
    pub fn tunnels(&self) -> i64 {
        self.tunnels.open.get()
    }

    /// Connections open now.
    pub fn connections(&self) -> i64 {
        self.connections.get()
    }

    /// The text exposition: the counters, then the zones of `rt`.
    pub fn render(&self, rt: &Config) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.registry);
        let mut zones = Registry::default();
        zones.register_collector(Box::new(Zones::of(rt)));
        zones.register_collector(Box::new(ConnZones::of(rt)));
        zones.register_collector(Box::new(upstreams::Upstreams::of(rt)));
        zones.register_collector(Box::new(syslog::SyslogMessages));
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
    /// `sluice_limit_req_zone_info`'s labels: the algorithm, and the rate
    /// as `rate` is written (`10r/10s`).
    algorithm: &'static str,
    rate: String,
    states: usize,
    capacity: usize,
    evictions: u64,
    /// Redis zones: failed decisions, decisions made by `on_error` instead,
    /// and forgiven keys heard.
    store: Option<(u64, u64, u64)>,
    /// Redis zones with a rejection cache: refusals it answered (since
    /// start), and the entries it holds now.
    cache: Option<(u64, usize)>,
    /// Decisions by status, in [`LimitReqStatus::ALL`] order.
    decisions: [u64; 5],
}

impl Zones {
    fn of(rt: &Config) -> Zones {
        Zones(
            rt.zones
                .iter()
                .map(|z| {
                    let store = &z.limiter.store;
                    let m = store.memory();
                    let remote = match &**store {
                        Store::Memory(_) => None,
                        Store::Redis(r) => Some((
                            r.stats.errors.load(Ordering::Relaxed),
                            r.stats.fallbacks.load(Ordering::Relaxed),
                            r.stats.invalidations.load(Ordering::Relaxed),
                        )),
                    };
                    let cache = match (&**store, &z.limiter.reject_cache) {
                        (Store::Redis(r), Some(c)) => {
                            Some((r.stats.cache_hits.load(Ordering::Relaxed), c.len()))
                        }
                        _ => None,
                    };
                    let policy = &z.limiter.policy;
                    ZoneValues {
                        name: z.name().to_string(),
                        algorithm: policy.algorithm.name(),
                        rate: crate::limiter::algorithm::rate_text(policy.count, policy.period_ms),
                        states: store.len(),
                        capacity: m.capacity(),
                        evictions: m.evictions(),
                        store: remote,
                        cache,
                        decisions: LimitReqStatus::ALL.map(|s| z.limiter.counts.get(s)),
                    }
                })
                .collect(),
        )
    }
}

impl Collector for Zones {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (zones, e) = (&self.0, &mut encoder);
        self.encode_info(e)?;
        self.encode_decisions(e)?;
        per_zone(
            e,
            "sluice_limit_req_zone_states",
            "Client states (keys) a zone tracks now.",
            MetricType::Gauge,
            zones,
            |z| Some(ConstGauge::new(z.states as i64)),
        )?;
        per_zone(
            e,
            "sluice_limit_req_zone_capacity",
            "Client states a zone's size holds before the least recently used is evicted.",
            MetricType::Gauge,
            zones,
            |z| Some(ConstGauge::new(z.capacity as i64)),
        )?;
        per_zone(
            e,
            "sluice_limit_req_zone_evictions",
            "States evicted from a full zone (their excess is forgotten), since the zone was created.",
            MetricType::Counter,
            zones,
            |z| Some(ConstCounter::new(z.evictions)),
        )?;
        per_zone(
            e,
            "sluice_limit_req_store_errors",
            "Redis zones: decisions Redis failed to make (error or timeout), since start.",
            MetricType::Counter,
            zones,
            |z| z.store.map(|(errors, _, _)| ConstCounter::new(errors)),
        )?;
        per_zone(
            e,
            "sluice_limit_req_store_fallbacks",
            "Redis zones: decisions made by on_error instead of Redis, since start.",
            MetricType::Counter,
            zones,
            |z| {
                z.store
                    .map(|(_, fallbacks, _)| ConstCounter::new(fallbacks))
            },
        )?;
        per_zone(
            e,
            "sluice_limit_req_invalidations",
            "Redis zones: keys forgiven on any instance (DELETE …/keys/KEY) that this instance heard of and forgot, since start.",
            MetricType::Counter,
            zones,
            |z| z.store.map(|(_, _, heard)| ConstCounter::new(heard)),
        )?;
        per_zone(
            e,
            "sluice_limit_req_cache_hits",
            "Redis zones: rejections answered by this instance's rejection cache, without Redis, since start.",
            MetricType::Counter,
            zones,
            |z| z.cache.map(|(hits, _)| ConstCounter::new(hits)),
        )?;
        per_zone(
            e,
            "sluice_limit_req_cache_entries",
            "Redis zones: refused keys this instance's rejection cache holds now (expired ones until replaced).",
            MetricType::Gauge,
            zones,
            |z| z.cache.map(|(_, entries)| ConstGauge::new(entries as i64)),
        )
    }
}

impl Zones {
    /// `sluice_limit_req_zone_info`: 1 per zone, labelled with what it is,
    /// so that a dashboard can join the other series on `zone`.
    fn encode_info(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "sluice_limit_req_zone_info",
            "A zone's algorithm and rate (always 1).",
            None,
            MetricType::Gauge,
        )?;
        for z in &self.0 {
            let l = [
                ("zone", z.name.clone()),
                ("algorithm", z.algorithm.to_string()),
                ("rate", z.rate.clone()),
            ];
            ConstGauge::new(1i64).encode(family.encode_family(&l)?)?;
        }
        Ok(())
    }

    /// `sluice_limit_req_requests`: one series per zone and status.
    fn encode_decisions(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "sluice_limit_req_requests",
            "Requests by zone and $limit_req_status (passed, delayed, rejected, delayed_dry_run, rejected_dry_run), counted for the zone that decided",
            None,
            MetricType::Counter,
        )?;
        for z in &self.0 {
            for (status, n) in LimitReqStatus::ALL.iter().zip(z.decisions) {
                let l = [
                    ("zone", z.name.clone()),
                    ("status", status.label().to_string()),
                ];
                ConstCounter::new(n).encode(family.encode_family(&l)?)?;
            }
        }
        Ok(())
    }
}

/// One family labelled by zone: `value` of each zone that has one (the
/// descriptor is written even when none has, so the family is always listed).
fn per_zone<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &'static str,
    help: &str,
    metric_type: MetricType,
    zones: &[ZoneValues],
    value: impl Fn(&ZoneValues) -> Option<M>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for z in zones {
        if let Some(v) = value(z) {
            let l = [("zone", z.name.clone())];
            v.encode(family.encode_family(&l)?)?;
        }
    }
    Ok(())
}

/// Per conn zone values read at scrape time: decisions (passed, rejected,
/// rejected_dry_run), rejections because the zone was full, keys held now.
#[derive(Debug)]
struct ConnZones(Vec<(String, [u64; 3], u64, usize)>);

impl ConnZones {
    fn of(rt: &Config) -> ConnZones {
        ConnZones(
            rt.conn_zones
                .iter()
                .map(|z| {
                    let c = &z.counts;
                    (
                        z.name.to_string(),
                        [
                            c.passed.load(Ordering::Relaxed),
                            c.rejected.load(Ordering::Relaxed),
                            c.rejected_dry_run.load(Ordering::Relaxed),
                        ],
                        c.full.load(Ordering::Relaxed),
                        z.keys(),
                    )
                })
                .collect(),
        )
    }
}

impl Collector for ConnZones {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        {
            let mut family = encoder.encode_descriptor(
                "sluice_limit_conn_requests",
                "Requests by conn zone and $limit_conn_status (passed, rejected, rejected_dry_run); a request passed counts in every zone it was counted in, a rejected one in the zone that refused",
                None,
                ConstCounter::new(0u64).metric_type(),
            )?;
            for (name, counts, _, _) in &self.0 {
                for (status, n) in ["passed", "rejected", "rejected_dry_run"]
                    .iter()
                    .zip(counts)
                {
                    let l = [("zone", name.clone()), ("status", status.to_string())];
                    ConstCounter::new(*n).encode(family.encode_family(&l)?)?;
                }
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "sluice_limit_conn_zone_full",
                "Requests a conn zone refused because it had no room for a new key (dry run included).",
                None,
                ConstCounter::new(0u64).metric_type(),
            )?;
            for (name, _, full, _) in &self.0 {
                let l = [("zone", name.clone())];
                ConstCounter::new(*full).encode(family.encode_family(&l)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "sluice_limit_conn_zone_keys",
                "Keys with requests being processed in a conn zone now.",
                None,
                ConstGauge::new(0i64).metric_type(),
            )?;
            for (name, _, _, keys) in &self.0 {
                let l = [("zone", name.clone())];
                ConstGauge::new(*keys as i64).encode(family.encode_family(&l)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
