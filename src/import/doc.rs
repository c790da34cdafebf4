//! The TOML the translation writes, as a small document model with
//! comments: toml's own serializer keeps no comments, and every key of the
//! output carries the nginx line it came from.
//!
//! A [`Table`] renders its plain keys first, then its sub-tables
//! (`[servers.error_pages.429]`) and arrays of tables (`[[servers]]`), as
//! TOML requires; values are inline (`{ zone = "z", burst = 5 }`), arrays
//! break into one element per line when they do not fit on one.

use std::fmt::Write as _;

/// Lines longer than this break an array into one element per line.
const WIDTH: usize = 100;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Array(Vec<Value>),
    /// An inline table, keys in order.
    Inline(Vec<(String, Value)>),
}

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }
}

/// One `key = value`, with the comment lines above it and an optional
/// comment after it on the same line.
#[derive(Debug, Clone)]
pub struct Entry {
    pub comments: Vec<String>,
    pub key: String,
    pub value: Value,
    pub trailing: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Comment lines above the table's header.
    pub comments: Vec<String>,
    pub entries: Vec<Entry>,
    pub subs: Vec<(String, Sub)>,
}

#[derive(Debug, Clone)]
pub enum Sub {
    Table(Table),
    Array(Vec<Table>),
}

impl Table {
    /// Add `key = value` with comment lines above it.
    pub fn set(&mut self, key: &str, value: Value, comments: Vec<String>) {
        self.entries.push(Entry {
            comments,
            key: key.to_string(),
            value,
            trailing: None,
        });
    }

    /// The sub-table `name`, made if missing.
    pub fn sub(&mut self, name: &str) -> &mut Table {
        let i = match self.subs.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.subs
                    .push((name.to_string(), Sub::Table(Table::default())));
                self.subs.len() - 1
            }
        };
        match &mut self.subs[i].1 {
            Sub::Table(t) => t,
            Sub::Array(a) => {
                // Never both under one name; keep going with a fresh element.
                a.push(Table::default());
                let n = a.len() - 1;
                &mut a[n]
            }
        }
    }

    /// Append `t` to the array of tables `name`.
    pub fn push(&mut self, name: &str, t: Table) {
        match self.subs.iter_mut().find(|(n, _)| n == name) {
            Some((_, Sub::Array(a))) => a.push(t),
            _ => self.subs.push((name.to_string(), Sub::Array(vec![t]))),
        }
    }

    /// The whole document (this is the top level).
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_body(&mut out, "");
        out
    }

    fn render_body(&self, out: &mut String, path: &str) {
        let (one_line, promoted): (Vec<&Entry>, Vec<&Entry>) =
            self.entries.iter().partition(|e| !too_wide(e));
        for e in one_line {
            for c in &e.comments {
                comment(out, c);
            }
            let key = key(&e.key);
            let value = render_value(&e.value, key.len() + 3);
            let _ = write!(out, "{key} = {value}");
            if let Some(t) = &e.trailing {
                let _ = write!(out, "   # {t}");
            }
            out.push('\n');
        }
        for e in promoted {
            // `[path.key]`, a pair per line: the same TOML, readable.
            let Value::Inline(kv) = &e.value else {
                continue;
            };
            let full = if path.is_empty() {
                key(&e.key)
            } else {
                format!("{path}.{}", key(&e.key))
            };
            out.push('\n');
            for c in &e.comments {
                comment(out, c);
            }
            let _ = writeln!(out, "[{full}]");
            for (k, v) in kv {
                let _ = writeln!(out, "{} = {}", key(k), inline(v));
            }
        }
        for (name, sub) in &self.subs {
            let full = if path.is_empty() {
                key(name)
            } else {
                format!("{path}.{}", key(name))
            };
            let tables: Vec<&Table> = match sub {
                Sub::Table(t) => vec![t],
                Sub::Array(a) => a.iter().collect(),
            };
            for t in tables {
                let implicit = matches!(sub, Sub::Table(_))
                    && t.entries.is_empty()
                    && t.comments.is_empty()
                    && !t.subs.is_empty();
                if implicit {
                    // `[zones]` above `[zones.a]` says nothing.
                    t.render_body(out, &full);
                    continue;
                }
                if !out.is_empty() {
                    out.push('\n');
                }
                for c in &t.comments {
                    comment(out, c);
                }
                match sub {
                    Sub::Table(_) => {
                        let _ = writeln!(out, "[{full}]");
                    }
                    Sub::Array(_) => {
                        let _ = writeln!(out, "[[{full}]]");
                    }
                }
                t.render_body(out, &full);
            }
        }
    }
}

/// An inline table of scalars too wide for one line: written as a table.
fn too_wide(e: &Entry) -> bool {
    match &e.value {
        Value::Inline(kv) => {
            kv.iter()
                .all(|(_, v)| !matches!(v, Value::Inline(_) | Value::Array(_)))
                && key(&e.key).len() + 3 + inline(&e.value).len() > WIDTH
        }
        _ => false,
    }
}

fn comment(out: &mut String, c: &str) {
    for line in c.lines() {
        if line.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {line}");
        }
    }
    if c.is_empty() {
        out.push_str("#\n");
    }
}

/// A key, quoted unless bare.
pub fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare { k.to_string() } else { string(k) }
}

/// A string: a literal `'…'` when that needs no escape and the text has a
/// backslash (regexes stay readable), else a basic `"…"`.
pub fn string(s: &str) -> String {
    if s.contains('\\') && !s.contains('\'') && !s.chars().any(|c| c.is_control()) {
        return format!("'{s}'");
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value on one line, or (an array too wide after `indent` columns) one
/// element per line.
fn render_value(v: &Value, indent: usize) -> String {
    let one = inline(v);
    match v {
        Value::Array(items) if indent + one.len() > WIDTH && !items.is_empty() => {
            let mut s = String::from("[\n");
            for i in items {
                let _ = writeln!(s, "  {},", inline(i));
            }
            s.push(']');
            s
        }
        _ => one,
    }
}

fn inline(v: &Value) -> String {
    match v {
        Value::Str(s) => string(s),
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(inline).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Inline(kv) if kv.is_empty() => "{}".into(),
        Value::Inline(kv) => {
            let parts: Vec<String> = kv
                .iter()
                .map(|(k, v)| format!("{} = {}", key(k), inline(v)))
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_keys_then_tables_and_parses_back() {
        let mut top = Table::default();
        top.set(
            "limit_req_status",
            Value::Int(429),
            vec!["nginx.conf:3: limit_req_status 429;".into()],
        );
        let z = top.sub("zones").sub("z one");
        z.set("key", Value::str("$binary_remote_addr"), vec![]);
        let mut s = Table {
            comments: vec!["server {".into()],
            ..Table::default()
        };
        s.set("listen", Value::str("127.0.0.1:80"), vec![]);
        let mut l = Table::default();
        l.set("path", Value::str(r"~ \.php$"), vec![]);
        l.set(
            "limit_req",
            Value::Inline(vec![
                ("zone".into(), Value::str("z one")),
                ("burst".into(), Value::Int(5)),
            ]),
            vec![],
        );
        s.push("locations", l);
        s.sub("error_pages")
            .sub("429")
            .set("body", Value::str("a \"b\"\n"), vec![]);
        top.push("servers", s);
        let text = top.render();
        assert!(
            text.starts_with("# nginx.conf:3: limit_req_status 429;\nlimit_req_status = 429\n"),
            "{text}"
        );
        assert!(
            text.contains("[zones.\"z one\"]\nkey = \"$binary_remote_addr\"\n"),
            "{text}"
        );
        assert!(text.contains("path = '~ \\.php$'"), "{text}");
        assert!(
            text.contains("[servers.error_pages.429]\nbody = \"a \\\"b\\\"\\n\""),
            "{text}"
        );
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(
            parsed["servers"][0]["locations"][0]["limit_req"]["burst"].as_integer(),
            Some(5)
        );
        assert_eq!(
            parsed["servers"][0]["error_pages"]["429"]["body"].as_str(),
            Some("a \"b\"\n")
        );
    }

    #[test]
    fn wide_inline_tables_become_tables() {
        let kv: Vec<(String, Value)> = (0..6)
            .map(|i| {
                (
                    format!("X-Header-{i}"),
                    Value::str(format!("$http_x_value_{i}")),
                )
            })
            .collect();
        let mut top = Table::default();
        let mut s = Table::default();
        s.set(
            "proxy_set_header",
            Value::Inline(kv),
            vec!["nginx.conf:1: …".into()],
        );
        s.set("listen", Value::str("127.0.0.1:1"), vec![]);
        top.push("servers", s);
        let text = top.render();
        assert!(
            text.contains("listen = \"127.0.0.1:1\"\n\n# nginx.conf:1: …\n[servers.proxy_set_header]\nX-Header-0 = "),
            "{text}"
        );
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(
            parsed["servers"][0]["proxy_set_header"]["X-Header-5"].as_str(),
            Some("$http_x_value_5")
        );
    }

    #[test]
    fn wide_arrays_break_per_element() {
        let items: Vec<Value> = (0..8)
            .map(|i| {
                Value::Inline(vec![(
                    "address".into(),
                    Value::str(format!("10.0.0.{i}:8080")),
                )])
            })
            .collect();
        let mut t = Table::default();
        t.set("servers", Value::Array(items), vec![]);
        let text = t.render();
        assert!(
            text.starts_with("servers = [\n  { address = \"10.0.0.0:8080\" },\n"),
            "{text}"
        );
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(parsed["servers"].as_array().unwrap().len(), 8);
    }
}
