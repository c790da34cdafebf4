//! The `grpc_*` settings of a level: nginx's `ngx_http_grpc_module` keeps
//! its own set beside the proxy module's (`grpc_set_header`,
//! `grpc_read_timeout`, `grpc_ssl_verify`, …), each inherited http →
//! server → location on its own, and a location whose content is
//! `grpc_pass` is served with them, never with the `proxy_*` ones (and a
//! `proxy_pass` location the other way round).
//!
//! Why a copy of the proxy fields and not a second [`Level`]: the rest of
//! the configuration (the compiler, `sluice check`, the upstream client)
//! reads one set of fields; [`Level::for_grpc`] puts the `grpc_*` values in
//! those slots for a `grpc_pass` location, so everything downstream reads
//! the same compiled `Location` fields whichever module the location uses.

use super::spec::{HeaderLevel, Level, LocationSpec};
use super::upstream_tls::ProxySsl;
use crate::upstream::group::Conditions;
use std::time::Duration;

/// A level's `grpc_*` keys; `None`: not set here, inherited.
#[derive(Clone, Default)]
pub(crate) struct GrpcLevel {
    /// `grpc_connect_timeout`.
    pub connect_timeout: Option<Duration>,
    /// `grpc_read_timeout`.
    pub read_timeout: Option<Duration>,
    /// `grpc_send_timeout`.
    pub send_timeout: Option<Duration>,
    /// `grpc_next_upstream`.
    pub next_upstream: Option<Conditions>,
    /// `grpc_next_upstream_tries`: 0 = no limit.
    pub next_upstream_tries: Option<usize>,
    /// `grpc_next_upstream_timeout`: zero = no limit.
    pub next_upstream_timeout: Option<Duration>,
    /// `grpc_ssl_*`: how `grpcs://` upstreams are spoken to.
    pub ssl: ProxySsl,
    /// `grpc_set_header`, `grpc_hide_header`, `grpc_pass_header` in the
    /// `proxy_*` slots (`add_header` is the level's own, never here).
    pub headers: HeaderLevel,
}

impl GrpcLevel {
    /// These settings with unset values taken from `parent`.
    pub(crate) fn inherit(&self, parent: &GrpcLevel) -> GrpcLevel {
        GrpcLevel {
            connect_timeout: self.connect_timeout.or(parent.connect_timeout),
            read_timeout: self.read_timeout.or(parent.read_timeout),
            send_timeout: self.send_timeout.or(parent.send_timeout),
            next_upstream: self.next_upstream.or(parent.next_upstream),
            next_upstream_tries: self.next_upstream_tries.or(parent.next_upstream_tries),
            next_upstream_timeout: self.next_upstream_timeout.or(parent.next_upstream_timeout),
            ssl: self.ssl.inherit(&parent.ssl),
            headers: self.headers.inherit(&parent.headers),
        }
    }
}

impl Level {
    /// An effective level as a `grpc_pass` location uses it: the `grpc_*`
    /// values in the `proxy_*` slots, the `proxy_*` ones dropped (nginx's
    /// two modules, two sets), and the request body never buffered whole
    /// (`proxy_request_buffering` is the proxy module's). `self` is already
    /// inherited.
    pub(crate) fn for_grpc(&self) -> Level {
        let g = &self.grpc;
        Level {
            proxy_connect_timeout: g.connect_timeout,
            proxy_read_timeout: g.read_timeout,
            proxy_send_timeout: g.send_timeout,
            proxy_next_upstream: g.next_upstream,
            proxy_next_upstream_tries: g.next_upstream_tries,
            proxy_next_upstream_timeout: g.next_upstream_timeout,
            proxy_ssl: g.ssl.clone(),
            // nginx's grpc module always streams the request body
            // (`request_body_no_buffering`): calls stream both ways.
            proxy_request_buffering: Some(false),
            headers: HeaderLevel {
                proxy_set_header: g.headers.proxy_set_header.clone(),
                add_header: self.headers.add_header.clone(),
                proxy_hide_header: g.headers.proxy_hide_header.clone(),
                proxy_pass_header: g.headers.proxy_pass_header.clone(),
            },
            ..self.clone()
        }
    }
}

impl LocationSpec {
    /// The location's settings under its server's effective level
    /// (`server`), as its content handler reads them: the `grpc_*` ones for
    /// `grpc_pass`, else the `proxy_*` ones.
    pub(crate) fn effective(&self, server: &Level) -> Level {
        let eff = self.level.inherit(server);
        if self.is_grpc() { eff.for_grpc() } else { eff }
    }

    /// Whether the location's content is `grpc_pass`.
    pub(crate) fn is_grpc(&self) -> bool {
        matches!(&self.action, super::spec::Action::Proxy(pp) if pp.grpc)
    }
}
