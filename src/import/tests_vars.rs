//! `map`, `geo`, `allow` and `deny`: what becomes `[maps]`, `[geos]` and
//! `access`, and what is reported.

use super::tests::{http, run};
use super::{ImportError, Kind, Options, import};

#[test]
fn maps_and_geos_become_tables_with_nginxs_edits_applied() {
    let o = run(&http(
        "geo $http_x_ip $net {
           default 1; ranges; proxy 10.0.0.0/8; proxy_recursive;
           127.0.0.1-127.0.0.9 a; 127.0.0.5-127.0.0.6 b; 127.0.0.5-127.0.0.6 c;
           192.168.0.0-192.168.0.255 x; delete 192.168.0.0-192.168.0.255;
         }
         map $http_host $by_host { hostnames; volatile; default $net; .example.com ex; \"~^(?<sub>[a-z]+)\\.test$\" t-$sub-$1; }
         map $by_host $key { default $binary_remote_addr; ex ''; }
         limit_req_zone $key zone=z:1m rate=1r/s;
         server { listen 127.0.0.1:8080; location / { limit_req zone=z; return 200; } }",
    ));
    let g = &o.toml["geos"]["net"];
    assert_eq!(g["source"].as_str(), Some("$http_x_ip"));
    assert_eq!(g["ranges"].as_bool(), Some(true));
    assert_eq!(g["proxy_recursive"].as_bool(), Some(true));
    // The same range twice: the later; a deleted one: gone.
    assert_eq!(
        g["networks"].to_string(),
        "{ \"127.0.0.1-127.0.0.9\" = \"a\", \"127.0.0.5-127.0.0.6\" = \"c\" }"
    );
    let m = &o.toml["maps"]["by_host"];
    assert_eq!(m["hostnames"].as_bool(), Some(true));
    assert_eq!(m["default"].as_str(), Some("$net"));
    assert_eq!(
        m["values"]["~^(?<sub>[a-z]+)\\.test$"].as_str(),
        Some("t-$sub-$1")
    );
    assert_eq!(o.toml["zones"]["z"]["key"].as_str(), Some("$key"));
    assert!(
        o.reports.iter().all(|r| !r.directive.starts_with("map")),
        "{:?}",
        o.reports
    );
}

#[test]
fn a_map_on_a_variable_sluice_lacks_is_reported_with_those_that_use_it() {
    let o = run(&http(
        "map $request_id $a { default x; }
         map $a $b { default y; }
         map $http_x $c { default $1; }
         map $http_x $d { \"~(?<n>.)\" $n; a \"\\\\~\"; }
         server { listen 127.0.0.1:8080; location / { add_header X-B $b; return 200; } }",
    ));
    assert_eq!(o.report("map $request_id").kind, Kind::NotTranslated);
    let b = o.report("map $a");
    assert_eq!(b.kind, Kind::NotTranslated);
    assert!(b.why.contains("$a is made by map"), "{}", b.why);
    // `$1` outside a regex entry is an earlier regex's: sluice has none.
    assert_eq!(o.report("map $http_x $c").kind, Kind::NotTranslated);
    assert!(o.toml["maps"].get("d").is_some());
    assert!(o.report("add_header X-B").why.contains("$b"));
}

#[test]
fn allow_and_deny_keep_their_order_per_level() {
    let o = run(&http(
        "allow 10.0.0.0/8;
         server { listen 127.0.0.1:8080; deny 192.168.1.1; allow 192.168.1.0/24; allow ::1; deny all;
           location / { return 200; }
           location /open { allow all; return 200; }
           location /bad { allow unix:; deny 300.0.0.1; return 200; } }",
    ));
    assert_eq!(o.toml["access"].as_str(), Some("allow 10.0.0.0/8"));
    assert_eq!(
        o.server(0)["access"].to_string(),
        "[\"deny 192.168.1.1\", \"allow 192.168.1.0/24\", \"allow ::1\", \"deny all\"]"
    );
    assert_eq!(o.location(0, 1)["access"].as_str(), Some("allow all"));
    assert_eq!(o.report("allow unix:").kind, Kind::NotTranslated);
    assert_eq!(o.report("deny 300.0.0.1").kind, Kind::NotTranslated);
}

#[test]
fn a_cycle_of_maps_is_refused_at_its_nginx_line() {
    // nginx loads it (and answers 500 to each request reading $a); sluice
    // refuses it, pointing at the nginx map, not at its own translation.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cyc.conf");
    let conf = http(
        "map $b $a { default $b; }
         map $a $b { default x$a; }
         limit_req_zone $a zone=z:1m rate=1r/s;
         server { listen 127.0.0.1:8080; location / { limit_req zone=z; return 200; } }",
    );
    std::fs::write(&path, conf).unwrap();
    let e = import(&path, &Options::default()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ImportError::Config(_)), "{text}");
    assert!(
        text.starts_with("cyc.conf:3: cycle while evaluating variable"),
        "{text}"
    );
    assert!(
        text.contains("$a → $b → $a") || text.contains("$b → $a → $b"),
        "{text}"
    );
    assert!(
        !text.contains("internal") && !text.contains("[maps"),
        "{text}"
    );
}
