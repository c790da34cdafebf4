//! Frame bytes the gate reads and writes itself: a HEADERS frame's
//! fragment and priority fields taken apart, header blocks cut into frames
//! for hyper, GOAWAY. Apart from [`super::inbound`] so that the reader's
//! logic reads on its own.

use super::inbound::{Abort, CONTINUATION, END_HEADERS, END_STREAM, FRAME_MAX, HEADERS};
use super::ledger;
use bytes::BytesMut;

const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

/// A HEADERS frame's fragment, without its padding and priority fields,
/// and the stream it says it depends on (when it has priority fields).
pub fn headers_fragment(flags: u8, payload: &[u8]) -> Result<(&[u8], Option<u32>), Abort> {
    let mut p = payload;
    let mut pad = 0;
    let mut depends = None;
    if flags & PADDED != 0 {
        let (&n, rest) = p.split_first().ok_or(Abort::Protocol("padding"))?;
        pad = usize::from(n);
        p = rest;
    }
    if flags & PRIORITY_FLAG != 0 {
        let fields = p.get(..5).ok_or(Abort::Protocol("priority fields"))?;
        depends = Some(dependency(fields));
        p = &p[5..];
    }
    if pad > p.len() {
        return Err(Abort::Protocol("padding longer than the frame"));
    }
    Ok((&p[..p.len() - pad], depends))
}

/// The stream a priority's five bytes name (without the exclusive bit).
fn dependency(fields: &[u8]) -> u32 {
    match fields {
        [a, b, c, d, ..] => u32::from_be_bytes([*a, *b, *c, *d]) & 0x7fff_ffff,
        _ => 0,
    }
}

/// A header block as HEADERS (and CONTINUATION) frames of at most
/// [`FRAME_MAX`] bytes.
pub fn write_headers(out: &mut BytesMut, stream: u32, end_stream: bool, block: &[u8]) {
    let mut chunks = block.chunks(FRAME_MAX).peekable();
    let mut kind = HEADERS;
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if chunks.peek().is_none() {
        frame_head(out, 0, kind, flags | END_HEADERS, stream);
        return;
    }
    while let Some(c) = chunks.next() {
        let last = chunks.peek().is_none();
        let f = if last { flags | END_HEADERS } else { flags };
        frame_head(out, c.len(), kind, f, stream);
        out.extend_from_slice(c);
        kind = CONTINUATION;
        flags = 0;
    }
}

fn frame_head(out: &mut BytesMut, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&ledger::frame_head(len, kind, flags, stream));
}

/// `GOAWAY` for `abort`, naming the last stream the client opened.
pub fn goaway(last_stream: u32, code: u32) -> [u8; 17] {
    let mut f = [0u8; 17];
    f[..5].copy_from_slice(&[0, 0, 8, 7, 0]);
    f[9..13].copy_from_slice(&last_stream.to_be_bytes());
    f[13..17].copy_from_slice(&code.to_be_bytes());
    f
}
