//! nginx's gzip directives, to sluice's keys of the same names (see
//! config/reference.md, "Compression"): each checked as nginx checks it,
//! so a configuration nginx refuses is reported rather than passed on.
//! `gzip_static`, `gzip_window`, `gzip_hash`, `gzip_no_buffer` and the
//! third-party modules' directives stay reported.

use super::Cx;
use super::doc::Value;
use super::level::{Level, arity};
use super::report::Kind;
use super::tree::Directive;
use super::values;

/// Translate `d` if it is one of the gzip family sluice has; false if not.
pub fn directive(cx: &mut Cx, lv: &mut Level, d: &Directive) -> bool {
    let value = match d.name.as_str() {
        "gzip" | "gzip_vary" => {
            if !arity(cx, d, 1) {
                return true;
            }
            match values::flag(d.arg(0)) {
                Ok(b) => Value::Bool(b),
                Err(e) => return report(cx, d, e),
            }
        }
        "gzip_types" | "gzip_proxied" | "gzip_disable" => match list(d) {
            Ok(v) => v,
            Err(e) => return report(cx, d, e),
        },
        "gzip_min_length" | "gzip_comp_level" | "gzip_http_version" | "gzip_buffers" => {
            match scalar(d) {
                Ok(v) => v,
                Err(e) => return report(cx, d, e),
            }
        }
        _ => return false,
    };
    let key = KEYS
        .iter()
        .find(|k| **k == d.name)
        .copied()
        .unwrap_or("gzip");
    if lv.has(key) {
        return report(cx, d, "duplicate at this level: nginx refuses it".into());
    }
    lv.push(key, value, d);
    true
}

/// The keys, named as the directives.
const KEYS: &[&str] = &[
    "gzip",
    "gzip_vary",
    "gzip_types",
    "gzip_proxied",
    "gzip_disable",
    "gzip_min_length",
    "gzip_comp_level",
    "gzip_http_version",
    "gzip_buffers",
];

fn report(cx: &mut Cx, d: &Directive, why: String) -> bool {
    cx.report(Kind::NotTranslated, d, why);
    true
}

/// The list directives: their arguments, checked.
fn list(d: &Directive) -> Result<Value, String> {
    if d.args.is_empty() {
        return Err("invalid number of arguments".into());
    }
    for a in &d.args {
        let bad = match d.name.as_str() {
            "gzip_proxied" => crate::compress::Proxied::word(a).is_none(),
            "gzip_disable" => a != "msie6" && regex::bytes::Regex::new(a).is_err(),
            _ => false,
        };
        if bad {
            return Err(format!("invalid value \"{a}\""));
        }
    }
    Ok(Value::Array(d.args.iter().map(Value::str).collect()))
}

/// The one-value directives (`gzip_buffers`: two words, one value).
fn scalar(d: &Directive) -> Result<Value, String> {
    let n = if d.name == "gzip_buffers" { 2 } else { 1 };
    if d.args.len() != n {
        return Err("invalid number of arguments".into());
    }
    let a = d.arg(0);
    let invalid = || format!("invalid value \"{a}\"");
    match d.name.as_str() {
        "gzip_min_length" => {
            let size = crate::config::values::parse_size(a).map_err(|_| invalid())?;
            Ok(Value::Int(i64::try_from(size).map_err(|_| invalid())?))
        }
        "gzip_comp_level" => match a.parse::<i64>() {
            Ok(l) if (1..=9).contains(&l) => Ok(Value::Int(l)),
            _ => Err(invalid()),
        },
        "gzip_http_version" if a == "1.0" || a == "1.1" => Ok(Value::str(a)),
        "gzip_http_version" => Err(invalid()),
        _ => {
            let v = format!("{a} {}", d.arg(1));
            let ok = a.parse::<usize>().is_ok_and(|n| n >= 1)
                && crate::config::values::parse_size(d.arg(1)).is_ok();
            if ok {
                Ok(Value::Str(v))
            } else {
                Err(format!("invalid value \"{v}\""))
            }
        }
    }
}
