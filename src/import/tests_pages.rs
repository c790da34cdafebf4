//! Error pages: `error_page` with named locations, locations and URLs,
//! their status, headers and `default_type`.

use super::Kind;
use super::tests::{http, run};

#[test]
fn error_pages_of_every_form() {
    let o = run(&http(
        "server { listen 127.0.0.1:8080;
           error_page 429 503 =200 @soft;
           error_page 502 = /maint;
           error_page 504 https://status.example.com/;
           error_page 500 /50x.html;
           location @soft { add_header X-Soft yes; add_header X-Err e always; return 503 \"later\"; }
           location = /maint { return 418 \"maintenance\"; }
           location = /50x.html { root html; }
           location / { proxy_pass http://127.0.0.1:9000; } }",
    ));
    let p = &o.server(0)["error_pages"];
    // =200: the status is 200, so add_header without always is sent too.
    assert_eq!(p["429"]["status"].as_integer(), Some(200));
    assert_eq!(p["503"]["body"].as_str(), Some("later"));
    assert_eq!(
        p["429"]["headers"].to_string(),
        "{ X-Soft = \"yes\", X-Err = \"e\" }"
    );
    // `=` alone: the target's code.
    assert_eq!(p["502"]["status"].as_integer(), Some(418));
    assert_eq!(p["502"]["body"].as_str(), Some("maintenance"));
    assert_eq!(p["504"]["status"].as_integer(), Some(302));
    assert_eq!(
        p["504"]["headers"]["Location"].as_str(),
        Some("https://status.example.com/")
    );
    assert!(p.get("500").is_none());
    // No html/50x.html beside the temporary nginx.conf's directory.
    let r = o.report("error_page 500");
    assert_eq!(r.kind, Kind::NotTranslated);
    assert!(r.why.contains("/50x.html is a file (root html)"), "{r:?}");
}

#[test]
fn an_error_page_without_always_is_not_sent_on_an_error() {
    let o = run(&http(
        "error_page 429 @x;
         server { listen 127.0.0.1:8080;
           location @x { add_header Retry-After 1; return 429; }
           location / { return 200; } }",
    ));
    let p = &o.server(0)["error_pages"]["429"];
    assert!(p.get("headers").is_none(), "{}", o.text);
    assert!(
        o.text
            .contains("(not sent: no always, and the status is an error)")
    );
}

#[test]
fn a_named_location_no_error_page_names_is_reported() {
    let o = run(&http(
        "limit_req_zone $binary_remote_addr zone=site:1m rate=1r/s;
         server { listen 127.0.0.1:8080;
           location / { try_files $uri $uri/ @backend; }
           location @backend { limit_req zone=site burst=10; proxy_pass http://127.0.0.1:9000; } }",
    ));
    let r = o.report("location @backend");
    assert_eq!(r.kind, Kind::NotTranslated);
    assert!(r.short.ends_with("nginx.conf:6"), "{r:?}");
    assert!(
        r.line().contains(": not translated: location @backend ("),
        "{}",
        r.line()
    );
}

#[test]
fn default_type_is_the_type_of_return_texts_and_error_pages() {
    let o = run(&http(
        "default_type application/octet-stream;
         server { listen 127.0.0.1:8080;
           error_page 429 @throttled;
           location @throttled { default_type application/json; access_log off;
                                 return 429 '{\"error\":\"rate limited\"}'; }
           location /t { return 200 'text'; }
           location /j { default_type application/json; return 200 '{}'; }
           location /r { return 302 /elsewhere; } } ",
    ));
    let page = &o.server(0)["error_pages"]["429"];
    assert_eq!(
        page["headers"]["Content-Type"].as_str(),
        Some("application/json")
    );
    assert_eq!(page["body"].as_str(), Some("{\"error\":\"rate limited\"}"));
    let ct = |i: usize| o.location(0, i)["return"]["headers"]["Content-Type"].clone();
    assert_eq!(ct(0).as_str(), Some("application/octet-stream"), "http's");
    assert_eq!(ct(1).as_str(), Some("application/json"));
    assert_eq!(
        o.location(0, 2)["return"].to_string(),
        "{ status = 302, headers = { Location = \"/elsewhere\" } }"
    );
    assert!(
        !o.reports
            .iter()
            .any(|r| r.directive.starts_with("default_type")),
        "{:#?}",
        o.reports
    );
    // What else the error page's location says is reported.
    assert_eq!(o.report("access_log off").kind, Kind::NotTranslated);
}

/// nginx's own example (`error_page 500 502 503 504 /50x.html;` with
/// `location = /50x.html { root html; }`): the file's text becomes the
/// page's body, its type from its extension, and a report says so; a
/// page whose file is missing is reported, and a location that proxies
/// is still not a page.
#[test]
fn an_error_page_from_a_file_gets_the_files_text() {
    let prefix = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(prefix.path().join("html")).unwrap();
    let page = "<html><body><h1>An error occurred.</h1></body></html>\n";
    std::fs::write(prefix.path().join("html/50x.html"), page).unwrap();
    let o = super::tests::run_with(
        &http(
            "server { listen 127.0.0.1:8080;
               error_page 500 502 503 504 /50x.html;
               error_page 404 =200 /missing.txt;
               location = /50x.html { root html; }
               location /api/ { proxy_pass http://127.0.0.1:9000; } }",
        ),
        super::Options {
            prefix: Some(prefix.path().to_path_buf()),
            ..super::Options::default()
        },
    );
    let p = &o.server(0)["error_pages"];
    for code in ["500", "502", "503", "504"] {
        assert_eq!(p[code]["body"].as_str(), Some(page), "{}", o.text);
        assert_eq!(
            p[code]["headers"]["Content-Type"].as_str(),
            Some("text/html")
        );
        assert!(p[code].get("status").is_none(), "the error's own code");
    }
    let r = o.report("error_page 500");
    assert_eq!(r.kind, Kind::Partial);
    assert!(r.why.contains("is the page's body"), "{r:?}");
    // No location matches /missing.txt: the server's root (nginx's default
    // `html`), where there is no such file.
    let r = o.report("error_page 404");
    assert_eq!(r.kind, Kind::NotTranslated);
    assert!(r.why.contains("cannot be copied into the page"), "{r:?}");
    assert!(p.get("404").is_none());
}
