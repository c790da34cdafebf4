//! Target `proxy_protocol`: the PROXY protocol header parser
//! ([`crate::proxy_protocol::parse`]) on any bytes.
//!
//! Input: one byte choosing how to shape the rest (as is; behind v2's
//! signature; behind `PROXY `), then the bytes. Checks, beyond "no panic":
//! - bounds: a whole header is no longer than the input nor than its
//!   version's bound; a read still incomplete is shorter than v2's bound
//!   (so the reader's buffer never grows past it); what a broken line
//!   shows is bounded;
//! - split invariance, what lets the server read a header split across
//!   TCP segments: every proper prefix of a whole header is incomplete,
//!   and the header alone parses to the same answer;
//! - the answer does not change with more bytes: a whole header stays the
//!   same header, a broken one stays broken.

use super::Reader;
use crate::proxy_protocol::{Parsed, SHOWN_MAX, V2_MAX, parse};

pub fn proxy_protocol(data: &[u8]) {
    let mut r = Reader(data);
    let shape = r.u8();
    let rest = r.0;
    let input: Vec<u8> = match shape % 3 {
        0 => rest.to_vec(),
        1 => [&b"\r\n\r\n\0\r\nQUIT\n"[..], rest].concat(),
        _ => [&b"PROXY "[..], rest].concat(),
    };
    let got = parse(&input);
    let mut longer = input.clone();
    longer.extend_from_slice(b"\r\nGET / HTTP/1.1\r\n\r\n");
    match &got {
        Ok(Parsed::Done(h)) => {
            assert!(h.len <= input.len() && h.len <= V2_MAX, "{h:?}");
            let alone = parse(&input[..h.len]);
            assert_eq!(alone, got, "the header alone reads otherwise");
            // Every prefix when short; a spread of them when long.
            let step = (h.len / 64).max(1);
            for cut in (0..h.len).step_by(step) {
                assert_eq!(
                    parse(&input[..cut]),
                    Ok(Parsed::Incomplete),
                    "a prefix of {cut} bytes of a {}-byte header",
                    h.len
                );
            }
            assert_eq!(parse(&longer), got, "more bytes changed a whole header");
        }
        Ok(Parsed::Incomplete) => {
            assert!(input.len() < V2_MAX);
            let _ = crate::proxy_protocol::cut_short(&input).to_string();
        }
        Err(broken) => {
            if let crate::proxy_protocol::Broken::Line(shown) = broken {
                assert!(shown.len() <= SHOWN_MAX);
            }
            assert!(parse(&longer).is_err(), "more bytes mended a broken header");
            let _ = broken.to_string();
        }
    }
}
