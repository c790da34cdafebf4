//! Real-world nginx configurations (`real/NAME/`, each with its `SOURCE`: where it comes from,
//! its licence and copyright), imported with the real `sluice import-nginx`. Each either imports
//! and its output passes `sluice check`, or fails as a user error (`sluice: FILE[:LINE]: …`):
//! never `internal:`, never a panic. [`CASES`] says which for each file, so a change of outcome
//! fails here. Some of them also run under nginx and under sluice side by side on the same burst
//! ([`DIFFS`]: substitutions put in the listen and the upstream, and a `limit_req` where the file
//! has none: gixy-ng's WordPress file has its own, its POST-only `map` keys the one put in).
//!
//! The files come from what package registries ship (the nginx 1.22.1 sources, Debian's nginx
//! and nginx-doc packages, certbot-nginx's and gixy-ng's test data on PyPI), copied byte for byte.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{
    KeyKind, Nginx, Request, Sluice, TestCa, Upstream, client, fire, status_counts, timing,
};

/// Where the files live.
fn real_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/import/real")
}

/// What `sluice import-nginx` does with a file.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Exit 0, and `sluice check` accepts the output.
    Imports,
    /// Like [`Outcome::Imports`], and stderr says it was read as a site file.
    Site,
    /// Exit 1 with `sluice: FILE…` containing this.
    UserError(&'static str),
    /// Exit 0, and `sluice check` refuses the output only because the certificates the file
    /// names by absolute paths are not on this machine (nginx refuses it for the same reason).
    NoCerts,
    /// Exit 0 saying the `listen` host names do not resolve here, and `sluice check` refuses
    /// the output only for them (nginx refuses it for the same reason: `host not found`).
    NoHosts,
}
use Outcome::{Imports, NoCerts, NoHosts, Site, UserError};

/// One file: its directory, its main file there, what the import does, and the certificate
/// files the configuration names (made by the test, relative to the directory).
struct Case {
    name: &'static str,
    main: &'static str,
    outcome: Outcome,
    certs: &'static [(&'static str, &'static str)],
}

const fn case(name: &'static str, main: &'static str, outcome: Outcome) -> Case {
    Case {
        name,
        main,
        outcome,
        certs: &[],
    }
}

/// `cert.pem` and `cert.key` beside the file (certbot's test sites name them).
const CERT_PEM: &[(&str, &str)] = &[("cert.pem", "cert.key")];

/// Every file of `real/`, by directory (see `real_every_directory_has_a_case`).
const CASES: &[Case] = &[
    case("nginx-1-22-conf", "conf/nginx.conf", Imports),
    case("debian-nginx-conf", "nginx.conf", Imports),
    case("debian-default", "default", Site),
    case(
        "debian-proxy-params",
        "proxy_params",
        UserError("proxy_params: no \"http\" block and no \"server\" block"),
    ),
    case(
        "debian-fastcgi-php",
        "fastcgi-php.conf",
        UserError("fastcgi-php.conf: no \"http\" block and no \"server\" block"),
    ),
    case("certbot-ubuntu-1-4-6", "nginx.conf", Imports),
    case("certbot-ubuntu-1-4-6-default", "default", Site),
    case(
        "certbot-nginx-conf",
        "nginx.conf",
        UserError("no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive"),
    ),
    case(
        "certbot-broken",
        "broken.conf",
        UserError("broken.conf:12: unexpected end of file"),
    ),
    case(
        "certbot-comment-in-file",
        "comment_in_file.conf",
        UserError("comment_in_file.conf: no \"http\" block and no \"server\" block"),
    ),
    case("certbot-edge-cases", "edge_cases.conf", Site),
    case(
        "certbot-foo",
        "foo.conf",
        UserError("foo.conf: no \"events\" section in configuration"),
    ),
    case(
        "certbot-minimalistic-comments",
        "minimalistic_comments.conf",
        Site,
    ),
    case(
        "certbot-multiline-quotes",
        "multiline_quotes.conf",
        UserError("multiline_quotes.conf: no \"events\" section in configuration"),
    ),
    case(
        "certbot-server",
        "server.conf",
        UserError("server.conf: no \"http\" block and no \"server\" block"),
    ),
    case(
        "certbot-valid-unicode-comments",
        "valid_unicode_comments.conf",
        Site,
    ),
    Case {
        certs: CERT_PEM,
        ..case("certbot-site-both-com", "both.com", Site)
    },
    case("certbot-site-default", "default", NoHosts),
    case("certbot-site-example-com", "example.com", Site),
    case("certbot-site-example-net", "example.net", Site),
    case(
        "certbot-site-globalssl-com",
        "globalssl.com",
        UserError("no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive"),
    ),
    case("certbot-site-headers-com", "headers.com", Site),
    case("certbot-site-ipv6-com", "ipv6.com", Site),
    case(
        "certbot-site-ipv6ssl-com",
        "ipv6ssl.com",
        UserError("no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive"),
    ),
    Case {
        certs: CERT_PEM,
        ..case("certbot-site-migration-com", "migration.com", Site)
    },
    case("certbot-site-sslon-com", "sslon.com", Site),
    case("nginx-doc-drupal", "drupal", Site),
    case("nginx-doc-wordpress", "wordpress", Site),
    Case {
        certs: CERT_PEM,
        // `listen somename:8080`.
        ..case("nginx-doc-virtual-hosts", "virtual_hosts", NoHosts)
    },
    case("nginx-doc-mailman", "mailman", Site),
    case(
        "nginx-doc-http",
        "http",
        UserError("http: no \"events\" section in configuration"),
    ),
    case(
        "nginx-doc-nginx-conf",
        "nginx.conf",
        UserError("nginx.conf:29: no \"server\" block: nothing for sluice to listen on"),
    ),
    case(
        "nginx-doc-mail",
        "mail",
        UserError("mail: no \"http\" block and no \"server\" block"),
    ),
    case(
        "gixy-ng-wordpress-production",
        "wordpress_production.conf",
        NoCerts,
    ),
    case(
        "gixy-ng-inline-return-with-map",
        "inline_return_with_map.conf",
        NoCerts,
    ),
    case(
        "gixy-ng-map-no-default",
        "map_no_default.conf",
        UserError("map_no_default.conf: no \"events\" section in configuration"),
    ),
    case(
        "gixy-ng-map-default",
        "map_no_default_fp.conf",
        UserError("map_no_default_fp.conf: no \"events\" section in configuration"),
    ),
    case(
        "gixy-ng-map-post-only",
        "map_single_entry_no_default_fp.conf",
        UserError("map_single_entry_no_default_fp.conf: no \"events\" section"),
    ),
    case(
        "gixy-ng-geo-no-default",
        "geo_no_default.conf",
        UserError("geo_no_default.conf: no \"events\" section in configuration"),
    ),
    case(
        "gixy-ng-geo-default",
        "geo_no_default_fp.conf",
        UserError("geo_no_default_fp.conf: no \"events\" section in configuration"),
    ),
    case(
        "gixy-ng-map-origin-allowlist",
        "map_origin_allowlist.conf",
        UserError("map_origin_allowlist.conf: no \"events\" section in configuration"),
    ),
    case(
        "gixy-ng-ssrf-mapped-value",
        "mapped_value.conf",
        UserError("mapped_value.conf: no \"events\" section in configuration"),
    ),
    case(
        "gixy-ng-mapped-value-with-set",
        "mapped_value_with_set.conf",
        UserError("mapped_value_with_set.conf:1: no \"server\" block: nothing for sluice"),
    ),
];

/// The cases whose `allow`/`deny` lines become `access` lists: `(case, a line of the
/// output)`; no report may name `allow` or `deny` for them. (`deny all` in certbot-nginx-conf's
/// nginx.conf:81 is in a file nginx refuses, a TLS listen without a certificate.)
const ACCESS: &[(&str, &str)] = &[
    (
        "nginx-doc-drupal",
        "access = [\"allow 192.168.0.0/16\", \"deny all\"]",
    ),
    ("nginx-doc-drupal", "access = \"allow all\""),
    ("nginx-doc-wordpress", "access = \"allow all\""),
    (
        "nginx-doc-virtual-hosts",
        "access = [\"allow 127.0.0.1\", \"deny all\"]",
    ),
    ("nginx-doc-virtual-hosts", "access = \"deny all\""),
];

/// `sluice ARGS…` in `dir`.
fn sluice_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run the sluice binary")
}

/// A copy of `from` into `to`, every file's text put through `edit`.
fn copy_dir(from: &Path, to: &Path, edit: &dyn Fn(&str) -> String) {
    std::fs::create_dir_all(to).expect("a directory for the copy");
    for entry in std::fs::read_dir(from).expect("read a corpus directory") {
        let path = entry.expect("a directory entry").path();
        let dest = to.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            copy_dir(&path, &dest, edit);
        } else if path.file_name().is_some_and(|n| n != "SOURCE") {
            let bytes = std::fs::read(&path).expect("read a corpus file");
            match String::from_utf8(bytes) {
                Ok(text) => std::fs::write(&dest, edit(&text)),
                Err(e) => std::fs::write(&dest, e.into_bytes()),
            }
            .expect("write a copied file");
        }
    }
}

/// The case's files in a temporary directory (with its certificates), imported there.
fn import_case(c: &Case, ca: &TestCa) -> (tempfile::TempDir, Output) {
    let dir = tempfile::Builder::new()
        .prefix("sluice-it-real-")
        .tempdir()
        .expect("a temporary directory");
    copy_dir(&real_dir().join(c.name), dir.path(), &|t| t.to_owned());
    for (cert, key) in c.certs {
        let leaf = ca.leaf(c.name, &["localhost"], KeyKind::EcdsaP256);
        std::fs::copy(&leaf.chain, dir.path().join(cert)).expect("a certificate");
        std::fs::copy(&leaf.key, dir.path().join(key)).expect("a key");
    }
    let out = sluice_in(dir.path(), &["import-nginx", c.main, "-o", "sluice.toml"]);
    (dir, out)
}

/// [`NoCerts`], [`NoHosts`]: an import, which `sluice check` refuses only for the certificates
/// or the `listen` host names this machine lacks.
fn only_what_this_machine_lacks(
    c: &Case,
    dir: &Path,
    code: Option<i32>,
    stderr: &str,
) -> Result<String, String> {
    if code != Some(0) {
        return Err(format!(
            "{}: expected an import, got {code:?}:\n{stderr}",
            c.name
        ));
    }
    let (lack, what) = match c.outcome {
        NoHosts => ("host not found in \"", "host names"),
        _ => ("cannot load certificate \"/", "certificates"),
    };
    if matches!(c.outcome, NoHosts) && !stderr.contains("on this machine: sluice resolves it") {
        return Err(format!("{}: the import did not say so:\n{stderr}", c.name));
    }
    let check = sluice_in(dir, &["check", "--config", "sluice.toml"]);
    let text = String::from_utf8_lossy(&check.stderr).into_owned();
    let errors: Vec<&str> = text.lines().filter(|l| l.contains(".toml:")).collect();
    if check.status.success() || errors.is_empty() || !errors.iter().all(|l| l.contains(lack)) {
        return Err(format!("{}: expected only missing {what}:\n{text}", c.name));
    }
    Ok(format!("{}: imported, its {what} missing", c.name))
}

/// One case's outcome against its row; `Err` says how it differs.
fn check_case(c: &Case, ca: &TestCa) -> Result<String, String> {
    let (dir, out) = import_case(c, ca);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code();
    if stderr.contains("internal:") || stderr.contains("panicked") || code == Some(101) {
        return Err(format!("{}: a bug, not a user error:\n{stderr}", c.name));
    }
    for (case, line) in ACCESS.iter().filter(|(n, _)| *n == c.name) {
        let toml = std::fs::read_to_string(dir.path().join("sluice.toml")).unwrap_or_default();
        if !toml.lines().any(|l| l == *line) {
            return Err(format!("{case}: no line {line:?} in:\n{toml}"));
        }
        if let Some(r) = stderr
            .lines()
            .find(|l| l.contains(": allow ") || l.contains(": deny "))
        {
            return Err(format!("{case}: allow/deny reported: {r}"));
        }
    }
    match c.outcome {
        UserError(want) => {
            let first = stderr.lines().next().unwrap_or_default();
            if code == Some(1) && first.starts_with("sluice: ") && first.contains(want) {
                return Ok(format!("{}: user error: {first}", c.name));
            }
            Err(format!(
                "{}: expected {want:?}, got {code:?}:\n{stderr}",
                c.name
            ))
        }
        NoCerts | NoHosts => only_what_this_machine_lacks(c, dir.path(), code, &stderr),
        Imports | Site => {
            if code != Some(0) {
                return Err(format!(
                    "{}: expected an import, got {code:?}:\n{stderr}",
                    c.name
                ));
            }
            let site = stderr.contains(": read as the contents of an http block (a site file)");
            if site != matches!(c.outcome, Site) {
                return Err(format!(
                    "{}: site file {site}, the table says otherwise",
                    c.name
                ));
            }
            let check = sluice_in(dir.path(), &["check", "--config", "sluice.toml"]);
            if !check.status.success() {
                let toml = std::fs::read_to_string(dir.path().join("sluice.toml"));
                return Err(format!(
                    "{}: sluice check refuses the import:\n{}\n{}",
                    c.name,
                    String::from_utf8_lossy(&check.stderr),
                    toml.unwrap_or_default()
                ));
            }
            let reports = stderr
                .lines()
                .filter(|l| l.contains(": not translated: "))
                .count();
            Ok(format!("{}: imported ({reports} not translated)", c.name))
        }
    }
}

#[test]
fn real_configurations_import_or_fail_clearly() {
    let ca = TestCa::new();
    let mut problems = Vec::new();
    for c in CASES {
        match check_case(c, &ca) {
            Ok(line) => println!("{line}"),
            Err(p) => problems.push(p),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// Every directory of `real/` has its row in [`CASES`] and a `SOURCE`, and the other way round;
/// the corpus stays as large as it is.
#[test]
fn real_every_directory_has_a_case() {
    let mut dirs: Vec<String> = std::fs::read_dir(real_dir())
        .expect("read the real corpus")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    dirs.sort();
    let mut names: Vec<String> = CASES.iter().map(|c| c.name.to_owned()).collect();
    names.sort();
    assert_eq!(dirs, names, "real/ and CASES differ");
    for c in CASES {
        let source = std::fs::read_to_string(real_dir().join(c.name).join("SOURCE"))
            .unwrap_or_else(|e| panic!("{}: no SOURCE: {e}", c.name));
        assert!(
            source.contains("Licence: ") && source.contains("Copyright: "),
            "{}: SOURCE must name the licence and the copyright",
            c.name
        );
        assert!(real_dir().join(c.name).join(c.main).is_file(), "{}", c.name);
    }
    assert!(CASES.len() >= 25, "the corpus has {} files", CASES.len());
}

/// A file run under nginx and sluice: textual substitutions (first occurrence each, in every
/// file of the case; `{{LISTEN}}` and `{{UP}}` then become the addresses), the burst's path, and
/// nginx's status counts for it.
struct Diff {
    name: &'static str,
    edits: &'static [(&'static str, &'static str)],
    path: &'static str,
    /// The burst's method.
    method: &'static str,
    expect: &'static str,
    /// The rejections come from the file's own `error_page`, so their bodies are compared too
    /// (else nginx's built-in page and sluice's problem+json differ on purpose).
    pages: bool,
}

const DIFFS: &[Diff] = &[
    Diff {
        name: "nginx-1-22-conf",
        edits: &[
            ("worker_processes  1;", "worker_processes  1;\ndaemon off;"),
            ("listen       80;", "listen       {{LISTEN}};"),
            (
                "http {",
                "http {\n    limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;",
            ),
            (
                "            root   html;\n            index  index.html index.htm;",
                "            limit_req zone=one burst=2 nodelay;\n            proxy_pass http://{{UP}};",
            ),
        ],
        path: "/",
        method: "GET",
        expect: "200=3 503=3",
        pages: true,
    },
    Diff {
        name: "debian-nginx-conf",
        edits: &[
            ("pid /run/nginx.pid;", "pid logs/nginx.pid;\ndaemon off;"),
            ("include /etc/nginx/modules-enabled/*.conf;", ""),
            ("include /etc/nginx/mime.types;", "include mime.types;"),
            ("include /etc/nginx/conf.d/*.conf;", ""),
            (
                "include /etc/nginx/sites-enabled/*;",
                "include sites-enabled/*;",
            ),
            ("/var/log/nginx/access.log", "logs/access.log"),
            ("/var/log/nginx/error.log", "logs/error.log"),
            (
                "http {",
                "http {\n\tlimit_req_zone $binary_remote_addr zone=site:1m rate=1r/m;",
            ),
            (
                "listen 80 default_server;",
                "listen {{LISTEN}} default_server;",
            ),
            ("listen [::]:80 default_server;", ""),
            (
                "try_files $uri $uri/ =404;",
                "limit_req zone=site burst=1 nodelay;\n\t\tproxy_pass http://{{UP}};",
            ),
        ],
        path: "/index.html",
        method: "GET",
        expect: "200=2 503=4",
        pages: false,
    },
    Diff {
        name: "certbot-ubuntu-1-4-6",
        edits: &[
            ("pid /run/nginx.pid;", "pid logs/nginx.pid;\ndaemon off;"),
            ("include /etc/nginx/mime.types;", "include mime.types;"),
            ("include /etc/nginx/conf.d/*.conf;", ""),
            (
                "include /etc/nginx/sites-enabled/*;",
                "include sites-enabled/*;",
            ),
            ("/var/log/nginx/access.log", "logs/access.log"),
            ("/var/log/nginx/error.log", "logs/error.log"),
            (
                "http {",
                "http {\n\tlimit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n\tlimit_req_status 429;",
            ),
            (
                "listen 80 default_server;",
                "listen {{LISTEN}} default_server;",
            ),
            ("listen [::]:80 default_server ipv6only=on;", ""),
            (
                "try_files $uri $uri/ =404;",
                "limit_req zone=one burst=3 nodelay;\n\t\tproxy_pass http://{{UP}};",
            ),
        ],
        path: "/a",
        method: "GET",
        expect: "200=4 429=2",
        pages: false,
    },
    Diff {
        name: "gixy-ng-wordpress-production",
        edits: WORDPRESS,
        path: "/xmlrpc.php",
        method: "GET",
        expect: "200=3 503=3",
        pages: false,
    },
    Diff {
        name: "gixy-ng-map-post-only",
        edits: POST_ONLY,
        path: "/form",
        method: "POST",
        expect: "200=2 429=4",
        pages: false,
    },
    Diff {
        name: "gixy-ng-map-post-only",
        edits: POST_ONLY,
        path: "/form",
        method: "GET",
        expect: "200=6",
        pages: false,
    },
];

/// gixy-ng's WordPress file, its own `limit_req` on `/xmlrpc.php` (`rate=1r/m burst=2
/// nodelay`) kept, its PHP upstream there made the echo backend; its three servers share the
/// one address, the main one `default_server`, TLS and the IPv6 listens taken out.
const WORDPRESS: &[(&str, &str)] = &[
    ("user nginx;", "daemon off;"),
    ("pid /var/run/nginx.pid;", "pid logs/nginx.pid;"),
    ("/var/log/nginx/error.log", "logs/error.log"),
    ("include /etc/nginx/mime.types;", ""),
    ("/var/log/nginx/access.log", "logs/access.log"),
    ("listen 80;\n        listen [::]:80;", "listen {{LISTEN}};"),
    (
        "server_name example.com www.example.com;",
        "server_name redirect.invalid;",
    ),
    (
        "listen 443 ssl http2 default_server;\n        listen [::]:443 ssl http2 default_server;",
        "listen {{LISTEN}} default_server;",
    ),
    (
        "ssl_certificate /etc/letsencrypt/live/example.com/fullchain.pem;",
        "",
    ),
    (
        "ssl_certificate_key /etc/letsencrypt/live/example.com/privkey.pem;",
        "",
    ),
    ("/var/log/nginx/wordpress.access.log", "logs/wp.access.log"),
    ("/var/log/nginx/wordpress.error.log", "logs/wp.error.log"),
    (
        "include /etc/nginx/fastcgi_params;\n            fastcgi_pass php-fpm;",
        "proxy_pass http://{{UP}};",
    ),
    (
        "listen 443 ssl http2;\n        listen [::]:443 ssl http2;",
        "listen {{LISTEN}};",
    ),
    (
        "ssl_certificate /etc/letsencrypt/live/staging.example.com/fullchain.pem;",
        "",
    ),
    (
        "ssl_certificate_key /etc/letsencrypt/live/staging.example.com/privkey.pem;",
        "",
    ),
];

/// gixy-ng's `map $request_method $post_binary_remote_addr { POST $binary_remote_addr; }`
/// (no default: every other method maps to the empty key, which nginx does not limit) keys a
/// zone: POSTs are limited, GETs never.
const POST_ONLY: &[(&str, &str)] = &[(
    "http {",
    "daemon off;\nevents {}\nhttp {\n  limit_req_zone $post_binary_remote_addr zone=post:1m rate=1r/m;\n  \
     limit_req_status 429;\n  server {\n    listen {{LISTEN}};\n    location / {\n      \
     limit_req zone=post burst=1 nodelay;\n      proxy_pass http://{{UP}};\n    }\n  }",
)];

/// The case's files with `diff`'s substitutions, `listen` and `up` in place, in `to`.
fn materialize(diff: &Diff, to: &Path, listen: &str, up: &str) {
    let edit = |text: &str| {
        let mut out = text.to_owned();
        for (from, into) in diff.edits {
            out = out.replacen(from, into, 1);
        }
        out.replace("{{LISTEN}}", listen).replace("{{UP}}", up)
    };
    copy_dir(&real_dir().join(diff.name), to, &edit);
}

/// nginx's and sluice's answers to six requests at once from one client, as status counts.
async fn diff_burst(diff: &Diff, up: &Upstream) -> (String, String) {
    let main = CASES
        .iter()
        .find(|c| c.name == diff.name)
        .map_or("nginx.conf", |c| c.main);
    let in_conf = main.starts_with("conf/");
    let up_addr = up.addr.to_string();
    let nginx = Nginx::start_whole(1, |prefix, addrs| {
        let to = if in_conf {
            prefix.to_path_buf()
        } else {
            prefix.join("conf")
        };
        materialize(diff, &to, &addrs[0].to_string(), &up_addr);
        if !in_conf && main != "nginx.conf" {
            std::fs::rename(to.join(main), to.join("nginx.conf")).expect("the main file renamed");
        }
        std::fs::read_to_string(prefix.join("conf/nginx.conf")).expect("the nginx.conf written")
    });
    let dir = tempfile::tempdir().expect("a directory for the import");
    materialize(diff, dir.path(), "127.0.0.1:61081", &up_addr);
    let o = sluice_in(dir.path(), &["import-nginx", main, "-o", "sluice.toml"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let toml = std::fs::read_to_string(dir.path().join("sluice.toml")).expect("the import");
    let sluice = Sluice::builder(&toml)
        .dir("logs")
        .relocate("127.0.0.1:61081")
        .start();
    let burst = |n: u8| {
        (0..6)
            .map(move |_| Request {
                method: diff.method.to_owned(),
                ..Request::get(client(n), diff.path)
            })
            .collect()
    };
    let (a, b) = tokio::join!(fire(nginx.addr(), burst(2)), fire(sluice.addr(), burst(2)));
    // `server_tokens` is ignored on import: nginx sends `Server: nginx/1.22.1`, sluice no
    // Server field at all, on its pages, its rejections and what it proxies.
    assert!(
        a.iter().all(|r| r.header("server").is_some()),
        "{}",
        diff.name
    );
    for r in &b {
        assert_eq!(r.header("server"), None, "{}: {r:#?}", diff.name);
    }
    for r in b.iter().filter(|r| diff.pages && r.status >= 500) {
        let twin = a.iter().find(|n| n.status == r.status);
        let same = twin.is_some_and(|n| n.body_text() == r.body_text());
        assert!(
            same,
            "{}: the error page differs: {r:#?} {twin:#?}",
            diff.name
        );
    }
    (status_counts(&a), status_counts(&b))
}

/// Three real files, each given a `limit_req` in front of the echo backend: nginx answers the
/// burst as the row says, and sluice on the import answers it the same (the 503 of the nginx
/// 1.22 file is its `error_page 500 502 503 504 /50x.html`, whose file the import copied in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_configurations_limit_as_nginx_does() {
    let _timing = timing();
    let up = Upstream::start();
    for diff in DIFFS {
        let (nginx, sluice) = diff_burst(diff, &up).await;
        assert_eq!(nginx, diff.expect, "{}: nginx", diff.name);
        assert_eq!(sluice, nginx, "{}: sluice, then nginx", diff.name);
    }
}
