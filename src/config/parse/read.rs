//! Reading TOML values: the typed readers every section uses (each reports
//! a wrong type or a bad value at the value's position, nginx's wording
//! where it has one), and the schema tables that drive a section.
//!
//! A section is described once, by a table of its keys with the function
//! that reads each. The same table rejects unknown keys (its names are the
//! "expected one of" list) and reads the known ones, so a key cannot be
//! accepted without being read, or read without being accepted.

use super::super::error::Diagnostics;
use super::super::values;
use crate::errlog::Severity;
use crate::vars::{Context, Template};
use std::ops::Range;
use std::time::Duration;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A value of the document, with its byte span.
pub(in crate::config) type Val<'i> = Spanned<DeValue<'i>>;

/// A key of a table, with its span.
pub(in crate::config) type Name<'i> = Spanned<std::borrow::Cow<'i, str>>;

/// The problem with a value is already in the diagnostics: a piece that
/// failed to read, kept so that later checks do not report it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::config) struct Reported;

/// A name from the file and where it is, for checks made after reading.
#[derive(Clone, Debug)]
pub(in crate::config) struct Named {
    pub name: String,
    pub span: Range<usize>,
}

/// What reading a document collects: its problems.
pub(in crate::config) struct Cx<'d> {
    pub d: &'d mut Diagnostics,
    /// The names of `[maps]` and `[geos]`, which templates may use.
    pub names: Vec<String>,
}

/// One key of a section and what reads it: `read(cx, key, value, builder)`.
pub(in crate::config) struct Key<T: 'static> {
    pub name: &'static str,
    pub read: fn(&mut Cx<'_>, &'static str, &Val<'_>, &mut T),
}

/// A section's keys: its own, then (for http, server and location) the
/// level keys they share. The order is the order the error message lists
/// them in, and the order they are read in.
pub(in crate::config) struct Schema<T: 'static> {
    pub own: &'static [Key<T>],
    pub shared: &'static [Key<T>],
}

impl<T: 'static> Schema<T> {
    /// A section without level keys.
    pub(crate) const fn plain(own: &'static [Key<T>]) -> Schema<T> {
        Schema { own, shared: &[] }
    }

    fn keys(&self) -> impl Iterator<Item = &Key<T>> {
        self.own.iter().chain(self.shared)
    }

    /// Report the keys of `t` this section does not have; `what` names the
    /// section in the message (`[redis]`, `[zones.NAME]`).
    pub(crate) fn check_unknown(&self, cx: &mut Cx<'_>, t: &DeTable<'_>, what: &str) {
        for (k, _) in t.iter() {
            if !self.keys().any(|key| key.name == k.get_ref().as_ref()) {
                let expected: Vec<&str> = self.keys().map(|key| key.name).collect();
                cx.err(
                    k.span(),
                    format!(
                        "unknown key \"{}\" in {what} (expected one of: {})",
                        k.get_ref(),
                        expected.join(", ")
                    ),
                );
            }
        }
    }

    /// Read the keys of `t` this section has into `into`, in the schema's
    /// order (so a reader may rely on the keys listed before it).
    pub(crate) fn read_keys(&self, cx: &mut Cx<'_>, t: &DeTable<'_>, into: &mut T) {
        for key in self.keys() {
            if let Some(v) = get(t, key.name) {
                (key.read)(cx, key.name, v, into);
            }
        }
    }

    /// [`Schema::check_unknown`], then [`Schema::read_keys`].
    pub(crate) fn read(&self, cx: &mut Cx<'_>, t: &DeTable<'_>, what: &str, into: &mut T) {
        self.check_unknown(cx, t, what);
        self.read_keys(cx, t, into);
    }
}

/// The value of `key` in `t`.
pub(in crate::config) fn get<'a, 'i>(t: &'a DeTable<'i>, key: &str) -> Option<&'a Val<'i>> {
    t.iter()
        .find(|(k, _)| k.get_ref().as_ref() == key)
        .map(|(_, v)| v)
}

/// Whether `t` has `key`.
pub(in crate::config) fn has(t: &DeTable<'_>, key: &str) -> bool {
    get(t, key).is_some()
}

pub(in crate::config) fn type_name(v: &DeValue) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// The levels nginx's `limit_req_log_level` accepts (and so
/// `error_log_level` here).
const LIMIT_LEVELS: [Severity; 4] = [
    Severity::Info,
    Severity::Notice,
    Severity::Warn,
    Severity::Error,
];

impl Cx<'_> {
    pub(crate) fn err(&mut self, span: Range<usize>, msg: impl Into<String>) {
        self.d.error(span, msg);
    }

    pub(crate) fn str<'a>(&mut self, v: &'a Val, key: &str) -> Option<&'a str> {
        match v.get_ref() {
            DeValue::String(s) => Some(s),
            other => {
                self.err(
                    v.span(),
                    format!("\"{key}\" must be a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    pub(crate) fn bool(&mut self, v: &Val, key: &str) -> Option<bool> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                self.err(
                    v.span(),
                    format!(
                        "\"{key}\" must be true or false, found {}",
                        type_name(other)
                    ),
                );
                None
            }
        }
    }

    pub(crate) fn int(&mut self, v: &Val, key: &str) -> Option<i128> {
        match v.get_ref() {
            DeValue::Integer(i) => match i128::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.err(v.span(), format!("\"{key}\" is out of range"));
                    None
                }
            },
            other => {
                self.err(
                    v.span(),
                    format!("\"{key}\" must be an integer, found {}", type_name(other)),
                );
                None
            }
        }
    }

    pub(crate) fn table<'a, 'i>(&mut self, v: &'a Val<'i>, key: &str) -> Option<&'a DeTable<'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            other => {
                self.err(
                    v.span(),
                    format!("\"{key}\" must be a table, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// One table or a list of them (`limit_req = {…}` or `[{…}, …]`): the
    /// items, or `None` (reported) for anything else.
    pub(crate) fn tables<'v, 'i>(&mut self, v: &'v Val<'i>, key: &str) -> Option<Vec<&'v Val<'i>>> {
        match v.get_ref() {
            DeValue::Table(_) => Some(vec![v]),
            DeValue::Array(a) => Some(a.iter().collect()),
            other => {
                self.err(
                    v.span(),
                    format!(
                        "\"{key}\" must be a table or a list of tables, found {}",
                        type_name(other)
                    ),
                );
                None
            }
        }
    }

    /// An array of tables (`[[servers]]`): the items that are tables (the
    /// others reported); `shape` names the array in the message.
    pub(crate) fn array_of_tables<'v, 'i>(
        &mut self,
        v: &'v Val<'i>,
        key: &str,
        shape: &str,
    ) -> Vec<(&'v DeTable<'i>, Range<usize>)> {
        let DeValue::Array(items) = v.get_ref() else {
            self.err(
                v.span(),
                format!(
                    "\"{key}\" must be an array of tables ({shape}), found {}",
                    type_name(v.get_ref())
                ),
            );
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|item| Some((self.table(item, key)?, item.span())))
            .collect()
    }

    /// A string or an integer, as text (sizes, rates, times may be either).
    pub(crate) fn scalar_text(&mut self, v: &Val, key: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            DeValue::Integer(i) => Some(i.as_str().to_string()),
            other => {
                self.err(
                    v.span(),
                    format!("\"{key}\" must be a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A list of words: one string (`"TLSv1.2 TLSv1.3"`, as nginx writes
    /// it) or an array of strings; the words joined by spaces.
    pub(crate) fn scalar_list(&mut self, v: &Val, key: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            DeValue::Array(items) => {
                let mut words = Vec::new();
                for item in items {
                    words.push(self.str(item, key)?.to_string());
                }
                Some(words.join(" "))
            }
            other => {
                self.err(
                    v.span(),
                    format!(
                        "\"{key}\" must be a string or an array of strings, found {}",
                        type_name(other)
                    ),
                );
                None
            }
        }
    }

    pub(crate) fn template(&mut self, v: &Val, key: &str, cx: Context) -> Option<Template> {
        self.template_with(v, key, cx, None)
    }

    /// [`Cx::template`] for a map's value: `captures` is its entry's regex.
    pub(crate) fn template_with(
        &mut self,
        v: &Val,
        key: &str,
        cx: Context,
        captures: Option<&regex::bytes::Regex>,
    ) -> Option<Template> {
        let s = self.str(v, key)?;
        let names = crate::vars::Names {
            user: &self.names,
            captures,
        };
        match Template::parse_named(s, cx, names) {
            Ok(t) => Some(t),
            Err(e) => {
                // The span starts at the opening quote.
                let at = v.span().start + 1 + e.offset;
                self.err(at..at + 1, e.message);
                None
            }
        }
    }

    /// `info`, `notice`, `warn` or `error`.
    pub(crate) fn log_level(&mut self, v: &Val, key: &str) -> Option<Severity> {
        let s = self.str(v, key)?;
        let level = Severity::from_name(s).filter(|l| LIMIT_LEVELS.contains(l));
        if level.is_none() {
            self.err(
                v.span(),
                format!("invalid {key} \"{s}\" (expected info, notice, warn or error)"),
            );
        }
        level
    }

    /// A list of addresses or networks (`"10.0.0.0/8"`, `"::1"`).
    pub(crate) fn cidrs(&mut self, v: &Val, key: &str) -> Vec<ipnet::IpNet> {
        let mut out = Vec::new();
        match v.get_ref() {
            DeValue::Array(items) => {
                for item in items.iter() {
                    if let Some(s) = self.str(item, key) {
                        match crate::realip::parse_cidr(s) {
                            Ok(n) => out.push(n),
                            Err(e) => self.err(item.span(), e),
                        }
                    }
                }
            }
            other => self.err(
                v.span(),
                format!(
                    "\"{key}\" must be a list of addresses or networks, found {}",
                    type_name(other)
                ),
            ),
        }
        out
    }

    pub(crate) fn duration(&mut self, v: &Val, key: &str) -> Option<Duration> {
        let s = self.scalar_text(v, key)?;
        values::parse_duration(&s)
            .map_err(|e| self.err(v.span(), format!("\"{key}\": {e}")))
            .ok()
    }

    /// A status code in `range`.
    pub(crate) fn status(
        &mut self,
        v: &Val,
        key: &str,
        range: std::ops::RangeInclusive<i128>,
    ) -> Option<u16> {
        let n = self.int(v, key)?;
        if range.contains(&n) {
            Some(n as u16)
        } else {
            self.err(
                v.span(),
                format!(
                    "\"{key}\": value must be between {} and {}",
                    range.start(),
                    range.end()
                ),
            );
            None
        }
    }
}
