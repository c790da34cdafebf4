//! HTTP/3 (`listen = ["ADDR ssl", "ADDR quic"]`) with a real QUIC client: aioquic, driven by
//! tests/it/h3/client.py from the virtual environment scripts/test.sh makes
//! (`target/py-aioquic`, or `SLUICE_AIOQUIC_PYTHON`). Requests reach the upstream as the same
//! request over TCP does; limit_req counts a client's QUIC and TCP requests in one bucket and
//! delays each stream by itself; malformed heads are reset or refused and never forwarded; SNI
//! chooses the certificate; `quic_retry`, `http3 = false`, reload and graceful stop.

mod counting;
mod early;
mod floods;
mod head;
mod tuning;
mod workers;

use crate::support::{KeyKind, Leaf, Sluice, TestCa, Upstream, client};
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The placeholder address the configurations write; relocated to a reserved port, on TCP
/// and UDP alike.
const ADDR: &str = "127.0.0.1:7453";

/// The python with aioquic.
fn python() -> PathBuf {
    let path = std::env::var_os("SLUICE_AIOQUIC_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/py-aioquic/bin/python"),
        PathBuf::from,
    );
    assert!(
        path.exists(),
        "{} is missing: scripts/test.sh makes it (python3 -m venv target/py-aioquic && \
         target/py-aioquic/bin/pip install aioquic)",
        path.display()
    );
    path
}

/// One QUIC connection from `source` sending `spec` (see client.py): one JSON value per
/// request, then the connection's.
async fn h3(addr: SocketAddr, sni: &str, ca: &TestCa, source: IpAddr, spec: Value) -> Vec<Value> {
    h3_with(addr, (sni, ca), source, spec, &[]).await
}

/// [`h3`], with more of client.py's arguments (`--ticket FILE`, `--hold SECONDS`).
async fn h3_with(
    addr: SocketAddr,
    (sni, ca): (&str, &TestCa),
    source: IpAddr,
    spec: Value,
    args: &[&std::ffi::OsStr],
) -> Vec<Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/h3/client.py");
    let mut child = tokio::process::Command::new(python())
        .arg(script)
        .arg(addr.to_string())
        .args([
            "--sni",
            sni,
            "--bind",
            &source.to_string(),
            "--timeout",
            "8",
        ])
        .arg("--ca")
        .arg(ca.cert())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the aioquic client");
    let mut stdin = child.stdin.take().expect("stdin");
    tokio::io::AsyncWriteExt::write_all(&mut stdin, spec.to_string().as_bytes())
        .await
        .expect("spec");
    drop(stdin);
    let out = child.wait_with_output().await.expect("client output");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn status(v: &Value) -> Option<u64> {
    v["status"].as_u64()
}

fn header<'a>(v: &'a Value, name: &str) -> Option<&'a str> {
    v["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0] == name)
        .and_then(|h| h[1].as_str())
}

/// `curl` over TLS (TCP) from `source`: (status, body).
async fn curl(addr: SocketAddr, ca: &TestCa, source: IpAddr, path: &str) -> (u16, String) {
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "--max-time", "5", "-w", "\n%{http_code}", "--cacert"])
        .arg(ca.cert())
        .args(["--interface", &source.to_string(), "--resolve"])
        .arg(format!("h3.test:{}:127.0.0.1", addr.port()))
        .arg(format!("https://h3.test:{}{path}", addr.port()))
        .output()
        .await
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// A server named `names` on [`ADDR`] over TCP and QUIC, with `body` after its keys.
fn server(names: &str, leaf: &Leaf, keys: &str, body: &str) -> String {
    format!(
        r#"
[[servers]]
listen = ["{ADDR} ssl", "{ADDR} quic"]
server_name = "{names}"
ssl_certificate = "{cert}"
ssl_certificate_key = "{key}"
{keys}
{body}
"#,
        cert = leaf.chain.display(),
        key = leaf.key.display(),
    )
}

/// The certificate most tests serve: `h3.test`, ECDSA P-256, from `ca`.
fn leaf_for(ca: &TestCa) -> Leaf {
    ca.leaf("h3", &["h3.test"], KeyKind::EcdsaP256)
}

fn start(toml: &str) -> Sluice {
    Sluice::builder(toml).relocate(ADDR).start()
}

#[tokio::test]
async fn requests_over_quic_reach_the_upstream_as_over_tcp() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let up = Upstream::start();
    let locations = format!(
        "access_log = \"access.log\"\n\
         [[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://{}\"\n\
         [[servers.locations]]\npath = \"= /proto\"\n\
         return = {{ status = 200, body = \"$server_protocol $ssl_protocol $ssl_server_name $scheme\" }}\n",
        up.addr
    );
    let s = start(&server("h3.test", &leaf, "", &locations));
    let addr = s.addr();
    let spec = serde_json::json!([
        {"path": "/a?x=1", "headers": [["cookie", "a=1"], ["cookie", "b=2"], ["x-one", "1"]]},
        {"path": "/p", "method": "POST", "body": "hello", "headers": [["content-length", "5"]]},
        {"path": "/proto"},
    ]);
    let got = h3(addr, "h3.test", &ca, client(2), spec).await;
    assert_eq!(status(&got[0]), Some(200), "{got:?}");
    let echo = got[0]["body"].as_str().unwrap_or_default();
    // The upstream reads what it reads from a TCP client: `Host: $proxy_host`, the client in
    // X-Forwarded-For, the cookies joined into one field, no body framing for a GET.
    let tcp = curl(addr, &ca, client(2), "/a?x=1").await.1;
    let head = |t: &str| t.lines().next().unwrap_or_default().to_string();
    assert_eq!(head(echo), head(&tcp), "{echo} / {tcp}");
    assert!(echo.starts_with("GET /a?x=1 HTTP/1.1\r\n"), "{echo}");
    assert!(echo.contains(&format!("host: {}\r\n", up.addr)), "{echo}");
    assert!(echo.contains("x-forwarded-for: 127.0.0.2\r\n"), "{echo}");
    assert!(echo.contains("cookie: a=1; b=2\r\n"), "{echo}");
    assert!(echo.contains("x-one: 1\r\n"), "{echo}");
    assert!(
        !echo.contains("ransfer-Encoding") && !echo.to_lowercase().contains("content-length"),
        "a GET has no body: {echo}"
    );
    let post = got[1]["body"].as_str().unwrap_or_default();
    assert!(post.starts_with("POST /p HTTP/1.1\r\n"), "{post}");
    assert!(
        post.to_lowercase().contains("content-length: 5\r\n"),
        "{post}"
    );
    assert_eq!(
        got[2]["body"].as_str(),
        Some("HTTP/3.0 TLSv1.3 h3.test https")
    );
    assert!(header(&got[2], "date").is_some(), "{got:?}");
    assert_eq!(up.hits(), 3, "two over QUIC, one over TCP");
    let log = s.wait_lines("access.log", 4).await;
    for line in ["\"GET /a?x=1 HTTP/3.0\" 200", "\"POST /p HTTP/3.0\" 200"] {
        assert!(log.contains(line), "{line} in {log}");
    }
    assert!(log.starts_with("127.0.0.2 - - ["), "{log}");
}

#[tokio::test]
async fn limit_req_counts_a_clients_quic_and_tcp_requests_in_one_bucket() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let zone = "[zones.per_ip]\nsize = \"1m\"\nkey = \"$binary_remote_addr\"\nrate = \"6r/m\"\n";
    let body = "[[servers.locations]]\npath = \"/\"\n\
                limit_req = { zone = \"per_ip\", burst = 2, nodelay = true }\nlimit_req_status = 429\n\
                return = { status = 200, body = \"ok\" }\n";
    let s = start(&format!("{zone}{}", server("h3.test", &leaf, "", body)));
    let addr = s.addr();
    // Four at once from .2 over one connection: 1 + burst 2 pass, the fourth is refused.
    let spec = serde_json::json!([{"path": "/1"}, {"path": "/2"}, {"path": "/3"}, {"path": "/4"}]);
    let got = h3(addr, "h3.test", &ca, client(2), spec).await;
    let statuses: Vec<_> = got[..4].iter().map(status).collect();
    let passed = statuses.iter().filter(|s| **s == Some(200)).count();
    assert_eq!(passed, 3, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == Some(429)).count(), 1);
    let refused = got[..4]
        .iter()
        .find(|g| status(g) == Some(429))
        .unwrap_or(&got[0]);
    let retry: u64 = header(refused, "retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        (1..=10).contains(&retry),
        "an honest Retry-After: {refused}"
    );
    // The same client over TCP finds its bucket full; another client over QUIC does not.
    assert_eq!(curl(addr, &ca, client(2), "/tcp").await.0, 429);
    let other = h3(
        addr,
        "h3.test",
        &ca,
        client(3),
        serde_json::json!([{"path": "/"}]),
    )
    .await;
    assert_eq!(status(&other[0]), Some(200));
}

#[tokio::test]
async fn delays_hold_each_stream_by_itself() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let zone = "[zones.slow]\nsize = \"1m\"\nkey = \"$binary_remote_addr\"\nrate = \"10r/s\"\n";
    let body = "[[servers.locations]]\npath = \"/\"\n\
                limit_req = { zone = \"slow\", burst = 5 }\nreturn = { status = 200 }\n";
    let s = start(&format!("{zone}{}", server("h3.test", &leaf, "", body)));
    let spec = serde_json::json!([{"path": "/1"}, {"path": "/2"}, {"path": "/3"}, {"path": "/4"}]);
    let got = h3(s.addr(), "h3.test", &ca, client(4), spec).await;
    // nginx's leaky bucket: the n-th waits (n-1) × 100 ms; each stream answered in its turn.
    let mut ms: Vec<f64> = got[..4]
        .iter()
        .map(|g| g["ms"].as_f64().unwrap_or(-1.0))
        .collect();
    ms.sort_by(f64::total_cmp);
    for (i, m) in ms.iter().enumerate() {
        let want = i as f64 * 100.0;
        assert!(*m >= want - 15.0 && *m < want + 150.0, "stream {i}: {ms:?}");
    }
    assert!(got[..4].iter().all(|g| status(g) == Some(200)), "{got:?}");
}

#[tokio::test]
async fn malformed_heads_are_reset_or_refused_never_forwarded() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let up = Upstream::start();
    let body = format!(
        "[[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://{}\"\n",
        up.addr
    );
    let s = start(&server("h3.test", &leaf, "", &body));
    let pseudo = |path: &str| {
        vec![
            serde_json::json!([":method", "GET"]),
            serde_json::json!([":scheme", "https"]),
            serde_json::json!([":authority", "h3.test"]),
            serde_json::json!([":path", path]),
        ]
    };
    let with = |path: &str, extra: &[[&str; 2]]| {
        let mut h = pseudo(path);
        h.extend(extra.iter().map(|e| serde_json::json!(e)));
        serde_json::json!({"raw": true, "headers": h})
    };
    let spec = serde_json::json!([
        with("/upper", &[["X-Upper", "1"]]),
        with("/conn", &[["connection", "keep-alive"]]),
        with("/te", &[["te", "gzip"]]),
        with("/twocl", &[["content-length", "1"], ["content-length", "1"]]),
        with("/dots/../../x", &[]),
        {"path": "/short", "method": "POST", "body": "abc", "headers": [["content-length", "10"]]},
        {"path": "/long", "method": "POST", "body": "abcdef", "headers": [["content-length", "2"]]},
        with("/ok", &[]),
    ]);
    let got = h3(s.addr(), "h3.test", &ca, client(5), spec).await;
    const H3_MESSAGE_ERROR: u64 = 0x10e;
    for (i, what) in ["uppercase name", "connection field", "te: gzip"]
        .iter()
        .enumerate()
    {
        assert_eq!(
            got[i]["reset"].as_u64(),
            Some(H3_MESSAGE_ERROR),
            "{what}: {got:?}"
        );
    }
    assert_eq!(status(&got[3]), Some(400), "two Content-Length: {got:?}");
    assert_eq!(status(&got[4]), Some(400), "a path above /: {got:?}");
    // A body other than its Content-Length: malformed (RFC 9114 §4.1.2), reset; the upstream
    // never reads it.
    for (i, what) in [(5, "shorter"), (6, "longer")] {
        assert_eq!(
            got[i]["reset"].as_u64(),
            Some(H3_MESSAGE_ERROR),
            "{what}: {got:?}"
        );
    }
    assert_eq!(
        status(&got[7]),
        Some(200),
        "the connection goes on: {got:?}"
    );
    assert_eq!(up.hits(), 1, "only the good request reached the upstream");
    assert_eq!(got[8]["connection"], "open");
}

#[tokio::test]
async fn sni_chooses_the_certificate_and_http3_false_closes() {
    let ca = TestCa::new();
    let a = ca.leaf("a", &["a.test"], KeyKind::EcdsaP256);
    let b = ca.leaf("b", &["b.test"], KeyKind::Rsa2048);
    let answer = |n: &str| {
        format!(
            "[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200, body = \"{n} $ssl_server_name\" }}\n"
        )
    };
    let toml = [
        server("a.test", &a, "", &answer("a")),
        server("b.test", &b, "http3 = false", &answer("b")),
    ]
    .concat();
    let s = start(&toml);
    // aioquic verifies the certificate against the CA for the name it asked for.
    let got = h3(
        s.addr(),
        "a.test",
        &ca,
        client(6),
        serde_json::json!([{"path": "/"}]),
    )
    .await;
    assert_eq!(got[0]["body"].as_str(), Some("a a.test"), "{got:?}");
    let got = h3(
        s.addr(),
        "b.test",
        &ca,
        client(6),
        serde_json::json!([{"path": "/"}]),
    )
    .await;
    assert_eq!(status(&got[0]), None, "b has http3 = false: {got:?}");
    assert_eq!(
        got.last().map(|l| l["connection"].clone()),
        Some("closed".into())
    );
}

#[tokio::test]
async fn quic_retry_validates_the_address_first() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let body = "[[servers.locations]]\npath = \"/\"\nreturn = { status = 204 }\n";
    let s = start(&server("h3.test", &leaf, "quic_retry = true", body));
    let got = h3(
        s.addr(),
        "h3.test",
        &ca,
        client(7),
        serde_json::json!([{"path": "/"}]),
    )
    .await;
    assert_eq!(status(&got[0]), Some(204), "{got:?}");
    assert_eq!(got[1]["retried"], true, "{got:?}");
    let s2 = start(&server("h3.test", &leaf, "", body));
    let got = h3(
        s2.addr(),
        "h3.test",
        &ca,
        client(7),
        serde_json::json!([{"path": "/"}]),
    )
    .await;
    assert_eq!(got[1]["retried"], false, "no Retry unless asked: {got:?}");
}

#[tokio::test]
async fn reload_keeps_the_socket_and_a_stop_lets_streams_finish() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let up = Upstream::start_slow(Duration::from_millis(600));
    let body = |b: &str| {
        format!(
            "[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200, body = \"{b}\" }}\n\
             [[servers.locations]]\npath = \"/slow\"\nproxy_pass = \"http://{}\"\n",
            up.addr
        )
    };
    let toml = format!(
        "shutdown_timeout = \"5s\"\n{}",
        server("h3.test", &leaf, "", &body("one"))
    );
    let mut s = start(&toml);
    let addr = s.addr();
    let got = h3(
        addr,
        "h3.test",
        &ca,
        client(8),
        serde_json::json!([{"path": "/"}]),
    )
    .await;
    assert_eq!(got[0]["body"].as_str(), Some("one"));
    let toml = s.config_text().replace("body = \"one\"", "body = \"two\"");
    s.reload(&toml).await;
    let got = h3(
        addr,
        "h3.test",
        &ca,
        client(8),
        serde_json::json!([{"path": "/"}]),
    )
    .await;
    assert_eq!(got[0]["body"].as_str(), Some("two"), "{got:?}");
    // A slow request in flight when the stop comes still gets its answer.
    let stop = async {
        // Once the upstream has the request (the client's start-up takes a while).
        while up.hits() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        s.signal(libc::SIGTERM);
    };
    let call = h3(
        addr,
        "h3.test",
        &ca,
        client(8),
        serde_json::json!([{"path": "/slow"}]),
    );
    let (got, ()) = tokio::join!(call, stop);
    assert_eq!(status(&got[0]), Some(200), "{got:?}");
    assert!(
        s.wait_exit(Duration::from_secs(6)).await.is_some(),
        "stopped"
    );
}

/// The SPKI hash Chromium trusts a certificate by (`--ignore-certificate-errors-spki-list`).
fn spki_hash(cert: &std::path::Path) -> String {
    let script = format!(
        "openssl x509 -pubkey -noout -in '{}' | openssl pkey -pubin -outform der \
         | openssl dgst -sha256 -binary | base64",
        cert.display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("openssl");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The page at `url` as headless Chromium has it, forced onto QUIC for `origin` and trusting
/// `cert` by its key.
async fn chromium_over_quic(origin: &str, cert: &std::path::Path, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new("chromium")
        .args(["--headless=new", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--origin-to-force-quic-on={origin}"))
        .arg(format!(
            "--ignore-certificate-errors-spki-list={}",
            spki_hash(cert)
        ))
        .arg("--host-resolver-rules=MAP h3.test 127.0.0.1")
        .args(["--virtual-time-budget=3000", "--dump-dom", url])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("chromium within 60 s")
        .expect("chromium runs (scripts/test.sh installs Debian's chromium)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn chromium_loads_a_page_and_the_dashboard_over_quic() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    // The admin listener's dashboard, proxied through the quic listen: the browser's page and
    // its API calls all go over HTTP/3.
    const ADMIN: &str = "127.0.0.1:7454";
    let body = format!(
        "access_log = \"access.log\"\n\
         [[servers.locations]]\npath = \"= /proto\"\n\
         return = {{ status = 200, body = \"<html><body><p id=\\\"p\\\">$server_protocol</p></body></html>\", \
         headers = {{ \"Content-Type\" = \"text/html\" }} }}\n\
         [[servers.locations]]\npath = \"/\"\nlimit_req = {{ zone = \"z\", burst = 50, nodelay = true }}\n\
         proxy_pass = \"http://{ADMIN}\"\n"
    );
    let zone = "[zones.z]\nsize = \"1m\"\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\n";
    let toml = format!(
        "{zone}[admin]\nlisten = \"{ADMIN}\"\n{}",
        server("h3.test", &leaf, "", &body)
    );
    let s = Sluice::builder(&toml)
        .relocate(ADDR)
        .relocate(ADMIN)
        .start();
    let port = s.addr().port();
    let origin = format!("h3.test:{port}");
    let dom = chromium_over_quic(&origin, &leaf.chain, &format!("https://{origin}/proto")).await;
    assert!(dom.contains("<p id=\"p\">HTTP/3.0</p>"), "{dom}");
    let dom = chromium_over_quic(&origin, &leaf.chain, &format!("https://{origin}/")).await;
    // The page read the status API (through sluice, over QUIC) and shows zone z.
    assert!(
        dom.contains("data-polls=\"") && dom.contains("id=\"lr-z-rate\""),
        "{dom}"
    );
    let log = s.wait_lines("access.log", 3).await;
    let h3_lines = log
        .lines()
        .filter(|l| l.contains(" HTTP/3.0\" 200 "))
        .count();
    assert!(
        h3_lines >= 3,
        "the page and its API calls over HTTP/3: {log}"
    );
    assert!(log.contains("\"GET /proto HTTP/3.0\" 200"), "{log}");
    assert!(log.contains("HeadlessChrome"), "{log}");
    // Its SETTINGS, PRIORITY_UPDATEs and reserved frames stay within every budget.
    let errors = s.log();
    assert!(
        !errors.contains("flood detected") && !errors.contains("invalid HTTP/3"),
        "{errors}"
    );
}

/// The cases of nginx's h3_limit_req.t (nginx's test suite), against sluice: a body that
/// comes after the head, or long after it, or with it, or as an empty DATA frame, reaches the
/// upstream whole across limit_req's delay; a stream reset while delayed is logged 499 and
/// never forwarded.
#[tokio::test]
async fn nginx_h3_limit_req_cases() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let up = Upstream::answering(crate::support::Answer::Body, 200);
    let zone = "log_format = \"$status $request\"\n\
                [zones.req]\nsize = \"1m\"\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\n";
    let body = format!(
        "access_log = \"access.log\"\n\
         [[servers.locations]]\npath = \"/\"\nlimit_req = {{ zone = \"req\", burst = 2 }}\n\
         proxy_pass = \"http://{}\"\n",
        up.addr
    );
    let s = start(&format!("{zone}{}", server("h3.test", &leaf, "", &body)));
    let later = |at: f64, data: &str| serde_json::json!({"at": at, "data": data});
    let spec = serde_json::json!([
        {"path": "/a", "later": later(0.0, "TEST")},
        {"path": "/b", "later": later(1.1, "TEST")},
        {"path": "/c", "body": "TEST2"},
    ]);
    let got = h3(s.addr(), "h3.test", &ca, client(9), spec).await;
    let bodies: Vec<_> = got[..3]
        .iter()
        .map(|g| (status(g), g["body"].clone()))
        .collect();
    let want = [
        (Some(200), "TEST"),
        (Some(200), "TEST"),
        (Some(200), "TEST2"),
    ];
    for (g, w) in bodies.iter().zip(want) {
        assert_eq!((g.0, g.1.as_str()), (w.0, Some(w.1)), "{got:?}");
    }
    let ms = |g: &Value| g["ms"].as_f64().unwrap_or(0.0);
    assert!(ms(&got[2]) >= 1900.0, "the third waits its turn: {got:?}");
    let spec = serde_json::json!([
        {"path": "/d", "later": later(0.2, "")},
        {"path": "/e", "reset_at": 0.4},
        {"path": "/f"},
    ]);
    let hits = up.hits();
    let got = h3(s.addr(), "h3.test", &ca, client(10), spec).await;
    assert_eq!(
        (status(&got[0]), got[0]["body"].as_str()),
        (Some(200), Some("")),
        "{got:?}"
    );
    assert_eq!(got[1]["reset"], "sent");
    assert_eq!(status(&got[2]), Some(200), "{got:?}");
    assert_eq!(
        up.hits() - hits,
        2,
        "the reset request never reached the upstream"
    );
    let log = s.wait_lines("access.log", 6).await;
    assert!(log.contains("499 GET /e HTTP/3.0"), "{log}");
    assert_eq!(
        log.lines().filter(|l| l.starts_with("200 ")).count(),
        5,
        "{log}"
    );
}

#[tokio::test]
async fn a_migrated_connection_is_counted_by_its_new_address() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let body =
        "[[servers.locations]]\npath = \"/\"\nreturn = { status = 200, body = \"$remote_addr\" }\n";
    let s = start(&server("h3.test", &leaf, "", body));
    let spec = serde_json::json!([
        {"path": "/before"},
        {"path": "/after", "at": 0.3, "rebind": "127.0.0.12"},
    ]);
    let got = h3(s.addr(), "h3.test", &ca, client(11), spec).await;
    assert_eq!(got[0]["body"].as_str(), Some("127.0.0.11"), "{got:?}");
    assert_eq!(got[1]["body"].as_str(), Some("127.0.0.12"), "{got:?}");
}
