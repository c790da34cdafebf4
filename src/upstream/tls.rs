//! HTTPS upstreams: the rustls client side of `proxy_pass = "https://…"`.
//!
//! What is here: the client configuration a location's `proxy_ssl_*`
//! settings make ([`client_config`], built once per distinct setting and
//! configuration generation by the config compiler, never per request),
//! the PEM files those settings name ([`read_roots`], [`read_key`]; a
//! client chain is read as a server's, by [`crate::tls::read_chain`]), the
//! system's CA certificates ([`system_roots`]), what one location connects
//! with ([`Tls`]: that configuration and the name to send and verify), and
//! the handshake with its failures worded as nginx words them.
//!
//! Why verification is on by default, unlike nginx's `proxy_ssl_verify
//! off`: a proxy that takes any certificate turns HTTPS into encryption
//! to whoever answers, and the way it fails (silently) is the worst kind.
//! Turning it off is explicit and logged (see the config compiler).
//!
//! Why the system's roots (rustls-native-certs) and not a bundle compiled
//! in (webpki-roots): they are what the host's curl and OpenSSL trust,
//! include the CAs its administrators added (`update-ca-certificates`), and
//! are updated with the operating system, not with a rebuild of sluice.
//! They are read at start and on every reload, as the files named in the
//! configuration are.

use super::Error;
use crate::tls::{Protocol, provider};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls::{SignatureScheme, SupportedProtocolVersion};
use std::io;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// How one location speaks TLS to its upstream.
pub struct Tls {
    /// Shared by every location with the same settings.
    pub(super) config: Arc<ClientConfig>,
    /// `proxy_ssl_name`: the name sent in SNI (when the configuration
    /// enables it and the name is not an address) and verified.
    pub(super) name: ServerName<'static>,
    /// `proxy_ssl_verify`, for what reports the settings.
    pub verify: bool,
}

impl Tls {
    pub fn new(config: Arc<ClientConfig>, name: ServerName<'static>, verify: bool) -> Tls {
        Tls {
            config,
            name,
            verify,
        }
    }

    /// Whether connections made with it offer ALPN `h2` (a `grpcs://`
    /// upstream's: HTTP/2 is spoken on them), rather than none (HTTP/1.1).
    /// For the HTTP/2 upstream client (issue #45), which is to read it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn h2(&self) -> bool {
        self.config.alpn_protocols.iter().any(|p| p == b"h2")
    }

    /// The name verified (and sent in SNI).
    #[cfg(test)]
    pub fn name(&self) -> &ServerName<'static> {
        &self.name
    }

    /// The client configuration, shared by the locations with the same
    /// settings.
    #[cfg(test)]
    pub fn config(&self) -> &Arc<ClientConfig> {
        &self.config
    }

    /// Whether SNI is sent (`proxy_ssl_server_name`; never for an address).
    #[cfg(test)]
    pub fn sends_sni(&self) -> bool {
        self.config.enable_sni && matches!(self.name, ServerName::DnsName(_))
    }

    /// A connection made with `self` is good for `other` too: the same
    /// client configuration (verification, roots, client certificate,
    /// protocols, SNI), and the same name.
    pub(super) fn same(&self, other: &Tls) -> bool {
        std::ptr::eq(self, other)
            || (Arc::ptr_eq(&self.config, &other.config) && self.name == other.name)
    }
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("name", &self.name)
            .field("verify", &self.verify)
            .finish_non_exhaustive()
    }
}

/// The versions `protocols` names, for rustls.
fn versions(protocols: &[Protocol]) -> Vec<&'static SupportedProtocolVersion> {
    protocols
        .iter()
        .map(|p| match p {
            Protocol::Tls12 => &rustls::version::TLS12,
            Protocol::Tls13 => &rustls::version::TLS13,
        })
        .collect()
}

/// What a client configuration is made of.
pub struct Settings<'a> {
    /// `None`: no verification (`proxy_ssl_verify = false`).
    pub roots: Option<Arc<RootCertStore>>,
    /// `proxy_ssl_certificate` and `proxy_ssl_certificate_key`.
    pub client: Option<(&'a [CertificateDer<'static>], &'a PrivateKeyDer<'static>)>,
    /// `proxy_ssl_protocols` (at least one).
    pub protocols: &'a [Protocol],
    /// `proxy_ssl_server_name`.
    pub sni: bool,
}

/// The client configuration for `s`. Fails for a client key that does not
/// fit its certificate (or is of a kind ring cannot sign with).
pub fn client_config(s: &Settings<'_>) -> Result<Arc<ClientConfig>, rustls::Error> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(s.protocols))?;
    let builder = match &s.roots {
        Some(roots) => builder.with_root_certificates(roots.clone()),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(
                provider.signature_verification_algorithms,
            ))),
    };
    let mut config = match s.client {
        Some((chain, key)) => builder.with_client_auth_cert(chain.to_vec(), key.clone_key())?,
        None => builder.with_no_client_auth(),
    };
    config.enable_sni = s.sni;
    Ok(Arc::new(config))
}

/// `config` offering ALPN `h2` (and nothing else): for `grpcs://`
/// upstreams, which speak HTTP/2 only. Without it no ALPN is sent
/// (HTTP/1.1, as nginx's proxy module). See [`Tls::h2`].
pub fn with_alpn_h2(config: &ClientConfig) -> Arc<ClientConfig> {
    let mut config = config.clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

/// A client key checked against its certificate, as [`client_config`]
/// will (for the configuration's own diagnostics).
pub fn check_client_key(
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
) -> Result<(), rustls::Error> {
    rustls::sign::CertifiedKey::from_der(chain.to_vec(), key.clone_key(), &provider()).map(|_| ())
}

/// `proxy_ssl_verify = false`: any certificate is taken, but the
/// handshake's signatures are still checked against the one presented, so
/// the connection is at least a correct TLS connection to its holder.
#[derive(Debug)]
struct NoVerification(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

// --- files ---------------------------------------------------------------
//
// A client certificate's chain is read as a server's (`crate::tls::
// read_chain`, the same words for the same problems); what is upstream's
// own is the bundle of CAs and a key read without its certificate.

/// A PEM bundle of CA certificates, each one usable as a trust anchor.
pub fn read_roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for (i, cert) in crate::tls::read_chain(path)?.into_iter().enumerate() {
        roots.add(cert).map_err(|e| {
            format!(
                "certificate {} of \"{}\" is not a usable CA certificate: {e}",
                i + 1,
                path.display()
            )
        })?;
    }
    Ok(roots)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1), worded as
/// `ssl_certificate_key`'s problems are.
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    use rustls::pki_types::pem::Error;
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        let why = match e {
            Error::Io(e) => e.to_string(),
            Error::NoItemsFound => "no PEM item of the expected type in the file".into(),
            e => format!("{e:?}"),
        };
        format!("cannot load certificate key \"{}\": {why}", path.display())
    })
}

/// The system's CA certificates (`/etc/ssl/certs`, or `SSL_CERT_FILE` /
/// `SSL_CERT_DIR`); an error when there is none to trust.
pub fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (_added, _unusable) = roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = match found.errors.first() {
            Some(e) => format!(" ({e})"),
            None => String::new(),
        };
        return Err(format!("no system CA certificates found{why}"));
    }
    Ok(roots)
}

// --- the handshake -------------------------------------------------------

/// The TLS handshake over a new connection; its failures worded as nginx's
/// (the caller bounds it with `proxy_connect_timeout`).
pub(super) async fn handshake(tcp: TcpStream, tls: &Tls) -> Result<TlsStream<TcpStream>, Error> {
    tokio_rustls::TlsConnector::from(tls.config.clone())
        .connect(tls.name.clone(), tcp)
        .await
        .map_err(|e| handshake_error(e, &tls.name))
}

/// nginx's line for each way a handshake fails: the certificate (with
/// OpenSSL's verify code and text where one fits), the name, the peer's
/// close, or the TLS error itself.
fn handshake_error(e: io::Error, name: &ServerName<'_>) -> Error {
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return match e.kind() {
            io::ErrorKind::UnexpectedEof => Error::HandshakeClosed(None),
            _ if e.raw_os_error().is_some() => Error::HandshakeClosed(Some(e)),
            _ => Error::Handshake(e.to_string()),
        };
    };
    let rustls::Error::InvalidCertificate(cert) = tls else {
        return Error::Handshake(format!("SSL: {tls}"));
    };
    let code = match cert {
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            return Error::NameMismatch(name.to_str().into_owned());
        }
        CertificateError::UnknownIssuer => "20:unable to get local issuer certificate",
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "10:certificate has expired"
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "9:certificate is not yet valid"
        }
        CertificateError::BadSignature => "7:certificate signature failure",
        CertificateError::Revoked => "23:certificate revoked",
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "26:unsupported certificate purpose"
        }
        other => return Error::Verify(format!("{other:?}")),
    };
    Error::Verify(code.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_error(e: rustls::Error) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }

    #[test]
    fn handshake_failures_are_worded_as_nginx() {
        let name = ServerName::try_from("up.test").unwrap();
        let cert = |c| io_error(rustls::Error::InvalidCertificate(c));
        let text = |e: io::Error| handshake_error(e, &name).to_string();
        assert_eq!(
            text(cert(CertificateError::UnknownIssuer)),
            "upstream SSL certificate verify error: (20:unable to get local issuer certificate) while SSL handshaking to upstream"
        );
        assert_eq!(
            text(cert(CertificateError::NotValidForName)),
            "upstream SSL certificate does not match \"up.test\" while SSL handshaking to upstream"
        );
        assert_eq!(
            text(cert(CertificateError::Expired)),
            "upstream SSL certificate verify error: (10:certificate has expired) while SSL handshaking to upstream"
        );
        let alert = io_error(rustls::Error::AlertReceived(
            rustls::AlertDescription::HandshakeFailure,
        ));
        assert_eq!(
            text(alert),
            "SSL_do_handshake() failed (SSL: received fatal alert: HandshakeFailure) while SSL handshaking to upstream"
        );
        assert_eq!(
            text(io::ErrorKind::UnexpectedEof.into()),
            "peer closed connection in SSL handshake while SSL handshaking to upstream"
        );
        assert_eq!(
            text(io::Error::from_raw_os_error(104)),
            "peer closed connection in SSL handshake (104: Connection reset by peer) while SSL handshaking to upstream"
        );
    }

    #[test]
    fn protocols_choose_the_versions() {
        assert_eq!(versions(crate::tls::DEFAULT_PROTOCOLS).len(), 2);
        assert_eq!(versions(&[Protocol::Tls12]), vec![&rustls::version::TLS12]);
    }
}
