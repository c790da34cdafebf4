//! A location's content handler to an upstream: `proxy_pass` and nginx's
//! grpc module's `grpc_pass`, each checked as sluice's configuration will
//! read it, and reported (not translated) when sluice cannot take it.

use super::Cx;
use super::report::Kind;
use super::server::Content;
use super::tree::Directive;

/// A location's `proxy_pass` or `grpc_pass`: what it becomes, or a 502
/// (reported) when sluice cannot take it.
pub(super) fn content(cx: &mut Cx, d: &Directive) -> Content {
    let (key, url) = if d.name == "grpc_pass" {
        ("grpc_pass", grpc_pass(cx, d))
    } else {
        ("proxy_pass", proxy_pass(cx, d))
    };
    match url {
        Some(url) => Content::Proxy(key, url),
        None => Content::Gateway(d.text()),
    }
}

/// `proxy_pass URL`; `None` (reported) when sluice cannot.
fn proxy_pass(cx: &mut Cx, d: &Directive) -> Option<String> {
    let url = d.arg(0);
    if url.contains('$') {
        let why = "a proxy_pass with variables: sluice's is a fixed URL";
        cx.report(Kind::NotTranslated, d, why);
        return None;
    }
    if url.contains("://unix:") {
        cx.report(
            Kind::NotTranslated,
            d,
            "sluice connects to TCP upstreams only",
        );
        return None;
    }
    match crate::config::values::parse_proxy_pass(url) {
        Ok(p) => {
            elsewhere(cx, d, &p);
            Some(url.to_string())
        }
        Err(e) => {
            cx.report(Kind::NotTranslated, d, e);
            None
        }
    }
}

/// `grpc_pass [grpc://|grpcs://]HOST:PORT` (nginx takes a bare address as
/// `grpc://`); `None` (reported) when sluice cannot.
fn grpc_pass(cx: &mut Cx, d: &Directive) -> Option<String> {
    let url = d.arg(0);
    if url.contains('$') {
        let why = "a grpc_pass with variables: sluice's is a fixed URL";
        cx.report(Kind::NotTranslated, d, why);
        return None;
    }
    let lower = url.to_ascii_lowercase();
    let url = match ["grpc://", "grpcs://"]
        .iter()
        .find(|p| lower.starts_with(**p))
    {
        Some(scheme) => format!("{scheme}{}", &url[scheme.len()..]),
        None => format!("grpc://{url}"),
    };
    if url.contains("://unix:") {
        let why = "sluice connects to TCP upstreams only";
        cx.report(Kind::NotTranslated, d, why);
        return None;
    }
    match crate::config::values::parse_grpc_pass(&url) {
        Ok(p) => {
            elsewhere(cx, d, &p);
            Some(url)
        }
        Err(e) => {
            cx.report(Kind::NotTranslated, d, e);
            None
        }
    }
}

/// A site file's `proxy_pass http://NAME` without an `upstream NAME` in
/// the file: most likely a group its nginx.conf defines, which sluice
/// would take for a host name.
fn elsewhere(cx: &mut Cx, d: &Directive, p: &crate::config::ProxyPass) {
    let host = p.host();
    let bare = p.authority.port().is_none()
        && !host.contains('.')
        && host.parse::<std::net::IpAddr>().is_err()
        && host != "localhost";
    if cx.site && bare && !cx.upstreams.iter().any(|u| u == host) {
        let why = format!(
            "no upstream \"{host}\" in this file: sluice connects to the host \"{host}\" (if \
             nginx.conf defines the upstream, import that file)"
        );
        cx.report(Kind::Partial, d, why);
    }
}
