//! Keys: an empty key is never limited (nginx's allow-list idiom), and with realip the client
//! named by X-Forwarded-For is the key.

use super::*;

/// Zone keyed on `$http_x_key` (1r/m burst=1 nodelay). Without the header, or with an empty
/// one, the key is empty and nothing is counted: all pass, nothing logged. With it, the header's
/// value is the bucket whatever the address: `X-Key: b` ×3 passes 2; `X-Key: a` ×2 from one
/// client passes both, then `X-Key: a` ×2 from another client is rejected (the same bucket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_empty_key_is_never_limited() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $http_x_key zone=z_key:1m rate=1r/m;
  limit_req_status 429;
  server {{
    location /k {{ limit_req zone=z_key burst=1 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

[zones.z_key]
key  = "$http_x_key"
size = "1m"
rate = "1r/m"

[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/k"
limit_req = {{ zone = "z_key", burst = 1, nodelay = true }}
"#
            )
        },
    );
    let mut first = Vec::new();
    for _ in 0..4 {
        first.push(Request::get(client(2), "/k?g=none"));
        first.push(get_with(client(3), "/k?g=empty", &[("X-Key", "")]));
    }
    for _ in 0..2 {
        first.push(get_with(client(4), "/k?g=a", &[("X-Key", "a")]));
    }
    for _ in 0..3 {
        first.push(get_with(client(6), "/k?g=b", &[("X-Key", "b")]));
    }
    let (n1, s1) = pair.fire(first).await;
    for (path, expected) in [
        ("/k?g=none", expect(&[(200, &[0; 4])])),
        ("/k?g=empty", expect(&[(200, &[0; 4])])),
        ("/k?g=a", expect(&[(200, &[0; 2])])),
        ("/k?g=b", expect(&[(200, &[0; 2]), (429, &[0])])),
    ] {
        check_group(
            path,
            &on_paths(&n1, &[path]),
            &on_paths(&s1, &[path]),
            &expected,
        );
    }
    let (n2, s2) = pair
        .fire(vec![get_with(client(5), "/k?g=a2", &[("X-Key", "a")]); 2])
        .await;
    check_group(
        "/k?g=a2 (X-Key: a from another address: a's bucket)",
        &n2,
        &s2,
        &expect(&[(429, &[0; 2])]),
    );
    pair.assert_upstream_hits("empty key", &[n1, n2].concat(), &[s1, s2].concat());
    pair.assert_same_limit_lines("empty key").await;
}

/// Three servers, each with its own 1r/m zone (burst=1 nodelay, so only counts matter), all
/// requests from 127.0.0.2:
/// - server 0, `set_real_ip_from 127.0.0.0/8; real_ip_header X-Forwarded-For;
///   real_ip_recursive on`: `1.1.1.1` ×3 and `2.2.2.2` ×3 have their own buckets (2 pass, 1
///   rejected each); `3.3.3.3` ×2 pass, then `3.3.3.3, 127.0.0.9` ×2 are rejected (recursive:
///   the trusted 127.0.0.9 is skipped, the key is 3.3.3.3's);
/// - server 1, no realip: `1.1.1.1` ×2 pass, then `2.2.2.2` ×2 are rejected (one bucket, the peer);
/// - server 2, realip not recursive: `5.5.5.5` ×2 and `3.3.3.3, 127.0.0.9` ×2 pass, then
///   `4.4.4.4, 127.0.0.9` ×2 are rejected (the key is the last address, 127.0.0.9).
///
/// The error-log `client:` field is the real address on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_realip_x_forwarded_for_selects_the_bucket() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z_rr:1m rate=1r/m;
  limit_req_zone $binary_remote_addr zone=z_none:1m rate=1r/m;
  limit_req_zone $binary_remote_addr zone=z_nr:1m rate=1r/m;
  limit_req_status 429;
  server {{
    set_real_ip_from 127.0.0.0/8;
    real_ip_header X-Forwarded-For;
    real_ip_recursive on;
    location /rr {{ limit_req zone=z_rr burst=1 nodelay; proxy_pass http://{up}; }}
  }}
  server {{
    location /none {{ limit_req zone=z_none burst=1 nodelay; proxy_pass http://{up}; }}
  }}
  server {{
    set_real_ip_from 127.0.0.0/8;
    real_ip_header X-Forwarded-For;
    location /nr {{ limit_req zone=z_nr burst=1 nodelay; proxy_pass http://{up}; }}
  }}",
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}{}{}[[servers]]
proxy_pass = "http://{up}"
real_ip    = {{ from = ["127.0.0.0/8"], header = "X-Forwarded-For", recursive = true }}

[[servers.locations]]
path      = "/rr"
limit_req = {{ zone = "z_rr", burst = 1, nodelay = true }}

[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/none"
limit_req = {{ zone = "z_none", burst = 1, nodelay = true }}

[[servers]]
proxy_pass = "http://{up}"
real_ip    = {{ from = ["127.0.0.0/8"], header = "X-Forwarded-For", recursive = false }}

[[servers.locations]]
path      = "/nr"
limit_req = {{ zone = "z_nr", burst = 1, nodelay = true }}
"#,
                zone("z_rr", "1r/m"),
                zone("z_none", "1r/m"),
                zone("z_nr", "1r/m")
            )
        },
    );
    let xff = |path: &str, value: &str, n: usize| {
        vec![get_with(client(2), path, &[("X-Forwarded-For", value)]); n]
    };
    let ((nr0, sr0), (nn0, sn0), (nx0, sx0)) = tokio::join!(
        pair.fire_on(
            0,
            [
                xff("/rr?f=1", "1.1.1.1", 3),
                xff("/rr?f=2", "2.2.2.2", 3),
                xff("/rr?f=3", "3.3.3.3", 2),
            ]
            .concat()
        ),
        pair.fire_on(1, xff("/none?f=1", "1.1.1.1", 2)),
        pair.fire_on(
            2,
            [
                xff("/nr?f=5", "5.5.5.5", 2),
                xff("/nr?f=3", "3.3.3.3, 127.0.0.9", 2),
            ]
            .concat()
        ),
    );
    let ((nr1, sr1), (nn1, sn1), (nx1, sx1)) = tokio::join!(
        pair.fire_on(0, xff("/rr?f=3b", "3.3.3.3, 127.0.0.9", 2)),
        pair.fire_on(1, xff("/none?f=2", "2.2.2.2", 2)),
        pair.fire_on(2, xff("/nr?f=4", "4.4.4.4, 127.0.0.9", 2)),
    );
    let two_one = expect(&[(200, &[0; 2]), (429, &[0])]);
    let two = expect(&[(200, &[0; 2])]);
    let rejected = expect(&[(429, &[0; 2])]);
    for (name, n, s, path, expected) in [
        ("recursive, XFF 1.1.1.1", &nr0, &sr0, "/rr?f=1", &two_one),
        ("recursive, XFF 2.2.2.2", &nr0, &sr0, "/rr?f=2", &two_one),
        ("recursive, XFF 3.3.3.3", &nr0, &sr0, "/rr?f=3", &two),
        (
            "recursive, then XFF 3.3.3.3, 127.0.0.9",
            &nr1,
            &sr1,
            "/rr?f=3b",
            &rejected,
        ),
        ("no realip, XFF 1.1.1.1", &nn0, &sn0, "/none?f=1", &two),
        (
            "no realip, then XFF 2.2.2.2",
            &nn1,
            &sn1,
            "/none?f=2",
            &rejected,
        ),
        ("not recursive, XFF 5.5.5.5", &nx0, &sx0, "/nr?f=5", &two),
        (
            "not recursive, XFF 3.3.3.3, 127.0.0.9",
            &nx0,
            &sx0,
            "/nr?f=3",
            &two,
        ),
        (
            "not recursive, then XFF 4.4.4.4, 127.0.0.9",
            &nx1,
            &sx1,
            "/nr?f=4",
            &rejected,
        ),
    ] {
        check_group(
            &format!("realip {name} ({path})"),
            &on_paths(n, &[path]),
            &on_paths(s, &[path]),
            expected,
        );
    }
    // The oracle's rejections name the real client.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let lines = limit_lines(&pair.nginx.error_log()).expect("nginx's error log parses");
    let mut clients: Vec<(String, String)> = lines
        .iter()
        .map(|l| (l.zone.clone(), l.client.clone()))
        .collect();
    clients.sort();
    let want: Vec<(String, String)> = [
        ("z_none", "127.0.0.2"),
        ("z_none", "127.0.0.2"),
        ("z_nr", "127.0.0.9"),
        ("z_nr", "127.0.0.9"),
        ("z_rr", "1.1.1.1"),
        ("z_rr", "2.2.2.2"),
        ("z_rr", "3.3.3.3"),
        ("z_rr", "3.3.3.3"),
    ]
    .iter()
    .map(|(z, c)| ((*z).to_owned(), (*c).to_owned()))
    .collect();
    assert_eq!(clients, want, "nginx's rejections (zone, client) (oracle)");
    pair.assert_same_limit_lines("realip").await;
}
