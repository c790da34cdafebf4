//! A request over HTTP/2 is the same request as over HTTP/1.1: through to the upstream (which
//! still gets HTTP/1.1) and back, in the access log and the metrics; both protocols on one
//! listener with `http2 = true`, HTTP/1.1 only without it.

use super::client::H2;
use super::run;
use crate::support::{Sluice, Upstream, client, get};

/// One server with `http2 = true` in front of `upstream`: `/small` takes bodies of 4 bytes at
/// most, every other path goes upstream; the access log (stdout) shows what nginx would.
fn h2_server(upstream: &Upstream, http2: &str) -> String {
    format!(
        r#"access_log = "stdout"
log_format = '$remote_addr "$request" $status $server_protocol $host "$http_host" "$http_cookie" $cookie_b'
[admin]
[[servers]]
{http2}
proxy_pass = "http://{}"
[[servers.locations]]
path = "/small"
client_max_body_size = "4"
"#,
        upstream.addr
    )
}

/// curl over h2c: the status, headers and body of the upstream's echo come back, the upstream
/// got HTTP/1.1 with sluice's Host and the cookies as one field; a 413, which closes an HTTP/1.1
/// connection, comes without its `Connection: close` (nghttp shows the fields) and ends only its
/// stream; the access log says `HTTP/2.0`, the metrics count each stream. (One
/// curl per request: curl 7.88 fails a second transfer on a reused h2c connection, with nginx
/// too.)
#[tokio::test]
async fn curl_over_h2c_reaches_the_upstream_and_back() {
    let upstream = Upstream::start();
    let s = Sluice::start(&h2_server(&upstream, "http2 = true"));
    let base = format!("http://{}", s.addr());
    let curl = async |more: &[&str]| {
        let mut args = vec!["-sS", "--http2-prior-knowledge", "-D", "-"];
        args.extend(more);
        let out = run("curl", &args).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "curl {more:?} failed: {text}\n{err}");
        text
    };
    let echo = curl(&[
        "-H",
        "Cookie: a=1",
        "-H",
        "Cookie: b=2",
        &format!("{base}/echo?q=1"),
    ])
    .await;
    assert!(echo.starts_with("HTTP/2 200"), "{echo}");
    for want in [
        "GET /echo?q=1 HTTP/1.1",
        &format!("host: {}", upstream.addr),
        "cookie: a=1; b=2",
        "x-forwarded-for: 127.0.0.1",
    ] {
        assert!(
            echo.to_ascii_lowercase()
                .contains(&want.to_ascii_lowercase()),
            "{want:?} in {echo}"
        );
    }
    // A 413 from nghttp (curl 7.88, whose body may still be on its way, often reports the reset
    // that ends the rest of it as an error, with nginx too).
    let body = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(body.path(), "0123456789").unwrap();
    let body_path = body.path().to_str().unwrap();
    let out = run("nghttp", &["-v", "-d", body_path, &format!("{base}/small")]).await;
    let small = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{small}");
    assert!(small.contains(":status: 413"), "{small}");
    assert!(
        !small.to_ascii_lowercase().contains("connection:"),
        "{small}"
    );
    // The 413 ends its stream, not the connection.
    let mut c = H2::connect(s.addr(), client(1)).await;
    let post = http::Request::post(format!("http://{}/small", s.addr()))
        .body(())
        .unwrap();
    assert_eq!(
        c.start(post, Some(b"0123456789"))
            .await
            .reply()
            .await
            .status,
        413
    );
    assert_eq!(c.fetch("/after").await.status, 200);
    // The 413s never reached the upstream; the other two did.
    assert_eq!(upstream.hits(), 2);

    let port = s.addr().port();
    let access = s.stdout();
    for want in [
        format!(
            r#"127.0.0.1 "GET /echo?q=1 HTTP/2.0" 200 HTTP/2.0 127.0.0.1 "127.0.0.1:{port}" "a=1; b=2" 2"#
        ),
        format!(r#"127.0.0.1 "POST /small HTTP/2.0" 413 HTTP/2.0 127.0.0.1 "127.0.0.1:{port}""#),
        r#"127.0.0.1 "GET /after HTTP/2.0" 200 HTTP/2.0"#.to_owned(),
    ] {
        assert!(
            access.lines().any(|l| l.starts_with(&want)),
            "{want} in:\n{access}"
        );
    }
    let metrics = get(s.admin_addr(), "/metrics").await.body_text();
    for want in [
        "sluice_http_responses_total{code=\"200\"} 2",
        "sluice_http_responses_total{code=\"413\"} 2",
    ] {
        assert!(metrics.contains(want), "{want} in:\n{metrics}");
    }
}

/// HTTP/1.1 clients keep working on a listener with `http2 = true` (sluice tells them by their
/// first bytes; nginx 1.22's `listen … http2` would answer them with HTTP/2 frames). Without
/// `http2`, a client with prior knowledge is answered as HTTP/1.1 (a 400), which curl refuses.
#[tokio::test]
async fn http1_beside_http2_and_http2_off_by_default() {
    let upstream = Upstream::start();
    let both = Sluice::start(&h2_server(&upstream, "http2 = true"));
    let plain = Sluice::start(&h2_server(&upstream, ""));
    for s in [&both, &plain] {
        let r = get(s.addr(), "/one").await;
        assert_eq!(r.status, 200);
        assert!(
            r.body_text().starts_with("GET /one HTTP/1.1"),
            "{}",
            r.body_text()
        );
    }
    let url = |s: &Sluice| format!("http://{}/two", s.addr());
    let on = run(
        "curl",
        &[
            "-sS",
            "--http2-prior-knowledge",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version} %{http_code}",
            &url(&both),
        ],
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&on.stdout), "2 200");
    let off = run(
        "curl",
        &[
            "-sS",
            "--http2-prior-knowledge",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version} %{http_code}",
            &url(&plain),
        ],
    )
    .await;
    assert!(
        !off.status.success(),
        "HTTP/2 without http2 = true: {:?}",
        off
    );
    assert!(
        plain
            .stdout()
            .lines()
            .any(|l| l.contains(r#""PRI * HTTP/2.0" 400"#)),
        "{}",
        plain.stdout()
    );
    assert!(
        both.stdout()
            .contains(r#""GET /one HTTP/1.1" 200 HTTP/1.1"#),
        "{}",
        both.stdout()
    );
}

/// The request fields as HTTP/1.1 carries them, from a client that splits its cookies into
/// several fields and sends `te: trailers` (as gRPC clients do): `:authority` is `$host` and
/// `$http_host`, the cookies are one field (upstream and `$cookie_b`), `te` is not forwarded.
#[tokio::test]
async fn authority_is_the_host_and_split_cookies_are_joined() {
    let upstream = Upstream::start();
    let s = Sluice::start(&h2_server(&upstream, "http2 = true"));
    let mut c = H2::connect(s.addr(), client(1)).await;
    let req = http::Request::builder()
        .uri("http://Example.COM:8443/path")
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let r = c.start(req, None).await.reply().await;
    assert_eq!(r.status, 200);
    let echo = r.body_text();
    assert!(echo.starts_with("GET /path HTTP/1.1\r\n"), "{echo}");
    assert!(echo.contains("cookie: a=1; b=2\r\n"), "{echo}");
    assert!(!echo.contains("\r\nte:"), "{echo}");
    assert_eq!(echo.matches("cookie:").count(), 1, "{echo}");
    let access = s.stdout();
    assert!(
        access.contains(r#"127.0.0.1 "GET /path HTTP/2.0" 200 HTTP/2.0 example.com "Example.COM:8443" "a=1; b=2" 2"#),
        "{access}"
    );
}
