//! Scalar values written the nginx way: sizes (`1m`), times (`60s`,
//! `500ms`), `listen` addresses, `proxy_pass` URLs and location paths with
//! their modifiers. Each parser returns nginx's wording where nginx has
//! one. (Rates, `2r/s` and `10r/10s`, are read by
//! `limiter::algorithm::parse_rate`, which `sluice simulate` shares.)

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Smallest zone nginx accepts: 8 pages of 4 KiB.
pub(crate) const MIN_ZONE_SIZE: u64 = 32 * 1024;

/// nginx sizes: bytes, or `k`/`K`, `m`/`M` (×1024); no `g`.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    scaled(s, false).ok_or_else(|| format!("invalid zone size \"{s}\""))
}

/// Digits with an optional `k`/`K`, `m`/`M` (and, with `giga`, `g`/`G`)
/// suffix, ×1024 each: nginx's sizes and offsets.
fn scaled(s: &str, giga: bool) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1 << 20),
        Some(b'g' | b'G') if giga => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// `large_client_header_buffers NUMBER SIZE` ("4 8k"): at least one buffer,
/// each between 1k and 1m (a head then fits in at most 64 of them).
pub(crate) fn parse_header_buffers(s: &str) -> Result<(usize, usize), String> {
    let invalid = || format!("invalid value \"{s}\" (expected \"NUMBER SIZE\", e.g. \"4 8k\")");
    let mut parts = s.split_ascii_whitespace();
    let (Some(n), Some(size), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(invalid());
    };
    let n: usize = n.parse().map_err(|_| invalid())?;
    let size = scaled(size, false).ok_or_else(invalid)?;
    if !(1..=64).contains(&n) {
        return Err(format!(
            "the number of buffers must be between 1 and 64, not {n}"
        ));
    }
    if !(1024..=1 << 20).contains(&size) {
        return Err(format!(
            "the buffer size must be between 1k and 1m, not {size} bytes"
        ));
    }
    Ok((n, size as usize))
}

/// nginx offsets (`client_max_body_size`): bytes, or `k`/`K`, `m`/`M`,
/// `g`/`G` (×1024).
pub(crate) fn parse_offset(s: &str) -> Result<u64, String> {
    scaled(s, true).ok_or_else(|| format!("invalid size \"{s}\" (e.g. \"1m\", \"512k\", \"0\")"))
}

/// nginx times: `30`, `30s`, `500ms`, `1m`, `1h`, `1d`, or combinations
/// such as `1m30s`. A bare number is seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid time \"{s}\" (e.g. \"60s\", \"500ms\", \"1m30s\")");
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(invalid());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let ms = match &rest[..unit_len] {
            "ms" => 1,
            "" | "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(invalid()),
        };
        rest = &rest[unit_len..];
        total = n
            .checked_mul(ms)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(invalid)?;
    }
    Ok(Duration::from_millis(total))
}

/// A server's `listen`: the address, and nginx's flags after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Listen {
    pub addr: SocketAddr,
    /// `ssl`: connections on this address speak TLS.
    pub ssl: bool,
    /// `http2` (nginx 1.22's flag; the `http2` key says the same).
    pub http2: bool,
    /// `default_server`: the server of names no other server on the
    /// address has (else the first server on it).
    pub default_server: bool,
    /// `proxy_protocol`: every connection begins with a PROXY protocol
    /// header (before TLS, before HTTP/2's preface).
    pub proxy_protocol: bool,
    /// `quic`: HTTP/3 on UDP at the same address, beside its TCP `ssl`
    /// listen (a second `listen` entry, as nginx's second `listen` line).
    pub quic: bool,
}

/// `listen = "ADDR [ssl] [http2] [proxy_protocol] [default_server]"`, or
/// `"ADDR quic [default_server]"` for HTTP/3 on UDP.
pub(crate) fn parse_listen_flags(s: &str) -> Result<Listen, String> {
    let mut words = s.split_ascii_whitespace();
    let addr = parse_listen(words.next().unwrap_or(""))?;
    let mut l = Listen {
        addr,
        ssl: false,
        http2: false,
        default_server: false,
        proxy_protocol: false,
        quic: false,
    };
    for w in words {
        let flag = match w {
            "ssl" => &mut l.ssl,
            "quic" => &mut l.quic,
            "http2" => &mut l.http2,
            "default_server" | "default" => &mut l.default_server,
            "proxy_protocol" => &mut l.proxy_protocol,
            _ => {
                return Err(format!(
                    "invalid parameter \"{w}\" in listen (expected \"ssl\", \"http2\", \"quic\", \"proxy_protocol\" or \"default_server\")"
                ));
            }
        };
        *flag = true;
    }
    if l.quic && (l.ssl || l.http2 || l.proxy_protocol) {
        return Err(
            "\"quic\" goes alone with the address (listen = [\"ADDR ssl\", \"ADDR quic\"]): QUIC is always TLS, HTTP/3 and without a PROXY protocol header"
                .into(),
        );
    }
    Ok(l)
}

/// A server's `listen` entries (a string, or an array as nginx's several
/// `listen` lines): one TCP listen, and at most one `quic` beside it on
/// the same address. Different addresses need their own `[[servers]]`.
pub(crate) fn merge_listens(entries: &[Listen]) -> Result<Listen, String> {
    let tcp: Vec<&Listen> = entries.iter().filter(|l| !l.quic).collect();
    let quic: Vec<&Listen> = entries.iter().filter(|l| l.quic).collect();
    let [tcp] = tcp[..] else {
        return Err(match tcp.len() {
            0 => "a \"quic\" listen needs its TCP listen with \"ssl\" beside it: listen = [\"ADDR ssl\", \"ADDR quic\"]".into(),
            _ => "a server listens on one TCP address: give another address its own [[servers]] block".into(),
        });
    };
    let mut merged = *tcp;
    match quic[..] {
        [] => {}
        [q] if q.addr != tcp.addr => {
            return Err(format!(
                "the \"quic\" listen must be the TCP listen's address ({}), as nginx's `listen 443 ssl; listen 443 quic;`",
                tcp.addr
            ));
        }
        [_] if !tcp.ssl => {
            return Err("a \"quic\" listen needs the TCP listen to say \"ssl\" (the certificates are shared)".into());
        }
        [q] => {
            merged.quic = true;
            merged.default_server |= q.default_server;
        }
        _ => return Err("a server has at most one \"quic\" listen".into()),
    }
    Ok(merged)
}

/// One of a server's `server_name`s, as nginx matches them.
#[derive(Clone, Debug)]
pub(crate) enum ServerName {
    /// `example.com` (lowercased).
    Exact(String),
    /// `*.example.com`: the suffix `.example.com`.
    Front(String),
    /// `www.example.*`: the prefix `www.example.`.
    Back(String),
    /// `~^www\d+\.example\.com$`.
    Regex(regex::Regex),
}

/// `server_name = "example.com *.example.com .example.org www.example.* ~re"`:
/// nginx's names (`.example.org` is `example.org` and `*.example.org`).
pub(crate) fn parse_server_names(s: &str) -> Result<Vec<ServerName>, String> {
    let mut out = Vec::new();
    for w in s.split_ascii_whitespace() {
        if let Some(re) = w.strip_prefix('~') {
            let r = regex::RegexBuilder::new(re)
                .case_insensitive(true)
                .build()
                .map_err(|e| {
                    format!(
                        "invalid server name regex \"{re}\": {}",
                        e.to_string().lines().last().unwrap_or("")
                    )
                })?;
            out.push(ServerName::Regex(r));
            continue;
        }
        let w = w.to_ascii_lowercase();
        let bad = || format!("invalid server name or wildcard \"{w}\"");
        if let Some(rest) = w.strip_prefix("*.") {
            if rest.is_empty() || rest.contains('*') {
                return Err(bad());
            }
            out.push(ServerName::Front(format!(".{rest}")));
        } else if let Some(rest) = w.strip_suffix(".*") {
            if rest.is_empty() || rest.contains('*') {
                return Err(bad());
            }
            out.push(ServerName::Back(format!("{rest}.")));
        } else if let Some(rest) = w.strip_prefix('.') {
            if rest.is_empty() || rest.contains('*') {
                return Err(bad());
            }
            out.push(ServerName::Exact(rest.to_string()));
            out.push(ServerName::Front(w.clone()));
        } else if w.contains('*') {
            return Err(bad());
        } else {
            out.push(ServerName::Exact(w));
        }
    }
    Ok(out)
}

/// `listen`: `IP:PORT`, `[IPv6]:PORT`, a bare `PORT` (all addresses), or
/// `HOST:PORT`, resolved here as nginx resolves it when it reads its
/// configuration (at start and at each reload): the one I/O of parsing.
/// nginx binds every address the name has; sluice binds one, the first
/// IPv4 address (else the first IPv6 one).
pub(crate) fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    if let Some(port) = s.strip_prefix("*:") {
        if let Ok(port) = port.parse::<u16>() {
            return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
        }
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if listen_host(s).is_none() {
        return Err(format!(
            "invalid listen address \"{s}\" (expected \"127.0.0.1:8080\", \"[::1]:8080\", \"8080\" or \"HOST:8080\")"
        ));
    }
    let not_found = || format!("host not found in \"{s}\" of the \"listen\" key");
    let addrs = resolve(s).ok_or_else(not_found)?;
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(not_found)
}

/// The addresses of `HOST:PORT`, from the system's resolver.
#[cfg(not(any(test, feature = "fuzzing")))]
fn resolve(s: &str) -> Option<Vec<SocketAddr>> {
    Some(std::net::ToSocketAddrs::to_socket_addrs(s).ok()?.collect())
}

/// In unit tests and fuzzing, no resolver is asked (its answer would
/// depend on the machine, and an offline one can take seconds): only
/// `localhost` resolves, to 127.0.0.1.
#[cfg(any(test, feature = "fuzzing"))]
fn resolve(s: &str) -> Option<Vec<SocketAddr>> {
    let (host, port) = listen_host(s)?;
    let localhost =
        host.eq_ignore_ascii_case("localhost") || host.eq_ignore_ascii_case("localhost.");
    localhost.then(|| vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)])
}

/// `HOST:PORT` with a host name (letters, digits, `-`, `.`; not an
/// address): the host and the port. Written, not resolved.
pub(crate) fn listen_host(s: &str) -> Option<(&str, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let port = port.parse::<u16>().ok()?;
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    let name = host.strip_suffix('.').unwrap_or(host);
    let ok = name.len() <= 253
        && name.split('.').all(label_ok)
        && name.bytes().any(|b| b.is_ascii_alphabetic())
        && name.parse::<IpAddr>().is_err();
    ok.then_some((host, port))
}

/// A parsed `proxy_pass`: where to connect, and the URI part if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProxyPass {
    /// `https://` or `grpcs://`: the upstream speaks TLS (port 443 unless
    /// written).
    pub https: bool,
    /// `grpc_pass`: the upstream speaks HTTP/2 (prior knowledge for
    /// `grpc://`, ALPN `h2` for `grpcs://`), nginx's `ngx_http_grpc_module`.
    pub grpc: bool,
    /// `host:port` as written (the `Host` header sent upstream, as nginx's
    /// `$proxy_host`).
    pub authority: http::uri::Authority,
    /// The URI part (`/base/`), if the URL has one. nginx: with a URI part,
    /// the matched location prefix is replaced by it.
    pub uri: Option<String>,
}

impl ProxyPass {
    /// `http`, `https`, `grpc` or `grpcs`: as nginx writes the upstream's
    /// URL in its error-log lines.
    pub(crate) fn scheme(&self) -> &'static str {
        match (self.grpc, self.https) {
            (false, false) => "http",
            (false, true) => "https",
            (true, false) => "grpc",
            (true, true) => "grpcs",
        }
    }

    /// The host, without brackets around an IPv6 address: what
    /// `proxy_ssl_name` defaults to (nginx's `$proxy_host` without its port).
    pub(crate) fn host(&self) -> &str {
        let h = self.authority.host();
        h.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(h)
    }
}

pub(crate) fn parse_proxy_pass(s: &str) -> Result<ProxyPass, String> {
    let (https, rest) = match (s.strip_prefix("http://"), s.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (None, Some(rest)) => (true, rest),
        (None, None) => {
            return Err(format!(
                "invalid URL prefix in \"{s}\" (expected \"http://HOST:PORT[/URI]\" or \"https://HOST:PORT[/URI]\")"
            ));
        }
    };
    authority_and_uri(s, https, false, rest)
}

/// `grpc_pass`: `grpc://HOST:PORT`, `grpcs://HOST:PORT` or `grpc://GROUP`.
/// nginx's grpc module takes no URI part: the request's own path (the
/// gRPC method) always goes upstream.
pub(crate) fn parse_grpc_pass(s: &str) -> Result<ProxyPass, String> {
    let (https, rest) = match (s.strip_prefix("grpc://"), s.strip_prefix("grpcs://")) {
        (Some(rest), _) => (false, rest),
        (None, Some(rest)) => (true, rest),
        (None, None) => {
            return Err(format!(
                "invalid URL prefix in \"{s}\" (expected \"grpc://HOST:PORT\" or \"grpcs://HOST:PORT\")"
            ));
        }
    };
    if rest.contains('/') {
        return Err(format!(
            "invalid host in upstream \"{s}\" (grpc_pass takes no URI part)"
        ));
    }
    authority_and_uri(s, https, true, rest)
}

fn authority_and_uri(s: &str, https: bool, grpc: bool, rest: &str) -> Result<ProxyPass, String> {
    let (auth, uri) = match rest.find('/') {
        Some(i) => (&rest[..i], Some(rest[i..].to_string())),
        None => (rest, None),
    };
    if auth.is_empty() {
        return Err(format!("no host in upstream \"{s}\""));
    }
    let authority: http::uri::Authority = auth
        .parse()
        .map_err(|_| format!("invalid host in upstream \"{s}\""))?;
    if authority.as_str().contains('@') {
        return Err(format!("invalid host in upstream \"{s}\""));
    }
    if let Some(u) = &uri {
        if u.parse::<http::uri::PathAndQuery>().is_err() {
            return Err(format!("invalid URI part in upstream \"{s}\""));
        }
    }
    Ok(ProxyPass {
        https,
        grpc,
        authority,
        uri,
    })
}

/// A location's matching rule, nginx's modifiers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PathRule {
    /// `= /p`
    Exact(String),
    /// `/p`, or `^~ /p` (`stop_regex`): a prefix.
    Prefix { prefix: String, stop_regex: bool },
    /// `~ re` (or `~* re`, case-insensitive).
    Regex { pattern: String, caseless: bool },
}

/// Parse `"= /p"`, `"^~ /p"`, `"~ re"`, `"~* re"`, `"/p"`.
pub(crate) fn parse_path(s: &str) -> Result<PathRule, String> {
    let s = s.trim();
    let (modifier, rest) = if let Some(r) = s.strip_prefix("^~") {
        ("^~", r)
    } else if let Some(r) = s.strip_prefix("~*") {
        ("~*", r)
    } else if let Some(r) = s.strip_prefix('~') {
        ("~", r)
    } else if let Some(r) = s.strip_prefix('=') {
        ("=", r)
    } else {
        ("", s)
    };
    let rest = rest.trim_start();
    if rest.is_empty() {
        return Err(format!("invalid location \"{s}\": no path"));
    }
    Ok(match modifier {
        "=" => PathRule::Exact(rest.to_string()),
        "^~" => PathRule::Prefix {
            prefix: rest.to_string(),
            stop_regex: true,
        },
        "~" | "~*" => PathRule::Regex {
            pattern: rest.to_string(),
            caseless: modifier == "~*",
        },
        _ => {
            if rest.starts_with('@') {
                return Err(format!(
                    "named location \"{rest}\" is not supported: use error_pages instead"
                ));
            }
            PathRule::Prefix {
                prefix: rest.to_string(),
                stop_regex: false,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("32K").unwrap(), 32768);
        assert_eq!(parse_size("40000").unwrap(), 40000);
        assert!(parse_size("1g").is_err());
        assert!(parse_size("m").is_err());
        assert!(parse_size("1.5m").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn proxy_pass() {
        let p = parse_proxy_pass("http://127.0.0.1:7070").unwrap();
        assert_eq!(p.authority.as_str(), "127.0.0.1:7070");
        assert_eq!(p.uri, None);
        let p = parse_proxy_pass("http://up:80/base/").unwrap();
        assert_eq!(p.uri.as_deref(), Some("/base/"));
        assert!(!p.https);
        let p = parse_proxy_pass("https://up.example/base/").unwrap();
        assert!(p.https);
        assert_eq!(
            (p.authority.as_str(), p.host(), p.scheme()),
            ("up.example", "up.example", "https")
        );
        assert_eq!(p.uri.as_deref(), Some("/base/"));
        let p = parse_proxy_pass("https://[::1]:8443").unwrap();
        assert_eq!((p.authority.port_u16(), p.host()), (Some(8443), "::1"));
        assert!(parse_proxy_pass("https://").is_err());
        assert!(parse_proxy_pass("ftp://x").is_err());
        assert!(parse_proxy_pass("http://").is_err());
    }

    #[test]
    fn paths() {
        assert_eq!(parse_path("= /a").unwrap(), PathRule::Exact("/a".into()));
        assert_eq!(parse_path("=/a").unwrap(), PathRule::Exact("/a".into()));
        assert_eq!(
            parse_path("^~ /s").unwrap(),
            PathRule::Prefix {
                prefix: "/s".into(),
                stop_regex: true
            }
        );
        assert_eq!(
            parse_path("~* \\.png$").unwrap(),
            PathRule::Regex {
                pattern: "\\.png$".into(),
                caseless: true
            }
        );
        assert!(parse_path("=").is_err());
    }

    #[test]
    fn a_listen_host_name_is_resolved_when_read() {
        assert_eq!(
            parse_listen("localhost:8080").unwrap(),
            "127.0.0.1:8080".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(listen_host("nginx:80"), Some(("nginx", 80)));
        assert_eq!(
            listen_host("web-1.internal.:443"),
            Some(("web-1.internal.", 443))
        );
        for not_a_name in [
            "127.0.0.1:80",
            "1.2.3:80",
            "-a:80",
            "a_b:80",
            "a..b:80",
            "a:http",
        ] {
            assert_eq!(listen_host(not_a_name), None, "{not_a_name}");
        }
        // .invalid never resolves (RFC 6761).
        assert_eq!(
            parse_listen("nginx.invalid:80").unwrap_err(),
            "host not found in \"nginx.invalid:80\" of the \"listen\" key"
        );
        assert!(
            parse_listen("a_b:80")
                .unwrap_err()
                .starts_with("invalid listen address")
        );
        let flags = parse_listen_flags("localhost:8443 ssl").unwrap();
        assert_eq!((flags.addr.port(), flags.ssl), (8443, true));
    }

    #[test]
    fn an_unresolved_listen_host_is_reported_at_its_value() {
        let text = "[[servers]]\nlisten = \"nginx.invalid:80 default_server\"\n\
                    [[servers.locations]]\npath = \"/\"\nreturn = { status = 200 }\n";
        let Err(e) = crate::config::parse_str("t.toml", text) else {
            panic!("nginx.invalid resolved")
        };
        assert_eq!(
            e.0[0].to_string(),
            "t.toml:2:10: host not found in \"nginx.invalid:80\" of the \"listen\" key"
        );
    }
}
