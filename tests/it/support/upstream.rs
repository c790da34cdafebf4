//! An in-process upstream: raw tokio, independent of the sluice library.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Answers every request with `200 OK` and a `text/plain` body that echoes the request line and
/// header lines as received (so a test can see what the proxy forwarded). Keeps connections alive
/// unless the request asks for `close` or is HTTP/1.0 (nginx's default for proxy_pass). Counts
/// the requests it answered. Stops when dropped.
pub struct Upstream {
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Upstream {
    /// Binds 127.0.0.1 on a free port. Must be called inside a tokio runtime.
    pub fn start() -> Upstream {
        Upstream::start_slow(Duration::ZERO)
    }

    /// Like [`Upstream::start`], holding every response for `delay` after the request arrived:
    /// the requests a proxy forwards stay in flight that long (for `limit_conn`).
    pub fn start_slow(delay: Duration) -> Upstream {
        let listener = super::ports::local_listener("upstream");
        let addr = listener.local_addr().expect("upstream address");
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&hits);
        let task = tokio::spawn(async move {
            // Connection tasks live in the JoinSet: aborting this task aborts them all.
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        if let Ok((stream, _)) = accepted {
                            conns.spawn(serve(stream, Arc::clone(&counter), delay));
                        }
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Upstream { addr, hits, task }
    }

    /// Requests answered so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: TcpStream, hits: Arc<AtomicUsize>, delay: Duration) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let head_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end + 4);

        // Skip a request body: Content-Length, or chunked up to the last chunk.
        let lower = head.to_ascii_lowercase();
        let header = |name: &str| {
            lower.lines().skip(1).find_map(|l| {
                l.split_once(':')
                    .filter(|(n, _)| n.trim() == name)
                    .map(|(_, v)| v.trim().to_owned())
            })
        };
        if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            while buf.len() < len {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            buf.drain(..len);
        } else if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            let end = loop {
                if let Some(i) = find(&buf, b"0\r\n\r\n") {
                    break i + 5;
                }
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            buf.drain(..end);
        }

        hits.fetch_add(1, Ordering::SeqCst);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let http10 = head.lines().next().is_some_and(|l| l.ends_with("HTTP/1.0"));
        let close = match header("connection") {
            Some(v) if v.contains("close") => true,
            Some(v) if v.contains("keep-alive") => false,
            _ => http10,
        };
        let body = format!("{head}\r\n");
        let (status, extra) = asked_for(&head);
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: {}\r\n{extra}\r\n{body}",
            body.len(),
            if close { "close" } else { "keep-alive" }
        );
        if stream.write_all(response.as_bytes()).await.is_err() || close {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

/// What the request asks the echo to answer with: `X-Echo-Status: 404` for another status line,
/// and each `X-Echo-Header: Name: value` as one more response header (to see what a proxy does
/// with the upstream's headers).
fn asked_for(head: &str) -> (String, String) {
    let mut status = "200 OK".to_owned();
    let mut extra = String::new();
    for line in head.lines().skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("x-echo-status") {
            status = format!("{value} Echo");
        } else if name.eq_ignore_ascii_case("x-echo-header") {
            extra.push_str(value);
            extra.push_str("\r\n");
        }
    }
    (status, extra)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
