//! Requests: malformed ones get 400, locations match in nginx's order, and X-Forwarded-For is
//! trusted only when configured.

use super::*;
use crate::support::within;

/// Malformed requests get 400 and never reach a location. (A client that
/// sends nothing is dropped after client_header_timeout: tests/it/ops.rs.)
#[tokio::test]
async fn malformed_requests_get_400() {
    let unused = Port::reserve();
    let toml = format!(
        r#"
access_log = "stdout"
[[servers]]
[[servers.locations]]
path = "/"
return = {{ status = 200, body = "ok\n" }}
[[servers.locations]]
path = "/upload"
proxy_pass = "http://{unused}"
"#,
        unused = unused.addr()
    );
    let s = Sluice::start(&toml);
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    c.write_all(b"GARBAGE\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 400"), "{text:?}");

    let r = request(s.addr(), client(2), "GET", "/a/../../etc", &[]).await;
    assert_eq!(r.status, 400, "a path above the root");

    // A chunk size past client_max_body_size is a 413 at once, even with no
    // data after it (nginx checks the size line).
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    c.write_all(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    // The size line comes while the body is already being waited for.
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.write_all(b"100001\r\n").await.unwrap();
    let mut out = vec![0; 64];
    let n = tokio::time::timeout(Duration::from_secs(3), c.read(&mut out))
        .await
        .expect("an answer before client_body_timeout")
        .unwrap();
    let text = String::from_utf8_lossy(&out[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text:?}");

    // Refused heads are logged as nginx logs them: the line as sent, 400. (Polled for: the
    // lines trail their responses.)
    let lines = ["\"GARBAGE\" 400 ", "\"GET /a/../../etc HTTP/1.1\" 400 "];
    let logged = async || {
        let log = s.stdout();
        lines.iter().all(|l| log.contains(l)).then_some(log)
    };
    let log = within(Duration::from_secs(5), logged)
        .await
        .unwrap_or_else(|| s.stdout());
    assert!(log.contains(lines[0]), "{log}");
    assert!(log.contains(lines[1]), "{log}");
}

#[tokio::test]
async fn locations_match_in_nginx_order() {
    let loc = |path: &str, name: &str| {
        format!(
            "[[servers.locations]]\npath = '{path}'\nreturn = {{ status = 200, body = \"{name}\" }}\n"
        )
    };
    let toml = format!(
        "[[servers]]\n{}{}{}{}{}{}",
        loc("/", "root"),
        loc("= /exact", "exact"),
        loc("^~ /static/", "static"),
        loc("~ \\.png$", "png"),
        loc("~* \\.JPG$", "jpg"),
        loc("/images/", "images"),
    );
    let s = Sluice::in_process(&toml);
    for (path, want) in [
        ("/exact", "exact"),
        ("/exact/more", "root"),
        ("/static/a.png", "static"),
        ("/images/a.png", "png"),
        ("/images/a.jpg", "jpg"),
        ("/images/a.txt", "images"),
        ("/x.PNG", "root"),
        ("/other", "root"),
    ] {
        let r = request(s.addr(), client(2), "GET", path, &[]).await;
        assert_eq!(r.body_text(), want, "{path}");
    }
}

/// X-Forwarded-For is never trusted by default; with `real_ip` from a
/// trusted peer, `$binary_remote_addr` is the address it names.
#[tokio::test]
async fn real_ip_is_trusted_only_when_configured() {
    let zone = r#"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
"#;
    let server = r#"
[[servers]]
limit_req_status = 429
[[servers.locations]]
path = "/"
limit_req = { zone = "z" }
return = { status = 200, body = "$remote_addr\n" }
"#;
    let via = |s: &InProcess, peer: u8, xff: &'static str| {
        let addr = s.addr();
        async move { request(addr, client(peer), "GET", "/", &[("X-Forwarded-For", xff)]).await }
    };
    // Default: the header is ignored, the peer is the client.
    let s = Sluice::in_process(&format!("{zone}{server}"));
    let a = via(&s, 2, "1.1.1.1").await;
    let b = via(&s, 2, "2.2.2.2").await;
    assert_eq!((a.status, b.status), (200, 429));
    assert_eq!(a.body_text(), "127.0.0.2\n");

    // Trusted peer, recursive: the rightmost untrusted address is the client.
    let toml = format!(
        "real_ip = {{ from = [\"127.0.0.0/8\", \"10.0.0.0/8\"], header = \"X-Forwarded-For\", recursive = true }}\n{zone}{server}"
    );
    let s = Sluice::in_process(&toml);
    let a = via(&s, 2, "1.1.1.1, 10.0.0.9").await;
    let b = via(&s, 2, "2.2.2.2").await;
    let c = via(&s, 3, "9.9.9.9, 1.1.1.1").await;
    assert_eq!(a.body_text(), "1.1.1.1\n");
    assert_eq!((a.status, b.status, c.status), (200, 200, 429));
}

/// nginx's `auto_redirect`: a proxied location named `/app/` answers `/app` with a 301 to
/// `/app/` (query kept, Location absolute with the server's port), unless a location is named
/// `/app` itself; before regexes. And `return 444` closes the connection without a response.
#[tokio::test]
async fn a_proxied_location_adds_its_slash_and_444_closes_as_nginx() {
    let (nginx_up, sluice_up) = (Upstream::start(), Upstream::start());
    let nginx = crate::support::Nginx::start(&format!(
        r#"
  server {{
    location /app/ {{ proxy_pass http://{0}; }}
    location = /exact/ {{ proxy_pass http://{0}; }}
    location /both/ {{ proxy_pass http://{0}; }}
    location /both {{ return 200 "both\n"; }}
    location /ret/ {{ return 200 "ret\n"; }}
    location ~ ^/app {{ return 200 "regex\n"; }}
    location /gone {{ return 444; }}
  }}
"#,
        nginx_up.addr
    ));
    let sluice = Sluice::start(&format!(
        r#"
[[servers]]
[[servers.locations]]
path = "/app/"
proxy_pass = "http://{0}"
[[servers.locations]]
path = "= /exact/"
proxy_pass = "http://{0}"
[[servers.locations]]
path = "/both/"
proxy_pass = "http://{0}"
[[servers.locations]]
path = "/both"
return = {{ status = 200, body = "both\n" }}
[[servers.locations]]
path = "/ret/"
return = {{ status = 200, body = "ret\n" }}
[[servers.locations]]
path = "~ ^/app"
return = {{ status = 200, body = "regex\n" }}
[[servers.locations]]
path = "/gone"
return = {{ status = 444 }}
"#,
        sluice_up.addr
    ));
    for (path, status) in [
        ("/app?x=1", 301),
        ("/app/", 200),
        ("/apple", 200),
        ("/exact", 301),
        ("/both", 200),
        ("/ret", 404),
        ("/gone", 0),
    ] {
        let (n, s) = tokio::join!(
            request(nginx.addr(), client(2), "GET", path, &[]),
            request(sluice.addr(), client(2), "GET", path, &[]),
        );
        assert_eq!(n.status, status, "nginx {path}");
        assert_eq!(s.status, status, "sluice {path}: {}", s.body_text());
        let location = |r: &crate::support::Reply, port: u16| {
            r.header("location")
                .map(|l| l.replace(&format!(":{port}/"), ":PORT/"))
        };
        assert_eq!(
            location(&s, sluice.addr().port()),
            location(&n, nginx.addr().port()),
            "{path}: Location"
        );
        if status == 200 {
            assert_eq!(
                s.body_text().lines().next(),
                n.body_text().lines().next(),
                "{path}"
            );
        }
    }
}
