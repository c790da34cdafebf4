//! Upstream HTTP/2: the client for `grpc_pass`, on sluice's own HTTP/2
//! connections ([`super::h2conn`]: why not the h2 crate is said there).
//! A call's own future pumps the request body into its stream while it
//! waits for the head, and the response body does while it is read
//! ([`super::h2stream`]): no task per call, one per connection (the
//! driver, which does the socket's reads and writes).
//!
//! The connections: each worker thread keeps its own to each upstream (as
//! the HTTP/1.1 pool does), and many calls share one: a connection takes new
//! streams while it carries fewer than [`STREAMS_PER_CONNECTION`], then a
//! second one is opened. A connection nobody used for a minute is let go
//! (its last handle dropped: it is closed with GOAWAY); one the upstream
//! closed (its task ended, or it sent GOAWAY) is forgotten when next
//! looked at.
//!
//! What goes upstream is nginx's grpc module's request: the method and path
//! as the client sent them, `:authority` from the `Host` that the set
//! headers make (the grpc_pass host by default), `te: trailers` when the
//! client asked for trailers, `content-length` when the body's length is
//! known, the client's other fields less the connection's own, the body
//! streamed as it arrives (gRPC needs both directions open at once: nothing
//! is buffered whole).

use super::h2conn::{Connection, Failure, STREAMS_PER_CONNECTION, Stream};
use super::h2stream::{Streamed, Upload};
use super::pool::{Key, connect};
use super::sending::{Progress, Waits, Watched, response_head};
use super::{Error, Head, UpstreamTimeouts};
use crate::body::BodyError;
use crate::http1::Fields;
use crate::http2::hpack;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method, Response, header};
use http_body::Body;
use http_body_util::combinators::UnsyncBoxBody;
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// A request body as the client side hands it over.
pub type Outgoing = UnsyncBoxBody<Bytes, BodyError>;

/// An upstream connection with no stream for this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// One kept connection: its handle, and the streams it carries now.
struct Kept {
    key: Key,
    conn: Connection,
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
fn checkout(key: &Key) -> Option<(Connection, Streams)> {
    let now = crate::clock::now();
    KEPT.with_borrow_mut(|kept| {
        kept.retain_mut(|k| {
            let busy = k.streams.load(Ordering::Relaxed) > 0;
            if busy {
                k.idle_since = now;
            }
            !k.conn.is_closed() && (busy || now.duration_since(k.idle_since) < IDLE_TIMEOUT)
        });
        let k = kept.iter_mut().find(|k| {
            k.key.matches(key) && k.streams.load(Ordering::Relaxed) < STREAMS_PER_CONNECTION
        })?;
        k.idle_since = now;
        Some((k.conn.clone(), Streams::take(&k.streams)))
    })
}

/// A stream counted on its connection until dropped.
pub(super) struct Streams(Arc<AtomicUsize>);

impl Streams {
    fn take(streams: &Arc<AtomicUsize>) -> Streams {
        streams.fetch_add(1, Ordering::Relaxed);
        Streams(streams.clone())
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A new connection to `key`: TCP (and TLS with ALPN `h2`) within
/// `grpc_connect_timeout`; HTTP/2's preface and settings go first on it,
/// its driver runs as a task of this worker. (Boxed where awaited: a TLS
/// handshake's state is large, and inline it would grow every call's
/// future, moved whole.)
async fn open(key: &Key, timeout: Duration) -> Result<(Connection, Streams), Error> {
    let conn = connect(key, timeout).await?;
    let conn = Connection::start(conn.stream);
    let streams = Arc::new(AtomicUsize::new(0));
    let taken = Streams::take(&streams);
    KEPT.with_borrow_mut(|kept| {
        kept.push(Kept {
            key: key.clone(),
            conn: conn.clone(),
            streams,
            idle_since: crate::clock::now(),
        })
    });
    Ok((conn, taken))
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
    let (resp, stream, upload, streams) = head_wait.await?;
    let mut headers = resp.headers;
    strip_hidden(&mut headers, head.hidden);
    let body = Streamed::new(
        stream,
        upload,
        &headers,
        resp.length,
        timeouts,
        progress,
        waits,
        streams,
    );
    let mut response = Response::new(super::UpstreamBody::http2(key, body));
    *response.status_mut() = resp.status;
    *response.version_mut() = http::Version::HTTP_2;
    *response.headers_mut() = headers;
    Ok(response)
}

/// A call's response head, its stream, what is left of its upload.
type Exchanged = (super::h2conn::Head, Stream, Option<Upload>, Streams);

/// The request on `kept`, and its response head, the request body going up
/// meanwhile (what is left of it goes on with the response body). A kept
/// connection the upstream had closed (GOAWAY, EOF) takes no stream: it is
/// forgotten and the request goes once more on a new connection, as nginx
/// retries a cached one.
async fn exchange(
    (conn, streams): (Connection, Streams),
    fresh: bool,
    call: &Call<'_, '_>,
    body: Option<Watched>,
) -> Result<Exchanged, Error> {
    let end = body.is_none();
    let block = request(call)?;
    let (stream, streams) = match conn.open(&block, end).await {
        Ok(stream) => (stream, streams),
        Err(Failure::GoAway(_) | Failure::Io(_) | Failure::Closed) if !fresh => {
            drop(streams);
            let (conn, streams) = Box::pin(open(call.key, call.connect_timeout)).await?;
            (conn.open(&block, end).await.map_err(failed)?, streams)
        }
        Err(e) => return Err(failed(e)),
    };
    let mut upload = body.map(Upload::new);
    let head = std::future::poll_fn(|cx| {
        if let Some(up) = upload.as_mut()
            && up.poll(&stream, cx).is_ready()
        {
            upload = None;
        }
        stream.poll_head(cx)
    })
    .await;
    match head {
        Ok(head) => Ok((head, stream, upload, streams)),
        Err(e) => Err(failed(e)),
    }
}

/// What a failed exchange was, in nginx's words: the upstream's reset of
/// the stream or GOAWAY (`upstream rejected request with error N`), the
/// connection broken before a response, or gone.
fn failed(e: Failure) -> Error {
    match e {
        Failure::Reset(r) | Failure::GoAway(r) => Error::Rejected(r),
        Failure::Io(io) => Error::Recv(match io.raw_os_error() {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::new(io.kind(), io.to_string()),
        }),
        Failure::Closed => Error::Closed,
    }
}

/// The upstream request's header block: `:method`, `:scheme`,
/// `:authority` (from the `Host` the set headers make, else the proxied
/// host), `:path`, the set headers, the client's fields less the
/// connection's own, the body's length when known; plain literals
/// ([`hpack::encode`]).
fn request(call: &Call<'_, '_>) -> Result<Vec<u8>, Error> {
    let head = call.head;
    if !head.target.starts_with('/') || !visible(head.target.as_bytes()) {
        return Err(Error::Invalid("request target"));
    }
    let mut block = Vec::with_capacity(256 + head.target.len());
    let scheme: &[u8] = if call.key.is_tls() { b"https" } else { b"http" };
    hpack::encode(&mut block, b":method", head.method.as_str().as_bytes());
    hpack::encode(&mut block, b":scheme", scheme);
    // `:authority` goes before the other fields: written once known.
    let authority_at = block.len();
    hpack::encode(&mut block, b":path", head.target.as_bytes());
    let mut authority = None;
    let mut fields = Vec::with_capacity(128);
    head.proxy.each(head.vars, head.proxy_host, |name, value| {
        if name == header::HOST {
            authority = Some(value.to_vec());
        } else if field_value(value) {
            hpack::encode(&mut fields, name.as_str().as_bytes(), value);
        }
    });
    let authority = authority.unwrap_or_else(|| head.proxy_host.as_bytes().to_vec());
    if authority.is_empty() || !visible(&authority) {
        return Err(Error::Invalid("request target"));
    }
    let mut a = Vec::with_capacity(authority.len() + 4);
    hpack::encode(&mut a, b":authority", &authority);
    block.splice(authority_at..authority_at, a);
    block.extend_from_slice(&fields);
    client_fields(head, &mut block);
    // nginx's `$grpc_internal_trailers`: asked for when the client did.
    let trailers = head
        .headers
        .get_all(&header::TE)
        .flat_map(|v| v.split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"));
    if trailers {
        hpack::encode(&mut block, b"te", b"trailers");
    }
    // (As hyper's client did: not for an empty GET, HEAD, DELETE.)
    let bodiless = matches!(
        *head.method,
        Method::GET | Method::HEAD | Method::DELETE | Method::CONNECT
    );
    if let Some(n) = call.length.filter(|&n| n != 0 || !bodiless) {
        hpack::encode(
            &mut block,
            b"content-length",
            itoa::Buffer::new().format(n).as_bytes(),
        );
    }
    Ok(block)
}

/// Bytes that may stand in a pseudo-field: visible ASCII.
fn visible(v: &[u8]) -> bool {
    v.iter().all(|&b| b > 0x20 && b < 0x7f)
}

/// A value HTTP/2 can carry (RFC 9113 §8.2.1: no NUL, CR or LF).
fn field_value(v: &[u8]) -> bool {
    !v.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n')
}

/// The client's fields that go upstream, appended to `block`: from hyper's
/// map as they are (an HTTP/2 client's), else from the HTTP/1.1 head, the
/// names lowercased (HTTP/2 has no other).
fn client_fields(head: &Head<'_>, block: &mut Vec<u8>) {
    let goes = |name: &[u8]| passed(name) && !head.proxy.replaces(name);
    if let Fields::Map(map) = head.headers {
        for (name, value) in map {
            let name = name.as_str().as_bytes();
            if goes(name) && field_value(value.as_bytes()) {
                hpack::encode(block, name, value.as_bytes());
            }
        }
        return;
    }
    for (name, value) in head.headers.iter() {
        let Ok(n) = HeaderName::from_bytes(name) else {
            continue;
        };
        if goes(n.as_str().as_bytes()) && field_value(value) {
            hpack::encode(block, n.as_str().as_bytes(), value);
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
