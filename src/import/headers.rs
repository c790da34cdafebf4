//! The header directives: `proxy_set_header`, `add_header`,
//! `proxy_hide_header`, `proxy_pass_header` (and their `grpc_*` twins, to
//! their own keys), and `expires`, which is
//! `add_header` fields in sluice (nginx's `Expires` and `Cache-Control`, on
//! the statuses `add_header` without `always` adds to: the same list).
//!
//! nginx inherits `expires` and `add_header` each on its own; in sluice
//! they are one list, so a level that has one of them gets the other from
//! its nearest parent ([`with_parents`]) before its list is written.

use super::Cx;
use super::doc::{Table, Value};
use super::level::{Item, Level, arity};
use super::report::Kind;
use super::tree::Directive;
use super::values;
use crate::vars::Context;

/// One level's `proxy_set_header` lines as one table: a name written
/// twice (any case) becomes a list, which sends the field once per value,
/// in order, as nginx sends both lines.
pub fn set_headers(same: &[&Item]) -> Value {
    let mut kv: Vec<(String, Value)> = Vec::new();
    for (name, v) in same.iter().flat_map(|i| match &i.value {
        Value::Inline(pairs) => pairs.clone(),
        _ => Vec::new(),
    }) {
        match kv.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(&name)) {
            None => kv.push((name, v)),
            Some((_, Value::Array(list))) => list.push(v),
            Some((_, first)) => *first = Value::Array(vec![first.clone(), v]),
        }
    }
    Value::Inline(kv)
}

/// A header value sluice can send, or a report of the variables it lacks.
fn header_value(cx: &mut Cx, d: &Directive, value: &str, vars: Context) -> Option<String> {
    let unknown = values::unknown_vars(value, vars, &cx.vars);
    if unknown.is_empty() {
        return Some(value.to_string());
    }
    let why = format!(
        "{} {}: the header is left out",
        values::list_vars(&unknown),
        cx.why_var(&unknown)
    );
    cx.report(Kind::NotTranslated, d, why);
    None
}

pub fn proxy_set_header(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if !arity(cx, d, 2) {
        return;
    }
    let (name, value) = (d.arg(0), d.arg(1));
    let upgrade = name.eq_ignore_ascii_case("upgrade")
        || name.eq_ignore_ascii_case("connection") && value.contains("upgrade");
    if upgrade {
        let why = "sluice tunnels WebSocket and other upgrades by itself";
        cx.report(Kind::Ignored, d, why);
        return;
    }
    let Some(value) = header_value(cx, d, value, Context::Proxy) else {
        return;
    };
    let key = if d.name == "grpc_set_header" {
        "grpc_set_header"
    } else {
        "proxy_set_header"
    };
    lv.push(
        key,
        Value::Inline(vec![(name.to_string(), Value::Str(value))]),
        d,
    );
}

pub fn add_header(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    let always = match d.args.len() {
        2 => false,
        3 if d.arg(2) == "always" => true,
        _ => {
            cx.report(Kind::NotTranslated, d, "invalid arguments");
            return;
        }
    };
    let Some(value) = header_value(cx, d, d.arg(1), Context::Response) else {
        return;
    };
    let mut kv = vec![
        ("name".to_string(), Value::str(d.arg(0))),
        ("value".to_string(), Value::Str(value)),
    ];
    if always {
        kv.push(("always".to_string(), Value::Bool(true)));
    }
    lv.push("add_header", Value::Inline(kv), d);
}

pub fn header_name(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if !arity(cx, d, 1) {
        return;
    }
    let key = match d.name.as_str() {
        "proxy_hide_header" => "proxy_hide_header",
        "grpc_hide_header" => "grpc_hide_header",
        "grpc_pass_header" => "grpc_pass_header",
        _ => "proxy_pass_header",
    };
    lv.push(key, Value::str(d.arg(0)), d);
}

/// nginx's `Expires` for `expires max`, and its `max-age` (ten years).
const MAX: (&str, &str) = ("Thu, 31 Dec 2037 23:55:55 GMT", "max-age=315360000");
/// nginx's `Expires` for `expires epoch` (its `Cache-Control` is `no-cache`).
const EPOCH: &str = "Thu, 01 Jan 1970 00:00:01 GMT";

/// `expires off | epoch | max | [modified] TIME | @TIME`: the fields nginx
/// sets, as an `expires` item of `add_header` tables (none for `off`, which
/// hides a parent's).
pub fn expires(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    if !arity(cx, d, 1) {
        return;
    }
    let field = |name: &str, value: &str| {
        Value::Inline(vec![
            ("name".into(), Value::str(name)),
            ("value".into(), Value::str(value)),
        ])
    };
    let appends = "sluice appends to the upstream's own Expires and Cache-Control, \
                   nginx replaces them";
    let fields = match d.arg(0) {
        "off" => Vec::new(),
        "epoch" => vec![field("Expires", EPOCH), field("Cache-Control", "no-cache")],
        "max" => vec![field("Expires", MAX.0), field("Cache-Control", MAX.1)],
        a if a.contains('$') || a.starts_with('@') || a == "modified" => {
            let why = if a.contains('$') {
                "a time from a variable: sluice's fields are fixed here"
            } else {
                "a time of day or from the file's modification: the fields change with time"
            };
            return cx.report(Kind::NotTranslated, d, why);
        }
        a => {
            let Some(secs) = seconds(a) else {
                return cx.report(Kind::NotTranslated, d, format!("invalid value \"{a}\""));
            };
            let cc = if secs < 0 {
                "no-cache".to_string()
            } else {
                format!("max-age={secs}")
            };
            let why = format!(
                "Cache-Control: {cc} is added; the Expires date (now{}{a}) moves with time and \
                 is not sent (caches prefer max-age); {appends}",
                if a.starts_with(['-', '+']) {
                    " "
                } else {
                    " + "
                }
            );
            cx.report(Kind::Partial, d, why);
            lv.push(
                "expires",
                Value::Array(vec![field("Cache-Control", &cc)]),
                d,
            );
            return;
        }
    };
    if !fields.is_empty() {
        cx.report(Kind::Partial, d, format!("as add_header; {appends}"));
    }
    lv.push("expires", Value::Array(fields), d);
}

/// nginx's time in seconds (`30d`, `1h 30m`, `-1`, `+2h`).
fn seconds(s: &str) -> Option<i64> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'-' => (-1, &s[1..]),
        b'+' => (1, &s[1..]),
        _ => (1, s),
    };
    let mut total: i64 = 0;
    let mut rest = rest.trim();
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let n: i64 = rest.get(..digits)?.parse().ok()?;
        rest = &rest[digits..];
        let unit = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let mult = match &rest[..unit] {
            "" | "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            "M" => 30 * 86_400,
            "y" => 365 * 86_400,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(mult)?)?;
        rest = rest[unit..].trim_start();
    }
    Some(sign * total)
}

/// `lv` with the half of `add_header` + `expires` it lacks, from the
/// nearest of `parents` (closest first) that has it, when it has the other
/// half: nginx inherits each on its own, sluice's `add_header` as a whole.
pub fn with_parents(lv: &Level, parents: &[&Level]) -> Level {
    let (adds, exp) = (lv.has("add_header"), lv.has("expires"));
    if adds == exp {
        return lv.clone();
    }
    let missing = if adds { "expires" } else { "add_header" };
    let mut out = lv.clone();
    if let Some(p) = parents.iter().find(|p| p.has(missing)) {
        out.items
            .extend(p.items.iter().filter(|i| i.key == missing).cloned());
    }
    out
}

/// `add_header` from a level's `add_header` and `expires` items: one table,
/// or a list (an empty one when `expires off` hides a parent's and there is
/// nothing else).
pub fn emit_add_header(lv: &Level, t: &mut Table) {
    let of = |key: &'static str| lv.items.iter().filter(move |i| i.key == key);
    let mut list: Vec<Value> = of("add_header").map(|i| i.value.clone()).collect();
    for i in of("expires") {
        if let Value::Array(fields) = &i.value {
            list.extend(fields.iter().cloned());
        }
    }
    let comments = of("add_header")
        .chain(of("expires"))
        .map(|i| i.comment.clone())
        .collect();
    let value = match <[Value; 1]>::try_from(list) {
        Ok([one]) => one,
        Err(list) => Value::Array(list),
    };
    t.set("add_header", value, comments);
}
