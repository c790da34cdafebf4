//! Configurations that the harness completes with the addresses it allocated.
//!
//! A test writes what it means — zones, locations, limits — and leaves the addresses out: a
//! sluice `[[servers]]` table or `[admin]` table without `listen`, an nginx `server { }` block
//! without `listen`, get one of the harness's reserved ports (see [`super::ports`]), in order.
//! A table that names its own `listen` is left alone (a reload that keeps one particular
//! listener names it with [`super::Sluice::addr_of`]). So there are no placeholders to replace,
//! and a start that finds a port taken can be retried on other ports with the same fragment.

use std::net::SocketAddr;
use std::sync::OnceLock;

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
    for (header, has_listen) in tables(toml) {
        match header {
            "[[servers]]" if !has_listen => holes.servers += 1,
            "[admin]" if !has_listen => holes.admin = true,
            _ => {}
        }
    }
    holes
}

/// `toml` with `listen = "ADDR"` added to each table [`toml_holes`] counted: `servers` in order,
/// `admin` for `[admin]`. Panics if there are fewer addresses than holes.
pub fn complete_toml(toml: &str, servers: &[SocketAddr], admin: Option<SocketAddr>) -> String {
    let mut out = String::with_capacity(toml.len() + 64);
    let mut servers = servers.iter();
    let headers = tables(toml);
    let mut headers = headers.iter();
    for line in toml.lines() {
        out.push_str(line);
        out.push('\n');
        if !is_header(line) {
            continue;
        }
        let (header, has_listen) = headers.next().expect("one entry per table header");
        if *has_listen {
            continue;
        }
        let addr = match *header {
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

/// Each table header of `toml` (trimmed, comments cut) and whether its table has `listen`.
fn tables(toml: &str) -> Vec<(&str, bool)> {
    let mut tables: Vec<(&str, bool)> = Vec::new();
    for line in toml.lines() {
        let code = line.split('#').next().unwrap_or_default().trim();
        if is_header(line) {
            tables.push((code, false));
        } else if let Some(last) = tables.last_mut() {
            let key = code.split('=').next().unwrap_or_default().trim();
            if code.contains('=') && key == "listen" {
                last.1 = true;
            }
        }
    }
    tables
}

fn is_header(line: &str) -> bool {
    line.trim_start().starts_with('[')
}

/// The `server {` openings of an nginx `http { }` block, as byte offsets just past the `{`,
/// for those blocks that have no `listen` of their own.
fn nginx_holes_at(http: &str) -> Vec<usize> {
    static SERVER: OnceLock<regex::Regex> = OnceLock::new();
    let server = SERVER.get_or_init(|| regex::Regex::new(r"\bserver\s*\{").expect("a regex"));
    server
        .find_iter(http)
        .filter(|m| !block(&http[m.end()..]).contains("listen "))
        .map(|m| m.end())
        .collect()
}

/// The number of `server { }` blocks without `listen` in `http`.
pub fn nginx_holes(http: &str) -> usize {
    nginx_holes_at(http).len()
}

/// `http` with `listen ADDR;` added to each block [`nginx_holes`] counted, in order.
pub fn complete_nginx(http: &str, servers: &[SocketAddr]) -> String {
    let holes = nginx_holes_at(http);
    assert!(
        holes.len() <= servers.len(),
        "more server blocks without listen than ports in {http}"
    );
    let mut out = String::with_capacity(http.len() + 40 * holes.len());
    let mut from = 0;
    for (at, addr) in holes.into_iter().zip(servers) {
        out.push_str(&http[from..at]);
        out.push_str(&format!(" listen {addr};"));
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
}
