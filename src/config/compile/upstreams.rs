//! The upstream groups of a new configuration: each resolved (a host name
//! into one server per address, as nginx at start and reload), and the
//! previous generation's group kept, with its health and balancing state,
//! when its definition and addresses are unchanged.

use super::super::compiled::CompileError;
use super::super::spec::{Level, UpstreamSpec};
use super::super::values::ProxyPass;
use crate::config::Config;
use crate::upstream::group::{Conditions, Group, NextUpstream};
use std::sync::Arc;

pub(super) fn groups(
    specs: Vec<UpstreamSpec>,
    previous: Option<&Config>,
) -> Result<Vec<Arc<Group>>, CompileError> {
    specs
        .into_iter()
        .map(|s| {
            let new = Group::new(s.def, s.hash_key)?;
            let old = previous
                .into_iter()
                .flat_map(|p| &p.upstreams)
                .find(|o| o.same(&new));
            Ok(match old {
                Some(o) => o.clone(),
                None => Arc::new(new),
            })
        })
        .collect()
}

/// The group `pp` names: its host is a group's name (nginx compares
/// without case) and it has no port (validation refused one).
pub(super) fn named(groups: &[Arc<Group>], pp: &ProxyPass) -> Option<Arc<Group>> {
    if pp.authority.port().is_some() {
        return None;
    }
    let host = pp.host();
    groups
        .iter()
        .find(|g| g.name().eq_ignore_ascii_case(host))
        .cloned()
}

/// A location's `proxy_next_upstream*`, nginx's defaults filled in.
pub(super) fn next_upstream(eff: &Level) -> NextUpstream {
    NextUpstream {
        conditions: eff.proxy_next_upstream.unwrap_or(Conditions::DEFAULT),
        tries: eff.proxy_next_upstream_tries.unwrap_or(0),
        timeout: eff.proxy_next_upstream_timeout.filter(|t| !t.is_zero()),
    }
}
