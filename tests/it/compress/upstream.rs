//! The upstream of the compression tests: it answers what the request's `X-Up-*` fields ask
//! (nginx and sluice forward them unchanged), so one server stands behind both proxies and every
//! case is written in the request:
//! - `X-Up-Status: N` (200), `X-Up-Type: T` (`Content-Type`, none when empty), `X-Up-Len: N`
//!   (the body's bytes, from [`body`]);
//! - `X-Up-Chunked: 1`: the body chunked, with no `Content-Length`;
//! - `X-Up-Header: Name: value` (repeatable): a field of the answer;
//! - `X-Up-Pieces: N` and `X-Up-Gap: MS`: the body chunked in N pieces, MS apart (a stream);
//! - `X-Up-Noise: 1`: the body from [`noise`], which does not compress.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::support::{Message, Reader, local_listener};

/// `n` bytes of text that compress well and tell where they are.
pub fn body(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 64);
    let mut i = 0;
    while out.len() < n {
        out.extend_from_slice(format!("line {i}: the upstream's own bytes, as sent\n").as_bytes());
        i += 1;
    }
    out.truncate(n);
    out
}

/// `n` bytes that do not compress (xorshift), the same each time.
pub fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub struct Up {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Up {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn start() -> Up {
    let listener = local_listener("compress upstream");
    let addr = listener.local_addr().expect("upstream address");
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                Ok((stream, _)) = listener.accept() => { conns.spawn(serve(stream)); }
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    });
    Up { addr, task }
}

async fn serve(stream: TcpStream) {
    let mut conn = Reader::new(stream);
    while let Some(req) = conn.request().await {
        if answer(&mut conn, &req).await.is_err() || req.closes() {
            let _ = conn.shutdown().await;
            return;
        }
    }
}

async fn answer<S: tokio::io::AsyncWrite + tokio::io::AsyncRead + Unpin>(
    conn: &mut Reader<S>,
    req: &Message,
) -> std::io::Result<()> {
    let num = |name: &str, d: usize| req.header(name).and_then(|v| v.parse().ok()).unwrap_or(d);
    let status = num("x-up-status", 200);
    let len = num("x-up-len", 0);
    let pieces = num("x-up-pieces", 0);
    let gap = Duration::from_millis(num("x-up-gap", 0) as u64);
    let mut head = format!("HTTP/1.1 {status} Up\r\n");
    match req.header("x-up-type") {
        Some("") | None => {}
        Some(t) => head.push_str(&format!("Content-Type: {t}\r\n")),
    }
    for (n, v) in &req.headers {
        if n.eq_ignore_ascii_case("x-up-header") {
            head.push_str(&format!("{v}\r\n"));
        }
    }
    let bodyless = req.start_line().starts_with("HEAD ") || status == 304 || status == 204;
    let chunked = pieces > 0 || req.header("x-up-chunked") == Some("1");
    if chunked && !bodyless {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
    } else if status == 304 || status == 204 {
        // (No length: what nginx and sluice do with one there is no compression's business.)
        head.push_str("\r\n");
    } else {
        head.push_str(&format!("Content-Length: {len}\r\n\r\n"));
    }
    conn.write_all(head.as_bytes()).await?;
    if bodyless {
        return Ok(());
    }
    let data = if req.header("x-up-noise") == Some("1") {
        noise(len)
    } else {
        body(len)
    };
    if !chunked {
        return conn.write_all(&data).await;
    }
    let pieces = pieces.max(1);
    let size = data.len().div_ceil(pieces).max(1);
    for (i, piece) in data.chunks(size).enumerate() {
        if i > 0 && !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
        conn.write_all(format!("{:X}\r\n", piece.len()).as_bytes())
            .await?;
        conn.write_all(piece).await?;
        conn.write_all(b"\r\n").await?;
        conn.flush().await?;
    }
    conn.write_all(b"0\r\n\r\n").await
}
