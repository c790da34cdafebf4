//! The `http1` fuzz target: a client's bytes through the request head
//! reader, the chunked body checker and the gate that runs both on a
//! connection, checked against each other and against a strict reader.
//!
//! Why so many views of the same bytes: the reader's whole point is that
//! hyper and the upstream read exactly the requests sluice read, so the
//! checks compare every way the bytes can reach it (at once, in pieces,
//! head by head, through the gate) and read its output back strictly.

use super::{Reader, pieces};

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
    use crate::http1::{Parsed, parse_head};
    let mut r = Reader(data);
    let flags = r.u8();
    let seed = r.u8();
    let rules = fuzz_rules(flags);
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
    check_head_alone(&rules, buf, &head);
    check_canonical_head(&rules, &head);
    if let crate::http1::Framing::Chunked = head.framing {
        let body = &buf[head.len..];
        let whole = check_chunked(body, &[body.len()]);
        let pieces = pieces(seed, body.len(), 16);
        let split = check_chunked(body, &pieces);
        assert_eq!(whole, split, "pieces {pieces:?} changed the chunked body");
    }
}

/// The rules byte 0 of an input picks: bit 0 `underscores_in_headers`, bit
/// 1 `ignore_invalid_headers` off, bit 2 small buffers sized by the rest.
pub(super) fn fuzz_rules(flags: u8) -> crate::http1::HeadRules {
    use crate::http1::HeadRules;
    HeadRules {
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
    }
}

/// A head takes at most the bytes given, and reads the same without the
/// bytes after it: what follows a head cannot change it.
fn check_head_alone(rules: &crate::http1::HeadRules, buf: &[u8], head: &crate::http1::Head) {
    use crate::http1::{Parsed, parse_head};
    assert!(
        head.len > 0 && head.len <= buf.len(),
        "head of {} bytes in {}",
        head.len,
        buf.len()
    );
    match parse_head(&buf[..head.len], rules) {
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
}

/// The canonical head hyper is given is again a head, the same bytes and
/// framing when read again (a fixed point), and one complete request for
/// `httparse`.
fn check_canonical_head(rules: &crate::http1::HeadRules, head: &crate::http1::Head) {
    use crate::http1::{HeadRules, Parsed, parse_head};
    // The canonical head goes to hyper (whose limit is about 400 KB), not
    // through these buffers again: it may be longer than the head it came
    // from (bytes of the target above 0x7e are %-escaped, three for one),
    // so it is read again with the largest buffers the configuration allows.
    let roomy = HeadRules {
        large_header_buffers: (64, 1 << 20),
        ..*rules
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
                // (Only a gate that gives heads whole says these.)
                Ok(Fill::NeedInput | Fill::Head | Fill::BodyEnd) => break,
                // After an upgrade request: answered without a switch, the
                // bytes held after it are the next request.
                Ok(Fill::Held) => gate.resume(),
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
#[cfg(test)]
mod tests {
    use super::*;

    /// The stream check sees pipelined requests as a strict reader does,
    /// and the gate gives the same a byte at a time.
    #[test]
    fn http1_harness_counts_pipelined_requests() {
        let rules = crate::http1::HeadRules::default();
        let bytes = b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;e\r\nhello\r\n0\r\nX: 1\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nGET /";
        let (out, heads) = reference_output(&rules, bytes);
        assert_eq!((heads, strict_count(&out)), (2, 2));
        assert!(out.ends_with(b"5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\nhost: a\r\n\r\n"));
        let gate = gate_output(rules, bytes, &vec![1; bytes.len()]);
        assert_eq!(gate, (out, None, false));
        let smuggled = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(gate_output(rules, smuggled, &[smuggled.len()]).1, Some(400));
    }
}
