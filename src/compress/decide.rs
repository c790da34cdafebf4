//! The decision, pure: what the request asked ([`Asked`]), what the
//! response is ([`Answered`]) and the location's settings
//! ([`Compression`]) → whether the response is encoded, with which
//! coding, and whether it says `Vary: Accept-Encoding` ([`Decision`]).
//!
//! It is nginx 1.22's, in its order: `ngx_http_gzip_header_filter` first
//! (on; status 200, 403 or 404; not already encoded; `gzip_min_length`
//! against a known length; `gzip_types`) decides whether the response
//! *could* be compressed, which is when `gzip_vary` adds its `Vary`; then
//! `ngx_http_gzip_ok` decides for this client (`Accept-Encoding`, `msie6`,
//! `gzip_http_version`, `gzip_proxied` against `Via` and the response's
//! caching fields, `gzip_disable`).

use super::{Coding, Compression, Proxied, Types, accept};

/// What the request said that compression reads.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Asked<'a> {
    /// The first `Accept-Encoding` (nginx reads the first).
    pub accept_encoding: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    /// The request came through a proxy (`Via`).
    pub via: bool,
    pub authorization: bool,
    /// HTTP/1.0 (below `gzip_http_version = "1.1"`).
    pub http10: bool,
}

/// What the response is, as compression sees it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Answered<'a> {
    pub status: u16,
    /// `Content-Encoding` (an empty one counts as none, as in nginx).
    pub content_encoding: Option<&'a [u8]>,
    /// The body's length, when known (`Content-Length`).
    pub length: Option<u64>,
    pub content_type: Option<&'a [u8]>,
    /// `Expires` and `Date`, for `gzip_proxied expired`.
    pub expires: Option<&'a [u8]>,
    pub date: Option<&'a [u8]>,
    /// Every `Cache-Control` value.
    pub cache_control: Vec<&'a [u8]>,
    pub last_modified: bool,
    pub etag: bool,
}

/// What is done to the response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Encoded with this coding (`None`: sent as it is).
    pub coding: Option<Coding>,
    /// `Vary: Accept-Encoding` is added (`gzip_vary`, and the response
    /// could have been compressed for some client).
    pub vary: bool,
}

/// The decision for `asked` and `answered` under `c`; `now` (Unix seconds)
/// stands for a missing `Date` in `gzip_proxied expired`.
pub(crate) fn decide(c: &Compression, asked: &Asked, answered: &Answered, now: u64) -> Decision {
    let none = Decision {
        coding: None,
        vary: false,
    };
    let encoded = answered.content_encoding.is_some_and(|v| !v.is_empty());
    if !matches!(answered.status, 200 | 403 | 404)
        || encoded
        || answered.length.is_some_and(|n| n < c.min_length)
        || !type_listed(&c.types, answered.content_type)
        || is_grpc(answered.content_type)
    {
        return none;
    }
    let vary = c.vary;
    let coding = for_client(c, asked, answered, now);
    Decision { coding, vary }
}

/// `ngx_http_gzip_ok`, with the coding chosen among `c.codings`.
fn for_client(c: &Compression, asked: &Asked, answered: &Answered, now: u64) -> Option<Coding> {
    let ae = asked.accept_encoding?;
    let coding = accept::choose(ae, &c.codings)?;
    if c.msie6 && asked.user_agent.is_some_and(accept::msie6) {
        return None;
    }
    if asked.http10 && !c.http10 {
        return None;
    }
    if asked.via && !proxied_ok(c.proxied, asked, answered, now) {
        return None;
    }
    if let Some(ua) = asked.user_agent {
        if c.disable.iter().any(|re| re.is_match(ua)) {
            return None;
        }
    }
    Some(coding)
}

/// `gzip_proxied` for a request that came through a proxy.
fn proxied_ok(p: Proxied, asked: &Asked, answered: &Answered, now: u64) -> bool {
    if p.contains(Proxied::OFF) || p.is_empty() {
        return false;
    }
    if p.contains(Proxied::ANY) || (asked.authorization && p.contains(Proxied::AUTH)) {
        return true;
    }
    if let Some(expires) = answered.expires {
        if !p.contains(Proxied::EXPIRED) {
            return false;
        }
        let Some(expires) = http_time(expires) else {
            return false;
        };
        let date = match answered.date {
            Some(d) => match http_time(d) {
                Some(d) => d,
                None => return false,
            },
            None => now,
        };
        return expires < date;
    }
    if !answered.cache_control.is_empty() {
        let has = |word: &[u8]| cache_control_has(&answered.cache_control, word);
        return (p.contains(Proxied::NO_CACHE) && has(b"no-cache"))
            || (p.contains(Proxied::NO_STORE) && has(b"no-store"))
            || (p.contains(Proxied::PRIVATE) && has(b"private"));
    }
    !(p.contains(Proxied::NO_LAST_MODIFIED) && answered.last_modified
        || p.contains(Proxied::NO_ETAG) && answered.etag)
}

/// An HTTP date in Unix seconds (the three formats nginx reads).
fn http_time(v: &[u8]) -> Option<u64> {
    let t = httpdate::parse_http_date(std::str::from_utf8(v).ok()?).ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs())
}

/// nginx's `ngx_http_parse_multi_header_lines` for a bare `word`: a
/// directive of that name (any case), alone, among `;`- or
/// `,`-separated ones, in any of the values.
pub(super) fn cache_control_has(values: &[&[u8]], word: &[u8]) -> bool {
    values.iter().any(|v| {
        let mut at = 0;
        while at < v.len() {
            let rest = &v[at..];
            if rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word) {
                let after = rest[word.len()..].trim_ascii_start();
                if after.is_empty() || after[0] == b',' {
                    return true;
                }
            }
            // To the next directive: past `;` or `,`, and its spaces.
            let next = rest.iter().position(|&b| b == b';' || b == b',');
            at += next.map_or(rest.len(), |i| i + 1);
            while v.get(at) == Some(&b' ') {
                at += 1;
            }
        }
        false
    })
}

/// `gzip_types` (with `text/html`, always) against the response's
/// `Content-Type`, as nginx compares them: the type up to the `;` before
/// a `charset=` parameter (the whole value when it has none), lowercased.
fn type_listed(types: &Types, content_type: Option<&[u8]>) -> bool {
    let list = match types {
        Types::Any => return true,
        Types::List(list) => list,
    };
    let Some(ct) = content_type.filter(|v| !v.is_empty()) else {
        return false;
    };
    let t = nginx_type(ct);
    t.eq_ignore_ascii_case(b"text/html") || list.iter().any(|l| t.eq_ignore_ascii_case(l))
}

/// nginx's `content_type_len` of a `Content-Type` value
/// (`ngx_http_upstream_copy_content_type`): cut at the `;` whose
/// parameter (after spaces) is `charset=`, else whole.
pub(super) fn nginx_type(ct: &[u8]) -> &[u8] {
    let mut p = 0;
    while p < ct.len() {
        if ct[p] != b';' {
            p += 1;
            continue;
        }
        let semi = p;
        p += 1;
        while ct.get(p) == Some(&b' ') {
            p += 1;
        }
        if p == ct.len() {
            return ct;
        }
        if ct.len() - p >= 8 && ct[p..p + 8].eq_ignore_ascii_case(b"charset=") {
            return &ct[..semi];
        }
        // (nginx's loop steps past the byte it stopped at.)
        p += 1;
    }
    ct
}

/// gRPC is never compressed: its messages carry their own compression
/// flag, and a client reads the stream's bytes as frames.
fn is_grpc(content_type: Option<&[u8]>) -> bool {
    content_type
        .is_some_and(|ct| ct.len() >= 16 && ct[..16].eq_ignore_ascii_case(b"application/grpc"))
}
