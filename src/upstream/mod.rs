//! Upstream HTTP/1.1: sluice's own client for `proxy_pass`.
//!
//! Why not hyper's client: on the pass path hyper-util's pooled client cost
//! more CPU per request than all of nginx's user time — a task per upstream
//! connection, a channel between it and the request, a pool behind a lock, a
//! clone of the request's header map. Here the request's own task writes the
//! request head in one `write`, parses the response head with `httparse`, and
//! the response body carries the connection back to its worker thread's idle
//! list the moment its last byte is read: nginx's `keepalive` cache of
//! upstream connections, one per worker.
//!
//! What it does, as nginx does it: one request per connection at a time,
//! HTTP/1.1 with kept-alive connections, request bodies streamed with their
//! Content-Length or re-chunked, responses framed by RFC 9112 §6.3 (HEAD,
//! 1xx/204/304, chunked, Content-Length, or read until close), hop-by-hop
//! headers dropped both ways, and a request that meets a kept-alive
//! connection the upstream had closed is sent again on a new one (nginx
//! retries cached connections too) — if it had no body to lose.
//!
//! The parts, in a request's order: `pool` keeps the connections (one
//! idle list per worker thread, and connecting when it has none; `stream`
//! is a connection's bytes, plain or TLS, and `tls` the HTTPS side),
//! `request` writes the rewritten head and streams the body, `response`
//! reads the response head and decides its framing, and `body` reads the
//! body by that framing and hands the connection back when it ends. This
//! file is the client's API: [`send`], what it is given ([`Head`],
//! [`UpstreamTimeouts`]) and how it fails ([`Error`], [`BodyFailure`]).

mod body;
mod fields;
pub mod group;
mod h2conn;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use h2conn::fuzz::frames as h2conn_frames;
mod h2stream;
mod http2;
mod pool;
mod request;
mod response;
mod sending;
mod stream;
#[cfg(test)]
mod tests;
pub mod tls;

pub use body::{BodyFailure, UpstreamBody};
pub(crate) use body::{Chunk, Framing};
pub use fields::{UpstreamFields, first_value, into_header_map};
pub use http2::Outgoing;
// The response parser and body decoder on bytes alone, for the fuzz target.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use {
    body::take_body,
    response::{Parsed, parse_head},
};

use crate::body::BodyError;
use bytes::Bytes;
use http::uri::Authority;
use http::{Method, Response, header};
use http_body::Body;
pub use pool::Keepalive;
use pool::{Conn, Key, checkout, connect};
use request::{send_body, write_all, write_head};
use response::read_head;
use std::io;
use std::sync::Arc;
use std::time::Duration;
pub use tls::Tls;

/// The timeouts of one proxied request, nginx's names and defaults (60 s each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamTimeouts {
    /// `proxy_connect_timeout`: connecting to the upstream.
    pub proxy_connect: Duration,
    /// `proxy_send_timeout`: one write of the request to the upstream may
    /// stall this long.
    pub proxy_send: Duration,
    /// `proxy_read_timeout`: waiting for the response head once the request
    /// is sent, then between two reads of the response body.
    pub proxy_read: Duration,
    /// `client_body_timeout`: the client may pause this long between two
    /// pieces of its request body.
    pub client_body: Duration,
}

/// Why a request got no response from upstream. The messages are nginx's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("connect() failed ({}) while connecting to upstream", crate::errlog::os_error(.0))]
    Connect(io::Error),
    #[error("upstream timed out (110: Connection timed out) while connecting to upstream")]
    ConnectTimeout,
    /// The certificate did not verify (with OpenSSL's code and text).
    #[error("upstream SSL certificate verify error: ({0}) while SSL handshaking to upstream")]
    Verify(String),
    /// The certificate is not for `proxy_ssl_name`.
    #[error("upstream SSL certificate does not match \"{0}\" while SSL handshaking to upstream")]
    NameMismatch(String),
    /// Any other TLS failure (an alert from the upstream, no common
    /// protocol or cipher, not TLS at all).
    #[error("SSL_do_handshake() failed ({0}) while SSL handshaking to upstream")]
    Handshake(String),
    /// The upstream closed (or reset) the connection during the handshake.
    #[error("peer closed connection in SSL handshake{} while SSL handshaking to upstream", .0.as_ref().map(|e| format!(" ({})", crate::errlog::os_error(e))).unwrap_or_default())]
    HandshakeClosed(Option<io::Error>),
    /// `proxy_connect_timeout` passed during the handshake (nginx counts
    /// the handshake in it).
    #[error("upstream timed out (110: Connection timed out) while SSL handshaking to upstream")]
    HandshakeTimeout,
    #[error("writev() failed ({}) while sending request to upstream", crate::errlog::os_error(.0))]
    Send(io::Error),
    /// The client's request body failed (too large, or the client left).
    #[error("client request body: {0}")]
    Body(BodyError),
    #[error("recv() failed ({}) while reading response header from upstream", crate::errlog::os_error(.0))]
    Recv(io::Error),
    #[error("upstream prematurely closed connection while reading response header from upstream")]
    Closed,
    #[error("upstream sent too big header while reading response header from upstream")]
    TooBig,
    #[error("upstream sent invalid {0} while reading response header from upstream")]
    Invalid(&'static str),
    /// `proxy_read_timeout` passed waiting for the response head.
    #[error(
        "upstream timed out (110: Connection timed out) while reading response header from upstream"
    )]
    ReadTimeout,
    /// A write of the request stalled for `proxy_send_timeout`.
    #[error("upstream timed out (110: Connection timed out) while sending request to upstream")]
    SendTimeout,
    /// The client sent no more of its body for `client_body_timeout`.
    #[error("client timed out (110: Connection timed out) while reading client request body")]
    ClientBodyTimeout,
    /// An HTTP/2 upstream reset the stream before its response head
    /// (RST_STREAM with this error code), nginx's grpc module's words.
    #[error("upstream rejected request with error {0} while reading response header from upstream")]
    Rejected(u32),
    /// Every server of the group is down or unavailable (nginx's
    /// `NGX_BUSY`).
    #[error("no live upstreams while connecting to upstream")]
    NoLive,
}

impl Error {
    /// No connection was made: refused, unreachable, or its TLS handshake
    /// failed (or timed out).
    pub fn is_connect(&self) -> bool {
        matches!(
            self,
            Error::Connect(_)
                | Error::ConnectTimeout
                | Error::Verify(_)
                | Error::NameMismatch(_)
                | Error::Handshake(_)
                | Error::HandshakeClosed(_)
                | Error::HandshakeTimeout
        )
    }

    /// One of the upstream's timeouts passed (nginx answers 504).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            Error::ConnectTimeout
                | Error::HandshakeTimeout
                | Error::ReadTimeout
                | Error::SendTimeout
        )
    }
}

/// What to send: the request head as the proxy rewrote it.
pub struct Head<'a> {
    pub method: &'a Method,
    /// Origin-form target: path and query.
    pub target: &'a str,
    /// The client's headers; hop-by-hop ones and those `proxy` sets are
    /// replaced here.
    pub headers: &'a crate::http1::Fields,
    /// `proxy_set_header` with sluice's defaults (Host, X-Forwarded-For).
    pub proxy: &'a crate::headers::ProxyHeaders,
    /// The response's fields the client does not get (`proxy_hide_header`,
    /// nginx's hidden ones, less `proxy_pass_header`): never read into
    /// the response.
    pub hidden: &'a crate::headers::HiddenHeaders,
    /// What its values are made of.
    pub vars: &'a crate::vars::RequestVars<'a>,
    /// nginx's `$proxy_host`: `proxy_pass`'s host and port, or its group.
    pub proxy_host: &'a str,
    /// The request asks to switch to this protocol (`Upgrade`, with
    /// `Connection: upgrade`, see [`crate::http1::upgrade_asked`]): both
    /// are sent, and a `101` answer is a tunnel ([`switched`]).
    pub upgrade: Option<&'a [u8]>,
}

/// Sends one request to `upstream` (over TLS made with `tls`, if any) and
/// returns its response once the head is read; the body streams from the
/// connection.
///
/// UpstreamTimeouts as nginx's ([`UpstreamTimeouts`]): `proxy_connect_timeout` to connect,
/// `proxy_send_timeout` per write of the request, `client_body_timeout` per
/// read of the client's body, and `proxy_read_timeout` for the response
/// head once the request is sent (and then between reads of the body). The response is read while the
/// body is still being sent: an upstream that answers early (401, 413)
/// is heard, and its connection not reused.
pub async fn send<B>(
    upstream: &Authority,
    tls: Option<&Arc<Tls>>,
    timeouts: UpstreamTimeouts,
    head: &Head<'_>,
    body: B,
) -> Result<Response<UpstreamBody>, Error>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    send_kept(upstream, None, tls, timeouts, head, body).await
}

/// [`send`] to a server of an upstream group, whose idle connections are
/// kept by its `keepalive` (`None`: as [`send`]'s).
pub async fn send_kept<B>(
    upstream: &Authority,
    keepalive: Option<Keepalive>,
    tls: Option<&Arc<Tls>>,
    timeouts: UpstreamTimeouts,
    head: &Head<'_>,
    mut body: B,
) -> Result<Response<UpstreamBody>, Error>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    let length = body.size_hint().exact();
    // A body of known length (a whole, buffered one) goes with a
    // Content-Length, as nginx sends it, whatever the client's framing was.
    let chunked = length.is_none()
        && (head.headers.contains(&header::TRANSFER_ENCODING) || !body.is_end_stream());
    let has_body = chunked || length.is_some_and(|n| n > 0);
    let framing = if chunked {
        Framing::Chunked(Chunk::Size)
    } else if has_body || head.headers.contains(&header::CONTENT_LENGTH) {
        Framing::Length(length.unwrap_or(0))
    } else {
        Framing::Done
    };
    // nginx does not send a non-idempotent request twice.
    let idempotent = !matches!(head.method.as_str(), "POST" | "PATCH" | "LOCK");
    let key = Key::new(upstream, tls).kept(keepalive);
    let mut fresh = false;
    loop {
        let (mut conn, reused) = match if fresh { None } else { checkout(&key) } {
            Some(c) => (c, true),
            None => (connect(&key, timeouts.proxy_connect).await?, false),
        };
        write_head(&mut conn.write, head, framing);
        let mut received = false;
        let exchanged = exchange(
            &mut conn,
            head,
            has_body.then_some((&mut body, chunked)),
            timeouts,
            &mut received,
        )
        .await;
        match exchanged {
            Ok((resp, framing, keep)) => {
                let body = UpstreamBody {
                    conn: Some(conn),
                    key,
                    framing,
                    keep,
                    read_timeout: timeouts.proxy_read,
                    http2: None,
                };
                let mut resp = resp.map(|()| body);
                resp.body_mut().finish_if_done();
                return Ok(resp);
            }
            // The upstream had closed a kept-alive connection before this
            // request: once more, on a new connection.
            Err(Error::Send(_) | Error::Closed | Error::Recv(_))
                if reused && !has_body && !received && idempotent =>
            {
                fresh = true;
            }
            Err(e) => return Err(e),
        }
    }
}

/// [`send_kept`] over HTTP/2 (`grpc_pass`): the request body is taken from
/// `body` once a connection is ready (until then, a failure leaves it for
/// the next server).
pub async fn send_http2(
    upstream: &Authority,
    keepalive: Option<Keepalive>,
    tls: Option<&Arc<Tls>>,
    timeouts: UpstreamTimeouts,
    deadline: Option<tokio::time::Instant>,
    head: &Head<'_>,
    body: impl FnOnce() -> Option<Outgoing>,
) -> Result<Response<UpstreamBody>, Error> {
    let key = Key::new(upstream, tls).kept(keepalive);
    http2::send(key, timeouts, deadline, head, body).await
}

/// Writes the request (head already in `conn.write`) and reads the response
/// head, the two at once while a body is being sent.
async fn exchange<B>(
    conn: &mut Conn,
    head: &Head<'_>,
    body: Option<(&mut B, bool)>,
    timeouts: UpstreamTimeouts,
    received: &mut bool,
) -> Result<(Response<()>, Framing, bool), Error>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    let read_timeout = timeouts.proxy_read;
    // (What reading the response head needs of the request.)
    let response = (head.method, head.hidden);
    write_all(&mut conn.stream, &conn.write, timeouts.proxy_send).await?;
    let Some((body, chunked)) = body else {
        let reading = read_head(&mut conn.stream, &mut conn.read, response, received);
        return match conn.timer.within(read_timeout, reading).await {
            Some(r) => r,
            None => Err(Error::ReadTimeout),
        };
    };
    let (mut rd, mut wr) = conn.stream.split();
    let sending = send_body(&mut wr, &mut conn.write, body, chunked, timeouts);
    let reading = read_head(&mut rd, &mut conn.read, response, received);
    let waiting = tokio::time::sleep(read_timeout);
    tokio::pin!(sending, reading, waiting);
    // Once the request is sent (or the upstream stopped taking it),
    // proxy_read_timeout runs.
    let mut sent = false;
    let mut send_error = None;
    loop {
        tokio::select! {
            biased;
            head = &mut reading => {
                return match head {
                    // Answered before the whole body was sent: the rest of
                    // it would be read as a request, so no reuse.
                    Ok((resp, framing, keep)) => Ok((resp, framing, keep && sent)),
                    Err(e) => Err(send_error.unwrap_or(e)),
                };
            }
            done = &mut sending, if !sent && send_error.is_none() => match done {
                Ok(()) => {
                    sent = true;
                    waiting.as_mut().reset(crate::clock::now() + read_timeout);
                }
                // The client's failures, and nginx's 504 for an upstream
                // that took nothing for proxy_send_timeout (an answer it
                // had sent would have been read first).
                Err(e @ (Error::Body(_) | Error::ClientBodyTimeout | Error::SendTimeout)) => {
                    return Err(e);
                }
                // The upstream closed its side: it may still have answered.
                Err(e) => {
                    send_error = Some(e);
                    waiting.as_mut().reset(crate::clock::now() + read_timeout);
                }
            },
            () = &mut waiting, if sent || send_error.is_some() => {
                return Err(send_error.unwrap_or(Error::ReadTimeout));
            }
        }
    }
}

/// The upstream side of a tunnel: its connection after its `101` (never
/// kept alive again), and the bytes it sent right after the head.
pub struct Switched {
    pub io: Box<dyn Duplex>,
    pub early: bytes::BytesMut,
}

/// A connection both ways, as a tunnel's upstream side needs it.
pub trait Duplex: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Duplex for T {}

/// What the upstream answered a request that may switch protocols. (Made
/// once per response and matched at once: not worth a box.)
#[allow(clippy::large_enum_variant)]
pub enum Answer {
    /// Its `101`: the head (for the client) and the connection.
    Switched(Response<()>, Switched),
    /// Any other response, unchanged.
    Response(Response<UpstreamBody>),
}

/// The upstream's `101 Switching Protocols` as the end of HTTP on its
/// connection. `asked`: the request asked for it ([`Head::upgrade`]); a 101
/// it did not ask for, or one that came before the whole request was sent
/// (the rest of the body would be lost), is an invalid response (502).
pub fn switched(resp: Response<UpstreamBody>, asked: bool) -> Result<Answer, Error> {
    if resp.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        return Ok(Answer::Response(resp));
    }
    let (parts, mut body) = resp.into_parts();
    // (`keep`: for a 101, that the whole request went; see response.rs.)
    let conn = body.conn.take().filter(|_| asked && body.keep);
    let Some(conn) = conn else {
        return Err(Error::Invalid("101 response"));
    };
    let switched = Switched {
        io: Box::new(conn.stream),
        early: conn.read,
    };
    Ok(Answer::Switched(Response::from_parts(parts, ()), switched))
}
