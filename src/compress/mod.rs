//! Response compression: nginx's gzip filter (`gzip`, `gzip_types`,
//! `gzip_min_length`, `gzip_proxied`, `gzip_vary`, `gzip_disable`,
//! `gzip_http_version`, `gzip_comp_level`, `gzip_buffers`), and zstd and
//! brotli beside it (`compress = ["zstd", "br", "gzip"]`), chosen by the
//! client's `Accept-Encoding`.
//!
//! Why a filter on the finished response and not inside the upstream
//! client or the writers: nginx's gzip is a header and body filter that
//! every response of a location goes through (proxied ones, `return`,
//! error pages), after `add_header`, before the access log; here
//! [`apply`] is that step, called where a request's response is finished
//! (`request::finish`), and both writers (HTTP/1.1's own loop, hyper's
//! HTTP/2) frame the result as any body of unknown length: chunked, or
//! DATA frames.
//!
//! [`decide`] is the decision, pure (request facts, response facts,
//! settings); [`encode`] the streaming body: compressed as it arrives,
//! flushed when the upstream pauses, with at most `gzip_buffers` of output
//! held before it is handed on (a slow client stops the polling, so
//! nothing piles up).

mod accept;
mod decide;
mod encode;
#[cfg(test)]
mod tests;

pub(crate) use decide::{Answered, Asked, decide};

use crate::body::Body;
use crate::upstream::UpstreamFields;
use http::header::{self, HeaderValue};
use http::{HeaderName, Response};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A content coding sluice can answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    Zstd,
    Br,
}

impl Coding {
    /// By its `Accept-Encoding` name.
    pub fn parse(s: &str) -> Option<Coding> {
        match s {
            "gzip" => Some(Coding::Gzip),
            "zstd" => Some(Coding::Zstd),
            "br" => Some(Coding::Br),
            _ => None,
        }
    }

    /// Its `Content-Encoding` name.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Zstd => "zstd",
            Coding::Br => "br",
        }
    }
}

/// `gzip_types`: `*`, or the listed types (lowercase; `text/html` is
/// always one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Types {
    Any,
    List(Vec<Vec<u8>>),
}

/// `gzip_proxied`'s words, as a set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Proxied(u16);

impl Proxied {
    pub const OFF: Proxied = Proxied(1);
    pub const EXPIRED: Proxied = Proxied(2);
    pub const NO_CACHE: Proxied = Proxied(4);
    pub const NO_STORE: Proxied = Proxied(8);
    pub const PRIVATE: Proxied = Proxied(16);
    pub const NO_LAST_MODIFIED: Proxied = Proxied(32);
    pub const NO_ETAG: Proxied = Proxied(64);
    pub const AUTH: Proxied = Proxied(128);
    pub const ANY: Proxied = Proxied(256);

    /// One of nginx's words.
    pub fn word(w: &str) -> Option<Proxied> {
        Some(match w {
            "off" => Proxied::OFF,
            "expired" => Proxied::EXPIRED,
            "no-cache" => Proxied::NO_CACHE,
            "no-store" => Proxied::NO_STORE,
            "private" => Proxied::PRIVATE,
            "no_last_modified" => Proxied::NO_LAST_MODIFIED,
            "no_etag" => Proxied::NO_ETAG,
            "auth" => Proxied::AUTH,
            "any" => Proxied::ANY,
            _ => return None,
        })
    }

    pub fn contains(self, other: Proxied) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn with(self, other: Proxied) -> Proxied {
        Proxied(self.0 | other.0)
    }
}

/// A location's compression settings, compiled (only where it is on).
#[derive(Clone, Debug)]
pub struct Compression {
    /// The codings offered, in the configuration's order (ties go to the
    /// first); `["gzip"]` unless `compress` says otherwise.
    pub codings: Vec<Coding>,
    pub types: Types,
    /// `gzip_min_length` (nginx's default 20).
    pub min_length: u64,
    pub proxied: Proxied,
    pub vary: bool,
    /// `gzip_disable`'s regexes (case-insensitive, as nginx compiles them).
    pub disable: Vec<regex::bytes::Regex>,
    /// `gzip_disable "msie6"`.
    pub msie6: bool,
    /// `gzip_http_version = "1.0"`: HTTP/1.0 requests too.
    pub http10: bool,
    /// `gzip_comp_level` (1–9).
    pub gzip_level: u32,
    /// `zstd_comp_level` (1–19).
    pub zstd_level: i32,
    /// `brotli_comp_level` (0–11).
    pub brotli_level: u32,
    /// `gzip_buffers`: how many, and of what size.
    pub buffers: (usize, usize),
}

impl Default for Compression {
    /// nginx's defaults (`gzip on;` alone).
    fn default() -> Compression {
        Compression {
            codings: vec![Coding::Gzip],
            types: Types::List(Vec::new()),
            min_length: 20,
            proxied: Proxied::OFF,
            vary: false,
            disable: Vec::new(),
            msie6: false,
            http10: false,
            gzip_level: 1,
            zstd_level: 1,
            brotli_level: 6,
            buffers: (32, 4096),
        }
    }
}

/// nginx's `$gzip_ratio`: the body's bytes in and out of the encoder,
/// filled as it ends, read by the access-log line.
#[derive(Debug, Default)]
pub struct Ratio {
    zin: AtomicU64,
    zout: AtomicU64,
}

impl Ratio {
    fn set(&self, zin: u64, zout: u64) {
        self.zin.store(zin, Ordering::Relaxed);
        self.zout.store(zout, Ordering::Relaxed);
    }

    /// The bytes in and out, once the body ended (out 0: not yet).
    pub fn get(&self) -> (u64, u64) {
        let zin = self.zin.load(Ordering::Relaxed);
        (zin, self.zout.load(Ordering::Relaxed))
    }
}

/// The response under `c` for a request that `asked` (a `head` request's
/// body is left alone: its fields say what the body would have been):
/// fields and body as [`decide`] says, and the ratio the body fills when
/// it is encoded.
pub(crate) fn apply(
    mut resp: Response<Body>,
    c: &Compression,
    asked: &Asked,
    head: bool,
) -> (Response<Body>, Option<Arc<Ratio>>) {
    let decision = {
        let answered = answered(&resp);
        decide(c, asked, &answered, crate::clock::coarse_unix_secs())
    };
    if decision.vary {
        let vary = HeaderValue::from_static("Accept-Encoding");
        resp.headers_mut().append(header::VARY, vary);
    }
    let Some(coding) = decision.coding else {
        return (resp, None);
    };
    let weak = weak_etag(&resp);
    for name in [header::CONTENT_LENGTH, header::ACCEPT_RANGES, header::ETAG] {
        remove(&mut resp, &name);
    }
    let h = resp.headers_mut();
    if let Some(etag) = weak {
        h.insert(header::ETAG, etag);
    }
    let name = HeaderValue::from_static(coding.name());
    h.insert(header::CONTENT_ENCODING, name);
    if head {
        return (resp, None);
    }
    let ratio = Arc::new(Ratio::default());
    let resp = resp.map(|body| encode::Encoded::body(body, coding, c, ratio.clone()));
    (resp, Some(ratio))
}

/// The response's facts for [`decide`], from its upstream fields and its
/// own.
fn answered<B: hyper::body::Body>(resp: &Response<B>) -> Answered<'_> {
    let first = |name: &HeaderName| crate::upstream::first_value(resp, name);
    let length = first(&header::CONTENT_LENGTH)
        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse().ok())
        .or_else(|| resp.body().size_hint().exact());
    let mut cache_control: Vec<&[u8]> = Vec::new();
    if let Some(up) = UpstreamFields::of(resp) {
        cache_control.extend(
            up.iter()
                .filter(|(n, _)| *n == b"cache-control")
                .map(|f| f.1),
        );
    }
    let own = resp.headers().get_all(header::CACHE_CONTROL);
    cache_control.extend(own.iter().map(HeaderValue::as_bytes));
    Answered {
        status: resp.status().as_u16(),
        content_encoding: first(&header::CONTENT_ENCODING),
        length,
        content_type: first(&header::CONTENT_TYPE),
        expires: first(&header::EXPIRES),
        date: first(&header::DATE),
        cache_control,
        last_modified: first(&header::LAST_MODIFIED).is_some(),
        etag: first(&header::ETAG).is_some(),
    }
}

/// nginx's `ngx_http_weak_etag`: a strong `ETag` made weak (`W/"x"`), a
/// weak one kept, one that is no quoted string dropped (`None`).
fn weak_etag<B>(resp: &Response<B>) -> Option<HeaderValue> {
    let v = crate::upstream::first_value(resp, &header::ETAG)?;
    if v.len() > 2 && v.starts_with(b"W/") {
        return HeaderValue::from_bytes(v).ok();
    }
    if !v.starts_with(b"\"") {
        return None;
    }
    let mut weak = b"W/".to_vec();
    weak.extend_from_slice(v);
    HeaderValue::from_bytes(&weak).ok()
}

/// Every field `name` of the response, the upstream's and its own.
fn remove<B>(resp: &mut Response<B>, name: &HeaderName) {
    if let Some(up) = resp.extensions_mut().get_mut::<UpstreamFields>() {
        up.remove(name.as_str().as_bytes());
    }
    resp.headers_mut().remove(name);
}
