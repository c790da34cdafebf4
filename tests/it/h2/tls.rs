//! HTTP/2 over TLS: ALPN offers `h2` and `http/1.1` on an `ssl` listener (`http2` is on by
//! default there), only `http/1.1` with `http2 = false`; curl, openssl s_client and h2load see
//! it, and the article's burst over one TLS connection matches nginx's `listen … ssl http2`.

use std::net::SocketAddr;
use std::process::Command;

use super::client::H2;
use super::limits::burst_and_more;
use super::{NginxH2, run};
use crate::support::{
    KeyKind, Leaf, Sluice, TestCa, Upstream, assert_expected, assert_same, client, expect, timing,
};

/// The placeholder addresses the configurations write, relocated to reserved ports.
const ON: &str = "127.0.0.1:7443";
const OFF: &str = "127.0.0.1:7444";

fn cert_keys(leaf: &Leaf) -> String {
    format!(
        "ssl_certificate = \"{}\"\nssl_certificate_key = \"{}\"\n",
        leaf.chain.display(),
        leaf.key.display()
    )
}

/// curl with `args` to `https://localhost:PORT/`, trusting `ca`: `%{http_version}` and the body.
async fn curl(addr: SocketAddr, ca: &TestCa, args: &[&str]) -> (String, String) {
    let port = addr.port();
    let (resolve, url) = (
        format!("localhost:{port}:127.0.0.1"),
        format!("https://localhost:{port}/"),
    );
    let ca = ca.cert();
    let mut all = vec![
        "-sS",
        "--cacert",
        ca.to_str().unwrap(),
        "--resolve",
        &resolve,
    ];
    all.extend(["-w", "\n%{http_version}"]);
    all.extend(args);
    all.push(&url);
    let out = run("curl", &all).await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (body, version) = text.rsplit_once('\n').unwrap_or(("", &text));
    (version.to_owned(), body.to_owned())
}

/// What `openssl s_client -alpn OFFERED` says the server chose.
fn alpn(addr: SocketAddr, offered: &str) -> String {
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &addr.to_string(),
            "-servername",
            "localhost",
        ])
        .args(["-alpn", offered])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl s_client (the openssl package)");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.contains("ALPN"))
        .unwrap_or("no ALPN line")
        .trim()
        .to_owned()
}

/// An `ssl` server offers h2 by default and HTTP/2 is what curl then speaks (`$server_protocol`
/// HTTP/2.0, with `$ssl_protocol` and `$scheme` as on HTTP/1.1), HTTP/1.1 when the client asks
/// for it (and HTTP/1.0 for a client offering only that); with `http2 = false` only http/1.1
/// (and http/1.0) are offered and `curl --http2` gets HTTP/1.1.
#[tokio::test]
async fn alpn_offers_h2_unless_http2_is_off() {
    let ca = TestCa::new();
    let leaf = ca.leaf("localhost", &["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let location = "[[servers.locations]]\npath = \"/\"\n\
                    return = { status = 200, body = \"$server_protocol $ssl_protocol $scheme\" }\n";
    let s = Sluice::builder(&format!(
        "[[servers]]\nlisten = \"{ON} ssl\"\n{keys}{location}\
         [[servers]]\nlisten = \"{OFF} ssl\"\nhttp2 = false\n{keys}{location}",
        keys = cert_keys(&leaf)
    ))
    .relocate(ON)
    .relocate(OFF)
    .start();
    let (on, off) = (s.addr_of(0), s.addr_of(1));
    assert_eq!(
        curl(on, &ca, &["--http2"]).await,
        ("2".to_owned(), "HTTP/2.0 TLSv1.3 https".to_owned())
    );
    assert_eq!(
        curl(on, &ca, &["--http1.1"]).await,
        ("1.1".to_owned(), "HTTP/1.1 TLSv1.3 https".to_owned())
    );
    assert_eq!(
        curl(off, &ca, &["--http2"]).await,
        ("1.1".to_owned(), "HTTP/1.1 TLSv1.3 https".to_owned())
    );
    let (a_on, a_off) = (alpn(on, "h2,http/1.1"), alpn(off, "h2,http/1.1"));
    assert_eq!(a_on, "ALPN protocol: h2");
    assert_eq!(a_off, "ALPN protocol: http/1.1");
    // A client that offers only HTTP/1.0 is served, as nginx serves it.
    assert_eq!(alpn(on, "http/1.0"), "ALPN protocol: http/1.0");
    assert_eq!(
        curl(on, &ca, &["--http1.0"]).await,
        ("1".to_owned(), "HTTP/1.0 TLSv1.3 https".to_owned())
    );
}

/// The article's burst over one TLS connection (ALPN h2), against nginx 1.22's `listen … ssl
/// http2` with the same certificate: the same statuses and delays; h2load over TLS gets the
/// same counts from both.
#[tokio::test]
async fn burst_over_tls_matches_nginx_ssl_http2() {
    let _timing = timing();
    let ca = TestCa::new();
    let leaf = ca.leaf("localhost", &["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let (nu, su) = (Upstream::start(), Upstream::start());
    let nginx = NginxH2::listen(
        "ssl http2",
        "  limit_req_zone $binary_remote_addr zone=z:1m rate=2r/s;",
        &format!(
            "    ssl_certificate {}; ssl_certificate_key {};
    location /burst {{ limit_req zone=z burst=5; proxy_pass http://{up}; }}
    location /free {{ proxy_pass http://{up}; }}",
            leaf.chain.display(),
            leaf.key.display(),
            up = nu.addr
        ),
    );
    let sluice = Sluice::builder(&format!(
        r#"limit_req_log_level = "error"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "2r/s"
[[servers]]
listen = "{ON} ssl"
{keys}proxy_pass = "http://{up}"
[[servers.locations]]
path = "/burst"
limit_req = {{ zone = "z", burst = 5 }}
[[servers.locations]]
path = "/free"
"#,
        keys = cert_keys(&leaf),
        up = su.addr
    ))
    .relocate(ON)
    .start();
    // h2load at the same time, from another client address (127.0.0.1): its own bucket.
    let h2load = async |addr: SocketAddr| {
        let url = format!("https://localhost:{}/burst", addr.port());
        let out = run(
            "h2load",
            &[
                "-n10",
                "-c1",
                "-m10",
                "--connect-to",
                &addr.to_string(),
                &url,
            ],
        )
        .await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "h2load {url}: {text}");
        text.lines()
            .filter(|l| l.starts_with("status codes:") || l.starts_with("Application protocol:"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let ca_file = ca.cert();
    let (((n_burst, n_free, _), (s_burst, s_free, s_after)), (n, s)) = tokio::join!(
        async {
            tokio::join!(
                async {
                    burst_and_more(H2::connect_tls(nginx.addr(), client(2), &ca_file).await).await
                },
                async {
                    burst_and_more(H2::connect_tls(sluice.addr(), client(2), &ca_file).await).await
                },
            )
        },
        async { tokio::join!(h2load(nginx.addr()), h2load(sluice.addr())) },
    );
    let table = expect(&[(200, &[0, 500, 1000, 1500, 2000, 2500]), (503, &[0; 4])]);
    assert_expected("burst over TLS", "nginx", &n_burst, &table);
    assert_expected("burst over TLS", "sluice", &s_burst, &table);
    assert_same("burst over TLS", &n_burst, &s_burst);
    let one = std::slice::from_ref;
    assert_same(
        "/free beside the burst over TLS",
        one(&n_free),
        one(&s_free),
    );
    assert_eq!(s_after.status, 200);

    let want = [
        "Application protocol: h2",
        "status codes: 6 2xx, 0 3xx, 0 4xx, 4 5xx",
    ];
    assert_eq!(n, want, "nginx");
    assert_eq!(s, want, "sluice");
}
