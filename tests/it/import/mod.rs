//! `sluice import-nginx`, the real binary: the seed's nginx.conf imported, checked, and run
//! beside the shipped example (config/sluice.toml) on the article's burst; the command line's
//! files, exit codes and messages.

mod corpus;
mod real;

use crate::support::{Sluice, Upstream, assert_expected, burst, client, expect, timing};
use std::path::Path;
use std::process::{Command, Output};

/// `sluice ARGS…`, run to completion.
fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run the sluice binary")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The seed imported with `--backend` (what nginx served from html/ok.txt) and `--prefix` (where
/// nginx's relative logs and pid go): the TOML, and the command's stderr.
fn import_seed(prefix: &Path, backend: &str) -> (String, String) {
    for dir in ["logs", "temp/client_body"] {
        std::fs::create_dir_all(prefix.join(dir)).expect("the prefix's directories");
    }
    let out = prefix.join("seed.toml");
    let o = sluice(&[
        "import-nginx",
        "config/nginx/seed.conf",
        "--backend",
        backend,
        "--prefix",
        prefix.to_str().expect("a UTF-8 temporary path"),
        "-o",
        out.to_str().expect("a UTF-8 temporary path"),
    ]);
    assert!(o.status.success(), "import-nginx failed:\n{}", stderr(&o));
    assert!(o.stdout.is_empty(), "with -o nothing goes to stdout");
    let toml = std::fs::read_to_string(&out).expect("the translation was written");
    let check = sluice(&["check", "--config", out.to_str().unwrap_or_default()]);
    assert!(
        check.status.success(),
        "sluice check refuses the translation:\n{}\n{toml}",
        stderr(&check)
    );
    (toml, stderr(&o))
}

/// The article's burst table (nginx-limit-req.md §11) through the imported seed and through
/// config/sluice.toml: the same statuses and the same delay steps on every location, and the
/// 429 error page with its Retry-After on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_imported_seed_answers_the_burst_as_the_example() {
    let backend = Upstream::start();
    let prefix = tempfile::tempdir().expect("a prefix directory");
    let (toml, warnings) = import_seed(prefix.path(), &format!("http://{}", backend.addr));
    for line in [
        "config/nginx/seed.conf:38: not translated: root html (",
        "config/nginx/seed.conf:40: not translated: try_files /ok.txt =404 (",
        "config/nginx/seed.conf:14: ignored (no meaning for sluice): user root (",
    ] {
        assert!(warnings.contains(line), "no {line:?} in:\n{warnings}");
    }
    assert!(toml.contains("#   seed.conf:43: try_files /ok.txt =404 (sluice serves no files)"));
    let _timing = timing();
    let imported = Sluice::builder(&toml).relocate("127.0.0.1:7060").start();
    let example = Sluice::builder(include_str!("../../../config/sluice.toml"))
        .relocate("127.0.0.1:7060")
        .relocate("127.0.0.1:7070")
        .relocate("127.0.0.1:9090")
        .in_process();
    let table: [(&str, Vec<(u16, u64)>); 4] = [
        ("/plain", expect(&[(200, &[0]), (429, &[0; 9])])),
        (
            "/burst",
            expect(&[(200, &[0, 500, 1000, 1500, 2000, 2500]), (429, &[0; 4])]),
        ),
        ("/nodelay", expect(&[(200, &[0; 6]), (429, &[0; 4])])),
        (
            "/delay",
            expect(&[(200, &[0, 0, 0, 500, 1000, 1500]), (429, &[0; 4])]),
        ),
    ];
    for (i, (path, expected)) in table.iter().enumerate() {
        let source = client(20 + i as u8);
        let (a, b) = tokio::join!(
            burst(imported.addr(), source, path, 10),
            burst(example.addr(), source, path, 10)
        );
        assert_expected(&format!("imported seed {path}"), "imported", &a, expected);
        assert_expected(
            &format!("config/sluice.toml {path}"),
            "example",
            &b,
            expected,
        );
        for r in a.iter().filter(|r| r.status == 429) {
            assert_eq!(r.body_text(), "too many requests\n", "{r:#?}");
            // nginx's constant, translated literally (the example computes it: 1 here too).
            assert_eq!(r.header("Retry-After"), Some("1"), "{r:#?}");
        }
        for r in a.iter().filter(|r| r.status == 200) {
            assert!(
                r.body_text().starts_with(&format!("GET {path} ")),
                "not the backend: {r:#?}"
            );
        }
    }
}

/// stdout without `-o`; a syntax error is `FILE:LINE: message` and exit 1; a missing file too.
#[test]
fn the_command_line() {
    let dir = tempfile::tempdir().expect("a directory");
    let conf = dir.path().join("nginx.conf");
    let conf_s = conf.to_str().expect("a UTF-8 path");
    std::fs::write(&conf, "events {}\nhttp {\n  include conf.d/*.conf;\n}\n").expect("write");
    std::fs::create_dir_all(dir.path().join("conf.d")).expect("mkdir");
    std::fs::write(
        dir.path().join("conf.d/api.conf"),
        "server {\n  listen 127.0.0.1:8080;\n  location / { return 200 \"ok\\n\"; }\n}\n",
    )
    .expect("write");
    let o = sluice(&["import-nginx", conf_s]);
    assert!(o.status.success(), "{}", stderr(&o));
    let toml = String::from_utf8_lossy(&o.stdout);
    assert!(
        toml.contains("# conf.d/api.conf:3: location / {\n"),
        "{toml}"
    );
    assert!(
        toml.contains("return = { status = 200, body = \"ok\\n\" }"),
        "{toml}"
    );
    std::fs::write(
        dir.path().join("conf.d/api.conf"),
        "server {\n  listen 80\n}\n",
    )
    .expect("w");
    let o = sluice(&["import-nginx", conf_s]);
    assert_eq!(o.status.code(), Some(1));
    let api = dir.path().join("conf.d/api.conf");
    assert_eq!(
        stderr(&o).trim(),
        format!("sluice: {}:3: unexpected \"}}\"", api.display()),
    );
    let o = sluice(&["import-nginx", "/nonexistent/nginx.conf"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot open /nonexistent/nginx.conf"),
        "{}",
        stderr(&o)
    );
}

/// `sluice import-nginx … 2>&1 | head -1`: the reader goes away before the reports are written;
/// the import still ends normally (a closed pipe is no reason to panic, exit 101).
#[test]
fn a_closed_stderr_is_no_panic() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out.toml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "import-nginx",
            "tests/it/import/real/nginx-doc-drupal/drupal",
            "-o",
        ])
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the sluice binary");
    // Close both pipes' read ends before the child writes.
    drop(child.stderr.take());
    drop(child.stdout.take());
    let status = child.wait().expect("wait for sluice");
    assert_eq!(
        status.code(),
        Some(0),
        "sluice import-nginx with closed pipes"
    );
    assert!(out.exists(), "the TOML was still written");
}
