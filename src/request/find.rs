//! Finding what serves a request: the server, the client's address
//! (realip), nginx's normalised `$uri`, the location, and the checks made
//! once it is found: a request sent in early data (`ssl_early_data`), and
//! nginx's `client_max_body_size`.

use super::RequestHead;
use super::error::ProxyError;
use crate::config::{Location, ServerBlock};
use crate::conn_state::Conn;
use crate::http1::Fields;
use crate::vars::RequestVars;
use http::header;
use std::net::SocketAddr;

/// The client's address as `real_ip` resolves it.
pub(crate) fn client(conn: &Conn, server: &ServerBlock, head: &RequestHead) -> SocketAddr {
    match &server.real_ip {
        Some(r) => r.client(conn.remote, conn.proxy.as_deref(), &head.fields),
        None => conn.remote,
    }
}

/// The request's variables: the client's address ([`client`]), the
/// normalised path (empty when it is invalid), the values of the maps and
/// geos as they are asked for.
pub(crate) fn request_vars<'a>(
    conn: &'a Conn,
    server: &'a ServerBlock,
    head: &'a RequestHead,
    (path, remote): (&'a str, SocketAddr),
    user: Option<&'a std::sync::Arc<crate::vars::UserVars>>,
) -> RequestVars<'a> {
    RequestVars {
        remote,
        local: conn.local,
        proxy: conn.proxy.as_deref(),
        server_name: &server.name,
        method: &head.method,
        uri: &head.uri,
        version: head.version,
        path,
        headers: &head.fields,
        raw_request_line: None,
        tls: conn.tls.as_ref(),
        user,
    }
}

/// The host that chooses the request's server: an absolute request
/// target's (or HTTP/2's `:authority`), else the `Host` header.
pub(crate) fn host(head: &RequestHead) -> Option<&str> {
    head.uri
        .authority()
        .map(|a| a.host())
        .or_else(|| crate::http1::fields::as_str(head.fields.get(&header::HOST)?))
}

/// The location for a normalised path (`None`: the path was invalid).
pub(crate) fn location<'a>(
    server: &'a ServerBlock,
    path: Option<&'a str>,
) -> Result<&'a std::sync::Arc<Location>, ProxyError<'a>> {
    let path = path.ok_or(ProxyError::InvalidPath)?;
    if let Some(loc) = server.locations.adds_slash(path) {
        let to = loc.prefix.as_deref().unwrap_or("/");
        let add = &loc.headers.add;
        return Err(ProxyError::AddSlash { to, add });
    }
    server
        .locations
        .find(path)
        .ok_or(ProxyError::NoLocation(path))
}

/// nginx's `$uri`: percent-decoded, `//` merged, `.` and `..` resolved.
/// `None` when `..` climbs above the root or the path is not absolute.
#[inline]
pub fn normalize_path(raw: &str) -> Option<std::borrow::Cow<'_, str>> {
    if !raw.starts_with('/') {
        return None;
    }
    // Most paths are already normal: no copy.
    if already_normal(raw.as_bytes()) {
        return Some(raw.into());
    }
    let bytes = raw.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = |b: u8| (b as char).to_digit(16);
            match (
                bytes.get(i + 1).and_then(|&b| hex(b)),
                bytes.get(i + 2).and_then(|&b| hex(b)),
            ) {
                (Some(h), Some(l)) => {
                    decoded.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => return None,
            }
        }
        decoded.push(bytes[i]);
        i += 1;
    }
    let text = String::from_utf8_lossy(&decoded);
    let mut segs: Vec<&str> = Vec::new();
    for seg in text.split('/').skip(1) {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop()?;
            }
            s => segs.push(s),
        }
    }
    let mut out = String::with_capacity(text.len());
    for s in &segs {
        out.push('/');
        out.push_str(s);
    }
    let trailing = text.ends_with('/') || text.ends_with("/.") || text.ends_with("/..");
    if out.is_empty() || trailing {
        out.push('/');
    }
    Some(out.into())
}

/// No `%`, no `//`, no `.` or `..` segment: one look at each byte (the
/// path of every request passes here).
fn already_normal(path: &[u8]) -> bool {
    for (i, &b) in path.iter().enumerate() {
        match b {
            b'%' => return false,
            b'/' => match &path[i + 1..] {
                [b'/', ..] | [b'.'] | [b'.', b'/', ..] | [b'.', b'.'] | [b'.', b'.', b'/', ..] => {
                    return false;
                }
                _ => {}
            },
            _ => {}
        }
    }
    true
}

/// Whether a request sent in TLS early data (0-RTT, `$ssl_early_data`)
/// gets 425 Too Early: anyone who saw the client's first flight can send
/// it again (RFC 8446 §8), so only a safe method is served from it, and
/// only on a server that turned `ssl_early_data` on. Checked before the
/// limits (as nginx's `if ($ssl_early_data) { return 425; }` in the
/// rewrite phase): a 425 is not counted, the request sent again is.
pub(crate) fn too_early(conn: &Conn, server: &ServerBlock, method: &http::Method) -> bool {
    let early = conn.tls.as_ref().is_some_and(|t| t.early_data);
    let safe = matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    );
    early && !(server.ssl_early_data && safe)
}

/// nginx's find-config check: a request whose Content-Length exceeds
/// `client_max_body_size` gets 413 before any limit is applied (so it is
/// not counted by `limit_req`, as in nginx).
pub(crate) fn check_body_size(loc: &Location, fields: &Fields) -> Result<(), ProxyError<'static>> {
    let max = loc.client_max_body_size;
    let len = fields
        .get(&header::CONTENT_LENGTH)
        .and_then(crate::http1::fields::as_str)
        .and_then(|v| v.trim().parse::<u64>().ok());
    match len {
        Some(len) if max != 0 && len > max => Err(ProxyError::BodyTooLarge { len }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalize_like_nginx() {
        assert_eq!(normalize_path("/a//b/./c").as_deref(), Some("/a/b/c"));
        assert_eq!(normalize_path("/a/b/../c").as_deref(), Some("/a/c"));
        assert_eq!(normalize_path("/%70lain").as_deref(), Some("/plain"));
        assert_eq!(normalize_path("/a/").as_deref(), Some("/a/"));
        assert_eq!(normalize_path("/").as_deref(), Some("/"));
        assert_eq!(normalize_path("/.."), None);
        assert_eq!(normalize_path("/%zz"), None);
    }

    /// The fast path answers as the whole normalisation would.
    #[test]
    fn already_normal_paths_are_those_normalisation_keeps() {
        let parts = ["/", "a", ".", "..", "...", ".a", "a.", "%61", "//", "b/"];
        let mut paths = vec![String::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for p in &paths {
                for q in parts {
                    next.push(format!("{p}{q}"));
                }
            }
            paths.extend(next);
        }
        for p in paths.iter().filter(|p| p.starts_with('/')) {
            let kept = normalize_path(p).is_some_and(|n| n == p.as_str()) && !p.contains('%');
            assert_eq!(already_normal(p.as_bytes()), kept, "{p:?}");
        }
    }
}
