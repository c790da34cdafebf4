//! The header directives of a level: `proxy_set_header`, `add_header`,
//! `proxy_hide_header`, `proxy_pass_header`, and their `grpc_*` twins
//! (see [`crate::headers`] for
//! what they do). Each is inherited on its own, as in nginx: a level that
//! sets one replaces its parent's whole list.

use super::super::spec::HeaderLevel;
use super::level::LevelDraft;
use super::read::{Cx, Key, Schema, Val};
use crate::headers::AddHeader;
use crate::vars::{Context, Template};
use http::HeaderName;
use std::sync::Arc;
use toml::de::DeValue;

type R<'a> = &'a mut LevelDraft;

/// The level's `proxy_*` header lists, or its `grpc_*` ones for a
/// `grpc_*` key (nginx's grpc module has its own).
fn lists<'a>(k: &str, l: R<'a>) -> &'a mut HeaderLevel {
    if super::level::is_grpc(k) {
        &mut l.level.grpc.headers
    } else {
        &mut l.level.headers
    }
}

fn name(cx: &mut Cx, text: &str, span: std::ops::Range<usize>) -> Option<HeaderName> {
    match HeaderName::from_bytes(text.as_bytes()) {
        Ok(n) => Some(n),
        Err(_) => {
            cx.err(span, format!("invalid header name \"{text}\""));
            None
        }
    }
}

/// `proxy_set_header = { NAME = "value", NAME2 = ["v1", "v2"], … }`.
pub(super) fn proxy_set_header(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(t) = cx.table(v, k) else { return };
    let mut set = Vec::new();
    for (key, hv) in t.iter() {
        let Some(n) = name(cx, key.get_ref(), key.span()) else {
            continue;
        };
        if matches!(n.as_str(), "content-length" | "transfer-encoding") {
            cx.err(
                key.span(),
                format!(
                    "\"{}\" cannot be set: sluice writes the body's framing itself",
                    key.get_ref()
                ),
            );
            continue;
        }
        for value in values(cx, hv, key.get_ref()) {
            set.push((n.clone(), value));
        }
    }
    lists(k, l).proxy_set_header = Some(Arc::new(set));
}

/// One `proxy_set_header` value: a template, or a list of them (the field
/// sent once per element, in order: nginx's repeated `proxy_set_header`
/// lines of one name).
fn values(cx: &mut Cx, v: &Val, key: &str) -> Vec<Template> {
    let DeValue::Array(items) = v.get_ref() else {
        return cx.template(v, key, Context::Proxy).into_iter().collect();
    };
    if items.is_empty() {
        let why = format!("\"{key}\" = []: a list needs a value; \"\" removes the field");
        cx.err(v.span(), why);
    }
    items
        .iter()
        .filter_map(|item| cx.template(item, key, Context::Proxy))
        .collect()
}

/// One `add_header` table's fields as read.
#[derive(Default)]
struct AddDraft {
    name: Option<HeaderName>,
    value: Option<Template>,
    always: bool,
}

static ADD_HEADER: Schema<AddDraft> = Schema::plain(&[
    Key {
        name: "name",
        read: |cx, k, v, d| {
            if let Some(s) = cx.str(v, k) {
                d.name = name(cx, s, v.span());
            }
        },
    },
    Key {
        name: "value",
        read: |cx, k, v, d| d.value = cx.template(v, k, Context::Response),
    },
    Key {
        name: "always",
        read: |cx, k, v, d| d.always = cx.bool(v, k).unwrap_or(false),
    },
]);

/// `add_header = { name, value, always }` or a list of them.
pub(super) fn add_header(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(items) = cx.tables(v, k) else { return };
    let mut list = Vec::new();
    for item in items {
        let Some(t) = cx.table(item, k) else { continue };
        let mut d = AddDraft::default();
        ADD_HEADER.read(cx, t, "add_header", &mut d);
        if !super::read::has(t, "name") || !super::read::has(t, "value") {
            cx.err(
                item.span(),
                "\"add_header\" needs \"name\" and \"value\" (and may have \"always\")",
            );
            continue;
        }
        if let (Some(name), Some(value)) = (d.name, d.value) {
            list.push(AddHeader {
                name,
                value,
                always: d.always,
            });
        }
    }
    l.level.headers.add_header = Some(Arc::new(list));
}

/// A header name or a list of them.
fn names(cx: &mut Cx, k: &str, v: &Val) -> Option<Arc<Vec<HeaderName>>> {
    let items: Vec<&Val> = match v.get_ref() {
        DeValue::Array(a) => a.iter().collect(),
        _ => vec![v],
    };
    let mut out = Vec::new();
    for item in items {
        let s = cx.str(item, k)?;
        out.extend(name(cx, s, item.span()));
    }
    Some(Arc::new(out))
}

pub(super) fn proxy_hide_header(cx: &mut Cx, k: &str, v: &Val, l: R) {
    lists(k, l).proxy_hide_header = names(cx, k, v);
}

pub(super) fn proxy_pass_header(cx: &mut Cx, k: &str, v: &Val, l: R) {
    lists(k, l).proxy_pass_header = names(cx, k, v);
}
