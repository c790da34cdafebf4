//! The proxy itself on real sockets: nginx's proxy_pass URI rule, headers,
//! 502/504, 444, streaming, timeouts, malformed requests, error pages, and
//! the places where sluice differs from nginx on purpose.
//!
//! # Layout
//! - [`forwarding`]: proxy_pass (URI and headers), 502/504, timeouts, streaming both ways;
//! - [`requests`]: malformed requests, location matching, realip;
//! - [`limits`]: what limits do to the response: 444, Retry-After, a client gone while
//!   delayed, dry run, a flood of log lines;
//! - [`websocket`]: upgrades (WebSocket) and the tunnels they make.
//! - [`https_upstream`]: `proxy_pass = "https://…"` against nginx with `ssl`.
//! - [`behind_lb`]: the PROXY protocol's client in `geo`, `map`, `allow`/`deny` and limits;
//!   `real_ip` from `Forwarded`.

mod algorithms;
mod behind_lb;
mod forwarding;
mod headers;
mod https_upstream;
mod limits;
mod requests;
mod upstreams;
mod websocket;

use crate::support::{
    Answer, InProcess, Port, Reader, Sluice, Upstream, burst, client, eventually, limit_lines,
    request,
};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// One server whose every path answers 200 `ok` under zone `z`: one request
/// per minute per client, no burst.
const ONE_PER_MINUTE: &str = r#"
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[[servers]]
[[servers.locations]]
path = "/"
limit_req = { zone = "z" }
return = { status = 200, body = "ok\n" }
"#;

/// An upstream that accepts connections and neither reads nor answers: its address, and the
/// upstream (it stops when dropped).
fn silent_upstream() -> (SocketAddr, Upstream) {
    let up = Upstream::answering(Answer::Silent, 200);
    (up.addr, up)
}

/// An upstream that reads a request with a Content-Length body, then answers
/// with a chunked body: `got N bytes\n` at once, and `done\n` 600 ms later.
async fn counting_upstream() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut s = Reader::new(s);
                let request = s.request().await.expect("upstream: a whole request");
                let got = request.body.len();
                let first = format!("got {got} bytes\n");
                let head = format!(
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{first}\r\n",
                    first.len()
                );
                s.write_all(head.as_bytes()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(600)).await;
                s.write_all(b"5\r\ndone\n\r\n0\r\n\r\n").await.unwrap();
            });
        }
    });
    (addr, task)
}
