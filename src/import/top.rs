//! The main context, `events` and `http`: process settings, zones, log
//! formats, upstream groups and the http level; then the servers, and the
//! whole document with the list of what was left out at its top.

use super::Cx;
use super::doc::{Table, Value};
use super::level::{self, Ctx, Level};
use super::limits;
use super::report::{self, Kind};
use super::server;
use super::tree::{Directive, Tree};
use super::upstream;
use super::values;

/// nginx's `combined`, which `access_log FILE` without a format writes
/// (sluice's own default adds `$request_time $limit_req_status`).
const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status \
                        $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

/// What the main context and `http` make, before rendering.
#[derive(Default)]
pub struct Out {
    /// Top-level keys from the main context: pid_file, worker_connections, …
    pub ops: Table,
    pub http: Level,
    /// http-level `ssl_*` and `http2`, which each server inherits.
    pub server_defaults: Level,
    pub zones: Table,
    pub conn_zones: Table,
    pub upstreams: Table,
    pub servers: Vec<Table>,
    /// `map` and `geo`.
    pub vars: super::vars::Vars,
    /// The main context's `error_log` lines (see [`super::logs::top_error_log`]).
    pub main_error_log: Vec<Directive>,
    /// `log_format` NAME → (escape, text, the directive).
    pub formats: Vec<(String, Option<String>, String, Directive)>,
}

/// The TOML text, or (every server left out) why nothing can listen.
pub fn translate(cx: &mut Cx, tree: &Tree) -> Result<String, String> {
    for m in &tree.missing {
        let kind = if m.directive.arg(0).ends_with("mime.types") {
            Kind::Ignored
        } else {
            Kind::NotTranslated
        };
        cx.report(kind, &m.directive, m.why.clone());
    }
    collect_made(cx, &tree.directives);
    let mut out = Out {
        vars: super::vars::translate(cx, &tree.directives),
        ..Out::default()
    };
    for d in &tree.directives {
        main_directive(cx, &mut out, d);
    }
    let main_errors = std::mem::take(&mut out.main_error_log);
    super::logs::top_error_log(cx, &main_errors, &mut out.http);
    if let Some(f) = cx.fatal.take() {
        return Err(f);
    }
    if out.servers.is_empty() {
        if let Some(http) = tree.directives.iter().find(|d| d.name == "http") {
            return Err(super::shape::no_server(http, &cx.reports));
        }
    }
    Ok(render(cx, out))
}

/// The variables `map`, `geo`, `split_clients`, `set`, … make, anywhere.
fn collect_made(cx: &mut Cx, ds: &[Directive]) {
    for d in ds {
        let made = match d.name.as_str() {
            "map" | "split_clients" | "map_hash_bucket_size" if d.args.len() >= 2 => d.args.get(1),
            "geo" | "geoip_country" | "geoip_city" => d.args.last(),
            "set" | "perl_set" | "js_set" | "auth_request_set" => d.args.first(),
            _ => None,
        };
        if let Some(v) = made.and_then(|v| v.strip_prefix('$')) {
            cx.made
                .push((v.to_string(), format!("{} at {}", d.name, d.origin.short())));
        }
        collect_made(cx, d.children());
    }
}

fn comment(d: &Directive) -> String {
    format!("{}: {}", d.origin.short(), d.text())
}

fn main_directive(cx: &mut Cx, out: &mut Out, d: &Directive) {
    match d.name.as_str() {
        "http" => {
            let servers = http(cx, out, d.children());
            [cx.tls_addrs, cx.pp_addrs, cx.all_addrs] = server::addresses(&servers);
            for s in servers {
                let tables = server::server(cx, out, s);
                out.servers.extend(tables);
            }
        }
        "events" => {
            for e in d.children() {
                if e.name == "worker_connections" {
                    match e.arg(0).parse::<i64>() {
                        Ok(n) if (1..=1_000_000).contains(&n) => {
                            out.ops
                                .set("worker_connections", Value::Int(n), vec![comment(e)])
                        }
                        _ => cx.report(Kind::NotTranslated, e, "invalid number"),
                    }
                } else {
                    other(cx, e);
                }
            }
        }
        "pid" => {
            let p = cx.path(d.arg(0));
            out.ops.set("pid_file", Value::Str(p), vec![comment(d)]);
        }
        "worker_shutdown_timeout" => match values::time(d.arg(0)) {
            Ok(t) => out
                .ops
                .set("shutdown_timeout", Value::Str(t), vec![comment(d)]),
            Err(e) => cx.report(Kind::NotTranslated, d, e),
        },
        "error_log" => out.main_error_log.push(d.clone()),
        _ => other(cx, d),
    }
}

/// A directive with no translation here: ignored or not translated.
pub fn other(cx: &mut Cx, d: &Directive) {
    match report::ignored(&d.name) {
        Some(why) => cx.report(Kind::Ignored, d, why),
        None => cx.report(Kind::NotTranslated, d, report::why_not(&d.name)),
    }
}

/// The `http` block; returns its `server` blocks, translated once the
/// whole http level is known.
fn http<'d>(cx: &mut Cx, out: &mut Out, ds: &'d [Directive]) -> Vec<&'d Directive> {
    // Zones first (nginx takes a `limit_req` above its zone's line), and
    // the names of the upstream groups.
    for d in ds {
        match d.name.as_str() {
            "limit_req_zone" => limits::zone(cx, out, d, false),
            "limit_conn_zone" => limits::zone(cx, out, d, true),
            "upstream" => cx.upstreams.push(d.arg(0).to_string()),
            _ => {}
        }
    }
    let mut servers = Vec::new();
    for d in ds {
        match d.name.as_str() {
            "server" => servers.push(d),
            // Translated first, for everything else to name them.
            "map" | "geo" if d.block.is_some() => {}
            "limit_req_zone" | "limit_conn_zone" => {}
            "upstream" => upstream::upstream(cx, out, d),
            "log_format" => log_format(out, d),
            "ssl_certificate"
            | "ssl_certificate_key"
            | "ssl_protocols"
            | "http2"
            | "http3"
            | "quic_retry"
            | "ssl_early_data" => server::server_key(cx, &mut out.server_defaults, d),
            _ => {
                if !level::directive(cx, &mut out.http, d, Ctx::Http) {
                    other(cx, d);
                }
            }
        }
    }
    servers
}

/// `log_format NAME [escape=…] STRING…`.
fn log_format(out: &mut Out, d: &Directive) {
    let mut args = d.args.iter().skip(1).peekable();
    let escape = match args.peek().and_then(|a| a.strip_prefix("escape=")) {
        Some(e) => {
            args.next();
            Some(e.to_string())
        }
        None => None,
    };
    let text: String = args.map(String::as_str).collect();
    out.formats
        .push((d.arg(0).to_string(), escape, text, d.clone()));
}

/// The top-level keys of the access log's format.
fn emit_log_format(cx: &mut Cx, out: &Out, top: &mut Table) {
    let Some((name, at)) = cx.used_format.clone() else {
        return;
    };
    let (escape, text, mut comments, d) = if name == "combined" {
        let c = format!("nginx's combined, as the access log at {at} writes it");
        (None, COMBINED.to_string(), vec![c], None)
    } else if let Some((_, e, t, d)) = out.formats.iter().find(|f| f.0 == name) {
        (e.clone(), t.clone(), vec![comment(d)], Some(d))
    } else {
        return;
    };
    let unknown = values::unknown_vars(&text, crate::vars::Context::Log, &cx.vars);
    let text = match (unknown.is_empty(), d) {
        (false, Some(d)) => {
            let why = format!(
                "{} {}: written as -",
                values::list_vars(&unknown),
                cx.why_var(&unknown)
            );
            cx.report(Kind::Partial, d, why);
            comments.push(format!(
                "(sluice writes - for {})",
                values::list_vars(&unknown)
            ));
            values::replace_vars(&text, &unknown, "-")
        }
        _ => text,
    };
    top.set("log_format", Value::Str(text), comments);
    if let Some(e @ ("default" | "json" | "none")) = escape.as_deref() {
        top.set("log_format_escape", Value::str(e), vec![]);
    }
}

/// The document: the reports, the top-level keys, the zones, the groups,
/// the servers.
fn render(cx: &mut Cx, out: Out) -> String {
    let mut top = Table {
        entries: out.ops.entries.clone(),
        ..Table::default()
    };
    out.http.emit(&mut top, None);
    emit_log_format(cx, &out, &mut top);
    for (name, t) in [
        ("maps", &out.vars.maps),
        ("geos", &out.vars.geos),
        ("zones", &out.zones),
        ("conn_zones", &out.conn_zones),
        ("upstreams", &out.upstreams),
    ] {
        if !t.subs.is_empty() {
            top.subs
                .push((name.to_string(), super::doc::Sub::Table(t.clone())));
        }
    }
    for s in out.servers {
        top.push("servers", s);
    }
    super::sort(&mut cx.reports);
    let mut text = header(cx);
    text.push_str(&top.render());
    text
}

/// The comment block at the top: what was left out, by kind.
fn header(cx: &Cx) -> String {
    let mut s = String::from(
        "# sluice configuration translated from nginx by `sluice import-nginx`.\n\
         # Each key is commented with the nginx line it came from (FILE:LINE: directive).\n",
    );
    for kind in [Kind::NotTranslated, Kind::Partial, Kind::Ignored] {
        let of: Vec<&super::Report> = cx.reports.iter().filter(|r| r.kind == kind).collect();
        if of.is_empty() {
            continue;
        }
        let title = match kind {
            Kind::NotTranslated => {
                "Not translated: sluice does not do these, the file behaves differently there"
            }
            Kind::Partial => "Translated in part",
            Kind::Ignored => {
                "Ignored: about nginx's own processes, files and buffers; no meaning for sluice"
            }
        };
        s.push_str(&format!("#\n# {title} ({}):\n", of.len()));
        for r in of {
            s.push_str(&format!("#   {}: {} ({})\n", r.short, r.directive, r.why));
        }
    }
    if !cx.notes.is_empty() {
        s.push_str("#\n# Notes:\n");
        for n in &cx.notes {
            s.push_str(&format!("#   {n}\n"));
        }
    }
    s.push('\n');
    s
}
