//! The counters, as `/metrics` renders them.

use super::*;

#[test]
fn renders_counters_and_zones() {
    let spec = crate::config::parse_str(
        "t.toml",
        r#"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/s"
[zones.w]
key = "$binary_remote_addr"
size = "1m"
rate = "10r/10s"
algorithm = "sliding_window"
[zones.slow]
key = "$binary_remote_addr"
size = "1m"
rate = "30r/m"
[conn_zones.addr]
key = "$binary_remote_addr"
size = "1m"
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/"
return = { status = 200 }
"#,
    )
    .unwrap();
    let rt = Config::compile(spec, None).unwrap();
    let m = Metrics::new();
    let counts = &rt.zones[0].limiter.counts;
    counts.record(LimitReqStatus::Passed);
    counts.record(LimitReqStatus::Passed);
    counts.record(LimitReqStatus::RejectedDryRun);
    m.upstream_error(UpstreamError::Timeout);
    m.response(200, Duration::from_millis(3));
    m.reload(false);
    m.connection_refused();
    m.tunnel_opened();
    m.tunnel_opened();
    m.tunnel_closed();
    m.tunnel_bytes(5, 0);
    m.tunnel_bytes(2, 7);
    let cz = &rt.conn_zones[0];
    cz.counts.rejected.fetch_add(2, Ordering::Relaxed);
    let _held = cz.acquire(b"k", 1);
    let text = m.render(&rt);
    for line in [
        "sluice_limit_req_requests_total{zone=\"z\",status=\"passed\"} 2",
        "sluice_limit_req_requests_total{zone=\"z\",status=\"rejected_dry_run\"} 1",
        "sluice_upstream_errors_total{kind=\"timeout\"} 1",
        "sluice_http_responses_total{code=\"200\"} 1",
        "sluice_http_request_duration_seconds_count 1",
        "sluice_http_request_duration_seconds_bucket{le=\"0.005\"} 1",
        "sluice_http_request_duration_seconds_bucket{le=\"+Inf\"} 1",
        "sluice_config_reloads_total{result=\"failed\"} 1",
        "sluice_config_last_reload_successful 0",
        "sluice_limit_req_zone_states{zone=\"z\"} 0",
        "# TYPE sluice_limit_req_zone_info gauge",
        "sluice_limit_req_zone_info{zone=\"z\",algorithm=\"leaky_bucket\",rate=\"1r/s\"} 1",
        "sluice_limit_req_zone_info{zone=\"w\",algorithm=\"sliding_window\",rate=\"10r/10s\"} 1",
        "sluice_limit_req_zone_info{zone=\"slow\",algorithm=\"leaky_bucket\",rate=\"30r/m\"} 1",
        "sluice_limit_req_zone_evictions_total{zone=\"z\"} 0",
        "sluice_connections_refused_total 1",
        "sluice_tunnels_opened_total 2",
        "sluice_tunnels_active 1",
        "sluice_tunnel_bytes_total{direction=\"to_client\"} 7",
        "sluice_tunnel_bytes_total{direction=\"to_upstream\"} 7",
        "sluice_limit_conn_requests_total{zone=\"addr\",status=\"rejected\"} 2",
        "sluice_limit_conn_requests_total{zone=\"addr\",status=\"passed\"} 0",
        "sluice_limit_conn_zone_full_total{zone=\"addr\"} 0",
        "sluice_limit_conn_zone_keys{zone=\"addr\"} 1",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert_eq!(text.matches("sluice_limit_req_zone_info{").count(), 3);
    assert!(text.ends_with("# EOF\n"));
    assert_eq!(text.matches("# EOF").count(), 1);
}

#[test]
fn proxy_protocol_headers_are_counted_by_result() {
    let m = Metrics::new();
    m.proxy_header("broken");
    m.proxy_header("client");
    m.proxy_header("client");
    let rt = crate::config::Config::compile(
        crate::config::parse_str(
            "t.toml",
            "[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\n",
        )
        .unwrap(),
        None,
    )
    .unwrap();
    let text = m.render(&rt);
    for line in [
        "sluice_proxy_protocol_headers_total{result=\"client\"} 2",
        "sluice_proxy_protocol_headers_total{result=\"broken\"} 1",
        "sluice_proxy_protocol_headers_total{result=\"timeout\"} 0",
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
}

#[test]
fn grpc_calls_count_by_code_and_unknown_beyond_16() {
    let m = Metrics::new();
    let calls = m.grpc_calls();
    calls.count(0);
    calls.count(8);
    calls.count(8);
    calls.count(99);
    let by: std::collections::HashMap<_, _> = calls.by_code().collect();
    assert_eq!(by["OK"], 1);
    assert_eq!(by["RESOURCE_EXHAUSTED"], 2);
    assert_eq!(by["UNKNOWN"], 1);
    assert_eq!(by.len(), 17);
    let mut text = String::new();
    prometheus_client::encoding::text::encode_registry(&mut text, &m.registry).unwrap();
    assert!(text.contains("sluice_grpc_calls_total{code=\"RESOURCE_EXHAUSTED\"} 2"));
}

#[test]
fn grpc_status_values_parse_as_numbers_only() {
    use crate::respond::grpc::parse_status;
    assert_eq!(parse_status(b"0"), Some(0));
    assert_eq!(parse_status(b"14"), Some(14));
    for bad in [&b""[..], b" 1", b"-1", b"1a", b"9999999999"] {
        assert_eq!(parse_status(bad), None, "{bad:?}");
    }
}
