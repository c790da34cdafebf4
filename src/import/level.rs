//! The directives the `http`, `server` and `location` levels share, and
//! sluice's level keys they become.
//!
//! nginx inherits each directive separately, and a level that has one of a
//! list directive (`limit_req`, `proxy_set_header`, `add_header`, …) drops
//! its parent's whole list; sluice's keys inherit the same way. So a
//! directive is translated at the level it appears at, and a [`Level`]
//! keeps what a level says, key by key, in file order. Only nested
//! locations, which sluice does not have, are flattened: a child gets its
//! parent's keys it does not set itself ([`Level::inherit`]).

use super::Cx;
use super::doc::{Table, Value};
use super::headers;
use super::report::Kind;
use super::tree::Directive;
use super::values;
use crate::vars::Context;

/// Where a directive is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctx {
    Http,
    Server,
    Location,
}

/// One translated directive: the sluice key, its value, and the nginx
/// line for the comment above it.
#[derive(Debug, Clone)]
pub struct Item {
    pub key: &'static str,
    pub value: Value,
    pub comment: String,
}

/// What one level says.
#[derive(Debug, Clone, Default)]
pub struct Level {
    pub items: Vec<Item>,
    /// `error_page` lines, resolved per server (their targets are the
    /// server's locations).
    pub error_pages: Vec<Directive>,
    /// `root DIR` or `alias PATH` (true): not translated, but an error
    /// page's file is read from there (see `pages.rs`).
    pub root: Option<(bool, String)>,
}

/// Keys that several directives of one level make into a list.
const LISTS: &[&str] = &[
    "access",
    "error_log",
    "limit_req",
    "limit_conn",
    "add_header",
    "proxy_hide_header",
    "proxy_pass_header",
    "grpc_hide_header",
    "grpc_pass_header",
];

/// The pieces of `real_ip`, one per nginx directive.
const REAL_IP: &[&str] = &["real_ip.from", "real_ip.header", "real_ip.recursive"];

impl Level {
    pub fn has(&self, key: &str) -> bool {
        self.items.iter().any(|i| i.key == key)
    }

    /// The string value of `key`, if the level sets it.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|i| i.key == key)
            .and_then(|i| match &i.value {
                Value::Str(s) => Some(s.as_str()),
                _ => None,
            })
    }

    pub fn push(&mut self, key: &'static str, value: Value, d: &Directive) {
        self.items.push(Item {
            key,
            value,
            comment: format!("{}: {}", d.origin.short(), d.text()),
        });
    }

    /// `self` (a nested location) with its parent's keys it does not set.
    pub fn inherit(&self, parent: &Level) -> Level {
        let mut out = self.clone();
        for item in &parent.items {
            if !self.has(item.key) {
                out.items.push(item.clone());
            }
        }
        if out.error_pages.is_empty() {
            out.error_pages = parent.error_pages.clone();
        }
        if out.root.is_none() {
            out.root = parent.root.clone();
        }
        out
    }

    /// The level's keys into `t`, in the order the directives came.
    /// `real_ip_parent`: the level `real_ip`'s missing parts come from (a
    /// server's: http's).
    pub fn emit(&self, t: &mut Table, real_ip_parent: Option<&Level>) {
        let mut done: Vec<&str> = Vec::new();
        for item in &self.items {
            if done.contains(&item.key) || item.key == "default_type" {
                continue;
            }
            done.push(item.key);
            if REAL_IP.contains(&item.key) {
                done.extend(REAL_IP);
                self.emit_real_ip(t, real_ip_parent);
                continue;
            }
            if matches!(item.key, "add_header" | "expires") {
                done.extend(["add_header", "expires"]);
                headers::emit_add_header(self, t);
                continue;
            }
            let same: Vec<&Item> = self.items.iter().filter(|i| i.key == item.key).collect();
            let comments = same.iter().map(|i| i.comment.clone()).collect();
            let value = if matches!(item.key, "proxy_set_header" | "grpc_set_header") {
                headers::set_headers(&same)
            } else if LISTS.contains(&item.key) && same.len() > 1 {
                Value::Array(same.iter().map(|i| i.value.clone()).collect())
            } else {
                item.value.clone()
            };
            t.set(item.key, value, comments);
        }
    }

    /// `real_ip = { from, header, recursive }` from the three directives,
    /// each missing one from `parent` (nginx inherits them separately,
    /// sluice's key as a whole).
    fn emit_real_ip(&self, t: &mut Table, parent: Option<&Level>) {
        let pick = |key: &str| -> Vec<&Item> {
            let own: Vec<&Item> = self.items.iter().filter(|i| i.key == key).collect();
            match (own.is_empty(), parent) {
                (true, Some(p)) => p.items.iter().filter(|i| i.key == key).collect(),
                _ => own,
            }
        };
        let from = pick("real_ip.from");
        let header = pick("real_ip.header");
        let recursive = pick("real_ip.recursive");
        let mut comments: Vec<String> = Vec::new();
        let mut kv = Vec::new();
        if from.is_empty() {
            comments.push("(no set_real_ip_from: no address is trusted)".into());
            kv.push(("from".to_string(), Value::Array(Vec::new())));
        } else {
            kv.push((
                "from".to_string(),
                Value::Array(from.iter().map(|i| i.value.clone()).collect()),
            ));
        }
        if let Some(h) = header.first() {
            kv.push(("header".to_string(), h.value.clone()));
        }
        if let Some(r) = recursive.first() {
            kv.push(("recursive".to_string(), r.value.clone()));
        }
        for i in from.iter().chain(&header).chain(&recursive) {
            comments.push(i.comment.clone());
        }
        t.set("real_ip", Value::Inline(kv), comments);
    }
}

/// Translate `d` if it is a level directive; false if it is not one.
pub fn directive(cx: &mut Cx, lv: &mut Level, d: &Directive, ctx: Ctx) -> bool {
    let name = d.name.as_str();
    match name {
        // Reported as not translated by the caller; kept for error pages.
        "root" | "alias" => {
            lv.root = Some((name == "alias", d.arg(0).to_string()));
            return false;
        }
        "limit_req" => super::limits::limit_req(cx, lv, d),
        "limit_conn" => super::limits::limit_conn(cx, lv, d),
        "allow" | "deny" => access(cx, lv, d),
        "limit_req_status" | "limit_conn_status" => status(cx, lv, d),
        "limit_req_log_level" | "limit_conn_log_level" => log_level(cx, lv, d),
        "limit_req_dry_run"
        | "limit_conn_dry_run"
        | "proxy_request_buffering"
        | "proxy_ssl_verify"
        | "proxy_ssl_server_name"
        | "grpc_ssl_verify"
        | "grpc_ssl_server_name"
        | "underscores_in_headers"
        | "ignore_invalid_headers" => on_off(cx, lv, d, ctx),
        "proxy_connect_timeout"
        | "proxy_read_timeout"
        | "proxy_send_timeout"
        | "client_body_timeout"
        | "client_header_timeout"
        | "keepalive_timeout"
        | "send_timeout"
        | "proxy_next_upstream_timeout"
        | "grpc_connect_timeout"
        | "grpc_read_timeout"
        | "grpc_send_timeout"
        | "grpc_next_upstream_timeout" => timeout(cx, lv, d, ctx),
        "client_max_body_size" | "client_body_buffer_size" => size(cx, lv, d),
        "large_client_header_buffers" => header_buffers(cx, lv, d, ctx),
        "client_body_temp_path" => {
            let p = cx.path(d.arg(0));
            one(cx, lv, d, Value::Str(p));
            if d.args.len() > 1 {
                cx.report(
                    Kind::Partial,
                    d,
                    "the subdirectory levels have no meaning for sluice",
                );
            }
        }
        "proxy_ssl_trusted_certificate"
        | "proxy_ssl_certificate"
        | "proxy_ssl_certificate_key"
        | "grpc_ssl_trusted_certificate"
        | "grpc_ssl_certificate"
        | "grpc_ssl_certificate_key" => {
            let p = cx.conf_path(d.arg(0));
            one(cx, lv, d, Value::Str(p));
        }
        "proxy_ssl_name" | "grpc_ssl_name" => ssl_name(cx, lv, d),
        "proxy_ssl_protocols" | "grpc_ssl_protocols" => protocols(cx, lv, d, name),
        "access_log" => access_log(cx, lv, d),
        "error_log" => super::logs::error_log(cx, lv, d),
        "proxy_set_header" | "grpc_set_header" => headers::proxy_set_header(cx, lv, d),
        "add_header" => headers::add_header(cx, lv, d),
        "expires" => headers::expires(cx, lv, d),
        "proxy_hide_header" | "proxy_pass_header" | "grpc_hide_header" | "grpc_pass_header" => {
            headers::header_name(cx, lv, d)
        }
        "proxy_next_upstream" | "grpc_next_upstream" => next_upstream(cx, lv, d),
        "proxy_next_upstream_tries" | "grpc_next_upstream_tries" => tries(cx, lv, d),
        "set_real_ip_from" | "real_ip_header" | "real_ip_recursive" => real_ip(cx, lv, d, ctx),
        "error_page" => lv.error_pages.push(d.clone()),
        // The type of files, and of `return`'s text: the latter is the
        // `Content-Type` of the returns and error pages below it (see
        // `server.rs`); files have their own reports.
        "default_type" if d.args.len() == 1 => {
            one_key(cx, lv, d, "default_type", Value::str(d.arg(0)))
        }
        _ => return super::compress::directive(cx, lv, d),
    }
    true
}

/// The sluice key of a directive translated one to one.
fn key_of(name: &str) -> Option<&'static str> {
    const SAME: &[&str] = &[
        "limit_req_status",
        "limit_req_log_level",
        "limit_req_dry_run",
        "limit_conn_status",
        "limit_conn_log_level",
        "limit_conn_dry_run",
        "proxy_request_buffering",
        "proxy_ssl_verify",
        "proxy_ssl_server_name",
        "proxy_ssl_name",
        "proxy_ssl_trusted_certificate",
        "proxy_ssl_certificate",
        "proxy_ssl_certificate_key",
        "proxy_ssl_protocols",
        "underscores_in_headers",
        "ignore_invalid_headers",
        "large_client_header_buffers",
        "proxy_connect_timeout",
        "proxy_read_timeout",
        "proxy_send_timeout",
        "client_body_timeout",
        "client_header_timeout",
        "keepalive_timeout",
        "send_timeout",
        "proxy_next_upstream_timeout",
        "proxy_next_upstream_tries",
        "client_max_body_size",
        "client_body_buffer_size",
        "client_body_temp_path",
        "access_log",
        "grpc_ssl_verify",
        "grpc_ssl_server_name",
        "grpc_ssl_name",
        "grpc_ssl_trusted_certificate",
        "grpc_ssl_certificate",
        "grpc_ssl_certificate_key",
        "grpc_ssl_protocols",
        "grpc_connect_timeout",
        "grpc_read_timeout",
        "grpc_send_timeout",
        "grpc_next_upstream_timeout",
        "grpc_next_upstream_tries",
    ];
    SAME.iter().find(|k| **k == name).copied()
}

/// A one-value key; a second one at the same level is nginx's "is
/// duplicate" error, reported and left out.
fn one(cx: &mut Cx, lv: &mut Level, d: &Directive, value: Value) {
    let Some(key) = key_of(&d.name) else {
        cx.report(Kind::NotTranslated, d, "no equivalent in sluice");
        return;
    };
    if lv.has(key) {
        cx.report(
            Kind::NotTranslated,
            d,
            "duplicate at this level: nginx refuses it",
        );
        return;
    }
    lv.push(key, value, d);
}

pub(super) fn arity(cx: &mut Cx, d: &Directive, n: usize) -> bool {
    if d.args.len() == n {
        return true;
    }
    cx.report(Kind::NotTranslated, d, "invalid number of arguments");
    false
}

fn status(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if !arity(cx, d, 1) {
        return;
    }
    match d.arg(0).parse::<i64>() {
        Ok(n) if (400..=599).contains(&n) => one(cx, lv, d, Value::Int(n)),
        _ => cx.report(
            Kind::NotTranslated,
            d,
            "the status must be between 400 and 599",
        ),
    }
}

fn log_level(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if !arity(cx, d, 1) {
        return;
    }
    match d.arg(0) {
        l @ ("info" | "notice" | "warn" | "error") => one(cx, lv, d, Value::str(l)),
        l => cx.report(Kind::NotTranslated, d, format!("invalid level \"{l}\"")),
    }
}

fn on_off(cx: &mut Cx, lv: &mut Level, d: &Directive, ctx: Ctx) {
    if !arity(cx, d, 1) {
        return;
    }
    let server_only = matches!(
        d.name.as_str(),
        "underscores_in_headers" | "ignore_invalid_headers"
    );
    if server_only && ctx == Ctx::Location {
        cx.report(Kind::NotTranslated, d, "sluice sets it per server");
        return;
    }
    match values::flag(d.arg(0)) {
        Ok(b) => one(cx, lv, d, Value::Bool(b)),
        Err(e) => cx.report(Kind::NotTranslated, d, e),
    }
}

fn timeout(cx: &mut Cx, lv: &mut Level, d: &Directive, ctx: Ctx) {
    let server_only = matches!(
        d.name.as_str(),
        "client_header_timeout" | "keepalive_timeout" | "send_timeout"
    );
    if server_only && ctx == Ctx::Location {
        cx.report(
            Kind::NotTranslated,
            d,
            "sluice sets it per server, not per location",
        );
        return;
    }
    let n = d.args.len();
    if n == 0 || n > 1 && d.name != "keepalive_timeout" || n > 2 {
        cx.report(Kind::NotTranslated, d, "invalid number of arguments");
        return;
    }
    match values::time(d.arg(0)) {
        Ok(t) => one(cx, lv, d, Value::Str(t)),
        Err(e) => cx.report(Kind::NotTranslated, d, e),
    }
    if n == 2 {
        cx.report(
            Kind::Partial,
            d,
            "the second time (the Keep-Alive: timeout= header) is not sent by sluice",
        );
    }
}

fn size(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if !arity(cx, d, 1) {
        return;
    }
    let s = d.arg(0);
    let ok = if d.name == "client_max_body_size" {
        crate::config::values::parse_offset(s).is_ok()
    } else {
        crate::config::values::parse_size(s).is_ok_and(|n| (1..=1 << 30).contains(&n))
    };
    if ok {
        one(cx, lv, d, Value::str(s));
    } else {
        cx.report(Kind::NotTranslated, d, format!("invalid size \"{s}\""));
    }
}

fn header_buffers(cx: &mut Cx, lv: &mut Level, d: &Directive, ctx: Ctx) {
    if ctx == Ctx::Location || !arity(cx, d, 2) {
        if ctx == Ctx::Location {
            cx.report(Kind::NotTranslated, d, "sluice sets it per server");
        }
        return;
    }
    let v = format!("{} {}", d.arg(0), d.arg(1));
    match crate::config::values::parse_header_buffers(&v) {
        Ok(_) => one(cx, lv, d, Value::Str(v)),
        Err(e) => cx.report(Kind::NotTranslated, d, e),
    }
}

fn ssl_name(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if !arity(cx, d, 1) {
        return;
    }
    if d.arg(0).contains('$') {
        let m = if d.name.starts_with("grpc_") {
            "grpc"
        } else {
            "proxy"
        };
        let why = format!(
            "sluice's {m}_ssl_name takes no variables (the default is {m}_pass's host, \
             nginx's $proxy_host)"
        );
        cx.report(Kind::NotTranslated, d, why);
        return;
    }
    one(cx, lv, d, Value::str(d.arg(0)));
}

/// `ssl_protocols` / `proxy_ssl_protocols`: the versions sluice has
/// (TLSv1.2, TLSv1.3); older ones are left out and said.
pub fn protocols(cx: &mut Cx, lv: &mut Level, d: &Directive, _key: &str) {
    let Some(kept) = protocol_list(cx, d) else {
        return;
    };
    one(cx, lv, d, Value::Str(kept));
}

/// The protocols sluice keeps of `d`'s, reported; `None`: none left.
pub fn protocol_list(cx: &mut Cx, d: &Directive) -> Option<String> {
    let (kept, dropped): (Vec<&String>, Vec<&String>) = d
        .args
        .iter()
        .partition(|p| matches!(p.as_str(), "TLSv1.2" | "TLSv1.3"));
    let kept: Vec<&str> = kept.iter().map(|s| s.as_str()).collect();
    if kept.is_empty() {
        cx.report(
            Kind::NotTranslated,
            d,
            "sluice speaks TLSv1.2 and TLSv1.3 only",
        );
        return None;
    }
    if !dropped.is_empty() {
        let names: Vec<&str> = dropped.iter().map(|s| s.as_str()).collect();
        cx.report(
            Kind::Partial,
            d,
            format!(
                "{} left out: sluice speaks TLSv1.2 and TLSv1.3 only",
                names.join(" ")
            ),
        );
    }
    Some(kept.join(" "))
}

fn access_log(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    let Some(path) = d.args.first() else {
        cx.report(Kind::NotTranslated, d, "invalid number of arguments");
        return;
    };
    if lv.has("access_log") {
        let why = "sluice writes one access log per level: the first one is kept";
        cx.report(Kind::NotTranslated, d, why);
        return;
    }
    let value = match path.as_str() {
        "off" => "off".to_string(),
        "/dev/stdout" => "stdout".to_string(),
        "/dev/stderr" => "stderr".to_string(),
        p if p.starts_with("memory:") => {
            let why = "sluice logs to files, stdout, stderr or syslog";
            cx.report(Kind::NotTranslated, d, why);
            return;
        }
        p if p.starts_with("syslog:") => match super::logs::syslog(cx, d, &p[7..]) {
            Some(v) => v,
            None => return,
        },
        p => cx.path(p),
    };
    if value != "off" {
        cx.use_log_format(d.args.get(1).map_or("combined", String::as_str), d);
    }
    if d.args.len() > 2 {
        let why = "buffer=, flush=, gzip and if= are not sluice's (it writes in batches by itself)";
        cx.report(Kind::Partial, d, why);
    }
    lv.push("access_log", Value::Str(value), d);
}

fn next_upstream(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    const KNOWN: &[&str] = &[
        "error",
        "timeout",
        "http_502",
        "http_503",
        "http_504",
        "non_idempotent",
    ];
    let key = if d.name == "grpc_next_upstream" {
        "grpc_next_upstream"
    } else {
        "proxy_next_upstream"
    };
    if d.args == ["off"] {
        one_key(cx, lv, d, key, Value::str("off"));
        return;
    }
    let mut kept = Vec::new();
    for a in &d.args {
        if KNOWN.contains(&a.as_str()) {
            kept.push(Value::str(a));
        } else {
            let why = format!(
                "\"{a}\" is not among sluice's conditions (error, timeout, http_502, http_503, http_504, non_idempotent)"
            );
            cx.report(Kind::Partial, d, why);
        }
    }
    one_key(cx, lv, d, key, Value::Array(kept));
}

fn one_key(cx: &mut Cx, lv: &mut Level, d: &Directive, key: &'static str, v: Value) {
    if lv.has(key) {
        cx.report(
            Kind::NotTranslated,
            d,
            "duplicate at this level: nginx refuses it",
        );
        return;
    }
    lv.push(key, v, d);
}

fn tries(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if !arity(cx, d, 1) {
        return;
    }
    match d.arg(0).parse::<i64>() {
        Ok(n) if n >= 0 => one(cx, lv, d, Value::Int(n)),
        _ => cx.report(Kind::NotTranslated, d, "invalid number"),
    }
}

fn real_ip(cx: &mut Cx, lv: &mut Level, d: &Directive, ctx: Ctx) {
    if ctx == Ctx::Location {
        let why = "sluice sets real_ip per server: the client address is known before the location";
        cx.report(Kind::NotTranslated, d, why);
        return;
    }
    if !arity(cx, d, 1) {
        return;
    }
    let a = d.arg(0);
    match d.name.as_str() {
        "set_real_ip_from" if a.starts_with("unix:") => {
            cx.report(Kind::NotTranslated, d, "sluice listens on TCP only");
        }
        "set_real_ip_from" => match crate::realip::parse_cidr(a) {
            Ok(_) => lv.push("real_ip.from", Value::str(a), d),
            Err(e) => cx.report(Kind::NotTranslated, d, e),
        },
        // nginx's keyword is `proxy_protocol` as written; another case of
        // it is a header's name (header names match in any case), which
        // sluice would not read as nginx does.
        "real_ip_header" if a != "proxy_protocol" && a.eq_ignore_ascii_case("proxy_protocol") => {
            let why = format!(
                "nginx reads \"{a}\" as a header's name (only \"proxy_protocol\" names the PROXY \
                 protocol)"
            );
            cx.report(Kind::NotTranslated, d, why);
        }
        // nginx reads a `Forwarded` field as a bare address (RFC 7239's
        // `for=` never parses, so nginx keeps the peer); sluice reads its
        // `for=` nodes: the meaning changes, and is said.
        "real_ip_header" if a.eq_ignore_ascii_case("forwarded") => {
            lv.push("real_ip.header", Value::str(a), d);
            let why = "sluice reads RFC 7239's for= nodes in Forwarded; nginx reads the field as \
                       a bare address (for=… never parses, and nginx keeps the peer)";
            cx.report(Kind::Partial, d, why);
        }
        "real_ip_header" => lv.push("real_ip.header", Value::str(a), d),
        _ => match values::flag(a) {
            Ok(b) => lv.push("real_ip.recursive", Value::Bool(b), d),
            Err(e) => cx.report(Kind::NotTranslated, d, e),
        },
    }
}

/// `allow ADDRESS|NETWORK|all;` / `deny …;` → a rule of `access`.
fn access(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    let rule = format!("{} {}", d.name, d.arg(0));
    match crate::access::Rule::parse(&rule) {
        Ok(_) if d.args.len() == 1 => lv.push("access", Value::Str(rule), d),
        Ok(_) => cx.report(Kind::NotTranslated, d, "one address, network or all"),
        Err(e) => cx.report(Kind::NotTranslated, d, e),
    }
}

/// A variable of `cx` in a zone key that sluice lacks.
pub fn key_template_ok(s: &str, known: &[String]) -> Vec<String> {
    values::unknown_vars(s, Context::Key, known)
}
