//! The validated configuration file, [`Spec`]: what the file says, with
//! every reference checked (zones by index, a location's `proxy_pass` or
//! `return` resolved), and nothing allocated yet. `sluice check` prints it;
//! [`super::Config::compile`] turns it into the configuration that serves.
//!
//! The types carry what validation established (an [`Action`] instead of
//! two `Option`s, a compiled regex in [`PathMatch`]), so that nothing
//! downstream re-checks or `expect`s it.

use super::values::ProxyPass;
use crate::errlog::Severity;
use crate::limiter::RedisConfig;
use crate::respond::{ErrorPages, RateLimitHeaders, ReturnSpec};
use crate::vars::{LogEscape, Template};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A validated configuration file.
pub struct Spec {
    /// The top level (nginx's `http` block).
    pub(crate) http: Level,
    /// `log_format`: the access-log line (default [`crate::accesslog::DEFAULT_FORMAT`]).
    pub log_format: Option<Template>,
    pub zones: Vec<ZoneSpec>,
    /// `[conn_zones]`, for `limit_conn`.
    pub(crate) conn_zones: Vec<ConnZoneSpec>,
    pub(crate) servers: Vec<ServerSpec>,
    /// Settings for running the process: pid file, reload, admin listener.
    pub ops: OpsSpec,
    /// `[redis]`, for zones with `backend = "redis"`.
    pub redis: Option<RedisConfig>,
    /// `[upstreams.NAME]`: the groups `proxy_pass` may name.
    pub(crate) upstreams: Vec<UpstreamSpec>,
    /// `[maps]` and `[geos]`: the configuration's own variables.
    pub(crate) vars: Arc<crate::vars::Tables>,
}

/// `[upstreams.NAME]`: nginx's `upstream NAME { … }`, as written (its host
/// names are resolved by compiling).
pub(crate) struct UpstreamSpec {
    pub def: crate::upstream::group::GroupDef,
    /// The `hash` key, parsed.
    pub hash_key: Option<Template>,
}

/// Top-level settings about the process rather than requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpsSpec {
    /// `pid_file`: written at start, removed at exit; `sluice reload` reads it.
    pub pid_file: Option<std::path::PathBuf>,
    /// `watch = true`: reload when the file changes.
    pub watch: bool,
    /// `shutdown_timeout`: how long in-flight requests may take to finish on
    /// SIGTERM (default [`crate::config::DEFAULT_SHUTDOWN_TIMEOUT`]).
    pub shutdown_timeout: Option<Duration>,
    /// `error_log_level`: the least severe error-log line written.
    pub error_log_level: Option<Severity>,
    /// `log_format_escape`: nginx's `log_format … escape=`.
    pub log_escape: LogEscape,
    /// `[admin]`: `/metrics`, `/healthz`, the status API and dashboard.
    pub admin: Option<AdminSpec>,
    /// `worker_connections`: the most client connections one worker thread
    /// keeps open (default [`crate::config::DEFAULT_WORKER_CONNECTIONS`]).
    pub worker_connections: Option<usize>,
}

/// `[admin]`: the listener for `/metrics`, `/healthz`, the status API
/// (`/api/…`) and the dashboard (`/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminSpec {
    /// `listen`.
    pub listen: SocketAddr,
    /// `allow`: clients besides loopback that may use it (CIDRs).
    pub allow: Vec<ipnet::IpNet>,
    /// `token_file`'s token (read when the configuration is loaded): the
    /// write methods need `Authorization: Bearer TOKEN`; without one they
    /// are off.
    pub token: Option<std::sync::Arc<str>>,
    /// `top_keys`: how many of each zone's most limited keys are tracked
    /// (0: none).
    pub top_keys: usize,
}

impl AdminSpec {
    /// `top_keys`' default.
    pub const DEFAULT_TOP_KEYS: usize = 10;
}

/// Where a zone keeps its states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// In this process (the default).
    Memory,
    /// In Redis (`[redis]`), shared by every instance using it.
    Redis,
}

/// `[zones.NAME]`: nginx's `limit_req_zone KEY zone=NAME:SIZE rate=RATE`.
pub struct ZoneSpec {
    pub name: String,
    pub key: Template,
    /// Group IPv6 clients by this prefix length in the key's addresses.
    pub ipv6_prefix: Option<u8>,
    /// Clients never limited by this zone.
    pub exempt: Vec<ipnet::IpNet>,
    /// Bytes.
    pub size: u64,
    /// The algorithm and its rate.
    pub policy: crate::limiter::Policy,
    pub backend: Backend,
}

/// `[conn_zones.NAME]`: nginx's `limit_conn_zone KEY zone=NAME:SIZE`.
pub(crate) struct ConnZoneSpec {
    pub name: String,
    pub key: Template,
    /// Bytes.
    pub size: u64,
}

/// One `limit_conn` table: a conn zone (index into [`Spec::conn_zones`])
/// and how many requests of one key it lets be processed at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConnLimitSpec {
    pub zone: usize,
    pub conn: u32,
}

/// One `limit_req` table: a zone (index into [`Spec::zones`]) and its burst
/// and delay in milli-requests (`u64::MAX` delay = `nodelay`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LimitSpec {
    pub zone: usize,
    pub burst: u64,
    pub delay: u64,
}

impl LimitSpec {
    #[cfg(test)]
    pub(crate) fn is_nodelay(&self) -> bool {
        self.delay == crate::limiter::Limit::NODELAY
    }
}

/// Settings that http, server and location levels share; `None` = not set
/// here, inherit.
#[derive(Clone, Default)]
pub(crate) struct Level {
    /// nginx: a level with its own `limit_req` lines hides its parent's.
    pub limit_req: Option<Vec<LimitSpec>>,
    pub status: Option<u16>,
    pub log_level: Option<Severity>,
    pub dry_run: Option<bool>,
    /// nginx: a level with its own `limit_conn` lines hides its parent's.
    pub limit_conn: Option<Vec<ConnLimitSpec>>,
    pub conn_status: Option<u16>,
    pub conn_log_level: Option<Severity>,
    pub conn_dry_run: Option<bool>,
    /// Like nginx's `error_page`: a level with its own hides its parent's.
    pub error_pages: Option<Arc<ErrorPages>>,
    pub proxy_connect_timeout: Option<Duration>,
    pub proxy_read_timeout: Option<Duration>,
    /// `proxy_send_timeout`: longest stall of one write to the upstream.
    pub proxy_send_timeout: Option<Duration>,
    /// `client_body_timeout`: longest pause between two reads of a request body.
    pub client_body_timeout: Option<Duration>,
    pub client_header_timeout: Option<Duration>,
    /// `keepalive_timeout` (http, server): idle time between requests; 0
    /// disables keep-alive.
    pub keepalive_timeout: Option<Duration>,
    /// `send_timeout` (http, server): longest wait for the client to accept
    /// more of a response.
    pub send_timeout: Option<Duration>,
    /// `client_max_body_size` in bytes; 0 = unlimited.
    pub client_max_body_size: Option<u64>,
    /// `proxy_request_buffering`: read a body whole before forwarding it.
    pub proxy_request_buffering: Option<bool>,
    /// `client_body_buffer_size`: bytes of a body kept in memory.
    pub client_body_buffer_size: Option<usize>,
    /// `client_body_temp_path`: where larger bodies wait.
    pub client_body_temp_path: Option<Arc<std::path::PathBuf>>,
    /// `access_log`: `Some(None)` is `"off"`; else `"stdout"`, `"stderr"` or a path.
    pub access_log: Option<Option<String>>,
    /// `error_log`: nginx's list of targets (a level with its own replaces
    /// its parent's).
    pub error_log: Option<Arc<Vec<crate::errlog::TargetSpec>>>,
    pub ratelimit_headers: Option<RateLimitHeaders>,
    /// `grpc_errors`: how a `grpc_pass` location answers what sluice
    /// answers itself.
    pub grpc_errors: Option<crate::respond::grpc::GrpcErrors>,
    /// `access`: nginx's `allow` and `deny` lines (a level with its own
    /// hides its parent's).
    pub access: Option<Arc<Vec<crate::access::Rule>>>,
    /// `real_ip` (http and server levels).
    pub real_ip: Option<Arc<crate::realip::RealIp>>,
    /// `underscores_in_headers` (http, server): `_` is valid in names.
    pub underscores_in_headers: Option<bool>,
    /// `ignore_invalid_headers` (http, server): drop invalid names.
    pub ignore_invalid_headers: Option<bool>,
    /// `large_client_header_buffers` (http, server): count and size.
    pub large_client_header_buffers: Option<(usize, usize)>,
    /// `proxy_ssl_*`: how HTTPS upstreams are spoken to.
    pub proxy_ssl: super::upstream_tls::ProxySsl,
    /// `proxy_next_upstream`: when a request goes on to the next server.
    pub proxy_next_upstream: Option<crate::upstream::group::Conditions>,
    /// `proxy_next_upstream_tries`: 0 = no limit.
    pub proxy_next_upstream_tries: Option<usize>,
    /// `proxy_next_upstream_timeout`: zero = no limit.
    pub proxy_next_upstream_timeout: Option<Duration>,
    /// `proxy_set_header`, `add_header`, `proxy_hide_header`, `proxy_pass_header`.
    pub headers: HeaderLevel,
    /// The `grpc_*` keys, for `grpc_pass` locations (see [`super::grpc`]).
    pub grpc: super::grpc::GrpcLevel,
    /// `gzip`, `gzip_*`, `compress` (see [`super::compress`]).
    pub compress: super::compress::CompressLevel,
}

/// The header directives of a level, each inherited on its own (a level
/// that sets one replaces its parent's list, as nginx).
#[derive(Clone, Default)]
pub(crate) struct HeaderLevel {
    pub proxy_set_header: Option<Arc<Vec<(http::HeaderName, crate::vars::Template)>>>,
    pub add_header: Option<Arc<Vec<crate::headers::AddHeader>>>,
    pub proxy_hide_header: Option<Arc<Vec<http::HeaderName>>>,
    pub proxy_pass_header: Option<Arc<Vec<http::HeaderName>>>,
}

impl HeaderLevel {
    pub(super) fn inherit(&self, parent: &HeaderLevel) -> HeaderLevel {
        let pick = |mine: &Option<_>, theirs: &Option<_>| mine.clone().or_else(|| theirs.clone());
        HeaderLevel {
            proxy_set_header: self
                .proxy_set_header
                .clone()
                .or_else(|| parent.proxy_set_header.clone()),
            add_header: self
                .add_header
                .clone()
                .or_else(|| parent.add_header.clone()),
            proxy_hide_header: pick(&self.proxy_hide_header, &parent.proxy_hide_header),
            proxy_pass_header: pick(&self.proxy_pass_header, &parent.proxy_pass_header),
        }
    }
}

impl Level {
    /// This level with unset values taken from `parent`.
    pub(crate) fn inherit(&self, parent: &Level) -> Level {
        Level {
            limit_req: self.limit_req.clone().or_else(|| parent.limit_req.clone()),
            status: self.status.or(parent.status),
            log_level: self.log_level.or(parent.log_level),
            dry_run: self.dry_run.or(parent.dry_run),
            limit_conn: self
                .limit_conn
                .clone()
                .or_else(|| parent.limit_conn.clone()),
            conn_status: self.conn_status.or(parent.conn_status),
            conn_log_level: self.conn_log_level.or(parent.conn_log_level),
            conn_dry_run: self.conn_dry_run.or(parent.conn_dry_run),
            error_pages: self
                .error_pages
                .clone()
                .or_else(|| parent.error_pages.clone()),
            proxy_connect_timeout: self.proxy_connect_timeout.or(parent.proxy_connect_timeout),
            proxy_read_timeout: self.proxy_read_timeout.or(parent.proxy_read_timeout),
            proxy_send_timeout: self.proxy_send_timeout.or(parent.proxy_send_timeout),
            client_body_timeout: self.client_body_timeout.or(parent.client_body_timeout),
            client_header_timeout: self.client_header_timeout.or(parent.client_header_timeout),
            keepalive_timeout: self.keepalive_timeout.or(parent.keepalive_timeout),
            send_timeout: self.send_timeout.or(parent.send_timeout),
            client_max_body_size: self.client_max_body_size.or(parent.client_max_body_size),
            proxy_request_buffering: self
                .proxy_request_buffering
                .or(parent.proxy_request_buffering),
            client_body_buffer_size: self
                .client_body_buffer_size
                .or(parent.client_body_buffer_size),
            client_body_temp_path: self
                .client_body_temp_path
                .clone()
                .or_else(|| parent.client_body_temp_path.clone()),
            access_log: self
                .access_log
                .clone()
                .or_else(|| parent.access_log.clone()),
            error_log: self.error_log.clone().or_else(|| parent.error_log.clone()),
            real_ip: self.real_ip.clone().or_else(|| parent.real_ip.clone()),
            access: self.access.clone().or_else(|| parent.access.clone()),
            ratelimit_headers: self.ratelimit_headers.or(parent.ratelimit_headers),
            grpc_errors: self.grpc_errors.or(parent.grpc_errors),
            underscores_in_headers: self
                .underscores_in_headers
                .or(parent.underscores_in_headers),
            ignore_invalid_headers: self
                .ignore_invalid_headers
                .or(parent.ignore_invalid_headers),
            large_client_header_buffers: self
                .large_client_header_buffers
                .or(parent.large_client_header_buffers),
            proxy_ssl: self.proxy_ssl.inherit(&parent.proxy_ssl),
            headers: self.headers.inherit(&parent.headers),
            proxy_next_upstream: self.proxy_next_upstream.or(parent.proxy_next_upstream),
            proxy_next_upstream_tries: self
                .proxy_next_upstream_tries
                .or(parent.proxy_next_upstream_tries),
            proxy_next_upstream_timeout: self
                .proxy_next_upstream_timeout
                .or(parent.proxy_next_upstream_timeout),
            grpc: self.grpc.inherit(&parent.grpc),
            compress: self.compress.inherit(&parent.compress),
        }
    }
}

/// `[[servers]]`.
pub(crate) struct ServerSpec {
    pub listen: SocketAddr,
    /// `listen`'s flags (`ssl`, `http2`, `default_server`), as this server
    /// wrote them; an address's flags are those of all its servers.
    pub options: super::values::Listen,
    /// The first name (`$server_name`, the logs).
    pub server_name: String,
    pub names: Vec<super::values::ServerName>,
    /// Its certificate, when it listens with `ssl`.
    pub tls: Option<TlsSpec>,
    /// `http2 = true | false` (unset: on for `ssl`, else the listen flag).
    pub http2: Option<bool>,
    /// `http3 = true | false` (unset: on, as nginx's `http3`).
    pub http3: bool,
    /// `quic_retry = true | false` (unset: off, as nginx's).
    pub quic_retry: bool,
    /// `ssl_early_data = true | false` (unset: off, as nginx's).
    pub ssl_early_data: bool,
    /// The server's `proxy_pass`: where its locations without one of their
    /// own forward, and its implicit `location /`.
    pub proxy_pass: Option<ProxyPass>,
    pub level: Level,
    pub locations: Vec<LocationSpec>,
}

impl ServerSpec {
    /// Whether the server speaks HTTP/2: `http2` if set, else nginx 1.22's
    /// `listen … http2`, and on by default with TLS, where ALPN lets a
    /// client choose.
    pub(crate) fn http2_on(&self) -> bool {
        self.http2.unwrap_or(self.options.http2 || self.options.ssl)
    }
}

/// A server's certificate and the protocols it speaks.
pub(crate) struct TlsSpec {
    pub cert_file: std::path::PathBuf,
    pub key_file: std::path::PathBuf,
    pub protocols: Vec<crate::tls::Protocol>,
    /// Read by the file step (`None` when the configuration was parsed
    /// without reading files: compiling reads it then).
    pub certificate: Option<crate::tls::Certificate>,
}

/// `[[servers.locations]]`.
pub(crate) struct LocationSpec {
    /// As written, e.g. `"= /api"`.
    pub path: String,
    pub rule: PathMatch,
    pub level: Level,
    /// What the location does with a request its limits let through.
    pub action: Action,
}

/// How a location matches a path: nginx's modifiers, a regex already
/// compiled (a bad one is a configuration error, not a later surprise).
#[derive(Clone, Debug)]
pub(crate) enum PathMatch {
    /// `= /p`
    Exact(String),
    /// `/p`, or `^~ /p` (`stop_regex`): a prefix.
    Prefix { prefix: String, stop_regex: bool },
    /// `~ re` or `~* re`.
    Regex(regex::Regex),
}

/// What a location does with a request that passed its limits: `return`
/// (which wins when both are set) or `proxy_pass` (its own or its
/// server's). Validation makes sure every location has one.
#[derive(Debug)]
pub(crate) enum Action {
    Proxy(ProxyPass),
    Return(ReturnSpec),
}
