//! `error_page CODE… [=[NEW]] TARGET` → `error_pages`: the target is a
//! named location, or a location of the server, answering with `return`
//! (its `add_header`s and `default_type` with it), or a URL (a redirect).
//! nginx's status rule: without `=` the page keeps the error's code, with
//! `=NEW` it is NEW, with `=` alone the target's own.

use super::Cx;
use super::doc::{Table, Value};
use super::level::Level;
use super::report::Kind;
use super::server::{Content, Loc, Named, Ret, ServerAcc, comment, is_redirect};
use super::tree::Directive;

/// `error_page CODE… [=[NEW]] TARGET` lines → `error_pages`, where the
/// target is a named location, or a location of the server, answering
/// with `return`, or a URL (a redirect).
pub(super) fn error_pages(cx: &mut Cx, pages: &[Directive], s: &ServerAcc) -> Option<Table> {
    let mut t = Table::default();
    for d in pages {
        let Some((codes, overwrite, target)) = parse_error_page(d) else {
            cx.report(Kind::NotTranslated, d, "invalid arguments");
            continue;
        };
        let Some(page) = page(cx, d, overwrite, &target, s) else {
            continue;
        };
        for code in codes {
            let mut p = page.clone();
            if let Some(e) = p.entries.iter().position(|e| e.key == "status") {
                if p.entries[e].value == Value::Int(code) {
                    p.entries.remove(e);
                }
            }
            *t.sub(&code.to_string()) = p;
        }
    }
    (!t.subs.is_empty()).then_some(t)
}

/// The codes, the `=` (`Some(None)`: `=` alone, the target's code), the
/// target.
fn parse_error_page(d: &Directive) -> Option<(Vec<i64>, Option<Option<i64>>, String)> {
    let (target, rest) = d.args.split_last()?;
    let mut codes = Vec::new();
    let mut overwrite = None;
    for a in rest {
        if let Some(n) = a.strip_prefix('=') {
            overwrite = Some(if n.is_empty() {
                None
            } else {
                Some(n.parse().ok()?)
            });
        } else {
            let c: i64 = a.parse().ok()?;
            if !(300..=599).contains(&c) {
                return None;
            }
            codes.push(c);
        }
    }
    (!codes.is_empty()).then_some((codes, overwrite, target.clone()))
}

/// One error page's table (its `status` absent when it is the code's).
fn page(
    cx: &mut Cx,
    d: &Directive,
    overwrite: Option<Option<i64>>,
    target: &str,
    s: &ServerAcc,
) -> Option<Table> {
    let mut t = Table {
        comments: vec![comment(d)],
        ..Table::default()
    };
    if target.starts_with("http://") || target.starts_with("https://") {
        let code = match overwrite {
            Some(Some(c)) if is_redirect(c) => c,
            _ => 302,
        };
        t.set("status", Value::Int(code), vec![]);
        let loc = Value::Inline(vec![("Location".into(), Value::str(target))]);
        t.set("headers", loc, vec![]);
        return Some(t);
    }
    let named = target.strip_prefix('@').and_then(|name| {
        s.named
            .iter()
            .find(|n| n.name.strip_prefix('@') == Some(name))
    });
    let found = if target.starts_with('@') {
        named.map(|n| (&n.content, &n.level, &n.comments))
    } else {
        find_location(s, target).map(|l| (&l.content, &l.level, &l.comments))
    };
    let Some((content, lv, comments)) = found else {
        let why = format!("{target} is not a location of this server sluice can see");
        cx.report(Kind::NotTranslated, d, why);
        return None;
    };
    let Content::Return(r) = content else {
        let why = format!(
            "{target} does not answer with return: sluice's error pages are a status, headers and a body"
        );
        cx.report(Kind::NotTranslated, d, why);
        return None;
    };
    t.comments.extend(comments.iter().cloned());
    if let Some(n) = named {
        if !n.used.replace(true) {
            named_rest(cx, n);
        }
    }
    let status = match overwrite {
        Some(Some(c)) => Some(c),
        Some(None) => Some(r.code),
        None => None,
    };
    if let Some(c) = status {
        t.set("status", Value::Int(c), vec![]);
    }
    page_body(&mut t, r, lv, status, s.content_type(lv));
    Some(t)
}

/// What a named location made into an error page says besides `return`,
/// `add_header` and `default_type`: reported, an error page has no more.
fn named_rest(cx: &mut Cx, n: &Named) {
    for c in n.d.children() {
        if !matches!(c.name.as_str(), "return" | "add_header" | "default_type") {
            let why = "in an error page's location: sluice's error pages are a status, headers and a body";
            cx.report(Kind::NotTranslated, c, why);
        }
    }
}

/// A page's headers (the target's `add_header … always`, and `Location`
/// for a redirect) and body.
fn page_body(t: &mut Table, r: &Ret, lv: &Level, status: Option<i64>, ctype: Option<&str>) {
    let mut headers = Vec::new();
    let mut notes = Vec::new();
    let ok_status = status.is_some_and(|c| (200..400).contains(&c));
    for item in lv.items.iter().filter(|i| i.key == "add_header") {
        let Value::Inline(kv) = &item.value else {
            continue;
        };
        let get = |k: &str| kv.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let always = get("always") == Some(Value::Bool(true));
        let (Some(Value::Str(name)), Some(value)) = (get("name"), get("value")) else {
            continue;
        };
        if !always && !ok_status {
            notes.push(format!(
                "{} (not sent: no always, and the status is an error)",
                item.comment
            ));
            continue;
        }
        if name.eq_ignore_ascii_case("retry-after")
            && !matches!(&value, Value::Str(v) if v.contains('$'))
        {
            notes.push(format!(
                "{} — sluice can compute it: \"{name}\" = \"$retry_after\"",
                item.comment
            ));
        } else {
            notes.push(item.comment.clone());
        }
        headers.push((name, value));
    }
    match (&r.text, ctype) {
        (Some(text), _) if is_redirect(r.code) => {
            headers.push(("Location".into(), Value::str(text)))
        }
        (Some(_), Some(ct)) => headers.push(("Content-Type".into(), Value::str(ct))),
        _ => {}
    }
    if !headers.is_empty() {
        t.set("headers", Value::Inline(headers), notes);
    } else if !notes.is_empty() {
        t.comments.extend(notes);
    }
    if let (Some(text), false) = (&r.text, is_redirect(r.code)) {
        t.set("body", Value::str(text), vec![]);
    }
}

/// The location nginx's internal redirect to `uri` finds (exact, then the
/// longest prefix; regexes are not looked at).
fn find_location<'s>(s: &'s ServerAcc, uri: &str) -> Option<&'s Loc> {
    let exact = format!("= {uri}");
    s.locs.iter().find(|l| l.path == exact).or_else(|| {
        s.locs
            .iter()
            .filter(|l| {
                let p = l.path.strip_prefix("^~ ").unwrap_or(&l.path);
                !l.path.starts_with('=') && !l.path.starts_with('~') && uri.starts_with(p)
            })
            .max_by_key(|l| l.path.len())
    })
}
