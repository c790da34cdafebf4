//! A response head, written as the client gets it, and how its body is
//! framed.
//!
//! The rules are the ones clients of sluice have always seen (hyper's
//! HTTP/1.1 server wrote them before this loop, and the conformance suite
//! holds them): lower-case field names in the order the response has them;
//! an HTTP/1.0 client is answered in HTTP/1.0 (and told `keep-alive` when
//! it asked for it), an HTTP/1.1 client that asked to close is told
//! `close`; `Content-Length` from the body's exact size, else chunked
//! (HTTP/1.1) or the connection's end (HTTP/1.0); none for a body that
//! cannot have one (`HEAD`, 1xx, 204, 304), though `HEAD` keeps the length
//! of the body it would have had; `Date` when the response has none.

use crate::upstream::UpstreamFields;
use http::header::{self, HeaderName, HeaderValue};
use http::{StatusCode, Version};

/// What the request said that shapes its response.
#[derive(Clone, Copy, Debug)]
pub struct Asked {
    pub http10: bool,
    pub head: bool,
}

/// The response body's length, as its size hint tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// No body at all (it ended before it began).
    None,
    Known(u64),
    Unknown,
}

/// How the body goes on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Exactly this many bytes (0: no body is written).
    Length(u64),
    /// Chunked, with the trailer fields the response announced (`Trailer`),
    /// if it did.
    Chunked(Option<Vec<HeaderName>>),
    /// Until the connection closes (HTTP/1.0, unknown length).
    Close,
}

/// The head, written: its framing, and whether the connection ends after
/// it.
#[derive(Debug)]
pub struct Written {
    pub framing: Framing,
    pub last: bool,
}

/// Writes the response head for `asked` into `dst` (with room for a small
/// body after it). `keep_alive`: the connection may serve another request
/// (it may come back false).
pub fn encode(
    parts: &mut http::response::Parts,
    body: Length,
    asked: Asked,
    keep_alive: &mut bool,
    dst: &mut Vec<u8>,
) -> Written {
    let status = parts.status;
    fix_connection(parts, asked, keep_alive);
    let http10 = asked.http10;
    let last = status == StatusCode::SWITCHING_PROTOCOLS || !*keep_alive;
    let upstream = UpstreamFields::of_parts(parts);
    dst.reserve(room(
        parts.headers.len() + upstream.map_or(0, UpstreamFields::len),
        body,
    ));
    status_line(dst, status, http10);
    let mut fields = Fields {
        dst,
        body,
        asked,
        status,
        framing: None,
        trailers: None,
        wrote_date: false,
        last,
    };
    if let Some(up) = upstream {
        fields.write_upstream(up);
    }
    fields.write_all(&parts.headers);
    let Fields {
        dst,
        framing,
        trailers,
        wrote_date,
        last,
        ..
    } = fields;
    let mut framing = match framing {
        Some(f) => f,
        None => implicit(dst, body, asked, status),
    };
    if !can_chunk(asked, status) {
        framing = Framing::Length(0);
    }
    if !wrote_date {
        dst.extend_from_slice(b"date: ");
        date(dst);
        dst.extend_from_slice(b"\r\n");
    }
    dst.extend_from_slice(b"\r\n");
    if let (Framing::Chunked(t), Some(allowed)) = (&mut framing, trailers) {
        *t = Some(allowed);
    }
    let last = last || framing == Framing::Close;
    Written { framing, last }
}

/// Writes a rendered rejection, head and body, for `asked`: the bytes
/// [`encode`] and the body loop write for its response (the rendered
/// fields, then the `Connection` field it would add, the length, `Date`).
/// Whether the connection ends after it.
pub fn encode_rejected(
    r: &crate::request::Rejected,
    asked: Asked,
    keep_alive: &mut bool,
    dst: &mut Vec<u8>,
) -> bool {
    let len = r.body_len();
    dst.reserve(room(4, Length::Known(len as u64)));
    status_line(dst, r.status(), asked.http10);
    r.fields(dst);
    // (As `fix_connection` for a response of its own, which has no
    // `Connection` field and says HTTP/1.1.)
    if asked.http10 && *keep_alive {
        dst.extend_from_slice(b"connection: keep-alive\r\n");
    } else if !asked.http10 && !*keep_alive {
        dst.extend_from_slice(b"connection: close\r\n");
    }
    // (A rejection's status always has a body: `limit_req_status` is
    // 400–599; `HEAD` keeps its length.)
    dst.extend_from_slice(b"content-length: ");
    dst.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
    dst.extend_from_slice(b"\r\ndate: ");
    date(dst);
    dst.extend_from_slice(b"\r\n\r\n");
    if !asked.head {
        r.body(dst);
    }
    !*keep_alive
}

fn status_line(dst: &mut Vec<u8>, status: StatusCode, http10: bool) {
    if !http10 && status == StatusCode::OK {
        dst.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        dst.extend_from_slice(if http10 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
        dst.extend_from_slice(status.as_str().as_bytes());
        dst.push(b' ');
        dst.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
        dst.extend_from_slice(b"\r\n");
    }
}

/// Room for a response head of `fields` fields (its status line, `Date`,
/// framing and `Connection` fields, and its own fields, most shorter than
/// 48 bytes) and, for a body of known length up to [`super::FLUSH_AT`],
/// the body too: writing the head and appending the body's data seldom
/// grows the buffer.
fn room(fields: usize, body: Length) -> usize {
    let small = match body {
        Length::Known(n) => usize::try_from(n).ok().filter(|&n| n <= super::FLUSH_AT),
        _ => None,
    };
    160 + fields * 48 + small.unwrap_or(0)
}

/// An HTTP/1.0 client is answered `keep-alive` when both sides keep the
/// connection, and closed otherwise; an HTTP/1.1 client whose connection
/// ends is told `close`.
fn fix_connection(parts: &mut http::response::Parts, asked: Asked, keep_alive: &mut bool) {
    let values = parts.headers.get_all(header::CONNECTION);
    if asked.http10 {
        let says_keep_alive = values
            .iter()
            .any(|v| has_token(v.as_bytes(), b"keep-alive"));
        if !says_keep_alive {
            if parts.version == Version::HTTP_10 {
                *keep_alive = false;
            } else if *keep_alive {
                parts
                    .headers
                    .append(header::CONNECTION, HeaderValue::from_static("keep-alive"));
            }
        }
    } else if !*keep_alive && !values.iter().any(|v| has_token(v.as_bytes(), b"close")) {
        parts
            .headers
            .append(header::CONNECTION, HeaderValue::from_static("close"));
    }
}

/// Whether a `Connection`-like value lists `token`.
pub(super) fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// The header fields, one by one.
struct Fields<'a> {
    dst: &'a mut Vec<u8>,
    body: Length,
    asked: Asked,
    status: StatusCode,
    /// Set by a `Content-Length` or `Transfer-Encoding` field.
    framing: Option<Framing>,
    trailers: Option<Vec<HeaderName>>,
    wrote_date: bool,
    last: bool,
}

impl Fields<'_> {
    /// The upstream's fields, in its order: the parser left out the
    /// hop-by-hop and framing ones but `Content-Length`.
    fn write_upstream(&mut self, up: &UpstreamFields) {
        for (name, value) in up.iter() {
            match name {
                b"content-length" => self.content_length(value),
                _ => {
                    if name == b"date" {
                        self.wrote_date = true;
                    }
                    self.field(name, value);
                }
            }
        }
    }

    /// Each field in the response's order (a name's values together).
    fn write_all(&mut self, headers: &http::HeaderMap) {
        let mut fields = headers.iter().peekable();
        while let Some((name, value)) = fields.next() {
            match *name {
                header::CONTENT_LENGTH => self.content_length(value.as_bytes()),
                header::TRANSFER_ENCODING | header::TRAILER => {
                    let mut values = vec![value];
                    while let Some((_, v)) = fields.next_if(|(n, _)| *n == name) {
                        values.push(v);
                    }
                    if *name == header::TRAILER {
                        self.trailer(&values);
                    } else {
                        self.transfer_encoding(&values);
                    }
                }
                // The values of `Connection` on one line, as hyper wrote them.
                header::CONNECTION => {
                    self.dst.extend_from_slice(b"connection: ");
                    let mut v = value;
                    loop {
                        if has_token(v.as_bytes(), b"close") {
                            self.last = true;
                        }
                        self.dst.extend_from_slice(v.as_bytes());
                        match fields.next_if(|(n, _)| *n == header::CONNECTION) {
                            Some((_, next)) => {
                                self.dst.extend_from_slice(b", ");
                                v = next;
                            }
                            None => break,
                        }
                    }
                    self.dst.extend_from_slice(b"\r\n");
                }
                _ => {
                    if *name == header::DATE {
                        self.wrote_date = true;
                    }
                    self.field(name.as_str().as_bytes(), value.as_bytes());
                }
            }
        }
    }

    fn field(&mut self, name: &[u8], value: &[u8]) {
        self.dst.extend_from_slice(name);
        self.dst.extend_from_slice(b": ");
        self.dst.extend_from_slice(value);
        self.dst.extend_from_slice(b"\r\n");
    }

    /// The first `Content-Length` value counts (sluice never sends two).
    fn content_length(&mut self, v: &[u8]) {
        if self.framing.is_some() {
            return;
        }
        match self.body {
            Length::Known(n) => self.framing = Some(Framing::Length(n)),
            Length::Unknown => {
                let n = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                self.framing = Some(Framing::Length(n.unwrap_or(0)));
            }
            // No body: the length stays for HEAD, is dropped otherwise.
            Length::None if self.asked.head => self.framing = Some(Framing::Length(0)),
            Length::None => return,
        }
        self.field(b"content-length", v);
    }

    /// `Transfer-Encoding`'s values on one line, `chunked` last (added if
    /// it is not).
    fn transfer_encoding(&mut self, values: &[&HeaderValue]) {
        if self.asked.http10 || !can_chunk(self.asked, self.status) {
            return;
        }
        let mut line = values
            .iter()
            .map(|v| v.as_bytes())
            .collect::<Vec<_>>()
            .join(&b", "[..]);
        let last = line.rsplit(|&b| b == b',').next().unwrap_or(&[]);
        if !last.trim_ascii().eq_ignore_ascii_case(b"chunked") {
            line.extend_from_slice(b", chunked");
        }
        self.field(b"transfer-encoding", &line);
        self.framing = Some(Framing::Chunked(None));
    }

    /// `Trailer`'s values on one line: the fields a chunked body may end
    /// with.
    fn trailer(&mut self, values: &[&HeaderValue]) {
        if self.asked.http10 || !can_chunk(self.asked, self.status) {
            return;
        }
        let line = values
            .iter()
            .map(|v| v.as_bytes())
            .collect::<Vec<_>>()
            .join(&b", "[..]);
        self.field(b"trailer", &line);
        let listed = values
            .iter()
            .flat_map(|v| v.to_str().unwrap_or("").split(','));
        let names = listed.filter_map(|s| HeaderName::from_bytes(s.trim().as_bytes()).ok());
        self.trailers.get_or_insert_with(Vec::new).extend(names);
    }
}

/// The framing when no field set it: from the body's size.
fn implicit(dst: &mut Vec<u8>, body: Length, asked: Asked, status: StatusCode) -> Framing {
    match body {
        Length::Unknown if asked.http10 || !can_chunk(asked, status) => Framing::Close,
        Length::Unknown => {
            dst.extend_from_slice(b"transfer-encoding: chunked\r\n");
            Framing::Chunked(None)
        }
        Length::None | Length::Known(0) => {
            if can_have_length(status) && !asked.head {
                dst.extend_from_slice(b"content-length: 0\r\n");
            }
            Framing::Length(0)
        }
        Length::Known(n) => {
            if !can_have_length(status) {
                return Framing::Length(0);
            }
            dst.extend_from_slice(b"content-length: ");
            dst.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            dst.extend_from_slice(b"\r\n");
            Framing::Length(n)
        }
    }
}

/// A body may be sent (and chunked): not for `HEAD`, 1xx, 204 or 304.
fn can_chunk(asked: Asked, status: StatusCode) -> bool {
    !asked.head
        && !status.is_informational()
        && !matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
}

fn can_have_length(status: StatusCode) -> bool {
    !status.is_informational()
        && !matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
}

thread_local! {
    /// The `Date` value of the current second, made once a second a thread.
    static DATE: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
}

/// The current `Date` value as a header value (HTTP/3's responses), from
/// the same once-a-second cache as [`date`].
pub(crate) fn date_value() -> http::HeaderValue {
    let mut v = Vec::with_capacity(29);
    date(&mut v);
    http::HeaderValue::from_bytes(&v).unwrap_or(http::HeaderValue::from_static(""))
}

/// Appends the current `Date` value.
fn date(dst: &mut Vec<u8>) {
    let now = crate::clock::coarse_unix_secs();
    DATE.with_borrow_mut(|(secs, value)| {
        if *secs != now {
            *secs = now;
            *value = crate::fmt::Timestamp::from_secs(now).http_date();
        }
        dst.extend_from_slice(value.as_bytes());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(
        resp: http::Response<()>,
        body: Length,
        asked: Asked,
        ka: bool,
    ) -> (String, Written, bool) {
        let (mut parts, ()) = resp.into_parts();
        let mut keep_alive = ka;
        let mut dst = Vec::new();
        let w = encode(&mut parts, body, asked, &mut keep_alive, &mut dst);
        let s = String::from_utf8(dst).unwrap();
        let s = s.split("date: ").next().unwrap().to_string();
        (s, w, keep_alive)
    }

    const GET11: Asked = Asked {
        http10: false,
        head: false,
    };

    #[test]
    fn lengths_chunking_and_connection() {
        let r = http::Response::builder()
            .header("X-A", "1")
            .header("content-length", "3")
            .body(())
            .unwrap();
        let (s, w, ka) = head(r, Length::Known(3), GET11, true);
        assert_eq!(s, "HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 3\r\n");
        assert_eq!((w.framing, w.last, ka), (Framing::Length(3), false, true));

        let r = http::Response::builder().status(429).body(()).unwrap();
        let (s, w, _) = head(r, Length::Unknown, GET11, false);
        assert_eq!(
            s,
            "HTTP/1.1 429 Too Many Requests\r\nconnection: close\r\ntransfer-encoding: chunked\r\n"
        );
        assert_eq!((w.framing, w.last), (Framing::Chunked(None), true));

        let http10 = Asked {
            http10: true,
            head: false,
        };
        let r = http::Response::builder().body(()).unwrap();
        let (s, w, ka) = head(r, Length::Unknown, http10, true);
        assert_eq!(s, "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\n");
        assert_eq!((w.framing, w.last, ka), (Framing::Close, true, true));

        let head_req = Asked {
            http10: false,
            head: true,
        };
        let r = http::Response::builder().body(()).unwrap();
        let (s, w, _) = head(r, Length::Known(5), head_req, true);
        assert_eq!(s, "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n");
        assert_eq!(w.framing, Framing::Length(0));

        let r = http::Response::builder().status(204).body(()).unwrap();
        let (s, w, _) = head(r, Length::None, GET11, true);
        assert_eq!(s, "HTTP/1.1 204 No Content\r\n");
        assert_eq!(w.framing, Framing::Length(0));
    }

    /// A rendered rejection goes out as the response it stands for would:
    /// the same head (but for `Date`'s value), the same body, the same end.
    #[test]
    fn a_rendered_rejection_is_written_as_its_response() {
        use crate::limiter::{Limit, MemoryZone, Policy, Rate, Store, ZoneRef};
        use crate::request::{Rejected, Reply};
        use crate::respond::{RateLimitHeaders, Rejection};
        use http_body_util::BodyExt;
        use std::sync::Arc;
        let limits = [Limit {
            zone: Arc::new(ZoneRef::new(
                "z",
                Policy::leaky(Rate::per_second(2).unwrap()),
                Arc::new(Store::Memory(MemoryZone::with_capacity(10))),
            )),
            burst: 3000,
            delay: Limit::NODELAY,
        }];
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let undated = |b: Vec<u8>| {
            let s = String::from_utf8(b).unwrap();
            let (before, rest) = s.split_once("date: ").unwrap();
            format!("{before}date: -{}", &rest[rest.find("\r\n").unwrap()..])
        };
        let modes = [
            RateLimitHeaders::Off,
            RateLimitHeaders::Draft,
            RateLimitHeaders::Legacy,
        ];
        for (mode, status, secs) in [(modes[0], 429, 1), (modes[1], 503, 7), (modes[2], 429, 60)] {
            let rejection = Arc::new(Rejection::new(&limits, 0, status, mode));
            for (http10, head, ka) in (0..8).map(|i| (i & 1 != 0, i & 2 != 0, i & 4 != 0)) {
                let asked = Asked { http10, head };
                let r = Rejected::new(rejection.clone(), secs);
                let (mut ka_fast, mut fast) = (ka, Vec::new());
                let last = encode_rejected(&r, asked, &mut ka_fast, &mut fast);

                let resp = Reply::Rejected(r).into_response();
                let (mut parts, body) = resp.into_parts();
                let body = rt.block_on(body.collect()).unwrap().to_bytes();
                let (mut ka_slow, mut slow) = (ka, Vec::new());
                let len = Length::Known(body.len() as u64);
                let w = encode(&mut parts, len, asked, &mut ka_slow, &mut slow);
                if w.framing != Framing::Length(0) {
                    slow.extend_from_slice(&body);
                }
                let case = format!("{mode:?} http10 {http10} head {head} keep-alive {ka}");
                assert_eq!(undated(fast), undated(slow), "{case}");
                assert_eq!((last, ka_fast), (w.last, ka_slow), "{case}");
            }
        }
    }
}
