//! The shape of `src/`, held by a test: the modules' import direction (no
//! cycle, and every import goes down the layers below), the limiter's
//! independence, and the size limits that keep each file and function
//! readable on its own (about 700 and 80 lines).
//!
//! Why a test and not a workspace crate per layer: one crate keeps the
//! build, the docs and the fuzz targets simple, and this test fails with
//! the offending `use` as clearly as the compiler would.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first. A module may import its own layer's modules
/// (without a cycle) and those of the layers below, never above.
const LAYERS: &[&[&str]] = &[
    &[
        "fmt",
        "batch",
        "body",
        "clock",
        "http1",
        "http2",
        "proxy_protocol",
        "realip",
        "tls",
        "access",
    ],
    &["errlog"],
    &["limiter"],
    &["vars"],
    &["respond", "conn_state", "headers"],
    &[
        "accesslog",
        "connlimit",
        "upstream",
        "client_body",
        "compress",
    ],
    &["config"],
    &["metrics", "check", "simulate", "import", "top"],
    &["request"],
    &["server"],
    &["control"],
];

/// Test-only: the fuzz targets' checks may use anything.
const ANYWHERE: &[&str] = &["fuzzing"];

const MAX_FILE_LINES: usize = 700;
const MAX_FN_LINES: usize = 80;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`None`: lib.rs, main.rs, bins).
fn module_of(path: &Path) -> Option<String> {
    let rel = path.strip_prefix(src()).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (!matches!(name, "lib" | "main" | "bin")).then(|| name.to_string())
}

/// The code of a file without its comments (doc links are not imports).
fn code(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `crate::NAME` references: module → the modules it uses.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let Some(m) = module_of(&f) else { continue };
        let text = code(&std::fs::read_to_string(&f).expect("a source file"));
        let uses = deps.entry(m.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != m {
                uses.insert(name);
            }
        }
    }
    deps
}

fn layer(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

#[test]
fn every_module_has_a_layer() {
    let unplaced: Vec<String> = imports()
        .into_keys()
        .filter(|m| layer(m).is_none() && !ANYWHERE.contains(&m.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules missing from LAYERS in tests/it/layout.rs: {unplaced:?}"
    );
}

#[test]
fn imports_go_down_the_layers() {
    let mut wrong = Vec::new();
    for (m, uses) in imports() {
        let (Some(from), false) = (layer(&m), ANYWHERE.contains(&m.as_str())) else {
            continue;
        };
        for u in uses {
            if layer(&u).is_none_or(|to| to > from) {
                wrong.push(format!("{m} → {u}"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports that go up a layer: {wrong:?}");
}

#[test]
fn no_import_cycle() {
    let deps = imports();
    // Depth-first search for a back edge; the path is the cycle.
    fn visit<'a>(
        m: &'a str,
        deps: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| *p == m) {
            return Some(path[i..].iter().map(|s| s.to_string()).collect());
        }
        if !done.insert(m) {
            return None;
        }
        path.push(m);
        for u in deps.get(m).into_iter().flatten() {
            if let Some(cycle) = visit(u, deps, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for m in deps.keys() {
        if let Some(cycle) = visit(m, &deps, &mut Vec::new(), &mut done) {
            panic!("import cycle: {}", cycle.join(" → "));
        }
    }
}

#[test]
fn the_limiter_imports_nothing_from_the_crate() {
    let uses = imports().remove("limiter").unwrap_or_default();
    assert!(uses.is_empty(), "limiter imports {uses:?}");
}

/// Function lengths, counted from `fn` to the closing brace at the same
/// indentation (the code is rustfmt'ed).
fn long_functions(path: &Path, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let words: Vec<&str> = trimmed.split_whitespace().take(4).collect();
        let Some(at) = words.iter().position(|w| *w == "fn") else {
            continue;
        };
        let modifiers = [
            "pub",
            "pub(crate)",
            "pub(super)",
            "async",
            "const",
            "unsafe",
        ];
        if !words[..at].iter().all(|w| modifiers.contains(w)) || trimmed.ends_with(';') {
            continue;
        }
        if trimmed.ends_with('}') {
            continue; // a one-line function
        }
        let close = " ".repeat(indent) + "}";
        let end = lines[i..]
            .iter()
            .position(|l| *l == close)
            .map_or(lines.len() - i, |n| n + 1);
        if end > MAX_FN_LINES {
            long.push(format!("{}:{}: {end} lines", path.display(), i + 1));
        }
    }
    long
}

#[test]
fn files_and_functions_stay_readable() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut over = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a source file");
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            over.push(format!("{}: {n} lines", f.display()));
        }
        over.extend(long_functions(&f, &text));
    }
    assert!(
        over.is_empty(),
        "over {MAX_FILE_LINES} lines per file or {MAX_FN_LINES} per function:\n{}",
        over.join("\n")
    );
}
