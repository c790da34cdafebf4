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
    let from_files = match found {
        None if target.starts_with('/') => Some(&s.level),
        Some((Content::Files, lv, _)) if named.is_none() => Some(lv),
        _ => None,
    };
    if let Some(lv) = from_files {
        return file_page(cx, d, overwrite, target, lv, s, t);
    }
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

/// The largest file copied into an error page.
const MAX_PAGE: u64 = 64 * 1024;

/// An error page nginx serves from a file (`error_page 500 502 /50x.html;
/// location = /50x.html { root html; }`): sluice serves no files, so the
/// file's text, read now, is the page's body (and a report says so); a file
/// that cannot be read (or a body sluice would read variables in) is
/// reported instead.
fn file_page(
    cx: &mut Cx,
    d: &Directive,
    overwrite: Option<Option<i64>>,
    target: &str,
    lv: &Level,
    s: &ServerAcc,
    mut t: Table,
) -> Option<Table> {
    let (alias, root) = lv
        .root
        .clone()
        .or_else(|| s.level.root.clone())
        .or_else(|| s.http_level.root.clone())
        .unwrap_or((false, "html".into()));
    let file = match (alias, root.ends_with('/')) {
        (true, false) => root.clone(),
        _ => format!("{}{target}", root.trim_end_matches('/')),
    };
    let path = match (&cx.opts.prefix, std::path::Path::new(&file).is_relative()) {
        (Some(prefix), true) => prefix.join(&file),
        // nginx's own layout: PREFIX/conf/nginx.conf beside PREFIX/html.
        (None, true) => cx.conf_dir.parent().unwrap_or(&cx.conf_dir).join(&file),
        (_, false) => file.clone().into(),
    };
    let text = std::fs::metadata(&path)
        .map_err(|e| e.to_string())
        .and_then(|m| match m.len() {
            n if n > MAX_PAGE => Err(format!("{n} bytes, over {MAX_PAGE}")),
            _ => std::fs::read_to_string(&path).map_err(|e| e.to_string()),
        })
        .and_then(|text| match text.contains('$') {
            true => Err("it has a \"$\", which sluice's body reads as a variable".into()),
            false => Ok(text),
        });
    let text = match text {
        Ok(text) => text,
        Err(e) => {
            let why = format!(
                "{target} is a file (root {root}): sluice serves no files, and {} cannot be \
                 copied into the page ({e}; --prefix DIR says where nginx's relative paths are)",
                path.display()
            );
            cx.report(Kind::NotTranslated, d, why);
            return None;
        }
    };
    let why = format!(
        "{target} is a file: its text ({}, as read now) is the page's body, since sluice \
         serves no files",
        path.display()
    );
    cx.report(Kind::Partial, d, why);
    match overwrite {
        Some(Some(c)) => t.set("status", Value::Int(c), vec![]),
        Some(None) => t.set("status", Value::Int(200), vec![]),
        None => {}
    }
    let ctype = match file.rsplit_once('.').map(|(_, e)| e) {
        Some("html" | "htm") => Some("text/html"),
        Some("txt") => Some("text/plain"),
        Some("json") => Some("application/json"),
        _ => s.content_type(lv),
    };
    if let Some(ct) = ctype {
        let h = Value::Inline(vec![("Content-Type".into(), Value::str(ct))]);
        t.set("headers", h, vec![]);
    }
    let c = format!("the text of {} (nginx served the file)", path.display());
    t.set("body", Value::Str(text), vec![c]);
    Some(t)
}
