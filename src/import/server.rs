//! `server` blocks → `[[servers]]`, their `location`s (nested ones
//! flattened) → `[[servers.locations]]`, and `error_page` with the named
//! locations it sends to → `error_pages`.
//!
//! sluice's server has one `listen`: a server with several is written once
//! per address (same names, same locations), which keeps nginx's choice of
//! server per address. An address speaks TLS when any server's `listen` on
//! it says `ssl`, as in nginx; each copy on such an address gets the
//! certificate (its own or http's).

use super::Cx;
use super::doc::{Sub, Table, Value};
use super::headers;
use super::level::{self, Ctx, Level};
use super::pages;
use super::report::Kind;
use super::top::{self, Out};
use super::tree::Directive;
use super::values;

/// A location's content: what answers a request there.
#[derive(Debug, Clone)]
pub(super) enum Content {
    /// nginx's static files (`root`, `try_files`, `index`, or nothing).
    Files,
    /// `proxy_pass` or `grpc_pass` (the key) and its URL.
    Proxy(&'static str, String),
    Return(Ret),
    /// Another module's upstream (`fastcgi_pass`, …): the directive.
    Gateway(String),
}

/// A `return`: its code and text (a body, or a URL for redirects).
#[derive(Debug, Clone)]
pub(super) struct Ret {
    pub(super) code: i64,
    pub(super) text: Option<String>,
}

/// A location as translated.
pub(super) struct Loc {
    pub(super) path: String,
    pub(super) level: Level,
    pub(super) content: Content,
    /// The nginx lines of the location and of its content.
    pub(super) comments: Vec<String>,
}

/// A named location (`location @name`): a target of `error_page`.
pub(super) struct Named {
    pub(super) name: String,
    pub(super) level: Level,
    pub(super) content: Content,
    pub(super) comments: Vec<String>,
    pub(super) d: Directive,
    /// Whether an error page was made of it (else it is reported).
    pub(super) used: std::cell::Cell<bool>,
}

#[derive(Default)]
pub(super) struct ServerAcc {
    /// `listen`: the address with sluice's flags, and the comment.
    pub(super) listens: Vec<(String, bool, String)>,
    /// `listen … quic`: the address (it goes beside the TCP listen on it).
    pub(super) quic: Vec<String>,
    pub(super) names: Option<(String, String)>,
    pub(super) level: Level,
    pub(super) tls: Level,
    pub(super) locs: Vec<Loc>,
    pub(super) named: Vec<Named>,
    /// A server-level `return`.
    pub(super) ret: Option<(Ret, String)>,
    /// http's `default_type`.
    pub(super) http_type: Option<String>,
    /// http's `add_header` and `expires` (a location lacking one of the
    /// two gets it from the server's, else from here).
    pub(super) http_level: Level,
    /// `ssl on;`
    pub(super) ssl_on: bool,
}

impl ServerAcc {
    /// The `default_type` a level of this server ends up with.
    pub(super) fn content_type<'a>(&'a self, lv: &'a Level) -> Option<&'a str> {
        lv.get_str("default_type")
            .or_else(|| self.level.get_str("default_type"))
            .or(self.http_type.as_deref())
    }
}

pub(super) fn comment(d: &Directive) -> String {
    format!("{}: {}", d.origin.short(), d.text())
}

/// The addresses any server's `listen … ssl` names (they speak TLS for
/// every server on them), those any `listen … proxy_protocol` names
/// (likewise: nginx's socket reads the header for every server on it), and
/// all the addresses listened on.
pub fn addresses(servers: &[&Directive]) -> [Vec<String>; 3] {
    let (mut tls, mut pp, mut all) = (Vec::new(), Vec::new(), Vec::new());
    for s in servers {
        let ssl_on = s
            .children()
            .iter()
            .any(|d| d.name == "ssl" && d.args == ["on"]);
        for l in s.children().iter().filter(|d| d.name == "listen") {
            let Ok(a) = values::listen_addr(l.arg(0)) else {
                continue;
            };
            if ssl_on || l.args.iter().skip(1).any(|a| a == "ssl") {
                tls.push(a.clone());
            }
            if l.args.iter().skip(1).any(|a| a == "proxy_protocol") {
                pp.push(a.clone());
            }
            all.push(a);
        }
    }
    [tls, pp, all]
}

/// `ssl_certificate`, `ssl_certificate_key`, `ssl_protocols`, `http2`,
/// `http3`, `quic_retry`, `ssl_early_data`: a server's keys, which http may
/// set for every server.
pub fn server_key(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    let key: &'static str = match d.name.as_str() {
        "ssl_certificate" => "ssl_certificate",
        "ssl_certificate_key" => "ssl_certificate_key",
        "ssl_protocols" => "ssl_protocols",
        "http3" => "http3",
        "quic_retry" => "quic_retry",
        "ssl_early_data" => "ssl_early_data",
        _ => "http2",
    };
    if lv.has(key) {
        let why = "sluice has one certificate per server (no RSA beside ECDSA)";
        cx.report(Kind::NotTranslated, d, why);
        return;
    }
    let value = match key {
        "ssl_protocols" => match level::protocol_list(cx, d) {
            Some(p) => Value::Str(p),
            None => return,
        },
        "http2" | "http3" | "quic_retry" | "ssl_early_data" => match values::flag(d.arg(0)) {
            Ok(b) => Value::Bool(b),
            Err(e) => return cx.report(Kind::NotTranslated, d, e),
        },
        _ if d.arg(0).contains('$') => {
            return cx.report(
                Kind::NotTranslated,
                d,
                "sluice's certificates take no variables",
            );
        }
        _ => Value::Str(cx.conf_path(d.arg(0))),
    };
    let early = value == Value::Bool(true) && key == "ssl_early_data";
    lv.push(key, value, d);
    if early {
        let why = "sluice takes 0-RTT on a quic listen only; TLS over TCP refuses early data";
        cx.report(Kind::Partial, d, why);
    }
}

/// One `server` block: a `[[servers]]` table per `listen`.
pub fn server(cx: &mut Cx, out: &Out, d: &Directive) -> Vec<Table> {
    let mut s = ServerAcc {
        http_type: out.http.get_str("default_type").map(str::to_string),
        http_level: out.http.clone(),
        ..ServerAcc::default()
    };
    for c in d.children() {
        match c.name.as_str() {
            "listen" => listen(cx, &mut s, c),
            "server_name" => server_name(cx, &mut s, c),
            "ssl_certificate"
            | "ssl_certificate_key"
            | "ssl_protocols"
            | "http2"
            | "http3"
            | "quic_retry"
            | "ssl_early_data" => server_key(cx, &mut s.tls, c),
            "location" => location(cx, &mut s, c, None),
            "return" => {
                if let Some(r) = ret(cx, c) {
                    s.ret = Some((r, comment(c)));
                }
            }
            // nginx before 1.25: every listen of the server speaks TLS.
            "ssl" if c.args == ["on"] => s.ssl_on = true,
            "ssl" if c.args == ["off"] => {}
            _ => {
                if !level::directive(cx, &mut s.level, c, Ctx::Server) {
                    top::other(cx, c);
                }
            }
        }
    }
    if s.ssl_on {
        for (addr, ssl, _) in s.listens.iter_mut().filter(|l| !l.1) {
            *ssl = true;
            *addr = match addr.split_once(' ') {
                Some((a, flags)) => format!("{a} ssl {flags}"),
                None => format!("{addr} ssl"),
            };
        }
    }
    let had_listen = d.children().iter().any(|c| c.name == "listen");
    if had_listen && s.listens.is_empty() {
        let why = match s.quic.first() {
            Some(q) => format!(
                "listen {q} quic alone: sluice's quic listen goes beside a TCP listen with ssl on \
                 the same address; the server is left out"
            ),
            None => "no listen sluice can use: the server is left out".into(),
        };
        cx.report(Kind::NotTranslated, d, why);
        return Vec::new();
    }
    emit(cx, out, d, s)
}

fn listen(cx: &mut Cx, s: &mut ServerAcc, d: &Directive) {
    let addr = match values::listen_addr(d.arg(0)) {
        Ok(a) => a,
        Err(why) => return cx.report(Kind::NotTranslated, d, why),
    };
    if d.args.iter().skip(1).any(|a| a == "quic") {
        return quic_listen(cx, s, d, addr);
    }
    let mut flags = String::new();
    let mut ssl = false;
    let mut left = Vec::new();
    for p in d.args.iter().skip(1) {
        match p.as_str() {
            "ssl" => ssl = true,
            "http2" => flags.push_str(" http2"),
            "default_server" | "default" => flags.push_str(" default_server"),
            "proxy_protocol" => flags.push_str(" proxy_protocol"),
            p => left.push(p.to_string()),
        }
    }
    if ssl {
        flags.insert_str(0, " ssl");
    }
    if !left.is_empty() {
        let why = format!("{}: socket options sluice does not set", left.join(" "));
        cx.report(Kind::Partial, d, why);
    }
    s.listens.push((format!("{addr}{flags}"), ssl, comment(d)));
}

/// nginx 1.25's `listen … quic`: beside the server's TCP listen on the
/// same address (see [`copies`]); `reuseport` and the rest are socket
/// options sluice does not set.
fn quic_listen(cx: &mut Cx, s: &mut ServerAcc, d: &Directive, addr: String) {
    let left: Vec<&str> = d
        .args
        .iter()
        .skip(1)
        .map(String::as_str)
        .filter(|p| !matches!(*p, "quic" | "default_server" | "default"))
        .collect();
    if !left.is_empty() {
        let why = format!("{}: socket options sluice does not set", left.join(" "));
        cx.report(Kind::Partial, d, why);
    }
    s.quic.push(addr);
}

fn server_name(cx: &mut Cx, s: &mut ServerAcc, d: &Directive) {
    let (kept, dropped): (Vec<&String>, Vec<&String>) = d
        .args
        .iter()
        .partition(|n| !n.contains('$') && crate::config::values::parse_server_names(n).is_ok());
    if !dropped.is_empty() {
        let names: Vec<&str> = dropped.iter().map(|s| s.as_str()).collect();
        let why = format!(
            "{} left out: sluice takes names, wildcards and regexes without captures or variables",
            names.join(" ")
        );
        cx.report(Kind::Partial, d, why);
    }
    let kept: Vec<&str> = kept.iter().map(|s| s.as_str()).collect();
    s.names = Some((kept.join(" "), comment(d)));
}

/// `return CODE [TEXT]`, `return CODE URL`, `return URL`.
fn ret(cx: &mut Cx, d: &Directive) -> Option<Ret> {
    let (code, text) = match d.args.as_slice() {
        [url]
            if url.starts_with("http://")
                || url.starts_with("https://")
                || url.starts_with("$scheme") =>
        {
            (302, Some(url.clone()))
        }
        [code] => (code.parse().ok()?, None),
        [code, text] => (code.parse().ok()?, Some(text.clone())),
        _ => {
            cx.report(Kind::NotTranslated, d, "invalid number of arguments");
            return None;
        }
    };
    if !(100..=999).contains(&code) {
        cx.report(Kind::NotTranslated, d, "invalid return code");
        return None;
    }
    let text = text.map(|t| {
        let unknown = values::unknown_vars(&t, crate::vars::Context::Response, &cx.vars);
        if unknown.is_empty() {
            return t;
        }
        let why = format!(
            "{} {}: sent empty",
            values::list_vars(&unknown),
            cx.why_var(&unknown)
        );
        cx.report(Kind::Partial, d, why);
        values::replace_vars(&t, &unknown, "")
    });
    Some(Ret { code, text })
}

pub(super) fn is_redirect(code: i64) -> bool {
    matches!(code, 301 | 302 | 303 | 307 | 308)
}

/// `return = { status, body | headers.Location }`; a body has the
/// `default_type` in force as its type.
fn return_value(r: &Ret, content_type: Option<&str>) -> Value {
    let mut kv = vec![("status".to_string(), Value::Int(r.code))];
    match &r.text {
        Some(t) if is_redirect(r.code) => kv.push((
            "headers".into(),
            Value::Inline(vec![("Location".into(), Value::str(t))]),
        )),
        Some(t) => {
            kv.push(("body".into(), Value::str(t)));
            if let Some(ct) = content_type {
                let h = vec![("Content-Type".into(), Value::str(ct))];
                kv.push(("headers".into(), Value::Inline(h)));
            }
        }
        None => {}
    }
    Value::Inline(kv)
}

/// A `location` block (and the locations nested in it, after it).
fn location(cx: &mut Cx, s: &mut ServerAcc, d: &Directive, parent: Option<&Level>) {
    let path = match values::location_path(&d.args) {
        Ok(p) => p,
        Err(why) => return cx.report(Kind::NotTranslated, d, why),
    };
    let mut lv = Level::default();
    let mut content = Content::Files;
    let mut comments = vec![comment(d)];
    let mut nested = Vec::new();
    for c in d.children() {
        match c.name.as_str() {
            "location" => nested.push(c),
            "proxy_pass" | "grpc_pass" => {
                content = super::pass::content(cx, c);
                comments.push(comment(c));
            }
            "return" => {
                if let Some(r) = ret(cx, c) {
                    content = Content::Return(r);
                    comments.push(comment(c));
                }
            }
            // Every client is denied before the content: the location
            // needs one all the same, and 403 is what it would answer.
            "deny" if c.args == ["all"] && !d.children().iter().any(|a| a.name == "allow") => {
                level::directive(cx, &mut lv, c, Ctx::Location);
                content = Content::Return(Ret {
                    code: 403,
                    text: None,
                });
            }
            n if n.ends_with("_pass") && !n.starts_with("proxy_") => {
                cx.report(Kind::NotTranslated, c, super::report::why_not(n));
                content = Content::Gateway(c.text());
            }
            _ => {
                if !level::directive(cx, &mut lv, c, Ctx::Location) {
                    top::other(cx, c);
                }
            }
        }
    }
    let lv = match parent {
        Some(p) => lv.inherit(p),
        None => lv,
    };
    let Some(path) = path else {
        let name = d.arg(0).to_string();
        s.named.push(Named {
            name,
            level: lv,
            content,
            comments,
            d: d.clone(),
            used: std::cell::Cell::new(false),
        });
        return;
    };
    if parent.is_some() {
        comments[0] = format!("{} (nested: inherits its parent's settings)", comments[0]);
        if path.starts_with('~') {
            let why = "a nested regex location: sluice tests it for every URI, nginx only under its parent";
            cx.report(Kind::Partial, d, why);
        }
    }
    s.locs.push(Loc {
        path,
        level: lv.clone(),
        content,
        comments,
    });
    for n in nested {
        location(cx, s, n, Some(&lv));
    }
}

/// The server's tables, one per `listen`.
fn emit(cx: &mut Cx, out: &Out, d: &Directive, mut s: ServerAcc) -> Vec<Table> {
    let mut base = Table::default();
    if let Some((names, c)) = &s.names {
        base.set("server_name", Value::str(names), vec![c.clone()]);
    }
    headers::with_parents(&s.level, &[&out.http]).emit(&mut base, Some(&out.http));
    let pages_from = if s.level.error_pages.is_empty() {
        &out.http.error_pages
    } else {
        &s.level.error_pages
    };
    let pages = pages::error_pages(cx, pages_from, &s);
    if let Some(p) = pages {
        base.subs.push(("error_pages".into(), Sub::Table(p)));
    }
    if let Some((r, c)) = s.ret.take() {
        let why = "sluice's return is a location's: one location / answers every request, \
                   as this server-level return does in nginx";
        cx.report(Kind::Partial, d, why);
        s.locs = vec![Loc {
            path: "/".into(),
            level: Level::default(),
            content: Content::Return(r),
            comments: vec![format!("{c} (the server's return)")],
        }];
    }
    fallback(cx, &mut s);
    for l in &s.locs {
        let t = location_table(cx, l, &s);
        base.push("locations", t);
    }
    for n in s.named.iter().filter(|n| !n.used.get()) {
        let why = "a named location becomes an error page when an error_page names it and it \
                   answers with return; this one is reached otherwise (try_files, rewrite, …) \
                   or not at all";
        cx.report(Kind::NotTranslated, &n.d, why);
    }
    copies(cx, out, d, &s, base)
}

/// nginx answers what no location matches from files: with `--backend` a
/// location `/` proxies there; a server without locations gets one too.
fn fallback(cx: &mut Cx, s: &mut ServerAcc) {
    if s.locs.iter().any(|l| l.path == "/") {
        return;
    }
    if cx.backend().is_none() && !s.locs.is_empty() {
        return;
    }
    s.locs.push(Loc {
        path: "/".into(),
        level: Level::default(),
        content: Content::Files,
        comments: vec!["(no location /: nginx serves what no location matches from files)".into()],
    });
}

fn location_table(cx: &mut Cx, l: &Loc, s: &ServerAcc) -> Table {
    let mut t = Table {
        comments: l.comments.clone(),
        ..Table::default()
    };
    t.set("path", Value::str(&l.path), vec![]);
    match &l.content {
        Content::Proxy(key, url) => {
            cx.note(if *key == "grpc_pass" {
                "sluice sends X-Forwarded-For ($proxy_add_x_forwarded_for) to gRPC upstreams \
                 unless grpc_set_header sets it; nginx does not send it by default."
            } else {
                "sluice sends X-Forwarded-For ($proxy_add_x_forwarded_for) to upstreams unless \
                 proxy_set_header sets it; nginx does not send it by default."
            });
            t.set(key, Value::str(url), vec![]);
        }
        Content::Return(r) => {
            cx.note(
                "sluice applies limit_req, limit_conn and allow/deny to return too; nginx's return \
                 answers before them.",
            );
            t.set("return", return_value(r, s.content_type(&l.level)), vec![]);
        }
        Content::Files => match cx.backend() {
            Some(b) => t.set(
                "proxy_pass",
                Value::str(b),
                vec!["nginx served this from files: --backend serves them now".into()],
            ),
            None => t.set(
                "return",
                Value::Inline(vec![("status".into(), Value::Int(404))]),
                vec![
                    "nginx served this from files (root, try_files, index): sluice serves none; \
                      --backend URL proxies such locations to a server that does"
                        .into(),
                ],
            ),
        },
        Content::Gateway(what) => t.set(
            "return",
            Value::Inline(vec![("status".into(), Value::Int(502))]),
            vec![format!(
                "not translated: {what} (see the top): sluice answers 502"
            )],
        ),
    }
    headers::with_parents(&l.level, &[&s.level, &s.http_level]).emit(&mut t, None);
    if !l.level.error_pages.is_empty() {
        if let Some(p) = pages::error_pages(cx, &l.level.error_pages, s) {
            t.subs.push(("error_pages".into(), Sub::Table(p)));
        }
    }
    t
}

/// One table per `listen` (nginx's default `*:80` without one), with the
/// TLS keys on TLS addresses.
fn copies(cx: &mut Cx, out: &Out, d: &Directive, s: &ServerAcc, base: Table) -> Vec<Table> {
    let listens = if s.listens.is_empty() {
        vec![(
            "0.0.0.0:80".to_string(),
            false,
            "(no listen: nginx's default *:80, or *:8000 when not run as root)".to_string(),
        )]
    } else {
        s.listens.clone()
    };
    quic_alone(cx, d, s, &listens);
    let several = listens.len() > 1;
    let mut tables = Vec::new();
    let own: Vec<String> = listens
        .iter()
        .map(|(a, _, _)| a.split(' ').next().unwrap_or("").to_string())
        .collect();
    for (addr, _, c) in listens {
        let (addr, c) = match dual_stack(cx, &addr) {
            None => (addr, c),
            Some(v4) => {
                let why = format!(
                    "sluice's listener on [::] would take IPv4 too (no ipv6only), and {v4} is \
                     listened on: IPv6 clients are not served on this port"
                );
                cx.report(Kind::Partial, d, why);
                if own.contains(&v4) {
                    continue;
                }
                let moved = addr.replacen("[::]", "0.0.0.0", 1);
                (moved, format!("{c} (as {v4}: see the top)"))
            }
        };
        let mut t = base.clone();
        t.comments = vec![comment(d)];
        if several {
            t.comments
                .push("(one [[servers]] per listen: a sluice server has one address)".into());
        }
        let bare = addr.split(' ').next().unwrap_or("").to_string();
        if !free_names(cx, d, &bare, &mut t) {
            continue;
        }
        let tls_addr = cx.tls_addrs.contains(&bare);
        let mut head = Table::default();
        let (addr, c) = address_flags(cx, &bare, addr, c);
        let listen = if s.quic.contains(&bare) && tls_addr {
            Value::Array(vec![Value::Str(addr), Value::Str(format!("{bare} quic"))])
        } else {
            Value::Str(addr)
        };
        head.set("listen", listen, vec![c]);
        let mut tls = s.tls.clone();
        for item in &out.server_defaults.items {
            if !tls.has(item.key) {
                tls.items.push(item.clone());
            }
        }
        if !tls_addr {
            tls.items.retain(|i| i.key == "http2");
        } else if !tls.has("ssl_certificate") && cx.fatal.is_none() {
            cx.fatal = Some(format!(
                "{}: no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive \
                 (on {bare}; nginx refuses the file too)",
                d.origin.at()
            ));
        }
        tls.emit(&mut head, None);
        head.entries.extend(t.entries);
        t.entries = head.entries;
        tables.push(t);
    }
    tables
}

/// A `quic` listen with no TCP `ssl` listen of the server on its address.
fn quic_alone(cx: &mut Cx, d: &Directive, s: &ServerAcc, listens: &[(String, bool, String)]) {
    for q in &s.quic {
        let beside = cx.tls_addrs.contains(q)
            && listens.iter().any(|(a, ..)| a.split(' ').next() == Some(q));
        if !beside {
            let why = format!(
                "listen {q} quic: sluice's quic listen goes beside the server's TCP listen with ssl on {q}"
            );
            cx.report(Kind::NotTranslated, d, why);
        }
    }
}

/// `listen` and its comment with the flags another server's `listen` on
/// the same address gives it: `ssl`, `proxy_protocol` (nginx's socket has
/// them for every server on it).
fn address_flags(cx: &Cx, bare: &str, addr: String, c: String) -> (String, String) {
    let (addr, c) = if cx.tls_addrs.iter().any(|a| a == bare) && !addr.contains(" ssl") {
        let a = addr.replacen(bare, &format!("{bare} ssl"), 1);
        let c = format!("{c} (ssl: another server's listen makes the address TLS)");
        (a, c)
    } else {
        (addr, c)
    };
    if cx.pp_addrs.iter().any(|a| a == bare) && !addr.contains(" proxy_protocol") {
        let c = format!("{c} (proxy_protocol: another server's listen on the address says it)");
        return (format!("{addr} proxy_protocol"), c);
    }
    (addr, c)
}

/// `[::]:P` when `0.0.0.0:P` is listened on too: the IPv4 address it
/// clashes with (nginx's `[::]` listeners are ipv6only, sluice's are not).
fn dual_stack(cx: &Cx, addr: &str) -> Option<String> {
    let port = addr.split(' ').next()?.strip_prefix("[::]:")?;
    let v4 = format!("0.0.0.0:{port}");
    cx.all_addrs.contains(&v4).then_some(v4)
}

/// nginx ignores a name another server on the same address already has
/// (`conflicting server name "X" on ADDR, ignored`), and so does the
/// translation, name by name (no `server_name` is the name `""`). False
/// when none is left: nginx never picks the server by name there, and the
/// table is left out on that address.
fn free_names(cx: &mut Cx, d: &Directive, addr: &str, t: &mut Table) -> bool {
    let entry = t.entries.iter_mut().find(|e| e.key == "server_name");
    let written = match &entry {
        Some(e) => match &e.value {
            Value::Str(s) => s.clone(),
            _ => return true,
        },
        None => String::new(),
    };
    let names: Vec<&str> = match written.split_whitespace().collect::<Vec<_>>() {
        n if n.is_empty() => vec![""],
        n => n,
    };
    let mut kept = Vec::new();
    for n in names {
        let key = n.to_ascii_lowercase();
        if n.starts_with('~') {
            kept.push(n);
        } else if cx.names_on.iter().any(|(a, k)| a == addr && *k == key) {
            let why = format!("conflicting server name \"{n}\" on {addr}, ignored (as nginx does)");
            cx.report(Kind::Partial, d, why);
        } else {
            cx.names_on.push((addr.to_string(), key));
            kept.push(n);
        }
    }
    if kept.is_empty() {
        let why = format!("every name of the server is another's on {addr}: left out there");
        cx.report(Kind::Partial, d, why);
        return false;
    }
    if let Some(e) = entry {
        e.value = Value::str(kept.join(" "));
    }
    true
}
