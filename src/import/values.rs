//! nginx's value syntax → sluice's: times, sizes, `on`/`off`, `listen`
//! addresses, location modifiers, and the variables a value uses (sluice
//! has most of nginx's, none of those `map`, `geo` or `set` make).

use crate::config::values as sv;
use crate::vars::{Context, Template};

/// nginx's time (`30`, `1m30s`, `500ms`, `1h`, `2d`, `1w`, `1M`, `1y`,
/// spaces allowed) as sluice writes it: as written when sluice reads it
/// the same, else in seconds (or milliseconds).
pub fn time(s: &str) -> Result<String, String> {
    if sv::parse_duration(s).is_ok() {
        return Ok(s.to_string());
    }
    let bad = || format!("invalid time \"{s}\"");
    let mut total: u64 = 0;
    let mut rest = s.trim();
    while !rest.is_empty() {
        rest = rest.trim_start();
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let ms: u64 = match &rest[..unit] {
            "ms" => 1,
            "" | "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            "M" => 30 * 86_400_000,
            "y" => 365 * 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit..];
        total = n
            .checked_mul(ms)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    Ok(if total % 1000 == 0 {
        format!("{}s", total / 1000)
    } else {
        format!("{total}ms")
    })
}

/// `on` / `off`.
pub fn flag(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("invalid value \"{s}\" (expected on or off)")),
    }
}

/// A `listen` address as sluice reads it: `80` and `*:80` are all IPv4
/// addresses, a port is added to an address without one (nginx's 80),
/// `localhost` is 127.0.0.1, another host name is kept as written (sluice
/// resolves it when it loads the file, as nginx does at start; the
/// machine that imports may not know it). `Err`: what sluice cannot
/// listen on.
pub fn listen_addr(s: &str) -> Result<String, String> {
    if s.starts_with("unix:") {
        return Err("sluice listens on TCP only".into());
    }
    let with_port = if s.parse::<u16>().is_ok() {
        format!("0.0.0.0:{s}")
    } else if let Some(p) = s.strip_prefix("*:") {
        format!("0.0.0.0:{p}")
    } else if s == "*" {
        "0.0.0.0:80".into()
    } else if s.starts_with('[') && s.ends_with(']') || !s.starts_with('[') && !s.contains(':') {
        format!("{s}:80")
    } else {
        s.to_string()
    };
    let with_port = match with_port.strip_prefix("localhost:") {
        Some(p) => format!("127.0.0.1:{p}"),
        None => with_port,
    };
    if sv::listen_host(&with_port).is_some() {
        return Ok(with_port);
    }
    sv::parse_listen(&with_port)
        .map(|_| with_port)
        .map_err(|_| format!("invalid listen address \"{s}\""))
}

/// A `location`'s arguments as sluice's `path`: `= /p`, `^~ /p`, `~ re`,
/// `~* re`, `/p` (nginx also takes the modifier glued on: `=/p`).
/// `Ok(None)` for a named location (`@name`).
pub fn location_path(args: &[String]) -> Result<Option<String>, String> {
    let (modifier, path) = match args {
        [m, p] => (m.as_str(), p.as_str()),
        [one] => {
            let one = one.as_str();
            if one.starts_with('@') {
                return Ok(None);
            }
            ["^~", "~*", "~", "="]
                .iter()
                .find_map(|m| one.strip_prefix(m).map(|rest| (*m, rest)))
                .unwrap_or(("", one))
        }
        _ => return Err("invalid number of arguments in \"location\"".into()),
    };
    if path.is_empty() {
        return Err("no path".into());
    }
    match modifier {
        "" => Ok(Some(path.to_string())),
        "=" | "^~" => Ok(Some(format!("{modifier} {path}"))),
        "~" | "~*" => {
            regex::RegexBuilder::new(path)
                .case_insensitive(modifier == "~*")
                .build()
                .map_err(|e| {
                    format!(
                        "the regex does not compile in sluice (Rust's regex, not PCRE): {}",
                        e.to_string().lines().last().unwrap_or("")
                    )
                })?;
            Ok(Some(format!("{modifier} {path}")))
        }
        m => Err(format!("invalid location modifier \"{m}\"")),
    }
}

/// The names of the variables in `s` (`$a`, `${b}`), in order.
pub fn variables(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            i += 1;
            continue;
        }
        i += 1;
        let braced = b.get(i) == Some(&b'{');
        if braced {
            i += 1;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i > start {
            out.push(s[start..i].to_string());
        }
    }
    out
}

/// The variables of `s` sluice does not have in `cx` (`Proxy` for
/// `proxy_set_header`, `Response` for `add_header`, as sluice reads them),
/// besides `known` (the maps and geos translated).
pub fn unknown_vars(s: &str, cx: Context, known: &[String]) -> Vec<String> {
    variables(s)
        .into_iter()
        .filter(|v| !is_known(v, cx, known))
        .collect()
}

/// Whether `$v` is a variable sluice has in `cx`, or one of `known`.
pub fn is_known(v: &str, cx: Context, known: &[String]) -> bool {
    let names = crate::vars::Names {
        user: known,
        captures: None,
    };
    Template::parse_named(&format!("${{{v}}}"), cx, names).is_ok()
}

/// `s` with each of `vars` replaced by `with`.
pub fn replace_vars(s: &str, vars: &[String], with: &str) -> String {
    let mut out = s.to_string();
    for v in vars {
        out = out.replace(&format!("${{{v}}}"), with);
        // `$v` not followed by a name character.
        let mut rebuilt = String::new();
        let mut rest = out.as_str();
        let pat = format!("${v}");
        while let Some(i) = rest.find(&pat) {
            let after = rest[i + pat.len()..].chars().next();
            rebuilt.push_str(&rest[..i]);
            if after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                rebuilt.push_str(&pat);
            } else {
                rebuilt.push_str(with);
            }
            rest = &rest[i + pat.len()..];
        }
        rebuilt.push_str(rest);
        out = rebuilt;
    }
    out
}

/// `$a, $b` for messages.
pub fn list_vars(vars: &[String]) -> String {
    let v: Vec<String> = vars.iter().map(|v| format!("${v}")).collect();
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(time("60s").unwrap(), "60s");
        assert_eq!(time("1m30s").unwrap(), "1m30s");
        assert_eq!(time("75").unwrap(), "75");
        assert_eq!(time("1w").unwrap(), "604800s");
        assert_eq!(time("1m 30s").unwrap(), "90s");
        assert!(time("soon").is_err());
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(listen_addr("80").unwrap(), "0.0.0.0:80");
        assert_eq!(listen_addr("*:8080").unwrap(), "0.0.0.0:8080");
        assert_eq!(listen_addr("127.0.0.1").unwrap(), "127.0.0.1:80");
        assert_eq!(listen_addr("[::]:443").unwrap(), "[::]:443");
        assert_eq!(listen_addr("[::1]").unwrap(), "[::1]:80");
        assert_eq!(listen_addr("localhost:8080").unwrap(), "127.0.0.1:8080");
        assert!(listen_addr("unix:/run/x.sock").is_err());
        assert_eq!(listen_addr("example.com").unwrap(), "example.com:80");
        assert_eq!(listen_addr("nginx:8080").unwrap(), "nginx:8080");
        assert!(listen_addr("a_b:80").is_err());
    }

    #[test]
    fn location_paths() {
        let p = |a: &[&str]| location_path(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(p(&["/api"]).unwrap().unwrap(), "/api");
        assert_eq!(p(&["=", "/x"]).unwrap().unwrap(), "= /x");
        assert_eq!(p(&["=/x"]).unwrap().unwrap(), "= /x");
        assert_eq!(p(&["^~", "/s/"]).unwrap().unwrap(), "^~ /s/");
        assert_eq!(
            p(&["~*", r"\.(png|jpg)$"]).unwrap().unwrap(),
            r"~* \.(png|jpg)$"
        );
        assert_eq!(p(&["@named"]).unwrap(), None);
        assert!(p(&["~", r"^/(?!admin)"]).unwrap_err().contains("PCRE"));
    }

    #[test]
    fn variables_known_and_not() {
        assert_eq!(variables("${a}b$c_d-$e"), ["a", "c_d", "e"]);
        assert_eq!(
            unknown_vars("$binary_remote_addr$limit_key", Context::Key, &[]),
            ["limit_key"]
        );
        assert!(
            unknown_vars(
                "$proxy_host $proxy_add_x_forwarded_for $host $http_x",
                Context::Proxy,
                &[]
            )
            .is_empty()
        );
        assert_eq!(
            unknown_vars("$request_id", Context::Response, &[]),
            ["request_id"]
        );
        assert_eq!(
            unknown_vars("$connection_upgrade", Context::Proxy, &[]),
            ["connection_upgrade"]
        );
        assert_eq!(replace_vars("$a $ab ${a}", &["a".into()], "-"), "- $ab -");
    }
}
