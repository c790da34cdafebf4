use super::*;
use crate::errlog::Severity;
use crate::vars::LogEscape;
use std::sync::Arc;
use std::time::Duration;

/// Every error of `text` (as file `t.toml`), rendered; empty when valid.
pub(super) fn errors(text: &str) -> Vec<String> {
    match parse_str("t.toml", text) {
        Ok(_) => vec![],
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

/// `text` (as file `t.toml`), which must be valid.
pub(super) fn ok(text: &str) -> Spec {
    match parse_str("t.toml", text) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

const ZONE: &str = r#"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "2r/s"
"#;

#[test]
fn the_example_config_is_valid() {
    let text = include_str!("../../config/sluice.toml");
    let spec = ok(text);
    assert_eq!(spec.zones.len(), 4);
    assert_eq!(spec.servers.len(), 2);
    assert_eq!(spec.http.status, Some(429));
    let delay = &spec.servers[0].locations[3];
    assert_eq!(
        delay.level.limit_req.as_deref().unwrap(),
        &[LimitSpec {
            zone: 3,
            burst: 5000,
            delay: 2000
        }]
    );
}

#[test]
fn every_error_is_reported_at_once_with_line_and_column() {
    let text = r#"limit_req_status = 600
bogus = 1
[zones.z]
key = "$nope"
size = "16k"
rate = "0r/s"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
[[servers.locations]]
path = "/a"
limit_req = { zone = "missing", burst = 0 }
"#;
    let e = errors(text);
    let want = [
        "t.toml:1:20: \"limit_req_status\": value must be between 400 and 599",
        "t.toml:2:1: unknown key \"bogus\" in the top level (expected one of: zones, servers,",
        "t.toml:4:8: unknown \"nope\" variable",
        "t.toml:5:8: zone \"z\" is too small: size \"16k\" is below the minimum of 32k",
        "t.toml:6:8: invalid rate \"0r/s\" (expected \"Nr/s\", \"Nr/m\", \"Nr/h\" or \"Nr/PERIOD\" such as \"10r/10s\" or \"100r/5m\", N a positive integer)",
        "t.toml:12:22: unknown limit_req_zone \"missing\"",
        "t.toml:12:41: invalid burst value: must be between 1 and 4000000",
    ];
    assert_eq!(e.len(), want.len(), "{e:#?}");
    for (got, want) in e.iter().zip(want) {
        assert!(
            got.starts_with(want),
            "{got}\n  does not start with\n{want}"
        );
    }
}

#[test]
fn syntax_errors_are_located() {
    let e = errors("a = \n[zones\n");
    assert!(!e.is_empty());
    assert!(e[0].starts_with("t.toml:1:"), "{e:?}");
}

#[test]
fn wrong_types_are_named() {
    let text = format!(
        "{ZONE}[[servers]]\nlisten = 7060\nproxy_pass = \"http://127.0.0.1:2\"\nlimit_req_dry_run = \"yes\"\n"
    );
    let e = errors(&text);
    assert_eq!(
        e,
        vec![
            "t.toml:7:10: \"listen\" must be a string, found an integer",
            "t.toml:9:21: \"limit_req_dry_run\" must be true or false, found a string",
        ]
    );
}

/// nginx: without burst, `nodelay` and `delay=` both fit and the later wins;
/// with burst that is four arguments, which nginx refuses.
#[test]
fn the_later_of_nodelay_and_delay_wins_without_burst() {
    let text = format!(
        r#"{ZONE}
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
[[servers.locations]]
path = "/a"
limit_req = {{ zone = "z", delay = 2, nodelay = true }}
[[servers.locations]]
path = "/b"
limit_req = {{ zone = "z", nodelay = true, delay = 2 }}
[[servers.locations]]
path = "/c"
limit_req = {{ zone = "z", burst = 5, nodelay = false, delay = 2 }}
"#
    );
    let spec = ok(&text);
    let l = &spec.servers[0].locations;
    assert!(l[0].level.limit_req.as_ref().unwrap()[0].is_nodelay());
    assert_eq!(l[1].level.limit_req.as_ref().unwrap()[0].delay, 2000);
    assert_eq!(l[2].level.limit_req.as_ref().unwrap()[0].delay, 2000);

    let bad = text.replace("nodelay = false", "nodelay = true");
    let e = errors(&bad);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains("invalid number of arguments in \"limit_req\" directive"),
        "{e:?}"
    );
}

#[test]
fn a_zone_twice_at_one_level_is_a_duplicate() {
    let text = format!(
        r#"{ZONE}
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
limit_req = [{{ zone = "z" }}, {{ zone = "z", burst = 2 }}]
"#
    );
    let e = errors(&text);
    assert_eq!(e.len(), 1);
    assert!(
        e[0].contains("\"limit_req\" directive is duplicate"),
        "{e:?}"
    );
}

#[test]
fn locations_need_an_upstream_or_a_return() {
    let text = r#"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/a"
"#;
    let e = errors(text);
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("t.toml:5:8: location \"/a\" has neither"),
        "{e:?}"
    );
}

#[test]
fn regex_locations_cannot_replace_a_uri() {
    let text = r#"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "~ ^/a"
proxy_pass = "http://127.0.0.1:2/x/"
[[servers.locations]]
path = "~ ("
return = { status = 200 }
"#;
    let e = errors(text);
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("cannot have URI part in location given by regular expression"));
    assert!(e[1].contains("invalid regex"));
}

#[test]
fn regex_locations_cannot_inherit_a_uri_either() {
    let text = r#"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2/base/"
[[servers.locations]]
path = "~ \\.php$"
"#;
    let e = errors(text);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("t.toml:6:8: \"proxy_pass\" cannot have URI part"),
        "{e:?}"
    );
}

#[test]
fn duplicate_listen_and_location() {
    let text = r#"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/a"
return = { status = 200 }
[[servers.locations]]
path = "/a"
return = { status = 200 }
[[servers]]
listen = "127.0.0.1:1"
"#;
    let e = errors(text);
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("duplicate location \"/a\""));
    assert!(
        e[1].starts_with("t.toml:11:10: conflicting server name \"\" on 127.0.0.1:1"),
        "{e:?}"
    );
}

#[test]
fn a_level_with_its_own_limits_hides_its_parents() {
    let text = r#"
limit_req = { zone = "a" }
[zones.a]
key = "$binary_remote_addr"
size = "1m"
[zones.b]
key = "$remote_addr"
size = "1m"
rate = "1r/m"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
[[servers.locations]]
path = "/inherits"
[[servers.locations]]
path = "/own"
limit_req = { zone = "b", burst = 3 }
"#;
    let spec = ok(text);
    assert_eq!(
        spec.zones[0].policy.rate.milli(),
        1000,
        "rate defaults to 1r/s"
    );
    assert_eq!(spec.zones[1].policy.rate.milli(), 16);
    let server = spec.servers[0].level.inherit(&spec.http);
    let locs = &spec.servers[0].locations;
    let inherits = locs[0].level.inherit(&server);
    let own = locs[1].level.inherit(&server);
    assert_eq!(inherits.limit_req.unwrap()[0].zone, 0);
    let own = own.limit_req.unwrap();
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].zone, 1);
}

#[test]
fn status_and_levels() {
    let text = format!(
        r#"limit_req_status = 444
limit_req_log_level = "loud"
{ZONE}
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
limit_req_status = 399
"#
    );
    let e = errors(&text);
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("invalid limit_req_log_level \"loud\""));
    assert!(e[1].contains("between 400 and 599"));
}

#[test]
fn operating_keys() {
    let spec = ok(r#"
pid_file = "/run/sluice.pid"
watch = true
shutdown_timeout = "3s"
error_log_level = "warn"
log_format_escape = "json"
keepalive_timeout = "5s"
send_timeout = 30
client_max_body_size = "2m"
[admin]
listen = "127.0.0.1:9090"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
keepalive_timeout = 0
[[servers.locations]]
path = "/upload"
client_max_body_size = "1g"
"#);
    assert_eq!(
        spec.ops,
        OpsSpec {
            pid_file: Some("/run/sluice.pid".into()),
            watch: true,
            shutdown_timeout: Some(Duration::from_secs(3)),
            error_log_level: Some(Severity::Warn),
            log_escape: LogEscape::Json,
            admin: Some(crate::config::AdminSpec {
                listen: "127.0.0.1:9090".parse().unwrap(),
                allow: Vec::new(),
                token: None,
                top_keys: crate::config::AdminSpec::DEFAULT_TOP_KEYS,
            }),
            worker_connections: None,
        }
    );
    assert_eq!(spec.http.send_timeout, Some(Duration::from_secs(30)));
    assert_eq!(spec.http.client_max_body_size, Some(2 << 20));
    let server = spec.servers[0].level.inherit(&spec.http);
    assert_eq!(server.keepalive_timeout, Some(Duration::ZERO));
    let loc = spec.servers[0].locations[0].level.inherit(&server);
    assert_eq!(loc.client_max_body_size, Some(1 << 30));
}

/// nginx's upstream and body timeouts at every level, inherited.
#[test]
fn upstream_timeouts_inherit() {
    let spec = ok(r#"
proxy_send_timeout = "5s"
client_body_timeout = "1m30s"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
proxy_read_timeout = "2s"
[[servers.locations]]
path = "/upload"
client_body_timeout = "500ms"
"#);
    let server = spec.servers[0].level.inherit(&spec.http);
    let loc = spec.servers[0].locations[0].level.inherit(&server);
    assert_eq!(loc.proxy_send_timeout, Some(Duration::from_secs(5)));
    assert_eq!(loc.proxy_read_timeout, Some(Duration::from_secs(2)));
    assert_eq!(loc.client_body_timeout, Some(Duration::from_millis(500)));
    assert_eq!(server.client_body_timeout, Some(Duration::from_secs(90)));
    let e = errors(
        r#"proxy_send_timeout = "soon"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
client_body_timeout = "1x"
"#,
    );
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].starts_with("t.toml:1:22: "), "{}", e[0]);
    assert!(e[0].contains("invalid time \"soon\""), "{}", e[0]);
    assert!(e[1].starts_with("t.toml:5:23: "), "{}", e[1]);
}

#[test]
fn operating_keys_are_validated_where_they_are() {
    let e = errors(
        r#"watch = "yes"
error_log_level = "debug"
log_format_escape = "xml"
client_max_body_size = "1t"
[admin]
listen = "nowhere"
port = 1
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
[[servers.locations]]
path = "/"
keepalive_timeout = "5s"
"#,
    );
    assert_eq!(e.len(), 7, "{e:?}");
    assert!(e[0].starts_with("t.toml:1:9: \"watch\" must be true or false"));
    assert!(e[1].contains("invalid error_log_level \"debug\""));
    assert!(e[2].contains("invalid log_format_escape \"xml\""));
    assert!(e[3].contains("client_max_body_size"));
    assert!(e[4].starts_with("t.toml:6:"), "{}", e[4]);
    assert!(e[5].contains("unknown key \"port\" in [admin]"));
    assert!(e[6].contains("unknown key \"keepalive_timeout\" in [[servers.locations]]"));
}

/// Every `limit_conn` problem, located (nginx's wording where it has one).
#[test]
fn limit_conn_errors_are_located() {
    let text = r#"worker_connections = 0
limit_conn_status = 399
limit_conn_log_level = "debug"
limit_conn_dry_run = "yes"
limit_conn = "addr"
[zones.req]
key = "$binary_remote_addr"
size = "1m"
[conn_zones.req]
key = "$binary_remote_addr"
size = "1m"
[conn_zones.small]
key = "$nope"
size = "16k"
rate = "1r/s"
[conn_zones.nokey]
size = "1m"
[conn_zones.addr]
key = "$binary_remote_addr"
size = "1m"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
limit_conn = [{ zone = "addr", conn = 0 }, { zone = "addr", conn = 65536 }]
[[servers.locations]]
path = "/a"
limit_conn = [{ zone = "addr", conn = 1 }, { zone = "addr", conn = 2 }]
[[servers.locations]]
path = "/b"
limit_conn = [{ zone = "missing", conn = 1 }, { zone = "req", conn = 1 }]
[[servers.locations]]
path = "/c"
limit_conn = [{ conn = 1 }, { zone = "addr" }, { zone = "addr", conn = "1", burst = 2 }]
"#;
    let want = [
        "t.toml:1:22: \"worker_connections\": value must be between 1 and 1000000",
        "t.toml:2:21: \"limit_conn_status\": value must be between 400 and 599",
        "t.toml:3:24: invalid limit_conn_log_level \"debug\" (expected info, notice, warn or error)",
        "t.toml:4:22: \"limit_conn_dry_run\" must be true or false, found a string",
        "t.toml:5:14: \"limit_conn\" must be a table or a list of tables, found a string",
        "t.toml:9:13: the shared memory zone \"req\" is already declared for a different use (a [zones] table, for limit_req, has this name)",
        "t.toml:13:8: unknown \"nope\" variable",
        "t.toml:14:8: zone \"small\" is too small: size \"16k\" is below the minimum of 32k",
        "t.toml:15:1: unknown key \"rate\" in [conn_zones.small] (expected one of: key, size)",
        "t.toml:16:13: [conn_zones.nokey] must have a \"key\"",
        "t.toml:24:39: invalid number of connections \"0\"",
        "t.toml:24:68: connection limit must be less 65536",
        "t.toml:27:53: \"limit_conn\" directive is duplicate: zone \"addr\" is already limited at this level",
        "t.toml:30:24: unknown limit_conn_zone \"missing\"",
        "t.toml:30:56: unknown limit_conn_zone \"req\" (\"req\" is a [zones] table, for limit_req; limit_conn needs a [conn_zones] table)",
        "t.toml:33:15: \"limit_conn\" must have a \"zone\"",
        "t.toml:33:29: \"limit_conn\" must have \"conn\": how many requests of one key may be processed at once",
        "t.toml:33:72: \"conn\" must be an integer, found a string",
        "t.toml:33:77: unknown key \"burst\" in limit_conn (expected one of: zone, conn)",
    ];
    let got = errors(text);
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (got, want) in got.iter().zip(want) {
        assert_eq!(got, want);
    }
}

/// nginx's inheritance: a level with its own `limit_conn` list hides its
/// parent's; the status, log level and dry run are inherited one by one.
#[test]
fn limit_conn_inherits_like_nginx() {
    let spec = ok(r#"limit_conn = { zone = "addr", conn = 10 }
limit_conn_status = 429
worker_connections = 5
[conn_zones.addr]
key = "$binary_remote_addr"
size = "1m"
[conn_zones.server]
key = "$server_name"
size = "32k"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
limit_conn_log_level = "warn"
[[servers.locations]]
path = "/own"
limit_conn = [{ zone = "server", conn = 100 }, { zone = "addr", conn = 1 }]
limit_conn_dry_run = true
[[servers.locations]]
path = "/inherited"
"#);
    assert_eq!(spec.conn_zones.len(), 2);
    assert_eq!(spec.conn_zones[1].size, 32 * 1024);
    assert_eq!(spec.ops.worker_connections, Some(5));
    let server = spec.servers[0].level.inherit(&spec.http);
    let own = spec.servers[0].locations[0].level.inherit(&server);
    let inherited = spec.servers[0].locations[1].level.inherit(&server);
    assert_eq!(
        own.limit_conn.as_deref(),
        Some(
            &[
                ConnLimitSpec { zone: 1, conn: 100 },
                ConnLimitSpec { zone: 0, conn: 1 }
            ][..]
        )
    );
    assert_eq!(
        inherited.limit_conn.as_deref(),
        Some(&[ConnLimitSpec { zone: 0, conn: 10 }][..])
    );
    for l in [&own, &inherited] {
        assert_eq!(l.conn_status, Some(429));
        assert_eq!(l.conn_log_level, Some(Severity::Warn));
    }
    assert_eq!(
        (own.conn_dry_run, inherited.conn_dry_run),
        (Some(true), None)
    );
    // limit_req's settings are apart.
    assert_eq!(own.status, None);

    let rt = crate::config::Config::compile(spec, None).unwrap();
    assert_eq!(rt.worker_connections(), 5);
    let loc = rt.servers[0].locations.find("/own").unwrap();
    assert_eq!(loc.conn_limits.len(), 2);
    assert_eq!((loc.conn_status, loc.conn_dry_run), (429, true));
    let other = rt.servers[0].locations.find("/").unwrap();
    assert_eq!(
        other.conn_limits[0].conn, 10,
        "the implicit / location inherits too"
    );
}

#[test]
fn limit_conn_shapes_are_checked() {
    let text = r#"limit_conn = [1]
[conn_zones.nosize]
key = "$binary_remote_addr"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
worker_connections = 5
"#;
    let e = errors(text);
    assert_eq!(e.len(), 3, "{e:#?}");
    assert_eq!(
        e[0],
        "t.toml:1:15: \"limit_conn\" must be a table, found an integer"
    );
    assert_eq!(
        e[1],
        "t.toml:2:13: [conn_zones.nosize] must have a \"size\" (e.g. \"10m\")"
    );
    // (The list of allowed keys that follows grows with the configuration.)
    assert!(
        e[2].starts_with("t.toml:7:1: unknown key \"worker_connections\" in [[servers]] (expected one of: listen, "),
        "{}",
        e[2]
    );
    assert_eq!(
        errors(
            "conn_zones = 1\n[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\n"
        ),
        ["t.toml:1:14: \"conn_zones\" must be a table, found an integer"]
    );
}

/// nginx keeps a conn zone across a reload when its name and size stay,
/// and refuses a new key for it.
#[test]
fn a_reload_keeps_conn_zones_and_refuses_a_new_key() {
    let conf = |key: &str, size: &str| {
        ok(&format!(
            "[conn_zones.addr]\nkey = \"{key}\"\nsize = \"{size}\"\n[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\nlimit_conn = {{ zone = \"addr\", conn = 1 }}\n"
        ))
    };
    use crate::config::{CompileError, Config};
    let first = Config::compile(conf("$binary_remote_addr", "1m"), None).unwrap();
    let same = Config::compile(conf("$binary_remote_addr", "1m"), Some(&first)).unwrap();
    assert!(Arc::ptr_eq(&first.conn_zones[0], &same.conn_zones[0]));
    let resized = Config::compile(conf("$remote_addr", "2m"), Some(&first)).unwrap();
    assert!(!Arc::ptr_eq(&first.conn_zones[0], &resized.conn_zones[0]));
    match Config::compile(conf("$remote_addr", "1m"), Some(&first)) {
        Err(e @ CompileError::ConnZoneKeyChanged { .. }) => assert_eq!(
            e.to_string(),
            "limit_conn_zone \"addr\" uses the \"$remote_addr\" key while previously it used the \"$binary_remote_addr\" key"
        ),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a new key for a kept zone must be refused"),
    }
}

/// nginx's request-head directives at the top level and per server; not in
/// locations (nginx reads them before it knows the location).
#[test]
fn request_head_directives() {
    let spec = ok(r#"
underscores_in_headers = true
large_client_header_buffers = "8 16k"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
ignore_invalid_headers = false
underscores_in_headers = false
"#);
    assert_eq!(spec.http.underscores_in_headers, Some(true));
    let server = spec.servers[0].level.inherit(&spec.http);
    assert_eq!(server.underscores_in_headers, Some(false));
    assert_eq!(server.ignore_invalid_headers, Some(false));
    assert_eq!(server.large_client_header_buffers, Some((8, 16 << 10)));

    let e = errors(
        r#"underscores_in_headers = "yes"
large_client_header_buffers = "4"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
large_client_header_buffers = "0 8k"
[[servers.locations]]
path = "/"
ignore_invalid_headers = false
"#,
    );
    assert_eq!(e.len(), 4, "{e:#?}");
    assert!(
        e[0].contains(":1:26:") && e[0].contains("true or false"),
        "{}",
        e[0]
    );
    assert!(
        e[1].contains(":2:31:") && e[1].contains("NUMBER SIZE"),
        "{}",
        e[1]
    );
    assert!(
        e[2].contains(":6:31:") && e[2].contains("between 1 and 64"),
        "{}",
        e[2]
    );
    assert!(
        e[3].contains(":9:1:") && e[3].contains("unknown key \"ignore_invalid_headers\""),
        "{}",
        e[3]
    );
}
