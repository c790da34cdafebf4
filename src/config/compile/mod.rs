//! Compile: [`Spec`] → the [`Config`] that serves, in parts: the zones
//! (which keep their states across a reload, as nginx's shared zones do),
//! the access logs (files kept open across reloads), the servers and their
//! locations (nginx's inheritance resolved, defaults filled in).
//!
//! Problems found here are not about the file's text (that was validated)
//! but about the running process: a zone whose key changed under the same
//! name, an access log that cannot be opened, a Redis client that cannot
//! be built.

mod locations;
mod logs;
mod servers;
mod upstreams;
mod zones;

use super::compiled::{CompileError, Config, Zone};
use super::spec::Spec;
use crate::connlimit::ConnZone;
use std::sync::Arc;

/// The zones locations may use, by the index the spec names them with,
/// and the generation's upstream TLS client configurations.
struct Zones<'a> {
    req: &'a [Arc<Zone>],
    conn: &'a [Arc<ConnZone>],
    tls: &'a super::upstream_tls::ClientConfigs,
    /// The upstream groups `proxy_pass` may name.
    groups: &'a [Arc<crate::upstream::group::Group>],
}

impl Config {
    /// Compile `spec`. Zones of `previous` whose name, key and size are
    /// unchanged keep their states (a new rate applies to them at once), as
    /// nginx does on reload.
    pub fn compile(spec: Spec, previous: Option<&Config>) -> Result<Config, CompileError> {
        let redis = zones::redis_backend(&spec, previous)?;
        let top_keys = spec.ops.admin.as_ref().map_or(0, |a| a.top_keys);
        let widest = zones::widest_bursts(&spec);
        let req = zones::zones(spec.zones, previous, redis.as_ref(), top_keys, &widest)?;
        let conn = zones::conn_zones(spec.conn_zones, previous)?;
        let top_errors = (&spec.http.error_log, spec.ops.error_log_level);
        let format = (spec.log_format, spec.ops.log_escape);
        let mut logs = logs::AccessLogs::new(format, top_errors, previous)?;
        let tls = super::upstream_tls::ClientConfigs::default();
        let groups = upstreams::groups(spec.upstreams, previous)?;
        let zones = Zones {
            req: &req,
            conn: &conn,
            tls: &tls,
            groups: &groups,
        };
        let mut named = Vec::new();
        for s in spec.servers {
            let (listen, names, options) = (s.listen, s.names.clone(), s.options);
            let server = servers::server(s, &spec.http, &zones, &mut logs)?;
            named.push((listen, server, names, options));
        }
        let addresses = servers::addresses(&named);
        let servers: Vec<Arc<super::compiled::ServerBlock>> =
            named.into_iter().map(|(_, s, _, _)| s).collect();
        let main = logs.main_error_log();
        let one_error_log = servers.iter().all(|s| {
            Arc::ptr_eq(&s.error_log, &main)
                && s.locations.iter().all(|l| Arc::ptr_eq(&l.error_log, &main))
        });
        Ok(Config {
            zones: req,
            conn_zones: conn,
            servers,
            addresses,
            error_log: main,
            one_error_log,
            sinks: logs.into_sinks(),
            ops: spec.ops,
            redis,
            upstreams: groups,
            vars: spec.vars,
        })
    }
}
