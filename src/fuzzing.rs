//! The bodies of the fuzz targets in `fuzz/` (`scripts/fuzz.sh` runs them).
//!
//! Why the checks live here and not in `fuzz/fuzz_targets/`: the fuzz
//! crate builds only on nightly with cargo-fuzz, but the committed corpora
//! must also be replayed by `scripts/test.sh` on stable. Each target is one
//! function of bytes that panics on a finding; `fuzz/fuzz_targets/NAME.rs`
//! calls it, and the tests at the bottom run every file of
//! `fuzz/corpus/NAME/` (and the crash reproducers in `fuzz/regressions/NAME/`)
//! through the same function. The module is compiled only for tests and with
//! the `fuzzing` feature (which the fuzz crate turns on), so it is no part of
//! the proxy's API.
//!
//! An error is never a finding (most inputs are garbage); a panic is, and
//! so is a broken invariant, asserted with `assert!` so that libFuzzer
//! records the input.

use crate::limiter::bucket::{self, Bucket, Rate};
use crate::limiter::{Limit, MemoryZone, Outcome, Store, ZoneRef, evaluate};
use bytes::BytesMut;
use http::{Method, header};
use std::sync::Arc;

/// A target: bytes in, a panic on a finding.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/NAME.rs` and corpus
/// directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("config", config),
    ("upstream", upstream),
    ("limiter", limiter),
    ("http1", http1),
];

/// Reads the structured part of an input: numbers off the front, zeros
/// once it runs out (so every input decodes to something).
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `len` bytes cut into pieces of 1 to `most` bytes, their sizes drawn
/// from `seed` (xorshift): how a connection might receive them.
fn pieces(seed: u8, len: usize, most: u32) -> Vec<usize> {
    let mut pieces = Vec::new();
    let mut state = u32::from(seed) | 1;
    let mut left = len;
    while left > 0 {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = (1 + (state % most) as usize).min(left);
        pieces.push(n);
        left -= n;
    }
    pieces
}

// --- config ----------------------------------------------------------------------------------

/// TOML text → [`crate::config::parse_str`], then, when it parses, the
/// summary `sluice check` prints and [`crate::config::Config::compile`]
/// (twice: the second as a reload of the same file over the first).
///
/// Checked: no panic; errors are located inside the text; a configuration
/// that builds also builds as a reload of itself (nginx reloads an
/// unchanged file).
pub fn config(data: &[u8]) {
    // The file is read with `read_to_string`: text that is not UTF-8 never
    // reaches the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let spec = match crate::config::parse_str("fuzz.toml", text) {
        Ok(spec) => spec,
        Err(errors) => {
            assert!(!errors.0.is_empty(), "an error without a problem");
            let lines = text.split('\n').count();
            for e in &errors.0 {
                assert!(e.line >= 1 && e.line <= lines, "line {} of {lines}", e.line);
                assert!(e.col >= 1, "column {}", e.col);
                assert!(!e.source_line.contains('\n'), "{e:?}");
                assert!(e.to_string().starts_with("fuzz.toml:"), "{e}");
            }
            let _ = errors.to_string();
            return;
        }
    };
    let _ = crate::check::summary("fuzz.toml", &spec);
    let Ok(first) = crate::config::Config::compile(harmless(spec), None) else {
        return;
    };
    let again = crate::config::parse_str("fuzz.toml", text)
        .map_err(|e| e.to_string())
        .expect("the same text parses again");
    if let Err(e) = crate::config::Config::compile(harmless(again), Some(&first)) {
        panic!("a configuration that built does not build as a reload of itself: {e}");
    }
}

/// `spec` without what would touch the file system when built: access logs
/// go to stderr instead of a file (a fuzzed path would be created), and TLS
/// files for Redis are ones that do not exist (a fuzzed `/dev/zero` would
/// be read forever). The build errors for those stay reachable.
fn harmless(mut spec: crate::config::Spec) -> crate::config::Spec {
    fn level(l: &mut crate::config::Level) {
        if let Some(Some(target)) = &mut l.access_log {
            if target != "stdout" && target != "stderr" {
                *target = "stderr".into();
            }
        }
    }
    level(&mut spec.http);
    for s in &mut spec.servers {
        level(&mut s.level);
        for l in &mut s.locations {
            level(&mut l.level);
        }
    }
    if let Some(r) = &mut spec.redis {
        for p in [&mut r.tls_ca, &mut r.tls_cert, &mut r.tls_key]
            .into_iter()
            .flatten()
        {
            *p = "/nonexistent/sluice-fuzz.pem".into();
        }
    }
    spec
}

// --- upstream response -----------------------------------------------------------------------

/// Bytes of response fed to the parser: libFuzzer's default `-max_len`. The
/// body decoder refuses a chunk line longer than 4096 bytes only once that
/// many are buffered without its end, which depends on how the bytes
/// arrived; below it, how they arrive must not matter.
const FUZZ_MAX_RESPONSE: usize = 4096;

/// What reading a response head and body ended in, for comparing two ways
/// of feeding the same bytes.
#[derive(Debug, PartialEq)]
enum Read {
    /// Error text.
    Failed(String),
    /// The bytes ran out before the head was complete.
    Partial,
    Head {
        interim: usize,
        status: http::StatusCode,
        headers: http::HeaderMap,
        framing: crate::upstream::Framing,
        keep: bool,
        body: Vec<u8>,
        /// The body broke off (invalid chunked, or truncated).
        body_failed: bool,
        /// Bytes after the body's end, never consumed (the next response on
        /// a kept-alive connection).
        rest: Vec<u8>,
    },
}

/// One upstream response: byte 0 picks the request method, byte 1 how the
/// bytes arrive (in pieces of a pseudo-random size, or at once), the rest is
/// what the upstream sent. Runs the response head parser and body decoder of
/// [`crate::upstream`] the way a connection does (parse when bytes come,
/// skip 1xx, then take the body until its end or the bytes run out).
///
/// Checked: no panic; the same result whatever the pieces (head, framing,
/// body bytes, error, and the bytes left after the body); hop-by-hop and
/// framing headers never come out; a body never takes bytes past its end.
pub fn upstream(data: &[u8]) {
    let mut r = Reader(data);
    let method = match r.u8() % 5 {
        0 => Method::GET,
        1 => Method::HEAD,
        2 => Method::POST,
        3 => Method::PUT,
        _ => Method::DELETE,
    };
    let seed = r.u8();
    let bytes = &r.0[..r.0.len().min(FUZZ_MAX_RESPONSE)];
    let whole = read_response(bytes, &method, &[bytes.len()]);
    let pieces = pieces(seed, bytes.len(), 64);
    let split = read_response(bytes, &method, &pieces);
    assert_eq!(whole, split, "pieces {pieces:?} changed the result");

    if let Read::Head {
        status,
        headers,
        framing,
        body,
        body_failed,
        rest,
        ..
    } = &whole
    {
        for name in [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::TE,
            header::TRAILER,
            header::UPGRADE,
            header::PROXY_AUTHENTICATE,
        ] {
            assert!(!headers.contains_key(&name), "{name} came out");
        }
        assert!(!headers.contains_key("keep-alive") && !headers.contains_key("proxy-connection"));
        if method == Method::HEAD || *status == 204 || *status == 304 {
            assert!(body.is_empty(), "a body where none may be");
        }
        if let crate::upstream::Framing::Chunked(_) = framing {
            assert!(!headers.contains_key(header::CONTENT_LENGTH));
        }
        // Nothing is lost or invented: head, body and the rest came from
        // the bytes, in order.
        assert!(body.len() + rest.len() <= bytes.len());
        assert!(bytes.ends_with(rest));
        if !*body_failed {
            match framing {
                crate::upstream::Framing::UntilClose | crate::upstream::Framing::Length(_) => {
                    let start = bytes.len() - rest.len() - body.len();
                    assert_eq!(&bytes[start..bytes.len() - rest.len()], &body[..]);
                }
                _ => {}
            }
        }
    }
}

/// Feed `bytes` in `pieces` as a connection would receive them.
fn read_response(bytes: &[u8], method: &Method, pieces: &[usize]) -> Read {
    use crate::upstream::{Framing, Parsed, parse_head, take_body};
    let mut at = 0;
    let mut next = |buf: &mut BytesMut, i: &mut usize| -> bool {
        match pieces.get(*i) {
            Some(&n) => {
                buf.extend_from_slice(&bytes[at..at + n]);
                at += n;
                *i += 1;
                true
            }
            None => false,
        }
    };
    let mut buf = BytesMut::new();
    let mut i = 0;
    let mut interim = 0;
    // The head, as `read_head` reads it.
    let (resp, framing, keep) = 'head: loop {
        while !buf.is_empty() {
            match parse_head(&mut buf, method) {
                Ok(Some(Parsed::Interim)) => interim += 1,
                Ok(Some(Parsed::Final(resp, framing, keep))) => break 'head (resp, framing, keep),
                Ok(None) => break,
                Err(e) => return Read::Failed(e.to_string()),
            }
        }
        if !next(&mut buf, &mut i) {
            return Read::Partial;
        }
    };
    // The body, as `UpstreamBody` takes it.
    let mut state = framing;
    let mut body = Vec::new();
    let mut body_failed = false;
    loop {
        match take_body(&mut state, &mut buf) {
            Ok(Some(piece)) => {
                assert!(!piece.is_empty(), "an empty body piece");
                body.extend_from_slice(&piece);
                continue;
            }
            Ok(None) => {}
            Err(_) => {
                body_failed = true;
                break;
            }
        }
        if matches!(state, Framing::Length(0)) {
            state = Framing::Done;
        }
        if state == Framing::Done {
            break;
        }
        if !next(&mut buf, &mut i) {
            // The upstream closed: the end of an unframed body, else a
            // truncated one.
            body_failed = state != Framing::UntilClose;
            break;
        }
    }
    let mut rest = buf.to_vec();
    rest.extend_from_slice(&bytes[at..]);
    Read::Head {
        interim,
        status: resp.status(),
        headers: resp.headers().clone(),
        framing,
        keep,
        body,
        body_failed,
        rest,
    }
}

// --- client request head and chunked body ------------------------------------------------------

/// One client request as sluice's gate reads it: byte 0 picks the rules
/// (`underscores_in_headers`, `ignore_invalid_headers`, nginx's default or
/// a small `large_client_header_buffers`), byte 1 how a chunked body's bytes
/// arrive, the rest is what the client sent. Runs
/// [`crate::http1::parse_head`] and, for a chunked request, the body after
/// the head through [`crate::http1::Chunked`].
///
/// Checked: no panic; a head takes at most the bytes given, and does not
/// depend on the bytes after it; the canonical head sluice hands hyper is
/// again a head, with the same canonical bytes and framing, and `httparse`
/// reads it as one complete request; a refusal is a 4xx/5xx; the chunked
/// checker consumes at most what it is given, nothing once done, and the
/// same bytes whatever the pieces (so it never reads into the next request).
pub fn http1(data: &[u8]) {
    use crate::http1::{HeadRules, Parsed, parse_head};
    let mut r = Reader(data);
    let flags = r.u8();
    let seed = r.u8();
    let rules = HeadRules {
        underscores_in_headers: flags & 1 != 0,
        ignore_invalid_headers: flags & 2 == 0,
        large_header_buffers: if flags & 4 == 0 {
            HeadRules::default().large_header_buffers
        } else {
            // Small ones, within what the configuration accepts (1–64
            // buffers of 1k–1m), so that 4 KB inputs reach their limits.
            (
                1 + usize::from(flags >> 6),
                1024 + usize::from(flags >> 3 & 7) * 256,
            )
        },
    };
    let buf = r.0;
    stream(rules, buf, seed);
    let head = match parse_head(buf, &rules) {
        Parsed::Partial => return,
        Parsed::Refused(refusal) => {
            assert!(
                (400..=599).contains(&refusal.status),
                "refused with {}",
                refusal.status
            );
            assert!(!refusal.reason.is_empty());
            return;
        }
        Parsed::Head(head) => head,
    };
    assert!(
        head.len > 0 && head.len <= buf.len(),
        "head of {} bytes in {}",
        head.len,
        buf.len()
    );
    match parse_head(&buf[..head.len], &rules) {
        Parsed::Head(h) => {
            assert_eq!(h.len, head.len);
            assert_eq!(
                h.canonical, head.canonical,
                "the bytes after the head changed it"
            );
            assert!(same_framing(&h.framing, &head.framing));
        }
        _ => panic!("the head alone is not a head"),
    }
    // The canonical head goes to hyper (whose limit is about 400 KB), not
    // through these buffers again: it may be longer than the head it came
    // from (bytes of the target above 0x7e are %-escaped, three for one),
    // so it is read again with the largest buffers the configuration allows.
    let roomy = HeadRules {
        large_header_buffers: (64, 1 << 20),
        ..rules
    };
    match parse_head(&head.canonical, &roomy) {
        Parsed::Head(again) => {
            assert_eq!(
                again.len,
                head.canonical.len(),
                "the canonical head has bytes to spare"
            );
            assert_eq!(
                again.canonical,
                head.canonical,
                "canonical head not stable: {:?}",
                String::from_utf8_lossy(&head.canonical)
            );
            assert!(
                same_framing(&again.framing, &head.framing),
                "framing changed"
            );
        }
        Parsed::Partial => panic!(
            "the canonical head is incomplete: {:?}",
            String::from_utf8_lossy(&head.canonical)
        ),
        Parsed::Refused(r) => panic!(
            "the canonical head is refused ({} {}): {:?}",
            r.status,
            r.reason,
            String::from_utf8_lossy(&head.canonical)
        ),
    }
    let mut lines = [httparse::EMPTY_HEADER; 256];
    let mut req = httparse::Request::new(&mut lines);
    match req.parse(&head.canonical) {
        Ok(httparse::Status::Complete(n)) => assert_eq!(n, head.canonical.len()),
        other => panic!(
            "httparse reads the canonical head as {other:?}: {:?}",
            String::from_utf8_lossy(&head.canonical)
        ),
    }

    if let crate::http1::Framing::Chunked = head.framing {
        let body = &buf[head.len..];
        let whole = check_chunked(body, &[body.len()]);
        let pieces = pieces(seed, body.len(), 16);
        let split = check_chunked(body, &pieces);
        assert_eq!(whole, split, "pieces {pieces:?} changed the chunked body");
    }
}

fn same_framing(a: &crate::http1::Framing, b: &crate::http1::Framing) -> bool {
    use crate::http1::Framing;
    match (a, b) {
        (Framing::None, Framing::None) | (Framing::Chunked, Framing::Chunked) => true,
        (Framing::Length(x), Framing::Length(y)) => x == y,
        _ => false,
    }
}

/// Feed `body` to a [`crate::http1::Chunked`] in `pieces`, as a connection
/// would (bytes not consumed are offered again with the next ones): whether
/// it ended, failed, and how many bytes it consumed.
fn check_chunked(body: &[u8], pieces: &[usize]) -> (bool, bool, usize) {
    let mut c = crate::http1::Chunked::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut consumed = 0;
    let mut at = 0;
    for &n in pieces {
        pending.extend_from_slice(&body[at..at + n]);
        at += n;
        loop {
            match c.feed(&pending) {
                Ok(used) => {
                    assert!(
                        used <= pending.len(),
                        "consumed {used} of {}",
                        pending.len()
                    );
                    pending.drain(..used);
                    consumed += used;
                    if c.done() {
                        assert_eq!(c.feed(b"0\r\n\r\n").ok(), Some(0), "consumed after the end");
                        return (true, false, consumed);
                    }
                    if used == 0 || pending.is_empty() {
                        break;
                    }
                }
                Err(_) => return (false, true, 0),
            }
        }
    }
    (false, false, consumed)
}

/// The whole stream through a [`crate::http1::Gate`], as a connection
/// runs it: the same output whether the bytes come at once or in pieces;
/// the same as reading it head by head with `parse_head` and `Chunked`;
/// and a strict reader of that output finds exactly as many requests as
/// the gate let through (hyper and the upstream cannot be desynchronised).
fn stream(rules: crate::http1::HeadRules, bytes: &[u8], seed: u8) {
    let (whole, refused, failed) = gate_output(rules, bytes, &[bytes.len()]);
    let pieces = pieces(seed, bytes.len(), 16);
    let (split, refused2, failed2) = gate_output(rules, bytes, &pieces);
    assert_eq!((refused, failed), (refused2, failed2), "pieces {pieces:?}");
    if failed {
        // An invalid chunk: what came before it may have gone out already.
        assert!(split.starts_with(&whole), "pieces {pieces:?}");
        return;
    }
    assert_eq!(
        whole, split,
        "pieces {pieces:?} changed what hyper is given"
    );
    let (reference, heads) = reference_output(&rules, bytes);
    assert_eq!(whole, reference, "the gate and parse_head disagree");
    assert_eq!(
        strict_count(&whole),
        heads,
        "a strict reader counts other requests"
    );
}

/// What a [`crate::http1::Gate`] gave hyper for a client's bytes fed in
/// `pieces`: the bytes, the refusal's status if one, and whether a chunked
/// body was invalid.
fn gate_output(
    rules: crate::http1::HeadRules,
    bytes: &[u8],
    pieces: &[usize],
) -> (Vec<u8>, Option<u16>, bool) {
    use crate::http1::{Fill, Gate};
    let mut gate = Gate::new(rules);
    let mut out = Vec::new();
    let mut at = 0;
    for &n in pieces {
        gate.input().extend_from_slice(&bytes[at..at + n]);
        at += n;
        loop {
            match gate.process() {
                Ok(Fill::Data) => {
                    let o = gate.output();
                    let n = o.len();
                    assert!(n > 0, "Data without bytes");
                    out.extend_from_slice(o);
                    gate.consumed(n);
                }
                Ok(Fill::NeedInput) => break,
                Ok(Fill::Refused) => {
                    let r = gate.take_refusal().expect("a refusal to take");
                    return (out, Some(r.status), false);
                }
                Err(_) => return (out, None, true),
            }
        }
    }
    (out, None, false)
}

/// The same stream read with [`crate::http1::parse_head`] and
/// [`crate::http1::Chunked`] directly: the canonical bytes, and how many
/// heads they hold.
fn reference_output(rules: &crate::http1::HeadRules, bytes: &[u8]) -> (Vec<u8>, usize) {
    use crate::http1::{Chunked, Framing, Parsed, parse_head};
    let mut out = Vec::new();
    let mut heads = 0;
    let mut pos = 0;
    while pos < bytes.len() {
        let Parsed::Head(h) = parse_head(&bytes[pos..], rules) else {
            break;
        };
        heads += 1;
        pos += h.len;
        out.extend_from_slice(&h.canonical);
        match h.framing {
            Framing::None => {}
            Framing::Length(n) => {
                let n = usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len() - pos);
                out.extend_from_slice(&bytes[pos..pos + n]);
                pos += n;
            }
            Framing::Chunked => {
                let mut c = Chunked::new();
                match c.feed_into(&bytes[pos..], Some(&mut out)) {
                    Ok(used) => pos += used,
                    Err(_) => break,
                }
                if !c.done() {
                    break;
                }
            }
        }
    }
    (out, heads)
}

/// Requests in `out` as a strict HTTP/1.1 reader (httparse, then the body
/// by `Content-Length` or canonical chunked framing) finds them; the last
/// body may be cut short (the client's bytes ran out).
fn strict_count(out: &[u8]) -> usize {
    let mut pos = 0;
    let mut count = 0;
    let show = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    while pos < out.len() {
        let mut lines = [httparse::EMPTY_HEADER; 256];
        let mut req = httparse::Request::new(&mut lines);
        let n = match req.parse(&out[pos..]) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!(
                "hyper is given a head httparse reads as {other:?}: {:?}",
                show(&out[pos..])
            ),
        };
        count += 1;
        let mut length = None;
        let mut chunked = false;
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                assert!(
                    length.is_none(),
                    "two Content-Length: {:?}",
                    show(&out[pos..pos + n])
                );
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok());
                length = Some(v.expect("Content-Length is digits"));
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // Coding names are case-insensitive (RFC 9112 §7), in hyper too.
                let is_chunked = h.value.eq_ignore_ascii_case(b"chunked");
                assert!(!chunked && is_chunked, "{:?}", show(&out[pos..pos + n]));
                chunked = true;
            }
        }
        assert!(
            !(chunked && length.is_some()),
            "CL and TE: {:?}",
            show(&out[pos..pos + n])
        );
        pos += n;
        if let Some(l) = length {
            pos = pos.saturating_add(usize::try_from(l).unwrap_or(usize::MAX));
        } else if chunked {
            // SIZE CRLF data CRLF … 0 CRLF CRLF, nothing else.
            loop {
                let rest = &out[pos.min(out.len())..];
                let Some(end) = rest.windows(2).position(|w| w == b"\r\n") else {
                    return count;
                };
                let size = std::str::from_utf8(&rest[..end])
                    .ok()
                    .and_then(|s| u64::from_str_radix(s, 16).ok())
                    .unwrap_or_else(|| panic!("a canonical chunk size line: {:?}", show(rest)));
                pos += end + 2;
                if size == 0 {
                    if out.len() >= pos + 2 {
                        assert_eq!(&out[pos..pos + 2], b"\r\n", "after the last chunk");
                    }
                    pos += 2;
                    break;
                }
                pos = pos.saturating_add(usize::try_from(size).unwrap_or(usize::MAX));
                if pos >= out.len() {
                    return count;
                }
                if out.len() >= pos + 2 {
                    assert_eq!(&out[pos..pos + 2], b"\r\n", "after a chunk's data");
                }
                pos += 2;
            }
        }
    }
    count
}

// --- limiter ---------------------------------------------------------------------------------

const T0: u64 = 1_000_000_000;
/// Keys per limit in one input (few, so that they meet again).
const KEYS: u8 = 8;
/// Requests per input: the rate bound is checked over every pair.
const MAX_OPS: usize = 256;

/// One location's limits and a sequence of requests through
/// [`crate::limiter::evaluate`], with a fresh zone per limit (small ones,
/// so that expiry and eviction happen).
///
/// Input: byte 0 the number of limits (1–3); per limit its rate, burst,
/// delay and zone capacity; then per request a key (one of 8), which limits
/// see an empty key, and the time step (`now` never goes back).
///
/// Checked, per request: nginx's step on each state (`excess`, `last`),
/// exactly; an accepted request leaves every charged state at most its
/// burst, with nginx's delay, and `RateLimit` figures that hold (what is
/// left, and when one more is allowed); a rejection charges nothing, its
/// excess is over the burst, and its wait (`Retry-After`) is exactly when
/// that limit accepts again; over any interval of one state's life at most
/// burst + 1 + rate·t requests pass; the same sequence decides the same.
pub fn limiter(data: &[u8]) {
    let first = run_limiter(data);
    let second = run_limiter(data);
    assert_eq!(first, second, "the same requests decided differently");
}

struct FuzzLimit {
    limit: Limit,
    zone: Arc<ZoneRef>,
}

impl FuzzLimit {
    fn memory(&self) -> &MemoryZone {
        self.zone.store.memory()
    }

    fn rate(&self) -> Rate {
        self.zone.rate
    }
}

fn fuzz_rate(r: &mut Reader<'_>) -> Rate {
    let kind = r.u8();
    let n = u64::from(r.u16());
    let rate = match kind % 4 {
        // What the configuration allows: Nr/s and Nr/m (0 is 1r/s below).
        0 | 1 => Rate::per_second(n % 1000),
        2 => Rate::per_minute(n),
        // Any rate at all, huge ones included.
        _ => Rate::from_milli(r.u64().max(16)),
    };
    rate.unwrap_or_else(|| Rate::per_second(1).expect("1r/s"))
}

fn run_limiter(data: &[u8]) -> Vec<Outcome> {
    let mut r = Reader(data);
    let n = 1 + usize::from(r.u8() % 3);
    let limits: Vec<FuzzLimit> = (0..n)
        .map(|i| {
            let rate = fuzz_rate(&mut r);
            let b = r.u8();
            // The configuration's range: burst 0–4,000,000 requests.
            let burst = if b < 200 {
                u64::from(b % 20)
            } else {
                u64::from(r.u32() % 4_000_001)
            } * bucket::ONE;
            let delay = match r.u8() {
                0..=99 => 0,
                100..=199 => Limit::NODELAY,
                d => u64::from(d - 199) * bucket::ONE,
            };
            let c = r.u8();
            let capacity = if c < 200 {
                1 + usize::from(c % 16)
            } else {
                // Below 1024: one shard, whose eviction order does not
                // depend on the (random) hasher.
                1 + usize::from(r.u16()) % 1023
            };
            let zone = Arc::new(ZoneRef::new(
                format!("z{i}"),
                rate,
                Arc::new(Store::Memory(MemoryZone::with_capacity(capacity))),
            ));
            FuzzLimit {
                limit: Limit {
                    zone: zone.clone(),
                    burst,
                    delay,
                },
                zone,
            }
        })
        .collect();
    let set: Vec<Limit> = limits
        .iter()
        .map(|l| Limit {
            zone: l.zone.clone(),
            burst: l.limit.burst,
            delay: l.limit.delay,
        })
        .collect();

    // Rate arithmetic on its own: `time_to_leak` is the least time that
    // leaks at least that much.
    let rate = limits[0].rate();
    let milli = u64::from(r.u32());
    let t = rate.time_to_leak(milli);
    if t != u64::MAX {
        assert!(rate.leaked(t) >= milli, "time_to_leak({milli}) at {rate:?}");
        assert!(
            t == 0 || rate.leaked(t - 1) < milli,
            "time_to_leak({milli}) at {rate:?}"
        );
    }

    let mut now = T0;
    let mut outcomes = Vec::new();
    // Admission times per (limit, key), over the current life of the state.
    let mut admitted: Vec<Vec<Vec<u64>>> = vec![vec![Vec::new(); usize::from(KEYS)]; n];
    while !r.is_empty() && outcomes.len() < MAX_OPS {
        let k = r.u8();
        let key = [k % KEYS];
        // High bits: which limits see an empty key.
        let empty = k >> 3;
        let step = r.u8();
        now += match step {
            0..=127 => u64::from(step),
            128..=249 => u64::from(step - 127) * 100,
            _ => u64::from(r.u32()),
        };
        let keyed: Vec<bool> = (0..n).map(|i| empty & (1 << i) == 0).collect();
        let before: Vec<Option<Bucket>> = limits.iter().map(|l| l.memory().peek(&key)).collect();
        let outcome = evaluate(&set, now, |i| keyed[i].then_some(&key[..]));
        let after: Vec<Option<Bucket>> = limits.iter().map(|l| l.memory().peek(&key)).collect();
        check_outcome(&limits, &keyed, &before, &after, now, &outcome);

        if let Outcome::Accepted { .. } = outcome {
            for (i, l) in limits.iter().enumerate() {
                if !keyed[i] {
                    continue;
                }
                let times = &mut admitted[i][usize::from(key[0])];
                times.push(now);
                let rate = u128::from(l.rate().milli());
                let burst = u128::from(l.limit.burst);
                for (j, &t) in times.iter().enumerate() {
                    let count = (times.len() - j) as u128;
                    let span = u128::from(now - t);
                    assert!(
                        count * 1000 <= burst + 1000 + rate * span / 1000,
                        "limit {i}: {count} admitted in {span} ms (burst {burst}, rate {rate})"
                    );
                }
            }
        }
        // A state that expired or was evicted starts a new life.
        for (i, l) in limits.iter().enumerate() {
            for k in 0..KEYS {
                if l.memory().peek(&[k]).is_none() {
                    admitted[i][usize::from(k)].clear();
                }
            }
        }
        outcomes.push(outcome);
    }
    outcomes
}

/// The per-request checks of [`limiter`].
fn check_outcome(
    limits: &[FuzzLimit],
    keyed: &[bool],
    before: &[Option<Bucket>],
    after: &[Option<Bucket>],
    now: u64,
    outcome: &Outcome,
) {
    let n = limits.len();
    // nginx's step, from the state before (a new state starts empty).
    let stepped = |i: usize| -> Bucket {
        match before[i] {
            Some(b) => nginx_step(b, now, limits[i].rate()),
            None => Bucket {
                excess: 0,
                last: now,
            },
        }
    };
    match *outcome {
        Outcome::Unlimited => assert!(keyed.iter().all(|k| !k), "unlimited with a key"),
        Outcome::Accepted {
            delay_ms,
            limit,
            excess,
            tightest,
        } => {
            let mut max_delay = 0;
            let mut least_left = None;
            for i in (0..n).filter(|&i| keyed[i]) {
                let l = &limits[i];
                let got = after[i].expect("an accepted request's state is stored");
                assert_eq!(got, stepped(i), "limit {i}: not nginx's step");
                assert!(
                    got.excess <= l.limit.burst,
                    "limit {i}: stored over the burst"
                );
                max_delay = max_delay.max(bucket::delay_ms(got.excess, l.limit.delay, l.rate()));
                let left = l.limit.remaining(got.excess);
                least_left = Some(least_left.map_or(left, |m: u64| m.min(left)));
                // RateLimit: `left` more at once now, one more after
                // next_unit_ms, not a millisecond earlier.
                let wait = l.limit.next_unit_ms(got.excess);
                assert_eq!(at_once(&l.limit, l.rate(), got.excess, 0), left);
                assert!(at_once(&l.limit, l.rate(), got.excess, wait) > left);
                assert!(wait > 0 && at_once(&l.limit, l.rate(), got.excess, wait - 1) == left);
            }
            assert!(keyed.iter().any(|&k| k), "accepted without a key");
            assert_eq!(delay_ms, max_delay, "not the largest delay");
            let l = &limits[limit];
            assert!(excess <= l.limit.burst);
            assert_eq!(delay_ms, bucket::delay_ms(excess, l.limit.delay, l.rate()));
            let (t, e) = tightest;
            assert!(keyed[t], "tightest limit {t} has no key");
            assert_eq!(Some(e), after[t].map(|b| b.excess));
            assert_eq!(Some(limits[t].limit.remaining(e)), least_left);
        }
        Outcome::Rejected {
            limit,
            excess,
            wait_ms,
        } => {
            assert!(keyed[limit]);
            let l = &limits[limit];
            let b = before[limit].expect("a new state is never over its burst");
            assert_eq!(excess, nginx_step(b, now, l.rate()).excess);
            assert!(excess > l.limit.burst, "rejected at or under the burst");
            for i in 0..n {
                if before[i].is_some() {
                    assert_eq!(before[i], after[i], "a rejection charged limit {i}");
                }
            }
            // Retry-After: accepted by this limit exactly `wait_ms` later.
            if let Some(then) = now.checked_add(wait_ms) {
                assert!(
                    nginx_step(b, then, l.rate()).excess <= l.limit.burst,
                    "still over"
                );
                assert!(
                    wait_ms > 0 && nginx_step(b, then - 1, l.rate()).excess > l.limit.burst,
                    "accepted earlier than wait_ms = {wait_ms}"
                );
            }
        }
        Outcome::NoMemory { limit } => {
            assert!(keyed[limit]);
            assert!(before[limit].is_none(), "no memory for a state that exists");
            for i in 0..n {
                if i != limit && before[i].is_some() {
                    assert_eq!(before[i], after[i], "no memory, yet limit {i} was charged");
                }
            }
        }
        Outcome::Unavailable { .. } => panic!("no Redis here"),
    }
}

/// nginx's update of a state by one request at `now` (`now` never goes
/// back here), written out on its own rather than through
/// [`Bucket::step`], so that the check does not share a mistake with the
/// code: `excess - rate·ms/1000 + 1000`, at least 0, and `last` moves only
/// when time passed (the truncated fraction of a 0 ms step is not lost).
fn nginx_step(b: Bucket, now: u64, rate: Rate) -> Bucket {
    assert!(now >= b.last, "time went back");
    let ms = now - b.last;
    let leaked = u128::from(rate.milli()) * u128::from(ms) / 1000;
    let excess = (u128::from(b.excess) + 1000).saturating_sub(leaked);
    Bucket {
        excess: u64::try_from(excess).expect("an excess fits"),
        last: if ms == 0 { b.last } else { now },
    }
}

/// Requests `limit` accepts at once `t` ms after one stored `excess` at
/// `last = now` (each after the first steps 0 ms: +1000).
fn at_once(limit: &Limit, rate: Rate, excess: u64, t: u64) -> u64 {
    let b = Bucket { excess, last: T0 };
    let first = nginx_step(b, T0 + t, rate).excess;
    if first > limit.burst {
        0
    } else {
        (limit.burst - first) / bucket::ONE + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every file under `dir` through `target`; the number run.
    fn replay(dir: &Path, target: Target) -> usize {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let mut n = 0;
        let mut paths: Vec<_> = entries
            .map(|e| e.expect("a readable directory entry").path())
            .collect();
        paths.sort();
        for p in paths {
            let data = std::fs::read(&p).expect("a readable corpus file");
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                panic!("{} fails its target", p.display());
            }
            n += 1;
        }
        n
    }

    /// The harness reads what a connection reads: a chunked body up to its
    /// end, whatever the pieces, and leaves the next response alone.
    #[test]
    fn upstream_harness_reads_like_a_connection() {
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nHTTP/1.1 204";
        for pieces in [vec![bytes.len()], vec![1; bytes.len()]] {
            let Read::Head {
                interim,
                status,
                body,
                body_failed,
                rest,
                keep,
                ..
            } = read_response(bytes, &Method::GET, &pieces)
            else {
                panic!("no head")
            };
            assert_eq!((interim, status.as_u16(), keep), (1, 200, true));
            assert_eq!((&body[..], body_failed), (&b"hello"[..], false));
            assert_eq!(rest, b"HTTP/1.1 204");
        }
        let cut = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel";
        let Read::Head { body_failed, .. } = read_response(cut, &Method::GET, &[cut.len()]) else {
            panic!("no head")
        };
        assert!(body_failed, "a truncated body is a failure");
        assert_eq!(
            read_response(b"HTTP/1.1 200 OK\r\n", &Method::GET, &[17]),
            Read::Partial
        );
    }

    /// The limiter input decodes to the article's burst=5 example (10
    /// requests at once at 2r/s): the first passes, five are delayed by
    /// 500 ms steps, four are rejected.
    #[test]
    fn limiter_harness_decodes_the_article_example() {
        let mut input = vec![
            0, /* 2r/s */ 0, 2, 0, /* burst */ 5, /* delay 0 */ 0,
        ];
        input.extend([10, /* rate check */ 0, 0, 0, 0]);
        input.extend([0u8; 20]); // ten requests, key 0, no time step
        let got: Vec<(bool, u64)> = run_limiter(&input)
            .iter()
            .map(|o| match *o {
                Outcome::Accepted { delay_ms, .. } => (true, delay_ms),
                Outcome::Rejected { excess, .. } => (false, excess),
                o => panic!("{o:?}"),
            })
            .collect();
        let mut want = vec![(true, 0)];
        want.extend((1..=5).map(|i| (true, i * 500)));
        want.extend([(false, 6000); 4]);
        assert_eq!(got, want);
    }

    /// A fuzzed configuration never writes a file: its access logs go to
    /// stderr.
    #[test]
    fn config_harness_keeps_access_logs_off_the_disk() {
        let text = r#"access_log = "/tmp/sluice-fuzz-must-not-exist.log"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
access_log = "/tmp/sluice-fuzz-must-not-exist-either.log"
"#;
        let spec = harmless(crate::config::parse_str("t.toml", text).expect("valid"));
        assert_eq!(spec.http.access_log, Some(Some("stderr".into())));
        assert_eq!(
            spec.servers[0].level.access_log,
            Some(Some("stderr".into()))
        );
        config(text.as_bytes());
        assert!(!Path::new("/tmp/sluice-fuzz-must-not-exist.log").exists());
    }

    /// The stream check sees pipelined requests as a strict reader does,
    /// and the gate gives the same a byte at a time.
    #[test]
    fn http1_harness_counts_pipelined_requests() {
        let rules = crate::http1::HeadRules::default();
        let bytes = b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;e\r\nhello\r\n0\r\nX: 1\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nGET /";
        let (out, heads) = reference_output(&rules, bytes);
        assert_eq!((heads, strict_count(&out)), (2, 2));
        assert!(out.ends_with(b"5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"));
        let gate = gate_output(rules, bytes, &vec![1; bytes.len()]);
        assert_eq!(gate, (out, None, false));
        let smuggled = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(gate_output(rules, smuggled, &[smuggled.len()]).1, Some(400));
    }

    /// The committed corpora (`cargo fuzz cmin`-minimised) and crash
    /// reproducers, on stable: what the fuzzers found interesting still
    /// passes, and what they found broken stays fixed.
    #[test]
    fn fuzz_corpora_replay() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        for (name, target) in TARGETS {
            let corpus = replay(&root.join("corpus").join(name), *target);
            let regressions = replay(&root.join("regressions").join(name), *target);
            eprintln!("fuzz target {name}: {corpus} corpus files, {regressions} regressions");
            assert!(corpus > 0, "fuzz/corpus/{name} is empty or missing");
        }
    }
}
