//! `map` and `geo` → `[maps.NAME]` and `[geos.NAME]`.
//!
//! They are translated before anything else, so that a zone key, a header
//! or a log format naming `$limit_key` finds it. A map whose source or
//! values name a variable sluice lacks is not translated (and neither is
//! one that names such a map, and so on); its variable stays unknown, and
//! whoever uses it reports that as before.
//!
//! nginx's `delete` and a network written twice (the later wins, with
//! nginx's warning) are applied here, as a TOML table has each key once.

use super::Cx;
use super::doc::{Table, Value};
use super::report::Kind;
use super::tree::Directive;
use super::values;
use crate::vars::Context;

/// The translated tables, by name, in file order.
#[derive(Default)]
pub struct Vars {
    pub maps: Table,
    pub geos: Table,
}

/// One `map` or `geo`, read.
struct Def<'d> {
    d: &'d Directive,
    name: String,
    table: Table,
    /// The variables its source and values name.
    uses: Vec<String>,
}

/// Every `map` and `geo` of `ds` (the main context and `http`), translated.
pub fn translate(cx: &mut Cx, ds: &[Directive]) -> Vars {
    let mut defs = Vec::new();
    let mut found = Vec::new();
    find(ds, &mut found);
    for d in found {
        let def = match d.name.as_str() {
            "map" => map(cx, d),
            _ => geo(cx, d),
        };
        defs.extend(def);
    }
    // Drop those that need a variable sluice lacks, until none does.
    loop {
        let names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
        let bad = defs.iter().position(|def| {
            def.uses
                .iter()
                .any(|v| !values::is_known(v, Context::Key, &names))
        });
        let Some(i) = bad else { break };
        let def = defs.remove(i);
        let names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
        let unknown: Vec<String> = def
            .uses
            .iter()
            .filter(|v| !values::is_known(v, Context::Key, &names))
            .cloned()
            .collect();
        let why = format!("{} {}", values::list_vars(&unknown), cx.why_var(&unknown));
        cx.report(Kind::NotTranslated, def.d, why);
    }
    let mut out = Vars::default();
    for def in defs {
        cx.vars.push(def.name.clone());
        let into = if def.d.name == "map" {
            &mut out.maps
        } else {
            &mut out.geos
        };
        *into.sub(&def.name) = def.table;
    }
    out
}

/// The `map` and `geo` blocks of the main context and of `http`.
fn find<'d>(ds: &'d [Directive], out: &mut Vec<&'d Directive>) {
    for d in ds {
        match d.name.as_str() {
            "map" | "geo" if d.block.is_some() => out.push(d),
            "http" => find(d.children(), out),
            _ => {}
        }
    }
}

fn comment(d: &Directive) -> String {
    format!("{}: {}", d.origin.short(), d.text())
}

/// `map SOURCE $NAME { default V; hostnames; volatile; KEY V; … }`.
fn map<'d>(cx: &mut Cx, d: &'d Directive) -> Option<Def<'d>> {
    let (Some(source), Some(name)) = (
        d.args.first(),
        d.args.get(1).and_then(|n| n.strip_prefix('$')),
    ) else {
        cx.report(
            Kind::NotTranslated,
            d,
            "invalid map: map SOURCE $NAME { … }",
        );
        return None;
    };
    let mut t = Table {
        comments: vec![comment(d)],
        ..Table::default()
    };
    t.set("source", Value::str(source.as_str()), vec![]);
    let mut uses = values::variables(source);
    let mut entries: Vec<(String, Value)> = Vec::new();
    let mut hostnames = false;
    let mut default = None;
    for e in d.children() {
        match (e.name.as_str(), e.args.len()) {
            ("hostnames", 0) => hostnames = true,
            ("volatile", 0) => {}
            ("default", 1) => default = Some(e.arg(0).to_string()),
            (_, 1) => {
                let (entry, used) = map_entry(cx, e, hostnames, &entries)?;
                uses.extend(used);
                entries.push(entry);
            }
            _ => {
                cx.report(Kind::NotTranslated, e, "invalid map entry: KEY VALUE;");
                return None;
            }
        }
    }
    if hostnames {
        t.set("hostnames", Value::Bool(true), vec![]);
    }
    if let Some(v) = default {
        uses.extend(values::variables(&v));
        t.set("default", Value::Str(v), vec![]);
    }
    if !entries.is_empty() {
        t.set("values", Value::Inline(entries), vec![]);
    }
    Some(Def {
        d,
        name: name.to_string(),
        table: t,
        uses,
    })
}

/// One `KEY VALUE;` of a map, and the variables its value names (a
/// regex entry's captures are its own; `$1` elsewhere is an earlier
/// regex's, which sluice does not keep: unknown). `None`: reported.
fn map_entry(
    cx: &mut Cx,
    e: &Directive,
    hostnames: bool,
    entries: &[(String, Value)],
) -> Option<((String, Value), Vec<String>)> {
    let key = e.name.clone();
    if !key.starts_with('~') && entries.iter().any(|(k, _)| k.eq_ignore_ascii_case(&key)) {
        let why = format!("conflicting parameter \"{key}\" (nginx refuses the file)");
        cx.report(Kind::NotTranslated, e, why);
        return None;
    }
    let pattern = match crate::vars::map::Pattern::parse(&key, hostnames) {
        Ok(p) => p,
        Err(why) => {
            cx.report(Kind::NotTranslated, e, why);
            return None;
        }
    };
    let value = e.arg(0).to_string();
    let caps = pattern.regex();
    let is_capture = |v: &str| {
        caps.is_some_and(|r| {
            v.parse::<usize>().is_ok_and(|n| n <= 9) || r.capture_names().any(|g| g == Some(v))
        })
    };
    let used = values::variables(&value)
        .into_iter()
        .filter(|v| !is_capture(v))
        .collect();
    Some(((key, Value::Str(value)), used))
}

/// `geo [SOURCE] $NAME { default V; ranges; proxy NET; proxy_recursive; delete NET; NET V; … }`.
fn geo<'d>(cx: &mut Cx, d: &'d Directive) -> Option<Def<'d>> {
    let (source, name) = match d.args.as_slice() {
        [name] => (None, name),
        [source, name] => (Some(source), name),
        _ => {
            cx.report(
                Kind::NotTranslated,
                d,
                "invalid geo: geo [SOURCE] $NAME { … }",
            );
            return None;
        }
    };
    let Some(name) = name.strip_prefix('$') else {
        cx.report(
            Kind::NotTranslated,
            d,
            "invalid geo: its variable needs a $",
        );
        return None;
    };
    let mut t = Table {
        comments: vec![comment(d)],
        ..Table::default()
    };
    let mut uses = Vec::new();
    if let Some(s) = source {
        t.set("source", Value::str(s.as_str()), vec![]);
        uses = values::variables(s);
    }
    let (mut ranges, mut recursive) = (false, false);
    let mut default = None;
    let mut proxy = Vec::new();
    let mut nets: Vec<(String, String)> = Vec::new();
    for e in d.children() {
        match (e.name.as_str(), e.args.len()) {
            ("ranges", 0) => ranges = true,
            ("proxy_recursive", 0) => recursive = true,
            ("proxy", 1) => proxy.push(Value::str(e.arg(0))),
            ("default", 1) => default = Some(e.arg(0).to_string()),
            ("delete", 1) => nets.retain(|(n, _)| !same_net(n, e.arg(0), ranges)),
            (net, 1) => {
                if crate::vars::geo::Entry::parse(net, ranges).is_err() {
                    cx.report(Kind::NotTranslated, e, format!("invalid network \"{net}\""));
                    return None;
                }
                nets.retain(|(n, _)| !same_net(n, net, ranges));
                nets.push((net.to_string(), e.arg(0).to_string()));
            }
            _ => {
                cx.report(Kind::NotTranslated, e, "invalid geo entry: NETWORK VALUE;");
                return None;
            }
        }
    }
    if let Some(v) = default {
        t.set("default", Value::Str(v), vec![]);
    }
    if ranges {
        t.set("ranges", Value::Bool(true), vec![]);
    }
    if !proxy.is_empty() {
        t.set("proxy", Value::Array(proxy), vec![]);
        if recursive {
            t.set("proxy_recursive", Value::Bool(true), vec![]);
        }
    }
    if !nets.is_empty() {
        let kv = nets.into_iter().map(|(n, v)| (n, Value::Str(v))).collect();
        t.set("networks", Value::Inline(kv), vec![]);
    }
    Some(Def {
        d,
        name: name.to_string(),
        table: t,
        uses,
    })
}

/// Whether two entries name the same network (`10.1.2.3/8` is
/// `10.0.0.0/8`, as nginx reads it) or range.
fn same_net(a: &str, b: &str, ranges: bool) -> bool {
    use crate::vars::geo::Entry;
    match (Entry::parse(a, ranges), Entry::parse(b, ranges)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}
