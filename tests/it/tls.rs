//! TLS termination with real clients: curl and `openssl s_client` against the real binary.
//! SNI chooses the server and its certificate among several on one address (ECDSA, RSA and
//! Ed25519 keys, a chain), `ssl_protocols` limits the versions, plain HTTP on the port gets
//! nginx's 400, a failed handshake is one info line, and certificates are read again on
//! reload: a bad one keeps the old, a new one is served from the next handshake, and handshakes
//! never fail while reloads come and go.

use crate::support::{KeyKind, Leaf, Sluice, TestCa};
use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::Duration;

/// The placeholder address the configurations write; relocated to a reserved port.
const ADDR: &str = "127.0.0.1:7443";

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?} ({e}): curl and openssl are needed"))
}

/// `curl` over TLS to `name` (resolved to `addr`), trusting `ca`: (status, body).
fn curl(addr: SocketAddr, name: &str, ca: &TestCa, path: &str, extra: &[&str]) -> (u16, String) {
    let out = run(Command::new("curl")
        .args(["-sS", "--max-time", "5", "-w", "\n%{http_code}", "--cacert"])
        .arg(ca.cert())
        .arg("--resolve")
        .arg(format!("{name}:{}:127.0.0.1", addr.port()))
        .args(extra)
        .arg(format!("https://{name}:{}{path}", addr.port())));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// `openssl s_client` to `addr` with SNI `name` (if any) and `extra` options: its stdout and
/// stderr, and whether it connected.
fn s_client(addr: SocketAddr, name: Option<&str>, extra: &[&str]) -> (bool, String) {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-connect", &addr.to_string()])
        .args(["-showcerts", "-verify_quiet"]);
    if let Some(n) = name {
        cmd.args(["-servername", n]);
    } else {
        cmd.arg("-noservername");
    }
    let child = cmd
        .args(extra)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("openssl s_client");
    let out = child.wait_with_output().expect("openssl s_client output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.success() && text.contains("BEGIN CERTIFICATE"),
        text,
    )
}

/// The subject CN of the first certificate s_client printed.
fn served_cn(text: &str) -> Option<String> {
    text.lines()
        .find(|l| l.trim_start().starts_with("0 s:"))
        .and_then(|l| l.split("CN = ").nth(1).or_else(|| l.split("CN=").nth(1)))
        .map(|cn| cn.split(',').next().unwrap_or(cn).trim().to_string())
}

/// A server on [`ADDR`] with `ssl`, named `names`, answering `NAME proto sni scheme`.
fn server(names: &str, leaf: &Leaf, extra: &str) -> String {
    let first = names.split_whitespace().next().unwrap_or("");
    format!(
        r#"
[[servers]]
listen = "{ADDR} ssl{extra}"
server_name = "{names}"
ssl_certificate = "{cert}"
ssl_certificate_key = "{key}"
[[servers.locations]]
path = "/"
return = {{ status = 200, body = "{first} $ssl_protocol [$ssl_server_name] $scheme $https $server_name\n" }}
"#,
        cert = leaf.chain.display(),
        key = leaf.key.display(),
    )
}

#[tokio::test]
async fn sni_chooses_the_server_and_its_certificate() {
    let ca = TestCa::new();
    let a = ca.leaf("a", &["a.test", "*.a.test"], KeyKind::EcdsaP256);
    let b = ca.leaf("b", &["b.test"], KeyKind::Rsa2048);
    let c = ca.leaf("c", &["c.test"], KeyKind::Ed25519);
    let toml = [
        server("a.test *.a.test", &a, ""),
        server("b.test", &b, " default_server"),
        server("c.test", &c, ""),
    ]
    .concat();
    let s = Sluice::builder(&toml).relocate(ADDR).start();
    let addr = s.addr();

    // Each name gets its own server's answer over its own certificate (curl verifies it).
    let (status, body) = curl(addr, "a.test", &ca, "/", &[]);
    assert_eq!(
        (status, body.as_str()),
        (200, "a.test TLSv1.3 [a.test] https on a.test\n")
    );
    let (status, body) = curl(addr, "www.a.test", &ca, "/", &[]);
    assert_eq!(
        (status, body.as_str()),
        (200, "a.test TLSv1.3 [www.a.test] https on a.test\n")
    );
    let (status, body) = curl(addr, "b.test", &ca, "/", &["--tlsv1.2", "--tls-max", "1.2"]);
    assert_eq!(
        (status, body.as_str()),
        (200, "b.test TLSv1.2 [b.test] https on b.test\n")
    );
    let (status, body) = curl(addr, "c.test", &ca, "/", &[]);
    assert_eq!(
        (status, body.as_str()),
        (200, "c.test TLSv1.3 [c.test] https on c.test\n")
    );

    // openssl sees the certificate SNI chose, and the whole chain (leaf, then the CA).
    for (name, cn) in [
        (Some("a.test"), "a.test"),
        (Some("x.a.test"), "a.test"),
        (Some("c.test"), "c.test"),
        // An unknown name, or none: the default server's.
        (Some("unknown.test"), "b.test"),
        (None, "b.test"),
    ] {
        let (ok, text) = s_client(addr, name, &[]);
        assert!(ok, "s_client {name:?}: {text}");
        assert_eq!(served_cn(&text).as_deref(), Some(cn), "{name:?}: {text}");
        assert!(text.contains(" 1 s:"), "the chain has the CA too: {text}");
    }

    // Host chooses the server of a request; SNI, when Host matches none.
    let (_, body) = curl(addr, "a.test", &ca, "/", &["-H", "Host: c.test"]);
    assert!(body.starts_with("c.test "), "{body}");
    let (_, body) = curl(addr, "a.test", &ca, "/", &["-H", "Host: nowhere.test"]);
    assert!(body.starts_with("a.test "), "{body}");
}

#[tokio::test]
async fn ssl_protocols_limit_the_versions() {
    let ca = TestCa::new();
    let only13 = ca.leaf("only13", &["new.test"], KeyKind::EcdsaP256);
    let both = ca.leaf("both", &["any.test"], KeyKind::EcdsaP256);
    let toml = format!(
        "{}ssl_protocols = \"TLSv1.3\"\n{}",
        server("new.test", &only13, "")
            .split_once("[[servers.locations]]")
            .map(|(a, _)| a.to_string())
            .unwrap_or_default(),
        "[[servers.locations]]\npath = \"/\"\nreturn = { status = 200 }\n"
    ) + &server("any.test", &both, "");
    let s = Sluice::builder(&toml).relocate(ADDR).start();
    let addr = s.addr();
    let (ok, text) = s_client(addr, Some("new.test"), &["-tls1_2"]);
    assert!(!ok, "TLSv1.2 to a TLSv1.3-only server: {text}");
    let (ok, text) = s_client(addr, Some("new.test"), &["-tls1_3"]);
    assert!(ok && text.contains("TLSv1.3"), "{text}");
    let (ok, text) = s_client(addr, Some("any.test"), &["-tls1_2"]);
    assert!(ok && text.contains("TLSv1.2"), "{text}");
    // The refusal is one info line, as nginx logs a failed handshake.
    let log = s
        .wait_log(|l| l.contains("SSL_do_handshake() failed"))
        .await;
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("SSL_do_handshake"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(
        lines[0].contains("[info]") && lines[0].contains("SSL_do_handshake() failed (rustls: "),
        "{log}"
    );
    assert!(
        lines[0].contains(&format!("client: 127.0.0.1, server: {addr}")),
        "{log}"
    );
}

#[tokio::test]
async fn plain_http_to_the_tls_port_gets_nginx_400() {
    let ca = TestCa::new();
    let leaf = ca.leaf("p", &["p.test"], KeyKind::EcdsaP256);
    let s = Sluice::builder(&server("p.test", &leaf, ""))
        .relocate(ADDR)
        .start();
    let out = run(Command::new("curl")
        .args(["-s", "--max-time", "5", "-w", "\n%{http_code}"])
        .arg(format!("http://127.0.0.1:{}/", s.addr().port())));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.ends_with("\n400"), "{text}");
    assert!(
        text.contains("The plain HTTP request was sent to HTTPS port"),
        "{text}"
    );
    let log = s
        .wait_log(|l| l.contains("client sent plain HTTP request to HTTPS port"))
        .await;
    assert!(log.contains("[info]"), "{log}");
    // The port still speaks TLS to the next client.
    assert_eq!(curl(s.addr(), "p.test", &ca, "/", &[]).0, 200);
}

/// The serial number of the certificate s_client got for `name`.
fn served_serial(addr: SocketAddr, name: &str) -> String {
    let (ok, text) = s_client(addr, Some(name), &[]);
    assert!(ok, "{text}");
    let pem: String = text
        .split("-----BEGIN CERTIFICATE-----")
        .nth(1)
        .and_then(|rest| rest.split("-----END CERTIFICATE-----").next())
        .map(|b| format!("-----BEGIN CERTIFICATE-----{b}-----END CERTIFICATE-----\n"))
        .expect("a certificate");
    let mut child = Command::new("openssl")
        .args(["x509", "-noout", "-serial"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("openssl x509");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(pem.as_bytes())
        .expect("write the certificate");
    let out = child.wait_with_output().expect("openssl x509 output");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn serial_of(leaf: &Leaf) -> String {
    let out = run(Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-in"])
        .arg(&leaf.cert));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test]
async fn certificates_are_read_again_on_reload() {
    let ca = TestCa::new();
    let first = ca.leaf("first", &["r.test"], KeyKind::EcdsaP256);
    let second = ca.leaf("second", &["r.test"], KeyKind::Rsa2048);
    let s = Sluice::builder(&server("r.test", &first, ""))
        .relocate(ADDR)
        .start();
    let addr = s.addr();
    let listen = |toml: String| toml.replace(ADDR, &addr.to_string());
    assert_eq!(served_serial(addr, "r.test"), serial_of(&first));

    // A missing certificate: the reload fails with FILE:LINE:COL and the file's error, and the
    // old certificate is still served.
    let missing = Leaf {
        cert: ca.dir().join("missing.crt"),
        chain: ca.dir().join("missing.crt"),
        key: first.key.clone(),
    };
    let log = s.reload(&listen(server("r.test", &missing, ""))).await;
    assert!(log.contains("reload failed"), "{log}");
    assert!(
        log.contains("sluice.toml:5:19: \"ssl_certificate\": cannot load certificate")
            && log.contains("missing.crt")
            && log.contains("No such file or directory"),
        "{log}"
    );
    assert_eq!(served_serial(addr, "r.test"), serial_of(&first));

    // A key that is not the certificate's: refused the same way.
    let mismatched = Leaf {
        key: second.key.clone(),
        ..first.clone()
    };
    let log = s.reload(&listen(server("r.test", &mismatched, ""))).await;
    assert!(
        log.contains("reload failed") && log.contains("does not match its key"),
        "{log}"
    );
    assert_eq!(curl(addr, "r.test", &ca, "/", &[]).0, 200);

    // A good new certificate is served from the next handshake.
    let log = s.reload(&listen(server("r.test", &second, ""))).await;
    assert!(log.contains("reconfigured:"), "{log}");
    assert_eq!(served_serial(addr, "r.test"), serial_of(&second));
    assert_eq!(curl(addr, "r.test", &ca, "/", &[]).0, 200);
}

#[tokio::test]
async fn handshakes_never_fail_while_certificates_reload() {
    let ca = TestCa::new();
    let leaves = [
        ca.leaf("one", &["load.test"], KeyKind::EcdsaP256),
        ca.leaf("two", &["load.test"], KeyKind::EcdsaP256),
    ];
    let s = Sluice::builder(&server("load.test", &leaves[0], ""))
        .relocate(ADDR)
        .start();
    let addr = s.addr();
    // 150 sequential curl runs, each a new connection and a full handshake, verified.
    let (ca_file, port) = (ca.cert(), addr.port());
    let load = std::thread::spawn(move || {
        let script = format!(
            "for i in $(seq 150); do curl -s -o /dev/null -w '%{{http_code}}\\n' --max-time 5 \
             --cacert {} --resolve load.test:{port}:127.0.0.1 https://load.test:{port}/; done",
            ca_file.display()
        );
        let out = Command::new("bash")
            .args(["-c", &script])
            .output()
            .expect("bash");
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    let mut reloads = 0;
    while !load.is_finished() {
        let leaf = &leaves[(reloads + 1) % 2];
        let log = s
            .reload(&server("load.test", leaf, "").replace(ADDR, &addr.to_string()))
            .await;
        assert!(log.contains("reconfigured:"), "{log}");
        reloads += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let codes = load.join().expect("the load thread");
    let counts = codes.lines().fold((0, 0), |(ok, bad), c| {
        if c == "200" {
            (ok + 1, bad)
        } else {
            (ok, bad + 1)
        }
    });
    assert_eq!(counts, (150, 0), "{reloads} reloads; codes:\n{codes}");
    assert!(
        reloads >= 3,
        "only {reloads} reloads happened during the load"
    );
    let log = s.log();
    assert!(!log.contains("SSL_do_handshake"), "{log}");
}

#[test]
fn check_shows_the_certificate_and_refuses_a_wrong_key() {
    let ca = TestCa::new();
    let leaf = ca.leaf("k", &["k.test"], KeyKind::EcdsaP256);
    let other = ca.leaf("o", &["o.test"], KeyKind::EcdsaP256);
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("tls.toml");
    std::fs::write(&file, server("k.test", &leaf, "")).expect("write");
    let out = run(Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check", "--config"])
        .arg(&file));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("(2 in chain, key matches, expires ")
            && text.contains(" day(s)) protocols TLSv1.2 TLSv1.3 http2 on"),
        "{text}"
    );
    let wrong = Leaf {
        key: other.key.clone(),
        ..leaf
    };
    std::fs::write(&file, server("k.test", &wrong, "")).expect("write");
    let out = run(Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check", "--config"])
        .arg(&file));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        err.contains("tls.toml:5:19: \"ssl_certificate\": certificate ")
            && err.contains("does not match its key"),
        "{err}"
    );
}

#[tokio::test]
async fn watch_reloads_when_a_certificate_is_renewed() {
    let ca = TestCa::new();
    let old = ca.leaf("old", &["w.test"], KeyKind::EcdsaP256);
    let new = ca.leaf("new", &["w.test"], KeyKind::EcdsaP256);
    // The configuration names the "live" files, as certbot's live/ directory.
    let live = tempfile::tempdir().expect("temp dir");
    let install = |from: &Leaf| {
        for (src, name) in [(&from.key, "live.key"), (&from.chain, "live.crt")] {
            let tmp = live.path().join(format!("{name}.tmp"));
            std::fs::copy(src, &tmp).expect("copy");
            std::fs::rename(&tmp, live.path().join(name)).expect("rename");
        }
    };
    install(&old);
    let named = Leaf {
        cert: live.path().join("live.crt"),
        chain: live.path().join("live.crt"),
        key: live.path().join("live.key"),
    };
    let s = Sluice::builder(&format!("watch = true\n{}", server("w.test", &named, "")))
        .relocate(ADDR)
        .start();
    let addr = s.addr();
    assert_eq!(served_serial(addr, "w.test"), serial_of(&old));
    install(&new);
    let want = serial_of(&new);
    crate::support::eventually(
        "the renewed certificate to be served",
        Duration::from_secs(10),
        async || (served_serial(addr, "w.test") == want).then_some(()),
    )
    .await;
    assert!(s.log().contains("live."), "{}", s.log());
}

#[tokio::test]
async fn the_example_tls_config_runs_with_the_script_made_certificate() {
    // Its assertions time the article's delays: apart from the heavy tests.
    let _timing = crate::support::timing();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().expect("temp dir");
    let certs = tmp.path().join("tls");
    let out = run(Command::new(repo.join("scripts/tls-cert.sh")).arg(&certs));
    assert!(out.status.success(), "scripts/tls-cert.sh: {out:?}");
    let toml = std::fs::read_to_string(repo.join("config/tls.toml"))
        .expect("config/tls.toml")
        .replace("\"tls/", &format!("\"{}/", certs.display()));
    let s = Sluice::builder(&toml)
        .relocate("127.0.0.1:7443")
        .relocate("127.0.0.1:7080")
        .relocate("127.0.0.1:7471")
        .start();
    let (tls, plain) = (s.addr_of(0), s.addr_of(1));
    let ca = |args: &[&str]| {
        let out = run(Command::new("curl")
            .args([
                "-s",
                "--max-time",
                "5",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
            ])
            .arg("--cacert")
            .arg(certs.join("ca.crt"))
            .arg("--resolve")
            .arg(format!("localhost:{}:127.0.0.1", tls.port()))
            .args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The article's burst as the README shows it: 10 streams on one HTTP/2 connection; six
    // pass, five of them delayed by 500 ms steps, four are rejected at once.
    let out = run(Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "10",
            "--http2",
            "--parallel",
            "--parallel-max",
            "10",
        ])
        .args([
            "-w",
            "%{http_version} %{http_code} %{time_total}\\n",
            "--cacert",
        ])
        .arg(certs.join("ca.crt"))
        .arg("--resolve")
        .arg(format!("localhost:{}:127.0.0.1", tls.port()))
        .args(["-o", "/dev/null"].repeat(10))
        .arg(format!("https://localhost:{}/burst?[1-10]", tls.port())));
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut rows: Vec<(String, f64)> = out
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (version, code, t) = (w.next()?, w.next()?, w.next()?);
            Some((format!("{version} {code}"), t.parse().ok()?))
        })
        .collect();
    rows.sort_by(|a, b| a.1.total_cmp(&b.1));
    let count = |code: &str| rows.iter().filter(|r| r.0 == code).count();
    assert_eq!((count("2 200"), count("2 429")), (6, 4), "{out}");
    // The 200s delayed by the bucket: never early; late only by what a loaded machine adds.
    let passed: Vec<f64> = rows
        .iter()
        .filter(|r| r.0 == "2 200")
        .map(|r| r.1)
        .collect();
    for (i, t) in passed.iter().enumerate() {
        let want = 0.5 * i as f64;
        assert!(
            *t > want - 0.1 && *t < want + 0.35,
            "200 number {i} at {t} s, not {want} s: {out}"
        );
    }
    assert_eq!(
        ca(&[&format!("https://localhost:{}/burst", tls.port())]),
        "200"
    );
    // The plain server sends clients to the TLS one.
    let redirect = run(Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{redirect_url}",
        ])
        .arg(format!("http://127.0.0.1:{}/x?y=1", plain.port())));
    assert_eq!(
        String::from_utf8_lossy(&redirect.stdout),
        "301 https://127.0.0.1:7443/x?y=1"
    );
}
