//! The compiled configuration the proxy runs on: inheritance resolved, zones
//! allocated, locations in nginx's lookup structure. Built from a
//! [`super::Spec`] by [`Config::compile`] (in `compile/`); one `Config` is
//! one consistent generation of the configuration.

use super::spec::{Action, OpsSpec, PathMatch};
use crate::accesslog::{AccessLog, Sinks};
use crate::errlog::Severity;
use crate::limiter::{Limit, RedisBackend, ZoneRef};
use crate::respond::ErrorPages;
use crate::respond::RateLimitHeaders;
use crate::vars::Template;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// nginx's defaults.
pub(crate) const DEFAULT_LIMIT_REQ_STATUS: u16 = 503;
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
pub(crate) const DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(75);
/// nginx's `client_max_body_size 1m`.
pub(crate) const DEFAULT_CLIENT_MAX_BODY_SIZE: u64 = 1024 * 1024;
/// `worker_connections` when not set: client connections one worker thread
/// keeps open. nginx's default is 512 per worker process, counting its
/// listeners and upstream connections too; sluice counts client connections
/// only, and a default that low would refuse what a small flood of idle
/// keep-alive clients (or scripts/bench.sh's 8000 idle connections) opens.
pub(crate) const DEFAULT_WORKER_CONNECTIONS: usize = 10240;
/// How long SIGTERM waits for in-flight requests (nginx has no such default;
/// Kubernetes' grace period is 30 s, so drain well inside it).
pub(crate) const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// A zone: its key and its states.
pub struct Zone {
    pub key: Template,
    /// Group IPv6 clients by this prefix length.
    pub ipv6_prefix: Option<u8>,
    /// Clients this zone never limits.
    pub exempt: Vec<ipnet::IpNet>,
    pub size: u64,
    pub limiter: Arc<ZoneRef>,
    /// The keys it rejected or delayed most lately (`[admin] top_keys`).
    pub top: Arc<crate::limiter::top::TopKeys>,
}

impl Zone {
    pub(crate) fn name(&self) -> &str {
        &self.limiter.name
    }

    /// The client address as this zone sees it: `None` when exempt, IPv6
    /// addresses cut to `ipv6_prefix`.
    pub(crate) fn client(&self, ip: IpAddr) -> Option<IpAddr> {
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
    pub(crate) conn_zones: Vec<Arc<crate::connlimit::ConnZone>>,
    /// In file order.
    pub(crate) servers: Vec<Arc<ServerBlock>>,
    /// The listening addresses and their servers.
    pub(crate) addresses: Vec<super::address::Address>,
    /// Log files and syslog sockets (both logs'), kept open across reloads.
    pub sinks: Sinks,
    /// The top level's `error_log`: the process's lines, and those of
    /// requests whose server and location have none of their own.
    pub error_log: Arc<crate::errlog::ErrorLog>,
    /// No server or location has an `error_log` of its own: every
    /// request's lines go to the top level's, and requests need no scope
    /// of their own for them ([`crate::errlog::scope`]).
    pub(crate) one_error_log: bool,
    /// Process-level settings (pid file, watch, admin listener, …).
    pub ops: OpsSpec,
    /// The `[redis]` backend, when a zone uses it.
    pub redis: Option<Arc<RedisBackend>>,
    /// `[upstreams.NAME]`, in file order (kept with their state across a
    /// reload that leaves them as they were).
    pub(crate) upstreams: Vec<Arc<crate::upstream::group::Group>>,
    /// `[maps]` and `[geos]`.
    pub(crate) vars: Arc<crate::vars::Tables>,
}

impl Config {
    pub(crate) fn shutdown_timeout(&self) -> Duration {
        self.ops
            .shutdown_timeout
            .unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT)
    }

    /// The most client connections a worker thread keeps open.
    pub(crate) fn worker_connections(&self) -> usize {
        self.ops
            .worker_connections
            .unwrap_or(DEFAULT_WORKER_CONNECTIONS)
    }

    /// A configured `listen` address and its servers (none after a reload
    /// that removed it).
    pub(crate) fn address(&self, listen: SocketAddr) -> Option<&super::address::Address> {
        self.addresses.iter().find(|a| a.listen == listen)
    }

    /// The default server of a configured `listen` address.
    pub(crate) fn server_at(&self, listen: SocketAddr) -> Option<&Arc<ServerBlock>> {
        self.address(listen).map(|a| a.default_server())
    }
}

/// One `[[servers]]` block (nginx's `server {}`), compiled; the proxy that
/// serves them is [`crate::server::Server`].
pub(crate) struct ServerBlock {
    /// The first `server_name` (`$server_name`, the logs' `server:`).
    pub name: String,
    /// HTTP/2: offered by ALPN with TLS, with prior knowledge without.
    pub http2: bool,
    /// `http3`: requests over its `quic` listen are served (else its QUIC
    /// connections are closed after the handshake).
    pub http3: bool,
    /// `quic_retry`: a QUIC client proves its address with a Retry first.
    pub quic_retry: bool,
    /// `ssl_early_data`: requests a QUIC client sends in 0-RTT, before its
    /// handshake completed, are served when their method is safe (else
    /// 425); off, every such request gets 425.
    pub ssl_early_data: bool,
    /// Its certificate and TLS settings, on an `ssl` address.
    pub tls: Option<ServerTls>,
    pub locations: Locations,
    pub client_header_timeout: Duration,
    /// Idle time allowed between requests on a connection; zero: no keep-alive.
    pub keepalive_timeout: Duration,
    /// Longest wait for the client to take more of a response.
    pub send_timeout: Duration,
    /// Error pages for answers made before a location is known (400, 404).
    pub error_pages: Arc<ErrorPages>,
    pub access_log: Option<Arc<AccessLog>>,
    /// `error_log`: the lines about its requests until a location is found.
    pub error_log: Arc<crate::errlog::ErrorLog>,
    /// Whose word to take for the client address.
    pub real_ip: Option<Arc<crate::realip::RealIp>>,
    /// What a request head may be (`underscores_in_headers`,
    /// `ignore_invalid_headers`, `large_client_header_buffers`).
    pub head_rules: crate::http1::HeadRules,
    /// `add_header` for answers made before a location is known.
    pub add_headers: Arc<[crate::headers::AddHeader]>,
    /// The server's compression, for what it answers before a location is
    /// found (`None`: off).
    pub compress: Option<Arc<crate::compress::Compression>>,
}

impl ServerBlock {
    /// The timeouts its client connections obey.
    pub(crate) fn client_timeouts(&self) -> crate::conn_state::ClientTimeouts {
        crate::conn_state::ClientTimeouts {
            client_header: self.client_header_timeout,
            keepalive: self.keepalive_timeout,
            send: self.send_timeout,
        }
    }
}

/// A server's TLS, as its handshakes use it.
pub(crate) struct ServerTls {
    /// Its certificate, protocols and ALPN.
    pub config: Arc<rustls::ServerConfig>,
    pub cert_file: std::path::PathBuf,
    pub key_file: std::path::PathBuf,
}

pub(crate) struct Location {
    /// As written in the file (`"= /api"`): the admin API names a zone's
    /// locations by it, the tests find a location by it.
    pub path: String,
    /// For prefix and exact locations, the matched prefix: nginx replaces it
    /// by `proxy_pass`'s URI part.
    pub prefix: Option<String>,
    /// `limit_req`, in the file's order.
    pub limits: LimitReqs,
    pub ratelimit_headers: RateLimitHeaders,
    /// `limit_req_status`: what a rejected request gets.
    pub limit_req_status: u16,
    pub log_level: Severity,
    pub dry_run: bool,
    /// `limit_conn`, checked after `limit_req`, and its settings.
    pub conn_limits: Vec<crate::connlimit::ConnLimit>,
    pub conn_status: u16,
    pub conn_log_level: Severity,
    pub conn_dry_run: bool,
    pub error_pages: Arc<ErrorPages>,
    /// `allow` and `deny`, checked after the limits.
    pub access: Arc<Vec<crate::access::Rule>>,
    /// A `grpc_pass` location with `grpc_errors = "grpc"`: what sluice
    /// answers a gRPC call itself is a trailers-only gRPC answer.
    pub grpc_answers: bool,
    pub action: Action,
    /// For an `https://` `proxy_pass`: its `proxy_ssl_*` settings, made.
    pub upstream_tls: Option<Arc<crate::upstream::Tls>>,
    /// `proxy_connect_timeout`, `proxy_send_timeout`, `proxy_read_timeout`
    /// and `client_body_timeout`.
    pub timeouts: crate::upstream::UpstreamTimeouts,
    /// Larger request bodies get 413; 0 = unlimited.
    pub client_max_body_size: u64,
    /// `proxy_request_buffering`, `client_body_buffer_size`,
    /// `client_body_temp_path`: see [`crate::client_body`].
    pub request_buffering: Option<RequestBuffering>,
    pub access_log: Option<Arc<AccessLog>>,
    /// `error_log`: the lines about its requests.
    pub error_log: Arc<crate::errlog::ErrorLog>,
    /// `proxy_set_header` with sluice's defaults, `add_header`, and the
    /// upstream's fields the client does not get.
    pub headers: Headers,
    /// The upstream group `proxy_pass` names, if it names one (else its
    /// host is the one server, never marked down: nginx's implicit
    /// upstream).
    pub group: Option<Arc<crate::upstream::group::Group>>,
    /// `proxy_next_upstream`, `proxy_next_upstream_tries`,
    /// `proxy_next_upstream_timeout`.
    pub next_upstream: crate::upstream::group::NextUpstream,
    /// `gzip` and the rest: how its responses are compressed (`None`: off).
    pub compress: Option<Arc<crate::compress::Compression>>,
}

impl Location {
    /// Its content is `grpc_pass`.
    pub(crate) fn is_grpc(&self) -> bool {
        matches!(&self.action, Action::Proxy(pp) if pp.grpc)
    }
}

/// A location's `limit_req` list: the limiter's view of it (a
/// [`crate::limiter::LimitSet`], what [`crate::limiter::decide`] takes) and,
/// limit by limit, what the request side needs besides: the zone's key and
/// exemptions, the pre-rendered rejection body. Built in one place
/// ([`LimitReqs::new`]), so that the two cannot drift apart.
#[derive(Default)]
pub(crate) struct LimitReqs {
    set: Vec<Limit>,
    each: Vec<(Arc<Zone>, Arc<crate::respond::Rejection>)>,
}

impl LimitReqs {
    /// The limits of `zones` (with each its `burst` and `delay`), whose
    /// rejections answer `status` with the `ratelimit` fields.
    pub(crate) fn new(
        list: Vec<(Arc<Zone>, u64, u64)>,
        status: u16,
        ratelimit: crate::respond::RateLimitHeaders,
    ) -> LimitReqs {
        let set: Vec<Limit> = list
            .iter()
            .map(|(zone, burst, delay)| Limit {
                zone: zone.limiter.clone(),
                burst: *burst,
                delay: *delay,
            })
            .collect();
        let each = list
            .into_iter()
            .enumerate()
            .map(|(i, (zone, _, _))| {
                let r = crate::respond::Rejection::new(&set, i, status, ratelimit);
                (zone, Arc::new(r))
            })
            .collect();
        LimitReqs { set, each }
    }

    /// What the limiter decides over.
    pub(crate) fn set(&self) -> &crate::limiter::LimitSet {
        &self.set
    }

    /// Limit `i`.
    pub(crate) fn limit(&self, i: usize) -> &Limit {
        &self.set[i]
    }

    /// Limit `i`'s zone: its key, address prefix, exemptions.
    pub(crate) fn zone(&self, i: usize) -> &Zone {
        &self.each[i].0
    }

    /// How many limits.
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }

    /// Limit `i`'s default rejection, rendered.
    pub(crate) fn rejection(&self, i: usize) -> &Arc<crate::respond::Rejection> {
        &self.each[i].1
    }
}

/// A location's (or server's) header directives, compiled.
#[derive(Default)]
pub(crate) struct Headers {
    pub proxy: Arc<crate::headers::ProxyHeaders>,
    pub add: Arc<[crate::headers::AddHeader]>,
    pub hidden: Arc<crate::headers::HiddenHeaders>,
}

impl Headers {
    /// A level's lists compiled; `grpc`: a `grpc_pass` location's (its
    /// `grpc_*` lists, see [`super::spec::Level::for_grpc`]), with nginx's
    /// grpc module's hidden defaults.
    pub(super) fn of(level: &super::spec::HeaderLevel, grpc: bool) -> Headers {
        let none = Vec::new();
        let hide = level.proxy_hide_header.as_deref().unwrap_or(&none);
        let pass = level.proxy_pass_header.as_deref().unwrap_or(&none);
        Headers {
            proxy: Arc::new(crate::headers::ProxyHeaders::new(
                level.proxy_set_header.as_deref().map_or(&[], |v| v),
            )),
            add: level
                .add_header
                .as_deref()
                .map_or_else(|| Arc::from([]), |v| Arc::from(v.as_slice())),
            hidden: Arc::new(match grpc {
                false => crate::headers::HiddenHeaders::new(hide, pass),
                true => crate::headers::HiddenHeaders::grpc(hide, pass),
            }),
        }
    }
}

/// Where a body waits until it is whole.
pub(crate) struct RequestBuffering {
    pub in_memory: usize,
    pub temp_dir: Arc<std::path::PathBuf>,
}

/// nginx's `client_body_buffer_size` on 64-bit platforms.
pub(crate) const DEFAULT_CLIENT_BODY_BUFFER_SIZE: usize = 16 * 1024;

/// nginx's location lookup: exact, then the longest prefix (final if `^~`),
/// then regexes in file order, else the longest prefix.
#[derive(Default)]
pub(crate) struct Locations {
    all: Vec<Arc<Location>>,
    exact: HashMap<String, usize>,
    /// Longest first: (prefix, stops regex search, index).
    prefixes: Vec<(String, bool, usize)>,
    regexes: Vec<(regex::Regex, usize)>,
}

impl Locations {
    /// Add `loc`, matched by `rule` (in file order).
    /// Every location, in the file's order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Location>> {
        self.all.iter()
    }

    pub(super) fn push(&mut self, rule: PathMatch, loc: Location) {
        let i = self.all.len();
        match rule {
            PathMatch::Exact(p) => {
                self.exact.insert(p, i);
            }
            PathMatch::Prefix { prefix, stop_regex } => {
                self.prefixes.push((prefix, stop_regex, i));
            }
            PathMatch::Regex(r) => self.regexes.push((r, i)),
        }
        self.all.push(Arc::new(loc));
    }

    /// Done adding: prefixes longest first.
    pub(super) fn finish(&mut self) {
        self.prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
    }

    /// nginx's `auto_redirect`: `path` is the name of a proxied location
    /// (`/app/`, exact or prefix) without its final slash, and no location
    /// is named `path` itself. Then the request is answered 301 to that
    /// name (in that location: its `add_header` apply), before regexes are
    /// looked at; the location is returned.
    pub(crate) fn adds_slash(&self, path: &str) -> Option<&Arc<Location>> {
        if path.ends_with('/') || self.exact.contains_key(path) {
            return None;
        }
        let proxied = |i: usize| matches!(self.all[i].action, Action::Proxy(_));
        let mut named = self.exact.iter().map(|(p, &i)| (p.as_str(), i));
        let mut prefixes = self.prefixes.iter().map(|(p, _, i)| (p.as_str(), *i));
        if prefixes.clone().any(|(p, _)| p == path) {
            return None;
        }
        let slashed = |(p, _): &(&str, usize)| p.len() == path.len() + 1 && p.starts_with(path);
        let found = named.find(slashed).or_else(|| prefixes.find(slashed))?;
        proxied(found.1).then_some(&self.all[found.1])
    }

    pub(crate) fn find(&self, path: &str) -> Option<&Arc<Location>> {
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
    #[error("error_log \"{target}\": {source}")]
    ErrorLog {
        target: String,
        #[source]
        source: std::io::Error,
    },
    #[error("open() \"{path}\" failed ({source})")]
    AccessLog {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("[redis]: {0}")]
    Redis(String),
    /// A certificate that could not be read or used.
    #[error("{0}")]
    Certificate(String),
    /// An HTTPS upstream's settings that cannot be used: a file (only when
    /// the file step did not run), no system CAs to verify with.
    #[error("{0}")]
    UpstreamTls(String),
    /// sluice's own default `log_format` does not parse (a bug: a test
    /// guards against it).
    #[error("the default log_format: {0}")]
    DefaultLogFormat(String),
    /// A host name of an upstream group that does not resolve.
    #[error("{0}")]
    Resolve(#[from] crate::upstream::group::ResolveError),
}

impl Config {
    /// Start connecting to Redis in the background (call inside the tokio
    /// runtime). Never waits: sluice serves while Redis is down.
    pub fn start_backends(&self) {
        if let Some(b) = &self.redis {
            b.connect_in_background();
        }
    }
}
