//! The file step: the files a configuration names must be readable when
//! it is loaded. Today these are `[redis]`'s TLS files (so a missing
//! certificate is reported with its line and column, not at the first
//! connection) and the `proxy_ssl_*` files of HTTPS upstreams (read and
//! parsed here, see [`super::upstream_tls`]). Kept apart from parsing,
//! which stays pure: `parse_str` does not run this step, `load` and
//! `load_text` do.

use super::error::Diagnostics;
use super::parse::Draft;
use super::parse::read::Reported;

/// Report each named file that cannot be read, at the value naming it, and
/// mark it failed so that validation does not report it again; `file` is
/// the configuration file (relative `proxy_ssl_*` paths start from its
/// directory).
pub(super) fn check(draft: &mut Draft, file: &str, d: &mut Diagnostics) {
    let dir = std::path::Path::new(file)
        .parent()
        .unwrap_or(std::path::Path::new(""));
    super::upstream_tls::check_files(draft, dir, d);
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
