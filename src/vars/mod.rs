//! nginx-style variables in zone keys, error pages and `return` bodies:
//! `"$binary_remote_addr"`, `"$http_x_api_key:$uri"`, `"${host}x"`.
//!
//! A [`Template`] is parsed once when the configuration is compiled, so a
//! typo in a variable name is a configuration error with its column, and a
//! request only walks a short list of parts.

mod escape;
pub mod geo;
pub mod map;
mod parse;
mod upstream;
mod user;

pub use parse::Names;
pub use upstream::UpstreamTry;
pub use user::{Def, Tables, UserVars};

use crate::fmt::{Timestamp, push_excess, push_ip, push_u64};
use crate::http1::Fields;
use crate::limiter::LimitReqStatus;
use escape::escape_tail;
use http::{HeaderName, Method, Uri, Version};
use std::net::{IpAddr, SocketAddr};

/// A variable nginx users know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Var {
    BinaryRemoteAddr,
    RemoteAddr,
    RemotePort,
    ServerAddr,
    ServerPort,
    ServerName,
    Host,
    Uri,
    RequestUri,
    RequestMethod,
    Request,
    Args,
    Scheme,
    /// `HTTP/1.0`, `HTTP/1.1`, `HTTP/2.0`.
    ServerProtocol,
    Http(HeaderName),
    Cookie(String),
    Arg(String),
    // Only where a response is being made (error pages, `return`, logs):
    Status,
    RetryAfter,
    LimitReqStatus,
    LimitReqZone,
    // Only in the access log:
    BodyBytesSent,
    RequestTime,
    UpstreamResponseTime,
    /// Every server a request tried (nginx's lists, `, ` between).
    UpstreamAddr,
    UpstreamStatus,
    UpstreamHeaderTime,
    TimeLocal,
    TimeIso8601,
    Msec,
    RemoteUser,
    ConnectionId,
    /// nginx's `$limit_conn_status`: known once `limit_conn` decided.
    LimitConnStatus,
    /// The algorithm of the zone `$limit_req_zone` names (not nginx's).
    LimitReqAlgorithm,
    /// The `grpc-status` in a response's head: a trailers-only gRPC
    /// answer's (sluice's own or the upstream's), else empty (not nginx's).
    GrpcStatus,
    /// nginx's `$gzip_ratio`: in and out of the compressor (`-`: none).
    GzipRatio,
    /// `on` over TLS, else empty.
    Https,
    SslProtocol,
    SslServerName,
    SslCipher,
    /// `1` for a request sent in TLS early data (0-RTT), else empty.
    SslEarlyData,
    /// `proxy_pass`'s host (and port), or its upstream group's name.
    ProxyHost,
    /// The client's `X-Forwarded-For` with `$remote_addr` appended.
    ProxyAddXForwardedFor,
    /// What the connection's PROXY protocol header named (empty without
    /// one): the client's address and port, and the address and port it
    /// connected to.
    ProxyProtocolAddr,
    ProxyProtocolPort,
    ProxyProtocolServerAddr,
    ProxyProtocolServerPort,
    /// A `[maps]` or `[geos]` variable, by its index in [`Tables`].
    User(usize),
    /// nginx's `$upstream_trailer_NAME`: a field of the upstream's trailers
    /// (gRPC's `grpc-status`, `grpc-message`, its trailing metadata).
    UpstreamTrailer(HeaderName),
}

impl Var {
    fn parse(name: &str) -> Option<Var> {
        Some(match name {
            "binary_remote_addr" => Var::BinaryRemoteAddr,
            "remote_addr" => Var::RemoteAddr,
            "remote_port" => Var::RemotePort,
            "server_addr" => Var::ServerAddr,
            "server_port" => Var::ServerPort,
            "server_name" => Var::ServerName,
            "host" => Var::Host,
            "uri" | "document_uri" => Var::Uri,
            "request_uri" => Var::RequestUri,
            "request_method" => Var::RequestMethod,
            "request" => Var::Request,
            "args" | "query_string" => Var::Args,
            "scheme" => Var::Scheme,
            "server_protocol" => Var::ServerProtocol,
            "https" => Var::Https,
            "ssl_protocol" => Var::SslProtocol,
            "ssl_server_name" => Var::SslServerName,
            "ssl_cipher" => Var::SslCipher,
            "ssl_early_data" => Var::SslEarlyData,
            "status" => Var::Status,
            "retry_after" => Var::RetryAfter,
            "limit_req_status" => Var::LimitReqStatus,
            "limit_req_zone" => Var::LimitReqZone,
            "body_bytes_sent" | "bytes_sent" => Var::BodyBytesSent,
            "request_time" => Var::RequestTime,
            "upstream_response_time" => Var::UpstreamResponseTime,
            "upstream_addr" => Var::UpstreamAddr,
            "upstream_status" => Var::UpstreamStatus,
            "upstream_header_time" => Var::UpstreamHeaderTime,
            "time_local" => Var::TimeLocal,
            "time_iso8601" => Var::TimeIso8601,
            "msec" => Var::Msec,
            "remote_user" => Var::RemoteUser,
            "connection" => Var::ConnectionId,
            "limit_conn_status" => Var::LimitConnStatus,
            "limit_req_algorithm" => Var::LimitReqAlgorithm,
            "grpc_status" => Var::GrpcStatus,
            "gzip_ratio" => Var::GzipRatio,
            "proxy_host" => Var::ProxyHost,
            "proxy_add_x_forwarded_for" => Var::ProxyAddXForwardedFor,
            "proxy_protocol_addr" => Var::ProxyProtocolAddr,
            "proxy_protocol_port" => Var::ProxyProtocolPort,
            "proxy_protocol_server_addr" => Var::ProxyProtocolServerAddr,
            "proxy_protocol_server_port" => Var::ProxyProtocolServerPort,
            _ => {
                if let Some(t) = name.strip_prefix("upstream_trailer_") {
                    let t = t.replace('_', "-").to_ascii_lowercase();
                    Var::UpstreamTrailer(HeaderName::from_bytes(t.as_bytes()).ok()?)
                } else if let Some(h) = name.strip_prefix("http_") {
                    let h = h.replace('_', "-").to_ascii_lowercase();
                    Var::Http(HeaderName::from_bytes(h.as_bytes()).ok()?)
                } else if let Some(c) = name.strip_prefix("cookie_") {
                    Var::Cookie(c.to_string())
                } else if let Some(a) = name.strip_prefix("arg_") {
                    Var::Arg(a.to_string())
                } else {
                    return None;
                }
            }
        })
    }

    /// The narrowest context a variable is available in.
    fn context(&self) -> Context {
        match self {
            Var::ProxyHost => Context::Proxy,
            Var::Status
            | Var::RetryAfter
            | Var::LimitReqStatus
            | Var::LimitReqZone
            | Var::LimitConnStatus => Context::Response,
            Var::BodyBytesSent
            | Var::RequestTime
            | Var::UpstreamResponseTime
            | Var::UpstreamAddr
            | Var::UpstreamStatus
            | Var::UpstreamHeaderTime
            | Var::UpstreamTrailer(_)
            | Var::TimeLocal
            | Var::TimeIso8601
            | Var::Msec
            | Var::RemoteUser
            | Var::ConnectionId
            | Var::LimitReqAlgorithm
            | Var::GrpcStatus
            | Var::GzipRatio => Context::Log,
            _ => Context::Key,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Var(Var),
    /// In a map's value: a capture of its regex (`$1`, `${name}`).
    Capture(usize),
}

/// How variable values are escaped in access-log lines (nginx's
/// `log_format name escape=default|json|none`): a property of the template
/// that writes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogEscape {
    /// `"`, `\` and bytes outside 32–126 as `\xHH`; empty values as `-`.
    #[default]
    Default,
    /// JSON string escapes; empty values stay empty.
    Json,
    /// Nothing escaped.
    None,
}

/// Text with variables, compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
    source: String,
    /// Access logs print an empty variable as `-`, as nginx.
    dash_empty: bool,
    /// Access logs escape variable values (nginx's `escape=`).
    escape: LogEscape,
}

/// A template that does not parse: the byte offset in the template text and
/// what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub offset: usize,
    pub message: String,
}

/// Where a template is used decides which variables it may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Context {
    /// A zone key: request variables only.
    Key,
    /// `proxy_set_header`: also `$proxy_host`.
    Proxy,
    /// An error page or `return`: also `$status`, `$retry_after`, …
    Response,
    /// The access log: also `$request_time`, `$body_bytes_sent`, …
    Log,
}

impl Template {
    /// This template with variable values escaped as nginx's `log_format
    /// … escape=` does. With `json`, empty values stay empty (not `-`).
    pub fn with_escape(mut self, escape: LogEscape) -> Template {
        self.escape = escape;
        if escape == LogEscape::Json {
            self.dash_empty = false;
        }
        self
    }

    /// The text as written in the configuration.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// True when the template has no variables.
    pub fn is_constant(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Text(_)))
    }

    /// Append the value for this request to `out`.
    pub fn eval(&self, req: &RequestVars, resp: Option<&ResponseVars>, out: &mut Vec<u8>) {
        self.eval_inner(req, resp, None, out)
    }

    /// A map value's [`Template::eval`], with its regex's captures.
    pub(crate) fn eval_captured(
        &self,
        req: &RequestVars,
        caps: &regex::bytes::Captures,
        out: &mut Vec<u8>,
    ) {
        self.eval_inner(req, None, Some(caps), out)
    }

    fn eval_inner(
        &self,
        req: &RequestVars,
        resp: Option<&ResponseVars>,
        caps: Option<&regex::bytes::Captures>,
        out: &mut Vec<u8>,
    ) {
        for p in &self.parts {
            match p {
                Part::Text(t) => out.extend_from_slice(t.as_bytes()),
                Part::Capture(n) => {
                    if let Some(m) = caps.and_then(|c| c.get(*n)) {
                        out.extend_from_slice(m.as_bytes());
                    }
                }
                Part::Var(v) => {
                    let before = out.len();
                    eval_var(v, req, resp, out);
                    if self.dash_empty && out.len() == before {
                        out.push(b'-');
                    } else if self.escape != LogEscape::None {
                        escape_tail(out, before, self.escape);
                    }
                }
            }
        }
    }

    /// Whether the template names a variable `pred` accepts.
    pub fn uses(&self, pred: impl Fn(&Var) -> bool) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::Var(v) if pred(v)))
    }

    /// The configuration's variables the template names, by index.
    pub fn user_vars(&self) -> impl Iterator<Item = usize> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(Var::User(i)) => Some(*i),
            _ => None,
        })
    }

    pub fn eval_to_vec(&self, req: &RequestVars, resp: Option<&ResponseVars>) -> Vec<u8> {
        let mut out = Vec::new();
        self.eval(req, resp, &mut out);
        out
    }
}

/// What a request offers to variables.
pub struct RequestVars<'a> {
    pub remote: SocketAddr,
    pub local: SocketAddr,
    /// What the connection's PROXY protocol header named.
    pub proxy: Option<&'a crate::proxy_protocol::Addresses>,
    pub server_name: &'a str,
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub version: Version,
    /// The normalised, decoded path (`$uri`).
    pub path: &'a str,
    pub headers: &'a Fields,
    /// The request line as the client sent it, for a request refused
    /// before it could be parsed: `$request` shows it, as nginx's does.
    pub raw_request_line: Option<&'a [u8]>,
    /// The connection's TLS session, if it speaks TLS.
    pub tls: Option<&'a std::sync::Arc<crate::tls::Session>>,
    /// The values of the configuration's maps and geos (none: the
    /// configuration has none).
    pub user: Option<&'a std::sync::Arc<UserVars>>,
}

/// What an error page or `return` adds.
#[derive(Default)]
pub struct ResponseVars<'a> {
    /// `$proxy_host` (empty when not proxied).
    pub proxy_host: &'a str,
    pub status: u16,
    pub retry_after: Option<u64>,
    /// `None`: empty (the access log prints `-`).
    pub limit_req_status: Option<LimitReqStatus>,
    pub limit_req_zone: &'a str,
    /// `$limit_conn_status`: empty (the access log prints `-`) until a
    /// `limit_conn` decided.
    pub limit_conn_status: &'a str,
    /// Access log only.
    pub log: Option<&'a LogVars>,
}

/// What the access log adds, known once the response is finished.
#[derive(Clone, Debug, Default)]
pub struct LogVars {
    pub body_bytes_sent: u64,
    /// Milliseconds from the first byte of the request to the last of the response.
    pub request_time_ms: u64,
    /// Every upstream server tried, in order (none: `-`).
    pub upstream: Vec<UpstreamTry>,
    /// Seconds since the Unix epoch, with milliseconds, when the line is written.
    pub unix_ms: u64,
    pub connection: u64,
    /// `$limit_req_algorithm`: the deciding zone's algorithm, `-` when none.
    pub limit_req_algorithm: &'static str,
    /// The upstream's trailers, if its response had any.
    pub upstream_trailers: Option<Box<http::HeaderMap>>,
    /// `$grpc_status`: the code of a gRPC answer sluice made.
    pub grpc_status: Option<u8>,
    /// `$gzip_ratio`'s bytes in and out, once a compressed body ended.
    pub gzip_ratio: Option<(u64, u64)>,
}

/// Milliseconds as nginx's seconds with three decimals (`0.012`): the
/// same thousandths as an excess.
fn push_secs(out: &mut Vec<u8>, ms: u64) {
    push_excess(out, ms);
}

/// `$time_local` or `$time_iso8601` of `unix_ms`, rendered once a second
/// per thread (nginx too caches its time strings).
fn push_time(out: &mut Vec<u8>, unix_ms: u64, iso: bool) {
    thread_local! {
        static CACHE: std::cell::RefCell<[(u64, String); 2]> =
            const { std::cell::RefCell::new([(u64::MAX, String::new()), (u64::MAX, String::new())]) };
    }
    let secs = unix_ms / 1000;
    CACHE.with_borrow_mut(|c| {
        let slot = &mut c[iso as usize];
        if slot.0 != secs {
            let t = Timestamp::from_ms(unix_ms);
            *slot = (secs, if iso { t.iso8601() } else { t.clf() });
        }
        out.extend_from_slice(slot.1.as_bytes());
    });
}

impl<'a> RequestVars<'a> {
    /// A `GET /t?q=1` from `remote` with `headers`, for tests elsewhere.
    #[cfg(test)]
    pub fn for_test(headers: &'a Fields, remote: &str) -> RequestVars<'a> {
        let uri: &'static Uri = Box::leak(Box::new(Uri::from_static("/t?q=1")));
        RequestVars {
            remote: SocketAddr::new(remote.parse().unwrap(), 5555),
            local: "127.0.0.1:7060".parse().unwrap(),
            proxy: None,
            server_name: "",
            method: &Method::GET,
            uri,
            version: Version::HTTP_11,
            path: "/t",
            headers,
            raw_request_line: None,
            tls: None,
            user: None,
        }
    }

    /// nginx's `$host`: the Host header, lowercased, without its port; else
    /// the server name.
    pub fn host(&self) -> String {
        if let Some(h) = self.uri.host() {
            return h.to_ascii_lowercase();
        }
        if let Some(h) = self.headers.get(&http::header::HOST) {
            if let Some(h) = crate::http1::fields::as_str(h) {
                let h = match h.rfind(':') {
                    Some(i) if !h.ends_with(']') => &h[..i],
                    _ => h,
                };
                return h.to_ascii_lowercase();
            }
        }
        self.server_name.to_string()
    }

    /// The request line as nginx logs it: `GET /p?a=1 HTTP/1.1`.
    fn push_request_line(&self, out: &mut Vec<u8>) {
        if let Some(raw) = self.raw_request_line {
            out.extend_from_slice(raw);
            return;
        }
        out.extend_from_slice(self.method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(
            self.uri
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/")
                .as_bytes(),
        );
        out.push(b' ');
        out.extend_from_slice(version_str(self.version).as_bytes());
    }
}

pub fn version_str(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// One variable's value, appended to `out`. A variable whose context is
/// missing (no response being made, not the access log) appends nothing.
fn eval_var(v: &Var, req: &RequestVars, resp: Option<&ResponseVars>, out: &mut Vec<u8>) {
    // By the variable's context; $remote_user (sluice has no auth) and
    // $proxy_host have their own.
    match (v, v.context()) {
        (Var::RemoteUser, _) => out.push(b'-'),
        (Var::ProxyHost, _) => {
            if let Some(r) = resp {
                out.extend_from_slice(r.proxy_host.as_bytes());
            }
        }
        (_, Context::Response) => eval_response_var(v, resp, out),
        (_, Context::Log) => {
            if let Some(l) = resp.and_then(|r| r.log) {
                eval_log_var(v, l, out)
            }
        }
        _ => eval_request_var(v, req, out),
    }
}

/// `$ssl_*`: empty without TLS.
fn push_ssl(v: &Var, req: &RequestVars, out: &mut Vec<u8>) {
    let Some(t) = req.tls else { return };
    match v {
        Var::SslProtocol => out.extend_from_slice(t.protocol.name().as_bytes()),
        Var::SslEarlyData if t.early_data => out.push(b'1'),
        Var::SslEarlyData => {}
        Var::SslServerName => {
            if let Some(name) = t.server_name.as_deref() {
                out.extend_from_slice(name.as_bytes());
            }
        }
        _ => out.extend_from_slice(t.cipher.as_bytes()),
    }
}

/// `$proxy_protocol_*`: empty without a header naming addresses.
fn push_proxy_protocol(v: &Var, req: &RequestVars, out: &mut Vec<u8>) {
    let Some(p) = req.proxy else { return };
    match v {
        Var::ProxyProtocolAddr => push_ip(out, p.source.ip()),
        Var::ProxyProtocolPort => push_u64(out, p.source.port().into()),
        Var::ProxyProtocolServerAddr => push_ip(out, p.destination.ip()),
        _ => push_u64(out, p.destination.port().into()),
    }
}

/// The variables of the request itself (keys may use only these).
fn eval_request_var(v: &Var, req: &RequestVars, out: &mut Vec<u8>) {
    match v {
        Var::BinaryRemoteAddr => match req.remote.ip() {
            IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
            IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
        },
        Var::RemoteAddr => push_ip(out, req.remote.ip()),
        Var::RemotePort => push_u64(out, req.remote.port().into()),
        Var::ServerAddr => push_ip(out, req.local.ip()),
        Var::ServerPort => push_u64(out, req.local.port().into()),
        Var::ProxyProtocolAddr
        | Var::ProxyProtocolPort
        | Var::ProxyProtocolServerAddr
        | Var::ProxyProtocolServerPort => push_proxy_protocol(v, req, out),
        Var::ServerName => out.extend_from_slice(req.server_name.as_bytes()),
        Var::Host => out.extend_from_slice(req.host().as_bytes()),
        Var::Uri => out.extend_from_slice(req.path.as_bytes()),
        Var::RequestUri => out.extend_from_slice(
            req.uri
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/")
                .as_bytes(),
        ),
        Var::RequestMethod => out.extend_from_slice(req.method.as_str().as_bytes()),
        Var::Request => req.push_request_line(out),
        Var::Args => out.extend_from_slice(req.uri.query().unwrap_or("").as_bytes()),
        Var::ServerProtocol => out.extend_from_slice(version_str(req.version).as_bytes()),
        Var::Scheme => out.extend_from_slice(if req.tls.is_some() { b"https" } else { b"http" }),
        Var::Https => out.extend_from_slice(if req.tls.is_some() { b"on" } else { b"" }),
        Var::SslProtocol | Var::SslServerName | Var::SslCipher | Var::SslEarlyData => {
            push_ssl(v, req, out)
        }
        Var::Http(name) => {
            if let Some(v) = req.headers.get(name) {
                out.extend_from_slice(v);
            }
        }
        Var::Cookie(name) => {
            for h in req.headers.get_all(&http::header::COOKIE) {
                if let Some(v) = find_pair(h, b';', name.as_bytes(), true) {
                    out.extend_from_slice(v);
                    return;
                }
            }
        }
        Var::User(i) => {
            if let Some(u) = req.user {
                u.eval(*i, req, out);
            }
        }
        Var::ProxyAddXForwardedFor => {
            const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");
            for v in req.headers.get_all(&XFF) {
                out.extend_from_slice(v);
                out.extend_from_slice(b", ");
            }
            push_ip(out, req.remote.ip());
        }
        Var::Arg(name) => {
            if let Some(q) = req.uri.query() {
                if let Some(v) = find_pair(q.as_bytes(), b'&', name.as_bytes(), false) {
                    out.extend_from_slice(v);
                }
            }
        }
        _ => {}
    }
}

/// The variables of a response sluice makes or logs.
fn eval_response_var(v: &Var, resp: Option<&ResponseVars>, out: &mut Vec<u8>) {
    match v {
        Var::Status => {
            if let Some(r) = resp {
                // nginx's `%03ui`: `000` for a request that got no status.
                match r.status {
                    0 => out.extend_from_slice(b"000"),
                    s => push_u64(out, s.into()),
                }
            }
        }
        Var::RetryAfter => {
            if let Some(s) = resp.and_then(|r| r.retry_after) {
                push_u64(out, s);
            }
        }
        // nginx's is not found (empty) when no limit applied; the access
        // log prints that as `-`.
        Var::LimitReqStatus => {
            if let Some(s) = resp.and_then(|r| r.limit_req_status) {
                out.extend_from_slice(s.as_str().as_bytes())
            }
        }
        Var::LimitReqZone => {
            if let Some(r) = resp {
                out.extend_from_slice(r.limit_req_zone.as_bytes());
            }
        }
        Var::LimitConnStatus => {
            if let Some(r) = resp {
                out.extend_from_slice(r.limit_conn_status.as_bytes());
            }
        }
        _ => {}
    }
}

/// The variables only the access log knows, once the response is done.
fn eval_log_var(v: &Var, l: &LogVars, out: &mut Vec<u8>) {
    match v {
        Var::BodyBytesSent => push_u64(out, l.body_bytes_sent),
        Var::RequestTime => push_secs(out, l.request_time_ms),
        Var::UpstreamResponseTime
        | Var::UpstreamHeaderTime
        | Var::UpstreamAddr
        | Var::UpstreamStatus => upstream::eval(v, &l.upstream, out),
        Var::TimeLocal => push_time(out, l.unix_ms, false),
        Var::TimeIso8601 => push_time(out, l.unix_ms, true),
        Var::Msec => push_secs(out, l.unix_ms),
        Var::ConnectionId => push_u64(out, l.connection),
        Var::LimitReqAlgorithm => out.extend_from_slice(l.limit_req_algorithm.as_bytes()),
        Var::UpstreamTrailer(_) | Var::GrpcStatus | Var::GzipRatio => {
            upstream::eval_grpc(v, l, out)
        }
        _ => {}
    }
}

/// The value of `name` in `a=1<sep>b=2`; names match case-insensitively for
/// arguments (as nginx) and exactly for cookies.
fn find_pair<'a>(s: &'a [u8], sep: u8, name: &[u8], exact: bool) -> Option<&'a [u8]> {
    for pair in s.split(|&c| c == sep) {
        let pair = pair.trim_ascii_start();
        let (k, v) = match pair.iter().position(|&c| c == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => continue,
        };
        let same = if exact {
            k == name
        } else {
            k.eq_ignore_ascii_case(name)
        };
        if same {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests;
