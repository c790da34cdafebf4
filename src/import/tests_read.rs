//! Reading nginx.conf: blocks, includes (relative, glob, cycle), syntax
//! errors with their file and line.

use super::tree::{self, Directive};
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn names(ds: &[Directive]) -> Vec<String> {
    let mut out = Vec::new();
    for d in ds {
        out.push(format!(
            "{}@{}:{}",
            d.name, d.origin.file.short, d.origin.line
        ));
        out.extend(names(d.children()));
    }
    out
}

#[test]
fn blocks_and_lines() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "nginx.conf",
        "events {}\nhttp {\n  server {\n    listen 80;\n  }\n}\n",
    );
    let t = tree::read(&dir.path().join("nginx.conf")).unwrap();
    assert_eq!(
        names(&t.directives),
        [
            "events@nginx.conf:1",
            "http@nginx.conf:2",
            "server@nginx.conf:3",
            "listen@nginx.conf:4"
        ]
    );
    let listen = &t.directives[1].children()[0].children()[0];
    assert_eq!(listen.text(), "listen 80;");
    assert_eq!(t.directives[1].text(), "http {");
}

#[test]
fn includes_relative_to_the_prefix_then_the_including_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "nginx.conf",
        "http {\n  include conf.d/*.conf;\n  include sites/site;\n}\n",
    );
    // Globs expand sorted; a relative path inside conf.d/ is the prefix's (nginx's rule)...
    write(d, "conf.d/b.conf", "b_directive 1;\n");
    write(
        d,
        "conf.d/a.conf",
        "a_directive 1;\ninclude snippets/common;\n",
    );
    write(d, "snippets/common", "common 1;\n");
    // ...and, when the prefix has nothing there, the including file's own directory.
    write(d, "sites/site", "site 1;\ninclude local.inc;\n");
    write(d, "sites/local.inc", "local 1;\n");
    let t = tree::read(&d.join("nginx.conf")).unwrap();
    assert_eq!(
        names(&t.directives),
        [
            "http@nginx.conf:1",
            "a_directive@conf.d/a.conf:1",
            "common@snippets/common:1",
            "b_directive@conf.d/b.conf:1",
            "site@sites/site:1",
            "local@sites/local.inc:1",
        ]
    );
    assert!(t.missing.is_empty());
}

#[test]
fn a_glob_may_match_nothing_a_missing_file_is_kept_for_a_report() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "nginx.conf",
        "http {\n  include none/*.conf;\n  include mime.types;\n}\n",
    );
    let t = tree::read(&dir.path().join("nginx.conf")).unwrap();
    assert_eq!(t.directives[0].children().len(), 0);
    assert_eq!(t.missing.len(), 1);
    assert_eq!(t.missing[0].directive.origin.line, 3);
    assert!(
        t.missing[0].why.contains("mime.types"),
        "{}",
        t.missing[0].why
    );
}

#[test]
fn include_cycles_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "nginx.conf", "http {\n  include a.conf;\n}\n");
    write(d, "a.conf", "x 1;\ninclude b.conf;\n");
    write(d, "b.conf", "include a.conf;\n");
    let e = tree::read(&d.join("nginx.conf")).unwrap_err().0;
    assert!(e.contains("b.conf:1: include cycle"), "{e}");
    assert!(e.contains("a.conf includes"), "{e}");
}

#[test]
fn syntax_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = [
        (
            "http {\n  server {\n",
            "nginx.conf:2: unexpected end of file, expecting \"}\"",
        ),
        ("http {\n}\n}\n", "nginx.conf:3: unexpected \"}\""),
        (
            "a b\n",
            "nginx.conf:1: unexpected end of file, expecting \";\" or \"}\"",
        ),
        ("a;\n;\n", "nginx.conf:2: unexpected \";\""),
        ("a {\n  b c }\n", "nginx.conf:2: unexpected \"}\""),
        ("a \"x\"y;\n", "nginx.conf:1: unexpected \"y\""),
    ];
    for (text, want) in cases {
        write(d, "nginx.conf", text);
        let e = tree::read(&d.join("nginx.conf")).unwrap_err().0;
        assert!(e.ends_with(want), "{text:?}: {e}");
    }
    write(d, "nginx.conf", "http {\n  include bad.conf;\n}\n");
    write(d, "bad.conf", "ok 1;\n\n{\n");
    let e = tree::read(&d.join("nginx.conf")).unwrap_err().0;
    assert!(e.ends_with("bad.conf:3: unexpected \"{\""), "{e}");
}
