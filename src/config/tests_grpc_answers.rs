//! `grpc_errors` and an error page's `grpc_status` and `grpc_message`:
//! what is read, what is refused (`FILE:LINE:COL`), and which locations
//! answer gRPC calls in gRPC.

use super::Config;
use super::tests::{errors, ok};
use crate::respond::grpc::Code;

const TEXT: &str = r#"
grpc_errors = "grpc"
[[servers]]
listen = "127.0.0.1:1"
grpc_pass = "grpc://127.0.0.1:2"
[servers.error_pages.503]
grpc_status = 14
grpc_message = "busy"
[[servers.locations]]
path = "/grpc"
[[servers.locations]]
path = "/http"
grpc_errors = "http"
[[servers.locations]]
path = "/proxied"
proxy_pass = "http://127.0.0.1:3"
"#;

#[test]
fn grpc_locations_answer_in_grpc_unless_told_http() {
    let config = Config::compile(ok(TEXT), None).unwrap();
    let server = &config.servers[0];
    let answers = |p: &str| server.locations.find(p).unwrap().grpc_answers;
    assert!(answers("/grpc"));
    assert!(!answers("/http"));
    assert!(!answers("/proxied"), "proxy_pass: HTTP");
    let page = &server.locations.find("/grpc").unwrap().error_pages[&503];
    assert_eq!(page.grpc.status, Some(Code::Unavailable));
    assert_eq!(page.grpc.message.as_deref(), Some("busy"));
    assert_eq!(page.status, 503);
}

#[test]
fn bad_values_are_refused_where_they_stand() {
    let text = r#"grpc_errors = "nginx"
[[servers]]
listen = "127.0.0.1:1"
grpc_pass = "grpc://127.0.0.1:2"
[servers.error_pages.429]
grpc_status = 17
grpc_message = 5
[servers.error_pages.503]
grpc_status = "UNAVAILABLE"
"#;
    assert_eq!(
        errors(text),
        [
            "t.toml:1:15: invalid grpc_errors \"nginx\" (expected grpc or http)",
            "t.toml:6:15: \"grpc_status\": value must be between 0 and 16",
            "t.toml:7:16: \"grpc_message\" must be a string, found an integer",
            "t.toml:9:15: \"grpc_status\" must be an integer, found a string",
        ]
    );
}
