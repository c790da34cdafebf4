//! The access log: one line per request in an nginx `log_format`, written
//! when the response is finished (or the client went away), with
//! `$limit_req_status` so that limiting decisions can be audited.
//!
//! A line is written when the response body ends or is dropped, so
//! `$body_bytes_sent` and `$request_time` cover the whole streamed body; a
//! client that goes away while delayed is logged with status 499, as nginx.

use crate::body::Body;
use crate::http1::Fields;
use crate::limiter::LimitReqStatus;
use crate::vars::{LogVars, RequestVars, ResponseVars, Template, Var};
use http::{Method, Uri, Version};

use std::net::SocketAddr;
use std::sync::Arc;

/// nginx's `combined` format followed by the request time and the limiting
/// decision.
pub const DEFAULT_FORMAT: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\" $request_time $limit_req_status";

/// The line with `log_format_escape = "json"` and no `log_format`: one JSON
/// object per request, the same fields as [`DEFAULT_FORMAT`] plus the zone.
pub const DEFAULT_JSON_FORMAT: &str = r#"{"time":"$time_iso8601","remote_addr":"$remote_addr","request":"$request","status":$status,"body_bytes_sent":$body_bytes_sent,"request_time":$request_time,"upstream_response_time":"$upstream_response_time","http_referer":"$http_referer","http_user_agent":"$http_user_agent","limit_req_status":"$limit_req_status","limit_req_zone":"$limit_req_zone"}"#;

/// Where lines go (shared with the error log, which owns the type).
pub use crate::errlog::{Sink, Sinks};

/// An access log of a location: where, and in which format.
pub struct AccessLog {
    pub sink: Arc<Sink>,
    pub format: Arc<Template>,
    /// `syslog:…`: each line is a syslog message with this header.
    syslog: Option<crate::errlog::syslog::Params>,
    /// Which clocks the format needs, decided once.
    clocks: Clocks,
}

#[derive(Clone, Copy)]
struct Clocks {
    /// `$request_time`.
    elapsed: bool,
    /// `$msec`: the wall clock to the millisecond.
    wall_ms: bool,
    /// `$time_local`, `$time_iso8601`: the wall clock to the second.
    wall_s: bool,
}

impl AccessLog {
    pub fn new(
        sink: Arc<Sink>,
        format: Arc<Template>,
        syslog: Option<crate::errlog::syslog::Params>,
    ) -> AccessLog {
        let clocks = Clocks {
            elapsed: format.uses(|v| matches!(v, Var::RequestTime)),
            wall_ms: format.uses(|v| matches!(v, Var::Msec)),
            wall_s: format.uses(|v| matches!(v, Var::TimeLocal | Var::TimeIso8601)),
        };
        AccessLog {
            sink,
            format,
            syslog,
            clocks,
        }
    }
}

/// What a line needs about its request, owned so it can outlive the handler.
pub struct Record {
    pub log: Arc<AccessLog>,
    /// See [`RequestVars::raw_request_line`].
    pub raw_request_line: Option<Vec<u8>>,
    pub tls: Option<Arc<crate::tls::Session>>,
    /// The request's map and geo values, shared with the request.
    pub user: Option<Arc<crate::vars::UserVars>>,
    pub remote: SocketAddr,
    pub local: SocketAddr,
    pub proxy: Option<Box<crate::proxy_protocol::Addresses>>,
    pub server_name: String,
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub path: String,
    pub headers: Fields,
    pub start: tokio::time::Instant,
    pub connection: u64,
    pub status: u16,
    pub limit_req_status: Option<LimitReqStatus>,
    pub zone: String,
    /// The upstream servers tried (see [`crate::vars::UpstreamTry`]).
    pub upstream: Vec<crate::vars::UpstreamTry>,
    /// `$limit_conn_status` (empty: no `limit_conn` decided).
    pub limit_conn_status: &'static str,
    /// `$limit_req_algorithm`: the algorithm of `zone`, `-` when none.
    pub limit_req_algorithm: &'static str,
    /// `$upstream_trailer_NAME`: the trailers the response body ended with.
    pub upstream_trailers: Option<Box<http::HeaderMap>>,
    /// `$grpc_status`: the code of a gRPC answer sluice made itself.
    pub grpc_status: Option<u8>,
    /// `$gzip_ratio`: filled by the compressed body as it ends.
    pub gzip_ratio: Option<std::sync::Arc<crate::compress::Ratio>>,
}

impl Record {
    pub fn new(
        log: Arc<AccessLog>,
        vars: &RequestVars,
        connection: u64,
        start: tokio::time::Instant,
    ) -> Record {
        Record {
            log,
            raw_request_line: vars.raw_request_line.map(<[u8]>::to_vec),
            tls: vars.tls.cloned(),
            user: vars.user.cloned(),
            remote: vars.remote,
            local: vars.local,
            proxy: vars.proxy.map(|p| Box::new(*p)),
            server_name: vars.server_name.to_string(),
            method: vars.method.clone(),
            uri: vars.uri.clone(),
            version: vars.version,
            path: vars.path.to_string(),
            headers: vars.headers.clone(),
            start,
            connection,
            status: 0,
            limit_req_status: None,
            zone: String::new(),
            upstream: Vec::new(),
            limit_conn_status: "",
            limit_req_algorithm: "-",
            upstream_trailers: None,
            grpc_status: None,
            gzip_ratio: None,
        }
    }

    /// Render and write the line.
    pub fn write(&self, body_bytes_sent: u64) {
        let req = RequestVars {
            remote: self.remote,
            local: self.local,
            proxy: self.proxy.as_deref(),
            server_name: &self.server_name,
            method: &self.method,
            uri: &self.uri,
            version: self.version,
            path: &self.path,
            headers: &self.headers,
            raw_request_line: self.raw_request_line.as_deref(),
            tls: self.tls.as_ref(),
            user: self.user.as_ref(),
        };
        let log = LogVars {
            body_bytes_sent,
            // Clocks are read only for the variables that need them.
            request_time_ms: if self.log.clocks.elapsed {
                crate::clock::since(self.start).as_millis() as u64
            } else {
                0
            },
            upstream: self.upstream.clone(),
            unix_ms: if self.log.clocks.wall_ms {
                crate::errlog::unix_ms()
            } else if self.log.clocks.wall_s {
                // Whole seconds only: the clock the kernel keeps per tick
                // (nginx too prints a cached time).
                crate::errlog::Timestamp::coarse_now().unix_ms()
            } else {
                0
            },
            connection: self.connection,
            limit_req_algorithm: self.limit_req_algorithm,
            upstream_trailers: self.upstream_trailers.clone(),
            grpc_status: self.grpc_status,
            gzip_ratio: self.gzip_ratio.as_ref().map(|r| r.get()),
        };
        let resp = ResponseVars {
            proxy_host: "",
            status: self.status,
            retry_after: None,
            limit_req_status: self.limit_req_status,
            limit_req_zone: &self.zone,
            limit_conn_status: self.limit_conn_status,
            log: Some(&log),
        };
        // Formatted into the worker's batch (see crate::batch); nginx writes
        // each line. On stderr, in one batch with the error log's lines, in
        // order.
        // (The stderr sink is the error log's: one batch, in order.)
        crate::batch::write_with(&self.log.sink, |line| match &self.log.syslog {
            // nginx sends the line without its newline, after the header.
            Some(p) => crate::errlog::syslog::push_frame(line, |out| {
                let now = crate::errlog::Timestamp::coarse_now();
                p.push_header(out, p.severity, &now);
                self.log.format.eval(&req, Some(&resp), out);
            }),
            None => {
                self.log.format.eval(&req, Some(&resp), line);
                line.push(b'\n');
            }
        });
    }
}

/// Writes the access-log line when its response body ends, fails or is
/// dropped, with the bytes the body carried.
pub(crate) struct LoggedBody {
    bytes: u64,
    record: Box<Record>,
}

impl LoggedBody {
    /// `inner`, writing `record` once it is done.
    pub(crate) fn wrap(inner: Body, record: Record) -> Body {
        use http_body_util::BodyExt;
        let watch = LoggedBody {
            bytes: 0,
            record: Box::new(record),
        };
        crate::body::Watched::new(inner, watch).boxed()
    }
}

impl crate::body::Watch for LoggedBody {
    fn data(&mut self, len: usize) {
        self.bytes += len as u64;
    }

    fn trailers(&mut self, trailers: &http::HeaderMap) {
        self.record.upstream_trailers = Some(Box::new(trailers.clone()));
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        self.record.write(self.bytes);
    }
}
