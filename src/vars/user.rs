//! The configuration's own variables, `[maps.NAME]` and `[geos.NAME]`:
//! nginx's `map` and `geo`.
//!
//! They are request variables: their sources and values may name nginx's
//! request variables and each other (not `$status` and the response's, so
//! a value is the same wherever the request uses it). A value is computed
//! when a key, header, page or log line first asks for it, and kept for the
//! rest of the request in [`UserVars`] (nginx too evaluates a map once per
//! request), so an unused map costs nothing and a used one runs once.

use super::geo::Geo;
use super::map::Map;
use super::{RequestVars, Template};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

/// A map or a geo.
#[derive(Debug)]
pub enum Def {
    Map(Map),
    Geo(Geo),
}

impl Def {
    fn templates(&self) -> Box<dyn Iterator<Item = &Template> + '_> {
        match self {
            Def::Map(m) => Box::new(m.templates()),
            Def::Geo(g) => Box::new(g.templates()),
        }
    }
}

/// Every map and geo of a configuration, by the index templates name them
/// with.
#[derive(Debug, Default)]
pub struct Tables {
    names: Vec<String>,
    defs: Vec<Def>,
}

impl Tables {
    /// `names[i]` is defined by `defs[i]`.
    pub fn new(names: Vec<String>, defs: Vec<Def>) -> Tables {
        debug_assert_eq!(names.len(), defs.len());
        Tables { names, defs }
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn defs(&self) -> &[Def] {
        &self.defs
    }

    /// A variable that needs itself (`a` from `b` from `a`): the chain of
    /// names, as nginx's "cycle while evaluating variable" but found when
    /// the configuration is read.
    pub fn cycle(&self) -> Option<Vec<&str>> {
        // 0: not seen, 1: on the path, 2: done.
        let mut state = vec![0u8; self.defs.len()];
        let mut path = Vec::new();
        for i in 0..self.defs.len() {
            if self.visit(i, &mut state, &mut path) {
                return Some(path.iter().map(|&j| self.names[j].as_str()).collect());
            }
        }
        None
    }

    fn visit(&self, i: usize, state: &mut [u8], path: &mut Vec<usize>) -> bool {
        match state[i] {
            1 => {
                path.push(i);
                return true;
            }
            2 => return false,
            _ => {}
        }
        state[i] = 1;
        path.push(i);
        let deps: Vec<usize> = self.defs[i]
            .templates()
            .flat_map(|t| t.user_vars())
            .collect();
        for j in deps {
            if self.visit(j, state, path) {
                return true;
            }
        }
        path.pop();
        state[i] = 2;
        false
    }
}

/// One request's values of the configuration's variables, each computed
/// when first asked for.
#[derive(Debug)]
pub struct UserVars {
    tables: Arc<Tables>,
    /// The client the values are for: a zone that keys on a shortened
    /// IPv6 address asks with another, and gets values computed afresh.
    remote: SocketAddr,
    cells: Box<[OnceLock<Box<[u8]>>]>,
}

impl UserVars {
    pub fn new(tables: Arc<Tables>, remote: SocketAddr) -> UserVars {
        let cells = (0..tables.defs.len()).map(|_| OnceLock::new()).collect();
        UserVars {
            tables,
            remote,
            cells,
        }
    }

    /// Append variable `i`'s value for `req`.
    pub(super) fn eval(&self, i: usize, req: &RequestVars, out: &mut Vec<u8>) {
        let Some(cell) = self.cells.get(i) else {
            return;
        };
        if let Some(v) = cell.get() {
            out.extend_from_slice(v);
            return;
        }
        let mut v = Vec::new();
        match &self.tables.defs[i] {
            Def::Map(m) => {
                let mut src = Vec::new();
                m.source.eval(req, None, &mut src);
                m.value(&src, req, &mut v);
            }
            Def::Geo(g) => g.value(req, &mut v),
        }
        out.extend_from_slice(&v);
        if req.remote == self.remote {
            let _ = cell.set(v.into_boxed_slice());
        }
    }
}
