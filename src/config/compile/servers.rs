//! A server: its settings (the http level's where it has none), its
//! locations in nginx's lookup structure, and the implicit `location /` of
//! a server with `proxy_pass`.

use super::super::compiled::{
    CompileError, DEFAULT_KEEPALIVE_TIMEOUT, DEFAULT_TIMEOUT, Locations, Server,
};
use super::super::spec::{Action, Level, LocationSpec, PathMatch, ServerSpec};
use super::logs::AccessLogs;
use super::{Zones, locations};
use crate::http1::HeadRules;
use std::sync::Arc;

pub(super) fn server(
    s: ServerSpec,
    http: &Level,
    zones: &Zones,
    logs: &mut AccessLogs,
) -> Result<Arc<Server>, CompileError> {
    let level = s.level.inherit(http);
    let mut specs = s.locations;
    if let Some(implicit) = implicit_root(s.proxy_pass, &specs) {
        specs.push(implicit);
    }
    let mut locations = Locations::default();
    for l in specs {
        let (rule, loc) = locations::location(l, &level, zones, logs)?;
        locations.push(rule, loc);
    }
    locations.finish();
    Ok(Arc::new(Server {
        listen: s.listen,
        name: s.server_name,
        locations,
        client_header_timeout: level.client_header_timeout.unwrap_or(DEFAULT_TIMEOUT),
        keepalive_timeout: level.keepalive_timeout.unwrap_or(DEFAULT_KEEPALIVE_TIMEOUT),
        send_timeout: level.send_timeout.unwrap_or(DEFAULT_TIMEOUT),
        error_pages: level.error_pages.clone().unwrap_or_default(),
        access_log: logs.open(&level.access_log)?,
        real_ip: level.real_ip.clone(),
        head_rules: head_rules(&level),
        // Off on a plain listener unless asked for.
        http2: s.http2.unwrap_or(false),
    }))
}

/// A server with `proxy_pass` and no `/` location proxies everything else,
/// like an implicit `location /` (which inherits the server's settings).
fn implicit_root(
    proxy_pass: Option<super::super::values::ProxyPass>,
    locations: &[LocationSpec],
) -> Option<LocationSpec> {
    let proxy_pass = proxy_pass?;
    let has_root = locations
        .iter()
        .any(|l| matches!(&l.rule, PathMatch::Prefix { prefix, .. } if prefix == "/"));
    (!has_root).then(|| LocationSpec {
        path: "/".into(),
        rule: PathMatch::Prefix {
            prefix: "/".into(),
            stop_regex: false,
        },
        level: Level::default(),
        action: Action::Proxy(proxy_pass),
    })
}

/// What a request head may be: `underscores_in_headers`,
/// `ignore_invalid_headers`, `large_client_header_buffers`.
fn head_rules(level: &Level) -> HeadRules {
    let d = HeadRules::default();
    HeadRules {
        underscores_in_headers: level
            .underscores_in_headers
            .unwrap_or(d.underscores_in_headers),
        ignore_invalid_headers: level
            .ignore_invalid_headers
            .unwrap_or(d.ignore_invalid_headers),
        large_header_buffers: level
            .large_client_header_buffers
            .unwrap_or(d.large_header_buffers),
    }
}
