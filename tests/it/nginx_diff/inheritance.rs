//! Inheritance (nginx-limit-req.md §8): a location's `limit_req` list hides the server's, and
//! http- and server-level lists and statuses are inherited.

use super::*;

/// A server-level `limit_req` applies to locations without their own; a location with its own
/// list does not also get the server's (lists are never merged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_location_limit_req_hides_the_server_list() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_server:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_own:1m rate=2r/s;
  limit_req_status 429;
  server {{
    limit_req zone=z_server burst=1 nodelay;
    location /inherit {{ proxy_pass http://{up}; }}
    location /own {{ limit_req zone=z_own burst=3 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}{}[[servers]]
proxy_pass = "http://{up}"
limit_req  = [{{ zone = "z_server", burst = 1, nodelay = true }}]

[[servers.locations]]
path = "/inherit"

[[servers.locations]]
path      = "/own"
limit_req = {{ zone = "z_own", burst = 3, nodelay = true }}
"#,
                zone("z_server", "2r/s"),
                zone("z_own", "2r/s")
            )
        },
    );
    let (inherit, own) = (client(2), client(3));
    let requests: Vec<Request> = (0..12)
        .map(|i| {
            if i % 2 == 0 {
                Request::get(inherit, "/inherit")
            } else {
                Request::get(own, "/own")
            }
        })
        .collect();
    let (nginx, sluice) = pair.fire(requests).await;
    for (who, path, expected) in [
        (
            inherit,
            "/inherit",
            expect(&[(200, &[0; 2]), (429, &[0; 4])]),
        ),
        (own, "/own", expect(&[(200, &[0; 4]), (429, &[0; 2])])),
    ] {
        let (n, s) = (group_by_source(&nginx, who), group_by_source(&sluice, who));
        assert_expected(&format!("nginx {path}"), "nginx", &n, &expected);
        assert_same(&format!("{path}: nginx vs sluice"), &n, &s);
    }
    pair.assert_upstream_hits("inheritance", &nginx, &sluice);
    pair.assert_same_limit_lines("inheritance").await;
}

/// http level: `limit_req zone=z_http burst=1 nodelay` and `limit_req_status 429`. Server 0 has
/// no limits of its own: `/a` gets the http list (2 of 5 pass, 429). Server 1 has its own
/// `limit_req zone=z_srv burst=2 nodelay` and `limit_req_status 503`: `/b` (nothing of its own)
/// gets the server's list and status (3 of 6 pass, 503); `/c` has `z_loc burst=3 nodelay` and
/// `limit_req_status 429` (4 of 6 pass, 429). Lists are never merged, so a merged list would let
/// fewer pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_http_and_server_level_limit_req_are_inherited() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_http:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_srv:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_loc:1m rate=2r/s;
  limit_req_status 429;
  limit_req zone=z_http burst=1 nodelay;
  server {{
    location /a {{ proxy_pass http://{up}; }}
  }}
  server {{
    limit_req zone=z_srv burst=2 nodelay;
    limit_req_status 503;
    location /b {{ proxy_pass http://{up}; }}
    location /c {{
      limit_req zone=z_loc burst=3 nodelay;
      limit_req_status 429;
      proxy_pass http://{up};
    }}
  }}",
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429
limit_req        = {{ zone = "z_http", burst = 1, nodelay = true }}

{}{}{}[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path = "/a"

[[servers]]
proxy_pass       = "http://{up}"
limit_req        = [{{ zone = "z_srv", burst = 2, nodelay = true }}]
limit_req_status = 503

[[servers.locations]]
path = "/b"

[[servers.locations]]
path             = "/c"
limit_req        = {{ zone = "z_loc", burst = 3, nodelay = true }}
limit_req_status = 429
"#,
                zone("z_http", "2r/s"),
                zone("z_srv", "2r/s"),
                zone("z_loc", "2r/s")
            )
        },
    );
    let on_b: Vec<Request> = (0..12)
        .map(|i| {
            if i % 2 == 0 {
                Request::get(client(3), "/b")
            } else {
                Request::get(client(4), "/c")
            }
        })
        .collect();
    let ((na, sa), (nb, sb)) = tokio::join!(
        pair.fire_on(0, vec![Request::get(client(2), "/a"); 5]),
        pair.fire_on(1, on_b),
    );
    check_group(
        "/a (http-level list, http-level status)",
        &na,
        &sa,
        &expect(&[(200, &[0; 2]), (429, &[0; 3])]),
    );
    check_group(
        "/b (server-level list and status)",
        &on_paths(&nb, &["/b"]),
        &on_paths(&sb, &["/b"]),
        &expect(&[(200, &[0; 3]), (503, &[0; 3])]),
    );
    check_group(
        "/c (own list and status)",
        &on_paths(&nb, &["/c"]),
        &on_paths(&sb, &["/c"]),
        &expect(&[(200, &[0; 4]), (429, &[0; 2])]),
    );
    pair.assert_upstream_hits(
        "http/server inheritance",
        &[na, nb].concat(),
        &[sa, sb].concat(),
    );
    pair.assert_same_limit_lines("http/server inheritance")
        .await;
}
