//! `error_log` and `access_log = "syslog:…"`: nginx's arguments read
//! (errors in nginx's words, at `FILE:LINE:COL`), inherited as nginx
//! inherits them (a level with its own list replaces its parent's), and
//! `error_log_level` beside them.

use super::Config;
use super::tests::{errors, ok};
use crate::errlog::{Dest, Severity};
use std::sync::Arc;

fn compiled(text: &str) -> Config {
    Config::compile(ok(text), None).expect("compiles")
}

#[test]
fn each_level_logs_to_its_own_list_or_its_parents() {
    let dir = std::env::temp_dir().join(format!("sluice-cfglogs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display();
    let c = compiled(&format!(
        r#"
error_log = "stderr warn"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:9"
error_log = ["{d}/server.log info", "syslog:server=127.0.0.1:5140,tag=edge notice"]
[[servers.locations]]
path = "/own"
return = {{ status = 200 }}
error_log = "{d}/own.log debug"
[[servers.locations]]
path = "/inherits"
return = {{ status = 200 }}
[[servers]]
listen = "127.0.0.1:2"
proxy_pass = "http://127.0.0.1:9"
"#
    ));
    assert_eq!(c.error_log.min(), Severity::Warn);
    let (a, b) = (&c.servers[0], &c.servers[1]);
    assert_eq!(a.error_log.min(), Severity::Info);
    assert!(
        Arc::ptr_eq(&b.error_log, &c.error_log),
        "no list: the top's"
    );
    let locs: Vec<_> = a.locations.iter().collect();
    let own = locs.iter().find(|l| l.path == "/own").unwrap();
    let inherits = locs.iter().find(|l| l.path == "/inherits").unwrap();
    assert_eq!(own.error_log.min(), Severity::Debug);
    assert!(Arc::ptr_eq(&inherits.error_log, &a.error_log));
    assert!(dir.join("server.log").exists() && dir.join("own.log").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn error_log_level_alone_is_stderr_at_that_level() {
    let c = compiled(
        "error_log_level = \"notice\"\n[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:9\"\n",
    );
    assert_eq!(c.error_log.min(), Severity::Notice);
    let c =
        compiled("[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:9\"\n");
    assert_eq!(c.error_log.min(), Severity::Info, "sluice's default");
    let spec = ok(
        "error_log = [\"stderr\", \"syslog:server=unix:/dev/log debug\"]\n[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:9\"\n",
    );
    let list = spec.http.error_log.as_deref().unwrap();
    assert_eq!(list[0].dest, Dest::Stderr);
    assert_eq!(list[0].level, Severity::Error, "nginx's default level");
    assert!(matches!(list[1].dest, Dest::Syslog(_)));
}

#[test]
fn bad_targets_are_reported_where_they_are() {
    let text = r#"error_log_level = "warn"
error_log = ["stderr", "f.log loud", "syslog:server=a,facility=x"]
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:9"
access_log = "syslog:tag=x"
[[servers.locations]]
path = "/"
return = { status = 200 }
error_log = []
"#;
    assert_eq!(
        errors(text),
        [
            "t.toml:1:19: \"error_log_level\" and \"error_log\" both set at the top level: give the level in \"error_log\" (e.g. \"stderr info\")",
            "t.toml:2:24: \"error_log\": invalid log level \"loud\"",
            "t.toml:2:38: \"error_log\": unknown syslog facility \"x\"",
            "t.toml:6:14: \"access_log\": no syslog server specified",
            "t.toml:10:13: \"error_log\" must name at least one target",
        ]
    );
}

#[test]
fn access_log_sends_to_syslog() {
    let c = compiled(
        "access_log = \"syslog:server=127.0.0.1:5140,severity=alert\"\n[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:9\"\n",
    );
    let log = c.servers[0].access_log.as_ref().unwrap();
    assert!(matches!(&*log.sink, crate::errlog::Sink::Syslog(_)));
}
