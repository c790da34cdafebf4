//! One listening address and the servers on it: nginx's virtual servers.
//!
//! A request is served by the server whose `server_name` matches its host
//! (the `Host` header, or HTTP/2's `:authority`), looked up as nginx does:
//! an exact name, then the longest `*.example.com`, then the longest
//! `www.example.*`, then the first regex in file order. A TLS connection
//! chooses the same way by its SNI name, for the certificate; a request
//! whose host matches no server stays with the server its SNI chose, else
//! the address's default server (`default_server`, or the first).

use super::compiled::ServerBlock;
use super::values::ServerName;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// A listening address: what its connections speak and its servers.
pub(crate) struct Address {
    pub listen: SocketAddr,
    /// Connections speak TLS (a server on it said `ssl`).
    pub ssl: bool,
    /// HTTP/2 with prior knowledge on a plain address (the default
    /// server's `http2`); on TLS each server offers `h2` by its own.
    pub http2: bool,
    /// Every connection begins with a PROXY protocol header
    /// (`listen … proxy_protocol`).
    pub proxy_protocol: bool,
    /// HTTP/3 on UDP at the same address (a server on it said `quic`).
    pub quic: bool,
    pub servers: Vec<Arc<ServerBlock>>,
    default: usize,
    exact: HashMap<String, usize>,
    /// `.example.com` suffixes, longest first.
    front: Vec<(String, usize)>,
    /// `www.example.` prefixes, longest first.
    back: Vec<(String, usize)>,
    regex: Vec<(regex::Regex, usize)>,
}

impl Address {
    /// The address of `servers` (in file order, at least one), each with
    /// its names and whether it is `default_server`; `(ssl,
    /// proxy_protocol, quic)` as its servers' `listen`s merge them.
    pub(super) fn new(
        listen: SocketAddr,
        (ssl, proxy_protocol, quic): (bool, bool, bool),
        servers: Vec<(Arc<ServerBlock>, Vec<ServerName>, bool)>,
    ) -> Address {
        let default = servers.iter().position(|s| s.2).unwrap_or(0);
        let mut a = Address {
            listen,
            ssl,
            http2: servers.get(default).is_some_and(|s| s.0.http2),
            proxy_protocol,
            quic,
            servers: Vec::new(),
            default,
            exact: HashMap::new(),
            front: Vec::new(),
            back: Vec::new(),
            regex: Vec::new(),
        };
        for (i, (server, names, _)) in servers.into_iter().enumerate() {
            for n in names {
                match n {
                    // The first server with a name keeps it (validation
                    // refuses a second).
                    ServerName::Exact(e) => {
                        a.exact.entry(e).or_insert(i);
                    }
                    ServerName::Front(f) => a.front.push((f, i)),
                    ServerName::Back(b) => a.back.push((b, i)),
                    ServerName::Regex(r) => a.regex.push((r, i)),
                }
            }
            a.servers.push(server);
        }
        a.front.sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
        a.back.sort_by_key(|(b, _)| std::cmp::Reverse(b.len()));
        a
    }

    /// The server `default_server` names, or the first on the address.
    pub(crate) fn default_server(&self) -> &Arc<ServerBlock> {
        &self.servers[self.default]
    }

    /// The server whose name matches `host` (a host as sent: any case, a
    /// port or a final dot are ignored), if one does.
    pub(crate) fn find(&self, host: &str) -> Option<&Arc<ServerBlock>> {
        let host = normalize_host(host)?;
        let i = self
            .exact
            .get(host.as_ref())
            .copied()
            .or_else(|| {
                self.front
                    .iter()
                    .find(|(f, _)| host.ends_with(f.as_str()) && host.len() > f.len())
                    .map(|&(_, i)| i)
            })
            .or_else(|| {
                self.back
                    .iter()
                    .find(|(b, _)| host.starts_with(b.as_str()) && host.len() > b.len())
                    .map(|&(_, i)| i)
            })
            .or_else(|| {
                self.regex
                    .iter()
                    .find(|(r, _)| r.is_match(&host))
                    .map(|&(_, i)| i)
            })?;
        Some(&self.servers[i])
    }

    /// The server of a request: by its host, else by the connection's SNI
    /// name, else the default server.
    pub(crate) fn server_for(&self, host: Option<&str>, sni: Option<&str>) -> &Arc<ServerBlock> {
        if self.servers.len() == 1 {
            return &self.servers[0];
        }
        host.and_then(|h| self.find(h))
            .or_else(|| sni.and_then(|s| self.find(s)))
            .unwrap_or_else(|| self.default_server())
    }
}

/// A host as names are matched: lowercase, without port or final dot;
/// `None` when empty.
fn normalize_host(host: &str) -> Option<std::borrow::Cow<'_, str>> {
    let host = if host.starts_with('[') {
        // An IPv6 literal keeps its brackets, loses its port.
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    Some(if host.bytes().any(|b| b.is_ascii_uppercase()) {
        host.to_ascii_lowercase().into()
    } else {
        host.into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::values::parse_server_names;

    fn address(names: &[&str], default: Option<usize>) -> Address {
        let text = format!(
            "[zones.z]\nkey = \"$binary_remote_addr\"\nsize = \"1m\"\nrate = \"1r/s\"\n{}",
            names
                .iter()
                .map(|n| format!(
                    "[[servers]]\nlisten = \"127.0.0.1:1\"\nserver_name = \"{n}\"\nproxy_pass = \"http://127.0.0.1:2\"\n"
                ))
                .collect::<String>()
        );
        let spec = crate::config::parse_str("t.toml", &text).expect("valid");
        let config = crate::config::Config::compile(spec, None).expect("compiles");
        let servers = config
            .servers
            .iter()
            .zip(names)
            .enumerate()
            .map(|(i, (s, n))| {
                (
                    s.clone(),
                    parse_server_names(n).expect("names"),
                    Some(i) == default,
                )
            })
            .collect();
        Address::new(
            "127.0.0.1:1".parse().unwrap(),
            (false, false, false),
            servers,
        )
    }

    fn found(a: &Address, host: &str) -> Option<String> {
        a.find(host).map(|s| s.name.clone())
    }

    #[test]
    fn names_match_in_nginx_order() {
        let a = address(
            &[
                "_",
                "example.com",
                "*.example.com",
                "*.api.example.com",
                "www.example.*",
                "~^(?:img|cdn)[0-9]+[.]",
                ".example.org",
            ],
            None,
        );
        assert_eq!(found(&a, "example.com").as_deref(), Some("example.com"));
        assert_eq!(
            found(&a, "EXAMPLE.com:8443").as_deref(),
            Some("example.com")
        );
        assert_eq!(found(&a, "example.com.").as_deref(), Some("example.com"));
        assert_eq!(found(&a, "a.example.com").as_deref(), Some("*.example.com"));
        assert_eq!(
            found(&a, "v1.api.example.com").as_deref(),
            Some("*.api.example.com")
        );
        // A wildcard needs something before its dot.
        assert_eq!(found(&a, ".example.com").as_deref(), None);
        // Exact before the wildcards, the front wildcard before the back one.
        assert_eq!(
            found(&a, "www.example.com").as_deref(),
            Some("*.example.com")
        );
        assert_eq!(
            found(&a, "www.example.net").as_deref(),
            Some("www.example.*")
        );
        assert_eq!(
            found(&a, "img7.example.net").as_deref(),
            Some("~^(?:img|cdn)[0-9]+[.]")
        );
        assert_eq!(found(&a, "example.org").as_deref(), Some(".example.org"));
        assert_eq!(found(&a, "x.example.org").as_deref(), Some(".example.org"));
        assert_eq!(found(&a, "other.net"), None);
        assert_eq!(found(&a, ""), None);
        assert_eq!(a.server_for(Some("other.net"), None).name, "_");
        assert_eq!(
            a.server_for(Some("other.net"), Some("example.com")).name,
            "example.com"
        );
        assert_eq!(
            a.server_for(None, Some("a.example.com")).name,
            "*.example.com"
        );
    }

    #[test]
    fn default_server_is_named_or_first() {
        let a = address(&["a.test", "b.test"], Some(1));
        assert_eq!(a.default_server().name, "b.test");
        assert_eq!(a.server_for(Some("c.test"), None).name, "b.test");
        let a = address(&["a.test", "b.test"], None);
        assert_eq!(a.default_server().name, "a.test");
    }

    #[test]
    fn hosts_lose_port_and_case() {
        assert_eq!(
            normalize_host("Example.COM:80").as_deref(),
            Some("example.com")
        );
        assert_eq!(normalize_host("[::1]:8080").as_deref(), Some("[::1]"));
        assert_eq!(normalize_host(":80"), None);
        assert_eq!(normalize_host("."), None);
    }
}
