//! Upstream HTTP/2: the client for `grpc_pass`.
//!
//! Why the h2 crate directly, when HTTP/1.1 has sluice's own client: HTTP/2
//! is a multiplexed protocol with flow control in both directions, and a
//! gRPC call is a stream that may run for minutes with messages both ways.
//! h2 keeps the windows and the HPACK tables, queues streams beyond the
//! peer's SETTINGS_MAX_CONCURRENT_STREAMS (`SendRequest::poll_ready` waits),
//! and resets a stream all of whose handles are dropped (RST_STREAM CANCEL):
//! what a client's cancellation must become upstream. Why not hyper's client
//! over it (as before): per call it ran a dispatch task and channel for the
//! request and spawned a task to pipe the request body — three times the
//! instructions of nginx's whole call (issue #45). Here the call's own
//! future pumps the request body into its stream while it waits for the
//! head, and the response body does while it is read
//! ([`super::h2stream`]): no task per call, one per connection (h2's
//! `Connection`, which does the socket's reads and writes).
//!
//! The connections: each worker thread keeps its own to each upstream (as
//! the HTTP/1.1 pool does), and many calls share one: a connection takes new
//! streams while it carries fewer than [`STREAMS_PER_CONNECTION`], then a
//! second one is opened. A connection nobody used for a minute is let go
//! (its last handle dropped: h2 closes it with GOAWAY); one the upstream
//! closed (its task ended, or it refused a new stream: GOAWAY) is forgotten
//! when next looked at.
//!
//! What goes upstream is nginx's grpc module's request: the method and path
//! as the client sent them, `:authority` from the `Host` that the set
//! headers make (the grpc_pass host by default), `te: trailers` when the
//! client asked for trailers, `content-length` when the body's length is
//! known, the client's other fields less the connection's own, the body
//! streamed as it arrives (gRPC needs both directions open at once: nothing
//! is buffered whole).

use super::h2stream::{Streamed, Upload};
use super::pool::{Key, connect};
use super::sending::{Progress, Waits, Watched, response_head};
use super::{Error, Head, UpstreamTimeouts};
use crate::body::BodyError;
use crate::http1::Fields;
use bytes::Bytes;
use h2::RecvStream;
use h2::client::{Builder, ResponseFuture, SendRequest};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, header};
use http_body::Body;
use http_body_util::combinators::UnsyncBoxBody;
use std::cell::RefCell;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// A request body as the client side hands it over.
pub type Outgoing = UnsyncBoxBody<Bytes, BodyError>;

/// Streams one connection takes before another is opened: RFC 9113 §6.5.2
/// asks peers to allow at least 100. An upstream that allows fewer is
/// honoured by h2, which holds a new stream until one ends.
const STREAMS_PER_CONNECTION: usize = 100;

/// An upstream connection with no stream for this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest response head (or trailers) taken from an upstream: a gRPC
/// head is a few hundred bytes; a larger one is an upstream's error (nginx
/// would refuse it past `grpc_buffer_size`, 4k or 8k).
const MAX_HEADER_LIST: u32 = 64 * 1024;

/// The windows offered to the upstream, per stream and for the connection,
/// the send buffer per stream and the largest frame taken: hyper's client's
/// (kept as they were): a stream buffers at most this much of a response
/// that the client does not read.
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;
const SEND_BUFFER: usize = 1024 * 1024;
const MAX_FRAME: u32 = 16 * 1024;

/// What a connection's handles and its task share: the streams it carries
/// now, and whether it is over (its task ended, or it refused a stream).
#[derive(Default)]
struct Shared {
    streams: AtomicUsize,
    closed: AtomicBool,
}

/// One kept connection: its handle, and what it shares with its task.
struct Kept {
    key: Key,
    send: SendRequest<Bytes>,
    shared: Arc<Shared>,
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
fn checkout(key: &Key) -> Option<(SendRequest<Bytes>, Streams)> {
    let now = crate::clock::now();
    KEPT.with_borrow_mut(|kept| {
        kept.retain_mut(|k| {
            let busy = k.shared.streams.load(Ordering::Relaxed) > 0;
            if busy {
                k.idle_since = now;
            }
            !k.shared.closed.load(Ordering::Relaxed)
                && (busy || now.duration_since(k.idle_since) < IDLE_TIMEOUT)
        });
        let k = kept.iter_mut().find(|k| {
            k.key.matches(key) && k.shared.streams.load(Ordering::Relaxed) < STREAMS_PER_CONNECTION
        })?;
        k.idle_since = now;
        Some((k.send.clone(), Streams::take(&k.shared)))
    })
}

/// A stream counted on its connection until dropped.
pub(super) struct Streams(Arc<Shared>);

impl Streams {
    fn take(shared: &Arc<Shared>) -> Streams {
        shared.streams.fetch_add(1, Ordering::Relaxed);
        Streams(shared.clone())
    }

    /// The connection takes no new stream (it refused one): forgotten at
    /// the next checkout.
    fn close(&self) {
        self.0.closed.store(true, Ordering::Relaxed);
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

/// h2's settings for an upstream connection (see the constants).
fn builder() -> Builder {
    let mut b = Builder::new();
    b.initial_max_send_streams(STREAMS_PER_CONNECTION)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .max_header_list_size(MAX_HEADER_LIST)
        .max_send_buffer_size(SEND_BUFFER)
        .max_local_error_reset_streams(Some(1024))
        .enable_push(false);
    b
}

/// A new connection to `key`: TCP (and TLS with ALPN `h2`) within
/// `grpc_connect_timeout`, then HTTP/2's preface; its driver runs as a task
/// of this worker. (Boxed where awaited: a TLS handshake's state is large,
/// and inline it would grow every call's future, moved whole.)
async fn open(key: &Key, timeout: Duration) -> Result<(SendRequest<Bytes>, Streams), Error> {
    let conn = connect(key, timeout).await?;
    let handshake = builder().handshake::<_, Bytes>(conn.stream);
    let (send, driver) = match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(made)) => made,
        Ok(Err(e)) => return Err(Error::Handshake(e.to_string())),
        Err(_) => return Err(Error::ConnectTimeout),
    };
    let shared = Arc::new(Shared::default());
    let ended = shared.clone();
    tokio::spawn(async move {
        let _ = driver.await;
        ended.closed.store(true, Ordering::Relaxed);
    });
    let taken = Streams::take(&shared);
    KEPT.with_borrow_mut(|kept| {
        kept.push(Kept {
            key: key.clone(),
            send: send.clone(),
            shared,
            idle_since: crate::clock::now(),
        })
    });
    Ok((send, taken))
}

/// What one call sends: its head, and what a retry on a new connection
/// needs.
struct Call<'a, 'h> {
    head: &'a Head<'h>,
    key: &'a Key,
    connect_timeout: Duration,
    /// The request body's length, when known.
    length: Option<u64>,
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
        None => (Box::pin(open(&key, timeouts.proxy_connect)).await?, true),
    };
    let body = body();
    let length = body.as_ref().map_or(Some(0), |b| b.size_hint().exact());
    // A body already at its end goes as END_STREAM on the head.
    let body = body.filter(|b| !b.is_end_stream());
    let progress = Progress::new(body.is_none());
    let body = body.map(|b| Watched::new(b, progress.clone()));
    let call = Call {
        head,
        key: &key,
        connect_timeout: timeouts.proxy_connect,
        length,
    };
    let exchange = exchange(kept, fresh, &call, body);
    let mut waits = Waits::default();
    let head_wait = response_head(exchange, &progress, &timeouts, deadline, &mut waits);
    let (resp, upload, streams) = head_wait.await?;
    let (mut parts, recv) = resp.into_parts();
    strip_hidden(&mut parts.headers, head.hidden);
    let body = Streamed::new(
        recv,
        upload,
        &parts.headers,
        timeouts,
        progress,
        waits,
        streams,
    );
    Ok(Response::from_parts(
        parts,
        super::UpstreamBody::http2(key, body),
    ))
}

/// The request on `kept`, and its response head, the request body going up
/// meanwhile (what is left of it goes on with the response body). A kept
/// connection the upstream had closed (GOAWAY, EOF) takes no stream: it is
/// forgotten and the request goes once more on a new connection, as nginx
/// retries a cached one.
async fn exchange(
    (mut send, streams): (SendRequest<Bytes>, Streams),
    fresh: bool,
    call: &Call<'_, '_>,
    body: Option<Watched>,
) -> Result<(Response<RecvStream>, Option<Upload>, Streams), Error> {
    let end = body.is_none();
    let ((mut response, tx), streams) = match start(&mut send, request(call)?, end).await {
        Ok(started) => (started, streams),
        Err(e) if !fresh && (e.is_go_away() || e.is_io()) => {
            streams.close();
            drop(streams);
            let (mut send, streams) = Box::pin(open(call.key, call.connect_timeout)).await?;
            let started = start(&mut send, request(call)?, end).await;
            (started.map_err(|e| failed(&e))?, streams)
        }
        Err(e) => return Err(failed(&e)),
    };
    let mut upload = body.map(|body| Upload::new(tx, body));
    let head = std::future::poll_fn(|cx| {
        if let Some(up) = upload.as_mut()
            && up.poll(cx).is_ready()
        {
            upload = None;
        }
        Pin::new(&mut response).poll(cx)
    })
    .await;
    match head {
        Ok(resp) => Ok((resp, upload, streams)),
        Err(e) => Err(failed(&e)),
    }
}

/// A new stream on `send` with the request's head, once the connection
/// takes one (SETTINGS_MAX_CONCURRENT_STREAMS).
async fn start(
    send: &mut SendRequest<Bytes>,
    req: Request<()>,
    end: bool,
) -> Result<(ResponseFuture, h2::SendStream<Bytes>), h2::Error> {
    std::future::poll_fn(|cx| send.poll_ready(cx)).await?;
    send.send_request(req, end)
}

/// What a failed exchange was, in nginx's words: the upstream's reset of
/// the stream or GOAWAY (`upstream rejected request with error N`), the
/// connection broken before a response, or gone.
fn failed(e: &h2::Error) -> Error {
    match (e.reason(), e.get_io()) {
        (Some(r), _) => Error::Rejected(u32::from(r)),
        (None, Some(io)) => Error::Recv(match io.raw_os_error() {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::new(io.kind(), io.to_string()),
        }),
        (None, None) => Error::Closed,
    }
}

/// The upstream request: `scheme://authority/path` (h2 writes the
/// pseudo-header fields from it), the set headers, the client's fields
/// less the connection's own, the body's length when known.
fn request(call: &Call<'_, '_>) -> Result<Request<()>, Error> {
    let head = call.head;
    let scheme: &[u8] = if call.key.is_tls() {
        b"https://"
    } else {
        b"http://"
    };
    let mut uri = Vec::with_capacity(scheme.len() + 64 + head.target.len());
    let mut headers = HeaderMap::with_capacity(16);
    head.proxy.each(head.vars, head.proxy_host, |name, value| {
        if name == header::HOST {
            uri.clear();
            uri.extend_from_slice(scheme);
            uri.extend_from_slice(value);
        } else if let Ok(v) = HeaderValue::from_bytes(value) {
            headers.append(name.clone(), v);
        }
    });
    client_fields(head, &mut headers);
    // nginx's `$grpc_internal_trailers`: asked for when the client did.
    let trailers = head
        .headers
        .get_all(&header::TE)
        .flat_map(|v| v.split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"));
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    // (As hyper's client did: not for an empty GET, HEAD, DELETE.)
    let bodiless = matches!(
        *head.method,
        Method::GET | Method::HEAD | Method::DELETE | Method::CONNECT
    );
    if let Some(n) = call.length.filter(|&n| n != 0 || !bodiless) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    if uri.is_empty() {
        uri.extend_from_slice(scheme);
        uri.extend_from_slice(head.proxy_host.as_bytes());
    }
    uri.extend_from_slice(head.target.as_bytes());
    let uri = http::Uri::try_from(uri).map_err(|_| Error::Invalid("request target"))?;
    let mut req = Request::new(());
    *req.method_mut() = head.method.clone();
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    Ok(req)
}

/// The client's fields that go upstream, appended to `headers`: from
/// hyper's map as they are (an HTTP/2 client's: names and values shared,
/// not parsed and copied again), else from the HTTP/1.1 head.
fn client_fields(head: &Head<'_>, headers: &mut HeaderMap) {
    let goes = |name: &[u8]| passed(name) && !head.proxy.replaces(name);
    if let Fields::Map(map) = head.headers {
        for (name, value) in map {
            if goes(name.as_str().as_bytes()) {
                headers.append(name.clone(), value.clone());
            }
        }
        return;
    }
    for (name, value) in head.headers.iter() {
        if goes(name) {
            if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
                headers.append(n, v);
            }
        }
    }
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
