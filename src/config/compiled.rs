//! The compiled configuration the proxy runs on: inheritance resolved, zones
//! allocated, locations in nginx's lookup structure. Built from a [`Spec`];
//! one `Config` is one consistent generation of the configuration.

use crate::accesslog::{self, AccessLog, Sinks};
use crate::config::{Backend, LocationSpec, OpsSpec, PathRule, ProxyPass, Spec};
use crate::errlog::Severity;
use crate::limiter::{Limit, MemoryZone, RedisBackend, RedisZone, Store, ZoneRef};
use crate::respond::{ErrorPages, RateLimitHeaders, ReturnSpec};
use crate::vars::{Context, LogEscape, Template};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// nginx's defaults.
pub const DEFAULT_LIMIT_REQ_STATUS: u16 = 503;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(75);
/// nginx's `client_max_body_size 1m`.
pub const DEFAULT_CLIENT_MAX_BODY_SIZE: u64 = 1024 * 1024;
/// `worker_connections` when not set: client connections one worker thread
/// keeps open. nginx's default is 512 per worker process, counting its
/// listeners and upstream connections too; sluice counts client connections
/// only, and a default that low would refuse what a small flood of idle
/// keep-alive clients (or scripts/bench.sh's 8000 idle connections) opens.
pub const DEFAULT_WORKER_CONNECTIONS: usize = 10240;
/// How long SIGTERM waits for in-flight requests (nginx has no such default;
/// Kubernetes' grace period is 30 s, so drain well inside it).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// A zone: its key and its states.
pub struct Zone {
    pub key: Template,
    /// Group IPv6 clients by this prefix length.
    pub ipv6_prefix: Option<u8>,
    /// Clients this zone never limits.
    pub exempt: Vec<ipnet::IpNet>,
    pub size: u64,
    pub limiter: Arc<ZoneRef>,
}

impl Zone {
    pub fn name(&self) -> &str {
        &self.limiter.name
    }

    /// The client address as this zone sees it: `None` when exempt, IPv6
    /// addresses cut to `ipv6_prefix`.
    pub fn client(&self, ip: IpAddr) -> Option<IpAddr> {
        let ip = ip.to_canonical();
        if self.exempt.iter().any(|n| n.contains(&ip)) {
            return None;
        }
        Some(match (ip, self.ipv6_prefix) {
            (IpAddr::V6(a), Some(p)) => {
                let mask = if p >= 128 {
                    u128::MAX
                } else {
                    !(u128::MAX >> p)
                };
                IpAddr::V6((u128::from(a) & mask).into())
            }
            _ => ip,
        })
    }
}

pub struct Config {
    pub zones: Vec<Arc<Zone>>,
    /// `[conn_zones]`, for `limit_conn`.
    pub conn_zones: Vec<Arc<crate::connlimit::ConnZone>>,
    pub servers: Vec<Arc<Server>>,
    /// Access-log files, kept open across reloads.
    pub sinks: Sinks,
    /// Process-level settings (pid file, watch, admin listener, …).
    pub ops: OpsSpec,
    /// The `[redis]` backend, when a zone uses it.
    pub redis: Option<Arc<RedisBackend>>,
}

impl Config {
    pub fn shutdown_timeout(&self) -> Duration {
        self.ops
            .shutdown_timeout
            .unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT)
    }

    /// The most client connections a worker thread keeps open.
    pub fn worker_connections(&self) -> usize {
        self.ops
            .worker_connections
            .unwrap_or(DEFAULT_WORKER_CONNECTIONS)
    }
}

pub struct Server {
    pub listen: SocketAddr,
    pub name: String,
    pub locations: Locations,
    pub client_header_timeout: Duration,
    /// Idle time allowed between requests on a connection; zero: no keep-alive.
    pub keepalive_timeout: Duration,
    /// Longest wait for the client to take more of a response.
    pub send_timeout: Duration,
    /// Error pages for answers made before a location is known (400, 404).
    pub error_pages: Arc<ErrorPages>,
    pub access_log: Option<Arc<AccessLog>>,
    /// Whose word to take for the client address.
    pub real_ip: Option<Arc<crate::realip::RealIp>>,
    /// What a request head may be (`underscores_in_headers`,
    /// `ignore_invalid_headers`, `large_client_header_buffers`).
    pub head_rules: crate::http1::HeadRules,
}

/// What a location does with a request that passed its limits.
pub enum Action {
    Proxy(ProxyPass),
    Return(ReturnSpec),
}

pub struct Location {
    /// As written in the file (`"= /api"`); for logs and `sluice check`.
    pub path: String,
    /// For prefix and exact locations, the matched prefix: nginx replaces it
    /// by `proxy_pass`'s URI part.
    pub prefix: Option<String>,
    pub limits: Vec<Limit>,
    /// The default rejection body of each limit, pre-rendered.
    pub problems: Vec<crate::respond::QuotaProblem>,
    /// The zone of each limit (its key, prefix and exemptions), parallel to `limits`.
    pub zones: Vec<Arc<Zone>>,
    pub ratelimit_headers: RateLimitHeaders,
    pub status: u16,
    pub log_level: Severity,
    pub dry_run: bool,
    /// `limit_conn`, checked after `limit_req`, and its settings.
    pub conn_limits: Vec<crate::connlimit::ConnLimit>,
    pub conn_status: u16,
    pub conn_log_level: Severity,
    pub conn_dry_run: bool,
    pub error_pages: Arc<ErrorPages>,
    pub action: Action,
    /// `proxy_connect_timeout`, `proxy_send_timeout`, `proxy_read_timeout`
    /// and `client_body_timeout`.
    pub timeouts: crate::upstream::Timeouts,
    /// Larger request bodies get 413; 0 = unlimited.
    pub client_max_body_size: u64,
    /// `proxy_request_buffering`, `client_body_buffer_size`,
    /// `client_body_temp_path`: see [`crate::client_body`].
    pub request_buffering: Option<RequestBuffering>,
    pub access_log: Option<Arc<AccessLog>>,
}

/// Where a body waits until it is whole.
pub struct RequestBuffering {
    pub in_memory: usize,
    pub temp_dir: Arc<std::path::PathBuf>,
}

/// nginx's `client_body_buffer_size` on 64-bit platforms.
pub const DEFAULT_CLIENT_BODY_BUFFER_SIZE: usize = 16 * 1024;

/// nginx's location lookup: exact, then the longest prefix (final if `^~`),
/// then regexes in file order, else the longest prefix.
pub struct Locations {
    all: Vec<Arc<Location>>,
    exact: HashMap<String, usize>,
    /// Longest first: (prefix, stops regex search, index).
    prefixes: Vec<(String, bool, usize)>,
    regexes: Vec<(regex::Regex, usize)>,
}

impl Locations {
    pub fn find(&self, path: &str) -> Option<&Arc<Location>> {
        if let Some(&i) = self.exact.get(path) {
            return Some(&self.all[i]);
        }
        let prefix = self
            .prefixes
            .iter()
            .find(|(p, _, _)| path.starts_with(p.as_str()));
        if let Some((_, true, i)) = prefix {
            return Some(&self.all[*i]);
        }
        if let Some((_, i)) = self.regexes.iter().find(|(r, _)| r.is_match(path)) {
            return Some(&self.all[*i]);
        }
        prefix.map(|(_, _, i)| &self.all[*i])
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Location>> {
        self.all.iter()
    }
}

/// Why a configuration cannot replace the running one.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error(
        "limit_req \"{zone}\" uses the \"{new}\" key while previously it used the \"{old}\" key"
    )]
    ZoneKeyChanged {
        zone: String,
        new: String,
        old: String,
    },
    #[error(
        "limit_conn_zone \"{zone}\" uses the \"{new}\" key while previously it used the \"{old}\" key"
    )]
    ConnZoneKeyChanged {
        zone: String,
        new: String,
        old: String,
    },
    #[error("open() \"{path}\" failed ({source})")]
    AccessLog {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("[redis]: {0}")]
    Redis(String),
}

impl Config {
    /// Compile `spec`. Zones of `previous` whose name, key and size are
    /// unchanged keep their states (a new rate applies to them at once), as
    /// nginx does on reload.
    pub fn compile(spec: Spec, previous: Option<&Config>) -> Result<Config, CompileError> {
        // One backend for every Redis zone; kept across a reload that does
        // not change `[redis]` (so is its connection).
        let redis = match &spec.redis {
            Some(cfg) if spec.zones.iter().any(|z| z.backend == Backend::Redis) => {
                match previous.and_then(|p| p.redis.as_ref()) {
                    Some(old) if old.config() == cfg => Some(old.clone()),
                    _ => Some(RedisBackend::new(cfg.clone()).map_err(CompileError::Redis)?),
                }
            }
            _ => None,
        };
        let mut zones = Vec::new();
        for z in spec.zones {
            let old = previous.and_then(|p| p.zones.iter().find(|o| *o.name() == *z.name));
            // A zone keeps its states if it stays in the same place.
            let same_place = |o: &Zone| match (&*o.limiter.store, z.backend, &redis) {
                (Store::Memory(_), Backend::Memory, _) => true,
                (Store::Redis(r), Backend::Redis, Some(b)) => Arc::ptr_eq(r.backend(), b),
                _ => false,
            };
            let store = match old {
                Some(o) if o.size == z.size && o.key.source() != z.key.source() => {
                    return Err(CompileError::ZoneKeyChanged {
                        zone: z.name,
                        new: z.key.source().to_string(),
                        old: o.key.source().to_string(),
                    });
                }
                Some(o) if o.size == z.size && same_place(o) => o.limiter.store.clone(),
                _ => match (z.backend, &redis) {
                    (Backend::Redis, Some(b)) => {
                        Arc::new(Store::Redis(RedisZone::new(b.clone(), &z.name, z.size)))
                    }
                    (Backend::Redis, None) => {
                        return Err(CompileError::Redis(format!(
                            "zone \"{}\" has backend = \"redis\" and there is no [redis]",
                            z.name
                        )));
                    }
                    (Backend::Memory, _) => Arc::new(Store::Memory(MemoryZone::with_size(z.size))),
                },
            };
            zones.push(Arc::new(Zone {
                key: z.key,
                ipv6_prefix: z.ipv6_prefix,
                exempt: z.exempt,
                size: z.size,
                limiter: Arc::new(ZoneRef {
                    counts: previous
                        .and_then(|p| p.zones.iter().find(|o| *o.name() == *z.name))
                        .map(|o| o.limiter.counts.clone())
                        .unwrap_or_default(),
                    name: z.name.into(),
                    rate: z.rate,
                    store,
                }),
            }));
        }

        // Conn zones with the same name and size keep their counts (and so
        // the requests in flight under the previous configuration still
        // count), as nginx keeps a shared zone across a reload.
        let mut conn_zones = Vec::new();
        for z in spec.conn_zones {
            let old = previous.and_then(|p| p.conn_zones.iter().find(|o| *o.name == *z.name));
            conn_zones.push(match old {
                Some(o) if o.size == z.size && o.key.source() != z.key.source() => {
                    return Err(CompileError::ConnZoneKeyChanged {
                        zone: z.name,
                        new: z.key.source().to_string(),
                        old: o.key.source().to_string(),
                    });
                }
                Some(o) if o.size == z.size => o.clone(),
                _ => Arc::new(crate::connlimit::ConnZone::new(&z.name, z.key, z.size)),
            });
        }

        let mut sinks = Sinks::default();
        let escape = spec.ops.log_escape;
        let format = Arc::new(
            match spec.log_format {
                Some(f) => f,
                None => Template::parse(
                    match escape {
                        LogEscape::Json => accesslog::DEFAULT_JSON_FORMAT,
                        _ => accesslog::DEFAULT_FORMAT,
                    },
                    Context::Log,
                )
                .expect("the default log formats parse"),
            }
            .with_escape(escape),
        );
        let mut access_log =
            |target: &Option<Option<String>>| -> Result<Option<Arc<AccessLog>>, CompileError> {
                let Some(Some(target)) = target else {
                    return Ok(None);
                };
                let sink = sinks
                    .get(target, previous.map(|p| &p.sinks))
                    .map_err(|source| CompileError::AccessLog {
                        path: target.clone(),
                        source,
                    })?;
                Ok(Some(Arc::new(AccessLog::new(sink, format.clone()))))
            };

        let mut servers = Vec::new();
        for s in spec.servers {
            let level = s.level.inherit(&spec.http);
            let mut locations = Locations {
                all: Vec::new(),
                exact: HashMap::new(),
                prefixes: Vec::new(),
                regexes: Vec::new(),
            };
            let mut specs: Vec<LocationSpec> = s.locations;
            // A server with proxy_pass and no "/" location proxies everything
            // else, like an implicit `location /`.
            if level.proxy_pass.is_some()
                && !specs
                    .iter()
                    .any(|l| matches!(&l.rule, PathRule::Prefix { prefix, .. } if prefix == "/"))
            {
                specs.push(LocationSpec {
                    path: "/".into(),
                    path_span: 0..0,
                    rule: PathRule::Prefix {
                        prefix: "/".into(),
                        stop_regex: false,
                    },
                    regex: None,
                    level: Default::default(),
                    ret: None,
                });
            }
            for l in specs {
                let i = locations.all.len();
                let eff = l.level.inherit(&level);
                let prefix = match &l.rule {
                    PathRule::Exact(p) => {
                        locations.exact.insert(p.clone(), i);
                        Some(p.clone())
                    }
                    PathRule::Prefix { prefix, stop_regex } => {
                        locations.prefixes.push((prefix.clone(), *stop_regex, i));
                        Some(prefix.clone())
                    }
                    PathRule::Regex { .. } => {
                        let r = l.regex.clone().expect("regex compiled at parse");
                        locations.regexes.push((r, i));
                        None
                    }
                };
                let limit_specs = eff.limit_req.clone().unwrap_or_default();
                let limits: Vec<Limit> = limit_specs
                    .iter()
                    .map(|ls| Limit {
                        zone: zones[ls.zone].limiter.clone(),
                        burst: ls.burst,
                        delay: ls.delay,
                    })
                    .collect();
                let status = eff.status.unwrap_or(DEFAULT_LIMIT_REQ_STATUS);
                let problems = limits
                    .iter()
                    .map(|l| crate::respond::QuotaProblem::new(l, status))
                    .collect();
                let limit_zones = limit_specs
                    .iter()
                    .map(|ls| zones[ls.zone].clone())
                    .collect();
                let conn_limits = eff
                    .limit_conn
                    .iter()
                    .flatten()
                    .map(|cl| crate::connlimit::ConnLimit {
                        zone: conn_zones[cl.zone].clone(),
                        conn: cl.conn,
                    })
                    .collect();
                let action = match l.ret {
                    Some(r) => Action::Return(r),
                    None => Action::Proxy(
                        eff.proxy_pass
                            .clone()
                            .expect("validated: location has proxy_pass or return"),
                    ),
                };
                locations.all.push(Arc::new(Location {
                    path: l.path,
                    prefix,
                    limits,
                    problems,
                    zones: limit_zones,
                    ratelimit_headers: eff.ratelimit_headers.unwrap_or_default(),
                    status,
                    log_level: eff.log_level.unwrap_or(Severity::Error),
                    dry_run: eff.dry_run.unwrap_or(false),
                    conn_limits,
                    conn_status: eff.conn_status.unwrap_or(crate::connlimit::DEFAULT_STATUS),
                    conn_log_level: eff.conn_log_level.unwrap_or(Severity::Error),
                    conn_dry_run: eff.conn_dry_run.unwrap_or(false),
                    error_pages: eff.error_pages.clone().unwrap_or_default(),
                    action,
                    timeouts: crate::upstream::Timeouts {
                        connect: eff.proxy_connect_timeout.unwrap_or(DEFAULT_TIMEOUT),
                        send: eff.proxy_send_timeout.unwrap_or(DEFAULT_TIMEOUT),
                        read: eff.proxy_read_timeout.unwrap_or(DEFAULT_TIMEOUT),
                        client_body: eff.client_body_timeout.unwrap_or(DEFAULT_TIMEOUT),
                    },
                    request_buffering: eff.proxy_request_buffering.unwrap_or(true).then(|| {
                        RequestBuffering {
                            in_memory: eff
                                .client_body_buffer_size
                                .unwrap_or(DEFAULT_CLIENT_BODY_BUFFER_SIZE),
                            temp_dir: eff
                                .client_body_temp_path
                                .clone()
                                .unwrap_or_else(|| Arc::new(std::env::temp_dir())),
                        }
                    }),
                    client_max_body_size: eff
                        .client_max_body_size
                        .unwrap_or(DEFAULT_CLIENT_MAX_BODY_SIZE),
                    access_log: access_log(&eff.access_log)?,
                }));
            }
            locations
                .prefixes
                .sort_by_key(|p| std::cmp::Reverse(p.0.len()));
            servers.push(Arc::new(Server {
                listen: s.listen,
                name: s.server_name,
                locations,
                client_header_timeout: level.client_header_timeout.unwrap_or(DEFAULT_TIMEOUT),
                keepalive_timeout: level.keepalive_timeout.unwrap_or(DEFAULT_KEEPALIVE_TIMEOUT),
                send_timeout: level.send_timeout.unwrap_or(DEFAULT_TIMEOUT),
                error_pages: level.error_pages.clone().unwrap_or_default(),
                access_log: access_log(&level.access_log)?,
                real_ip: level.real_ip.clone(),
                head_rules: {
                    let d = crate::http1::HeadRules::default();
                    crate::http1::HeadRules {
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
                },
            }));
        }
        Ok(Config {
            zones,
            conn_zones,
            servers,
            sinks,
            ops: spec.ops,
            redis,
        })
    }

    /// Start connecting to Redis in the background (call inside the tokio
    /// runtime). Never waits: sluice serves while Redis is down.
    pub fn start_backends(&self) {
        if let Some(b) = &self.redis {
            b.connect_in_background();
        }
    }
}
