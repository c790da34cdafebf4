//! HTTP/2 frames written by hand, for what no client library sends: a frame cut in two across
//! a delay, a connection closed in the middle of one, many streams opened and reset in one
//! write, floods of frames ([`Raw::flood`]). Header blocks use HPACK literals without Huffman
//! coding (any server decodes them); answers are read frame by frame.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

use super::h2_preface;

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;
pub const END_STREAM: u8 = 1;
pub const END_HEADERS: u8 = 4;
pub const ACK: u8 = 1;

/// One frame as read.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// A HEADERS frame that starts with `:status: 200` (HPACK's static entry 8, which both
    /// nginx and hyper use for it).
    pub fn is_200(&self) -> bool {
        self.kind == HEADERS && self.payload.first() == Some(&0x88)
    }

    /// A GOAWAY's error code.
    pub fn goaway_code(&self) -> Option<u32> {
        (self.kind == GOAWAY && self.payload.len() >= 8)
            .then(|| u32::from_be_bytes(self.payload[4..8].try_into().unwrap()))
    }
}

/// How a flood ([`Raw::flood`]) ended, seen from the client.
#[derive(Debug)]
pub struct Flooded {
    /// Frames written before the client saw the server's GOAWAY or close (all of them if it
    /// saw neither).
    pub sent: usize,
    /// The first GOAWAY's error code.
    pub goaway: Option<u32>,
    /// From the flood's first write to the server's close; `None`: still open at the limit.
    pub closed: Option<Duration>,
    /// Frames the server sent during the flood, by kind (for the failure messages).
    pub kinds: BTreeMap<u8, usize>,
}

/// A frame's bytes.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// HPACK's integer with an `n`-bit prefix (RFC 7541 §5.1), after `first`'s high bits.
fn integer(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 128);
        v /= 128;
    }
    out.push(v as u8);
}

/// A request's header block: `GET` (or `method`) `path` with `:authority` `authority`, then
/// `fields`, each a literal without indexing (RFC 7541 §6.2.2) with a literal name.
pub fn request_block(
    method: &str,
    path: &str,
    authority: &str,
    fields: &[(&str, &str)],
) -> Vec<u8> {
    let mut out = Vec::new();
    let all = [
        (":method", method),
        (":scheme", "http"),
        (":path", path),
        (":authority", authority),
    ];
    for (name, value) in all.iter().chain(fields) {
        out.push(0);
        integer(&mut out, 0, 7, name.len());
        out.extend_from_slice(name.as_bytes());
        integer(&mut out, 0, 7, value.len());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// A connection that has done the handshake: preface and SETTINGS sent, the server's SETTINGS
/// read and acknowledged.
pub struct Raw {
    pub tcp: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    pub async fn connect(addr: std::net::SocketAddr) -> Raw {
        Raw::connect_with(addr, &[]).await
    }

    /// With these SETTINGS parameters (identifier, value) in the client's first SETTINGS.
    pub async fn connect_with(addr: std::net::SocketAddr, settings: &[(u16, u32)]) -> Raw {
        let mut tcp = crate::support::connect(addr, crate::support::client(1)).await;
        let mut hello = h2_preface().to_vec();
        let mut params = Vec::new();
        for (id, value) in settings {
            params.extend_from_slice(&id.to_be_bytes());
            params.extend_from_slice(&value.to_be_bytes());
        }
        hello.extend(frame(SETTINGS, 0, 0, &params));
        tcp.write_all(&hello).await.expect("send the preface");
        let mut raw = Raw {
            tcp,
            buf: Vec::new(),
        };
        loop {
            let f = raw
                .next(Duration::from_secs(5))
                .await
                .expect("the server's SETTINGS");
            if f.kind == SETTINGS && f.flags & ACK == 0 {
                break;
            }
        }
        raw.send(&frame(SETTINGS, ACK, 0, &[])).await;
        raw
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.tcp.write_all(bytes).await.expect("write frames");
    }

    /// The next frame, or `None` when the server closed the connection or sent nothing for
    /// `limit`.
    pub async fn next(&mut self, limit: Duration) -> Option<Frame> {
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let head: Vec<u8> = self.buf.drain(..9).collect();
                    let payload = self.buf.drain(..len).collect();
                    return Some(Frame {
                        kind: head[3],
                        flags: head[4],
                        stream: u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7fff_ffff,
                        payload,
                    });
                }
            }
            let mut chunk = [0u8; 16384];
            match timeout(limit, self.tcp.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => self.buf.extend_from_slice(&chunk[..n]),
                _ => return None,
            }
        }
    }

    /// Writes frame after frame (`next(i)` is the `i`th), many per write, `max` at most, while
    /// another task reads all the server sends (its answers never fill the socket and slow the
    /// flood down); stops writing once it sees a GOAWAY or the close, then waits for the close
    /// until `limit` after the first write.
    pub async fn flood(
        self,
        mut next: impl FnMut(usize) -> Vec<u8>,
        max: usize,
        limit: Duration,
    ) -> Flooded {
        /// Frames per write: the reader's view of a GOAWAY stops the writer within one write.
        const BATCH: usize = 256;
        let Raw { tcp, mut buf } = self;
        let (mut rd, mut wr) = tcp.into_split();
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = (stop.clone(), Arc::new(Mutex::new((None, BTreeMap::new()))));
        let got = seen.1.clone();
        let reader = tokio::spawn(async move {
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                while buf.len() >= 9 {
                    let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
                    if buf.len() < 9 + len {
                        break;
                    }
                    let f: Vec<u8> = buf.drain(..9 + len).collect();
                    let mut got = seen.1.lock().unwrap();
                    *got.1.entry(f[3]).or_insert(0) += 1;
                    if f[3] == GOAWAY && len >= 8 && got.0.is_none() {
                        got.0 = Some(u32::from_be_bytes(f[13..17].try_into().unwrap()));
                        seen.0.store(true, Ordering::SeqCst);
                    }
                }
                match rd.read(&mut chunk).await {
                    Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                    // The close, or the reset of a socket closed with the flood unread.
                    _ => break,
                }
            }
            seen.0.store(true, Ordering::SeqCst);
            start.elapsed()
        });
        let mut sent = 0;
        // A server that stops reading without closing blocks a write: bounded by `limit` too.
        let _ = timeout(limit, async {
            while sent < max && !stop.load(Ordering::SeqCst) {
                let n = BATCH.min(max - sent);
                let bytes: Vec<u8> = (sent..sent + n).flat_map(&mut next).collect();
                if wr.write_all(&bytes).await.is_err() {
                    return;
                }
                sent += n;
            }
        })
        .await;
        let left = limit.saturating_sub(start.elapsed());
        let closed = match timeout(left, reader).await {
            Ok(took) => Some(took.expect("the flood's reader")),
            // The reader ends with the runtime; `wr` (dropped here) sends the client's FIN only
            // now, so the server saw no end of the flood it did not cut itself.
            Err(_) => None,
        };
        let (goaway, kinds) = std::mem::take(&mut *got.lock().unwrap());
        Flooded {
            sent,
            goaway,
            closed,
            kinds,
        }
    }

    /// Frames until `stream` ends (a frame of it with END_STREAM, or its RST_STREAM).
    pub async fn until_end(&mut self, stream: u32) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(f) = self.next(Duration::from_secs(10)).await {
            let end = f.stream == stream && (f.flags & END_STREAM != 0 || f.kind == RST_STREAM);
            frames.push(f);
            if end {
                return frames;
            }
        }
        panic!("stream {stream} did not end: {frames:?}");
    }
}
