//! The file step: the files a configuration names must be readable when
//! it is loaded: `[redis]`'s TLS files, the servers' certificates and
//! keys (so a missing or broken certificate is reported with its line and
//! column, not at the first connection or handshake), and the `proxy_ssl_*`
//! files of HTTPS upstreams (read and parsed here, see
//! [`super::upstream_tls`]). Kept apart from parsing, which stays pure:
//! `parse_str` does not run this step, `load` and `load_text` do.

use super::error::Diagnostics;
use super::parse::Draft;
use super::parse::read::Reported;
use super::parse::servers::ServerDraft;

/// Report each named file that cannot be read, at the value naming it, and
/// mark it failed so that validation does not report it again; `file` is
/// the configuration file (relative `proxy_ssl_*` paths start from its
/// directory).
pub(super) fn check(draft: &mut Draft, file: &str, d: &mut Diagnostics) {
    for s in draft.servers.iter_mut().flatten() {
        certificate(s, d);
    }
    let dir = std::path::Path::new(file)
        .parent()
        .unwrap_or(std::path::Path::new(""));
    super::upstream_tls::check_files(draft, dir, d);
    admin_token(draft, dir, d);
    let Some(redis) = &mut draft.redis else {
        return;
    };
    for file in redis.tls_files() {
        let unreadable = match file {
            Some(Ok(f)) => std::fs::read(&f.path).err().map(|e| {
                d.error(
                    f.span.clone(),
                    format!("\"{}\": cannot read \"{}\": {e}", f.key, f.path.display()),
                )
            }),
            _ => None,
        };
        if unreadable.is_some() {
            *file = Some(Err(Reported));
        }
    }
}

/// A server's `ssl_certificate` with its `ssl_certificate_key`: read, and
/// the key checked against the certificate. The error is the file's own,
/// reported at the key that names the file at fault (the certificate's
/// when the two do not match).
fn certificate(s: &mut ServerDraft, d: &mut Diagnostics) {
    let (Some(Ok(cert)), Some(Ok(key))) = (&s.ssl_certificate, &s.ssl_certificate_key) else {
        return;
    };
    s.certificate = Some(match crate::tls::load(&cert.path, &key.path) {
        Ok(c) => Ok(c),
        Err(e) => {
            let span = match e.which {
                crate::tls::Which::Key => key.span.clone(),
                crate::tls::Which::Certificate => cert.span.clone(),
            };
            d.error(span, format!("\"{}\": {}", e.key_name(), e.message));
            Err(Reported)
        }
    });
}

/// `[admin] token_file`: its first line is the token (relative paths
/// start from the configuration's directory). Never echoed in a message.
fn admin_token(draft: &mut Draft, dir: &std::path::Path, d: &mut Diagnostics) {
    let Some(f) = draft.admin_token_file.take() else {
        return;
    };
    let path = dir.join(&f.path);
    let token = match std::fs::read_to_string(&path) {
        Ok(text) => text.lines().next().unwrap_or("").trim().to_string(),
        Err(e) => {
            let msg = format!("\"token_file\": cannot read \"{}\": {e}", path.display());
            return d.error(f.span, msg);
        }
    };
    if token.len() < 16 || token.bytes().any(|b| !b.is_ascii_graphic()) {
        let msg = format!(
            "\"token_file\": \"{}\" must start with a token of at least 16 visible ASCII characters",
            path.display()
        );
        return d.error(f.span, msg);
    }
    if let Some(a) = &mut draft.ops.admin {
        a.token = Some(token.into());
    }
}
