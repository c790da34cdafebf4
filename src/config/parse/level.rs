//! The settings http, server and location levels share (nginx's
//! directives that may appear in `http`, `server` and `location`), and
//! those of http and server only (read before a location is known).
//!
//! Each key has a small reader into a [`LevelDraft`]; [`Leveled::LEVEL`]
//! lists the shared ones once, for the three sections' schemas. The zones
//! that `limit_req` and `limit_conn` name are kept as names here and
//! resolved by validation, once every zone is known.

use super::super::spec::Level;
use super::super::upstream_tls::{PemFile, PemKind, ProxySsl};
use super::super::values;
use super::limits::{self, ConnUse, LimitUse};
use super::read::{Cx, Key, Reported, Schema, Val};
use crate::realip::{RealIp, Source};
use crate::respond::{ErrorPage, ErrorPages, RateLimitHeaders};
use crate::vars::{Context, Template};
use http::HeaderName;
use std::sync::Arc;

/// A level as read: its settings, and its `limit_req` and `limit_conn`
/// lists with zones still by name (`None`: not set here, or reported).
#[derive(Default)]
pub(in crate::config) struct LevelDraft {
    pub level: Level,
    pub limit_req: Option<Vec<LimitUse>>,
    pub limit_conn: Option<Vec<ConnUse>>,
}

/// A section that carries level settings: the top level, a server, a
/// location.
pub(in crate::config) trait Leveled: Sized + 'static {
    fn level(&mut self) -> &mut LevelDraft;

    /// The keys every level accepts, in the order error messages list them.
    const LEVEL: &'static [Key<Self>] = &[
        level_key!("limit_req", limit_req),
        level_key!("limit_req_status", limit_req_status),
        level_key!("limit_req_log_level", limit_req_log_level),
        level_key!("limit_req_dry_run", limit_req_dry_run),
        level_key!("limit_conn", limit_conn),
        level_key!("limit_conn_status", limit_conn_status),
        level_key!("limit_conn_log_level", limit_conn_log_level),
        level_key!("limit_conn_dry_run", limit_conn_dry_run),
        level_key!("error_pages", error_pages),
        level_key!("access", access),
        level_key!("proxy_connect_timeout", proxy_connect_timeout),
        level_key!("proxy_read_timeout", proxy_read_timeout),
        level_key!("proxy_send_timeout", proxy_send_timeout),
        level_key!("client_body_timeout", client_body_timeout),
        level_key!("access_log", access_log),
        level_key!("error_log", error_log),
        level_key!("ratelimit_headers", ratelimit_headers),
        level_key!("grpc_errors", grpc_errors),
        level_key!("client_max_body_size", client_max_body_size),
        level_key!("proxy_request_buffering", proxy_request_buffering),
        level_key!("client_body_buffer_size", client_body_buffer_size),
        level_key!("client_body_temp_path", client_body_temp_path),
        level_key!("proxy_ssl_verify", proxy_ssl_verify),
        level_key!(
            "proxy_ssl_trusted_certificate",
            proxy_ssl_trusted_certificate
        ),
        level_key!("proxy_ssl_server_name", proxy_ssl_server_name),
        level_key!("proxy_ssl_name", proxy_ssl_name),
        level_key!("proxy_ssl_certificate", proxy_ssl_certificate),
        level_key!("proxy_ssl_certificate_key", proxy_ssl_certificate_key),
        level_key!("proxy_ssl_protocols", proxy_ssl_protocols),
        level_key!("proxy_set_header", super::headers::proxy_set_header),
        level_key!("add_header", super::headers::add_header),
        level_key!("proxy_hide_header", super::headers::proxy_hide_header),
        level_key!("proxy_pass_header", super::headers::proxy_pass_header),
        level_key!("proxy_next_upstream", proxy_next_upstream),
        level_key!("proxy_next_upstream_tries", proxy_next_upstream_tries),
        level_key!("proxy_next_upstream_timeout", proxy_next_upstream_timeout),
        // nginx's grpc module: the same values, a set of their own.
        level_key!("grpc_connect_timeout", proxy_connect_timeout),
        level_key!("grpc_read_timeout", proxy_read_timeout),
        level_key!("grpc_send_timeout", proxy_send_timeout),
        level_key!("grpc_ssl_verify", proxy_ssl_verify),
        level_key!(
            "grpc_ssl_trusted_certificate",
            proxy_ssl_trusted_certificate
        ),
        level_key!("grpc_ssl_server_name", proxy_ssl_server_name),
        level_key!("grpc_ssl_name", proxy_ssl_name),
        level_key!("grpc_ssl_certificate", proxy_ssl_certificate),
        level_key!("grpc_ssl_certificate_key", proxy_ssl_certificate_key),
        level_key!("grpc_ssl_protocols", proxy_ssl_protocols),
        level_key!("grpc_set_header", super::headers::proxy_set_header),
        level_key!("grpc_hide_header", super::headers::proxy_hide_header),
        level_key!("grpc_pass_header", super::headers::proxy_pass_header),
        level_key!("grpc_next_upstream", proxy_next_upstream),
        level_key!("grpc_next_upstream_tries", proxy_next_upstream_tries),
        level_key!("grpc_next_upstream_timeout", proxy_next_upstream_timeout),
        level_key!("gzip", super::compress::gzip),
        level_key!("gzip_types", super::compress::gzip_types),
        level_key!("gzip_min_length", super::compress::gzip_min_length),
        level_key!("gzip_proxied", super::compress::gzip_proxied),
        level_key!("gzip_vary", super::compress::gzip_vary),
        level_key!("gzip_disable", super::compress::gzip_disable),
        level_key!("gzip_http_version", super::compress::gzip_http_version),
        level_key!("gzip_comp_level", super::compress::gzip_comp_level),
        level_key!("gzip_buffers", super::compress::gzip_buffers),
        level_key!("compress", super::compress::compress),
        level_key!("zstd_comp_level", super::compress::zstd_comp_level),
        level_key!("brotli_comp_level", super::compress::brotli_comp_level),
    ];
}

type R<'a> = &'a mut LevelDraft;

/// Whether `k` is one of nginx's grpc module's keys: the readers of the
/// `proxy_*` keys read their `grpc_*` twins too, into the level's `grpc`
/// set (see [`super::super::grpc`]).
pub(super) fn is_grpc(k: &str) -> bool {
    k.starts_with("grpc_")
}

/// The `proxy_ssl_*` or `grpc_ssl_*` set `k` belongs to.
fn ssl<'a>(k: &str, l: R<'a>) -> &'a mut ProxySsl {
    if is_grpc(k) {
        &mut l.level.grpc.ssl
    } else {
        &mut l.level.proxy_ssl
    }
}

fn limit_req(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.limit_req = limits::limit_reqs(cx, k, v);
}

fn limit_req_status(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.status = cx.status(v, k, 400..=599);
}

fn limit_req_log_level(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.log_level = cx.log_level(v, k);
}

fn limit_req_dry_run(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.dry_run = cx.bool(v, k);
}

fn limit_conn(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.limit_conn = limits::limit_conns(cx, k, v);
}

fn limit_conn_status(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.conn_status = cx.status(v, k, 400..=599);
}

fn limit_conn_log_level(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.conn_log_level = cx.log_level(v, k);
}

fn limit_conn_dry_run(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.conn_dry_run = cx.bool(v, k);
}

fn error_pages(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.error_pages = read_error_pages(cx, k, v).map(Arc::new);
}

/// `access = ["allow 10.0.0.0/8", "deny all"]`: nginx's lines, in order.
fn access(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let mut rules = Vec::new();
    let items: Vec<&Val> = match v.get_ref() {
        toml::de::DeValue::Array(items) => items.iter().collect(),
        _ => vec![v],
    };
    for item in items {
        if let Some(s) = cx.str(item, k) {
            match crate::access::Rule::parse(s) {
                Ok(r) => rules.push(r),
                Err(e) => cx.err(item.span(), e),
            }
        }
    }
    l.level.access = Some(Arc::new(rules));
}

fn proxy_connect_timeout(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let d = cx.duration(v, k);
    if is_grpc(k) {
        l.level.grpc.connect_timeout = d;
    } else {
        l.level.proxy_connect_timeout = d;
    }
}

fn proxy_read_timeout(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let d = cx.duration(v, k);
    if is_grpc(k) {
        l.level.grpc.read_timeout = d;
    } else {
        l.level.proxy_read_timeout = d;
    }
}

fn proxy_send_timeout(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let d = cx.duration(v, k);
    if is_grpc(k) {
        l.level.grpc.send_timeout = d;
    } else {
        l.level.proxy_send_timeout = d;
    }
}

fn client_body_timeout(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.client_body_timeout = cx.duration(v, k);
}

/// `"off"`, `"stdout"`, `"stderr"`, `"syslog:…"` or a path.
fn access_log(cx: &mut Cx, k: &str, v: &Val, l: R) {
    match cx.str(v, k) {
        Some("") => cx.err(
            v.span(),
            "\"access_log\" must be \"off\", \"stdout\", \"stderr\", \"syslog:…\" or a file path",
        ),
        Some(s) if s.starts_with("syslog:") => {
            match crate::errlog::syslog::Params::parse(&s["syslog:".len()..]) {
                Ok(_) => l.level.access_log = Some(Some(s.to_string())),
                Err(e) => cx.err(v.span(), format!("\"access_log\": {e}")),
            }
        }
        Some(s) => l.level.access_log = Some((s != "off").then(|| s.to_string())),
        None => {}
    }
}

/// nginx's `error_log` arguments, `"TARGET [LEVEL]"`, or a list of them.
fn error_log(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let items: Vec<&Val> = match v.get_ref() {
        toml::de::DeValue::Array(items) => items.iter().collect(),
        _ => vec![v],
    };
    if items.is_empty() {
        return cx.err(v.span(), "\"error_log\" must name at least one target");
    }
    let mut targets = Vec::new();
    for item in items {
        if let Some(s) = cx.str(item, k) {
            match crate::errlog::TargetSpec::parse(s) {
                Ok(t) => targets.push(t),
                Err(e) => cx.err(item.span(), format!("\"error_log\": {e}")),
            }
        }
    }
    l.level.error_log = Some(Arc::new(targets));
}

fn ratelimit_headers(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(s) = cx.str(v, k) else { return };
    l.level.ratelimit_headers = match s {
        "draft" => Some(RateLimitHeaders::Draft),
        "legacy" => Some(RateLimitHeaders::Legacy),
        "off" => Some(RateLimitHeaders::Off),
        _ => {
            cx.err(
                v.span(),
                format!("invalid ratelimit_headers \"{s}\" (expected draft, legacy or off)"),
            );
            None
        }
    };
}

/// `"grpc"` (trailers-only answers on `grpc_pass` locations) or `"http"`
/// (nginx's own answers).
fn grpc_errors(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(s) = cx.str(v, k) else { return };
    match crate::respond::grpc::GrpcErrors::parse(s) {
        Some(m) => l.level.grpc_errors = Some(m),
        None => cx.err(
            v.span(),
            format!("invalid grpc_errors \"{s}\" (expected grpc or http)"),
        ),
    }
}

/// nginx's offset syntax (`1g` allowed); 0 = unlimited.
fn client_max_body_size(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.client_max_body_size = cx.scalar_text(v, k).and_then(|s| {
        values::parse_offset(&s)
            .map_err(|e| cx.err(v.span(), format!("\"{k}\": {e}")))
            .ok()
    });
}

fn proxy_request_buffering(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.proxy_request_buffering = cx.bool(v, k);
}

fn client_body_buffer_size(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.client_body_buffer_size =
        cx.scalar_text(v, k)
            .and_then(|s| match values::parse_size(&s) {
                Ok(n) if (1..=1 << 30).contains(&n) => Some(n as usize),
                _ => {
                    cx.err(
                        v.span(),
                        format!("\"{k}\": invalid size \"{s}\" (e.g. \"16k\", at most 1g)"),
                    );
                    None
                }
            });
}

fn client_body_temp_path(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.client_body_temp_path = cx.str(v, k).map(|s| Arc::new(std::path::PathBuf::from(s)));
}

// --- HTTPS upstreams (see config::upstream_tls) -----------------------------

fn proxy_ssl_verify(cx: &mut Cx, k: &str, v: &Val, l: R) {
    ssl(k, l).verify = cx.bool(v, k);
}

fn proxy_ssl_server_name(cx: &mut Cx, k: &str, v: &Val, l: R) {
    ssl(k, l).server_name = cx.bool(v, k);
}

/// A file path, named here and read by the file step.
fn pem_file(cx: &mut Cx, k: &str, v: &Val, kind: PemKind) -> Option<Arc<PemFile>> {
    match cx.str(v, k)? {
        "" => {
            cx.err(v.span(), format!("\"{k}\" must be a file path"));
            None
        }
        s => Some(Arc::new(PemFile::new(kind, is_grpc(k), s.into(), v.span()))),
    }
}

fn proxy_ssl_trusted_certificate(cx: &mut Cx, k: &str, v: &Val, l: R) {
    ssl(k, l).trusted_certificate = pem_file(cx, k, v, PemKind::Roots);
}

fn proxy_ssl_certificate(cx: &mut Cx, k: &str, v: &Val, l: R) {
    ssl(k, l).certificate = pem_file(cx, k, v, PemKind::Chain);
}

fn proxy_ssl_certificate_key(cx: &mut Cx, k: &str, v: &Val, l: R) {
    ssl(k, l).certificate_key = pem_file(cx, k, v, PemKind::Key);
}

/// A host name or an IP address (`[::1]` or `::1`): what the certificate
/// must be for, and the SNI sent (none for an address).
fn proxy_ssl_name(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(s) = cx.str(v, k) else { return };
    let bare = s
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(s);
    match rustls::pki_types::ServerName::try_from(bare.to_string()) {
        Ok(name) => ssl(k, l).name = Some(name),
        Err(_) => cx.err(
            v.span(),
            format!("invalid {k} \"{s}\" (expected a host name or an IP address)"),
        ),
    }
}

/// nginx's list, `"TLSv1.2 TLSv1.3"`, or a TOML array of the same names
/// (read as `ssl_protocols` is).
fn proxy_ssl_protocols(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(words) = cx.scalar_list(v, k) else {
        return;
    };
    match crate::tls::parse_protocols(&words) {
        Ok(p) => ssl(k, l).protocols = Some(p),
        Err(e) => cx.err(v.span(), format!("\"{k}\": {e}")),
    }
}

// --- upstream groups (see upstream::group) ---------------------------------

/// `["error", "timeout"]`, `"error timeout"` or `"off"`.
fn proxy_next_upstream(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(words) = cx.scalar_list(v, k) else {
        return;
    };
    match crate::upstream::group::Conditions::parse(&words) {
        Ok(c) if is_grpc(k) => l.level.grpc.next_upstream = Some(c),
        Ok(c) => l.level.proxy_next_upstream = Some(c),
        Err(e) => cx.err(v.span(), format!("\"{k}\": {e}")),
    }
}

fn proxy_next_upstream_tries(cx: &mut Cx, k: &str, v: &Val, l: R) {
    match cx.int(v, k) {
        Some(n) if (0..=1_000_000).contains(&n) => {
            let n = Some(n as usize);
            if is_grpc(k) {
                l.level.grpc.next_upstream_tries = n;
            } else {
                l.level.proxy_next_upstream_tries = n;
            }
        }
        Some(_) => cx.err(
            v.span(),
            format!("\"{k}\": value must be between 0 and 1000000"),
        ),
        None => {}
    }
}

fn proxy_next_upstream_timeout(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let d = cx.duration(v, k);
    if is_grpc(k) {
        l.level.grpc.next_upstream_timeout = d;
    } else {
        l.level.proxy_next_upstream_timeout = d;
    }
}

// --- http and server only: what is needed before a location is known ----

pub(super) fn client_header_timeout(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.client_header_timeout = cx.duration(v, k);
}

pub(super) fn keepalive_timeout(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.keepalive_timeout = cx.duration(v, k);
}

pub(super) fn send_timeout(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.send_timeout = cx.duration(v, k);
}

pub(super) fn real_ip(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.real_ip = read_real_ip(cx, k, v).map(Arc::new);
}

pub(super) fn underscores_in_headers(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.underscores_in_headers = cx.bool(v, k);
}

pub(super) fn ignore_invalid_headers(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.ignore_invalid_headers = cx.bool(v, k);
}

pub(super) fn large_client_header_buffers(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.large_client_header_buffers =
        cx.str(v, k)
            .and_then(|s| match values::parse_header_buffers(s) {
                Ok(b) => Some(b),
                Err(e) => {
                    cx.err(v.span(), format!("\"{k}\": {e}"));
                    None
                }
            });
}

// --- tables inside a level --------------------------------------------------

/// `real_ip = { from, header, recursive }` as read.
struct RealIpDraft {
    from: Option<Vec<ipnet::IpNet>>,
    header: Result<Source, Reported>,
    recursive: bool,
}

/// `real_ip`'s keys. A bad `header` ends the table: `recursive` is then not
/// looked at (as it always was).
static REAL_IP: Schema<RealIpDraft> = Schema::plain(&[
    Key {
        name: "from",
        read: |cx, k, v, r| r.from = Some(cx.cidrs(v, k)),
    },
    Key {
        name: "header",
        read: |cx, k, v, r| r.header = real_ip_header(cx, k, v),
    },
    Key {
        name: "recursive",
        read: |cx, k, v, r| {
            if r.header.is_ok() {
                r.recursive = cx.bool(v, k).unwrap_or(false);
            }
        },
    },
]);

/// A header's name, or `proxy_protocol` / `Forwarded`.
fn real_ip_header(cx: &mut Cx, k: &str, v: &Val) -> Result<Source, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    Source::parse(s).ok_or_else(|| {
        cx.err(v.span(), format!("invalid header name \"{s}\""));
        Reported
    })
}

fn read_real_ip(cx: &mut Cx, k: &str, v: &Val) -> Option<RealIp> {
    let t = cx.table(v, k)?;
    let mut r = RealIpDraft {
        from: None,
        header: Ok(Source::Header(HeaderName::from_static("x-forwarded-for"))),
        recursive: false,
    };
    REAL_IP.read(cx, t, "real_ip", &mut r);
    let from = r.from.unwrap_or_else(|| {
        cx.err(
            v.span(),
            "\"real_ip\" must have \"from\": the trusted proxies' addresses or networks",
        );
        Vec::new()
    });
    Some(RealIp {
        from,
        source: r.header.ok()?,
        recursive: r.recursive,
    })
}

/// `[error_pages.CODE]`'s keys; `status` defaults to `CODE`.
static ERROR_PAGE: Schema<ErrorPage> = Schema::plain(&[
    Key {
        name: "status",
        read: |cx, k, v, p| {
            if let Some(s) = cx.status(v, k, 200..=599) {
                p.status = s;
            }
        },
    },
    Key {
        name: "headers",
        read: |cx, _, v, p| p.headers = headers(cx, v),
    },
    Key {
        name: "body",
        read: |cx, k, v, p| p.body = cx.template(v, k, Context::Response),
    },
    Key {
        name: "grpc_status",
        read: |cx, k, v, p| {
            let n = cx.status(v, k, 0..=16);
            p.grpc.status = n.and_then(|n| crate::respond::grpc::Code::from_u8(n as u8));
        },
    },
    Key {
        name: "grpc_message",
        read: |cx, k, v, p| p.grpc.message = cx.str(v, k).map(str::to_string),
    },
]);

/// `[error_pages.CODE]` tables.
fn read_error_pages(cx: &mut Cx, k: &str, v: &Val) -> Option<ErrorPages> {
    let t = cx.table(v, k)?;
    let mut pages = ErrorPages::new();
    for (k, pv) in t.iter() {
        let code = match k.get_ref().parse::<u16>() {
            Ok(c) if (300..=599).contains(&c) => c,
            _ => {
                cx.err(
                    k.span(),
                    format!(
                        "invalid error_pages key \"{}\": must be a status code between 300 and 599",
                        k.get_ref()
                    ),
                );
                continue;
            }
        };
        let Some(pt) = cx.table(pv, k.get_ref()) else {
            continue;
        };
        let mut page = ErrorPage {
            status: code,
            headers: Vec::new(),
            body: None,
            grpc: Default::default(),
        };
        ERROR_PAGE.read(cx, pt, &format!("[error_pages.{code}]"), &mut page);
        pages.insert(code, page);
    }
    Some(pages)
}

/// `headers = { NAME = "template", … }` of an error page or a `return`.
pub(super) fn headers(cx: &mut Cx, v: &Val) -> Vec<(HeaderName, Template)> {
    let mut out = Vec::new();
    let Some(t) = cx.table(v, "headers") else {
        return out;
    };
    for (k, hv) in t.iter() {
        let name = match HeaderName::from_bytes(k.get_ref().as_bytes()) {
            Ok(n) => n,
            Err(_) => {
                cx.err(k.span(), format!("invalid header name \"{}\"", k.get_ref()));
                continue;
            }
        };
        if let Some(t) = cx.template(hv, k.get_ref(), Context::Response) {
            out.push((name, t));
        }
    }
    out
}
