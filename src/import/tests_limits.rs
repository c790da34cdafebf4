//! `limit_req_zone`, `limit_conn_zone`, and the `limit_req` / `limit_conn`
//! lines that name them: a zone the file does not define is the user's
//! error at the line that names it (never `internal:`), and what nginx
//! refuses of these directives is reported and left out.

use super::tests::{http, run};
use super::{ImportError, Kind, Options, import};

/// The user error (`ImportError::Config`) of importing `text` as FILE.
fn refused(file: &str, text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file);
    std::fs::write(&path, text).unwrap();
    match import(&path, &Options::default()) {
        Err(ImportError::Config(e)) => e.replace(&format!("{}/", dir.path().display()), ""),
        Err(e) => panic!("not a user error: {e}"),
        Ok(t) => panic!("imported:\n{}", t.toml),
    }
}

#[test]
fn a_site_file_naming_a_zone_defined_elsewhere_is_a_user_error_at_its_line() {
    let site = "server {\n    listen 80;\n    location / { limit_req zone=api burst=5; proxy_pass http://x; }\n}\n";
    assert_eq!(
        refused("api.conf", site),
        "api.conf:3: limit_req names zone \"api\", which no limit_req_zone in this file defines \
         (import the file that defines it, e.g. nginx.conf)"
    );
    // Every such line at once, each once; limit_conn likewise.
    let site = "limit_req zone=top;\nserver {\n    listen 80;\n    limit_conn addr 10;\n    \
                location / { limit_req zone=api; limit_req zone=api burst=2; proxy_pass http://x; }\n}\n";
    let e = refused("default", site);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 3, "{e}");
    assert!(
        lines[0].starts_with("default:1: limit_req names zone \"top\""),
        "{e}"
    );
    assert!(
        lines[1].starts_with(
            "default:4: limit_conn names zone \"addr\", which no limit_conn_zone in this file defines"
        ),
        "{e}"
    );
    assert!(
        lines[2].starts_with("default:5: limit_req names zone \"api\""),
        "{e}"
    );
}

#[test]
fn a_whole_file_naming_an_undefined_zone_says_nginx_refuses_it() {
    let conf = http("server { listen 80; location / { limit_req zone=api; return 200; } }");
    let e = refused("nginx.conf", &conf);
    assert!(
        e.starts_with("nginx.conf:3: limit_req names zone \"api\""),
        "{e}"
    );
    assert!(e.contains("nginx refuses the file"), "{e}");
}

#[test]
fn a_zone_of_the_other_kind_is_a_user_error() {
    let conf = http(
        "limit_conn_zone $binary_remote_addr zone=api:1m;
         limit_req_zone $binary_remote_addr zone=rq:1m rate=1r/s;
         server { listen 80; limit_conn rq 1; location / { limit_req zone=api; return 200; } }",
    );
    let e = refused("nginx.conf", &conf);
    assert_eq!(
        e.lines().collect::<Vec<_>>(),
        [
            "nginx.conf:5: limit_conn names zone \"rq\", which is a limit_req_zone (at nginx.conf:4): \
             nginx refuses the file (the shared memory zone \"rq\" is already declared for a different use)",
            "nginx.conf:5: limit_req names zone \"api\", which is a limit_conn_zone (at nginx.conf:3): \
             nginx refuses the file (the shared memory zone \"api\" is already declared for a different use)",
        ]
    );
}

#[test]
fn a_limit_req_above_its_zone_line_finds_it() {
    let o = run(&http(
        "limit_req zone=api burst=3;
         limit_req_zone $binary_remote_addr zone=api:1m rate=1r/s;
         server { listen 127.0.0.1:8080; location / { return 200; } }",
    ));
    assert_eq!(
        o.toml["limit_req"].to_string(),
        "{ zone = \"api\", burst = 3 }"
    );
}

#[test]
fn what_nginx_refuses_of_limit_req_is_reported_and_left_out() {
    let o = run(&http(
        "limit_req_zone $binary_remote_addr zone=small:10k rate=1r/s;
         limit_req_zone $binary_remote_addr zone=nosize rate=1r/s;
         limit_req_zone $binary_remote_addr zone=api:1m rate=1r/s;
         limit_req_zone $binary_remote_addr zone=api:2m rate=2r/s;
         limit_conn_zone $binary_remote_addr zone=addr:1m;
         server { listen 127.0.0.1:8080;
           limit_conn addr 0; limit_conn addr 5; limit_conn addr 6;
           location /a { limit_req zone=small; limit_req zone=nosize; return 200; }
           location /b { limit_req zone=api burst=0; limit_req zone=api delay=-1; return 200; }
           location /c { limit_req zone=api burst=5 nodelay delay=2; return 200; }
           location /d { limit_req zone=api burst=5; limit_req zone=api burst=9; return 200; } }",
    ));
    let why = |d: &str| {
        let r = o.report(d);
        assert_eq!(r.kind, Kind::NotTranslated, "{r:?}");
        r.why.clone()
    };
    assert!(why("limit_req_zone $binary_remote_addr zone=small").contains("too small"));
    assert!(why("limit_req_zone $binary_remote_addr zone=nosize").contains("must have a size"));
    assert!(why("limit_req_zone $binary_remote_addr zone=api:2m").contains("already defined at"));
    assert_eq!(o.toml["zones"]["api"]["size"].as_str(), Some("1m"));
    assert!(o.toml["zones"].get("small").is_none());
    assert!(why("limit_req zone=small").contains("its zone \"small\" is not translated"));
    assert!(why("limit_req zone=nosize").contains("is not translated"));
    assert!(why("limit_req zone=api burst=0").contains("invalid parameter \"burst=0\""));
    assert!(why("limit_req zone=api delay=-1").contains("invalid parameter \"delay=-1\""));
    assert!(why("limit_req zone=api burst=5 nodelay").contains("invalid number of arguments"));
    assert!(why("limit_req zone=api burst=9").contains("is duplicate"));
    assert!(why("limit_conn addr 0").contains("invalid number of connections"));
    assert!(why("limit_conn addr 6").contains("is duplicate"));
    assert_eq!(
        o.server(0)["limit_conn"].to_string(),
        "{ zone = \"addr\", conn = 5 }"
    );
    for l in 0..3 {
        assert!(o.location(0, l).get("limit_req").is_none(), "{l}");
    }
    assert_eq!(
        o.location(0, 3)["limit_req"].to_string(),
        "{ zone = \"api\", burst = 5 }"
    );
}

#[test]
fn a_site_files_proxy_pass_to_an_upstream_defined_elsewhere_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("default");
    let site = "upstream app { server 127.0.0.1:9000; }
server {
    listen 127.0.0.1:8080;
    location /a { proxy_pass http://backend; }
    location /b { proxy_pass http://app; }
    location /c { proxy_pass http://api.example.com; }
    location /d { proxy_pass http://web:8080; }
}
";
    std::fs::write(&path, site).unwrap();
    let t = import(&path, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let about: Vec<&super::Report> = t
        .reports
        .iter()
        .filter(|r| r.directive.starts_with("proxy_pass"))
        .collect();
    assert_eq!(about.len(), 1, "{about:#?}");
    assert_eq!(about[0].kind, Kind::Partial);
    assert_eq!(about[0].directive, "proxy_pass http://backend");
    assert!(
        about[0]
            .why
            .starts_with("no upstream \"backend\" in this file")
    );
    assert!(t.toml.contains("proxy_pass = \"http://backend\""));
    // A whole file says nothing: a name there is a host, as nginx resolves it.
    let whole = run(&http(
        &site.replace("upstream app { server 127.0.0.1:9000; }", ""),
    ));
    assert!(
        !whole
            .reports
            .iter()
            .any(|r| r.directive.starts_with("proxy_pass"))
    );
}
