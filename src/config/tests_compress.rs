//! The compression keys: nginx's values read, its refusals reported
//! (`FILE:LINE:COL`, all at once), each key inherited on its own, and
//! compression on where `gzip = true` or `compress` lists a coding.

use super::Config;
use super::tests::{errors, ok};
use crate::compress::{Coding, Proxied, Types};

const TOP: &str = r#"
gzip = true
gzip_types = "application/json text/css"
gzip_min_length = "1k"
gzip_proxied = ["expired", "auth"]
gzip_disable = ["msie6", "bot\\d"]
gzip_http_version = 1.0
gzip_buffers = "16 8k"

[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
gzip_comp_level = 6

[[servers.locations]]
path = "/inherits"

[[servers.locations]]
path = "/off"
gzip = false

[[servers.locations]]
path = "/any"
gzip_types = ["*"]
compress = ["br", "gzip"]
brotli_comp_level = 4
"#;

#[test]
fn keys_are_read_and_inherited_each_on_its_own() {
    let config = Config::compile(ok(TOP), None).unwrap();
    let locs = &config.servers[0].locations;
    let c = locs.find("/inherits").unwrap().compress.clone().unwrap();
    assert_eq!(
        c.types,
        Types::List(vec![b"application/json".to_vec(), b"text/css".to_vec()])
    );
    assert_eq!(c.min_length, 1024);
    assert_eq!(c.proxied, Proxied::EXPIRED.with(Proxied::AUTH));
    assert!(c.msie6 && c.disable.len() == 1 && c.disable[0].is_match(b"BOT7"));
    assert!(c.http10);
    assert_eq!(
        (c.gzip_level, c.buffers, c.codings.clone()),
        (6, (16, 8192), vec![Coding::Gzip])
    );
    assert!(locs.find("/off").unwrap().compress.is_none());
    let any = locs.find("/any").unwrap().compress.clone().unwrap();
    assert_eq!(any.types, Types::Any);
    assert_eq!(
        (any.codings.clone(), any.brotli_level),
        (vec![Coding::Br, Coding::Gzip], 4)
    );
    assert_eq!(any.gzip_level, 6);
}

#[test]
fn off_unless_gzip_or_a_compress_list() {
    let base = "[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\n";
    for (top, on) in [
        ("", false),
        ("compress = [\"zstd\"]\n", true),
        ("gzip_vary = true\n", false),
    ] {
        let config = Config::compile(ok(&format!("{top}{base}")), None).unwrap();
        let loc = config.servers[0].locations.find("/").unwrap();
        assert_eq!(loc.compress.is_some(), on, "{top}");
    }
}

#[test]
fn nginxs_refusals_all_at_once() {
    let text = r#"gzip = "on"
gzip_comp_level = 10
gzip_http_version = "2.0"
gzip_proxied = "expired sometimes"
gzip_disable = ["("]
gzip_buffers = "32"
compress = ["gzip", "deflate", "gzip"]
zstd_comp_level = 0
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
"#;
    let e = errors(text);
    let want = [
        "t.toml:1:8: \"gzip\" must be true or false, found a string",
        "t.toml:2:19: \"gzip_comp_level\" must be between 1 and 9, not 10",
        "t.toml:3:21: invalid value \"2.0\" in \"gzip_http_version\" (expected \"1.0\" or \"1.1\")",
        "t.toml:4:16: invalid value \"sometimes\" in \"gzip_proxied\"",
    ];
    assert_eq!(e[..4], want, "{e:#?}");
    assert!(
        e[4].starts_with("t.toml:5:16: \"gzip_disable\": invalid regex \"(\""),
        "{e:#?}"
    );
    assert!(
        e[5].starts_with("t.toml:6:16: \"gzip_buffers\": invalid value \"32\""),
        "{e:#?}"
    );
    assert_eq!(
        e[6],
        "t.toml:7:12: invalid coding \"deflate\" in \"compress\" (expected \"gzip\", \"zstd\" or \"br\")"
    );
    assert_eq!(e[7], "t.toml:7:12: \"compress\" lists \"gzip\" twice");
    assert_eq!(
        e[8],
        "t.toml:8:19: \"zstd_comp_level\" must be between 1 and 19, not 0"
    );
    assert_eq!(e.len(), 9, "{e:#?}");
}
