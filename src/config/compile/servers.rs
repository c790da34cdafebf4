//! A server: its settings (the http level's where it has none), its
//! locations in nginx's lookup structure, and the implicit `location /` of
//! a server with `proxy_pass`.

use super::super::address::Address;
use super::super::compiled::{
    CompileError, DEFAULT_KEEPALIVE_TIMEOUT, DEFAULT_TIMEOUT, Locations, ServerBlock, ServerTls,
};
use super::super::spec::{Action, Level, LocationSpec, PathMatch, ServerSpec, TlsSpec};
use super::super::values::{Listen, ServerName};
use super::logs::AccessLogs;
use super::{Zones, locations};
use crate::http1::HeadRules;
use std::net::SocketAddr;
use std::sync::Arc;

pub(super) fn server(
    s: ServerSpec,
    http: &Level,
    zones: &Zones,
    logs: &mut AccessLogs,
) -> Result<Arc<ServerBlock>, CompileError> {
    let level = s.level.inherit(http);
    let http2 = s.http2_on();
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
    let tls = match s.tls {
        Some(t) => Some(tls(t, http2)?),
        None => None,
    };
    Ok(Arc::new(ServerBlock {
        name: s.server_name,
        http2,
        http3: s.http3,
        quic_retry: s.quic_retry,
        ssl_early_data: s.ssl_early_data,
        tls,
        locations,
        client_header_timeout: level.client_header_timeout.unwrap_or(DEFAULT_TIMEOUT),
        keepalive_timeout: level.keepalive_timeout.unwrap_or(DEFAULT_KEEPALIVE_TIMEOUT),
        send_timeout: level.send_timeout.unwrap_or(DEFAULT_TIMEOUT),
        error_pages: level.error_pages.clone().unwrap_or_default(),
        access_log: logs.open(&level.access_log)?,
        error_log: logs.error_log(&level.error_log)?,
        real_ip: level.real_ip.clone(),
        head_rules: head_rules(&level),
        add_headers: super::super::compiled::Headers::of(&level.headers, false).add,
        compress: level.compress.compile(),
    }))
}

/// A server's TLS: its certificate (read again if the file step did not),
/// protocols and ALPN, in the configuration its handshakes use.
fn tls(t: TlsSpec, http2: bool) -> Result<ServerTls, CompileError> {
    let certificate = match t.certificate {
        Some(c) => c,
        None => crate::tls::load(&t.cert_file, &t.key_file)
            .map_err(|e| CompileError::Certificate(e.to_string()))?,
    };
    // ALPN offers `h2` (then `http/1.1`) when the server has `http2`.
    let config = crate::tls::server_config(&certificate, &t.protocols, http2)
        .map_err(CompileError::Certificate)?;
    Ok(ServerTls {
        config,
        cert_file: t.cert_file,
        key_file: t.key_file,
    })
}

/// The addresses of the servers (in the order each first appears), with
/// their servers; an address speaks TLS if one of its servers says `ssl`,
/// and expects a PROXY protocol header if one says `proxy_protocol` (as
/// nginx merges a socket's `listen` parameters).
pub(super) fn addresses(
    servers: &[(SocketAddr, Arc<ServerBlock>, Vec<ServerName>, Listen)],
) -> Vec<Address> {
    let mut order: Vec<SocketAddr> = Vec::new();
    for (listen, ..) in servers {
        if !order.contains(listen) {
            order.push(*listen);
        }
    }
    order
        .into_iter()
        .map(|listen| {
            let on: Vec<_> = servers.iter().filter(|s| s.0 == listen).collect();
            let ssl = on.iter().any(|s| s.3.ssl);
            let proxy_protocol = on.iter().any(|s| s.3.proxy_protocol);
            let quic = on.iter().any(|s| s.3.quic);
            let group: Vec<_> = on
                .iter()
                .map(|(_, s, names, o)| (s.clone(), names.clone(), o.default_server))
                .collect();
            Address::new(listen, (ssl, proxy_protocol, quic), group)
        })
        .collect()
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
