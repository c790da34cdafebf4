//! The translation, rule by rule: nginx text in, TOML and reports out.
//! Every translation here also went through the in-process check
//! ([`super::import`] fails otherwise).

use super::{ImportError, Kind, Options, Report, import};

pub(super) struct Out {
    pub text: String,
    pub reports: Vec<Report>,
    pub toml: toml::Table,
}

impl Out {
    /// The report about the directive starting with `directive`.
    pub fn report(&self, directive: &str) -> &Report {
        self.reports
            .iter()
            .find(|r| r.directive.starts_with(directive))
            .unwrap_or_else(|| panic!("no report of {directive:?}: {:#?}", self.reports))
    }

    pub fn server(&self, i: usize) -> &toml::Table {
        self.toml["servers"][i].as_table().unwrap()
    }

    pub fn location(&self, s: usize, l: usize) -> &toml::Table {
        self.server(s)["locations"][l].as_table().unwrap()
    }
}

pub(super) fn run_with(conf: &str, opts: Options) -> Out {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    let t = import(&path, &opts).unwrap_or_else(|e| panic!("{e}"));
    let toml = toml::from_str(&t.toml).unwrap_or_else(|e| panic!("{e}\n{}", t.toml));
    Out {
        text: t.toml,
        reports: t.reports,
        toml,
    }
}

pub(super) fn run(conf: &str) -> Out {
    run_with(conf, Options::default())
}

/// `http { … }` around a server.
pub(super) fn http(body: &str) -> String {
    format!("events {{}}\nhttp {{\n{body}\n}}\n")
}

const SEED: &str = include_str!("../../config/nginx/seed.conf");

#[test]
fn the_seed_translates_to_the_example() {
    let o = run_with(
        SEED,
        Options {
            backend: Some("http://127.0.0.1:7070".into()),
            ..Options::default()
        },
    );
    let z = &o.toml["zones"]["z_delay"];
    assert_eq!(z["key"].as_str(), Some("$binary_remote_addr"));
    assert_eq!(
        (z["size"].as_str(), z["rate"].as_str()),
        (Some("1m"), Some("2r/s"))
    );
    assert_eq!(o.toml["limit_req_status"].as_integer(), Some(429));
    assert_eq!(o.server(0)["listen"].as_str(), Some("127.0.0.1:7060"));
    let lr = |i: usize| o.location(0, i)["limit_req"].to_string();
    assert_eq!(lr(0), "{ zone = \"z_plain\" }");
    assert_eq!(lr(1), "{ zone = \"z_burst\", burst = 5 }");
    assert_eq!(lr(2), "{ zone = \"z_nodelay\", burst = 5, nodelay = true }");
    assert_eq!(lr(3), "{ zone = \"z_delay\", burst = 5, delay = 2 }");
    assert_eq!(
        o.location(0, 3)["proxy_pass"].as_str(),
        Some("http://127.0.0.1:7070")
    );
    let page = &o.server(0)["error_pages"]["429"];
    assert_eq!(page["body"].as_str(), Some("too many requests\n"));
    assert_eq!(page["headers"]["Retry-After"].as_str(), Some("1"));
    assert!(
        page.get("status").is_none(),
        "the code's own status is not written"
    );
    assert!(
        o.text
            .contains("# nginx.conf:41: limit_req zone=z_burst burst=5;\nlimit_req = ")
    );
    assert!(
        o.text
            .contains("sluice can compute it: \"Retry-After\" = \"$retry_after\"")
    );
    assert_eq!(o.report("try_files").kind, Kind::NotTranslated);
    assert_eq!(o.report("root html").kind, Kind::NotTranslated);
    assert_eq!(o.report("user root").kind, Kind::Ignored);
    // The header lists them too.
    assert!(
        o.text
            .contains("#   nginx.conf:38: root html (sluice serves no files)"),
        "{}",
        o.text
    );
}

#[test]
fn locations_of_every_modifier_and_nested_ones_flattened() {
    let o = run(&http(
        "limit_req_zone $binary_remote_addr zone=z:1m rate=30r/m;
         server { listen 127.0.0.1:8080;
           location = /exact { return 204; }
           location ^~ /static/ { proxy_pass http://127.0.0.1:9000; }
           location ~* \\.(png|jpg)$ { proxy_pass http://127.0.0.1:9001; }
           location /api/ {
             limit_req zone=z burst=20 nodelay;
             proxy_read_timeout 5s;
             proxy_pass http://127.0.0.1:9002/v1/;
             location /api/slow/ { proxy_read_timeout 1m; proxy_pass http://127.0.0.1:9002; }
           }
         }",
    ));
    let paths: Vec<&str> = (0..5)
        .map(|i| o.location(0, i)["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "= /exact",
            "^~ /static/",
            "~* \\.(png|jpg)$",
            "/api/",
            "/api/slow/"
        ]
    );
    assert_eq!(o.toml["zones"]["z"]["rate"].as_str(), Some("30r/m"));
    assert_eq!(o.location(0, 0)["return"].to_string(), "{ status = 204 }");
    assert_eq!(
        o.location(0, 3)["proxy_pass"].as_str(),
        Some("http://127.0.0.1:9002/v1/")
    );
    // The nested location: its own timeout, its parent's limit.
    let slow = o.location(0, 4);
    assert_eq!(slow["proxy_read_timeout"].as_str(), Some("1m"));
    assert_eq!(slow["limit_req"]["burst"].as_integer(), Some(20));
    assert!(o.text.contains("(nested: inherits its parent's settings)"));
    // No location /: without --backend nothing is added.
    assert_eq!(o.server(0)["locations"].as_array().unwrap().len(), 5);
}

#[test]
fn a_pcre_only_regex_is_reported() {
    let o = run(&http(
        "server { listen 127.0.0.1:8080; location ~ ^/(?!admin) { return 200; } location / { return 200; } }",
    ));
    assert!(o.report("location ~").why.contains("PCRE"));
    assert_eq!(o.server(0)["locations"].as_array().unwrap().len(), 1);
}

#[test]
fn files_go_to_the_backend_or_404_and_other_gateways_to_502() {
    let conf = http(
        "server { listen 127.0.0.1:8080; root /srv;
           location /files/ { try_files $uri =404; }
           location ~ \\.php$ { fastcgi_pass 127.0.0.1:9000; } }",
    );
    let o = run(&conf);
    assert_eq!(o.location(0, 0)["return"].to_string(), "{ status = 404 }");
    assert_eq!(o.location(0, 1)["return"].to_string(), "{ status = 502 }");
    assert_eq!(o.report("fastcgi_pass").kind, Kind::NotTranslated);
    let o = run_with(
        &conf,
        Options {
            backend: Some("http://127.0.0.1:9999".into()),
            ..Options::default()
        },
    );
    assert_eq!(
        o.location(0, 0)["proxy_pass"].as_str(),
        Some("http://127.0.0.1:9999")
    );
    // What no location matches came from files too.
    assert_eq!(o.location(0, 2)["path"].as_str(), Some("/"));
    assert_eq!(
        o.location(0, 2)["proxy_pass"].as_str(),
        Some("http://127.0.0.1:9999")
    );
}

#[test]
fn one_server_per_listen_and_tls_where_any_server_says_ssl() {
    let o = run(&http(
        "ssl_certificate /etc/ssl/site.pem; ssl_certificate_key /etc/ssl/site.key;
         ssl_protocols TLSv1 TLSv1.2 TLSv1.3;
         server { listen 80; listen 443 ssl http2 default_server; server_name example.com *.example.com;
                  location / { proxy_pass http://127.0.0.1:8080; } }
         server { listen 443; server_name other.example; location / { return 200 ok; } }
         server { location / { return 200; } }",
    ));
    let listens: Vec<&str> = (0..4)
        .map(|i| o.server(i)["listen"].as_str().unwrap())
        .collect();
    assert_eq!(
        listens,
        [
            "0.0.0.0:80",
            "0.0.0.0:443 ssl http2 default_server",
            "0.0.0.0:443 ssl",
            "0.0.0.0:80"
        ]
    );
    assert!(
        o.server(0).get("ssl_certificate").is_none(),
        "plain: no certificate"
    );
    for i in [1, 2] {
        assert_eq!(
            o.server(i)["ssl_certificate"].as_str(),
            Some("/etc/ssl/site.pem")
        );
        assert_eq!(
            o.server(i)["ssl_protocols"].as_str(),
            Some("TLSv1.2 TLSv1.3")
        );
    }
    assert_eq!(
        o.server(0)["server_name"].as_str(),
        Some("example.com *.example.com")
    );
    assert_eq!(
        o.server(1)["locations"][0]["proxy_pass"].as_str(),
        Some("http://127.0.0.1:8080")
    );
    assert!(o.report("ssl_protocols").why.contains("TLSv1 left out"));
    assert!(o.text.contains("(no listen: nginx's default *:80"));
}

#[test]
fn upstream_groups() {
    let o = run(&http(
        "upstream backend {
           hash $request_uri consistent;
           server 127.0.0.1:8081 weight=3 max_fails=2 fail_timeout=30s;
           server 127.0.0.1:8082;
           server 127.0.0.1:8084 down max_conns=10;
           server unix:/run/app.sock;
           keepalive 32;
           zone backend 64k;
         }
         upstream lc { least_conn; server 127.0.0.1:9000; server 10.0.0.1 backup; }
         server { listen 127.0.0.1:8080; location / { proxy_pass http://backend; }
                  proxy_next_upstream error timeout http_502 http_404;
                  proxy_next_upstream_tries 3; proxy_next_upstream_timeout 10s; }",
    ));
    let b = &o.toml["upstreams"]["backend"];
    let servers: Vec<String> = b["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        servers,
        [
            "{ address = \"127.0.0.1:8081\", weight = 3, max_fails = 2, fail_timeout = \"30s\" }",
            "{ address = \"127.0.0.1:8082\" }",
            "{ address = \"127.0.0.1:8084\", down = true }",
        ]
    );
    assert_eq!(b["balance"].as_str(), Some("hash"));
    assert_eq!(b["hash"].as_str(), Some("$request_uri"));
    assert_eq!(b["consistent"].as_bool(), Some(true));
    assert_eq!(b["keepalive"].as_integer(), Some(32));
    assert_eq!(
        o.toml["upstreams"]["lc"]["balance"].as_str(),
        Some("least_conn")
    );
    // (nginx takes no backup in a hash group; a least_conn one may have one.)
    assert_eq!(
        o.toml["upstreams"]["lc"]["servers"][1].to_string(),
        "{ address = \"10.0.0.1:80\", backup = true }"
    );
    assert!(
        o.report("server 127.0.0.1:8084")
            .why
            .contains("max_conns=10")
    );
    assert_eq!(o.report("server unix:").kind, Kind::NotTranslated);
    assert_eq!(o.report("zone backend").kind, Kind::Ignored);
    let s = o.server(0);
    assert_eq!(
        s["proxy_next_upstream"].to_string(),
        "[\"error\", \"timeout\", \"http_502\"]"
    );
    assert_eq!(s["proxy_next_upstream_tries"].as_integer(), Some(3));
    assert_eq!(s["proxy_next_upstream_timeout"].as_str(), Some("10s"));
    assert!(
        o.report("proxy_next_upstream error")
            .why
            .contains("http_404")
    );
    assert_eq!(
        s["locations"][0]["proxy_pass"].as_str(),
        Some("http://backend")
    );
}

#[test]
fn headers_at_the_level_they_are_written() {
    let o = run(&http(
        "map $http_upgrade $connection_upgrade { default upgrade; '' close; }
         map $request_id $custom { default a; }
         proxy_set_header Host $host;
         proxy_set_header X-Real-IP $remote_addr;
         proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
         add_header X-Frame-Options DENY;
         server { listen 127.0.0.1:8080;
           add_header X-Id $remote_addr always;
           proxy_set_header X-Request-Id $request_id;
           add_header X-Custom $custom;
           location /ws { proxy_set_header Upgrade $http_upgrade;
                          proxy_set_header Connection $connection_upgrade;
                          proxy_set_header Accept-Encoding \"\";
                          proxy_hide_header X-Powered-By; proxy_hide_header Server;
                          proxy_pass_header Date;
                          proxy_pass http://127.0.0.1:9000; } }",
    ));
    assert_eq!(
        o.toml["proxy_set_header"].to_string(),
        "{ Host = \"$host\", X-Real-IP = \"$remote_addr\", X-Forwarded-For = \"$proxy_add_x_forwarded_for\" }"
    );
    assert_eq!(
        o.toml["add_header"].to_string(),
        "{ name = \"X-Frame-Options\", value = \"DENY\" }"
    );
    assert_eq!(
        o.server(0)["add_header"].to_string(),
        "{ name = \"X-Id\", value = \"$remote_addr\", always = true }"
    );
    let id = o.report("proxy_set_header X-Request-Id");
    assert_eq!(id.kind, Kind::NotTranslated);
    assert!(
        id.why.contains("$request_id is not a variable sluice has"),
        "{}",
        id.why
    );
    assert!(o.server(0).get("proxy_set_header").is_none());
    let custom = o.report("add_header X-Custom");
    assert!(
        custom
            .why
            .contains("$custom is made by map at nginx.conf:4"),
        "{}",
        custom.why
    );
    let ws = o.location(0, 0);
    assert_eq!(
        ws["proxy_set_header"].to_string(),
        "{ Accept-Encoding = \"\" }"
    );
    assert_eq!(
        ws["proxy_hide_header"].to_string(),
        "[\"X-Powered-By\", \"Server\"]"
    );
    assert_eq!(ws["proxy_pass_header"].as_str(), Some("Date"));
    assert_eq!(o.report("proxy_set_header Upgrade").kind, Kind::Ignored);
    assert_eq!(o.report("proxy_set_header Connection").kind, Kind::Ignored);
    // The WebSocket idiom's map translates (sluice upgrades on its own).
    assert_eq!(
        o.toml["maps"]["connection_upgrade"]["source"].as_str(),
        Some("$http_upgrade")
    );
}

#[test]
fn a_zone_key_sluice_lacks_limits_by_address_and_says_so() {
    let o = run(&http(
        "geo $limited { default 1; 10.0.0.0/8 0; }
         map $request_id $limit_key { 0 ''; 1 $binary_remote_addr; }
         limit_req_zone $limit_key zone=api:10m rate=10r/s;
         limit_conn_zone $binary_remote_addr zone=addr:1m;
         server { listen 127.0.0.1:8080; limit_conn addr 10; limit_conn_status 429;
                  location / { limit_req zone=api burst=5; return 200; } }",
    ));
    assert_eq!(
        o.toml["zones"]["api"]["key"].as_str(),
        Some("$binary_remote_addr")
    );
    let r = o.report("limit_req_zone");
    assert_eq!(r.kind, Kind::Partial);
    assert!(
        r.why.contains("$limit_key is made by map at nginx.conf:4"),
        "{}",
        r.why
    );
    assert_eq!(o.toml["conn_zones"]["addr"]["size"].as_str(), Some("1m"));
    assert_eq!(
        o.server(0)["limit_conn"].to_string(),
        "{ zone = \"addr\", conn = 10 }"
    );
    assert_eq!(o.server(0)["limit_conn_status"].as_integer(), Some(429));
}

#[test]
fn logs_formats_and_paths() {
    let o = run_with(
        &http(
            "log_format main escape=json '{\"addr\":\"$remote_addr\",'
                                         '\"gz\":\"$pipe\"}';
             access_log logs/access.log main buffer=32k;
             server { listen 127.0.0.1:8080; access_log off;
                      location / { access_log /dev/stdout; return 200; } }",
        ),
        Options {
            prefix: Some("/opt/nginx".into()),
            ..Options::default()
        },
    );
    assert_eq!(
        o.toml["log_format"].as_str(),
        Some("{\"addr\":\"$remote_addr\",\"gz\":\"-\"}")
    );
    assert_eq!(o.toml["log_format_escape"].as_str(), Some("json"));
    assert_eq!(
        o.toml["access_log"].as_str(),
        Some("/opt/nginx/logs/access.log")
    );
    assert_eq!(o.server(0)["access_log"].as_str(), Some("off"));
    assert_eq!(o.location(0, 0)["access_log"].as_str(), Some("stdout"));
    assert!(o.report("log_format main").why.contains("$pipe"));
    assert_eq!(o.report("access_log logs/access.log").kind, Kind::Partial);
    // Without a format, nginx writes combined: so does the translation.
    let o = run(&http(
        "access_log /var/log/a.log; server { listen 127.0.0.1:8080; }",
    ));
    assert!(
        o.toml["log_format"]
            .as_str()
            .unwrap()
            .ends_with("\"$http_user_agent\"")
    );
}

#[test]
fn real_ip_from_its_three_directives() {
    let o = run(&http(
        "set_real_ip_from 10.0.0.0/8; set_real_ip_from 192.168.1.1;
         real_ip_header X-Forwarded-For; real_ip_recursive on;
         server { listen 127.0.0.1:8080; real_ip_header X-Real-IP; location / { return 200; } }",
    ));
    assert_eq!(
        o.toml["real_ip"].to_string(),
        "{ from = [\"10.0.0.0/8\", \"192.168.1.1\"], header = \"X-Forwarded-For\", recursive = true }"
    );
    // The server's header; the rest from http, as nginx inherits each.
    assert_eq!(
        o.server(0)["real_ip"].to_string(),
        "{ from = [\"10.0.0.0/8\", \"192.168.1.1\"], header = \"X-Real-IP\", recursive = true }"
    );
}

#[test]
fn timeouts_sizes_and_switches() {
    let o = run(&http(
        "keepalive_timeout 65 60; send_timeout 1m30s; client_header_timeout 1w;
         client_max_body_size 10m; client_body_buffer_size 16k; proxy_request_buffering off;
         limit_req_log_level warn; limit_req_dry_run on;
         server { listen 127.0.0.1:8080; proxy_connect_timeout 500ms;
                  location / { send_timeout 5s; client_body_timeout 10; return 200; } }",
    ));
    assert_eq!(o.toml["keepalive_timeout"].as_str(), Some("65"));
    assert_eq!(o.toml["send_timeout"].as_str(), Some("1m30s"));
    assert_eq!(o.toml["client_header_timeout"].as_str(), Some("604800s"));
    assert_eq!(o.toml["client_max_body_size"].as_str(), Some("10m"));
    assert_eq!(o.toml["client_body_buffer_size"].as_str(), Some("16k"));
    assert_eq!(o.toml["proxy_request_buffering"].as_bool(), Some(false));
    assert_eq!(o.toml["limit_req_log_level"].as_str(), Some("warn"));
    assert_eq!(o.toml["limit_req_dry_run"].as_bool(), Some(true));
    assert_eq!(o.server(0)["proxy_connect_timeout"].as_str(), Some("500ms"));
    assert_eq!(o.location(0, 0)["client_body_timeout"].as_str(), Some("10"));
    assert_eq!(o.report("keepalive_timeout").kind, Kind::Partial);
    assert_eq!(o.report("send_timeout 5s").kind, Kind::NotTranslated);
}

#[test]
fn returns_and_a_server_level_redirect() {
    let o = run(&http(
        "server { listen 127.0.0.1:8080; return 301 https://$host$request_uri;
                  location /never { return 200; } }
         server { listen 127.0.0.1:8081;
                  location /go { return https://example.com/; }
                  location /text { return 200 \"hello $remote_addr\\n\"; } }",
    ));
    let only = o.server(0)["locations"].as_array().unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(
        only[0]["return"].to_string(),
        "{ status = 301, headers = { Location = \"https://$host$request_uri\" } }"
    );
    assert_eq!(o.report("server").kind, Kind::Partial);
    assert_eq!(
        o.location(1, 0)["return"].to_string(),
        "{ status = 302, headers = { Location = \"https://example.com/\" } }"
    );
    assert_eq!(
        o.location(1, 1)["return"]["body"].as_str(),
        Some("hello $remote_addr\n")
    );
}

#[test]
fn other_modules_and_process_directives_are_listed() {
    let o = run(
        "user nginx; worker_processes auto; load_module modules/x.so;
         events { worker_connections 1024; use epoll; }
         http { sendfile on; gzip_static on; include mime.types;
                server { listen 127.0.0.1:8080;
                  location / { if ($request_method = POST) { return 405; } rewrite ^/a /b; return 200; } } }",
    );
    assert_eq!(o.toml["worker_connections"].as_integer(), Some(1024));
    for (d, kind) in [
        ("user", Kind::Ignored),
        ("worker_processes", Kind::Ignored),
        ("load_module", Kind::NotTranslated),
        ("use epoll", Kind::Ignored),
        ("sendfile", Kind::Ignored),
        ("gzip_static", Kind::NotTranslated),
        ("include mime.types", Kind::Ignored),
        ("if", Kind::NotTranslated),
        ("rewrite", Kind::NotTranslated),
    ] {
        assert_eq!(o.report(d).kind, kind, "{d}");
    }
    let header_end = o.text.find("\n\n").unwrap();
    let header = &o.text[..header_end];
    assert!(
        header.contains("#   nginx.conf:5: if ($request_method = POST)"),
        "{header}"
    );
    assert!(
        header.contains("Ignored: about nginx's own processes"),
        "{header}"
    );
    assert_eq!(
        o.report("if").line(),
        format!(
            "{}: not translated: if ($request_method = POST) (sluice has no conditions)",
            o.report("if").at
        )
    );
}

#[test]
fn bad_input_and_bad_options_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nginx.conf");
    std::fs::write(&path, "http {\n").unwrap();
    let e = import(&path, &Options::default()).unwrap_err();
    assert!(matches!(e, ImportError::Read(_)), "{e}");
    assert!(
        e.to_string()
            .ends_with("nginx.conf:1: unexpected end of file, expecting \"}\""),
        "{e}"
    );
    std::fs::write(&path, "http {}\n").unwrap();
    let bad = Options {
        backend: Some("ftp://x".into()),
        ..Options::default()
    };
    assert!(matches!(import(&path, &bad), Err(ImportError::Usage(_))));
}

#[test]
fn a_translation_that_does_not_check_is_an_internal_error() {
    let e = super::check("[[servers]]\nlisten = \"nowhere\"\n").unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("internal: the translation does not check:"),
        "{text}"
    );
    assert!(text.contains("invalid listen address"), "{text}");
    // Keys of issue #16 not in the parser yet are not the translator's fault.
    let pending = "add_header = { name = \"a\", value = \"b\" }\n[[servers]]\n\
                   listen = \"127.0.0.1:1\"\n[[servers.locations]]\npath = \"/\"\n\
                   return = { status = 200 }\n";
    assert!(super::check(pending).is_ok());
}

#[test]
fn ipv6_beside_ipv4_on_one_port() {
    let o = run(&http(
        "server { listen 80; listen [::]:80; location / { return 200; } }
         server { listen [::]:80; server_name v6only.example; location / { return 200; } }
         server { listen [::]:8080; location / { return 200; } }",
    ));
    let listens: Vec<&str> = (0..3)
        .map(|i| o.server(i)["listen"].as_str().unwrap())
        .collect();
    // sluice's [::] listener is dual-stack: beside 0.0.0.0:80 it would not bind.
    assert_eq!(listens, ["0.0.0.0:80", "0.0.0.0:80", "[::]:8080"]);
    assert!(
        o.report("server")
            .why
            .contains("IPv6 clients are not served")
    );
}

#[test]
fn deny_all_is_a_403_and_error_log_is_translated_at_each_level() {
    let o = run("error_log stderr warn; events {}
         http { error_log /var/log/e.log;
                server { listen 127.0.0.1:8080; error_log /var/log/s.log;
                  error_log syslog:server=unix:/dev/log,facility=local1 notice;
                  location /admin { allow 10.0.0.0/8; deny all; return 200; }
                  location ~ /\\.ht { deny all; error_log syslog:server=10.0.0.1:5140,tag=ht debug; } } }");
    assert_eq!(o.toml["error_log"].as_str(), Some("/var/log/e.log error"));
    assert!(o.toml.get("error_log_level").is_none());
    assert_eq!(
        o.server(0)["error_log"].to_string(),
        "[\"/var/log/s.log error\", \"syslog:server=unix:/dev/log,facility=local1,tag=nginx notice\"]"
    );
    assert_eq!(
        o.location(0, 1)["error_log"].as_str(),
        Some("syslog:server=10.0.0.1:5140,tag=ht debug")
    );
    assert_eq!(o.location(0, 1)["return"].to_string(), "{ status = 403 }");
    assert_eq!(
        o.location(0, 0)["access"].to_string(),
        "[\"allow 10.0.0.0/8\", \"deny all\"]",
        "beside allow"
    );
    // The main context's line is the process's; the http block's is kept.
    assert!(
        o.report("error_log stderr warn")
            .why
            .contains("the http block's is kept")
    );
    // Reports come in file order.
    let lines: Vec<u32> = o.reports.iter().map(|r| r.line_number()).collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
}

#[test]
fn ssl_on_unusable_listens_and_notes() {
    let o = run(&http(
        "server { listen 127.0.0.1:8443; ssl on; ssl_certificate c.pem; ssl_certificate_key c.key;
                  access_log logs/a.log;
                  location / { proxy_pass http://unix:/run/app.sock:/; } }
         server { listen unix:/run/nginx.sock; location / { return 200; } }",
    ));
    assert_eq!(o.server(0)["listen"].as_str(), Some("127.0.0.1:8443 ssl"));
    assert!(
        o.server(0)["ssl_certificate"]
            .as_str()
            .unwrap()
            .ends_with("/c.pem")
    );
    assert_eq!(o.location(0, 0)["return"].to_string(), "{ status = 502 }");
    assert_eq!(
        o.toml["servers"].as_array().unwrap().len(),
        1,
        "the second is left out"
    );
    assert!(o.report("server").why.contains("no listen sluice can use"));
    assert!(
        o.text
            .contains("#   Relative paths of logs, pid and temporary files"),
        "{}",
        o.text
    );
}
