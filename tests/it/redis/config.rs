//! `[redis]` configuration, and its errors located.

use super::*;
use sluice::limiter::redis::RedisServers;

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
reject_cache = false
connections = 3
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
    assert!(!r.reject_cache);
    assert_eq!(r.connections, 3);
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
        (r.timeout, r.on_error, r.prefix.as_str(), r.reject_cache),
        (Duration::from_millis(50), OnError::Allow, "sluice", true)
    );
    assert_eq!(r.connections, 1);
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

    let e = config_errors(&format!(
        "[redis]\nurl = \"redis://h:1\"\nreject_cache = \"yes\"\n{SERVER}"
    ));
    assert_eq!(
        e,
        ["t.toml:3:16: \"reject_cache\" must be true or false, found a string"]
    );

    for bad in ["0", "65", "\"4\""] {
        let e = config_errors(&format!(
            "[redis]\nurl = \"redis://h:1\"\nconnections = {bad}\n{SERVER}"
        ));
        let want = if bad.starts_with('"') {
            "t.toml:3:15: \"connections\" must be an integer, found a string"
        } else {
            "t.toml:3:15: \"connections\": value must be between 1 and 64"
        };
        assert_eq!(e, [want], "connections = {bad}");
    }

    let e = config_errors(&format!("[redis]\ntimeout = \"1s\"\n{SERVER}"));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("t.toml:1:1: [redis] must have a \"url\""),
        "{e:?}"
    );
}

#[test]
fn config_redis_cluster_and_sentinel() {
    let spec = sluice::config::parse_str(
        "t.toml",
        &format!(
            "[redis]\ncluster = [\"redis://127.0.0.1:7000\", \"redis://127.0.0.1:7001\"]\npassword = \"pw\"\n{SERVER}"
        ),
    )
    .unwrap();
    let r = spec.redis.unwrap();
    assert_eq!(
        r.servers,
        RedisServers::Cluster(vec![
            "redis://127.0.0.1:7000".into(),
            "redis://127.0.0.1:7001".into()
        ])
    );
    assert_eq!(r.password.as_deref(), Some("pw"));

    let spec = sluice::config::parse_str(
        "t.toml",
        &format!(
            "[redis]\nsentinel = [\"redis://127.0.0.1:26379\"]\nmaster_name = \"m\"\nsentinel_password = \"s\"\n{SERVER}"
        ),
    )
    .unwrap();
    let r = spec.redis.unwrap();
    assert_eq!(
        r.servers,
        RedisServers::Sentinel {
            sentinels: vec!["redis://127.0.0.1:26379".into()],
            master_name: "m".into()
        }
    );
    assert_eq!(
        (r.password, r.sentinel_password.as_deref()),
        (None, Some("s"))
    );
}

#[test]
fn config_redis_cluster_and_sentinel_errors_are_located() {
    let e = config_errors(&format!(
        r#"[redis]
url = "redis://h:1"
cluster = ["redis://h:2"]
sentinel = ["redis://h:3"]
{SERVER}"#
    ));
    assert_eq!(
        e,
        [
            "t.toml:3:11: \"cluster\" cannot be used with \"url\": [redis] names one of url, cluster or sentinel",
            "t.toml:4:12: \"sentinel\" cannot be used with \"url\": [redis] names one of url, cluster or sentinel",
            "t.toml:4:12: \"sentinel\" needs \"master_name\" (the name the sentinels monitor the master as)",
        ]
    );

    let e = config_errors(&format!(
        r#"[redis]
cluster = []
master_name = "m"
sentinel_password = "x"
{SERVER}"#
    ));
    assert_eq!(
        e,
        [
            "t.toml:2:11: \"cluster\" is empty (list at least one \"redis://HOST:PORT\")",
            "t.toml:3:15: \"master_name\" is only used with \"sentinel\"",
            "t.toml:4:21: \"sentinel_password\" is only used with \"sentinel\"",
        ]
    );

    let e = config_errors(&format!(
        r#"[redis]
sentinel = ["redis://h:1", "http://h:2", 3, "rediss://h:4"]
master_name = ""
{SERVER}"#
    ));
    assert_eq!(e.len(), 4, "{e:#?}");
    assert!(
        e[0].starts_with("t.toml:2:28: invalid redis url \"http://h:2\""),
        "{e:?}"
    );
    assert_eq!(
        e[1],
        "t.toml:2:42: \"sentinel\" must be a string, found an integer"
    );
    assert_eq!(
        e[2],
        "t.toml:2:45: \"sentinel\" mixes redis:// and rediss:// urls (TLS is all or none)"
    );
    assert!(
        e[3].starts_with("t.toml:3:15: invalid master_name \"\""),
        "{e:?}"
    );

    let e = config_errors(&format!("[redis]\ncluster = \"redis://h:1\"\n{SERVER}"));
    assert_eq!(
        e,
        ["t.toml:2:11: \"cluster\" must be a list of urls, found a string"]
    );
}
