//! The compression keys of a level: nginx's `gzip_*` directives under
//! their names, with nginx's values and checks (`gzip_comp_level` 1–9,
//! `gzip_http_version` 1.0 or 1.1, `gzip_proxied`'s words, `gzip_disable`'s
//! regexes and `msie6`), and sluice's `compress`, `zstd_comp_level`,
//! `brotli_comp_level`.

use super::super::values;
use super::level::LevelDraft;
use super::read::{Cx, Val};
use crate::compress::{Coding, Proxied, Types};
use std::sync::Arc;
use toml::de::DeValue;

type R<'a> = &'a mut LevelDraft;

pub(super) fn gzip(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.compress.gzip = cx.bool(v, k);
}

pub(super) fn gzip_vary(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.compress.vary = cx.bool(v, k);
}

/// nginx's arguments: a string of words, or a list of strings, each one
/// argument (a `gzip_disable` regex may hold a space).
fn words(cx: &mut Cx, k: &str, v: &Val) -> Option<Vec<String>> {
    if let DeValue::Array(items) = v.get_ref() {
        let mut out = Vec::new();
        for item in items {
            out.push(cx.str(item, k)?.to_string());
        }
        return Some(out);
    }
    let s = cx.str(v, k)?;
    Some(s.split_ascii_whitespace().map(str::to_string).collect())
}

pub(super) fn compress(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(list) = words(cx, k, v) else { return };
    let mut codings = Vec::new();
    for w in &list {
        match Coding::parse(w) {
            Some(c) if !codings.contains(&c) => codings.push(c),
            Some(_) => cx.err(v.span(), format!("\"{k}\" lists \"{w}\" twice")),
            None => cx.err(
                v.span(),
                format!(
                    "invalid coding \"{w}\" in \"{k}\" (expected \"gzip\", \"zstd\" or \"br\")"
                ),
            ),
        }
    }
    l.level.compress.codings = Some(Arc::new(codings));
}

pub(super) fn gzip_types(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(list) = words(cx, k, v) else { return };
    let types = if list.iter().any(|t| t == "*") {
        Types::Any
    } else {
        Types::List(
            list.iter()
                .map(|t| t.to_ascii_lowercase().into_bytes())
                .collect(),
        )
    };
    l.level.compress.types = Some(Arc::new(types));
}

/// A count that may be an integer or a string of one (nginx's size
/// suffixes allowed: `"1k"`).
fn size(cx: &mut Cx, k: &str, v: &Val) -> Option<u64> {
    let s = cx.scalar_text(v, k)?;
    match values::parse_size(&s) {
        Ok(n) => Some(n),
        Err(e) => {
            cx.err(v.span(), format!("\"{k}\": {e}"));
            None
        }
    }
}

pub(super) fn gzip_min_length(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.compress.min_length = size(cx, k, v);
}

/// An integer in `range`.
fn level(cx: &mut Cx, k: &str, v: &Val, range: std::ops::RangeInclusive<i128>) -> Option<i128> {
    let n = cx.int(v, k)?;
    if !range.contains(&n) {
        let (lo, hi) = (range.start(), range.end());
        cx.err(
            v.span(),
            format!("\"{k}\" must be between {lo} and {hi}, not {n}"),
        );
        return None;
    }
    Some(n)
}

pub(super) fn gzip_comp_level(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.compress.gzip_level = level(cx, k, v, 1..=9).map(|n| n as u32);
}

pub(super) fn zstd_comp_level(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.compress.zstd_level = level(cx, k, v, 1..=19).map(|n| n as i32);
}

pub(super) fn brotli_comp_level(cx: &mut Cx, k: &str, v: &Val, l: R) {
    l.level.compress.brotli_level = level(cx, k, v, 0..=11).map(|n| n as u32);
}

pub(super) fn gzip_http_version(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let text = match v.get_ref() {
        // (`1.0` written as a TOML float is the same directive.)
        DeValue::Float(f) => Some(f.as_str().to_string()),
        _ => cx.str(v, k).map(str::to_string),
    };
    l.level.compress.http10 = match text.as_deref() {
        Some("1.0") => Some(true),
        Some("1.1") => Some(false),
        Some(s) => {
            cx.err(
                v.span(),
                format!("invalid value \"{s}\" in \"{k}\" (expected \"1.0\" or \"1.1\")"),
            );
            None
        }
        None => None,
    };
}

pub(super) fn gzip_proxied(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(list) = words(cx, k, v) else { return };
    let mut set = Proxied::default();
    for w in &list {
        match Proxied::word(w) {
            Some(p) => set = set.with(p),
            None => cx.err(v.span(), format!("invalid value \"{w}\" in \"{k}\"")),
        }
    }
    l.level.compress.proxied = Some(set);
}

pub(super) fn gzip_disable(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(list) = words(cx, k, v) else { return };
    let (mut regexes, mut msie6) = (Vec::new(), false);
    for w in &list {
        if w == "msie6" {
            msie6 = true;
            continue;
        }
        // nginx compiles them caseless.
        match regex::bytes::Regex::new(&format!("(?i){w}")) {
            Ok(re) => regexes.push(re),
            Err(e) => cx.err(v.span(), format!("\"{k}\": invalid regex \"{w}\": {e}")),
        }
    }
    l.level.compress.disable = Some(Arc::new((regexes, msie6)));
}

pub(super) fn gzip_buffers(cx: &mut Cx, k: &str, v: &Val, l: R) {
    let Some(s) = cx.str(v, k) else { return };
    let invalid =
        || format!("\"{k}\": invalid value \"{s}\" (expected \"NUMBER SIZE\", e.g. \"32 4k\")");
    let mut parts = s.split_ascii_whitespace();
    let parsed = match (parts.next(), parts.next(), parts.next()) {
        (Some(n), Some(size), None) => n.parse::<usize>().ok().zip(values::parse_size(size).ok()),
        _ => None,
    };
    match parsed {
        Some((n, size)) if n >= 1 && (1..=1 << 24).contains(&size) => {
            l.level.compress.buffers = Some((n, size as usize));
        }
        _ => cx.err(v.span(), invalid()),
    }
}
