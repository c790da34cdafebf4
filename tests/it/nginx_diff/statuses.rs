//! Status codes: the default `limit_req_status` 503, and 444, which closes without a response.

use super::*;

/// Without `limit_req_status` anywhere, nginx rejects with 503; so must sluice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_default_limit_req_status_is_503() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_default:1m rate=2r/s;
  server {{
    location /default {{ limit_req zone=z_default; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"{}[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/default"
limit_req = {{ zone = "z_default" }}
"#,
                zone("z_default", "2r/s")
            )
        },
    );
    let (nginx, sluice) = pair
        .fire(vec![Request::get(client(2), "/default"); 3])
        .await;
    assert_expected(
        "nginx /default",
        "nginx",
        &nginx,
        &expect(&[(200, &[0]), (503, &[0, 0])]),
    );
    assert_same(
        "/default (no limit_req_status): nginx vs sluice",
        &nginx,
        &sluice,
    );
    pair.assert_upstream_hits("default status", &nginx, &sluice);
    pair.assert_same_limit_lines("default status /default")
        .await;
}

/// `limit_req_status 444`: nginx closes the connection without any response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_limit_req_status_444_closes_without_response() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_close:1m rate=2r/s;
  limit_req_status 444;
  server {{
    location /close {{ limit_req zone=z_close; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 444

{}[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/close"
limit_req = {{ zone = "z_close" }}
"#,
                zone("z_close", "2r/s")
            )
        },
    );
    let (nginx, sluice) = pair.fire(vec![Request::get(client(2), "/close"); 3]).await;
    assert_expected(
        "nginx /close",
        "nginx",
        &nginx,
        &expect(&[(200, &[0]), (0, &[0, 0])]),
    );
    assert_same("/close (444): nginx vs sluice", &nginx, &sluice);
    pair.assert_upstream_hits("444", &nginx, &sluice);
    pair.assert_same_limit_lines("444 /close").await;
}
