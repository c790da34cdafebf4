//! Upstream HTTP/2: the client for `grpc_pass`.
//!
//! Why hyper's HTTP/2 client here, when HTTP/1.1 has sluice's own: HTTP/2 is
//! a multiplexed protocol with flow control in both directions, and a gRPC
//! call is a stream that may run for minutes with messages both ways. hyper
//! (over the h2 crate) keeps the windows, queues streams beyond the peer's
//! SETTINGS_MAX_CONCURRENT_STREAMS, passes trailers as the body's last frame,
//! and resets a stream whose response is dropped (RST_STREAM CANCEL): what a
//! client's cancellation must become upstream.
//!
//! The connections: each worker thread keeps its own to each upstream (as
//! the HTTP/1.1 pool does), and many calls share one: a connection takes new
//! streams while it carries fewer than [`STREAMS_PER_CONNECTION`], then a
//! second one is opened. A connection nobody used for a minute is let go
//! (its last handle dropped: hyper closes it with GOAWAY); one the upstream
//! closed is forgotten when next looked at.
//!
//! What goes upstream is nginx's grpc module's request: the method and path
//! as the client sent them, `:authority` from the `Host` that the set
//! headers make (the grpc_pass host by default), `te: trailers` when the
//! client asked for trailers, the client's other fields less the
//! connection's own, the body streamed as it arrives (gRPC needs both
//! directions open at once: nothing is buffered whole).

use super::pool::{Key, connect};
use super::sending::{Expired, Progress, Waits, Watched};
use super::{Error, Head, UpstreamTimeouts};
use crate::body::BodyError;
use crate::respond::grpc::{Code, GRPC_MESSAGE, GRPC_STATUS, percent_encode};
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::client::conn::http2::{Builder, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::cell::RefCell;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::time::Instant;

/// A request body as hyper's client takes it.
pub type Outgoing = UnsyncBoxBody<Bytes, BodyError>;

/// Streams one connection takes before another is opened: RFC 9113 §6.5.2
/// asks peers to allow at least 100. An upstream that allows fewer is
/// honoured by hyper, which holds a new stream until one ends.
const STREAMS_PER_CONNECTION: usize = 100;

/// An upstream connection with no stream for this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest response head (or trailers) taken from an upstream: a gRPC
/// head is a few hundred bytes; a larger one is an upstream's error (nginx
/// would refuse it past `grpc_buffer_size`, 4k or 8k).
const MAX_HEADER_LIST: u32 = 64 * 1024;

/// One kept connection: its handle, and the streams it carries now.
struct Kept {
    key: Key,
    send: SendRequest<Watched>,
    streams: Arc<AtomicUsize>,
    /// When its last stream ended (or it was made).
    idle_since: Instant,
}

thread_local! {
    /// This worker's HTTP/2 upstream connections.
    static KEPT: RefCell<Vec<Kept>> = const { RefCell::new(Vec::new()) };
}

/// A kept connection to `key` with room for one more stream, its count
/// already taken for that stream; closed and long-idle ones are dropped on
/// the way.
fn checkout(key: &Key) -> Option<(SendRequest<Watched>, Streams)> {
    let now = crate::clock::now();
    KEPT.with_borrow_mut(|kept| {
        kept.retain_mut(|k| {
            let busy = k.streams.load(Ordering::Relaxed) > 0;
            if busy {
                k.idle_since = now;
            }
            !k.send.is_closed() && (busy || now.duration_since(k.idle_since) < IDLE_TIMEOUT)
        });
        let k = kept.iter_mut().find(|k| {
            k.key.matches(key) && k.streams.load(Ordering::Relaxed) < STREAMS_PER_CONNECTION
        })?;
        k.idle_since = now;
        Some((k.send.clone(), Streams::take(&k.streams)))
    })
}

/// A stream counted on its connection until dropped.
struct Streams(Arc<AtomicUsize>);

impl Streams {
    fn take(count: &Arc<AtomicUsize>) -> Streams {
        count.fetch_add(1, Ordering::Relaxed);
        Streams(count.clone())
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A new connection to `key`: TCP (and TLS with ALPN `h2`) within
/// `grpc_connect_timeout`, then HTTP/2's preface; its driver runs as a task
/// of this worker.
async fn open(key: &Key, timeout: Duration) -> Result<(SendRequest<Watched>, Streams), Error> {
    let conn = connect(key, timeout).await?;
    let io = TokioIo::new(conn.stream);
    let handshake = Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEADER_LIST)
        .handshake::<_, Watched>(io);
    let (send, driver) = match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(made)) => made,
        Ok(Err(e)) => return Err(Error::Handshake(e.to_string())),
        Err(_) => return Err(Error::ConnectTimeout),
    };
    tokio::spawn(async move {
        let _ = driver.await;
    });
    let streams = Arc::new(AtomicUsize::new(0));
    let taken = Streams::take(&streams);
    KEPT.with_borrow_mut(|kept| {
        kept.push(Kept {
            key: key.clone(),
            send: send.clone(),
            streams,
            idle_since: crate::clock::now(),
        })
    });
    Ok((send, taken))
}

/// Sends one request to `upstream` over HTTP/2 and returns its response
/// once the head arrived; the body (and trailers) stream from the
/// connection. `body` is asked for the request body once a connection is
/// ready: until then, a failure leaves it to the next server.
pub async fn send(
    key: Key,
    timeouts: UpstreamTimeouts,
    deadline: Option<Instant>,
    head: &Head<'_>,
    body: impl FnOnce() -> Option<Outgoing>,
) -> Result<Response<super::UpstreamBody>, Error> {
    let (kept, fresh) = match checkout(&key) {
        Some(kept) => (kept, false),
        None => (open(&key, timeouts.proxy_connect).await?, true),
    };
    let scheme = if key.is_tls() { "https" } else { "http" };
    let body = body().unwrap_or_else(empty);
    let progress = Progress::new(body.is_end_stream());
    let req = request(head, scheme, Watched::new(body, progress.clone()))?;
    let exchange = exchange(kept, fresh, req, &key, timeouts.proxy_connect);
    let (resp, streams) =
        super::sending::response_head(exchange, &progress, &timeouts, deadline).await?;
    let (mut parts, body) = resp.into_parts();
    strip_hidden(&mut parts.headers, head.hidden);
    // (A trailers-only answer has its status in the head: nothing to end.)
    let grpc = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
        && !parts.headers.contains_key(GRPC_STATUS);
    let body = Streamed {
        inner: body,
        timeouts,
        progress,
        waits: Waits::default(),
        read_due: None,
        grpc,
        done: false,
        trailers: false,
        _streams: streams,
    };
    Ok(Response::from_parts(
        parts,
        super::UpstreamBody::http2(key, body),
    ))
}

/// The request on `kept`, and its response head. A kept connection the
/// upstream had closed (GOAWAY, EOF) hands the request back unsent: it goes
/// once more on a new connection, as nginx retries a cached one.
async fn exchange(
    (mut send, streams): (SendRequest<Watched>, Streams),
    fresh: bool,
    req: Request<Watched>,
    key: &Key,
    connect_timeout: Duration,
) -> Result<(Response<Incoming>, Streams), Error> {
    let unsent = match send.ready().await {
        Ok(()) => match send.try_send_request(req).await {
            Ok(resp) => return Ok((resp, streams)),
            Err(mut e) => match e.take_message() {
                Some(req) if !fresh => req,
                _ => return Err(failed(e.error())),
            },
        },
        Err(_) if !fresh => req,
        Err(e) => return Err(failed(&e)),
    };
    drop(streams);
    let (mut send, streams) = open(key, connect_timeout).await?;
    match send.ready().await {
        Ok(()) => match send.try_send_request(unsent).await {
            Ok(resp) => Ok((resp, streams)),
            Err(e) => Err(failed(e.error())),
        },
        Err(e) => Err(failed(&e)),
    }
}

fn empty() -> Outgoing {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// What a failed exchange was, in nginx's words: the upstream's reset of
/// the stream (`upstream rejected request with error N`), or the
/// connection gone before a response.
fn failed(e: &hyper::Error) -> Error {
    match reason(e) {
        Some(r) => Error::Rejected(u32::from(r)),
        None if e.is_closed() || e.is_canceled() => Error::Closed,
        None => Error::Recv(std::io::Error::other(e.to_string())),
    }
}

/// The RST_STREAM (or GOAWAY) reason under a hyper error, if any.
pub(crate) fn reason(e: &(dyn std::error::Error + 'static)) -> Option<h2::Reason> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(h2) = c.downcast_ref::<h2::Error>() {
            return h2.reason();
        }
        cause = c.source();
    }
    None
}

/// The upstream request: `scheme://authority/path` (hyper writes the
/// pseudo-header fields from it), the set headers, the client's fields
/// less the connection's own.
fn request(head: &Head<'_>, scheme: &str, body: Watched) -> Result<Request<Watched>, Error> {
    let mut headers = HeaderMap::with_capacity(16);
    let mut authority: Option<Vec<u8>> = None;
    head.proxy.each(head.vars, head.proxy_host, |name, value| {
        if name == header::HOST {
            authority = Some(value.to_vec());
        } else if let Ok(v) = HeaderValue::from_bytes(value) {
            headers.append(name.clone(), v);
        }
    });
    for (name, value) in head.headers.iter() {
        if passed(name) && !head.proxy.replaces(name) {
            if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
                headers.append(n, v);
            }
        }
    }
    // nginx's `$grpc_internal_trailers`: asked for when the client did.
    let trailers = head
        .headers
        .get_all(&header::TE)
        .flat_map(|v| v.split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"));
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    let authority = authority.as_deref().unwrap_or(head.proxy_host.as_bytes());
    let mut uri = Vec::with_capacity(scheme.len() + 3 + authority.len() + head.target.len());
    uri.extend_from_slice(scheme.as_bytes());
    uri.extend_from_slice(b"://");
    uri.extend_from_slice(authority);
    uri.extend_from_slice(head.target.as_bytes());
    let uri = http::Uri::try_from(uri).map_err(|_| Error::Invalid("request target"))?;
    let mut req = Request::new(body);
    *req.method_mut() = head.method.clone();
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    Ok(req)
}

/// A client field that goes upstream over HTTP/2: not the connection's own
/// (RFC 9113 §8.2.2), not `Host` (the `:authority`), not the framing
/// (HTTP/2 frames the body itself).
fn passed(name: &[u8]) -> bool {
    !crate::headers::managed(name)
        && !matches!(
            name,
            b"host" | b"proxy-authenticate" | b"proxy-authorization"
        )
}

/// Drops the response's fields the client does not get.
fn strip_hidden(headers: &mut HeaderMap, hidden: &crate::headers::HiddenHeaders) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|n| hidden.hides(n.as_str().as_bytes()))
        .cloned()
        .collect();
    for n in names {
        headers.remove(n);
    }
}

/// A response body from an HTTP/2 upstream: frames (and trailers) as they
/// come, `grpc_read_timeout` between two of them, and `grpc_send_timeout`
/// while the upstream takes nothing of a request body still going (a
/// bidirectional call). Dropped before its end, the stream is reset
/// upstream (hyper sends RST_STREAM CANCEL).
pub(crate) struct Streamed {
    inner: Incoming,
    timeouts: UpstreamTimeouts,
    progress: Arc<Progress>,
    waits: Waits,
    /// When the current wait for a frame runs out.
    read_due: Option<Instant>,
    /// The response is a gRPC call's (`application/grpc`): a connection
    /// that broke or timed out ends it with UNAVAILABLE or
    /// DEADLINE_EXCEEDED trailers, as a gRPC client understands it,
    /// rather than a reset (which it would read as INTERNAL).
    grpc: bool,
    /// It ended with such trailers.
    done: bool,
    /// The upstream's trailers went by.
    trailers: bool,
    _streams: Streams,
}

/// How an HTTP/2 upstream's body broke off.
#[derive(Debug, thiserror::Error)]
pub enum StreamFailure {
    /// The upstream reset the stream (the reason goes on to the client's
    /// stream: hyper finds it under this error).
    #[error("upstream reset the stream ({0}) while reading upstream")]
    Reset(#[source] hyper::Error),
    /// The connection broke (GOAWAY, closed).
    #[error("upstream prematurely closed connection ({0}) while reading upstream")]
    Closed(hyper::Error),
    #[error("upstream timed out (110: Connection timed out) while reading upstream")]
    TimedOut,
    #[error("upstream timed out (110: Connection timed out) while sending request to upstream")]
    SendTimedOut,
    /// A gRPC call's body ended without trailers (no grpc-status).
    #[error("upstream ended the call without a grpc-status while reading upstream")]
    NoStatus,
}

/// The trailers that end a gRPC call whose upstream broke off:
/// DEADLINE_EXCEEDED for `grpc_read_timeout`, else UNAVAILABLE (gRPC's
/// code for a transient failure a client may retry), nginx's words as the
/// message.
fn unavailable(failure: &StreamFailure) -> HeaderMap {
    let code = match failure {
        StreamFailure::TimedOut | StreamFailure::SendTimedOut => Code::DeadlineExceeded,
        _ => Code::Unavailable,
    };
    let mut trailers = HeaderMap::with_capacity(2);
    trailers.insert(GRPC_STATUS, HeaderValue::from(u16::from(code.as_u8())));
    if let Ok(v) = HeaderValue::from_str(&percent_encode(&failure.to_string())) {
        trailers.insert(GRPC_MESSAGE, v);
    }
    trailers
}

impl Streamed {
    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let failure = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Err(e))) => match reason(&e) {
                // The upstream's own reset goes on as it is.
                Some(r) if r != h2::Reason::NO_ERROR => StreamFailure::Reset(e),
                _ => StreamFailure::Closed(e),
            },
            // A gRPC call's body that ended with no status (an upstream's
            // RST_STREAM NO_ERROR reads as an end, as does END_STREAM on
            // DATA) is a broken call.
            Poll::Ready(None) if self.grpc && !self.trailers => StreamFailure::NoStatus,
            Poll::Ready(r) => {
                self.read_due = None;
                if let Some(Ok(f)) = &r {
                    self.trailers |= f.is_trailers();
                }
                return Poll::Ready(r.map(|f| f.map_err(BodyError::from)));
            }
            Poll::Pending => {
                let read = self.timeouts.proxy_read;
                let due = *self
                    .read_due
                    .get_or_insert_with(|| crate::clock::now() + read);
                let send = self.timeouts.proxy_send;
                let again = send.min(read);
                match ready!(self.waits.poll(cx, &self.progress, send, again, Some(due))) {
                    Expired::Read => StreamFailure::TimedOut,
                    Expired::Send => StreamFailure::SendTimedOut,
                }
            }
        };
        self.read_due = None;
        if !self.grpc || matches!(failure, StreamFailure::Reset(_)) {
            return Poll::Ready(Some(Err(failure.into())));
        }
        self.done = true;
        Poll::Ready(Some(Ok(Frame::trailers(unavailable(&failure)))))
    }

    /// (A gRPC call's body without its trailers yet is not over: polled
    /// once more, it ends with UNAVAILABLE's.)
    pub(crate) fn is_end_stream(&self) -> bool {
        self.done || (self.inner.is_end_stream() && (self.trailers || !self.grpc))
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
