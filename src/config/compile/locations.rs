//! A location: its limits bound to the compiled zones, every setting
//! resolved through nginx's inheritance (location → server → http) with
//! nginx's defaults, and its access log opened. A `grpc_pass` location is
//! compiled from its `grpc_*` settings, in the same fields.

use super::super::compiled::{
    CompileError, DEFAULT_CLIENT_BODY_BUFFER_SIZE, DEFAULT_CLIENT_MAX_BODY_SIZE,
    DEFAULT_LIMIT_REQ_STATUS, DEFAULT_TIMEOUT, LimitReqs, Location, RequestBuffering,
};
use super::super::spec::{Action, Level, LocationSpec, PathMatch};
use super::Zones;
use super::logs::AccessLogs;
use crate::connlimit::{self, ConnLimit};
use crate::errlog::Severity;
use crate::upstream::UpstreamTimeouts;
use std::sync::Arc;

/// Compile `l` under its server's effective level; returns how it matches
/// (for [`super::super::compiled::Locations`]) with the location.
pub(super) fn location(
    l: LocationSpec,
    server: &Level,
    zones: &Zones,
    logs: &mut AccessLogs,
) -> Result<(PathMatch, Location), CompileError> {
    let eff = l.effective(server);
    let grpc = l.is_grpc();
    let prefix = match &l.rule {
        PathMatch::Exact(p) => Some(p.clone()),
        PathMatch::Prefix { prefix, .. } => Some(prefix.clone()),
        PathMatch::Regex(_) => None,
    };
    let status = eff.status.unwrap_or(DEFAULT_LIMIT_REQ_STATUS);
    let limits = eff.limit_req.as_deref().unwrap_or_default().iter();
    let limits = limits.map(|ls| (zones.req[ls.zone].clone(), ls.burst, ls.delay));
    let ratelimit_headers = eff.ratelimit_headers.unwrap_or_default();
    let limits = LimitReqs::new(limits.collect(), status, ratelimit_headers);
    let upstream_tls = match &l.action {
        Action::Proxy(pp) if pp.https => Some(zones.tls.location(&eff, pp, &l.path)?),
        _ => None,
    };
    let group = match &l.action {
        Action::Proxy(pp) => super::upstreams::named(zones.groups, pp),
        Action::Return(_) => None,
    };
    let location = Location {
        path: l.path,
        prefix,
        limits,
        ratelimit_headers,
        limit_req_status: status,
        log_level: eff.log_level.unwrap_or(Severity::Error),
        dry_run: eff.dry_run.unwrap_or(false),
        conn_limits: conn_limits(&eff, zones),
        conn_status: eff.conn_status.unwrap_or(connlimit::DEFAULT_STATUS),
        conn_log_level: eff.conn_log_level.unwrap_or(Severity::Error),
        conn_dry_run: eff.conn_dry_run.unwrap_or(false),
        error_pages: eff.error_pages.clone().unwrap_or_default(),
        access: eff.access.clone().unwrap_or_default(),
        grpc_answers: grpc_answers(&eff, &l.action),
        action: l.action,
        upstream_tls,
        timeouts: UpstreamTimeouts {
            proxy_connect: eff.proxy_connect_timeout.unwrap_or(DEFAULT_TIMEOUT),
            proxy_send: eff.proxy_send_timeout.unwrap_or(DEFAULT_TIMEOUT),
            proxy_read: eff.proxy_read_timeout.unwrap_or(DEFAULT_TIMEOUT),
            client_body: eff.client_body_timeout.unwrap_or(DEFAULT_TIMEOUT),
        },
        request_buffering: request_buffering(&eff),
        client_max_body_size: eff
            .client_max_body_size
            .unwrap_or(DEFAULT_CLIENT_MAX_BODY_SIZE),
        access_log: logs.open(&eff.access_log)?,
        error_log: logs.error_log(&eff.error_log)?,
        headers: super::super::compiled::Headers::of(&eff.headers, grpc),
        group,
        next_upstream: super::upstreams::next_upstream(&eff),
        compress: eff.compress.compile(),
    };
    Ok((l.rule, location))
}

/// A `grpc_pass` location answers gRPC calls in gRPC unless `grpc_errors
/// = "http"`.
fn grpc_answers(eff: &Level, action: &Action) -> bool {
    use crate::respond::grpc::GrpcErrors;
    matches!(action, Action::Proxy(pp) if pp.grpc) && eff.grpc_errors != Some(GrpcErrors::Http)
}

fn conn_limits(eff: &Level, zones: &Zones) -> Vec<ConnLimit> {
    eff.limit_conn
        .iter()
        .flatten()
        .map(|cl| ConnLimit {
            zone: zones.conn[cl.zone].clone(),
            conn: cl.conn,
        })
        .collect()
}

/// `proxy_request_buffering` (on unless turned off), with where a body
/// waits.
fn request_buffering(eff: &Level) -> Option<RequestBuffering> {
    eff.proxy_request_buffering
        .unwrap_or(true)
        .then(|| RequestBuffering {
            in_memory: eff
                .client_body_buffer_size
                .unwrap_or(DEFAULT_CLIENT_BODY_BUFFER_SIZE),
            temp_dir: eff
                .client_body_temp_path
                .clone()
                .unwrap_or_else(|| Arc::new(std::env::temp_dir())),
        })
}
