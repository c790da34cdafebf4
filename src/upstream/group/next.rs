//! `proxy_next_upstream`: when a request goes on to the next server of its
//! group (nginx's `NGX_HTTP_UPSTREAM_FT_*` masks and its rules).

use std::time::Duration;

/// The conditions `proxy_next_upstream` lists, as a mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conditions(u16);

impl Conditions {
    pub const ERROR: u16 = 1;
    pub const TIMEOUT: u16 = 1 << 1;
    pub const INVALID_HEADER: u16 = 1 << 2;
    pub const HTTP_500: u16 = 1 << 3;
    pub const HTTP_502: u16 = 1 << 4;
    pub const HTTP_503: u16 = 1 << 5;
    pub const HTTP_504: u16 = 1 << 6;
    pub const HTTP_403: u16 = 1 << 7;
    pub const HTTP_404: u16 = 1 << 8;
    pub const HTTP_429: u16 = 1 << 9;
    pub const NON_IDEMPOTENT: u16 = 1 << 10;

    /// nginx's default, `error timeout`.
    pub const DEFAULT: Conditions = Conditions(Self::ERROR | Self::TIMEOUT);

    const NAMES: [(&'static str, u16); 11] = [
        ("error", Self::ERROR),
        ("timeout", Self::TIMEOUT),
        ("invalid_header", Self::INVALID_HEADER),
        ("http_500", Self::HTTP_500),
        ("http_502", Self::HTTP_502),
        ("http_503", Self::HTTP_503),
        ("http_504", Self::HTTP_504),
        ("http_403", Self::HTTP_403),
        ("http_404", Self::HTTP_404),
        ("http_429", Self::HTTP_429),
        ("non_idempotent", Self::NON_IDEMPOTENT),
    ];

    /// The words of `proxy_next_upstream`; `off` anywhere turns it off, as
    /// in nginx.
    pub fn parse(words: &str) -> Result<Conditions, String> {
        let mut mask = 0;
        let mut off = false;
        for w in words.split_ascii_whitespace() {
            if w == "off" {
                off = true;
                continue;
            }
            match Self::NAMES.iter().find(|(n, _)| *n == w) {
                Some((_, bit)) => mask |= bit,
                None => {
                    let names: Vec<&str> = Self::NAMES.iter().map(|(n, _)| *n).collect();
                    return Err(format!(
                        "invalid value \"{w}\" (expected {} or off)",
                        names.join(", ")
                    ));
                }
            }
        }
        Ok(Conditions(if off { 0 } else { mask }))
    }

    /// Every bit of `mask` is listed.
    pub fn has(self, mask: u16) -> bool {
        self.0 & mask == mask
    }

    /// The words, as `sluice check` prints them (`off` for none).
    pub fn words(self) -> String {
        let w: Vec<&str> = Self::NAMES
            .iter()
            .filter(|(_, b)| self.0 & b != 0)
            .map(|(n, _)| *n)
            .collect();
        if w.is_empty() {
            "off".into()
        } else {
            w.join(" ")
        }
    }

    /// The condition a response status is (nginx's
    /// `ngx_http_upstream_next_errors`), if any.
    pub fn of_status(status: u16) -> Option<u16> {
        Some(match status {
            500 => Self::HTTP_500,
            502 => Self::HTTP_502,
            503 => Self::HTTP_503,
            504 => Self::HTTP_504,
            403 => Self::HTTP_403,
            404 => Self::HTTP_404,
            429 => Self::HTTP_429,
            _ => return None,
        })
    }
}

/// A location's `proxy_next_upstream*` settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextUpstream {
    pub conditions: Conditions,
    /// `proxy_next_upstream_tries`: 0, no limit.
    pub tries: usize,
    /// `proxy_next_upstream_timeout`: none, no limit.
    pub timeout: Option<Duration>,
}

impl Default for NextUpstream {
    fn default() -> Self {
        NextUpstream {
            conditions: Conditions::DEFAULT,
            tries: 0,
            timeout: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_masks() {
        let c = Conditions::parse("error timeout http_502").unwrap();
        assert!(c.has(Conditions::HTTP_502));
        assert!(!c.has(Conditions::HTTP_502 | Conditions::NON_IDEMPOTENT));
        assert_eq!(c.words(), "error timeout http_502");
        assert_eq!(Conditions::parse("off").unwrap().words(), "off");
        assert_eq!(Conditions::parse("error off").unwrap(), Conditions(0));
        assert!(Conditions::parse("http_501").is_err());
        assert_eq!(Conditions::of_status(503), Some(Conditions::HTTP_503));
        assert_eq!(Conditions::of_status(501), None);
    }
}
