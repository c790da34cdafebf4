//! A connection's PROXY protocol header, on an address with
//! `listen … proxy_protocol`: read before anything else (before TLS's
//! ClientHello, before HTTP/2's preface), parsed by
//! [`crate::proxy_protocol`].
//!
//! The socket is peeked and only the header's own bytes are taken from it,
//! so what follows (TLS, a preface, a request) is read by the next stage
//! as if the header had never been there: one `recv(MSG_PEEK)` and one
//! `recv` for a header that came in one segment, as load balancers send
//! it. A header split across segments is read whole: the bytes peeked so
//! far are taken, and the next peek waits for new ones.
//!
//! Bounded as nginx bounds it: by `client_header_timeout` from the accept
//! (the same deadline then holds for the request's head), and by the
//! parser's length limits. A broken header closes the connection with
//! nginx's error-log line (`broken header: "…" while reading PROXY
//! protocol, client: …, server: …`), nothing answered, nothing forwarded.

use crate::errlog::{self, Severity};
use crate::proxy_protocol::{Addresses, Parsed, parse};
use std::net::SocketAddr;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

/// What a connection's header said (`None`: a header naming no addresses,
/// `UNKNOWN` or LOCAL), or why the connection is to close: `broken`,
/// `timeout` or `closed` (the client's close, an error, a stop), as
/// `sluice_proxy_protocol_headers` counts them.
pub(super) type Read = Result<Option<Addresses>, &'static str>;

/// The connection as the error log names it: its number, its peer, the
/// address it was accepted on.
pub(super) type Who = (u64, SocketAddr, SocketAddr);

/// Reads the header at the start of `stream`, due by `deadline`, taking
/// exactly its bytes from the socket.
pub(super) async fn read(
    stream: &mut TcpStream,
    deadline: Instant,
    stopping: &mut watch::Receiver<bool>,
    who: Who,
) -> Read {
    let mut taken: Vec<u8> = Vec::new();
    // Room for a v1 line and for v2 with its addresses and a few TLVs;
    // a longer v2 header takes several turns.
    let mut window = [0u8; 256];
    loop {
        // Biased: a header already there is read without arming a timer.
        let peeked = tokio::select! {
            biased;
            r = stream.peek(&mut window) => r,
            _ = tokio::time::sleep_until(deadline) => {
                log(Severity::Info, "client timed out (110: Connection timed out)", who);
                return Err("timeout");
            }
            _ = stopping.wait_for(|stop| *stop) => return Err("closed"),
        };
        let n = match peeked {
            // Closed before a byte: a probe, as nginx logs it; closed in
            // the middle: what nginx says of such a first read.
            Ok(0) if taken.is_empty() => {
                log(Severity::Info, "client closed connection", who);
                return Err("closed");
            }
            Ok(0) => {
                let broken = crate::proxy_protocol::cut_short(&taken);
                log(Severity::Error, &broken.to_string(), who);
                return Err("broken");
            }
            Ok(n) => n,
            Err(e) => {
                let what = format!("recv() failed ({})", errlog::os_error(&e));
                log(Severity::Info, &what, who);
                return Err("closed");
            }
        };
        let parsed = if taken.is_empty() {
            parse(&window[..n])
        } else {
            taken.extend_from_slice(&window[..n]);
            let p = parse(&taken);
            taken.truncate(taken.len() - n);
            p
        };
        let take = match parsed {
            Ok(Parsed::Done(h)) => h.len - taken.len(),
            Ok(Parsed::Incomplete) => n,
            Err(broken) => {
                log(Severity::Error, &broken.to_string(), who);
                return Err("broken");
            }
        };
        // Peeked, so there: the read takes them at once.
        if stream.read_exact(&mut window[..take]).await.is_err() {
            return Err("closed");
        }
        if let Ok(Parsed::Done(h)) = parsed {
            return Ok(h.addresses);
        }
        taken.extend_from_slice(&window[..take]);
    }
}

/// nginx's line about a connection whose header was not read: the client
/// is the peer and the server the listening address (no request yet).
fn log(sev: Severity, what: &str, (id, remote, listen): Who) {
    errlog::emit(
        sev,
        format_args!(
            "*{id} {what} while reading PROXY protocol, client: {}, server: {listen}",
            remote.ip()
        ),
    );
}
