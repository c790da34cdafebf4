//! `proxy_set_header`, `add_header`, `proxy_hide_header`,
//! `proxy_pass_header`: what is read, what is refused (`FILE:LINE:COL`, all
//! at once), and nginx's inheritance — each key on its own, a level that
//! sets it replacing its parent's list.

use super::Config;
use super::tests::{errors, ok};

const TOP: &str = r#"
proxy_set_header = { Host = "$host", "X-Real-IP" = "$remote_addr" }
add_header = { name = "X-Top", value = "1" }
proxy_hide_header = "X-Powered-By"

[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
add_header = [{ name = "X-Server", value = "$status", always = true }, { name = "X-Server", value = "2" }]

[[servers.locations]]
path = "/inherits"

[[servers.locations]]
path = "/own"
proxy_set_header = { "X-Only" = "$uri" }
proxy_pass_header = ["Server", "Date"]
"#;

#[test]
fn each_key_is_inherited_on_its_own() {
    let spec = ok(TOP);
    let config = Config::compile(spec, None).unwrap();
    let server = &config.servers[0];
    let inherits = server.locations.find("/inherits").unwrap();
    let own = server.locations.find("/own").unwrap();
    // The server's add_header list replaced the top level's.
    let names: Vec<&str> = inherits
        .headers
        .add
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(names, ["x-server", "x-server"]);
    assert!(inherits.headers.add[0].always && !inherits.headers.add[1].always);
    assert_eq!(server.add_headers.len(), 2);
    let proxy = |l: &super::Location, n: &'static str| l.headers.proxy.replaces(n.as_bytes());
    // From the top level: Host and X-Real-IP (and the X-Forwarded-For default).
    assert!(proxy(inherits, "x-real-ip") && proxy(inherits, "host"));
    assert!(!proxy(inherits, "x-only"));
    // Its own list replaces the inherited one; the defaults come back.
    assert!(proxy(own, "x-only") && proxy(own, "host") && proxy(own, "x-forwarded-for"));
    assert!(!proxy(own, "x-real-ip"));
}

#[test]
fn mistakes_are_reported_at_their_place_all_at_once() {
    let text = r#"
proxy_set_header = { "Content-Length" = "1", "Bad Name" = "x", "X-Ok" = "$status" }
add_header = [{ name = "X-A" }, { name = "X-B", value = "1", always = "yes" }, { name = "X-C", value = "$nope" }]
proxy_hide_header = ["Ok", 3]
proxy_pass_header = 7

[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/"
return = { status = 200 }
"#;
    let e = errors(text);
    let want = [
        "t.toml:2:22: \"Content-Length\" cannot be set: sluice writes the body's framing itself",
        "t.toml:2:46: invalid header name \"Bad Name\"",
        "t.toml:2:74: variable \"$status\" is only available in error pages, return and access logs",
        "t.toml:3:15: \"add_header\" needs \"name\" and \"value\" (and may have \"always\")",
        "t.toml:3:71: \"always\" must be true or false, found a string",
        "t.toml:3:105: unknown \"nope\" variable",
        "t.toml:4:28: \"proxy_hide_header\" must be a string, found an integer",
        "t.toml:5:21: \"proxy_pass_header\" must be a string, found an integer",
    ];
    assert_eq!(e, want, "{e:#?}");
}

/// A list value sends the field once per element, in order; its elements
/// are templates like the single-string form, each checked where it is.
#[test]
fn a_list_value_sends_the_field_once_per_element() {
    let text = r#"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
proxy_set_header = { "X-A" = ["v1", "$remote_addr", ""], "X-B" = "b" }
"#;
    let spec = ok(text);
    let set = spec.servers[0]
        .level
        .headers
        .proxy_set_header
        .clone()
        .unwrap();
    let names: Vec<&str> = set.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["x-a", "x-a", "x-a", "x-b"]);
    let bad = r#"
proxy_set_header = { "X-A" = ["v1", 2, "$nope"], "X-B" = [] }
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
"#;
    let want = [
        "t.toml:2:37: \"X-A\" must be a string, found an integer",
        "t.toml:2:41: unknown \"nope\" variable",
        "t.toml:2:58: \"X-B\" = []: a list needs a value; \"\" removes the field",
    ];
    assert_eq!(errors(bad), want);
}
