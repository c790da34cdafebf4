//! TLS for the client side of sluice: a server's certificate and key read
//! from PEM files, the protocol versions it speaks, and the rustls server
//! configuration built from them.
//!
//! Why a module of its own, below `config`: a certificate is read (and its
//! key checked against it) when the configuration is loaded, so that a bad
//! file is a `FILE:LINE:COL` error at start or reload and never a failure at
//! the first handshake; the server then only picks the configuration a
//! ClientHello's name selects. rustls with ring only: no OpenSSL.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::ServerConfig;
use rustls::sign::CertifiedKey;
use std::path::Path;
use std::sync::Arc;

/// A protocol version `ssl_protocols` may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    Tls12,
    Tls13,
}

impl Protocol {
    /// nginx's name, also `$ssl_protocol`'s value.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tls12 => "TLSv1.2",
            Protocol::Tls13 => "TLSv1.3",
        }
    }

    /// The version a connection negotiated.
    pub fn of(v: rustls::ProtocolVersion) -> Option<Protocol> {
        match v {
            rustls::ProtocolVersion::TLSv1_2 => Some(Protocol::Tls12),
            rustls::ProtocolVersion::TLSv1_3 => Some(Protocol::Tls13),
            _ => None,
        }
    }
}

/// nginx's `ssl_protocols` list (`"TLSv1.2 TLSv1.3"`): the versions rustls
/// speaks; older ones are refused by name rather than silently dropped.
pub fn parse_protocols(s: &str) -> Result<Vec<Protocol>, String> {
    let mut out = Vec::new();
    for word in s.split_ascii_whitespace() {
        let p = match word {
            "TLSv1.2" => Protocol::Tls12,
            "TLSv1.3" => Protocol::Tls13,
            "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => {
                return Err(format!(
                    "\"{word}\" is not supported: sluice speaks TLSv1.2 and TLSv1.3"
                ));
            }
            _ => {
                return Err(format!(
                    "invalid protocol \"{word}\" (expected \"TLSv1.2\" and/or \"TLSv1.3\")"
                ));
            }
        };
        if !out.contains(&p) {
            out.push(p);
        }
    }
    if out.is_empty() {
        return Err("no protocol (expected \"TLSv1.2\" and/or \"TLSv1.3\")".into());
    }
    out.sort();
    Ok(out)
}

/// What a client connection's handshake settled: `$ssl_protocol`,
/// `$ssl_server_name`, `$ssl_cipher`, `$ssl_early_data`, and `$scheme` =
/// `https`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub protocol: Protocol,
    /// The SNI name the client sent, if any.
    pub server_name: Option<Box<str>>,
    /// rustls' name of the cipher suite (`TLS13_AES_128_GCM_SHA256`).
    pub cipher: &'static str,
    /// ALPN chose `h2`.
    pub h2: bool,
    /// `$ssl_early_data`: the request came before the handshake completed
    /// (QUIC's 0-RTT), so it may be a replay (RFC 8446 §8). A connection's
    /// own session says false; an early request's copy says true.
    pub early_data: bool,
}

/// The default `ssl_protocols`.
pub const DEFAULT_PROTOCOLS: &[Protocol] = &[Protocol::Tls12, Protocol::Tls13];

/// A certificate chain with its private key, checked to match.
#[derive(Clone, Debug)]
pub struct Certificate {
    pub key: Arc<CertifiedKey>,
    /// The leaf's notAfter, in Unix seconds (`None` if it could not be read).
    pub not_after: Option<i64>,
    /// How many certificates the chain file holds (leaf first).
    pub chain_len: usize,
}

/// The crypto provider of every TLS configuration sluice builds.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Which of the two files a [`LoadError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Certificate,
    Key,
}

/// Why a certificate and key could not be used: the file at fault and the
/// file's own problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    pub which: Which,
    pub message: String,
}

impl LoadError {
    /// The configuration key naming the file at fault.
    pub fn key_name(&self) -> &'static str {
        match self.which {
            Which::Certificate => "ssl_certificate",
            Which::Key => "ssl_certificate_key",
        }
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key_name(), self.message)
    }
}

/// Read `ssl_certificate` (a PEM chain, leaf first) and
/// `ssl_certificate_key` (PKCS#8, PKCS#1 RSA or SEC1 EC, PEM), and check
/// that the key is the certificate's.
pub fn load(cert: &Path, key: &Path) -> Result<Certificate, LoadError> {
    let chain = read_chain(cert).map_err(|message| LoadError {
        which: Which::Certificate,
        message,
    })?;
    let key_err = |why: String| LoadError {
        which: Which::Key,
        message: format!("cannot load certificate key \"{}\": {why}", key.display()),
    };
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| key_err(pem_error(&e)))?;
    let not_after = chain.first().and_then(|c| not_after(c));
    let chain_len = chain.len();
    let certified = CertifiedKey::from_der(chain, key_der, &provider()).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => LoadError {
            which: Which::Certificate,
            message: format!(
                "certificate \"{}\" does not match its key \"{}\" (key values mismatch)",
                cert.display(),
                key.display()
            ),
        },
        e => key_err(e.to_string()),
    })?;
    Ok(Certificate {
        key: Arc::new(certified),
        not_after,
        chain_len,
    })
}

/// Every certificate of a PEM file; at least one.
pub fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let fail = |why: String| format!("cannot load certificate \"{}\": {why}", path.display());
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| fail(pem_error(&e)))?;
    let chain = iter
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(pem_error(&e)))?;
    if chain.is_empty() {
        return Err(fail("no certificate in the file".into()));
    }
    Ok(chain)
}

fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(e) => e.to_string(),
        Error::NoItemsFound => "no PEM item of the expected type in the file".into(),
        e => format!("{e:?}"),
    }
}

/// The rustls configuration of one server: its certificate, protocol
/// versions, and the ALPN protocols offered (`h2` first when HTTP/2 is on).
pub fn server_config(
    cert: &Certificate,
    protocols: &[Protocol],
    http2: bool,
) -> Result<Arc<ServerConfig>, String> {
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = protocols
        .iter()
        .map(|p| match p {
            Protocol::Tls12 => &rustls::version::TLS12,
            Protocol::Tls13 => &rustls::version::TLS13,
        })
        .collect();
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions)
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(
            cert.key.clone(),
        )));
    // (nginx also accepts a client that offers only http/1.0.)
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec(), b"http/1.0".to_vec()]
    } else {
        vec![b"http/1.1".to_vec(), b"http/1.0".to_vec()]
    };
    // A session ticket or id lets a returning client skip the full
    // handshake, as nginx's ssl_session_cache does.
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(10_000);
    Ok(Arc::new(config))
}

/// The one cipher suite HTTP/3 connections use: TLS 1.3's mandatory one
/// (RFC 8446 §9.1, so every QUIC client has it), named as `$ssl_cipher`
/// reports it; quinn does not tell which suite a connection settled.
pub const QUIC_CIPHER: &str = "TLS13_AES_128_GCM_SHA256";

/// The rustls configuration of a `quic` listener: TLS 1.3 with
/// [`QUIC_CIPHER`] only, ALPN `h3`, and the certificate that `resolver`
/// chooses by the ClientHello's name (the servers of the address, as on
/// TCP). With `early_data`, a client resuming a session may send 0-RTT
/// data (QUIC allows no other limit than all, RFC 9001 §4.6.1), and the
/// tickets it issues say so; without, its tickets offer no 0-RTT and a
/// client's attempt with an older one is refused (the client sends again
/// after the handshake).
///
/// `sessions` keeps the tickets issued (a ticket is its key there), so
/// that both configurations of one listener resume each other's; rustls
/// takes a ticket out of it when it is used, so each resumes once: a
/// replayed 0-RTT flight finds its ticket gone and is handshaken in full,
/// its early data refused.
pub fn quic_server_config(
    resolver: Arc<dyn rustls::server::ResolvesServerCert>,
    early_data: bool,
    sessions: Arc<dyn rustls::server::StoresServerSessions>,
) -> Result<ServerConfig, String> {
    let mut provider = (*provider()).clone();
    provider
        .cipher_suites
        .retain(|s| s.suite() == rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h3".to_vec()];
    // (rustls accepts 0-RTT only with such stateful tickets: its
    // `ticketer` stays off.)
    config.max_early_data_size = if early_data { u32::MAX } else { 0 };
    config.session_storage = sessions;
    Ok(config)
}

/// The ticket store of a `quic` listener ([`quic_server_config`]).
pub fn quic_sessions() -> Arc<dyn rustls::server::StoresServerSessions> {
    rustls::server::ServerSessionMemoryCache::new(10_000)
}

/// The leaf certificate's notAfter (Unix seconds), read from its DER.
pub fn not_after(cert: &CertificateDer<'_>) -> Option<i64> {
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version
    // OPTIONAL, serialNumber, signature, issuer, validity SEQUENCE {
    // notBefore, notAfter }, … } … }
    let (_, cert, _) = der(cert.as_ref())?;
    let (_, tbs, _) = der(cert)?;
    let mut rest = tbs;
    let (tag, _, after) = der(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..3 {
        rest = der(rest)?.2; // serial, signature, issuer
    }
    let (_, validity, _) = der(rest)?;
    let (_, _, after_before) = der(validity)?;
    let (tag, time, _) = der(after_before)?;
    parse_time(tag, time)
}

/// One DER item: (tag, contents, the bytes after it).
fn der(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *b.first()?;
    let first = *b.get(1)?;
    let (len, head) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | *b.get(2 + i)? as usize;
        }
        (len, 2 + n)
    };
    let end = head.checked_add(len)?;
    Some((tag, b.get(head..end)?, b.get(end..)?))
}

/// UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
fn parse_time(tag: u8, t: &[u8]) -> Option<i64> {
    let digits = |s: &[u8]| -> Option<i64> {
        s.iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let (year, rest) = match tag {
        0x17 => {
            let yy = digits(t.get(0..2)?)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, t.get(2..)?)
        }
        0x18 => (digits(t.get(0..4)?)?, t.get(4..)?),
        _ => return None,
    };
    let field = |i: usize| digits(rest.get(i..i + 2)?);
    let (month, day) = (field(0)?, field(2)?);
    let (h, m, s) = (field(4)?, field(6)?, field(8)?);
    Some(days_from_civil(year, month, day)? * 86_400 + h * 3600 + m * 60 + s)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> Option<i64> {
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_are_nginx_names() {
        assert_eq!(
            parse_protocols("TLSv1.3 TLSv1.2").unwrap(),
            vec![Protocol::Tls12, Protocol::Tls13]
        );
        assert_eq!(parse_protocols("TLSv1.3").unwrap(), vec![Protocol::Tls13]);
        assert!(
            parse_protocols("TLSv1.1 TLSv1.2")
                .unwrap_err()
                .contains("not supported")
        );
        assert!(
            parse_protocols("tls13")
                .unwrap_err()
                .contains("invalid protocol")
        );
        assert!(parse_protocols(" ").is_err());
    }

    #[test]
    fn times_are_unix_seconds() {
        assert_eq!(parse_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(parse_time(0x17, b"261201142023Z"), Some(1_796_134_823));
        assert_eq!(parse_time(0x18, b"20261201142023Z"), Some(1_796_134_823));
        assert_eq!(parse_time(0x17, b"49123123595 Z"), None);
        assert_eq!(parse_time(0x17, b"491331235959Z"), None);
    }

    #[test]
    fn der_never_reads_past_its_input() {
        assert_eq!(der(&[]), None);
        assert_eq!(der(&[0x30]), None);
        assert_eq!(der(&[0x30, 0x05, 1, 2]), None);
        assert_eq!(der(&[0x30, 0x85, 1, 1, 1, 1, 1]), None);
        assert_eq!(
            der(&[0x30, 0x01, 7, 9]),
            Some((0x30, &[7u8][..], &[9u8][..]))
        );
        assert_eq!(not_after(&CertificateDer::from(vec![0x30, 0x00])), None);
    }
}
