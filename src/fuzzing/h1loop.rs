//! The `h1loop` fuzz target: sluice's own HTTP/1.1 loop (`server::h1`)
//! against the hyper path it replaced, on a client's bytes.
//!
//! The same bytes, in the same pieces, go through the two ways a connection
//! can read them: the gate's canonical stream as hyper read it (`httparse`
//! on each canonical head, as hyper builds its request; the canonical
//! bodies cut by their length or decoded from their chunks), and the gate
//! that gives heads whole with their bodies' data alone, each head made a
//! request by the loop's [`crate::server::h1::read`]. Checked: the loop
//! reads every head the gate gives (never `None`); both give the same
//! requests (method, target, version, fields), the same body data and ends,
//! and the same refusal or broken body, in the same order. Then a response
//! drawn from the input is written by the loop's encoder, and `httparse`
//! must read back a complete head with the framing the encoder chose.

use super::{Reader, pieces};
use crate::http1::{Fill, Gate, HeadRules};
use crate::server::h1;

/// What a connection's reader saw, in order.
#[derive(Debug, PartialEq)]
enum Event {
    Request(String, String, bool, http::HeaderMap),
    Data(Vec<u8>),
    End,
    Refused(u16),
    Broken,
}

pub fn h1loop(data: &[u8]) {
    let mut r = Reader(data);
    let flags = r.u8();
    let seed = r.u8();
    let response = r.u32();
    let rules = super::http1::fuzz_rules(flags);
    let bytes = r.0;
    let cuts = pieces(seed, bytes.len(), 64);
    let hyper = normalized(via_canonical(rules, bytes, &cuts));
    let own = normalized(via_whole(rules, bytes, &cuts));
    assert_eq!(
        own,
        hyper,
        "the loop read {:?} otherwise",
        String::from_utf8_lossy(bytes)
    );
    check_response(response);
}

/// Consecutive data as one; a body that broke off loses the data read of
/// it (the hyper path lost what the failing read had re-framed, the loop
/// what came after its last whole chunk: neither is forwarded as a body).
fn normalized(events: Vec<Event>) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for e in events {
        match (out.last_mut(), e) {
            (Some(Event::Data(d)), Event::Data(more)) => d.extend_from_slice(&more),
            (_, Event::Data(d)) if d.is_empty() => {}
            (_, Event::Broken) => {
                while matches!(out.last(), Some(Event::Data(_))) {
                    out.pop();
                }
                out.push(Event::Broken);
            }
            (_, e) => out.push(e),
        }
    }
    out
}

/// The whole-heads gate and the loop's request reader.
fn via_whole(rules: HeadRules, bytes: &[u8], cuts: &[usize]) -> Vec<Event> {
    let mut gate = Gate::whole_heads(rules);
    let mut events = Vec::new();
    let mut at = 0;
    for &n in cuts {
        gate.input().extend_from_slice(&bytes[at..at + n]);
        at += n;
        loop {
            match gate.process() {
                Ok(Fill::Head) => {
                    let head = gate.take_head().expect("a head to take");
                    let head = h1::read(head).expect("the loop reads every head the gate gives");
                    // (Every field one hyper would have taken.)
                    let mut headers = http::HeaderMap::new();
                    for (raw, value) in head.fields.iter() {
                        let name = http::HeaderName::from_bytes(raw).expect("a field name");
                        let value = http::HeaderValue::from_bytes(value).expect("a field value");
                        assert_eq!(name.as_str().as_bytes(), raw, "names come lowercase");
                        headers.append(name, value);
                    }
                    events.push(Event::Request(
                        head.method.to_string(),
                        head.uri.to_string(),
                        head.version == http::Version::HTTP_11,
                        headers,
                    ));
                }
                Ok(Fill::Data) => events.push(Event::Data(std::mem::take(gate.output()).to_vec())),
                Ok(Fill::BodyEnd) => events.push(Event::End),
                Ok(Fill::Held) => gate.resume(),
                Ok(Fill::Refused) => {
                    events.push(Event::Refused(
                        gate.take_refusal().expect("a refusal").status,
                    ));
                    return events;
                }
                Ok(Fill::NeedInput) => break,
                Err(_) => {
                    events.push(Event::Broken);
                    return events;
                }
            }
        }
    }
    events
}

/// The canonical gate, read as hyper read it.
fn via_canonical(rules: HeadRules, bytes: &[u8], cuts: &[usize]) -> Vec<Event> {
    let mut gate = Gate::new(rules);
    let mut stream = Vec::new();
    let mut end = None;
    let mut at = 0;
    'pieces: for &n in cuts {
        gate.input().extend_from_slice(&bytes[at..at + n]);
        at += n;
        loop {
            match gate.process() {
                Ok(Fill::Data) => {
                    let o = gate.output();
                    let k = o.len();
                    stream.extend_from_slice(o);
                    gate.consumed(k);
                }
                Ok(Fill::Held) => gate.resume(),
                Ok(Fill::Refused) => {
                    end = Some(Event::Refused(
                        gate.take_refusal().expect("a refusal").status,
                    ));
                    break 'pieces;
                }
                Ok(_) => break,
                Err(_) => {
                    end = Some(Event::Broken);
                    break 'pieces;
                }
            }
        }
    }
    let mut events = read_canonical(&stream);
    events.extend(end);
    events
}

/// The canonical stream cut into requests and bodies, as hyper read it.
fn read_canonical(mut s: &[u8]) -> Vec<Event> {
    let mut events = Vec::new();
    while !s.is_empty() {
        let mut fields = [httparse::EMPTY_HEADER; 256];
        let mut req = httparse::Request::new(&mut fields);
        let n = match req.parse(s) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!("the canonical stream is not a request: {other:?}"),
        };
        let mut headers = http::HeaderMap::new();
        for f in req.headers.iter() {
            let name = http::HeaderName::from_bytes(f.name.as_bytes()).expect("a field name");
            let value = http::HeaderValue::from_bytes(f.value).expect("a field value");
            headers.append(name, value);
        }
        let length = headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        let chunked = headers.contains_key(http::header::TRANSFER_ENCODING);
        events.push(Event::Request(
            req.method.expect("a method").to_string(),
            req.path.expect("a target").to_string(),
            req.version == Some(1),
            headers,
        ));
        s = &s[n..];
        if chunked {
            s = read_chunks(s, &mut events);
        } else if let Some(len) = length.filter(|&l| l > 0) {
            let k = len.min(s.len());
            events.push(Event::Data(s[..k].to_vec()));
            if k == len {
                events.push(Event::End);
            }
            s = &s[k..];
        }
    }
    events
}

/// A canonical chunked body (`HEX CRLF data CRLF`…, `0 CRLF CRLF`), as far
/// as it goes; the rest of the stream.
fn read_chunks<'s>(mut s: &'s [u8], events: &mut Vec<Event>) -> &'s [u8] {
    loop {
        let Some(line) = s.windows(2).position(|w| w == b"\r\n") else {
            return &[];
        };
        let size = std::str::from_utf8(&s[..line]).expect("a canonical size line");
        let size = usize::from_str_radix(size, 16).expect("a canonical size");
        s = &s[line + 2..];
        if size == 0 {
            assert!(
                s.len() < 2 || s.starts_with(b"\r\n"),
                "a canonical last chunk"
            );
            if s.len() < 2 {
                return &[];
            }
            events.push(Event::End);
            return &s[2..];
        }
        let k = size.min(s.len());
        events.push(Event::Data(s[..k].to_vec()));
        if k < size || s.len() < size + 2 {
            return &[];
        }
        s = &s[size + 2..];
    }
}

/// A response drawn from `bits`, written by the loop's encoder: `httparse`
/// reads a complete head, with the status given, and its framing fields
/// say what the encoder chose.
fn check_response(bits: u32) {
    const STATUSES: [u16; 8] = [200, 101, 204, 304, 404, 429, 503, 206];
    let status = STATUSES[(bits & 7) as usize];
    let mut b = http::Response::builder().status(status);
    if bits & 8 != 0 {
        b = b.header("content-length", (bits >> 16 & 0xff).to_string());
    }
    if bits & 16 != 0 {
        b = b.header("transfer-encoding", "gzip");
    }
    if bits & 32 != 0 {
        b = b.header("connection", "close");
    }
    if bits & 64 != 0 {
        b = b.header("trailer", "x-t, bad name");
    }
    let body = match bits >> 7 & 3 {
        0 => h1::Length::None,
        1 => h1::Length::Known(u64::from(bits >> 16 & 0xff)),
        _ => h1::Length::Unknown,
    };
    let asked = h1::Asked {
        http10: bits & 512 != 0,
        head: bits & 1024 != 0,
    };
    let mut keep_alive = bits & 2048 != 0;
    let (mut parts, ()) = b.body(()).expect("a response").into_parts();
    let mut out = Vec::new();
    let w = h1::encode(&mut parts, body, asked, &mut keep_alive, &mut out);
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(&out) {
        Ok(httparse::Status::Complete(n)) => assert_eq!(n, out.len()),
        other => panic!("{other:?}: {:?}", String::from_utf8_lossy(&out)),
    }
    assert_eq!(resp.code, Some(status));
    let has = |name: &str| {
        resp.headers
            .iter()
            .any(|f| f.name.eq_ignore_ascii_case(name))
    };
    match &w.framing {
        h1::Framing::Chunked(_) => assert!(has("transfer-encoding") && !asked.http10),
        h1::Framing::Close => assert!(w.last && !has("content-length")),
        h1::Framing::Length(n) if *n > 0 => assert!(has("content-length")),
        h1::Framing::Length(_) => {}
    }
    if !keep_alive && !asked.http10 {
        assert!(w.last, "a connection that ends is the last");
    }
}
