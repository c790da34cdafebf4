//! `error_log` and `access_log syslog:` translated: nginx's arguments kept,
//! checked as nginx checks them, and what cannot be said reported.

use super::report::Kind;
use super::tests::run;

#[test]
fn logs_to_syslog_are_translated_and_checked() {
    let o = run("error_log /dev/stderr info; events {}
         http { access_log syslog:server=192.0.2.10:514,tag=edge;
                server { listen 127.0.0.1:8080;
                  access_log syslog:server=unix:/dev/log,severity=notice;
                  location /a { error_log syslog:server=a,facility=bogus; return 200; }
                  location /b { error_log memory:32m debug; return 200; } } }");
    assert_eq!(o.toml["error_log"].as_str(), Some("stderr info"));
    assert_eq!(
        o.toml["access_log"].as_str(),
        Some("syslog:server=192.0.2.10:514,tag=edge")
    );
    assert_eq!(
        o.server(0)["access_log"].as_str(),
        Some("syslog:server=unix:/dev/log,severity=notice,tag=nginx")
    );
    let bad = o.report("error_log syslog:server=a,facility=bogus");
    assert_eq!(bad.kind, Kind::NotTranslated);
    assert!(
        bad.why.contains("unknown syslog facility \"bogus\""),
        "{}",
        bad.why
    );
    assert_eq!(o.report("error_log memory:32m").kind, Kind::NotTranslated);
}
