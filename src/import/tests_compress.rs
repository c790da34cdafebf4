//! The gzip family (issue #48): each directive to the key of its name at
//! its level, nginx's refusals reported, and what sluice keeps its own
//! way (`gzip_static`, `gzip_window`, the third-party modules) reported.

use super::Kind;
use super::tests::{http, run};

#[test]
fn the_gzip_family_becomes_keys_of_the_same_names() {
    let o = run(&http(
        "gzip on; gzip_types application/json text/css; gzip_min_length 1k;
         gzip_proxied expired no-cache auth; gzip_vary on; gzip_disable msie6 \"bot\";
         gzip_http_version 1.0; gzip_comp_level 5; gzip_buffers 16 8k;
         server { listen 127.0.0.1:8080; gzip_comp_level 6;
                  location / { gzip off; return 200; }
                  location /api { gzip_types *; gzip_static on; gzip_window 16k; brotli on;
                                  gzip_comp_level 10; return 200; } }",
    ));
    let t = &o.toml;
    assert_eq!(t["gzip"].as_bool(), Some(true));
    assert_eq!(
        t["gzip_types"].to_string(),
        "[\"application/json\", \"text/css\"]"
    );
    assert_eq!(t["gzip_min_length"].as_integer(), Some(1024));
    assert_eq!(
        t["gzip_proxied"].to_string(),
        "[\"expired\", \"no-cache\", \"auth\"]"
    );
    assert_eq!(t["gzip_vary"].as_bool(), Some(true));
    assert_eq!(t["gzip_disable"].to_string(), "[\"msie6\", \"bot\"]");
    assert_eq!(t["gzip_http_version"].as_str(), Some("1.0"));
    assert_eq!(t["gzip_comp_level"].as_integer(), Some(5));
    assert_eq!(t["gzip_buffers"].as_str(), Some("16 8k"));
    assert_eq!(o.server(0)["gzip_comp_level"].as_integer(), Some(6));
    assert_eq!(o.location(0, 0)["gzip"].as_bool(), Some(false));
    assert_eq!(o.location(0, 1)["gzip_types"].to_string(), "[\"*\"]");
    assert!(!o.location(0, 1).contains_key("gzip_comp_level"));
    for d in [
        "gzip_static",
        "gzip_window",
        "brotli on",
        "gzip_comp_level 10",
    ] {
        assert_eq!(o.report(d).kind, Kind::NotTranslated, "{d}");
    }
    assert!(o.report("gzip_static").why.contains("no files"));
}
