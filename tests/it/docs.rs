//! The documentation against the code, so that neither drifts: every key
//! the configuration file accepts is in `config/reference.md`, README.md
//! stays short, and every relative link of README.md and its pages leads to
//! a file that exists (and, with an `#anchor`, to a heading of that page).
//!
//! Where the keys come from: sluice does not derive serde types for its
//! configuration. Each TOML section is a schema table in
//! `src/config/parse/` (`read::Schema`), a list of `Key { name: "…", … }`
//! entries and `level_key!("…", …)` ones; the same table rejects unknown
//! keys and reads the known ones, so its names are exactly the keys the file
//! accepts. They are read here as text, from every non-test source file
//! under `src/config/`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// README.md and the pages it links to, relative to the repository.
const PAGES: &[&str] = &[
    "README.md",
    "config/reference.md",
    "config/nginx.md",
    "config/operations.md",
    "scripts/benchmarks.md",
];

const README_MAX_LINES: usize = 150;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

// --- the configuration keys ---------------------------------------------------

/// The non-test Rust files under `dir`: test modules live in `tests*.rs` and
/// `*_tests.rs` files (declared `#[cfg(test)] mod …;`).
fn config_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/config is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            config_sources(&path, out);
            continue;
        }
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let is_test = stem == "tests" || stem.starts_with("tests_") || stem.ends_with("_tests");
        if path.extension().is_some_and(|e| e == "rs") && !is_test {
            out.push(path);
        }
    }
}

/// A file's code: comments left out, and its inline `#[cfg(test)]` module
/// (the end of the file, by this code base's convention).
fn code(text: &str) -> String {
    let text = match text.find("\n#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The string literal at the start of `s` (after blanks), if it is one.
fn literal_at(s: &str) -> Option<&str> {
    let rest = s.trim_start().strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(&rest[..end])
}

/// The key names of a file's schema tables: `Key { name: "…"` and
/// `level_key!("…"`.
fn schema_keys(code: &str, keys: &mut BTreeSet<String>) {
    for (at, _) in code.match_indices("Key {") {
        let after = code[at + "Key {".len()..].trim_start();
        if let Some(name) = after.strip_prefix("name:").and_then(literal_at) {
            keys.insert(name.to_string());
        }
    }
    for (at, _) in code.match_indices("level_key!(") {
        if let Some(name) = literal_at(&code[at + "level_key!(".len()..]) {
            keys.insert(name.to_string());
        }
    }
}

/// Every key the configuration file accepts.
fn config_keys() -> BTreeSet<String> {
    let mut files = Vec::new();
    config_sources(&root().join("src/config"), &mut files);
    let mut keys = BTreeSet::new();
    for f in &files {
        let code = code(&std::fs::read_to_string(f).expect("a source file"));
        // If the configuration ever moves to serde types, their fields
        // (renames, skips) are the keys, and this reader must learn them.
        assert!(
            !code.contains("Deserialize"),
            "{} derives serde's Deserialize: teach tests/it/docs.rs to read its fields",
            f.display()
        );
        schema_keys(&code, &mut keys);
    }
    keys
}

#[test]
fn every_config_key_is_in_the_reference() {
    let keys = config_keys();
    // The reader must still find the schema tables: a few keys of each kind.
    for known in [
        "limit_req",
        "proxy_ssl_trusted_certificate",
        "listen",
        "path",
        "url",
        "weight",
    ] {
        assert!(
            keys.contains(known),
            "tests/it/docs.rs no longer finds the configuration's keys (no {known:?} among {keys:?})"
        );
    }
    let reference = read("config/reference.md");
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !reference.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "configuration keys missing from config/reference.md (as `key`, with default and nginx name): {missing:?}"
    );
}

// --- README.md and links ------------------------------------------------------

#[test]
fn readme_is_short() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move detail to its pages"
    );
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        let marker = if t.starts_with("```") {
            Some("```")
        } else if t.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push(line),
            _ => {}
        }
    }
    out
}

/// `line` without its code spans (`` `x` ``, ``` `` a ` b `` ```).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('`') {
        out.push_str(&rest[..at]);
        let ticks = rest[at..].chars().take_while(|&c| c == '`').count();
        let after = &rest[at + ticks..];
        let closing = "`".repeat(ticks);
        match after.find(&closing) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                rest = after;
                out.push_str(&closing);
            }
        }
    }
    out.push_str(rest);
    out
}

/// GitHub's anchor for a heading: lowercase, spaces to `-`, punctuation
/// other than `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of a page's headings, with GitHub's `-1`, `-2` for repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of a page's inline links, `[text](target)`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let line = without_code(line);
        for (at, _) in line.match_indices("](") {
            let target = &line[at + 2..];
            let end = target.find([')', ' ']).unwrap_or(target.len());
            out.push(target[..end].to_string());
        }
    }
    out
}

#[test]
fn relative_links_resolve() {
    let mut broken = Vec::new();
    for page in PAGES {
        let text = read(page);
        let dir = Path::new(page).parent().unwrap_or(Path::new(""));
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                root().join(page)
            } else {
                root().join(dir).join(path)
            };
            if !file.exists() {
                broken.push(format!("{page}: ({target}): no file {}", file.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if file.extension().is_none_or(|e| e != "md") {
                broken.push(format!(
                    "{page}: ({target}): an anchor into a file that is not Markdown"
                ));
                continue;
            }
            let headings = anchors(&std::fs::read_to_string(&file).expect("a page"));
            if !headings.contains(anchor) {
                broken.push(format!("{page}: ({target}): no heading #{anchor} there"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn readme_and_its_pages_link_to_each_other() {
    let readme = links(&read("README.md"));
    for page in &PAGES[1..] {
        assert!(
            readme.iter().any(|t| t.split('#').next() == Some(page)),
            "README.md does not link to {page}"
        );
        let text = read(page);
        let mut lines = text.lines();
        assert!(
            lines.next().is_some_and(|l| l.starts_with("# ")),
            "{page} does not start with a one-line title"
        );
        let intro: String = lines.take_while(|l| !l.starts_with('#')).collect();
        assert!(
            intro.contains("](../README.md)"),
            "{page}'s opening sentence does not link back to the README"
        );
    }
}

#[test]
fn the_link_checker_reads_markdown_as_github_does() {
    assert_eq!(
        slug("Headers: proxy_set_header, add_header"),
        "headers-proxy_set_header-add_header"
    );
    assert_eq!(slug("Zones in Redis: `[redis]`"), "zones-in-redis-redis");
    assert_eq!(slug("TLS and HTTP/2"), "tls-and-http2");
    assert_eq!(
        anchors("# A\n```\n# not a heading\n```\n## A\n"),
        BTreeSet::from(["a".to_string(), "a-1".to_string()])
    );
    assert_eq!(
        links("see [x](a.md#b), `[y](not-a-link)`, `` ` `` [z](c.md \"title\")"),
        vec!["a.md#b", "c.md"]
    );
    assert_eq!(links("```\n[y](in-code.md)\n```\n[w](d.md)"), vec!["d.md"]);
}
