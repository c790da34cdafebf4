//! One HTTP/3 request stream: its head (QPACK-decoded by h3, which resets
//! a malformed one with `H3_MESSAGE_ERROR`: an uppercase or invalid name,
//! an unknown pseudo-header) judged by the HTTP/2 gate — HTTP/1.1's rules,
//! nginx's statuses — then [`crate::request::handle`], then the response
//! written on the stream, each write within `send_timeout`.

use super::body::QuicBody;
use super::early::Completed;
use super::floods::{Guard, Outcome};
use super::guarded::{Guarded, Recv};
use super::{Conn, Shared, quic};
use crate::body::Body;
use crate::client_body::ClientBody;
use crate::http1::HeadRules;
use crate::http2::hpack::{self, Field};
use crate::http2::request::{self as gate, Limits, Verdict};
use crate::server::refuse;
use bytes::Bytes;
use h3::error::Code;
use h3::server::{RequestResolver, RequestStream};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, header};
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;

type Send = RequestStream<quic::SendHalf<Bytes>, Bytes>;

/// Serves one request stream in its own task. Its future is written into
/// its box, not moved there: the task holds the box, so the ~9 KB future is
/// never copied (into the task's cell, then over by each change of its
/// stage: 57% of an HTTP/3 request's instructions when it was).
pub(super) fn spawn(
    shared: Arc<Shared>,
    at: (Arc<Conn>, Completed, Arc<Guard>),
    resolver: RequestResolver<Guarded, Bytes>,
    rules: (HeadRules, Arc<quic::Stops>),
) {
    let fut = Box::write(Box::new_uninit(), serve(shared, at, resolver, rules));
    tokio::spawn(crate::clock::Fresh::new(Box::into_pin(fut)));
}

/// Serves one request stream to its end, and tells the connection's guard
/// how it ended (streams the client resets before their answer are
/// bounded: rapid reset; and any stream not answered whole counts toward
/// the GOAWAY of [`quic::ABORTED_MAX`]).
async fn serve(
    shared: Arc<Shared>,
    (conn, handshake, guard): (Arc<Conn>, Completed, Arc<Guard>),
    resolver: RequestResolver<Guarded, Bytes>,
    (rules, stops): (HeadRules, Arc<quic::Stops>),
) {
    let outcome = answer(shared, (conn, handshake), resolver, (rules, &stops)).await;
    guard.ended(outcome);
}

/// One request stream answered; a client that cancels it (STOP_SENDING,
/// [`quic::Stops`]) drops it wherever it is: delayed, at the upstream, or
/// while its response is written.
async fn answer(
    shared: Arc<Shared>,
    (conn, handshake): (Arc<Conn>, Completed),
    resolver: RequestResolver<Guarded, Bytes>,
    (rules, stops): (HeadRules, &quic::Stops),
) -> Outcome {
    let start = crate::clock::now();
    let resolved = resolver.resolve_request().await;
    // A head that came before the handshake completed is early data.
    let conn = handshake.conn_now(conn);
    let (req, stream) = match resolved {
        Ok(r) => r,
        Err(h3::error::StreamError::RemoteTerminate { .. }) => return Outcome::Cancelled,
        Err(e) => {
            // h3 has reset it (or answered 431): no request to log but
            // nginx's line for a reset head.
            if !e.is_h3_no_error() {
                refuse::reset_logged(&shared, &conn);
            }
            return Outcome::Other;
        }
    };
    let mut stopped = stops
        .take(stream.id())
        .unwrap_or_else(|| Box::pin(std::future::pending()));
    let (mut send, recv) = stream.split();
    let head = match admitted(&shared, &conn, &req, rules, &mut send, start).await {
        Ok(head) => head,
        Err(outcome) => return outcome,
    };
    let head_only = head.method == Method::HEAD;
    let malformed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (body, watch) = client_body(recv, &head, &malformed);
    let send_timeout = conn.state.timeouts.send;
    let env = shared.env.clone();
    let handled = crate::request::handle(env, conn, (head.into(), body), start);
    // A client that resets its stream while the request is delayed, or
    // stops it: the request is dropped (logged 499 by its guard), never
    // forwarded or no longer waited for.
    let resp = tokio::select! {
        r = handled => r,
        () = cancelled(watch.as_ref(), &mut stopped) => {
            send.stop_stream(Code::H3_REQUEST_CANCELLED);
            return Outcome::Cancelled;
        }
    };
    let status = resp.as_ref().map_or_else(|c| c.status, |r| r.status());
    shared
        .env
        .metrics
        .response(status, crate::clock::since(start));
    match resp {
        Ok(reply) => {
            let mut resp = reply.into_response();
            crate::upstream::into_header_map(&mut resp);
            tokio::select! {
                r = respond(&mut send, resp, (head_only, send_timeout)) => Outcome::of(r),
                () = &mut stopped => {
                    send.stop_stream(Code::H3_REQUEST_CANCELLED);
                    Outcome::Cancelled
                }
            }
        }
        // A body other than its Content-Length (RFC 9114 §4.1.2: malformed;
        // the upstream never got it whole); nginx's 444, or a client gone:
        // the stream ends without a word.
        Err(_) if malformed.load(std::sync::atomic::Ordering::Relaxed) => {
            send.stop_stream(Code::H3_MESSAGE_ERROR);
            Outcome::Other
        }
        Err(c) => {
            send.stop_stream(Code::H3_REQUEST_CANCELLED);
            match c.status {
                499 => Outcome::Cancelled,
                _ => Outcome::Other,
            }
        }
    }
}

/// The request's body (none when the stream ended with its head), held to
/// its `Content-Length` (`malformed` is set when it is not), and the watch
/// on its stream until it is read.
fn client_body(
    recv: RequestStream<Recv, Bytes>,
    head: &http::request::Parts,
    malformed: &Arc<std::sync::atomic::AtomicBool>,
) -> (ClientBody, Option<super::body::Watch>) {
    let declared = head
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let body = QuicBody::of(recv, declared, malformed.clone());
    let watch = body.as_ref().map(QuicBody::watch);
    let body = match body {
        Some(b) => ClientBody::Stream(Box::pin(b)),
        None => ClientBody::Empty,
    };
    (body, watch)
}

/// Completes when the client gave up on the request: its STOP_SENDING,
/// or a RESET_STREAM before its body was read.
async fn cancelled(watch: Option<&super::body::Watch>, stopped: &mut quic::Stopped) {
    match watch {
        Some(w) => tokio::select! {
            () = w.reset() => {}
            () = stopped => {}
        },
        None => stopped.await,
    }
}

/// What becomes of an HTTP/3 request head: the gate's verdict, with an
/// accepted head as the request `request::handle` reads.
#[derive(Debug)]
pub(crate) enum Head {
    /// The canonical head, and the names of fields dropped as invalid
    /// (`ignore_invalid_headers`), which nginx logs.
    Accept(http::request::Parts, Vec<Vec<u8>>),
    /// nginx's answer (a status and its log line).
    Refuse(crate::http1::Refusal),
    /// Malformed: the stream is reset with `H3_MESSAGE_ERROR`.
    Reset(Option<crate::http1::Refusal>),
}

/// Judges a head as h3 handed it over: its fields through the HTTP/2 gate
/// (HTTP/1.1's rules), an accepted one made the request again from the
/// gate's canonical block. Pure: the `http3` fuzz target checks it.
pub(crate) fn head(req: &Request<()>, rules: &HeadRules) -> Head {
    let fields = fields_of(req);
    match gate::judge(&fields, false, rules, Limits::of(rules)) {
        Verdict::Accept { block, dropped } => match canonical(&block) {
            Some(parts) => Head::Accept(parts, dropped),
            None => Head::Reset(None),
        },
        Verdict::Refuse(r) => Head::Refuse(with_h3_line(r)),
        Verdict::Reset(why) => Head::Reset(why.map(with_h3_line)),
    }
}

/// The head the gate lets through, or how the stream ended once it got
/// its refusal (nginx's status) or its reset.
async fn admitted(
    shared: &Shared,
    conn: &Conn,
    req: &Request<()>,
    rules: HeadRules,
    send: &mut Send,
    start: tokio::time::Instant,
) -> Result<http::request::Parts, Outcome> {
    let judged = head(req, &rules);
    if !matches!(judged, Head::Reset(_)) {
        // (As over HTTP/2, where a head reset never reaches a stream.)
        shared.env.metrics.request(crate::metrics::Protocol::Http3);
    }
    match judged {
        Head::Accept(parts, dropped) => {
            for name in dropped {
                let line = gate::dropped_notice(name);
                refuse::log_refusal(&line, conn.id, conn.remote.ip(), "");
            }
            Ok(parts)
        }
        Head::Refuse(r) => {
            let resp = refuse::refused_stream(shared, conn, Some(r), start);
            let status = resp.status().as_u16();
            shared
                .env
                .metrics
                .response(status, crate::clock::since(start));
            Err(Outcome::of(
                respond(
                    send,
                    resp,
                    (req.method() == Method::HEAD, conn.state.timeouts.send),
                )
                .await,
            ))
        }
        Head::Reset(why) => {
            if let Some(r) = why {
                refuse::log_refusal(&r, conn.id, conn.remote.ip(), "");
            }
            refuse::reset_logged(shared, conn);
            send.stop_stream(Code::H3_MESSAGE_ERROR);
            Err(Outcome::Other)
        }
    }
}

/// The request's fields as the gate reads them: the four pseudo-headers
/// (as h3 parsed them), then the fields in their map's order.
pub(crate) fn fields_of(req: &Request<()>) -> Vec<Field> {
    let mut out = Vec::with_capacity(req.headers().len() + 4);
    let mut push = |name: &[u8], value: &[u8]| {
        out.push(Field {
            name: Bytes::copy_from_slice(name),
            value: Bytes::copy_from_slice(value),
        })
    };
    push(b":method", req.method().as_str().as_bytes());
    if let Some(s) = req.uri().scheme_str() {
        push(b":scheme", s.as_bytes());
    }
    if let Some(a) = req.uri().authority() {
        push(b":authority", a.as_str().as_bytes());
    }
    if let Some(p) = req.uri().path_and_query() {
        push(b":path", p.as_str().as_bytes());
    }
    for (name, value) in req.headers() {
        push(name.as_str().as_bytes(), value.as_bytes());
    }
    out
}

/// The head the gate let through (its canonical block), as the request
/// `request::handle` reads: `Host` among the fields, and the cookies
/// HTTP/3 clients send one per field one `Cookie` again, joined by `"; "`
/// (RFC 9114 §4.2.1, as nginx joins them).
fn canonical(block: &[u8]) -> Option<http::request::Parts> {
    let decoded = hpack::Decoder::new().decode(block, usize::MAX).ok()?;
    let mut method = None;
    let mut path = None;
    let mut headers = HeaderMap::with_capacity(decoded.fields.len());
    let mut cookie: Vec<u8> = Vec::new();
    for f in decoded.fields {
        match f.name.as_ref() {
            b":method" => method = Some(Method::from_bytes(&f.value).ok()?),
            b":path" => path = Some(f.value),
            b":scheme" => {}
            b"cookie" => {
                if !cookie.is_empty() {
                    cookie.extend_from_slice(b"; ");
                }
                cookie.extend_from_slice(&f.value);
            }
            name => {
                let name = HeaderName::from_bytes(name).ok()?;
                headers.append(name, HeaderValue::from_bytes(&f.value).ok()?);
            }
        }
    }
    if !cookie.is_empty() {
        headers.insert(header::COOKIE, HeaderValue::from_bytes(&cookie).ok()?);
    }
    let uri = http::Uri::from_maybe_shared(path?).ok()?;
    let mut req = Request::new(());
    *req.method_mut() = method?;
    *req.uri_mut() = uri;
    *req.version_mut() = http::Version::HTTP_3;
    *req.headers_mut() = headers;
    Some(req.into_parts().0)
}

/// A refusal's request line says `HTTP/3.0` (the gate writes HTTP/2's).
fn with_h3_line(mut r: crate::http1::Refusal) -> crate::http1::Refusal {
    if let Some(line) = r.request_line.as_mut() {
        if line.ends_with(b" HTTP/2.0") {
            let n = line.len();
            line[n - 3..].copy_from_slice(b"3.0");
        }
    }
    r
}

impl Outcome {
    /// A response written whole was answered; one the client stopped
    /// taking (or reset the stream under) was cancelled.
    fn of(written: Result<(), Stopped>) -> Outcome {
        match written {
            Ok(()) => Outcome::Answered,
            Err(Stopped::Stream) => Outcome::Cancelled,
            Err(_) => Outcome::Other,
        }
    }
}

/// Why a response stopped before its end.
#[derive(Debug)]
enum Stopped {
    /// The client took nothing for `send_timeout`.
    TimedOut,
    /// The stream or connection failed (the client reset it, or left).
    Stream,
    /// The response body failed (the upstream broke off).
    Body,
}

/// Writes `resp` on the stream: the head without HTTP/1.1's
/// connection-specific fields (RFC 9114 §4.2), a `Date` and the length
/// when known (as hyper adds them for HTTP/2), then its data and trailers
/// — none of them for a HEAD request (`head_only`: the head says what a
/// GET would get, as nginx's does). The counts the response holds are let
/// go once it was all written.
async fn respond(
    send: &mut Send,
    resp: Response<Body>,
    (head_only, timeout): (bool, Duration),
) -> Result<(), Stopped> {
    let (mut parts, body) = resp.into_parts();
    let held = parts
        .extensions
        .remove::<crate::connlimit::HeldUntilWritten>();
    for name in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::TE,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
    ] {
        parts.headers.remove(name);
    }
    if !parts.headers.contains_key(header::DATE) {
        parts
            .headers
            .insert(header::DATE, crate::server::h1::date_value());
    }
    let bodiless = parts.status.is_informational()
        || parts.status == http::StatusCode::NO_CONTENT
        || parts.status == http::StatusCode::NOT_MODIFIED;
    if !bodiless && !parts.headers.contains_key(header::CONTENT_LENGTH) {
        if let Some(n) = hyper::body::Body::size_hint(&body).exact() {
            parts.headers.insert(header::CONTENT_LENGTH, n.into());
        }
    }
    within(timeout, send.send_response(Response::from_parts(parts, ()))).await?;
    if !head_only {
        send_body(send, body, timeout).await?;
    }
    within(timeout, send.finish()).await?;
    drop(held);
    Ok(())
}

/// A response's data and trailers, each write within `send_timeout`.
async fn send_body(send: &mut Send, mut body: Body, timeout: Duration) -> Result<(), Stopped> {
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(f) => f,
            Err(_) => {
                send.stop_stream(Code::H3_INTERNAL_ERROR);
                return Err(Stopped::Body);
            }
        };
        match frame.into_data() {
            Ok(data) if !data.is_empty() => within(timeout, send.send_data(data)).await?,
            Ok(_) => {}
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    within(timeout, send.send_trailers(trailers)).await?;
                }
            }
        }
    }
    Ok(())
}

/// One write, within `send_timeout`.
async fn within<F>(timeout: Duration, write: F) -> Result<(), Stopped>
where
    F: std::future::Future<Output = Result<(), h3::error::StreamError>>,
{
    match tokio::time::timeout(timeout, write).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(Stopped::Stream),
        Err(_) => Err(Stopped::TimedOut),
    }
}
