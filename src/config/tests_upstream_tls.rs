//! HTTPS upstreams' keys (`proxy_ssl_*`): read at the three levels and
//! inherited, their defaults (verification and SNI on, unlike nginx), one
//! client configuration per distinct setting, and every mistake, in the
//! text or in the files it names, as `FILE:LINE:COL`, all at once.

use super::tests::{errors, ok};
use super::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// Throw-away PEM files made with the openssl command line: a CA, a
/// self-signed client certificate and its key, another key, a file that is
/// not PEM, and one whose PEM is broken.
pub(super) struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    pub(super) fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
        for (key, crt, cn) in [
            ("ca.key", "ca.crt", "/CN=t-ca"),
            ("me.key", "me.crt", "/CN=me"),
        ] {
            let mut args = vec!["req", "-x509", "-nodes"];
            args.extend(ec);
            args.extend(["-keyout", key, "-out", crt, "-days", "2", "-subj", cn]);
            openssl(dir.path(), &args);
        }
        openssl(
            dir.path(),
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-out",
                "other.key",
            ],
        );
        std::fs::write(dir.path().join("text.pem"), "not PEM at all\n").unwrap();
        std::fs::write(
            dir.path().join("broken.pem"),
            "-----BEGIN CERTIFICATE-----\nno base64 here!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        Pki { dir }
    }

    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `name`'s path as a TOML string.
    pub(super) fn toml(&self, name: &str) -> String {
        format!("\"{}\"", self.path(name).display())
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl ({e}): it makes these tests' certificates"));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every error of `text` loaded (files read) as `t.toml`, rendered.
fn load_errors(text: &str) -> Vec<String> {
    match load_text("t.toml", text) {
        Ok(_) => vec![],
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

fn compile(text: &str) -> Config {
    let spec = load_text("t.toml", text).unwrap_or_else(|e| panic!("{e}"));
    Config::compile(spec, None).unwrap_or_else(|e| panic!("{e}"))
}

fn tls_of<'c>(c: &'c Config, path: &str) -> Option<&'c Arc<crate::upstream::Tls>> {
    let loc = c.servers[0]
        .locations
        .iter()
        .find(|l| l.path == path)
        .unwrap();
    loc.upstream_tls.as_ref()
}

#[test]
fn keys_are_read_at_every_level_and_inherited() {
    let pki = Pki::new();
    let text = format!(
        r#"proxy_ssl_trusted_certificate = {ca}
proxy_ssl_protocols = "TLSv1.3"
[[servers]]
listen = "127.0.0.1:1"
proxy_ssl_name = "backend.internal"
proxy_ssl_certificate = {cert}
proxy_ssl_certificate_key = {key}
[[servers.locations]]
path = "/a"
proxy_pass = "https://10.0.0.1:8443"
[[servers.locations]]
path = "/b"
proxy_pass = "https://up.example/"
proxy_ssl_verify = false
proxy_ssl_server_name = false
proxy_ssl_name = "[::1]"
proxy_ssl_protocols = ["TLSv1.2", "TLSv1.3"]
[[servers.locations]]
path = "/plain"
proxy_pass = "http://up.example"
"#,
        ca = pki.toml("ca.crt"),
        cert = pki.toml("me.crt"),
        key = pki.toml("me.key"),
    );
    let spec = ok(&text);
    let http = &spec.http.proxy_ssl;
    let t13 = vec![crate::tls::Protocol::Tls13];
    assert_eq!(http.protocols, Some(t13.clone()));
    let server = spec.servers[0].level.proxy_ssl.inherit(http);
    let a = spec.servers[0].locations[0]
        .level
        .proxy_ssl
        .inherit(&server);
    assert_eq!(a.verify, None);
    assert_eq!(a.protocols, Some(t13));
    assert_eq!(a.name.as_ref().unwrap().to_str(), "backend.internal");
    assert!(a.certificate.is_some() && a.certificate_key.is_some());
    let b = spec.servers[0].locations[1]
        .level
        .proxy_ssl
        .inherit(&server);
    assert_eq!((b.verify, b.server_name), (Some(false), Some(false)));
    assert_eq!(b.name.as_ref().unwrap().to_str(), "::1");
    assert_eq!(b.protocols.as_deref(), Some(crate::tls::DEFAULT_PROTOCOLS));

    let c = compile(&text);
    let a = tls_of(&c, "/a").unwrap();
    assert!(a.verify && a.sends_sni());
    assert_eq!(a.name().to_str(), "backend.internal");
    let b = tls_of(&c, "/b").unwrap();
    assert!(!b.verify && !b.sends_sni());
    assert!(tls_of(&c, "/plain").is_none(), "http:// speaks no TLS");
}

/// Unlike nginx, a location verifies and sends SNI unless told otherwise;
/// the name is proxy_pass's host (an address gets no SNI).
#[test]
fn verification_and_sni_are_on_by_default() {
    let pki = Pki::new();
    let c = compile(&format!(
        r#"proxy_ssl_trusted_certificate = {ca}
[[servers]]
listen = "127.0.0.1:1"
[[servers.locations]]
path = "/name"
proxy_pass = "https://up.example:8443/x/"
[[servers.locations]]
path = "/ip"
proxy_pass = "https://[::1]"
"#,
        ca = pki.toml("ca.crt")
    ));
    let name = tls_of(&c, "/name").unwrap();
    assert!(name.verify && name.sends_sni());
    assert_eq!(name.name().to_str(), "up.example");
    let ip = tls_of(&c, "/ip").unwrap();
    assert!(ip.verify && !ip.sends_sni());
    assert_eq!(ip.name().to_str(), "::1");
}

/// Locations with the same settings share one client configuration (and
/// so their kept-alive connections); other settings make another.
#[test]
fn one_client_configuration_per_distinct_setting() {
    let pki = Pki::new();
    let c = compile(&format!(
        r#"proxy_ssl_trusted_certificate = {ca}
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "https://a.example"
[[servers.locations]]
path = "/1"
[[servers.locations]]
path = "/2"
proxy_pass = "https://b.example"
[[servers.locations]]
path = "/3"
proxy_ssl_protocols = "TLSv1.2"
[[servers.locations]]
path = "/4"
proxy_ssl_server_name = false
[[servers.locations]]
path = "/5"
proxy_ssl_verify = false
"#,
        ca = pki.toml("ca.crt")
    ));
    let config = |p| tls_of(&c, p).unwrap().config().clone();
    assert!(
        Arc::ptr_eq(&config("/1"), &config("/2")),
        "names are not settings"
    );
    for other in ["/3", "/4", "/5"] {
        assert!(!Arc::ptr_eq(&config("/1"), &config(other)), "{other}");
    }
    assert!(!Arc::ptr_eq(&config("/3"), &config("/4")));
}

#[test]
fn mistakes_in_the_text_are_located_all_at_once() {
    let text = r#"proxy_ssl_protocols = "TLSv1.1 TLSv1.2"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "https://up.example"
proxy_ssl_verify = "yes"
proxy_ssl_name = "not a name"
[[servers.locations]]
path = "/"
proxy_ssl_protocols = []
proxy_ssl_trusted_certificate = ""
proxy_ssl_certificate = 7
[[servers.locations]]
path = "/x"
proxy_ssl_protocols = "SSLv9"
proxy_pass = "gopher://up.example"
"#;
    assert_eq!(
        errors(text),
        [
            "t.toml:1:23: \"proxy_ssl_protocols\": \"TLSv1.1\" is not supported: sluice speaks TLSv1.2 and TLSv1.3",
            "t.toml:5:20: \"proxy_ssl_verify\" must be true or false, found a string",
            "t.toml:6:18: invalid proxy_ssl_name \"not a name\" (expected a host name or an IP address)",
            "t.toml:9:23: \"proxy_ssl_protocols\": no protocol (expected \"TLSv1.2\" and/or \"TLSv1.3\")",
            "t.toml:10:33: \"proxy_ssl_trusted_certificate\" must be a file path",
            "t.toml:11:25: \"proxy_ssl_certificate\" must be a string, found an integer",
            "t.toml:14:23: \"proxy_ssl_protocols\": invalid protocol \"SSLv9\" (expected \"TLSv1.2\" and/or \"TLSv1.3\")",
            "t.toml:15:14: invalid URL prefix in \"gopher://up.example\" (expected \"http://HOST:PORT[/URI]\" or \"https://HOST:PORT[/URI]\")",
        ]
    );
}

/// The files are read when the configuration is loaded (start, reload):
/// each that cannot be read or is not the PEM its key needs, a certificate
/// without its key (or a key without its certificate, or not its key), at
/// the key naming it, with every other problem.
#[test]
fn file_problems_are_located_at_their_keys() {
    let pki = Pki::new();
    let text = format!(
        r#"proxy_ssl_trusted_certificate = "/nonexistent/ca.pem"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "https://up.example"
proxy_ssl_certificate = {text_pem}
proxy_ssl_certificate_key = {cert_as_key}
[[servers.locations]]
path = "/broken"
proxy_ssl_trusted_certificate = {broken}
[[servers.locations]]
path = "/lonely-cert"
proxy_ssl_certificate = {cert}
proxy_ssl_certificate_key = {other_key}
[[servers]]
listen = "127.0.0.1:2"
proxy_pass = "https://up.example"
proxy_ssl_certificate = {cert}
[[servers]]
listen = "127.0.0.1:3"
proxy_pass = "https://up.example"
proxy_ssl_certificate_key = {key}
"#,
        text_pem = pki.toml("text.pem"),
        cert_as_key = pki.toml("me.crt"),
        broken = pki.toml("broken.pem"),
        cert = pki.toml("me.crt"),
        other_key = pki.toml("other.key"),
        key = pki.toml("me.key"),
    );
    let p = |name| pki.path(name).display().to_string();
    let want = [
        "t.toml:1:33: \"proxy_ssl_trusted_certificate\": cannot load certificate \"/nonexistent/ca.pem\": No such file or directory (os error 2)".to_string(),
        format!("t.toml:5:25: \"proxy_ssl_certificate\": cannot load certificate \"{}\": no certificate in the file", p("text.pem")),
        format!("t.toml:6:29: \"proxy_ssl_certificate_key\": cannot load certificate key \"{}\": no PEM item of the expected type in the file", p("me.crt")),
        format!("t.toml:9:33: \"proxy_ssl_trusted_certificate\": cannot load certificate \"{}\": ", p("broken.pem")),
        format!("t.toml:13:29: \"proxy_ssl_certificate_key\": \"{}\" does not fit the certificate \"{}\": ", p("other.key"), p("me.crt")),
        format!("t.toml:17:25: no \"proxy_ssl_certificate_key\" is defined for certificate \"{}\"", p("me.crt")),
        format!("t.toml:21:29: no \"proxy_ssl_certificate\" is defined for key \"{}\"", p("me.key")),
    ];
    let got = load_errors(&text);
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (got, want) in got.iter().zip(&want) {
        assert!(
            got.starts_with(want.as_str()),
            "{got}\n  does not start with\n{want}"
        );
    }
    // Parsing alone stays pure: no file is looked at.
    assert!(parse_str("t.toml", &text).is_ok());
}

/// Without the file step (`parse_str`), the compiler reads the files
/// itself: a missing one fails the build, naming its key.
#[test]
fn the_compiler_reads_what_the_file_step_did_not() {
    let text = r#"[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "https://up.example"
proxy_ssl_trusted_certificate = "/nonexistent/ca.pem"
"#;
    let e = Config::compile(ok(text), None)
        .err()
        .expect("a missing file");
    assert_eq!(
        e.to_string(),
        "\"proxy_ssl_trusted_certificate\": cannot load certificate \"/nonexistent/ca.pem\": No such file or directory (os error 2)"
    );
    // A location that speaks plain HTTP never needs the file.
    let plain = text.replace("https://", "http://");
    assert!(Config::compile(ok(&plain), None).is_ok());
}

/// A relative path starts from the configuration file's directory.
#[test]
fn relative_paths_start_at_the_configuration_file() {
    let pki = Pki::new();
    let file = pki.path("sluice.toml").display().to_string();
    let text = "[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"https://up.example\"\nproxy_ssl_trusted_certificate = \"ca.crt\"\n";
    assert!(load_text(&file, text).is_ok());
    let e = load_text("elsewhere/sluice.toml", text)
        .err()
        .expect("not there");
    assert!(
        e.to_string()
            .contains("cannot load certificate \"elsewhere/ca.crt\""),
        "{e}"
    );
}
