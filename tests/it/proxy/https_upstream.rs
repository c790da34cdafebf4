//! HTTPS upstreams (`proxy_pass = "https://…"`) against real nginx with `ssl`: verification
//! (trusted CA, an unknown one, off), SNI and `proxy_ssl_name`, an IP address checked against
//! its IP SAN, client certificates, kept-alive TLS connections, handshake failures and
//! timeouts as nginx logs them, and a reload naming a missing file.
//!
//! nginx answers with what it saw of the TLS connection (`$ssl_server_name`, `$ssl_protocol`,
//! `$ssl_client_s_dn`, `$connection`, `$connection_requests`), so the body proves what sluice
//! sent; its `logs/tls.log` shows which requests reached it at all.

use super::*;
use crate::support::{KeyKind, Leaf, Nginx, TestCa, get};
use std::path::Path;

/// The body every TLS server of [`Backend`] answers with.
const SEEN: &str = "sni=$ssl_server_name proto=$ssl_protocol client=$ssl_client_s_dn \
                    conn=$connection req=$connection_requests uri=$request_uri\\n";

/// A TLS server of [`Backend`]: its certificate, whether it requires a client certificate
/// (`ssl_verify_client on`, else `optional`), its `ssl_protocols`, and more directives.
struct Tls<'a> {
    leaf: &'a Leaf,
    require_client: bool,
    /// nginx 1.22's default is TLSv1 to TLSv1.2 (1.23.4 added TLSv1.3).
    protocols: &'a str,
    extra: &'a str,
}

fn tls<'a>(leaf: &'a Leaf) -> Tls<'a> {
    Tls {
        leaf,
        require_client: false,
        protocols: "TLSv1.2 TLSv1.3",
        extra: "",
    }
}

/// Real nginx: a plain server (its address is [`Backend::plain`]) and one `listen … ssl`
/// server per [`Tls`], each on a reserved port, trusting `ca` for client certificates.
struct Backend {
    nginx: Nginx,
    ports: Vec<Port>,
}

impl Backend {
    fn start(ca: &TestCa, servers: &[Tls]) -> Backend {
        let ports: Vec<Port> = servers.iter().map(|_| Port::reserve()).collect();
        let mut conf = String::from(
            "log_format tls '$ssl_server_name $ssl_protocol $connection $connection_requests \
             \"$request\"';\nserver { location / { return 200 \"plain\\n\"; } }\n",
        );
        for (s, port) in servers.iter().zip(&ports) {
            conf.push_str(&format!(
                "server {{
  listen {addr} ssl;
  ssl_certificate {chain};
  ssl_certificate_key {key};
  ssl_client_certificate {ca};
  ssl_verify_client {verify};
  ssl_protocols {protocols};
  access_log logs/tls.log tls;
  {extra}
  location / {{ return 200 \"{SEEN}\"; }}
}}
",
                addr = port.addr(),
                chain = s.leaf.chain.display(),
                key = s.leaf.key.display(),
                ca = ca.cert().display(),
                verify = if s.require_client { "on" } else { "optional" },
                protocols = s.protocols,
                extra = s.extra,
            ));
        }
        // nginx opens every listener before it accepts on any: once the plain server (the
        // one the harness waits for) accepts, so do the TLS ones.
        let nginx = Nginx::start(&conf);
        Backend { nginx, ports }
    }

    /// The `i`-th TLS server's port.
    fn port(&self, i: usize) -> u16 {
        self.ports[i].number()
    }

    /// The plain HTTP server.
    fn plain(&self) -> SocketAddr {
        self.nginx.addr()
    }

    /// The requests that reached the TLS servers.
    fn tls_log(&self) -> String {
        std::fs::read_to_string(self.nginx.prefix().join("logs/tls.log")).unwrap_or_default()
    }
}

/// `path` as a TOML string.
fn toml_path(p: &Path) -> String {
    format!("\"{}\"", p.display())
}

/// A value of nginx's answer (`sni=…`): what follows `name=` up to the next space.
fn seen<'a>(body: &'a str, name: &str) -> &'a str {
    let at = body
        .find(&format!("{name}="))
        .unwrap_or_else(|| panic!("no {name}= in {body:?}"));
    body[at + name.len() + 1..]
        .split([' ', '\n'])
        .next()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_trusted_upstream_gets_sni_the_client_certificate_and_the_protocol_asked_for() {
    let ca = TestCa::new();
    let leaf = ca.leaf("up", &["localhost"], KeyKind::EcdsaP256);
    let me = ca.client("me", "sluice-client");
    let up = Backend::start(&ca, &[tls(&leaf)]);
    let toml = format!(
        r#"
proxy_ssl_trusted_certificate = {ca}
[[servers]]
proxy_ssl_certificate = {cert}
proxy_ssl_certificate_key = {key}
[[servers.locations]]
path = "/"
proxy_pass = "https://localhost:{port}"
[[servers.locations]]
path = "/v12/"
proxy_pass = "https://localhost:{port}/"
proxy_ssl_protocols = "TLSv1.2"
[[servers.locations]]
path = "/anonymous/"
proxy_pass = "https://localhost:{port}/"
proxy_ssl_server_name = false
"#,
        ca = toml_path(&ca.cert()),
        cert = toml_path(&me.cert),
        key = toml_path(&me.key),
        port = up.port(0),
    );
    let s = Sluice::in_process(&toml);

    let r = request(s.addr(), client(2), "GET", "/a?b=1", &[]).await;
    assert_eq!(r.status, 200, "{}", r.body_text());
    let body = r.body_text();
    assert_eq!(seen(&body, "sni"), "localhost", "{body}");
    assert_eq!(seen(&body, "proto"), "TLSv1.3", "{body}");
    assert_eq!(seen(&body, "client"), "CN=sluice-client", "{body}");
    assert_eq!(seen(&body, "uri"), "/a?b=1", "{body}");

    let body = request(s.addr(), client(2), "GET", "/v12/x", &[])
        .await
        .body_text();
    assert_eq!(seen(&body, "proto"), "TLSv1.2", "{body}");
    assert_eq!(seen(&body, "uri"), "/x", "{body}");

    // No SNI, still verified against the host name.
    let r = request(s.addr(), client(2), "GET", "/anonymous/y", &[]).await;
    assert_eq!(r.status, 200, "{}", r.body_text());
    assert_eq!(seen(&r.body_text(), "sni"), "", "{}", r.body_text());
}

/// Requests one after another on one client connection (so on one sluice worker); nginx's
/// `$connection` and `$connection_requests` show the TLS connection upstream.
async fn on_one_connection(addr: SocketAddr, requests: &[(&str, &str, &str)]) -> Vec<String> {
    let mut c = Reader::new(crate::support::connect(addr, client(3)).await);
    let mut bodies = Vec::new();
    for (method, path, body) in requests {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        c.write_all(head.as_bytes()).await.unwrap();
        bodies.push(read_one(&mut c).await);
    }
    bodies
}

/// The next response on `c`: its status line and body.
async fn read_one(c: &mut Reader<TcpStream>) -> String {
    let r = c.response().await;
    format!("{}\n{}", r.start_line(), r.body_text())
}

#[tokio::test]
async fn tls_connections_are_kept_alive_and_one_the_upstream_closed_is_not_reused() {
    let ca = TestCa::new();
    let leaf = ca.leaf("up", &["localhost"], KeyKind::EcdsaP256);
    let up = Backend::start(
        &ca,
        &[
            tls(&leaf),
            Tls {
                extra: "keepalive_timeout 300ms;",
                ..tls(&leaf)
            },
        ],
    );
    let toml = format!(
        r#"
[[servers]]
proxy_ssl_trusted_certificate = {ca}
proxy_pass = "https://localhost:{port}"
[[servers.locations]]
path = "/short/"
proxy_pass = "https://localhost:{short}/"
"#,
        ca = toml_path(&ca.cert()),
        port = up.port(0),
        short = up.port(1),
    );
    let s = Sluice::in_process(&toml);
    let gets = [("GET", "/1", ""), ("GET", "/2", ""), ("GET", "/3", "")];
    let bodies = on_one_connection(s.addr(), &gets).await;
    let conns: Vec<&str> = bodies.iter().map(|b| seen(b, "conn")).collect();
    let counts: Vec<&str> = bodies.iter().map(|b| seen(b, "req")).collect();
    assert!(bodies.iter().all(|b| b.contains(" 200 ")), "{bodies:?}");
    assert!(
        conns.iter().all(|c| *c == conns[0]),
        "one TLS connection: {bodies:?}"
    );
    assert_eq!(counts, ["1", "2", "3"], "{bodies:?}");

    // The second server closes an idle connection (close_notify, then FIN) after 300 ms. A
    // POST, which sluice would not send twice, must not meet that connection: a new one
    // carries it.
    let mut c = Reader::new(crate::support::connect(s.addr(), client(3)).await);
    c.write_all(b"GET /short/4 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let before = read_one(&mut c).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    c.write_all(b"POST /short/5 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        .await
        .unwrap();
    let after = read_one(&mut c).await;
    assert!(after.contains(" 200 "), "{after}");
    assert_ne!(
        seen(&before, "conn"),
        seen(&after, "conn"),
        "{before}\n{after}"
    );
    assert_eq!(seen(&after, "req"), "1", "{after}");
}

#[tokio::test]
async fn an_unknown_ca_is_502_with_nginx_verify_line_and_nothing_reaches_the_upstream() {
    let ca = TestCa::new();
    // Another CA of the same name ("sluice test CA"): found as the issuer, its signature fails.
    let namesake = TestCa::new();
    let leaf = ca.leaf("up", &["localhost"], KeyKind::EcdsaP256);
    let up = Backend::start(&ca, &[tls(&leaf)]);
    let toml = format!(
        r#"
[[servers]]
[[servers.locations]]
path = "/system/"
proxy_pass = "https://localhost:{port}/"
[[servers.locations]]
path = "/namesake/"
proxy_pass = "https://localhost:{port}/"
proxy_ssl_trusted_certificate = {namesake}
"#,
        namesake = toml_path(&namesake.cert()),
        port = up.port(0),
    );
    let s = Sluice::start(&toml);
    // Verified against the system's CAs (the default), which do not know the test CA.
    let r = request(s.addr(), client(2), "GET", "/system/x?y", &[]).await;
    assert_eq!(r.status, 502, "{}", r.body_text());
    let log = s.wait_log(|l| l.contains("verify error")).await;
    let line = log.lines().find(|l| l.contains("verify error")).unwrap();
    assert!(line.contains("[error] "), "{line}");
    let want = "upstream SSL certificate verify error: (20:unable to get local issuer certificate) \
                while SSL handshaking to upstream, client: 127.0.0.2, server: , request: \"GET \
                /system/x?y HTTP/1.1\"";
    assert!(line.contains(want), "{line}");
    let want = format!(
        "upstream: \"https://localhost:{}/x?y\", host: \"",
        up.port(0)
    );
    assert!(line.contains(&want), "{line}");

    let mark = s.log_mark();
    let r = request(s.addr(), client(2), "GET", "/namesake/", &[]).await;
    assert_eq!(r.status, 502, "{}", r.body_text());
    s.wait_log_after(mark, |l| {
        l.contains("upstream SSL certificate verify error: (7:certificate signature failure)")
    })
    .await;
    assert_eq!(up.tls_log(), "", "nginx served a request: {}", up.tls_log());
}

#[tokio::test]
async fn verify_off_is_warned_about_at_start_and_takes_any_certificate() {
    let ca = TestCa::new();
    let leaf = ca.leaf("up", &["elsewhere.test"], KeyKind::Rsa2048);
    let up = Backend::start(&ca, &[tls(&leaf)]);
    let toml = format!(
        r#"
[[servers]]
[[servers.locations]]
path = "/lab/"
proxy_pass = "https://localhost:{port}/"
proxy_ssl_verify = false
[[servers.locations]]
path = "/checked/"
proxy_pass = "https://localhost:{port}/"
proxy_ssl_trusted_certificate = {ca}
"#,
        ca = toml_path(&ca.cert()),
        port = up.port(0),
    );
    let s = Sluice::start(&toml);
    let log = s.wait_log(|l| l.contains("proxy_ssl_verify is off")).await;
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("proxy_ssl_verify"))
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert!(warned[0].contains("[warn]"), "{}", warned[0]);
    assert!(warned[0].contains("location \"/lab/\""), "{}", warned[0]);

    let r = request(s.addr(), client(2), "GET", "/lab/z", &[]).await;
    assert_eq!(r.status, 200, "{}", r.body_text());
    assert_eq!(seen(&r.body_text(), "sni"), "localhost");
    // The same certificate, verified: not for "localhost".
    let r = request(s.addr(), client(2), "GET", "/checked/z", &[]).await;
    assert_eq!(r.status, 502);
    let log = s.wait_log(|l| l.contains("does not match")).await;
    assert!(
        log.contains(
            "upstream SSL certificate does not match \"localhost\" while SSL handshaking to upstream"
        ),
        "{log}"
    );
}

#[tokio::test]
async fn proxy_ssl_name_chooses_the_name_sent_and_verified() {
    let ca = TestCa::new();
    let leaf = ca.leaf("backend", &["backend.internal"], KeyKind::Ed25519);
    let up = Backend::start(&ca, &[tls(&leaf)]);
    let toml = format!(
        r#"
proxy_ssl_trusted_certificate = {ca}
[[servers]]
proxy_ssl_name = "backend.internal"
[[servers.locations]]
path = "/right/"
proxy_pass = "https://127.0.0.1:{port}/"
[[servers.locations]]
path = "/wrong/"
proxy_pass = "https://127.0.0.1:{port}/"
proxy_ssl_name = "wrong.internal"
"#,
        ca = toml_path(&ca.cert()),
        port = up.port(0),
    );
    let s = Sluice::start(&toml);
    let r = request(s.addr(), client(2), "GET", "/right/", &[]).await;
    assert_eq!(r.status, 200, "{}", r.body_text());
    assert_eq!(seen(&r.body_text(), "sni"), "backend.internal");
    let r = request(s.addr(), client(2), "GET", "/wrong/", &[]).await;
    assert_eq!(r.status, 502);
    s.wait_log(|l| {
        l.contains("upstream SSL certificate does not match \"wrong.internal\"")
            && l.contains(&format!("upstream: \"https://127.0.0.1:{}/\"", up.port(0)))
    })
    .await;
}

#[tokio::test]
async fn an_address_is_verified_against_the_ip_san_and_sends_no_sni() {
    let ca = TestCa::new();
    let by_ip = ca.leaf("ip", &["127.0.0.1"], KeyKind::EcdsaP256);
    let by_name = ca.leaf("name", &["localhost"], KeyKind::EcdsaP256);
    let up = Backend::start(&ca, &[tls(&by_ip), tls(&by_name)]);
    let toml = format!(
        r#"
proxy_ssl_trusted_certificate = {ca}
[[servers]]
[[servers.locations]]
path = "/ip/"
proxy_pass = "https://127.0.0.1:{ip}/"
[[servers.locations]]
path = "/name-only/"
proxy_pass = "https://127.0.0.1:{name}/"
"#,
        ca = toml_path(&ca.cert()),
        ip = up.port(0),
        name = up.port(1),
    );
    let s = Sluice::in_process(&toml);
    let r = request(s.addr(), client(2), "GET", "/ip/", &[]).await;
    assert_eq!(r.status, 200, "{}", r.body_text());
    assert_eq!(seen(&r.body_text(), "sni"), "", "{}", r.body_text());
    // A certificate with no IP SAN does not verify for an address.
    let r = request(s.addr(), client(2), "GET", "/name-only/", &[]).await;
    assert_eq!(r.status, 502, "{}", r.body_text());
}

#[tokio::test]
async fn an_upstream_that_requires_a_client_certificate() {
    let ca = TestCa::new();
    let leaf = ca.leaf("up", &["localhost"], KeyKind::EcdsaP256);
    let me = ca.client("me", "sluice-client");
    let up = Backend::start(
        &ca,
        &[Tls {
            require_client: true,
            ..tls(&leaf)
        }],
    );
    let toml = format!(
        r#"
proxy_ssl_trusted_certificate = {ca}
[[servers]]
[[servers.locations]]
path = "/with/"
proxy_pass = "https://localhost:{port}/"
proxy_ssl_certificate = {cert}
proxy_ssl_certificate_key = {key}
[[servers.locations]]
path = "/without/"
proxy_pass = "https://localhost:{port}/"
"#,
        ca = toml_path(&ca.cert()),
        cert = toml_path(&me.chain),
        key = toml_path(&me.key),
        port = up.port(0),
    );
    let s = Sluice::in_process(&toml);
    let r = request(s.addr(), client(2), "GET", "/with/", &[]).await;
    assert_eq!(r.status, 200, "{}", r.body_text());
    assert_eq!(seen(&r.body_text(), "client"), "CN=sluice-client");
    // nginx's own answer: "400 No required SSL certificate was sent".
    let r = request(s.addr(), client(2), "GET", "/without/", &[]).await;
    assert_eq!(r.status, 400, "{}", r.body_text());
    assert!(
        r.body_text().contains("No required SSL certificate"),
        "{}",
        r.body_text()
    );
}

#[tokio::test]
async fn handshake_failures_and_timeouts_read_like_nginx() {
    let ca = TestCa::new();
    let leaf = ca.leaf("up", &["localhost"], KeyKind::EcdsaP256);
    let up = Backend::start(
        &ca,
        &[Tls {
            protocols: "TLSv1.2",
            ..tls(&leaf)
        }],
    );
    let (silent, _task) = silent_upstream();
    let toml = format!(
        r#"
proxy_ssl_trusted_certificate = {ca}
[[servers]]
[[servers.locations]]
path = "/plain/"
proxy_pass = "https://{plain}/"
[[servers.locations]]
path = "/silent/"
proxy_pass = "https://{silent}/"
proxy_connect_timeout = "300ms"
[[servers.locations]]
path = "/new/"
proxy_pass = "https://localhost:{old}/"
proxy_ssl_protocols = ["TLSv1.3"]
"#,
        ca = toml_path(&ca.cert()),
        plain = up.plain(),
        old = up.port(0),
    );
    let s = Sluice::start(&toml);
    // nginx answers a ClientHello on a plain port with a 400 page: not TLS.
    let r = request(s.addr(), client(2), "GET", "/plain/", &[]).await;
    assert_eq!(r.status, 502);
    s.wait_log(|l| l.contains("SSL_do_handshake() failed (SSL: ") && l.contains("[error]"))
        .await;
    // Connected, and no handshake within proxy_connect_timeout: 504, as a connect timeout.
    let start = Instant::now();
    let r = request(s.addr(), client(2), "GET", "/silent/", &[]).await;
    assert_eq!(r.status, 504, "{}", r.body_text());
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    s.wait_log(|l| {
        l.contains(
            "upstream timed out (110: Connection timed out) while SSL handshaking to upstream",
        )
    })
    .await;
    // No protocol in common: the upstream's alert.
    let r = request(s.addr(), client(2), "GET", "/new/", &[]).await;
    assert_eq!(r.status, 502, "{}", r.body_text());
    s.wait_log(|l| {
        l.contains(
            "SSL_do_handshake() failed (SSL: received fatal alert: ProtocolVersion) while SSL \
             handshaking to upstream",
        )
    })
    .await;
    assert_eq!(up.tls_log(), "", "nginx served a request: {}", up.tls_log());
}

#[tokio::test]
async fn a_reload_naming_a_missing_file_fails_at_its_key_and_requests_keep_working() {
    let ca = TestCa::new();
    let leaf = ca.leaf("up", &["localhost"], KeyKind::EcdsaP256);
    let up = Backend::start(&ca, &[tls(&leaf)]);
    let config = |trusted: &str| {
        format!(
            r#"
[[servers]]
proxy_pass = "https://localhost:{port}"
proxy_ssl_trusted_certificate = "{trusted}"
"#,
            port = up.port(0),
        )
    };
    let s = Sluice::start(&config(&ca.cert().display().to_string()));
    assert_eq!(get(s.addr(), "/").await.status, 200);

    // A relative path starts from the configuration file's directory.
    std::fs::copy(ca.cert(), s.dir().join("ca.pem")).unwrap();
    let log = s.reload(&config("ca.pem")).await;
    assert!(log.contains("reconfigured"), "{log}");
    assert_eq!(get(s.addr(), "/").await.status, 200);

    let log = s.reload(&config("missing/ca.pem")).await;
    let text = s.config_text();
    let (n, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.starts_with("proxy_ssl_trusted_certificate"))
        .unwrap();
    let col = line.find('"').unwrap() + 1;
    let want = format!(
        "sluice.toml:{}:{col}: \"proxy_ssl_trusted_certificate\": cannot load certificate \
         \"{}\": No such file or directory (os error 2)",
        n + 1,
        s.dir().join("missing/ca.pem").display()
    );
    assert!(log.contains(&want), "want {want}\nin\n{log}");
    assert!(log.contains("reload failed"), "{log}");
    let r = get(s.addr(), "/").await;
    assert_eq!(
        r.status,
        200,
        "still the old configuration: {}",
        r.body_text()
    );

    // Every problem at once, each at its key.
    let bad = format!(
        "{}proxy_ssl_protocols = \"TLSv1.1\"\nproxy_ssl_certificate = \"ca.pem\"\n",
        config("ca.pem")
    );
    let log = s.reload(&bad).await;
    let emerg: Vec<&str> = log.lines().filter(|l| l.contains("[emerg]")).collect();
    assert_eq!(emerg.len(), 2, "{log}");
    assert!(
        emerg[0].contains(":6:23: \"proxy_ssl_protocols\": \"TLSv1.1\" is not supported"),
        "{}",
        emerg[0]
    );
    assert!(
        emerg[1].contains(":7:25: no \"proxy_ssl_certificate_key\" is defined for certificate"),
        "{}",
        emerg[1]
    );
    assert_eq!(get(s.addr(), "/").await.status, 200);
}
