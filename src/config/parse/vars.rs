//! `[maps.NAME]` and `[geos.NAME]`: nginx's `map` and `geo`, each a
//! variable `$NAME` every template may use.
//!
//! Their names are gathered before anything else is read ([`names`]), so a
//! zone key may use a map written further down, as nginx allows; what a
//! map's source or value names is checked like any template. A variable
//! that needs itself is found by validation, once every map is read.

use super::super::error::Diagnostics;
use super::read::{Cx, Key, Named, Schema, Val, get};
use crate::vars::geo::{Entry, GeoBuilder};
use crate::vars::map::{MapBuilder, Pattern};
use crate::vars::{Context, Def, Tables, Template};
use std::sync::Arc;
use toml::de::{DeTable, DeValue};

/// The maps and geos as read, by the index templates name them with.
pub(in crate::config) struct VarsDraft {
    names: Vec<Named>,
    /// `None`: not read (yet), or with a problem (reported).
    defs: Vec<Option<Def>>,
}

/// The names of `[maps]` then `[geos]`, as written.
pub(super) fn names(doc: &DeTable) -> Vec<Named> {
    let mut out = Vec::new();
    for section in ["maps", "geos"] {
        if let Some(DeValue::Table(t)) = get(doc, section).map(|v| v.get_ref()) {
            for (k, _) in t.iter() {
                out.push(Named {
                    name: k.get_ref().to_string(),
                    span: k.span(),
                });
            }
        }
    }
    out
}

impl VarsDraft {
    pub(super) fn new(names: Vec<Named>) -> VarsDraft {
        let defs = names.iter().map(|_| None).collect();
        VarsDraft { names, defs }
    }

    /// `[maps]`.
    pub(super) fn maps(&mut self, cx: &mut Cx, k: &str, v: &Val) {
        let Some(t) = cx.table(v, k) else { return };
        for (i, (name, mv)) in t.iter().enumerate() {
            let Some(mt) = cx.table(mv, name.get_ref()) else {
                continue;
            };
            let what = format!("[maps.{}]", name.get_ref());
            let mut m = MapDraft::default();
            MAP.read(cx, mt, &what, &mut m);
            self.defs[i] = map(cx, m, mv, &what).map(Def::Map);
        }
    }

    /// `[geos]` (their indexes follow the maps').
    pub(super) fn geos(&mut self, cx: &mut Cx, k: &str, v: &Val) {
        let Some(t) = cx.table(v, k) else { return };
        let first = self.defs.len() - t.len();
        for (i, (name, gv)) in t.iter().enumerate() {
            let Some(gt) = cx.table(gv, name.get_ref()) else {
                continue;
            };
            let what = format!("[geos.{}]", name.get_ref());
            let mut g = GeoDraft::default();
            GEO.read(cx, gt, &what, &mut g);
            self.defs[first + i] = Some(Def::Geo(g.build()));
        }
    }

    /// The names checked (variable names nginx would take, none twice,
    /// none of nginx's own), no variable that needs itself; the tables.
    pub(in crate::config) fn validate(self, d: &mut Diagnostics) -> Arc<Tables> {
        let mut ok = true;
        for (i, n) in self.names.iter().enumerate() {
            if n.name.is_empty()
                || !n
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                d.error(
                    n.span.clone(),
                    format!(
                        "invalid variable name \"{}\" (letters, digits and _ only)",
                        n.name
                    ),
                );
                ok = false;
            } else if Template::parse(&format!("${{{}}}", n.name), Context::Log).is_ok() {
                d.error(
                    n.span.clone(),
                    format!(
                        "the duplicate \"{}\" variable (nginx has one of that name)",
                        n.name
                    ),
                );
                ok = false;
            } else if self.names[..i].iter().any(|m| m.name == n.name) {
                d.error(
                    n.span.clone(),
                    format!(
                        "the duplicate \"{}\" variable (a map and a geo of the same name)",
                        n.name
                    ),
                );
                ok = false;
            }
        }
        if !ok || self.defs.iter().any(Option::is_none) {
            return Arc::default();
        }
        let names: Vec<String> = self.names.iter().map(|n| n.name.clone()).collect();
        let tables = Tables::new(names, self.defs.into_iter().flatten().collect());
        if let Some(cycle) = tables.cycle() {
            let at = self
                .names
                .iter()
                .find(|n| n.name == cycle[0])
                .map_or(0..0, |n| n.span.clone());
            let chain: Vec<String> = cycle.iter().map(|n| format!("${n}")).collect();
            d.error(
                at,
                format!("cycle while evaluating variable: {}", chain.join(" → ")),
            );
            return Arc::default();
        }
        Arc::new(tables)
    }
}

/// `[maps.NAME]` while it is read.
#[derive(Default)]
struct MapDraft {
    source: Option<Template>,
    hostnames: bool,
    default: Option<Template>,
}

static MAP: Schema<MapDraft> = Schema::plain(&[
    Key {
        name: "source",
        read: |cx, k, v, m| m.source = cx.template(v, k, Context::Key),
    },
    Key {
        name: "hostnames",
        read: |cx, k, v, m| m.hostnames = cx.bool(v, k).unwrap_or(false),
    },
    Key {
        name: "default",
        read: |cx, k, v, m| m.default = cx.template(v, k, Context::Key),
    },
    Key {
        name: "values",
        read: |cx, k, v, _| {
            // Read by `map`, which knows `hostnames`; only the type here.
            cx.table(v, k);
        },
    },
]);

/// The map of a table read into `m` (`values` read here, with the
/// entries' patterns).
fn map(cx: &mut Cx, m: MapDraft, v: &Val, what: &str) -> Option<crate::vars::map::Map> {
    let DeValue::Table(t) = v.get_ref() else {
        return None;
    };
    let empty = || Template::parse("", Context::Key).expect("empty");
    if m.source.is_none() && get(t, "source").is_none() {
        cx.err(
            v.span(),
            format!("{what} must have \"source\": the value it matches (\"$http_user_agent\")"),
        );
    }
    // Without a source (reported), the entries are still read, for their
    // own problems.
    let has_source = m.source.is_some();
    let default = m.default.unwrap_or_else(empty);
    let mut b = MapBuilder::new(m.source.unwrap_or_else(empty), m.hostnames, default);
    let mut ok = true;
    if let Some(DeValue::Table(values)) = get(t, "values").map(|v| v.get_ref()) {
        for (pat, val) in values.iter() {
            let pattern = match Pattern::parse(pat.get_ref(), m.hostnames) {
                Ok(p) => p,
                Err(e) => {
                    cx.err(pat.span(), e);
                    ok = false;
                    continue;
                }
            };
            let Some(value) = cx.template_with(val, pat.get_ref(), Context::Key, pattern.regex())
            else {
                ok = false;
                continue;
            };
            if let Err(e) = b.add(pattern, value) {
                cx.err(pat.span(), e);
                ok = false;
            }
        }
    }
    (ok && has_source).then(|| b.build())
}

/// `[geos.NAME]` while it is read.
#[derive(Default)]
struct GeoDraft {
    source: Option<Template>,
    ranges: bool,
    default: String,
    proxy: Vec<ipnet::IpNet>,
    proxy_recursive: bool,
    networks: Vec<(Entry, String)>,
}

impl GeoDraft {
    fn build(self) -> crate::vars::geo::Geo {
        let mut b = GeoBuilder::new(self.source, &self.default);
        b.proxy(self.proxy, self.proxy_recursive);
        for (e, v) in self.networks {
            b.add(e, &v);
        }
        b.build()
    }
}

/// Read in this order: `networks` needs `ranges`.
static GEO: Schema<GeoDraft> = Schema::plain(&[
    Key {
        name: "source",
        read: |cx, k, v, g| g.source = cx.template(v, k, Context::Key),
    },
    Key {
        name: "ranges",
        read: |cx, k, v, g| g.ranges = cx.bool(v, k).unwrap_or(false),
    },
    Key {
        name: "default",
        read: |cx, k, v, g| g.default = cx.str(v, k).unwrap_or("").to_string(),
    },
    Key {
        name: "proxy",
        read: |cx, k, v, g| g.proxy = cx.cidrs(v, k),
    },
    Key {
        name: "proxy_recursive",
        read: |cx, k, v, g| g.proxy_recursive = cx.bool(v, k).unwrap_or(false),
    },
    Key {
        name: "networks",
        read: |cx, k, v, g| networks(cx, k, v, g),
    },
]);

fn networks(cx: &mut Cx, k: &str, v: &Val, g: &mut GeoDraft) {
    let Some(t) = cx.table(v, k) else { return };
    for (net, val) in t.iter() {
        let Some(value) = cx.str(val, net.get_ref()) else {
            continue;
        };
        match Entry::parse(net.get_ref(), g.ranges) {
            Ok(e) => g.networks.push((e, value.to_string())),
            Err(e) => cx.err(net.span(), e),
        }
    }
}
