//! `proxy_set_header`, `add_header`, `proxy_hide_header`, `proxy_pass_header`, side by side
//! with nginx: the same requests to both, with the same kind of echo upstream behind each, and
//! per request the same status, the same added and passed response headers, and the same request
//! headers at the upstream.
//!
//! Where the two differ on purpose, the comparison leaves out exactly that: nginx sends
//! `Connection: close` upstream and its own `Server`; sluice keeps the upstream connection alive
//! and sends no `Server`, and (by default) an `X-Forwarded-For` nginx does not send.

use super::*;
use crate::support::{Nginx, Reply};

const NGINX: &str = r#"
  limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;
  limit_req_status 429;
  proxy_set_header X-Top top;
  add_header X-Frame-Options DENY;
  add_header X-Always "$status $limit_req_status" always;
  add_header X-Empty $http_x_missing always;
  server {
    location /plain { proxy_pass http://UP; proxy_set_header Host $proxy_host; }
    location /vhost {
      proxy_pass http://UP;
      proxy_set_header Host $host;
      proxy_set_header X-Real-IP $remote_addr;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Removed "";
      proxy_set_header X-Custom "a-${arg_x}-b";
    }
    location /inherit { proxy_pass http://UP; }
    location /limited {
      proxy_pass http://UP;
      limit_req zone=one;
      add_header X-Limit $limit_req_status always;
    }
    location /return { return 200 "made\n"; }
    location /hide { proxy_pass http://UP; proxy_hide_header X-Powered-By; }
    location /pass { proxy_pass http://UP; proxy_pass_header Server; }
  }
"#;

const SLUICE: &str = r#"
limit_req_status = 429
proxy_set_header = { "X-Top" = "top" }
add_header = [
  { name = "X-Frame-Options", value = "DENY" },
  { name = "X-Always", value = "$status $limit_req_status", always = true },
  { name = "X-Empty", value = "$http_x_missing", always = true },
]

[zones.one]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"

[[servers]]
[[servers.locations]]
path = "/plain"
proxy_pass = "http://UP"
proxy_set_header = { Host = "$proxy_host" }
[[servers.locations]]
path = "/vhost"
proxy_pass = "http://UP"
proxy_set_header = { Host = "$host", "X-Real-IP" = "$remote_addr", "X-Forwarded-Proto" = "$scheme", "X-Forwarded-For" = "$proxy_add_x_forwarded_for", "X-Removed" = "", "X-Custom" = "a-${arg_x}-b" }
[[servers.locations]]
path = "/inherit"
proxy_pass = "http://UP"
[[servers.locations]]
path = "/limited"
proxy_pass = "http://UP"
limit_req = { zone = "one" }
add_header = { name = "X-Limit", value = "$limit_req_status", always = true }
[[servers.locations]]
path = "/return"
return = { status = 200, body = "made\n" }
[[servers.locations]]
path = "/hide"
proxy_pass = "http://UP"
proxy_hide_header = "X-Powered-By"
[[servers.locations]]
path = "/pass"
proxy_pass = "http://UP"
proxy_pass_header = "Server"
"#;

/// The request headers the echo upstream saw, lowercased names, without the ones that differ on
/// purpose (see the module doc); `x-forwarded-for` is kept when `keep_xff`.
fn seen(r: &Reply, keep_xff: bool, up: SocketAddr) -> Vec<(String, String)> {
    let text = r.body_text().replace(&up.to_string(), "UP");
    let mut lines: Vec<(String, String)> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .filter(|(n, _)| n != "connection" && (keep_xff || n != "x-forwarded-for"))
        .collect();
    lines.sort();
    lines
}

/// The response headers this test is about, in order, lowercased names.
fn shown(r: &Reply) -> Vec<(String, String)> {
    r.headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .filter(|(n, v)| {
            // (Retry-After is sluice's own, on every rejection.)
            n.starts_with("x-")
                // nginx's own Server is not the upstream's.
                || (n == "server" && v.starts_with("up/"))
        })
        .collect()
}

/// The upstream answers with its own `Server`.
const ECHO_SERVER: (&str, &str) = ("X-Echo-Header", "Server: up/1");

struct Case {
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    status: u16,
    /// Compare X-Forwarded-For too (set explicitly in both configs).
    xff: bool,
}

#[tokio::test]
async fn header_directives_do_what_nginx_does() {
    let (nginx_up, sluice_up) = (Upstream::start(), Upstream::start());
    let nginx = Nginx::start(&NGINX.replace("UP", &nginx_up.addr.to_string()));
    let sluice = Sluice::start(&SLUICE.replace("UP", &sluice_up.addr.to_string()));
    let cases = [
        Case {
            path: "/plain",
            headers: &[("X-Top", "client")],
            status: 200,
            xff: false,
        },
        Case {
            path: "/vhost?x=1",
            headers: &[
                ("Host", "Client.Example:8080"),
                ("X-Forwarded-For", "1.2.3.4"),
                ("X-Removed", "secret"),
                ("X-Kept", "kept"),
            ],
            status: 200,
            xff: true,
        },
        Case {
            path: "/inherit",
            headers: &[("X-Top", "client")],
            status: 200,
            xff: false,
        },
        Case {
            path: "/inherit",
            headers: &[("X-Echo-Status", "404")],
            status: 404,
            xff: false,
        },
        Case {
            path: "/inherit",
            headers: &[("X-Echo-Status", "302")],
            status: 302,
            xff: false,
        },
        Case {
            path: "/limited",
            headers: &[],
            status: 200,
            xff: false,
        },
        Case {
            path: "/limited",
            headers: &[],
            status: 429,
            xff: false,
        },
        Case {
            path: "/return",
            headers: &[],
            status: 200,
            xff: false,
        },
        Case {
            path: "/hide",
            headers: &[
                ECHO_SERVER,
                ("X-Echo-Header", "X-Powered-By: php"),
                ("X-Echo-Header", "X-Pad: p"),
            ],
            status: 200,
            xff: false,
        },
        Case {
            path: "/pass",
            headers: &[ECHO_SERVER, ("X-Echo-Header", "X-Powered-By: php")],
            status: 200,
            xff: false,
        },
        // The upstream's fields in its order, a repeated name not grouped, and `add_header`'s
        // after them, its name the upstream's too.
        Case {
            path: "/inherit",
            headers: &[
                ("X-Echo-Header", "X-A: 1"),
                ("X-Echo-Header", "X-Frame-Options: SAMEORIGIN"),
                ("X-Echo-Header", "X-A: 2"),
            ],
            status: 200,
            xff: false,
        },
    ];
    for case in &cases {
        let (n, s) = tokio::join!(
            request(nginx.addr(), client(2), "GET", case.path, case.headers),
            request(sluice.addr(), client(2), "GET", case.path, case.headers),
        );
        let what = case.path;
        assert_eq!(n.status, case.status, "nginx {what}: {}", n.body_text());
        assert_eq!(s.status, n.status, "sluice {what}: {}", s.body_text());
        assert_eq!(
            shown(&s),
            shown(&n),
            "{what}: response headers (sluice, nginx)"
        );
        if n.status != 429 && case.path != "/return" {
            assert_eq!(
                seen(&s, case.xff, sluice_up.addr),
                seen(&n, case.xff, nginx_up.addr),
                "{what}: what the upstream saw (sluice, nginx)"
            );
        }
    }
    // What the assertions above compared is what nginx's documentation says.
    let vhost = request(
        sluice.addr(),
        client(3),
        "GET",
        "/vhost?x=1",
        cases[1].headers,
    )
    .await;
    let saw = seen(&vhost, true, sluice_up.addr);
    let has = |n: &str, v: &str| saw.iter().any(|(a, b)| a == n && b == v);
    assert!(has("host", "client.example"), "{saw:?}");
    assert!(
        has("x-real-ip", "127.0.0.3") && has("x-forwarded-proto", "http"),
        "{saw:?}"
    );
    assert!(
        has("x-forwarded-for", "1.2.3.4, 127.0.0.3") && has("x-custom", "a-1-b"),
        "{saw:?}"
    );
    assert!(
        has("x-kept", "kept") && !saw.iter().any(|(n, _)| n == "x-removed"),
        "{saw:?}"
    );
    let plain = request(
        sluice.addr(),
        client(3),
        "GET",
        "/inherit",
        &[("X-Top", "c")],
    )
    .await;
    let saw = seen(&plain, true, sluice_up.addr);
    let host = "UP".to_string();
    assert!(
        saw.contains(&("host".into(), host)),
        "Host is $proxy_host by default: {saw:?}"
    );
    assert!(saw.contains(&("x-top".into(), "top".into())), "{saw:?}");
    assert!(
        saw.contains(&("x-forwarded-for".into(), "127.0.0.3".into())),
        "sluice's default X-Forwarded-For: {saw:?}"
    );
    let limited = shown(&request(sluice.addr(), client(3), "GET", "/limited", &[]).await);
    assert!(
        limited.contains(&("x-limit".into(), "PASSED".into())),
        "{limited:?}"
    );
    // Its own add_header replaced the top level's list.
    assert_eq!(limited.len(), 1, "{limited:?}");
    let returned = shown(&request(sluice.addr(), client(3), "GET", "/return", &[]).await);
    assert_eq!(
        returned,
        [
            ("x-frame-options".to_string(), "DENY".to_string()),
            ("x-always".into(), "200".into())
        ],
        "$limit_req_status is empty when no limit applied"
    );
}

/// A value made of what the client sent cannot start a new header line upstream: `$uri` is the
/// decoded path, so `%0D%0A` in it would (nginx writes it as it is). sluice percent-encodes the
/// bytes a field may not hold.
#[tokio::test]
async fn a_decoded_crlf_never_makes_a_header_line() {
    let up = Upstream::start();
    let s = Sluice::in_process(&format!(
        r#"
[[servers]]
[[servers.locations]]
path = "/"
proxy_pass = "http://{}"
proxy_set_header = {{ "X-Uri" = "$uri" }}
add_header = {{ name = "X-Uri", value = "$uri" }}
"#,
        up.addr
    ));
    let r = request(s.addr(), client(2), "GET", "/a%0D%0AX-Evil:%201", &[]).await;
    assert_eq!(r.status, 200, "{}", r.body_text());
    let echo = r.body_text();
    assert!(
        echo.contains("X-Uri: /a%0D%0AX-Evil: 1") || echo.contains("x-uri: /a%0D%0AX-Evil: 1"),
        "{echo}"
    );
    assert!(!echo.to_ascii_lowercase().contains("\nx-evil"), "{echo}");
    assert_eq!(r.header("x-uri"), Some("/a%0D%0AX-Evil: 1"));
    assert!(r.header("x-evil").is_none());
}

/// One name in `proxy_set_header` twice: nginx sends both fields, in order, and skips an empty
/// value (checked with nginx 1.22); sluice's list value does the same. The upstream sees `X-A`
/// twice, `X-B` once, from both, in the same order.
#[tokio::test]
async fn a_name_set_twice_is_sent_twice_as_nginx_does() {
    let (nginx_up, sluice_up) = (Upstream::start(), Upstream::start());
    let nginx = Nginx::start(&format!(
        r#"
  server {{
    location / {{
      proxy_pass http://{};
      proxy_set_header X-A v1;
      proxy_set_header X-B "";
      proxy_set_header X-A "$remote_addr";
      proxy_set_header X-A "";
    }}
  }}
"#,
        nginx_up.addr
    ));
    let sluice = Sluice::in_process(&format!(
        r#"
[[servers]]
[[servers.locations]]
path = "/"
proxy_pass = "http://{}"
proxy_set_header = {{ "X-A" = ["v1", "$remote_addr", ""], "X-B" = "" }}
"#,
        sluice_up.addr
    ));
    let sent = [("X-A", "from-client"), ("X-B", "from-client")];
    let (n, s) = tokio::join!(
        request(nginx.addr(), client(2), "GET", "/", &sent),
        request(sluice.addr(), client(2), "GET", "/", &sent),
    );
    let fields = |r: &Reply| -> Vec<String> {
        r.body_text()
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("x-"))
            .map(|l| l.trim().to_ascii_lowercase())
            .filter(|l| !l.starts_with("x-forwarded-for"))
            .collect()
    };
    assert_eq!(n.status, 200, "{}", n.body_text());
    assert_eq!(s.status, 200, "{}", s.body_text());
    assert_eq!(fields(&n), ["x-a: v1", "x-a: 127.0.0.2"], "nginx");
    assert_eq!(fields(&s), fields(&n), "sluice, then nginx");
}
