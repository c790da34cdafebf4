//! nginx's `map`: a variable whose value is chosen by matching another
//! value (its source) against a table.
//!
//! The order is nginx's: an exact string (ASCII case ignored, as nginx's
//! hash lowercases both sides), then with `hostnames` the longest
//! `*.example.com` / `.example.com` mask, then the longest `www.example.*`
//! mask, then the regexes in the order written (`~` case-sensitive, `~*`
//! not), else `default`. A value may name variables, and those of a regex
//! entry its captures (`$1`, `${name}`).

use super::{RequestVars, Template};
use regex::bytes::Regex;
use std::collections::HashMap;

/// A `map`, compiled.
#[derive(Debug)]
pub struct Map {
    pub(crate) source: Template,
    exact: HashMap<Box<[u8]>, usize>,
    /// `hostnames` only: `.example.com` of `*.example.com` (and of
    /// `.example.com`, which also matches `example.com` exactly), longest
    /// first.
    front: Vec<(Box<[u8]>, usize)>,
    /// `hostnames` only: `www.example.` of `www.example.*`, longest first.
    back: Vec<(Box<[u8]>, usize)>,
    regex: Vec<(Regex, usize)>,
    hostnames: bool,
    values: Vec<Template>,
    default: Template,
}

/// An entry's pattern as written (`~re`, `~*re`, `*.a.b`, …) that is not
/// one: the message.
pub type PatternError = String;

/// How a pattern of a map matches.
pub enum Pattern {
    Exact(String),
    /// `.a.b` (matches `x.a.b`); `true` for `.a.b` as written, which also
    /// matches `a.b` itself.
    Front(String, bool),
    Back(String),
    Regex(Regex),
}

impl Pattern {
    /// nginx's reading of an entry's source side: `~re`, `~*re`, with
    /// `hostnames` the masks, and `\` before a leading `~` or `*` (or any
    /// character) to take it literally.
    pub fn parse(src: &str, hostnames: bool) -> Result<Pattern, PatternError> {
        if let Some(re) = src.strip_prefix("~*") {
            return compile(re, true).map(Pattern::Regex);
        }
        if let Some(re) = src.strip_prefix('~') {
            return compile(re, false).map(Pattern::Regex);
        }
        if let Some(lit) = src.strip_prefix('\\') {
            return Ok(Pattern::Exact(lit.to_ascii_lowercase()));
        }
        let low = src.to_ascii_lowercase();
        if !hostnames {
            return Ok(Pattern::Exact(low));
        }
        let low = low.strip_suffix('.').unwrap_or(&low).to_string();
        if let Some(rest) = low.strip_prefix("*.") {
            check_mask(rest, src)?;
            return Ok(Pattern::Front(format!(".{rest}"), false));
        }
        if let Some(rest) = low.strip_prefix('.') {
            check_mask(rest, src)?;
            return Ok(Pattern::Front(format!(".{rest}"), true));
        }
        if let Some(rest) = low.strip_suffix(".*") {
            check_mask(rest, src)?;
            return Ok(Pattern::Back(format!("{rest}.")));
        }
        if low.contains('*') {
            return Err(format!("invalid hostname or wildcard \"{src}\""));
        }
        Ok(Pattern::Exact(low))
    }

    /// The regex of a `~` entry (its captures are usable in the value).
    pub fn regex(&self) -> Option<&Regex> {
        match self {
            Pattern::Regex(r) => Some(r),
            _ => None,
        }
    }
}

fn check_mask(rest: &str, src: &str) -> Result<(), PatternError> {
    if rest.is_empty() || rest.contains('*') {
        return Err(format!("invalid hostname or wildcard \"{src}\""));
    }
    Ok(())
}

fn compile(re: &str, nocase: bool) -> Result<Regex, PatternError> {
    regex::bytes::RegexBuilder::new(re)
        .case_insensitive(nocase)
        .build()
        .map_err(|e| {
            let first = e.to_string();
            let last = first.lines().last().unwrap_or("").trim();
            let last = last.strip_prefix("error: ").unwrap_or(last);
            format!("invalid regex \"{re}\": {last}")
        })
}

/// A map being built, entry by entry, in file order.
pub struct MapBuilder {
    map: Map,
}

impl MapBuilder {
    pub fn new(source: Template, hostnames: bool, default: Template) -> MapBuilder {
        MapBuilder {
            map: Map {
                source,
                exact: HashMap::new(),
                front: Vec::new(),
                back: Vec::new(),
                regex: Vec::new(),
                hostnames,
                values: Vec::new(),
                default,
            },
        }
    }

    /// Add `pattern` → `value`. `Err` when the same string or mask is
    /// there already (nginx's "conflicting parameter").
    pub fn add(&mut self, pattern: Pattern, value: Template) -> Result<(), PatternError> {
        let m = &mut self.map;
        let i = m.values.len();
        let dup = |s: &str| Err(format!("conflicting parameter \"{s}\""));
        match pattern {
            Pattern::Exact(s) => {
                if m.exact.insert(s.as_bytes().into(), i).is_some() {
                    return dup(&s);
                }
            }
            Pattern::Front(s, bare) => {
                if m.front.iter().any(|(f, _)| **f == *s.as_bytes()) {
                    return dup(&s);
                }
                if bare && m.exact.insert(s.as_bytes()[1..].into(), i).is_some() {
                    return dup(&s[1..]);
                }
                m.front.push((s.as_bytes().into(), i));
            }
            Pattern::Back(s) => {
                if m.back.iter().any(|(b, _)| **b == *s.as_bytes()) {
                    return dup(&s);
                }
                m.back.push((s.as_bytes().into(), i));
            }
            Pattern::Regex(r) => m.regex.push((r, i)),
        }
        m.values.push(value);
        Ok(())
    }

    pub fn build(mut self) -> Map {
        self.map
            .front
            .sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
        self.map
            .back
            .sort_by_key(|(b, _)| std::cmp::Reverse(b.len()));
        self.map
    }
}

impl Map {
    /// Every template the map evaluates: its source, values and default.
    pub(crate) fn templates(&self) -> impl Iterator<Item = &Template> {
        std::iter::once(&self.source)
            .chain(self.values.iter())
            .chain(std::iter::once(&self.default))
    }

    /// `$source: N strings, N masks, N regexes, default "…"`, for `sluice
    /// check`.
    pub fn describe(&self) -> String {
        format!(
            "{}: {} strings, {} masks, {} regexes, default \"{}\"{}",
            self.source.source(),
            self.exact.len(),
            self.front.len() + self.back.len(),
            self.regex.len(),
            self.default.source(),
            if self.hostnames { ", hostnames" } else { "" }
        )
    }

    /// The value for `src` (the source's value for this request).
    pub(crate) fn value(&self, src: &[u8], req: &RequestVars, out: &mut Vec<u8>) {
        let src = match (self.hostnames, src.strip_suffix(b".")) {
            (true, Some(s)) => s,
            _ => src,
        };
        if let Some(i) = self.find_string(src) {
            return self.values[i].eval(req, None, out);
        }
        if !src.is_empty() {
            for (re, i) in &self.regex {
                if let Some(caps) = re.captures(src) {
                    return self.values[*i].eval_captured(req, &caps, out);
                }
            }
        }
        self.default.eval(req, None, out)
    }

    /// An exact string, then the masks.
    fn find_string(&self, src: &[u8]) -> Option<usize> {
        if self.exact.is_empty() && self.front.is_empty() && self.back.is_empty() {
            return None;
        }
        let low = src.to_ascii_lowercase();
        if let Some(&i) = self.exact.get(low.as_slice()) {
            return Some(i);
        }
        // `.a.b` matches `x.a.b` (`a.b` itself, for a mask written
        // `.a.b`, is an exact string too).
        let front = self
            .front
            .iter()
            .find(|(f, _)| low.ends_with(f) && low.len() > f.len());
        if let Some(&(_, i)) = front {
            return Some(i);
        }
        self.back
            .iter()
            .find(|(b, _)| low.starts_with(b) && low.len() > b.len())
            .map(|&(_, i)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vars::{Context, Names};

    fn t(s: &str) -> Template {
        Template::parse(s, Context::Key).unwrap()
    }

    fn map(hostnames: bool, entries: &[(&str, &str)]) -> Map {
        let mut b = MapBuilder::new(t("$host"), hostnames, t("dflt"));
        for (p, v) in entries {
            let p = Pattern::parse(p, hostnames).unwrap();
            let names = Names {
                user: &[],
                captures: p.regex(),
            };
            let v = Template::parse_named(v, Context::Key, names).unwrap();
            b.add(p, v).unwrap();
        }
        b.build()
    }

    fn get(m: &Map, src: &str) -> String {
        let h = crate::http1::Fields::default();
        let req = RequestVars::for_test(&h, "10.1.2.3");
        let mut out = Vec::new();
        m.value(src.as_bytes(), &req, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn exact_ignores_case_and_regexes_go_in_order() {
        let m = map(
            false,
            &[
                ("GET", "read"),
                ("~^P(OST|UT)$", "write-$1"),
                ("~*^p", "p-any"),
                ("\\~x", "tilde"),
            ],
        );
        assert_eq!(get(&m, "get"), "read");
        assert_eq!(get(&m, "GET"), "read");
        assert_eq!(get(&m, "PUT"), "write-UT");
        assert_eq!(get(&m, "put"), "p-any");
        assert_eq!(get(&m, "PATCH"), "p-any");
        assert_eq!(get(&m, "~x"), "tilde");
        assert_eq!(get(&m, "DELETE"), "dflt");
        assert_eq!(get(&m, ""), "dflt");
    }

    #[test]
    fn named_captures_and_variables_in_values() {
        let m = map(false, &[("~^/v(?<ver>[0-9]+)/", "api${ver}-$remote_addr")]);
        assert_eq!(get(&m, "/v2/x"), "api2-10.1.2.3");
    }

    #[test]
    fn hostnames_exact_then_longest_front_then_back() {
        let m = map(
            true,
            &[
                ("example.com", "exact"),
                ("*.example.com", "star"),
                (".a.example.com", "dot"),
                ("www.example.*", "back"),
                ("www.*", "www"),
                ("~^mail\\.", "re"),
            ],
        );
        assert_eq!(get(&m, "EXAMPLE.com."), "exact");
        assert_eq!(get(&m, "x.example.com"), "star");
        assert_eq!(get(&m, "a.example.com"), "dot");
        assert_eq!(get(&m, "b.a.example.com"), "dot");
        assert_eq!(get(&m, "www.example.org"), "back");
        assert_eq!(get(&m, "www.other.org"), "www");
        assert_eq!(get(&m, "mail.other.org"), "re");
        assert_eq!(get(&m, "other.org"), "dflt");
    }

    #[test]
    fn bad_patterns_and_duplicates_are_refused() {
        assert!(Pattern::parse("~(", false).is_err());
        assert!(Pattern::parse("a.*.b", true).is_err());
        let mut b = MapBuilder::new(t("$host"), false, t(""));
        b.add(Pattern::parse("A", false).unwrap(), t("1")).unwrap();
        assert!(b.add(Pattern::parse("a", false).unwrap(), t("2")).is_err());
    }
}
