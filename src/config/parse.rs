//! TOML text → [`Spec`], reporting every problem at once.
//!
//! We walk toml's spanned document tree by hand instead of deriving serde
//! types: serde stops at the first unknown key or wrong type, and users
//! fixing a file want the whole list, each with its line and column.

use super::error::Diagnostics;
use super::values::{self, PathRule};
use super::*;
use crate::errlog::Severity;
use crate::respond::{ErrorPage, ErrorPages, RateLimitHeaders, ReturnSpec};
use crate::vars::{Context, LogEscape, Template};
use http::HeaderName;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

type Val<'i> = Spanned<DeValue<'i>>;

fn type_name(v: &DeValue) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

struct Cx {
    d: Diagnostics,
}

impl Cx {
    fn err(&mut self, span: Range<usize>, msg: impl Into<String>) {
        self.d.error(span, msg);
    }

    /// Report keys of `t` that are not in `allowed`.
    fn check_keys(&mut self, t: &DeTable, allowed: &[&str], what: &str) {
        for (k, _) in t.iter() {
            if !allowed.contains(&k.get_ref().as_ref()) {
                self.err(
                    k.span(),
                    format!(
                        "unknown key \"{}\" in {what} (expected one of: {})",
                        k.get_ref(),
                        allowed.join(", ")
                    ),
                );
            }
        }
    }

    fn str<'a>(&mut self, v: &'a Val, key: &str) -> Option<&'a str> {
        match v.get_ref() {
            DeValue::String(s) => Some(s),
            other => {
                self.err(
                    v.span(),
                    format!("\"{key}\" must be a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn bool(&mut self, v: &Val, key: &str) -> Option<bool> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                self.err(
                    v.span(),
                    format!(
                        "\"{key}\" must be true or false, found {}",
                        type_name(other)
                    ),
                );
                None
            }
        }
    }

    fn int(&mut self, v: &Val, key: &str) -> Option<i128> {
        match v.get_ref() {
            DeValue::Integer(i) => match i128::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.err(v.span(), format!("\"{key}\" is out of range"));
                    None
                }
            },
            other => {
                self.err(
                    v.span(),
                    format!("\"{key}\" must be an integer, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn table<'a, 'i>(&mut self, v: &'a Val<'i>, key: &str) -> Option<&'a DeTable<'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            other => {
                self.err(
                    v.span(),
                    format!("\"{key}\" must be a table, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A string or an integer, as text (sizes, rates, times may be either).
    fn scalar_text(&mut self, v: &Val, key: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            DeValue::Integer(i) => Some(i.as_str().to_string()),
            other => {
                self.err(
                    v.span(),
                    format!("\"{key}\" must be a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn template(&mut self, v: &Val, key: &str, cx: Context) -> Option<Template> {
        let s = self.str(v, key)?;
        match Template::parse(s, cx) {
            Ok(t) => Some(t),
            Err(e) => {
                // The span starts at the opening quote.
                let at = v.span().start + 1 + e.offset;
                self.err(at..at + 1, e.message);
                None
            }
        }
    }

    /// `info`, `notice`, `warn` or `error`.
    fn log_level(&mut self, v: &Val, key: &str) -> Option<Severity> {
        let s = self.str(v, key)?;
        let level = Severity::from_name(s).filter(|l| LIMIT_LEVELS.contains(l));
        if level.is_none() {
            self.err(
                v.span(),
                format!("invalid {key} \"{s}\" (expected info, notice, warn or error)"),
            );
        }
        level
    }

    /// A list of addresses or networks (`"10.0.0.0/8"`, `"::1"`).
    fn cidrs(&mut self, v: &Val, key: &str) -> Vec<ipnet::IpNet> {
        let mut out = Vec::new();
        match v.get_ref() {
            DeValue::Array(items) => {
                for item in items.iter() {
                    if let Some(s) = self.str(item, key) {
                        match crate::realip::parse_cidr(s) {
                            Ok(n) => out.push(n),
                            Err(e) => self.err(item.span(), e),
                        }
                    }
                }
            }
            other => self.err(
                v.span(),
                format!(
                    "\"{key}\" must be a list of addresses or networks, found {}",
                    type_name(other)
                ),
            ),
        }
        out
    }

    fn duration(&mut self, v: &Val, key: &str) -> Option<Duration> {
        let s = self.scalar_text(v, key)?;
        values::parse_duration(&s)
            .map_err(|e| self.err(v.span(), format!("\"{key}\": {e}")))
            .ok()
    }
}

/// The levels nginx's `limit_req_log_level` accepts (and so
/// `error_log_level` here).
const LIMIT_LEVELS: [Severity; 4] = [
    Severity::Info,
    Severity::Notice,
    Severity::Warn,
    Severity::Error,
];

fn get<'a, 'i>(t: &'a DeTable<'i>, key: &str) -> Option<&'a Val<'i>> {
    t.iter()
        .find(|(k, _)| k.get_ref().as_ref() == key)
        .map(|(_, v)| v)
}

/// Keys that every level (http, server, location) accepts.
const LEVEL_KEYS: &[&str] = &[
    "limit_req",
    "limit_req_status",
    "limit_req_log_level",
    "limit_req_dry_run",
    "limit_conn",
    "limit_conn_status",
    "limit_conn_log_level",
    "limit_conn_dry_run",
    "error_pages",
    "proxy_connect_timeout",
    "proxy_read_timeout",
    "proxy_send_timeout",
    "client_body_timeout",
    "access_log",
    "ratelimit_headers",
    "client_max_body_size",
    "proxy_request_buffering",
    "client_body_buffer_size",
    "client_body_temp_path",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    Http,
    Server,
    Location,
}

/// Parse a whole file.
pub(crate) fn parse(file: &str, text: &str) -> Result<Spec, ConfigErrors> {
    let mut cx = Cx {
        d: Diagnostics::default(),
    };
    let (doc, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        for e in syntax {
            let span = e.span().unwrap_or(0..0);
            cx.err(span, e.message().trim().to_string());
        }
        return Err(cx.d.into_errors(file, text));
    }
    let doc = doc.get_ref();

    let mut allowed: Vec<&str> = vec![
        "zones",
        "servers",
        "client_header_timeout",
        "log_format",
        "real_ip",
        "keepalive_timeout",
        "send_timeout",
        "underscores_in_headers",
        "ignore_invalid_headers",
        "large_client_header_buffers",
        "pid_file",
        "watch",
        "shutdown_timeout",
        "error_log_level",
        "log_format_escape",
        "admin",
        "redis",
        "conn_zones",
        "worker_connections",
    ];
    allowed.extend_from_slice(LEVEL_KEYS);
    cx.check_keys(doc, &allowed, "the top level");
    let ops = parse_ops(&mut cx, doc);

    let redis_val = get(doc, "redis");
    let redis = redis_val.and_then(|v| parse_redis(&mut cx, v, file));
    let zones = parse_zones(&mut cx, get(doc, "zones"), redis_val.is_some());
    let conn_zones = parse_conn_zones(&mut cx, get(doc, "conn_zones"), &zones);
    let zones = Zones {
        req: zones,
        conn: conn_zones,
    };
    let log_format =
        get(doc, "log_format").and_then(|v| cx.template(v, "log_format", Context::Log));
    let http = parse_level(&mut cx, doc, &zones, Where::Http);

    let mut servers = Vec::new();
    match get(doc, "servers") {
        None => cx.err(0..0, "no [[servers]]: nothing to listen on"),
        Some(v) => match v.get_ref() {
            DeValue::Array(items) => {
                for item in items.iter() {
                    if let Some(t) = cx.table(item, "servers") {
                        if let Some(s) = parse_server(&mut cx, t, item.span(), &zones, &http) {
                            servers.push(s);
                        }
                    }
                }
            }
            other => cx.err(
                v.span(),
                format!(
                    "\"servers\" must be an array of tables ([[servers]]), found {}",
                    type_name(other)
                ),
            ),
        },
    }
    // Two servers on one address.
    for i in 0..servers.len() {
        for j in 0..i {
            if servers[i].listen == servers[j].listen {
                cx.err(
                    servers[i].listen_span.clone(),
                    format!(
                        "a duplicate listen {} (already used by another [[servers]])",
                        servers[i].listen
                    ),
                );
            }
        }
    }

    if !cx.d.is_empty() {
        return Err(cx.d.into_errors(file, text));
    }
    Ok(Spec {
        http,
        log_format,
        zones: zones.req.into_iter().map(|(z, _)| z).collect(),
        conn_zones: zones.conn.into_iter().map(|(z, _)| z).collect(),
        servers,
        ops,
        redis,
    })
}

/// The top-level keys about the process: pid file, reload, stop, logs,
/// admin listener.
fn parse_ops(cx: &mut Cx, doc: &DeTable) -> OpsSpec {
    let mut ops = OpsSpec::default();
    if let Some(v) = get(doc, "pid_file") {
        match cx.str(v, "pid_file") {
            Some("") => cx.err(v.span(), "\"pid_file\" must be a file path"),
            Some(s) => ops.pid_file = Some(s.into()),
            None => {}
        }
    }
    if let Some(v) = get(doc, "watch") {
        ops.watch = cx.bool(v, "watch").unwrap_or(false);
    }
    if let Some(v) = get(doc, "shutdown_timeout") {
        ops.shutdown_timeout = cx.duration(v, "shutdown_timeout");
    }
    if let Some(v) = get(doc, "error_log_level") {
        ops.error_log_level = cx.log_level(v, "error_log_level");
    }
    if let Some(v) = get(doc, "log_format_escape") {
        if let Some(s) = cx.str(v, "log_format_escape") {
            match s {
                "default" => ops.log_escape = LogEscape::Default,
                "json" => ops.log_escape = LogEscape::Json,
                "none" => ops.log_escape = LogEscape::None,
                _ => cx.err(
                    v.span(),
                    format!("invalid log_format_escape \"{s}\" (expected default, json or none)"),
                ),
            }
        }
    }
    if let Some(v) = get(doc, "worker_connections") {
        // nginx's own maximum is the descriptor limit; a million per worker
        // thread is far beyond any real one and keeps the arithmetic small.
        match cx.int(v, "worker_connections") {
            Some(n) if (1..=1_000_000).contains(&n) => ops.worker_connections = Some(n as usize),
            Some(_) => cx.err(
                v.span(),
                "\"worker_connections\": value must be between 1 and 1000000",
            ),
            None => {}
        }
    }
    if let Some(v) = get(doc, "admin") {
        if let Some(t) = cx.table(v, "admin") {
            cx.check_keys(t, &["listen"], "[admin]");
            match get(t, "listen") {
                None => cx.err(v.span(), "[admin] must have \"listen\""),
                Some(lv) => {
                    if let Some(s) = cx.str(lv, "listen") {
                        match values::parse_listen(s) {
                            Ok(a) => ops.admin = Some(a),
                            Err(e) => cx.err(lv.span(), e),
                        }
                    }
                }
            }
        }
    }
    ops
}

/// `[redis]`: where zones with `backend = "redis"` keep their states.
fn parse_redis(cx: &mut Cx, v: &Val, file: &str) -> Option<RedisConfig> {
    let t = cx.table(v, "redis")?;
    cx.check_keys(
        t,
        &[
            "url", "timeout", "on_error", "prefix", "tls_ca", "tls_cert", "tls_key",
        ],
        "[redis]",
    );
    let url = match get(t, "url") {
        None => {
            cx.err(
                v.span(),
                "[redis] must have a \"url\" (e.g. \"redis://127.0.0.1:6379\")",
            );
            None
        }
        Some(u) => cx.str(u, "url").and_then(|s| {
            crate::limiter::redis::check_url(s)
                .map_err(|e| cx.err(u.span(), e))
                .ok()
                .map(|()| s.to_string())
        }),
    };
    let timeout = match get(t, "timeout") {
        None => Some(RedisConfig::DEFAULT_TIMEOUT),
        Some(tv) => cx.duration(tv, "timeout").and_then(|d| {
            if d.is_zero() {
                cx.err(tv.span(), "\"timeout\" must be at least 1ms");
                None
            } else {
                Some(d)
            }
        }),
    };
    let on_error = match get(t, "on_error") {
        None => Some(OnError::Allow),
        Some(ov) => {
            cx.str(ov, "on_error")
                .and_then(|s| match OnError::parse(s) {
                    Some(o) => Some(o),
                    None => {
                        cx.err(
                    ov.span(),
                    format!("invalid on_error \"{s}\" (expected \"allow\", \"deny\" or \"local\")"),
                );
                        None
                    }
                })
        }
    };
    let prefix = match get(t, "prefix") {
        None => Some(RedisConfig::DEFAULT_PREFIX.to_string()),
        Some(pv) => cx.str(pv, "prefix").and_then(|s| {
            if s.contains(['{', '}']) {
                cx.err(
                    pv.span(),
                    format!("invalid prefix \"{s}\": \"{{\" and \"}}\" are reserved for the cluster hash tag"),
                );
                None
            } else {
                Some(s.to_string())
            }
        }),
    };
    // TLS files: relative to the configuration file, read now so that a
    // missing one is reported here.
    let tls = |cx: &mut Cx, key: &str| -> Result<Option<std::path::PathBuf>, ()> {
        let Some(fv) = get(t, key) else {
            return Ok(None);
        };
        let s = cx.str(fv, key).ok_or(())?;
        let base = std::path::Path::new(file)
            .parent()
            .unwrap_or(std::path::Path::new(""));
        let path = base.join(s);
        if let Err(e) = std::fs::read(&path) {
            cx.err(
                fv.span(),
                format!("\"{key}\": cannot read \"{}\": {e}", path.display()),
            );
            return Err(());
        }
        match &url {
            Some(u) if !u.starts_with("rediss://") => {
                cx.err(fv.span(), format!("\"{key}\" needs a rediss:// url"));
                Err(())
            }
            _ => Ok(Some(path)),
        }
    };
    let tls_ca = tls(cx, "tls_ca");
    let tls_cert = tls(cx, "tls_cert");
    let tls_key = tls(cx, "tls_key");
    if let (Ok(c), Ok(k)) = (&tls_cert, &tls_key) {
        if c.is_some() != k.is_some() {
            cx.err(
                v.span(),
                "[redis] needs both \"tls_cert\" and \"tls_key\" (mutual TLS) or neither",
            );
            return None;
        }
    }
    Some(RedisConfig {
        url: url?,
        timeout: timeout?,
        on_error: on_error?,
        prefix: prefix?,
        tls_ca: tls_ca.ok()?,
        tls_cert: tls_cert.ok()?,
        tls_key: tls_key.ok()?,
    })
}

/// The zones `limit_req` and `limit_conn` may name, with the spans of
/// their names.
struct Zones {
    req: Vec<(ZoneSpec, Range<usize>)>,
    conn: Vec<(ConnZoneSpec, Range<usize>)>,
}

/// `[conn_zones.NAME]`: nginx's `limit_conn_zone KEY zone=NAME:SIZE`. nginx
/// keeps both kinds of zone in one namespace (a shared memory zone has one
/// use), so a name of `[zones]` cannot be a conn zone too: a file
/// translated from or to nginx stays valid.
fn parse_conn_zones(
    cx: &mut Cx,
    v: Option<&Val>,
    req: &[(ZoneSpec, Range<usize>)],
) -> Vec<(ConnZoneSpec, Range<usize>)> {
    let mut out = Vec::new();
    let Some(v) = v else { return out };
    let Some(t) = cx.table(v, "conn_zones") else {
        return out;
    };
    for (name, zv) in t.iter() {
        let Some(zt) = cx.table(zv, name.get_ref()) else {
            continue;
        };
        let what = format!("[conn_zones.{}]", name.get_ref());
        cx.check_keys(zt, &["key", "size"], &what);
        if req.iter().any(|(z, _)| z.name == name.get_ref().as_ref()) {
            cx.err(
                name.span(),
                format!(
                    "the shared memory zone \"{}\" is already declared for a different use (a [zones] table, for limit_req, has this name)",
                    name.get_ref()
                ),
            );
            continue;
        }
        let (key, size) = zone_key_and_size(cx, zt, name, &what);
        if let (Some(key), Some(size)) = (key, size) {
            out.push((
                ConnZoneSpec {
                    name: name.get_ref().to_string(),
                    key,
                    size,
                },
                name.span(),
            ));
        }
    }
    out
}

/// `limit_conn = { zone, conn }` or a list of them: nginx's `limit_conn
/// ZONE NUMBER` lines of one level.
fn parse_limit_conns(cx: &mut Cx, v: &Val, zones: &Zones) -> Option<Vec<ConnLimitSpec>> {
    let items = tables(cx, v, "limit_conn")?;
    let mut out: Vec<ConnLimitSpec> = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(t) = cx.table(item, "limit_conn") else {
            ok = false;
            continue;
        };
        cx.check_keys(t, &["zone", "conn"], "limit_conn");
        let zone = match get(t, "zone") {
            None => {
                cx.err(item.span(), "\"limit_conn\" must have a \"zone\"");
                None
            }
            Some(zv) => cx.str(zv, "zone").and_then(|name| {
                match zones.conn.iter().position(|(z, _)| z.name == name) {
                    Some(i) if out.iter().any(|l| l.zone == i) => {
                        cx.err(
                            zv.span(),
                            format!("\"limit_conn\" directive is duplicate: zone \"{name}\" is already limited at this level"),
                        );
                        None
                    }
                    Some(i) => Some(i),
                    None if zones.req.iter().any(|(z, _)| z.name == name) => {
                        cx.err(
                            zv.span(),
                            format!("unknown limit_conn_zone \"{name}\" (\"{name}\" is a [zones] table, for limit_req; limit_conn needs a [conn_zones] table)"),
                        );
                        None
                    }
                    None => {
                        cx.err(zv.span(), format!("unknown limit_conn_zone \"{name}\""));
                        None
                    }
                }
            }),
        };
        let conn = match get(t, "conn") {
            None => {
                cx.err(
                    item.span(),
                    "\"limit_conn\" must have \"conn\": how many requests of one key may be processed at once",
                );
                None
            }
            Some(cv) => match cx.int(cv, "conn") {
                Some(n) if n <= 0 => {
                    cx.err(cv.span(), format!("invalid number of connections \"{n}\""));
                    None
                }
                // nginx keeps the count in 16 bits.
                Some(n) if n > 65_535 => {
                    cx.err(cv.span(), "connection limit must be less 65536");
                    None
                }
                Some(n) => Some(n as u32),
                None => None,
            },
        };
        match (zone, conn) {
            (Some(zone), Some(conn)) if ok => out.push(ConnLimitSpec { zone, conn }),
            _ => ok = false,
        }
    }
    ok.then_some(out)
}

fn parse_zones(cx: &mut Cx, v: Option<&Val>, have_redis: bool) -> Vec<(ZoneSpec, Range<usize>)> {
    let mut out = Vec::new();
    let Some(v) = v else { return out };
    let Some(t) = cx.table(v, "zones") else {
        return out;
    };
    for (name, zv) in t.iter() {
        let Some(zt) = cx.table(zv, name.get_ref()) else {
            continue;
        };
        let what = format!("[zones.{}]", name.get_ref());
        cx.check_keys(
            zt,
            &["key", "size", "rate", "ipv6_prefix", "exempt", "backend"],
            &what,
        );
        let ipv6_prefix = get(zt, "ipv6_prefix").and_then(|v| match cx.int(v, "ipv6_prefix") {
            Some(n) if (1..=128).contains(&n) => Some(n as u8),
            Some(_) => {
                cx.err(v.span(), "\"ipv6_prefix\" must be between 1 and 128");
                None
            }
            None => None,
        });
        let exempt = get(zt, "exempt")
            .map(|v| cx.cidrs(v, "exempt"))
            .unwrap_or_default();
        let backend = match get(zt, "backend") {
            None => Some(Backend::Memory),
            Some(bv) => match cx.str(bv, "backend") {
                Some("memory") => Some(Backend::Memory),
                Some("redis") if !have_redis => {
                    cx.err(
                        bv.span(),
                        format!("zone \"{}\" has backend = \"redis\" but there is no [redis] table (add [redis] with url = \"redis://HOST:PORT\")", name.get_ref()),
                    );
                    None
                }
                Some("redis") if name.get_ref().contains(['{', '}']) => {
                    cx.err(
                        name.span(),
                        format!("zone \"{}\" cannot use backend = \"redis\": \"{{\" and \"}}\" in its name would break the cluster hash tag", name.get_ref()),
                    );
                    None
                }
                Some("redis") => Some(Backend::Redis),
                Some(other) => {
                    cx.err(
                        bv.span(),
                        format!("invalid backend \"{other}\" (expected \"memory\" or \"redis\")"),
                    );
                    None
                }
                None => None,
            },
        };
        let (key, size) = zone_key_and_size(cx, zt, name, &what);
        // nginx: rate absent = 1r/s.
        let rate = match get(zt, "rate") {
            Some(r) => cx.scalar_text(r, "rate").and_then(|text| {
                values::parse_rate(&text)
                    .map_err(|e| cx.err(r.span(), e))
                    .ok()
            }),
            None => Rate::per_second(1),
        };
        if let (Some(key), Some(size), Some(rate), Some(backend)) = (key, size, rate, backend) {
            out.push((
                ZoneSpec {
                    name: name.get_ref().to_string(),
                    key,
                    ipv6_prefix,
                    exempt,
                    size,
                    rate,
                    backend,
                },
                name.span(),
            ));
        }
    }
    out
}

fn parse_level(cx: &mut Cx, t: &DeTable, zones: &Zones, at: Where) -> Level {
    let mut level = Level::default();
    if let Some(v) = get(t, "limit_req") {
        level.limit_req = parse_limit_reqs(cx, v, &zones.req);
    }
    if let Some(v) = get(t, "limit_conn") {
        level.limit_conn = parse_limit_conns(cx, v, zones);
    }
    if let Some(v) = get(t, "limit_conn_status") {
        level.conn_status = parse_status(cx, v, "limit_conn_status", 400..=599);
    }
    if let Some(v) = get(t, "limit_conn_log_level") {
        level.conn_log_level = cx.log_level(v, "limit_conn_log_level");
    }
    if let Some(v) = get(t, "limit_conn_dry_run") {
        level.conn_dry_run = cx.bool(v, "limit_conn_dry_run");
    }
    if let Some(v) = get(t, "limit_req_status") {
        if let Some(n) = cx.int(v, "limit_req_status") {
            if (400..=599).contains(&n) {
                level.status = Some(n as u16);
            } else {
                cx.err(
                    v.span(),
                    "\"limit_req_status\": value must be between 400 and 599",
                );
            }
        }
    }
    if let Some(v) = get(t, "limit_req_log_level") {
        level.log_level = cx.log_level(v, "limit_req_log_level");
    }
    if let Some(v) = get(t, "limit_req_dry_run") {
        level.dry_run = cx.bool(v, "limit_req_dry_run");
    }
    if let Some(v) = get(t, "error_pages") {
        level.error_pages = parse_error_pages(cx, v).map(Arc::new);
    }
    if let Some(v) = get(t, "ratelimit_headers") {
        if let Some(s) = cx.str(v, "ratelimit_headers") {
            level.ratelimit_headers = match s {
                "draft" => Some(RateLimitHeaders::Draft),
                "legacy" => Some(RateLimitHeaders::Legacy),
                "off" => Some(RateLimitHeaders::Off),
                _ => {
                    cx.err(
                        v.span(),
                        format!(
                            "invalid ratelimit_headers \"{s}\" (expected draft, legacy or off)"
                        ),
                    );
                    None
                }
            };
        }
    }
    if let Some(v) = get(t, "access_log") {
        if let Some(s) = cx.str(v, "access_log") {
            if s.is_empty() {
                cx.err(
                    v.span(),
                    "\"access_log\" must be \"off\", \"stdout\", \"stderr\" or a file path",
                );
            } else {
                level.access_log = Some((s != "off").then(|| s.to_string()));
            }
        }
    }
    if let Some(v) = get(t, "proxy_connect_timeout") {
        level.proxy_connect_timeout = cx.duration(v, "proxy_connect_timeout");
    }
    if let Some(v) = get(t, "proxy_read_timeout") {
        level.proxy_read_timeout = cx.duration(v, "proxy_read_timeout");
    }
    if let Some(v) = get(t, "proxy_send_timeout") {
        level.proxy_send_timeout = cx.duration(v, "proxy_send_timeout");
    }
    if let Some(v) = get(t, "client_body_timeout") {
        level.client_body_timeout = cx.duration(v, "client_body_timeout");
    }
    if let Some(v) = get(t, "proxy_request_buffering") {
        level.proxy_request_buffering = cx.bool(v, "proxy_request_buffering");
    }
    if let Some(v) = get(t, "client_body_buffer_size") {
        level.client_body_buffer_size =
            cx.scalar_text(v, "client_body_buffer_size").and_then(|s| {
                match values::parse_size(&s) {
                    Ok(n) if (1..=1 << 30).contains(&n) => Some(n as usize),
                    _ => {
                        cx.err(
                            v.span(),
                            format!("\"client_body_buffer_size\": invalid size \"{s}\" (e.g. \"16k\", at most 1g)"),
                        );
                        None
                    }
                }
            });
    }
    if let Some(v) = get(t, "client_body_temp_path") {
        level.client_body_temp_path = cx
            .str(v, "client_body_temp_path")
            .map(|s| Arc::new(std::path::PathBuf::from(s)));
    }
    if let Some(v) = get(t, "client_max_body_size") {
        level.client_max_body_size = cx.scalar_text(v, "client_max_body_size").and_then(|s| {
            values::parse_offset(&s)
                .map_err(|e| cx.err(v.span(), format!("\"client_max_body_size\": {e}")))
                .ok()
        });
    }
    if at != Where::Location {
        if let Some(v) = get(t, "client_header_timeout") {
            level.client_header_timeout = cx.duration(v, "client_header_timeout");
        }
        if let Some(v) = get(t, "keepalive_timeout") {
            level.keepalive_timeout = cx.duration(v, "keepalive_timeout");
        }
        if let Some(v) = get(t, "send_timeout") {
            level.send_timeout = cx.duration(v, "send_timeout");
        }
        if let Some(v) = get(t, "real_ip") {
            level.real_ip = parse_real_ip(cx, v).map(Arc::new);
        }
        if let Some(v) = get(t, "underscores_in_headers") {
            level.underscores_in_headers = cx.bool(v, "underscores_in_headers");
        }
        if let Some(v) = get(t, "ignore_invalid_headers") {
            level.ignore_invalid_headers = cx.bool(v, "ignore_invalid_headers");
        }
        if let Some(v) = get(t, "large_client_header_buffers") {
            level.large_client_header_buffers =
                cx.str(v, "large_client_header_buffers").and_then(|s| {
                    match values::parse_header_buffers(s) {
                        Ok(b) => Some(b),
                        Err(e) => {
                            cx.err(v.span(), format!("\"large_client_header_buffers\": {e}"));
                            None
                        }
                    }
                });
        }
    }
    if at != Where::Http {
        if let Some(v) = get(t, "proxy_pass") {
            if let Some(s) = cx.str(v, "proxy_pass") {
                match values::parse_proxy_pass(s) {
                    Ok(p) => level.proxy_pass = Some(p),
                    Err(e) => cx.err(v.span(), e),
                }
            }
        }
    }
    level
}

/// One table or a list of them (`limit_req = {…}` or `[{…}, …]`): the
/// items, or `None` (reported) for anything else.
fn tables<'v, 'i>(cx: &mut Cx, v: &'v Val<'i>, key: &str) -> Option<Vec<&'v Val<'i>>> {
    match v.get_ref() {
        DeValue::Table(_) => Some(vec![v]),
        DeValue::Array(a) => Some(a.iter().collect()),
        other => {
            cx.err(
                v.span(),
                format!(
                    "\"{key}\" must be a table or a list of tables, found {}",
                    type_name(other)
                ),
            );
            None
        }
    }
}

fn parse_limit_reqs(
    cx: &mut Cx,
    v: &Val,
    zones: &[(ZoneSpec, Range<usize>)],
) -> Option<Vec<LimitSpec>> {
    let items = tables(cx, v, "limit_req")?;
    let mut out: Vec<LimitSpec> = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(t) = cx.table(item, "limit_req") else {
            ok = false;
            continue;
        };
        cx.check_keys(t, &["zone", "burst", "nodelay", "delay"], "limit_req");
        let zone = match get(t, "zone") {
            None => {
                cx.err(item.span(), "\"limit_req\" must have a \"zone\"");
                None
            }
            Some(zv) => cx.str(zv, "zone").and_then(|name| {
                match zones.iter().position(|(z, _)| z.name == name) {
                    Some(i) if out.iter().any(|l| l.zone == i) => {
                        cx.err(
                            zv.span(),
                            format!("\"limit_req\" directive is duplicate: zone \"{name}\" is already limited at this level"),
                        );
                        None
                    }
                    Some(i) => Some(i),
                    None => {
                        cx.err(zv.span(), format!("unknown limit_req_zone \"{name}\""));
                        None
                    }
                }
            }),
        };
        let mut burst = 0;
        let mut delay = 0;
        // nginx's `limit_req` takes at most three arguments: zone, burst and
        // one of nodelay/delay. Without burst both fit, and the later wins.
        let given = |k: &str| get(t, k).is_some();
        let nodelay_on = matches!(
            get(t, "nodelay").map(|v| v.get_ref()),
            Some(DeValue::Boolean(true))
        );
        if given("burst") && given("delay") && nodelay_on {
            let v = get(t, "delay").expect("given");
            cx.err(
                v.span(),
                "invalid number of arguments in \"limit_req\" directive: with \"burst\", set either \"nodelay\" or \"delay\", not both",
            );
            ok = false;
        }
        // In file order, so that of `nodelay` and `delay` the later wins.
        for (k, kv) in t.iter() {
            match k.get_ref().as_ref() {
                "burst" => match cx.int(kv, "burst") {
                    Some(n) if (1..=4_000_000).contains(&n) => burst = n as u64 * 1000,
                    Some(_) => {
                        cx.err(
                            kv.span(),
                            "invalid burst value: must be between 1 and 4000000",
                        );
                        ok = false;
                    }
                    None => ok = false,
                },
                "delay" => match cx.int(kv, "delay") {
                    Some(n) if (1..=1_000_000_000).contains(&n) => delay = n as u64 * 1000,
                    Some(_) => {
                        cx.err(kv.span(), "invalid delay value: must be at least 1");
                        ok = false;
                    }
                    None => ok = false,
                },
                "nodelay" => match cx.bool(kv, "nodelay") {
                    Some(true) => delay = Limit::NODELAY,
                    Some(false) => {}
                    None => ok = false,
                },
                _ => {}
            }
        }
        match zone {
            Some(zone) if ok => out.push(LimitSpec { zone, burst, delay }),
            _ => ok = false,
        }
    }
    ok.then_some(out)
}

fn parse_real_ip(cx: &mut Cx, v: &Val) -> Option<crate::realip::RealIp> {
    let t = cx.table(v, "real_ip")?;
    cx.check_keys(t, &["from", "header", "recursive"], "real_ip");
    let from = match get(t, "from") {
        None => {
            cx.err(
                v.span(),
                "\"real_ip\" must have \"from\": the trusted proxies' addresses or networks",
            );
            Vec::new()
        }
        Some(fv) => cx.cidrs(fv, "from"),
    };
    let header = match get(t, "header") {
        None => HeaderName::from_static("x-forwarded-for"),
        Some(hv) => {
            let s = cx.str(hv, "header")?;
            match HeaderName::from_bytes(s.to_ascii_lowercase().as_bytes()) {
                Ok(h) => h,
                Err(_) => {
                    cx.err(hv.span(), format!("invalid header name \"{s}\""));
                    return None;
                }
            }
        }
    };
    let recursive = get(t, "recursive")
        .and_then(|r| cx.bool(r, "recursive"))
        .unwrap_or(false);
    Some(crate::realip::RealIp {
        from,
        header,
        recursive,
    })
}

fn parse_headers(cx: &mut Cx, v: &Val) -> Vec<(HeaderName, Template)> {
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

fn parse_status(
    cx: &mut Cx,
    v: &Val,
    key: &str,
    range: std::ops::RangeInclusive<i128>,
) -> Option<u16> {
    let n = cx.int(v, key)?;
    if range.contains(&n) {
        Some(n as u16)
    } else {
        cx.err(
            v.span(),
            format!(
                "\"{key}\": value must be between {} and {}",
                range.start(),
                range.end()
            ),
        );
        None
    }
}

fn parse_error_pages(cx: &mut Cx, v: &Val) -> Option<ErrorPages> {
    let t = cx.table(v, "error_pages")?;
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
        cx.check_keys(
            pt,
            &["status", "headers", "body"],
            &format!("[error_pages.{code}]"),
        );
        let status = get(pt, "status")
            .and_then(|s| parse_status(cx, s, "status", 200..=599))
            .unwrap_or(code);
        let headers = get(pt, "headers")
            .map(|h| parse_headers(cx, h))
            .unwrap_or_default();
        let body = get(pt, "body").and_then(|b| cx.template(b, "body", Context::Response));
        pages.insert(
            code,
            ErrorPage {
                status,
                headers,
                body,
            },
        );
    }
    Some(pages)
}

fn parse_server(
    cx: &mut Cx,
    t: &DeTable,
    span: Range<usize>,
    zones: &Zones,
    http: &Level,
) -> Option<ServerSpec> {
    let mut allowed: Vec<&str> = vec![
        "listen",
        "server_name",
        "proxy_pass",
        "locations",
        "client_header_timeout",
        "real_ip",
        "keepalive_timeout",
        "send_timeout",
        "underscores_in_headers",
        "ignore_invalid_headers",
        "large_client_header_buffers",
    ];
    allowed.extend_from_slice(LEVEL_KEYS);
    cx.check_keys(t, &allowed, "[[servers]]");
    let listen = match get(t, "listen") {
        None => {
            cx.err(
                span.start..span.start + 1,
                "[[servers]] must have \"listen\"",
            );
            None
        }
        Some(v) => cx.str(v, "listen").and_then(|s| {
            values::parse_listen(s)
                .map_err(|e| cx.err(v.span(), e))
                .ok()
                .map(|a| (a, v.span()))
        }),
    };
    let server_name = get(t, "server_name")
        .and_then(|v| cx.str(v, "server_name"))
        .unwrap_or("")
        .to_string();
    let level = parse_level(cx, t, zones, Where::Server);
    let effective = level.inherit(http);

    let mut locations = Vec::new();
    if let Some(v) = get(t, "locations") {
        match v.get_ref() {
            DeValue::Array(items) => {
                for item in items.iter() {
                    if let Some(lt) = cx.table(item, "locations") {
                        if let Some(l) = parse_location(cx, lt, item.span(), zones, &effective) {
                            locations.push(l);
                        }
                    }
                }
            }
            other => cx.err(
                v.span(),
                format!(
                    "\"locations\" must be an array of tables ([[servers.locations]]), found {}",
                    type_name(other)
                ),
            ),
        }
    }
    // nginx: "duplicate location".
    for i in 0..locations.len() {
        for j in 0..i {
            if locations[i].rule == locations[j].rule {
                cx.err(
                    locations[i].path_span.clone(),
                    format!("duplicate location \"{}\"", locations[i].path),
                );
            }
        }
    }
    let (listen, listen_span) = listen?;
    Some(ServerSpec {
        listen,
        listen_span,
        server_name,
        level,
        locations,
    })
}

fn parse_location(
    cx: &mut Cx,
    t: &DeTable,
    span: Range<usize>,
    zones: &Zones,
    server: &Level,
) -> Option<LocationSpec> {
    let mut allowed: Vec<&str> = vec!["path", "proxy_pass", "return"];
    allowed.extend_from_slice(LEVEL_KEYS);
    cx.check_keys(t, &allowed, "[[servers.locations]]");
    let level = parse_level(cx, t, zones, Where::Location);

    let (path, rule, path_span) = match get(t, "path") {
        None => {
            cx.err(
                span.start..span.start + 1,
                "[[servers.locations]] must have \"path\"",
            );
            return None;
        }
        Some(v) => {
            let s = cx.str(v, "path")?;
            match values::parse_path(s) {
                Ok(r) => (s.to_string(), r, v.span()),
                Err(e) => {
                    cx.err(v.span(), e);
                    return None;
                }
            }
        }
    };
    let regex = match &rule {
        PathRule::Regex { pattern, caseless } => {
            match regex::RegexBuilder::new(pattern)
                .case_insensitive(*caseless)
                .build()
            {
                Ok(r) => Some(r),
                Err(e) => {
                    cx.err(
                        path_span.clone(),
                        format!(
                            "invalid regex \"{pattern}\": {}",
                            e.to_string().lines().last().unwrap_or("")
                        ),
                    );
                    None
                }
            }
        }
        _ => None,
    };

    let ret = get(t, "return").and_then(|v| {
        let rt = cx.table(v, "return")?;
        cx.check_keys(rt, &["status", "body", "headers"], "return");
        let status = match get(rt, "status") {
            Some(s) => parse_status(cx, s, "status", 100..=999)?,
            None => 200,
        };
        let body = match get(rt, "body") {
            Some(b) => Some(cx.template(b, "body", Context::Response)?),
            None => None,
        };
        let headers = get(rt, "headers")
            .map(|h| parse_headers(cx, h))
            .unwrap_or_default();
        Some(ReturnSpec {
            status,
            headers,
            body,
        })
    });

    let proxy = level.proxy_pass.as_ref().or(server.proxy_pass.as_ref());
    if ret.is_none() && get(t, "return").is_none() && proxy.is_none() {
        cx.err(
            path_span.clone(),
            format!("location \"{path}\" has neither \"proxy_pass\" nor \"return\" (set one here or proxy_pass on the server)"),
        );
    }
    // The effective proxy_pass: the location's own, or the server's.
    if let (PathRule::Regex { .. }, Some(p)) = (&rule, proxy) {
        if p.uri.is_some() {
            let span = get(t, "proxy_pass").map_or(path_span.clone(), |v| v.span());
            cx.err(
                span,
                "\"proxy_pass\" cannot have URI part in location given by regular expression",
            );
        }
    }
    Some(LocationSpec {
        path,
        path_span,
        rule,
        regex,
        level,
        ret,
    })
}

/// A zone's `key` and `size` (limit_req's `[zones]` and limit_conn's
/// `[conn_zones]` alike): both required, the size at least 32k.
fn zone_key_and_size(
    cx: &mut Cx,
    zt: &DeTable,
    name: &Spanned<std::borrow::Cow<'_, str>>,
    what: &str,
) -> (Option<Template>, Option<u64>) {
    let key = match get(zt, "key") {
        Some(k) => cx.template(k, "key", Context::Key),
        None => {
            cx.err(name.span(), format!("{what} must have a \"key\""));
            None
        }
    };
    let size = match get(zt, "size") {
        Some(s) => cx
            .scalar_text(s, "size")
            .and_then(|text| match values::parse_size(&text) {
                Ok(n) if n < values::MIN_ZONE_SIZE => {
                    cx.err(
                        s.span(),
                        format!(
                            "zone \"{}\" is too small: size \"{text}\" is below the minimum of 32k",
                            name.get_ref()
                        ),
                    );
                    None
                }
                Ok(n) => Some(n),
                Err(e) => {
                    cx.err(s.span(), e);
                    None
                }
            }),
        None => {
            cx.err(
                name.span(),
                format!("{what} must have a \"size\" (e.g. \"10m\")"),
            );
            None
        }
    };
    (key, size)
}
