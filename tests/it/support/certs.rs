//! Throw-away certificates for the TLS tests, made with the openssl command line in a
//! temporary directory: one test CA, and leaf certificates it signs for any names, with the
//! key type the test asks for. Nothing here is committed; every key dies with its directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A leaf key's algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA P-256 (nginx's and browsers' usual choice).
    EcdsaP256,
    /// RSA 2048.
    Rsa2048,
    Ed25519,
}

/// A test CA in its own directory, and the leaf certificates made with it.
pub struct TestCa {
    dir: tempfile::TempDir,
}

/// One leaf certificate: its PEM files (the chain file holds leaf then CA).
#[derive(Clone, Debug)]
pub struct Leaf {
    pub cert: PathBuf,
    /// The leaf followed by the CA certificate, as a server sends its chain.
    pub chain: PathBuf,
    pub key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl ({e}): it makes the tests' certificates"));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn key_args(kind: KeyKind) -> Vec<&'static str> {
    match kind {
        KeyKind::EcdsaP256 => vec!["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
        KeyKind::Rsa2048 => vec!["-newkey", "rsa:2048"],
        KeyKind::Ed25519 => vec!["-newkey", "ed25519"],
    }
}

impl TestCa {
    /// A new CA (ECDSA P-256, valid two days).
    pub fn new() -> TestCa {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut args = vec!["req", "-x509", "-nodes"];
        args.extend(key_args(KeyKind::EcdsaP256));
        args.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=sluice test CA",
        ]);
        openssl(dir.path(), &args);
        TestCa { dir }
    }

    /// The CA certificate (for `--cacert`, `proxy_ssl_trusted_certificate`, …).
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A server certificate for `names` (DNS names, or IP addresses), the first
    /// one also its CN, valid for `days` (negative: already expired).
    pub fn leaf(&self, file: &str, names: &[&str], kind: KeyKind) -> Leaf {
        self.leaf_with(file, names, kind, 2, "serverAuth")
    }

    /// A client certificate (extendedKeyUsage clientAuth) named `cn`.
    pub fn client(&self, file: &str, cn: &str) -> Leaf {
        self.leaf_with(file, &[cn], KeyKind::EcdsaP256, 2, "clientAuth")
    }

    /// A leaf valid `days` days from now.
    pub fn leaf_with(
        &self,
        file: &str,
        names: &[&str],
        kind: KeyKind,
        days: u32,
        usage: &str,
    ) -> Leaf {
        let d = self.dir.path();
        let (key, csr, crt, ext, chain) = (
            format!("{file}.key"),
            format!("{file}.csr"),
            format!("{file}.crt"),
            format!("{file}.ext"),
            format!("{file}.chain.crt"),
        );
        let sans: Vec<String> = names
            .iter()
            .map(|n| {
                if n.parse::<std::net::IpAddr>().is_ok() {
                    format!("IP:{n}")
                } else {
                    format!("DNS:{n}")
                }
            })
            .collect();
        std::fs::write(
            d.join(&ext),
            format!(
                "subjectAltName={}\nextendedKeyUsage={usage}\n",
                sans.join(",")
            ),
        )
        .expect("write the extensions file");
        let subj = format!("/CN={}", names.first().copied().unwrap_or("sluice test"));
        let mut args = vec!["req", "-nodes"];
        args.extend(key_args(kind));
        args.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(d, &args);
        let days = days.to_string();
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                &days,
                "-extfile",
                &ext,
            ],
        );
        let mut both = std::fs::read(d.join(&crt)).expect("read the leaf");
        both.extend(std::fs::read(d.join("ca.crt")).expect("read the CA"));
        std::fs::write(d.join(&chain), both).expect("write the chain");
        Leaf {
            cert: d.join(crt),
            chain: d.join(chain),
            key: d.join(key),
        }
    }
}
