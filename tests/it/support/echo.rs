//! A named echo backend for the import corpus, where nginx and sluice proxy to the *same*
//! servers (nginx's consistent hash places a server by its address, so both sides must name the
//! same addresses) and a reply has to say which server answered.
//!
//! Unlike [`super::Upstream`], every answer carries headers a proxy may hide or pass
//! (`Server`, `X-Powered-By`, `X-Internal`), the server's name (`X-Echo`), and the request's
//! number on its connection (`X-Echo-Seq`, 1 for the first: above 1 shows a kept-alive upstream
//! connection). A request header `X-Echo-Delay: MS` holds the answer that long (for
//! `proxy_read_timeout`); `X-Echo-Status: N` answers with status N instead of 200.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// An echo server named `name`: `200`, `text/plain`, the request head as received as the body.
/// Keeps connections alive unless the request says `close` or is HTTP/1.0. Stops when dropped.
pub struct Echo {
    pub addr: SocketAddr,
    pub name: String,
    hits: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Echo {
    /// Binds 127.0.0.1 on a free port. Must be called inside a tokio runtime.
    pub fn start(name: &str) -> Echo {
        let listener = super::ports::local_listener("echo");
        let addr = listener.local_addr().expect("echo address");
        let hits = Arc::new(AtomicUsize::new(0));
        let (counter, label) = (Arc::clone(&hits), name.to_owned());
        let task = tokio::spawn(async move {
            // Connection tasks live in the JoinSet: aborting this task aborts them all.
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        if let Ok((stream, _)) = accepted {
                            conns.spawn(serve(stream, Arc::clone(&counter), label.clone()));
                        }
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Echo {
            addr,
            name: name.to_owned(),
            hits,
            task,
        }
    }

    /// Requests answered so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads more of the stream into `buf`; false at its end.
async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 4096];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

async fn serve(mut stream: TcpStream, hits: Arc<AtomicUsize>, name: String) {
    let mut buf: Vec<u8> = Vec::new();
    for seq in 1.. {
        let head_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i;
            }
            if !fill(&mut stream, &mut buf).await {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end + 4);
        let header = |name: &str| {
            head.lines().skip(1).find_map(|l| {
                l.split_once(':')
                    .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.trim().to_ascii_lowercase())
            })
        };
        // Skip a request body: Content-Length, or chunked up to the last chunk.
        if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            while buf.len() < len {
                if !fill(&mut stream, &mut buf).await {
                    return;
                }
            }
            buf.drain(..len);
        } else if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            let end = loop {
                if let Some(i) = find(&buf, b"0\r\n\r\n") {
                    break i + 5;
                }
                if !fill(&mut stream, &mut buf).await {
                    return;
                }
            };
            buf.drain(..end);
        }
        hits.fetch_add(1, Ordering::SeqCst);
        if let Some(ms) = header("x-echo-delay").and_then(|v| v.parse::<u64>().ok()) {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let status = header("x-echo-status")
            .and_then(|v| v.parse::<u16>().ok())
            .unwrap_or(200);
        let http10 = head.lines().next().is_some_and(|l| l.ends_with("HTTP/1.0"));
        let close = match header("connection") {
            Some(v) if v.contains("close") => true,
            Some(v) if v.contains("keep-alive") => false,
            _ => http10,
        };
        let body = format!("{head}\r\n");
        let response = format!(
            "HTTP/1.1 {status} Echo\r\nServer: echo/1\r\nX-Powered-By: echo\r\nX-Internal: secret\r\n\
             X-Echo: {name}\r\nX-Echo-Seq: {seq}\r\nContent-Type: text/plain\r\n\
             Content-Length: {}\r\nConnection: {}\r\n\r\n{body}",
            body.len(),
            if close { "close" } else { "keep-alive" }
        );
        if stream.write_all(response.as_bytes()).await.is_err() || close {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
