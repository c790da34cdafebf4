//! `[redis]` configuration, and its errors located.

use super::*;

/// As `load` reports them: the TLS files named are read too.
fn config_errors(text: &str) -> Vec<String> {
    match sluice::config::load_text("t.toml", text) {
        Ok(_) => vec![],
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

const SERVER: &str = r#"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/"
return = { status = 200 }
"#;

#[test]
fn config_redis_table_and_backend() {
    let ok = format!(
        r#"[redis]
url = "redis://127.0.0.1:6379/2"
timeout = "20ms"
on_error = "local"
prefix = "app"
[zones.r]
key = "$remote_addr"
size = "1m"
backend = "redis"
[zones.m]
key = "$remote_addr"
size = "1m"
{SERVER}"#
    );
    let spec = sluice::config::parse_str("t.toml", &ok).unwrap();
    let r = spec.redis.as_ref().unwrap();
    assert_eq!(r.timeout, Duration::from_millis(20));
    assert_eq!(r.on_error, OnError::Local);
    assert_eq!(r.prefix, "app");
    assert_eq!(spec.zones[0].backend, sluice::config::Backend::Redis);
    assert_eq!(spec.zones[1].backend, sluice::config::Backend::Memory);

    // defaults
    let spec = sluice::config::parse_str(
        "t.toml",
        &format!("[redis]\nurl = \"redis://h:1\"\n{SERVER}"),
    )
    .unwrap();
    let r = spec.redis.unwrap();
    assert_eq!(
        (r.timeout, r.on_error, r.prefix.as_str()),
        (Duration::from_millis(50), OnError::Allow, "sluice")
    );
}

#[test]
fn config_redis_errors_are_located() {
    let text = format!(
        r#"[zones.r]
key = "$remote_addr"
size = "1m"
backend = "redis"
[zones.x]
key = "$remote_addr"
size = "1m"
backend = "etcd"
{SERVER}"#
    );
    assert_eq!(
        config_errors(&text),
        [
            "t.toml:4:11: zone \"r\" has backend = \"redis\" but there is no [redis] table (add [redis] with url = \"redis://HOST:PORT\")",
            "t.toml:8:11: invalid backend \"etcd\" (expected \"memory\" or \"redis\")",
        ]
    );

    let text = format!(
        r#"[redis]
url = "http://h:6380"
timeout = "0ms"
on_error = "maybe"
prefix = "a{{b}}"
bogus = 1
{SERVER}"#
    );
    let e = config_errors(&text);
    assert_eq!(e.len(), 5, "{e:#?}");
    assert!(
        e[0].starts_with("t.toml:2:7: invalid redis url \"http://h:6380\""),
        "{e:?}"
    );
    assert_eq!(e[1], "t.toml:3:11: \"timeout\" must be at least 1ms");
    assert_eq!(
        e[2],
        "t.toml:4:12: invalid on_error \"maybe\" (expected \"allow\", \"deny\" or \"local\")"
    );
    assert!(
        e[3].starts_with("t.toml:5:10: invalid prefix \"a{b}\""),
        "{e:?}"
    );
    assert!(
        e[4].starts_with("t.toml:6:1: unknown key \"bogus\" in [redis]"),
        "{e:?}"
    );

    let e = config_errors(&format!(
        "[redis]\nurl = \"redis://h:1\"\ntls_ca = \"/nonexistent/ca.pem\"\n{SERVER}"
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("t.toml:3:10: \"tls_ca\": cannot read \"/nonexistent/ca.pem\""),
        "{e:?}"
    );
    let ca = tempfile::NamedTempFile::new().unwrap();
    let e = config_errors(&format!(
        "[redis]\nurl = \"redis://h:1\"\ntls_ca = \"{}\"\n{SERVER}",
        ca.path().display()
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("t.toml:3:10: \"tls_ca\" needs a rediss:// url"),
        "{e:?}"
    );

    let e = config_errors(&format!("[redis]\ntimeout = \"1s\"\n{SERVER}"));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("t.toml:1:1: [redis] must have a \"url\""),
        "{e:?}"
    );
}
