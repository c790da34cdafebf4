//! Tests of what the stages guarantee beyond the messages (those are in
//! `tests.rs`): parsing is pure, the file step reports unreadable files
//! where they are named, validation leaves types that need no re-checking.

use super::*;
use crate::vars::{Context, LogEscape, Template};

const SERVER: &str = "[[servers]]\nlisten = \"127.0.0.1:1\"\nreturn = 1\n";

fn messages(r: Result<Spec, ConfigErrors>) -> Vec<String> {
    match r {
        Ok(_) => vec![],
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

/// `parse_str` does not look at the files the text names; `load_text`
/// does, and an unreadable file is reported as such (not also as needing
/// `rediss://`).
#[test]
fn only_loading_reads_the_files_the_text_names() {
    let server = "[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\n";
    let tls = format!(
        "[redis]\nurl = \"rediss://h:1\"\ntls_ca = \"/nonexistent/sluice-ca.pem\"\n{server}"
    );
    assert!(parse_str("t.toml", &tls).is_ok());
    assert_eq!(
        messages(load_text("t.toml", &tls)),
        [
            "t.toml:3:10: \"tls_ca\": cannot read \"/nonexistent/sluice-ca.pem\": No such file or directory (os error 2)"
        ]
    );
    let plain = tls.replace("rediss://", "redis://");
    assert_eq!(
        messages(parse_str("t.toml", &plain)),
        ["t.toml:3:10: \"tls_ca\" needs a rediss:// url"]
    );
    assert_eq!(messages(load_text("t.toml", &plain)).len(), 1);
    assert!(messages(load_text("t.toml", &plain))[0].contains("cannot read"));
}

/// A location's action is decided once: its `return`, else its own
/// `proxy_pass`, else its server's; a regex location carries its regex.
#[test]
fn locations_carry_their_action_and_regex() {
    let spec = parse_str(
        "t.toml",
        r#"[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
[[servers.locations]]
path = '~* \.PNG$'
[[servers.locations]]
path = "/own"
proxy_pass = "http://127.0.0.1:3/x/"
[[servers.locations]]
path = "= /both"
proxy_pass = "http://127.0.0.1:3"
return = { status = 204 }
"#,
    )
    .unwrap();
    let s = &spec.servers[0];
    assert_eq!(s.proxy_pass.as_ref().unwrap().authority, "127.0.0.1:2");
    let l = &s.locations;
    match (&l[0].rule, &l[0].action) {
        (PathMatch::Regex(r), Action::Proxy(p)) => {
            assert!(r.is_match("/a.png"));
            assert_eq!(p.authority, "127.0.0.1:2");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&l[1].action, Action::Proxy(p) if p.uri.as_deref() == Some("/x/")));
    assert!(matches!(&l[2].action, Action::Return(r) if r.status == 204));
    assert!(matches!(&l[2].rule, PathMatch::Exact(p) if p == "/both"));
}

/// Compile turns a failure of sluice's own default formats into an error
/// rather than a panic; they must parse.
#[test]
fn the_default_log_formats_parse() {
    for f in [
        crate::accesslog::DEFAULT_FORMAT,
        crate::accesslog::DEFAULT_JSON_FORMAT,
    ] {
        assert!(Template::parse(f, Context::Log).is_ok(), "{f}");
    }
    for escape in ["default", "json"] {
        let text = format!("log_format_escape = \"{escape}\"\n{SERVER}")
            .replace("return = 1", "proxy_pass = \"http://127.0.0.1:2\"");
        let spec = parse_str("t.toml", &text).unwrap();
        assert_eq!(spec.ops.log_escape == LogEscape::Json, escape == "json");
        assert!(Config::compile(spec, None).is_ok());
    }
}

/// The keys a section accepts are its schema's, listed in its order.
#[test]
fn unknown_keys_list_the_section_schema() {
    let e = messages(parse_str(
        "t.toml",
        "[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\n[[servers.locations]]\npath = \"/\"\nlisten = 1\n",
    ));
    assert_eq!(
        e,
        [
            "t.toml:6:1: unknown key \"listen\" in [[servers.locations]] (expected one of: path, proxy_pass, grpc_pass, return, limit_req, limit_req_status, limit_req_log_level, limit_req_dry_run, limit_conn, limit_conn_status, limit_conn_log_level, limit_conn_dry_run, error_pages, access, proxy_connect_timeout, proxy_read_timeout, proxy_send_timeout, client_body_timeout, access_log, error_log, ratelimit_headers, grpc_errors, client_max_body_size, proxy_request_buffering, client_body_buffer_size, client_body_temp_path, proxy_ssl_verify, proxy_ssl_trusted_certificate, proxy_ssl_server_name, proxy_ssl_name, proxy_ssl_certificate, proxy_ssl_certificate_key, proxy_ssl_protocols, proxy_set_header, add_header, proxy_hide_header, proxy_pass_header, proxy_next_upstream, proxy_next_upstream_tries, proxy_next_upstream_timeout, grpc_connect_timeout, grpc_read_timeout, grpc_send_timeout, grpc_ssl_verify, grpc_ssl_trusted_certificate, grpc_ssl_server_name, grpc_ssl_name, grpc_ssl_certificate, grpc_ssl_certificate_key, grpc_ssl_protocols, grpc_set_header, grpc_hide_header, grpc_pass_header, grpc_next_upstream, grpc_next_upstream_tries, grpc_next_upstream_timeout, gzip, gzip_types, gzip_min_length, gzip_proxied, gzip_vary, gzip_disable, gzip_http_version, gzip_comp_level, gzip_buffers, compress, zstd_comp_level, brotli_comp_level)"
        ]
    );
}
