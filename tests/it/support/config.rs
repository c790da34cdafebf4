//! Configurations that the harness completes with the addresses it allocated.
//!
//! A test writes what it means — zones, locations, limits — and leaves the addresses out: a
//! sluice `[[servers]]` table or `[admin]` table without `listen`, an nginx `server { }` block
//! without `listen`, get one of the harness's reserved ports (see [`super::ports`]), in order.
//! A table that names its own `listen` is left alone (a reload that keeps one particular
//! listener names it with [`super::Sluice::addr_of`]). So there are no placeholders to replace,
//! and a start that finds a port taken can be retried on other ports with the same fragment.
//!
//! A `listen` made of flags only — its first word one of [`LISTEN_FLAGS`] — is a hole too, whose
//! flags stay: `listen = "ssl proxy_protocol"` in a `[[servers]]` table becomes `listen =
//! "127.0.0.1:PORT ssl proxy_protocol"`, and nginx's `listen proxy_protocol;` becomes `listen
//! 127.0.0.1:PORT proxy_protocol;` (nginx itself would read `proxy_protocol` as a host name).

use std::net::SocketAddr;
use std::sync::OnceLock;

/// The first words that make a `listen` a hole with flags (see the module's documentation).
pub const LISTEN_FLAGS: &[&str] = &["ssl", "http2", "proxy_protocol", "default_server"];

/// Whether `value` (a `listen`'s arguments) names flags only, no address.
fn flags_only(value: &str) -> bool {
    let first = value.split_whitespace().next().unwrap_or_default();
    LISTEN_FLAGS.contains(&first)
}

/// What a table says about `listen`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Listen {
    /// No `listen`: the harness adds one after the header.
    Missing,
    /// `listen = "FLAGS"`: the harness puts the address before the flags.
    Flags,
    /// An address of the test's own.
    Given,
}

/// What a sluice TOML fragment leaves to the harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TomlHoles {
    /// `[[servers]]` tables without `listen`.
    pub servers: usize,
    /// An `[admin]` table without `listen`.
    pub admin: bool,
}

/// The tables without `listen` in `toml`.
pub fn toml_holes(toml: &str) -> TomlHoles {
    let mut holes = TomlHoles {
        servers: 0,
        admin: false,
    };
    for (header, listen) in tables(toml) {
        match (header, listen) {
            ("[[servers]]", Listen::Missing | Listen::Flags) => holes.servers += 1,
            ("[admin]", Listen::Missing) => holes.admin = true,
            _ => {}
        }
    }
    holes
}

/// `toml` with `listen = "ADDR"` added to each table [`toml_holes`] counted (or, for `listen =
/// "FLAGS"`, `listen = "ADDR FLAGS"` in its place): `servers` in order, `admin` for `[admin]`.
/// Panics if there are fewer addresses than holes.
pub fn complete_toml(toml: &str, servers: &[SocketAddr], admin: Option<SocketAddr>) -> String {
    let mut out = String::with_capacity(toml.len() + 64);
    let mut servers = servers.iter();
    let headers = tables(toml);
    let mut headers = headers.iter();
    let mut current = None;
    for line in toml.lines() {
        if current == Some(("[[servers]]", Listen::Flags)) {
            if let Some(flags) = listen_value(line) {
                let addr = servers.next().unwrap_or_else(|| {
                    panic!("more [[servers]] without listen than ports in {toml}")
                });
                out.push_str(&format!("listen = \"{addr} {flags}\"\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
        if !is_header(line) {
            continue;
        }
        let (header, listen) = *headers.next().expect("one entry per table header");
        current = Some((header, listen));
        if listen != Listen::Missing {
            continue;
        }
        let addr = match header {
            "[[servers]]" => *servers
                .next()
                .unwrap_or_else(|| panic!("more [[servers]] without listen than ports in {toml}")),
            "[admin]" => admin.expect("an address for [admin]"),
            _ => continue,
        };
        out.push_str(&format!("listen = \"{addr}\"\n"));
    }
    out
}

/// Each table header of `toml` (trimmed, comments cut) and what its table says about `listen`.
fn tables(toml: &str) -> Vec<(&str, Listen)> {
    let mut tables: Vec<(&str, Listen)> = Vec::new();
    for line in toml.lines() {
        let code = line.split('#').next().unwrap_or_default().trim();
        if is_header(line) {
            tables.push((code, Listen::Missing));
        } else if let Some(last) = tables.last_mut() {
            if let Some(value) = listen_value(line) {
                last.1 = if flags_only(value) {
                    Listen::Flags
                } else {
                    Listen::Given
                };
            }
        }
    }
    tables
}

/// The string value of a `listen = "…"` line (a list of addresses counts as given).
fn listen_value(line: &str) -> Option<&str> {
    let code = line.split('#').next().unwrap_or_default().trim();
    let (key, value) = code.split_once('=')?;
    if key.trim() != "listen" {
        return None;
    }
    let value = value.trim();
    Some(
        value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value),
    )
}

fn is_header(line: &str) -> bool {
    line.trim_start().starts_with('[')
}

/// Where an address goes in an nginx `http { }` block: byte offsets just past the `{` of
/// `server` blocks that have no `listen` (the text to insert: ` listen ADDR;`), or just past the
/// `listen` of a `listen FLAGS;` (` ADDR`), in order.
fn nginx_holes_at(http: &str) -> Vec<(usize, Listen)> {
    static SERVER: OnceLock<regex::Regex> = OnceLock::new();
    static LISTEN: OnceLock<regex::Regex> = OnceLock::new();
    let server = SERVER.get_or_init(|| regex::Regex::new(r"\bserver\s*\{").expect("a regex"));
    let listen = LISTEN.get_or_init(|| regex::Regex::new(r"\blisten\s+([^;]*);").expect("a regex"));
    let mut holes = Vec::new();
    for m in server.find_iter(http) {
        let inside = block(&http[m.end()..]);
        let listens: Vec<regex::Captures> = listen.captures_iter(inside).collect();
        if listens.is_empty() {
            holes.push((m.end(), Listen::Missing));
        } else if let Some(c) = listens.iter().find(|c| flags_only(&c[1])) {
            let word = c.get(0).expect("the whole match").start() + "listen".len();
            holes.push((m.end() + word, Listen::Flags));
        }
    }
    holes
}

/// The number of `server { }` blocks without `listen` in `http`.
pub fn nginx_holes(http: &str) -> usize {
    nginx_holes_at(http).len()
}

/// `http` with `listen ADDR;` added to each block [`nginx_holes`] counted (or `ADDR` put before
/// the flags of its `listen FLAGS;`), in order.
pub fn complete_nginx(http: &str, servers: &[SocketAddr]) -> String {
    let holes = nginx_holes_at(http);
    assert!(
        holes.len() <= servers.len(),
        "more server blocks without listen than ports in {http}"
    );
    let mut out = String::with_capacity(http.len() + 40 * holes.len());
    let mut from = 0;
    for ((at, listen), addr) in holes.into_iter().zip(servers) {
        out.push_str(&http[from..at]);
        if listen == Listen::Flags {
            out.push_str(&format!(" {addr}"));
        } else {
            out.push_str(&format!(" listen {addr};"));
        }
        from = at;
    }
    out.push_str(&http[from..]);
    out
}

/// The inside of the block that starts right after its `{`, up to the matching `}`.
fn block(rest: &str) -> &str {
    let mut depth = 1;
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &rest[..i];
                }
            }
            _ => {}
        }
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_and_admin_without_listen_get_the_addresses_in_order() {
        let toml = "[admin]\n[[servers]]\nproxy_pass = \"http://x\"\n[[servers.locations]]\n\
                    path = \"/\"\n[[servers]]\nlisten = \"127.0.0.1:1\"\n[[servers]]\n";
        assert_eq!(
            toml_holes(toml),
            TomlHoles {
                servers: 2,
                admin: true
            }
        );
        let a: SocketAddr = "127.0.0.1:7".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:8".parse().unwrap();
        let admin: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(
            complete_toml(toml, &[a, b], Some(admin)),
            "[admin]\nlisten = \"127.0.0.1:9\"\n[[servers]]\nlisten = \"127.0.0.1:7\"\n\
             proxy_pass = \"http://x\"\n[[servers.locations]]\npath = \"/\"\n[[servers]]\n\
             listen = \"127.0.0.1:1\"\n[[servers]]\nlisten = \"127.0.0.1:8\"\n"
        );
    }

    #[test]
    fn nginx_server_blocks_without_listen_get_one() {
        let http =
            "server { location / { return 200; } }\nserver { listen 1.2.3.4:5; }\nserver_name x;";
        assert_eq!(nginx_holes(http), 1);
        let a: SocketAddr = "127.0.0.1:7".parse().unwrap();
        assert_eq!(
            complete_nginx(http, &[a]),
            "server { listen 127.0.0.1:7; location / { return 200; } }\nserver { listen \
             1.2.3.4:5; }\nserver_name x;"
        );
    }

    #[test]
    fn listen_with_flags_only_gets_the_address_before_its_flags() {
        let toml = "[[servers]]\nlisten = \"ssl proxy_protocol\"  # comment\nhttp2 = true\n\
                    [[servers]]\n[[servers]]\nlisten = \"127.0.0.1:1 proxy_protocol\"\n";
        assert_eq!(
            toml_holes(toml),
            TomlHoles {
                servers: 2,
                admin: false
            }
        );
        let a: SocketAddr = "127.0.0.1:7".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:8".parse().unwrap();
        assert_eq!(
            complete_toml(toml, &[a, b], None),
            "[[servers]]\nlisten = \"127.0.0.1:7 ssl proxy_protocol\"\nhttp2 = true\n\
             [[servers]]\nlisten = \"127.0.0.1:8\"\n[[servers]]\n\
             listen = \"127.0.0.1:1 proxy_protocol\"\n"
        );
        let http = "server { listen ssl http2 proxy_protocol; location / { return 200; } }\n\
                    server { location / { return 204; } }\nserver { listen 1.2.3.4:5 ssl; }";
        assert_eq!(nginx_holes(http), 2);
        assert_eq!(
            complete_nginx(http, &[a, b]),
            "server { listen 127.0.0.1:7 ssl http2 proxy_protocol; location / { return 200; } }\n\
             server { listen 127.0.0.1:8; location / { return 204; } }\n\
             server { listen 1.2.3.4:5 ssl; }"
        );
    }
}
