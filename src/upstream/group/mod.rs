//! Upstream groups: nginx's `upstream NAME { server …; }` as
//! `[upstreams.NAME]`, with its balancers and passive health.
//!
//! [`balance`] is the pure core (nginx's choices on plain data, `now`
//! passed in); a [`Group`] is one compiled group: its servers (a host name
//! resolved into one server per address at load, as nginx), its balancer,
//! and the state requests share behind one small lock. The state is the
//! process's, shared by the worker threads: sluice behaves as nginx with
//! one worker process, or with a `zone` (without one, each nginx worker
//! keeps its own). A group whose definition and addresses are unchanged
//! by a reload is the same `Arc`, its state kept.

mod balance;
mod crc32;
mod next;
#[cfg(test)]
mod tests;

pub use balance::{Attempt, Method, Outcome, PeerId};
pub use next::{Conditions, NextUpstream};

use balance::{Balancer, PeerConf, State};
use http::uri::Authority;
use parking_lot::Mutex;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// nginx's defaults for a `server` line.
pub const DEFAULT_MAX_FAILS: u32 = 1;
pub const DEFAULT_FAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// One `servers` entry as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerDef {
    /// `IP:port`, `host:port`, or without the port (80).
    pub address: String,
    pub weight: u32,
    pub max_fails: u32,
    pub fail_timeout: Duration,
    pub backup: bool,
    pub down: bool,
}

/// `[upstreams.NAME]` as written: what a reload compares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDef {
    pub name: String,
    pub servers: Vec<ServerDef>,
    pub method: Method,
    /// The `hash` key's source (for `hash` and `consistent`).
    pub hash: Option<String>,
    /// `keepalive`: idle connections kept per worker thread for the group.
    pub keepalive: Option<usize>,
}

/// One server address of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The address, `127.0.0.1:8081`: `$upstream_addr`, the logs'
    /// `upstream:` and the metrics' `server` label.
    pub name: String,
    /// What is connected to.
    pub authority: Authority,
    /// The `address` it came from, as written.
    pub server: String,
}

/// A host name of a group that does not resolve.
#[derive(Debug, thiserror::Error)]
#[error("host not found in upstream \"{address}\" in upstream \"{group}\"{}", .reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
pub struct ResolveError {
    pub group: String,
    pub address: String,
    pub reason: Option<String>,
}

/// A compiled group.
pub struct Group {
    pub def: GroupDef,
    /// The `hash` key, parsed.
    pub hash_key: Option<crate::vars::Template>,
    pub primary: Vec<Peer>,
    pub backup: Vec<Peer>,
    balancer: Balancer,
    state: Mutex<State>,
    /// Time zero of the state's milliseconds.
    epoch: tokio::time::Instant,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("def", &self.def).finish()
    }
}

/// `address` → its socket addresses: an IP address as is, a host name
/// through the system's resolver; port 80 when none is written.
pub fn resolve(group: &str, address: &str) -> Result<Vec<SocketAddr>, ResolveError> {
    let fail = |reason: Option<String>| ResolveError {
        group: group.to_string(),
        address: address.to_string(),
        reason,
    };
    if let Ok(a) = address.parse::<SocketAddr>() {
        return Ok(vec![a]);
    }
    if let Ok(ip) = address.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, 80)]);
    }
    let with_port = if split_has_port(address) {
        address.to_string()
    } else {
        format!("{address}:80")
    };
    let mut out: Vec<SocketAddr> = Vec::new();
    for a in with_port
        .to_socket_addrs()
        .map_err(|e| fail(Some(e.to_string())))?
    {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    if out.is_empty() {
        return Err(fail(None));
    }
    Ok(out)
}

/// `host:port` (digits after the last colon).
fn split_has_port(a: &str) -> bool {
    a.rsplit_once(':').is_some_and(|(h, p)| {
        !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
    })
}

impl Group {
    /// Resolve `def`'s addresses and make its balancer.
    pub fn new(
        def: GroupDef,
        hash_key: Option<crate::vars::Template>,
    ) -> Result<Group, ResolveError> {
        let mut primary = (Vec::new(), Vec::new());
        let mut backup = (Vec::new(), Vec::new());
        for (i, s) in def.servers.iter().enumerate() {
            let first = def
                .servers
                .iter()
                .position(|o| o.address == s.address)
                .unwrap_or(i);
            for addr in resolve(&def.name, &s.address)? {
                let name = addr.to_string();
                let Ok(authority) = name.parse::<Authority>() else {
                    continue;
                };
                let conf = PeerConf {
                    weight: i64::from(s.weight.max(1)),
                    max_fails: s.max_fails,
                    fail_timeout: s.fail_timeout.as_millis() as u64,
                    down: s.down,
                    server: first,
                };
                let peer = Peer {
                    name,
                    authority,
                    server: s.address.clone(),
                };
                let tier = if s.backup { &mut backup } else { &mut primary };
                tier.0.push(conf);
                tier.1.push(peer);
            }
        }
        let names: Vec<&str> = def.servers.iter().map(|s| s.address.as_str()).collect();
        let balancer = Balancer::new(def.method, primary.0, backup.0, &names);
        let state = Mutex::new(balancer.fresh_state());
        Ok(Group {
            def,
            hash_key,
            primary: primary.1,
            backup: backup.1,
            balancer,
            state,
            epoch: tokio::time::Instant::now(),
        })
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// `keepalive`, for the pool: the group told apart by its address
    /// (unique while it serves).
    pub fn keepalive(&self) -> Option<super::Keepalive> {
        let idle = self.def.keepalive?;
        Some(super::Keepalive {
            group: std::ptr::from_ref(self) as usize,
            idle,
        })
    }

    /// The same group, to a reload: same definition, same addresses.
    pub fn same(&self, other: &Group) -> bool {
        self.def == other.def && self.primary == other.primary && self.backup == other.backup
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn peer(&self, p: PeerId) -> &Peer {
        if p.backup {
            &self.backup[p.index]
        } else {
            &self.primary[p.index]
        }
    }

    /// A request's walk over the servers (see [`Balancer::start`]).
    pub fn start(&self, key: Vec<u8>, max_tries: usize) -> Attempt {
        self.balancer.start(key, max_tries)
    }

    /// The next server for `a`, held as serving the request until the
    /// [`Lease`] is dropped; `None`: no live upstreams.
    pub fn get(self: &Arc<Self>, a: &mut Attempt) -> Option<Lease> {
        let now = self.now();
        let peer = self.balancer.get(&mut self.state.lock(), a, now)?;
        Some(Lease {
            group: self.clone(),
            peer,
        })
    }

    /// Every server with its counts and condition, primary ones first
    /// (for the metrics and `sluice check`).
    pub fn servers(&self) -> Vec<ServerStatus<'_>> {
        let now = self.now();
        let st = self.state.lock();
        let ids = (0..self.primary.len())
            .map(|index| PeerId {
                backup: false,
                index,
            })
            .chain((0..self.backup.len()).map(|index| PeerId {
                backup: true,
                index,
            }));
        ids.map(|p| {
            let s = st.peer(p);
            ServerStatus {
                peer: self.peer(p),
                requests: s.requests,
                failures: s.failures,
                condition: self.balancer.condition(&st, p, now),
            }
        })
        .collect()
    }
}

/// One server of a group as the metrics report it.
pub struct ServerStatus<'a> {
    pub peer: &'a Peer,
    pub requests: u64,
    pub failures: u64,
    /// `up`, `unavailable`, `down` or `backup`.
    pub condition: &'static str,
}

/// A server chosen for a request: it counts as active (least_conn's
/// measure) until this is dropped.
pub struct Lease {
    group: Arc<Group>,
    peer: PeerId,
}

impl Lease {
    /// Which server (for [`Group::peer`]).
    pub fn id(&self) -> PeerId {
        self.peer
    }

    /// How the request went (see [`Balancer::free`]); `true`: the server
    /// has just been made unavailable.
    pub fn free(&self, a: &mut Attempt, outcome: Outcome) -> bool {
        let now = self.group.now();
        let g = &self.group;
        g.balancer
            .free(&mut g.state.lock(), a, self.peer, outcome, now)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let g = &self.group;
        g.balancer.release(&mut g.state.lock(), self.peer);
    }
}
