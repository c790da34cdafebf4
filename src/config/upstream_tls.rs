//! The `proxy_ssl_*` settings of HTTPS upstreams through the stages: what
//! a level holds ([`ProxySsl`], its files as [`PemFile`]s), the file step
//! that reads those files and checks what they make together
//! ([`check_files`]), and the compiler's client configurations, built
//! once per distinct setting in a generation ([`ClientConfigs`]).
//!
//! Why the files are read by the file step (at start and on every reload),
//! and not only when compiling: a missing or bad file is then reported as
//! `FILE:LINE:COL` at the key naming it, with every other problem of the
//! file, and a reload that fails keeps the running configuration. What was
//! read is kept in the [`PemFile`] and used by the compiler; when the step
//! did not run (`parse_str`, which stays pure), the compiler reads the file
//! itself.
//!
//! Defaults where sluice differs from nginx on purpose: `proxy_ssl_verify`
//! and `proxy_ssl_server_name` are on (nginx: off). Verifying is the point
//! of HTTPS to an upstream, and verifying a name the upstream was not asked
//! for (no SNI) fails on any server with more than one certificate.

use super::compiled::CompileError;
use super::error::Diagnostics;
use super::parse::Draft;
use super::spec::Level;
use super::values::ProxyPass;
use crate::errlog::{self, Severity};
use crate::tls::{DEFAULT_PROTOCOLS, Protocol};
use crate::upstream::tls::{self, Settings};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::cell::{OnceCell, RefCell};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// A level's `proxy_ssl_*` keys; `None`: not set here, inherited.
#[derive(Clone, Default)]
pub(crate) struct ProxySsl {
    /// `proxy_ssl_verify` (default on).
    pub verify: Option<bool>,
    /// `proxy_ssl_trusted_certificate` (default: the system's CAs).
    pub trusted_certificate: Option<Arc<PemFile>>,
    /// `proxy_ssl_server_name` (default on).
    pub server_name: Option<bool>,
    /// `proxy_ssl_name` (default: `proxy_pass`'s host).
    pub name: Option<ServerName<'static>>,
    /// `proxy_ssl_certificate`: the client certificate (chain).
    pub certificate: Option<Arc<PemFile>>,
    /// `proxy_ssl_certificate_key`: its key.
    pub certificate_key: Option<Arc<PemFile>>,
    /// `proxy_ssl_protocols` (default TLSv1.2 and TLSv1.3).
    pub protocols: Option<Vec<Protocol>>,
}

impl ProxySsl {
    /// These settings with unset values taken from `parent`.
    pub(crate) fn inherit(&self, parent: &ProxySsl) -> ProxySsl {
        ProxySsl {
            verify: self.verify.or(parent.verify),
            trusted_certificate: self
                .trusted_certificate
                .clone()
                .or_else(|| parent.trusted_certificate.clone()),
            server_name: self.server_name.or(parent.server_name),
            name: self.name.clone().or_else(|| parent.name.clone()),
            certificate: self
                .certificate
                .clone()
                .or_else(|| parent.certificate.clone()),
            certificate_key: self
                .certificate_key
                .clone()
                .or_else(|| parent.certificate_key.clone()),
            protocols: self.protocols.clone().or_else(|| parent.protocols.clone()),
        }
    }

    /// The files named here, to redirect (the fuzz target's harmless
    /// configuration).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn files_mut(&mut self) -> [&mut Option<Arc<PemFile>>; 3] {
        [
            &mut self.trusted_certificate,
            &mut self.certificate,
            &mut self.certificate_key,
        ]
    }
}

/// What a [`PemFile`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PemKind {
    /// CA certificates to verify the upstream with.
    Roots,
    /// A client certificate and its chain.
    Chain,
    /// The client certificate's private key.
    Key,
}

impl PemKind {
    /// The key that names a file of this kind (`grpc`: the grpc module's).
    pub(crate) fn key(self, grpc: bool) -> &'static str {
        match (self, grpc) {
            (PemKind::Roots, false) => "proxy_ssl_trusted_certificate",
            (PemKind::Chain, false) => "proxy_ssl_certificate",
            (PemKind::Key, false) => "proxy_ssl_certificate_key",
            (PemKind::Roots, true) => "grpc_ssl_trusted_certificate",
            (PemKind::Chain, true) => "grpc_ssl_certificate",
            (PemKind::Key, true) => "grpc_ssl_certificate_key",
        }
    }
}

/// The prefix of a set's keys in messages: `proxy` or `grpc`.
fn module(grpc: bool) -> &'static str {
    if grpc { "grpc" } else { "proxy" }
}

/// What was read from a [`PemFile`].
#[derive(Clone)]
enum Loaded {
    Roots(Arc<RootCertStore>),
    Chain(Arc<Vec<CertificateDer<'static>>>),
    Key(Arc<PrivateKeyDer<'static>>),
}

/// A PEM file a `proxy_ssl_*` (or `grpc_ssl_*`) key names, read once per
/// generation.
pub(crate) struct PemFile {
    pub kind: PemKind,
    /// Named by a `grpc_ssl_*` key.
    pub grpc: bool,
    /// As written: relative to the configuration file's directory.
    pub path: PathBuf,
    /// The value naming it, for the file step's messages.
    span: Range<usize>,
    /// What was read (or why it could not be): by the file step, else by
    /// the compiler.
    loaded: OnceLock<Result<Loaded, String>>,
}

impl PemFile {
    pub(super) fn new(kind: PemKind, grpc: bool, path: PathBuf, span: Range<usize>) -> PemFile {
        PemFile {
            kind,
            grpc,
            path,
            span,
            loaded: OnceLock::new(),
        }
    }

    /// The same key naming another file.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn elsewhere(&self, path: impl Into<PathBuf>) -> PemFile {
        PemFile::new(self.kind, self.grpc, path.into(), self.span.clone())
    }

    /// The key that names it.
    pub(crate) fn key(&self) -> &'static str {
        self.kind.key(self.grpc)
    }

    /// What the file holds, read from `dir` joined with its path the first
    /// time.
    fn load_in(&self, dir: &Path) -> &Result<Loaded, String> {
        self.loaded.get_or_init(|| {
            let path = dir.join(&self.path);
            match self.kind {
                PemKind::Roots => tls::read_roots(&path).map(|r| Loaded::Roots(Arc::new(r))),
                PemKind::Chain => crate::tls::read_chain(&path).map(|c| Loaded::Chain(Arc::new(c))),
                PemKind::Key => tls::read_key(&path).map(|k| Loaded::Key(Arc::new(k))),
            }
        })
    }

    /// For the compiler: what the file step read, or the file read now.
    fn loaded(&self) -> Result<Loaded, CompileError> {
        self.load_in(Path::new(""))
            .clone()
            .map_err(|e| CompileError::UpstreamTls(format!("\"{}\": {e}", self.key())))
    }
}

// --- the file step ----------------------------------------------------------

/// Reads every `proxy_ssl_*` file of `draft` (relative paths from `dir`)
/// and reports, at the key naming it, each that cannot be read or parsed;
/// then, for every location (and server with `proxy_pass`, for its
/// implicit `location /`), a client certificate without its key or the
/// other way round, and a key that does not fit its certificate.
pub(super) fn check_files(draft: &Draft, dir: &Path, d: &mut Diagnostics) {
    let http = &draft.http.level;
    let servers = draft.servers.as_deref().unwrap_or_default();
    let levels = std::iter::once(http)
        .chain(servers.iter().map(|s| &s.level.level))
        .chain(
            servers
                .iter()
                .flat_map(|s| s.locations.iter().map(|l| &l.level.level)),
        );
    for level in levels {
        for s in [&level.proxy_ssl, &level.grpc.ssl] {
            for file in [&s.trusted_certificate, &s.certificate, &s.certificate_key]
                .into_iter()
                .flatten()
            {
                if let Err(e) = file.load_in(dir) {
                    d.error(file.span.clone(), format!("\"{}\": {e}", file.key()));
                }
            }
        }
    }
    for grpc in [false, true] {
        let set = |l: &Level| if grpc { &l.grpc.ssl } else { &l.proxy_ssl }.clone();
        for s in servers {
            let server = set(&s.level.level).inherit(&set(http));
            if s.proxy_pass.is_some() {
                check_pair(&server, grpc, d);
            }
            for l in &s.locations {
                check_pair(&set(&l.level.level).inherit(&server), grpc, d);
            }
        }
    }
}

/// A client certificate comes with its key (nginx: `no
/// "proxy_ssl_certificate_key" is defined for certificate`), and the key
/// must be the certificate's. (`grpc`: the `grpc_ssl_*` set.)
fn check_pair(s: &ProxySsl, grpc: bool, d: &mut Diagnostics) {
    let m = module(grpc);
    match (&s.certificate, &s.certificate_key) {
        (None, None) => {}
        (Some(c), None) => d.error(
            c.span.clone(),
            format!(
                "no \"{m}_ssl_certificate_key\" is defined for certificate \"{}\"",
                c.path.display()
            ),
        ),
        (None, Some(k)) => d.error(
            k.span.clone(),
            format!(
                "no \"{m}_ssl_certificate\" is defined for key \"{}\"",
                k.path.display()
            ),
        ),
        (Some(c), Some(k)) => {
            let (Some(Ok(Loaded::Chain(chain))), Some(Ok(Loaded::Key(key)))) =
                (c.loaded.get(), k.loaded.get())
            else {
                return; // reported as a file, or not read
            };
            if let Err(e) = tls::check_client_key(chain, key) {
                d.error(
                    k.span.clone(),
                    format!(
                        "\"{m}_ssl_certificate_key\": \"{}\" does not fit the certificate \"{}\": {e}",
                        k.path.display(),
                        c.path.display()
                    ),
                );
            }
        }
    }
}

// --- the compiler -------------------------------------------------------------

/// One client configuration's settings; files compared by identity (the
/// same key read once, inherited by many locations).
struct Want {
    roots: Option<Option<Arc<PemFile>>>,
    client: Option<(Arc<PemFile>, Arc<PemFile>)>,
    protocols: Vec<Protocol>,
    sni: bool,
    /// ALPN `h2` (for `grpcs://`).
    h2: bool,
}

impl Want {
    fn same(&self, o: &Want) -> bool {
        let same_roots = match (&self.roots, &o.roots) {
            (None, None) => true,
            (Some(a), Some(b)) => same_file(a, b),
            _ => false,
        };
        let same_client = match (&self.client, &o.client) {
            (None, None) => true,
            (Some((c1, k1)), Some((c2, k2))) => Arc::ptr_eq(c1, c2) && Arc::ptr_eq(k1, k2),
            _ => false,
        };
        same_roots
            && same_client
            && self.protocols == o.protocols
            && self.sni == o.sni
            && self.h2 == o.h2
    }
}

fn same_file(a: &Option<Arc<PemFile>>, b: &Option<Arc<PemFile>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// The client configurations of one generation: each distinct setting
/// built once, shared by its locations (and so by their kept-alive
/// connections), and the system's CAs read once, when a location needs them.
#[derive(Default)]
pub(super) struct ClientConfigs {
    made: RefCell<Vec<(Want, Arc<ClientConfig>)>>,
    system: OnceCell<Result<Arc<RootCertStore>, String>>,
}

impl ClientConfigs {
    /// How a location with `eff` settings that proxies to `pp` (an
    /// `https://` or `grpcs://` one) speaks TLS; `path` names the location
    /// in the warning `proxy_ssl_verify = false` is logged with. For
    /// `grpcs://` (`eff` then holds the `grpc_ssl_*` values, see
    /// [`Level::for_grpc`]) the client offers ALPN `h2` only.
    pub(super) fn location(
        &self,
        eff: &Level,
        pp: &ProxyPass,
        path: &str,
    ) -> Result<Arc<crate::upstream::Tls>, CompileError> {
        let s = &eff.proxy_ssl;
        let m = module(pp.grpc);
        let verify = s.verify.unwrap_or(true);
        let roots = verify.then(|| s.trusted_certificate.clone());
        let client = match (&s.certificate, &s.certificate_key) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            (None, None) => None,
            _ => {
                return Err(CompileError::UpstreamTls(format!(
                    "location \"{path}\": \"{m}_ssl_certificate\" and \"{m}_ssl_certificate_key\" go together"
                )));
            }
        };
        let protocols = s
            .protocols
            .clone()
            .unwrap_or_else(|| DEFAULT_PROTOCOLS.to_vec());
        let sni = s.server_name.unwrap_or(true);
        let name = match &s.name {
            Some(n) => n.clone(),
            None => ServerName::try_from(pp.host().to_string()).map_err(|_| {
                CompileError::UpstreamTls(format!(
                    "location \"{path}\": \"{}\" is not a name TLS can verify: set {m}_ssl_name",
                    pp.host()
                ))
            })?,
        };
        if !verify {
            errlog::emit(
                Severity::Warn,
                format_args!(
                    "{m}_ssl_verify is off in location \"{path}\": the certificate of {}://{} is not verified",
                    pp.scheme(),
                    pp.authority
                ),
            );
        }
        let want = Want {
            roots,
            client,
            protocols,
            sni,
            h2: pp.grpc,
        };
        let config = self.config(want, path)?;
        Ok(Arc::new(crate::upstream::Tls::new(config, name, verify)))
    }

    /// The configuration for these settings: one made before in this
    /// generation, or a new one.
    fn config(&self, want: Want, path: &str) -> Result<Arc<ClientConfig>, CompileError> {
        let found = self
            .made
            .borrow()
            .iter()
            .find_map(|(m, config)| m.same(&want).then(|| config.clone()));
        if let Some(config) = found {
            return Ok(config);
        }
        let store = match &want.roots {
            None => None,
            Some(Some(file)) => match file.loaded()? {
                Loaded::Roots(r) => Some(r),
                _ => None,
            },
            Some(None) => Some(self.system_roots(path)?),
        };
        let loaded = match &want.client {
            Some((c, k)) => match (c.loaded()?, k.loaded()?) {
                (Loaded::Chain(c), Loaded::Key(k)) => Some((c, k)),
                _ => None,
            },
            None => None,
        };
        let settings = Settings {
            roots: store,
            client: loaded.as_ref().map(|(c, k)| (c.as_slice(), &**k)),
            protocols: &want.protocols,
            sni: want.sni,
        };
        let mut config = tls::client_config(&settings).map_err(|e| {
            CompileError::UpstreamTls(format!(
                "location \"{path}\": the upstream TLS settings cannot be used: {e}"
            ))
        })?;
        if want.h2 {
            config = tls::with_alpn_h2(&config);
        }
        self.made.borrow_mut().push((want, config.clone()));
        Ok(config)
    }

    fn system_roots(&self, path: &str) -> Result<Arc<RootCertStore>, CompileError> {
        self.system
            .get_or_init(|| tls::system_roots().map(Arc::new))
            .clone()
            .map_err(|e| {
                CompileError::UpstreamTls(format!(
                    "location \"{path}\" verifies its upstream against the system's CA certificates, and there are none: {e} (set proxy_ssl_trusted_certificate, or proxy_ssl_verify = false)"
                ))
            })
    }
}
