//! `[maps]`, `[geos]` and `access`: what is read, what is refused
//! (`FILE:LINE:COL`, all at once), and where the variables may be used.

use super::Config;
use super::tests::{errors, ok};

const SERVER: &str = r#"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/"
return = { status = 200, body = "$net" }
"#;

#[test]
fn maps_and_geos_are_variables_anywhere_in_the_file() {
    // The zone names `$key` before the map that makes it is written.
    let text = format!(
        r#"
[zones.z]
key = "$key"
size = "1m"
[maps.key]
source = "$net"
values = {{ "0" = "", "1" = "$binary_remote_addr" }}
[maps.tier]
source = "$http_user_agent"
hostnames = false
default = "std"
values = {{ "~*bot" = "bot", "~^curl/(?<v>[0-9]+)" = "curl-$v-$1" }}
[geos.net]
source = "$http_x_client"
default = "1"
ranges = false
proxy = ["10.0.0.0/8"]
proxy_recursive = true
networks = {{ "127.0.0.0/8" = "0" }}
{SERVER}"#
    );
    let spec = ok(&text);
    assert_eq!(spec.vars.names(), ["key", "tier", "net"]);
    let config = Config::compile(spec, None).unwrap();
    assert!(!config.vars.is_empty());
}

#[test]
fn every_problem_at_once() {
    let text = format!(
        r#"
[maps.tier]
source = "$nope"
values = {{ "~(" = "1", "a" = "1", "A" = "2", "~x" = "$2$tier_x" }}
[maps.host]
source = "$uri"
[maps.nosource]
values = {{}}
[geos.tier]
networks = {{ "10.0.0.0/33" = "x" }}
[geos.r]
ranges = true
networks = {{ "10.0.0.9-10.0.0.1" = "x", "::1-::2" = "y" }}
[geos.u]
colour = "red"
[geos.net]
{SERVER}access = ["allow 10.0.0.1", "permit all"]
"#
    );
    let e = errors(&text);
    let want = [
        "t.toml:3:11: unknown \"nope\" variable",
        "t.toml:4:12: invalid regex \"(\": unclosed group",
        "t.toml:4:35: conflicting parameter \"a\"",
        "t.toml:4:56: unknown \"tier_x\" variable",
        "t.toml:5:7: the duplicate \"host\" variable",
        "t.toml:7:1: [maps.nosource] must have \"source\"",
        "t.toml:10:14: invalid address or network \"10.0.0.0/33\"",
        "t.toml:13:14: invalid range \"10.0.0.9-10.0.0.1\" (its end is before its start)",
        "t.toml:13:41: invalid range \"::1-::2\" (IPv4 addresses only)",
        "t.toml:15:1: unknown key \"colour\" in [geos.u]",
        "t.toml:9:7: the duplicate \"tier\" variable (a map and a geo of the same name)",
        "t.toml:23:29: invalid access rule \"permit all\"",
    ];
    for w in want {
        assert!(
            e.iter().any(|x| x.starts_with(w)),
            "missing {w:?} in {e:#?}"
        );
    }
    assert_eq!(e.len(), want.len(), "{e:#?}");
}

#[test]
fn a_variable_that_needs_itself_is_refused() {
    let text = format!(
        r#"
[maps.a]
source = "$b"
[maps.b]
source = "x"
values = {{ "x" = "$c" }}
[geos.c]
source = "$a"
[geos.net]
{SERVER}"#
    );
    assert_eq!(
        errors(&text),
        ["t.toml:2:7: cycle while evaluating variable: $a → $b → $c → $a"]
    );
}

#[test]
fn access_is_inherited_as_a_whole() {
    let text = r#"
access = "deny 10.0.0.1"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/inherits"
return = { status = 200 }
[[servers.locations]]
path = "/own"
access = ["allow 10.0.0.1", "deny all"]
return = { status = 200 }
"#;
    let config = Config::compile(ok(text), None).unwrap();
    let s = &config.servers[0];
    let rules = |p: &str| {
        let l = s.locations.find(p).unwrap();
        l.access.iter().map(|r| r.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(rules("/inherits"), ["deny 10.0.0.1/32"]);
    assert_eq!(rules("/own"), ["allow 10.0.0.1/32", "deny all"]);
}
