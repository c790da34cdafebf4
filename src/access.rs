//! nginx's `allow` and `deny`: access by the client's address (after
//! `real_ip`), the first rule that matches deciding; no rule matching
//! allows. A refused request gets 403 and the error line "access forbidden
//! by rule".
//!
//! nginx checks access after `limit_req` and `limit_conn` (its access phase
//! follows the preaccess phase), so a refused client still counts against
//! a zone, and a client over a limit gets the limit's status, not 403.
//! sluice keeps that order.

use ipnet::IpNet;
use std::net::IpAddr;

/// One `allow` or `deny` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub allow: bool,
    /// `None`: `all`.
    pub net: Option<IpNet>,
}

impl Rule {
    /// `"allow 10.0.0.0/8"`, `"deny all"`, `"allow ::1"`.
    pub fn parse(s: &str) -> Result<Rule, String> {
        let mut words = s.split_whitespace();
        let allow = match words.next() {
            Some("allow") => true,
            Some("deny") => false,
            _ => {
                return Err(format!(
                    "invalid access rule \"{s}\" (expected \"allow ADDRESS\", \"deny ADDRESS\", with an address, a network or \"all\")"
                ));
            }
        };
        let (Some(what), None) = (words.next(), words.next()) else {
            return Err(format!(
                "invalid access rule \"{s}\" (one address, network or \"all\" after {})",
                if allow { "allow" } else { "deny" }
            ));
        };
        let net = match what {
            "all" => None,
            w if w.starts_with("unix:") => {
                return Err(format!(
                    "invalid access rule \"{s}\" (sluice listens on no UNIX sockets)"
                ));
            }
            w => Some(crate::realip::parse_cidr(w)?),
        };
        Ok(Rule { allow, net })
    }

    fn matches(&self, ip: IpAddr) -> bool {
        self.net.is_none_or(|n| n.contains(&ip))
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verb = if self.allow { "allow" } else { "deny" };
        match self.net {
            Some(n) => write!(f, "{verb} {n}"),
            None => write!(f, "{verb} all"),
        }
    }
}

/// Whether `rules` let `ip` in (an IPv4-mapped IPv6 address is checked as
/// IPv4, as nginx does).
pub fn allows(rules: &[Rule], ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    rules.iter().find(|r| r.matches(ip)).is_none_or(|r| r.allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(lines: &[&str]) -> Vec<Rule> {
        lines.iter().map(|l| Rule::parse(l).unwrap()).collect()
    }

    fn ok(r: &[Rule], ip: &str) -> bool {
        allows(r, ip.parse().unwrap())
    }

    #[test]
    fn the_first_match_decides() {
        let r = rules(&[
            "deny 192.168.1.1",
            "allow 192.168.1.0/24",
            "allow ::1",
            "deny all",
        ]);
        assert!(!ok(&r, "192.168.1.1"));
        assert!(ok(&r, "192.168.1.2"));
        assert!(ok(&r, "::1"));
        assert!(!ok(&r, "10.0.0.1"));
        assert!(ok(&r, "::ffff:192.168.1.9"));
        assert!(ok(&[], "10.0.0.1"));
        assert!(ok(&rules(&["deny 10.0.0.0/8"]), "11.0.0.1"));
    }

    #[test]
    fn bad_rules_say_why() {
        for bad in [
            "permit all",
            "allow",
            "allow 1.2.3.4 5.6.7.8",
            "deny unix:",
            "allow 300.1.1.1",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Rule::parse("allow 10.1.2.3/8").unwrap().net,
            Some("10.0.0.0/8".parse().unwrap())
        );
    }
}
