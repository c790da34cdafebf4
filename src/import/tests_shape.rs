//! What kind of file is imported (a whole nginx.conf, a site file, or
//! one nginx itself refuses), and the translations of issue #29: a
//! header set twice, `expires`, `server_tokens`.

use super::tests::{http, run};
use super::{ImportError, Kind, Options, import};

/// `import` of `text` as FILE in a temporary directory.
fn import_text(file: &str, text: &str) -> Result<super::Translation, ImportError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file);
    std::fs::write(&path, text).unwrap();
    import(&path, &Options::default())
}

#[test]
fn a_site_file_is_read_as_the_contents_of_http() {
    let site = "upstream app { server 127.0.0.1:9000; }
server {
    listen 127.0.0.1:8080 default_server;
    location / { proxy_pass http://app; }
}
";
    let t = import_text("default", site).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.notices.len(), 1, "{:?}", t.notices);
    assert!(
        t.notices[0].ends_with("/default: read as the contents of an http block (a site file)"),
        "{:?}",
        t.notices
    );
    assert!(
        t.toml
            .contains("listen = \"127.0.0.1:8080 default_server\"")
    );
    assert!(t.toml.contains("as nginx reads a site file"), "{}", t.toml);
    // A whole file says nothing of the kind.
    let whole = import_text("nginx.conf", &http(site)).unwrap();
    assert!(whole.notices.is_empty());
}

#[test]
fn what_nginx_refuses_or_leaves_nothing_to_listen_on_is_a_user_error() {
    let cases = [
        (
            "http { server { listen 127.0.0.1:8080; } }\n",
            "nginx.conf: no \"events\" section in configuration",
        ),
        (
            "events {}\nserver { listen 80; }\n",
            "nginx.conf:2: \"server\" directive is not allowed here",
        ),
        (
            "worker_processes 1;\n",
            "nginx.conf: no \"http\" block and no \"server\" block",
        ),
        (
            "server {\n  listen unix:/run/nginx.sock;\n}\n",
            "nginx.conf:2: listen unix:/run/nginx.sock: sluice listens on TCP only; \
             no server is left for sluice to listen on",
        ),
        (
            "events {}\nhttp {\n  upstream a { server 127.0.0.1:1; }\n}\n",
            "nginx.conf:2: no \"server\" block: nothing for sluice to listen on",
        ),
    ];
    for (text, want) in cases {
        let e = match import_text("nginx.conf", text) {
            Err(e @ ImportError::Config(_)) => e.to_string(),
            other => panic!("{text}: {other:?}"),
        };
        assert!(e.contains(want), "{text}: {e}");
        assert!(!e.starts_with("internal"), "{e}");
    }
}

#[test]
fn a_header_set_twice_is_a_list() {
    let o = run(&http(
        "server { listen 127.0.0.1:8080;
           location / { proxy_pass http://127.0.0.1:9000;
             proxy_set_header X-A v1; proxy_set_header Host $host;
             proxy_set_header x-a $remote_addr; proxy_set_header X-A v3; } }",
    ));
    assert_eq!(
        o.location(0, 0)["proxy_set_header"].to_string(),
        "{ X-A = [\"v1\", \"$remote_addr\", \"v3\"], Host = \"$host\" }"
    );
}

#[test]
fn expires_is_add_header_with_nginx_values() {
    let o = run(&http(
        "expires epoch;
         server { listen 127.0.0.1:8080;
           add_header X-S s;
           location /static/ { expires 30d; proxy_pass http://127.0.0.1:9000; }
           location /max { expires max; add_header X-M m; proxy_pass http://127.0.0.1:9000; }
           location /off { expires off; proxy_pass http://127.0.0.1:9000; }
           location /at { expires @15h; proxy_pass http://127.0.0.1:9000; }
           location / { proxy_pass http://127.0.0.1:9000; } }",
    ));
    let add = |i: usize| o.location(0, i)["add_header"].to_string();
    // Its own expires; the server's add_header, as nginx inherits it.
    assert_eq!(
        add(0),
        "[{ name = \"X-S\", value = \"s\" }, { name = \"Cache-Control\", value = \"max-age=2592000\" }]"
    );
    assert_eq!(
        add(1),
        "[{ name = \"X-M\", value = \"m\" }, { name = \"Expires\", value = \"Thu, 31 Dec 2037 23:55:55 GMT\" }, \
         { name = \"Cache-Control\", value = \"max-age=315360000\" }]"
    );
    assert_eq!(
        add(2),
        "{ name = \"X-S\", value = \"s\" }",
        "off: no expires"
    );
    // The server's add_header gets http's expires (epoch).
    let server = o.server(0)["add_header"].to_string();
    assert!(server.contains("Thu, 01 Jan 1970 00:00:01 GMT"), "{server}");
    assert!(server.contains("no-cache"), "{server}");
    assert!(o.location(0, 4).get("add_header").is_none(), "inherited");
    assert_eq!(o.report("expires 30d").kind, Kind::Partial);
    assert!(o.report("expires 30d").why.contains("Expires date"));
    assert_eq!(o.report("expires @15h").kind, Kind::NotTranslated);
}

#[test]
fn server_tokens_is_ignored_since_sluice_sends_no_version() {
    let o = run(&http(
        "server_tokens off;
         server { listen 127.0.0.1:8080; location / { return 200; } }",
    ));
    let r = o.report("server_tokens off");
    assert_eq!(r.kind, Kind::Ignored);
    assert!(r.why.contains("no Server header"), "{r:?}");
}

#[test]
fn a_listen_host_name_is_kept_for_sluice_to_resolve() {
    let site = "server {\n  listen nginx.invalid:8080 default_server;\n  listen web.invalid;\n  \
                listen localhost:8081;\n  location / { return 200; }\n}\n";
    let t = import_text("default", site).unwrap_or_else(|e| panic!("{e}"));
    let toml: toml::Table = toml::from_str(&t.toml).unwrap();
    let listens: Vec<&str> = (0..3)
        .map(|i| toml["servers"][i]["listen"].as_str().unwrap())
        .collect();
    assert_eq!(
        listens,
        [
            "nginx.invalid:8080 default_server",
            "web.invalid:80",
            "127.0.0.1:8081"
        ]
    );
    // What this machine cannot resolve is said, and is no error.
    assert_eq!(t.notices.len(), 3, "{:?}", t.notices);
    assert!(
        t.notices[1].starts_with(
            "default:2: host not found in \"nginx.invalid:8080\" on this machine: sluice resolves it"
        ),
        "{:?}",
        t.notices
    );
    assert!(t.notices[2].starts_with("default:3: host not found in \"web.invalid:80\""));
}
