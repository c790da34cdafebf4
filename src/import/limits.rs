//! `limit_req_zone` / `limit_conn_zone` → `[zones.NAME]` / `[conn_zones.NAME]`,
//! and `limit_req` / `limit_conn`, which name them.
//!
//! nginx refuses a file whose `limit_req` names no zone, or a zone of the
//! other kind (`zero size shared memory zone`, `already declared for a
//! different use`); a site file imported on its own often names a zone
//! its nginx.conf defines. Both are the user's to fix (import the file
//! that defines it), said at the `limit_req` line: sluice's own check would
//! only see a TOML line. What else nginx refuses of these directives
//! (`burst=0`, a zone below 32k, a zone named twice at one level) is
//! reported and left out, as the rest of the import does.

use super::Cx;
use super::doc::{Table, Value};
use super::level::{Level, key_template_ok};
use super::report::Kind;
use super::top::Out;
use super::tree::Directive;
use super::values;

/// A `limit_req_zone` or `limit_conn_zone` line of the file.
pub struct ZoneDef {
    name: String,
    conn: bool,
    /// `FILE:LINE`.
    at: String,
    /// Whether it became a zone table (else it was reported).
    translated: bool,
}

fn directive_name(conn: bool) -> &'static str {
    if conn { "limit_conn" } else { "limit_req" }
}

/// `limit_req_zone KEY zone=NAME:SIZE rate=R` / `limit_conn_zone KEY
/// zone=NAME:SIZE`.
pub fn zone(cx: &mut Cx, out: &mut Out, d: &Directive, conn: bool) {
    let mut name_size = None;
    let mut rate = None;
    for a in d.args.iter().skip(1) {
        match a.split_once('=') {
            Some(("zone", z)) => name_size = Some(z.split_once(':').unwrap_or((z, ""))),
            Some(("rate", r)) if !conn => rate = Some(r),
            _ if a == "sync" => cx.report(Kind::Partial, d, "sync is nginx Plus's"),
            _ => {
                cx.report(Kind::NotTranslated, d, format!("invalid parameter \"{a}\""));
                return;
            }
        }
    }
    let Some((name, size)) = name_size else {
        cx.report(Kind::NotTranslated, d, "no zone=NAME:SIZE");
        return;
    };
    if let Some(first) = cx.zones.iter().find(|z| z.name == name) {
        let why = format!(
            "zone \"{name}\" is already defined at {}: nginx refuses the file (the first is kept)",
            first.at
        );
        return cx.report(Kind::NotTranslated, d, why);
    }
    let table = if size.is_empty() {
        let why = format!("zone \"{name}\" must have a size: zone={name}:SIZE (nginx refuses it)");
        cx.report(Kind::NotTranslated, d, why);
        None
    } else {
        zone_table(cx, d, size, rate)
    };
    cx.zones.push(ZoneDef {
        name: name.to_string(),
        conn,
        at: d.origin.short(),
        translated: table.is_some(),
    });
    let Some(t) = table else { return };
    let into = if conn {
        &mut out.conn_zones
    } else {
        &mut out.zones
    };
    *into.sub(name) = t;
}

/// A zone's table, or `None` (reported) for what nginx refuses.
fn zone_table(cx: &mut Cx, d: &Directive, size: &str, rate: Option<&str>) -> Option<Table> {
    match crate::config::values::parse_size(size) {
        Ok(n) if n < crate::config::values::MIN_ZONE_SIZE => {
            let why = format!("the zone is too small: \"{size}\" is below 32k (nginx refuses it)");
            cx.report(Kind::NotTranslated, d, why);
            return None;
        }
        Ok(_) => {}
        Err(e) => {
            cx.report(Kind::NotTranslated, d, e);
            return None;
        }
    }
    let mut key = d.arg(0).to_string();
    let unknown = key_template_ok(&key, &cx.vars);
    if !unknown.is_empty() {
        let why = format!(
            "the key {} {}: the zone limits by $binary_remote_addr instead (every client, each on its own; \
             a zone's exempt = [CIDR…] skips networks)",
            values::list_vars(&unknown),
            cx.why_var(&unknown)
        );
        cx.report(Kind::Partial, d, why);
        key = "$binary_remote_addr".into();
    }
    let mut t = Table {
        comments: vec![format!("{}: {}", d.origin.short(), d.text())],
        ..Table::default()
    };
    t.set("key", Value::Str(key), vec![]);
    t.set("size", Value::str(size), vec![]);
    if let Some(r) = rate {
        if let Err(e) = crate::limiter::algorithm::parse_rate(r) {
            cx.report(Kind::NotTranslated, d, e);
            return None;
        }
        t.set("rate", Value::str(r), vec![]);
    }
    Some(t)
}

/// `limit_req zone=NAME [burst=N] [nodelay | delay=N]`.
pub fn limit_req(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if d.args.is_empty() || d.args.len() > 3 {
        let why = "invalid number of arguments: zone=, burst= and one of nodelay or delay= \
                   (nginx refuses it)";
        return cx.report(Kind::NotTranslated, d, why);
    }
    let mut kv: Vec<(String, Value)> = Vec::new();
    for a in &d.args {
        let number = |n: &str, max: i64| n.parse().ok().filter(|n| (1..=max).contains(n));
        let parsed = match a.split_once('=') {
            Some(("zone", z)) if !z.is_empty() => Some(("zone", Value::str(z))),
            Some(("burst", n)) => number(n, 4_000_000).map(|n| ("burst", Value::Int(n))),
            Some(("delay", n)) => number(n, 1_000_000_000).map(|n| ("delay", Value::Int(n))),
            None if a == "nodelay" => Some(("nodelay", Value::Bool(true))),
            _ => None,
        };
        match parsed {
            Some((k, v)) => kv.push((k.to_string(), v)),
            None => {
                let why = format!("invalid parameter \"{a}\" (nginx refuses it)");
                return cx.report(Kind::NotTranslated, d, why);
            }
        }
    }
    let Some((_, Value::Str(zone))) = kv.iter().find(|(k, _)| k == "zone") else {
        return cx.report(Kind::NotTranslated, d, "no zone= (nginx refuses it)");
    };
    let zone = zone.clone();
    if named_zone(cx, lv, d, &zone, false) {
        lv.push("limit_req", Value::Inline(kv), d);
    }
}

/// `limit_conn ZONE N`.
pub fn limit_conn(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if !super::level::arity(cx, d, 2) {
        return;
    }
    let n = match d.arg(1).parse::<i64>() {
        Ok(n) if (1..=65_535).contains(&n) => n,
        _ => {
            let why = "invalid number of connections: 1 to 65535 (nginx refuses it)";
            return cx.report(Kind::NotTranslated, d, why);
        }
    };
    if !named_zone(cx, lv, d, d.arg(0), true) {
        return;
    }
    let v = Value::Inline(vec![
        ("zone".into(), Value::str(d.arg(0))),
        ("conn".into(), Value::Int(n)),
    ]);
    lv.push("limit_conn", v, d);
}

/// Whether the zone `d` names can be used: defined in the file, of its
/// kind (else the import fails with the line), translated, and not named
/// already at this level (else reported).
fn named_zone(cx: &mut Cx, lv: &Level, d: &Directive, zone: &str, conn: bool) -> bool {
    let what = directive_name(conn);
    let Some(def) = cx.zones.iter().find(|z| z.name == zone) else {
        let hint = if cx.site {
            " (import the file that defines it, e.g. nginx.conf)"
        } else {
            " (nginx refuses the file: zero size shared memory zone)"
        };
        let msg = format!(
            "{}: {what} names zone \"{zone}\", which no {what}_zone in this file defines{hint}",
            d.origin.at()
        );
        cx.refuse(msg);
        return false;
    };
    if def.conn != conn {
        let msg = format!(
            "{}: {what} names zone \"{zone}\", which is a {}_zone (at {}): nginx refuses the file \
             (the shared memory zone \"{zone}\" is already declared for a different use)",
            d.origin.at(),
            directive_name(def.conn),
            def.at
        );
        cx.refuse(msg);
        return false;
    }
    if !def.translated {
        let why = format!("its zone \"{zone}\" is not translated (see {})", def.at);
        cx.report(Kind::NotTranslated, d, why);
        return false;
    }
    let same = |v: &Value| match v {
        Value::Inline(kv) => kv
            .iter()
            .any(|(k, v)| k == "zone" && matches!(v, Value::Str(z) if z == zone)),
        _ => false,
    };
    if lv.items.iter().any(|i| i.key == what && same(&i.value)) {
        let why = format!(
            "\"{what}\" directive is duplicate: zone \"{zone}\" is already named at this level \
             (nginx refuses it)"
        );
        cx.report(Kind::NotTranslated, d, why);
        return false;
    }
    true
}
