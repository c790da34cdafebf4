//! The content phase: a location's `return`, or the request forwarded to
//! its upstream (with its body read whole first, as nginx's
//! `proxy_request_buffering`).
//!
//! An upgrade request (WebSocket, … see [`crate::http1::upgrade_asked`]) is
//! forwarded with its `Upgrade`; the upstream's `101` makes the response a
//! tunnel's ([`super::tunnel`]), any other answer is an ordinary response.
//! A body is forwarded as any request's (nginx does too), and must have been
//! sent whole before the 101 (else 502: the rest would be lost).

use super::error::{ProxyError, invalid_chunked};
use super::limit::Limited;
use super::next_upstream::{self, Failure, How, Leased, Rewind};
use super::tunnel::{self, Tunnel};
use super::{Ctx, RequestHead};
use crate::accesslog::Record;
use crate::body::Body;
use crate::client_body::ClientBody;
use crate::client_body::{Buffered, LimitedBody, ReadError, read_whole};
use crate::config::{Action, Location, ProxyPass};
use crate::respond;
use crate::upstream;
use http::{Response, Uri, Version, header};
use http_body_util::BodyExt;

/// The request's content: `return`'s answer, or the upstream's.
pub(crate) async fn content<'l>(
    cx: &Ctx<'_>,
    loc: &'l Location,
    (head, body): (&'l RequestHead, ClientBody),
    path: &str,
    limited: &Limited<'_>,
    record: &mut Option<Record>,
) -> Result<Response<Body>, ProxyError<'l>> {
    match &loc.action {
        Action::Return(ret) if ret.status == 444 => Err(ProxyError::Close),
        Action::Return(ret) => Ok(respond::return_response(
            ret,
            &cx.vars,
            limited.decided.status,
        )),
        Action::Proxy(pp) => {
            let target = upstream_target(pp, loc, &head.uri, path);
            let mut tries = Vec::new();
            let resp = forward(cx, loc, head, body, &target, pp, &mut tries).await;
            if let Some(r) = record.as_mut() {
                r.upstream = tries;
            }
            resp.map_err(|f| match f {
                Failed::Client(e) => e,
                Failed::Upstream(f) => ProxyError::Upstream {
                    error: f.error,
                    scheme: pp.scheme(),
                    authority: f.authority,
                    target,
                    disabled: f.disabled,
                },
            })
        }
    }
}

/// nginx's `proxy_pass` URI rule: with a URI part, the matched location
/// prefix is replaced by it; without one, the request URI goes unchanged.
/// The result is the upstream request's target (path and query).
pub(crate) fn upstream_target<'a>(
    pp: &crate::config::ProxyPass,
    loc: &Location,
    uri: &'a Uri,
    path: &str,
) -> std::borrow::Cow<'a, str> {
    match (&pp.uri, &loc.prefix) {
        (Some(base), Some(prefix)) => {
            let rest = path.strip_prefix(prefix.as_str()).unwrap_or("");
            let mut s = format!("{base}{}", escape_path(rest));
            if let Some(q) = uri.query() {
                s.push('?');
                s.push_str(q);
            }
            s.into()
        }
        // Unchanged: the request's own (already parsed) path and query.
        _ => uri.path_and_query().map_or("/", |pq| pq.as_str()).into(),
    }
}

pub(crate) fn escape_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Why forwarding failed: the client's doing, or the upstream's (which
/// becomes a [`ProxyError::Upstream`] with the target it was sent).
enum Failed<'l> {
    Client(ProxyError<'l>),
    Upstream(Failure<'l>),
}

/// Send the request upstream: with its body read whole first when
/// `proxy_request_buffering` is on (nothing goes upstream before it is, so
/// a body nginx would refuse is never half-forwarded).
async fn forward<'l>(
    cx: &Ctx<'_>,
    loc: &'l Location,
    req: &RequestHead,
    body: ClientBody,
    target: &str,
    pp: &'l ProxyPass,
    tries: &mut Vec<crate::vars::UpstreamTry>,
) -> Result<Response<Body>, Failed<'l>> {
    let (body, body_limit) =
        LimitedBody::new(body, loc.client_max_body_size, Some(cx.conn.state.clone()));
    let upgrade = upgrade_of(req);
    let head = upstream::Head {
        method: &req.method,
        target,
        headers: &req.fields,
        proxy: &loc.headers.proxy,
        hidden: &loc.headers.hidden,
        vars: &cx.vars,
        proxy_host: pp.authority.as_str(),
        upgrade,
    };
    let sent = send(cx, loc, pp, (req, &head), body, target, tries).await?;
    let resp = match sent {
        Ok(resp) if resp.status() == http::StatusCode::SWITCHING_PROTOCOLS => {
            upstream::switched(resp.map(Leased::into_inner), upgrade.is_some()).map_err(|error| {
                Failure {
                    error,
                    authority: pp.authority.as_str(),
                    disabled: false,
                }
            })
        }
        Ok(resp) => return Ok(resp.map(BodyExt::boxed)),
        Err(f) => Err(f),
    };
    match resp {
        Ok(upstream::Answer::Switched(head, switched)) => {
            Ok(tunnel_to(cx, loc, pp, target, head, switched))
        }
        Ok(upstream::Answer::Response(resp)) => Ok(resp.map(BodyExt::boxed)),
        Err(_) if body_limit.exceeded() => Err(Failed::Client(ProxyError::ChunkedBodyTooLarge {
            received: body_limit.received(),
        })),
        Err(f) => Err(classify(f)),
    }
}

/// The request to the upstream (its group's servers in turn), its body as
/// the location says: streamed to an HTTP/2 upstream (gRPC), read whole
/// first (`proxy_request_buffering`), or streamed.
#[allow(clippy::too_many_arguments)]
async fn send<'l>(
    cx: &Ctx<'_>,
    loc: &'l Location,
    pp: &'l ProxyPass,
    (req, head): (&RequestHead, &upstream::Head<'_>),
    body: LimitedBody,
    target: &str,
    tries: &mut Vec<crate::vars::UpstreamTry>,
) -> Result<Result<Response<Leased>, Failure<'l>>, Failed<'l>> {
    Ok(match &loc.request_buffering {
        // nginx's grpc module never buffers a body: a call streams both
        // ways at once.
        _ if pp.grpc => {
            let mut slot = Slot(Some(body));
            let how = How {
                rewind: |s: &mut Slot| s.0.is_some(),
                unbuffered: true,
                take: Some(|s: &mut Slot| s.0.take().map(BodyExt::boxed_unsync)),
                deadline: super::grpc::deadline(req).map(|d| cx.start + d),
            };
            next_upstream::send(cx, loc, pp, head, target, &mut slot, how, tries).await
        }
        Some(b) if !hyper::body::Body::is_end_stream(&body) => {
            let whole = read_whole(body, b.in_memory, &b.temp_dir, loc.timeouts.client_body).await;
            match whole {
                Ok(mut whole) => {
                    let rewind: Rewind<_> = |w: &mut Buffered| w.rewind().is_ok();
                    let how = How {
                        rewind,
                        unbuffered: false,
                        take: None,
                        deadline: None,
                    };
                    next_upstream::send(cx, loc, pp, head, target, &mut whole, how, tries).await
                }
                Err(e) => Err(unread(e, b, pp)?),
            }
        }
        _ => {
            let mut body = body;
            // Without a body (or unbuffered, where it is never sent twice).
            let rewind: Rewind<_> = |b: &mut LimitedBody| hyper::body::Body::is_end_stream(b);
            let how = How {
                rewind,
                unbuffered: loc.request_buffering.is_none(),
                take: None,
                deadline: None,
            };
            next_upstream::send(cx, loc, pp, head, target, &mut body, how, tries).await
        }
    })
}

/// A body that could not be read whole: the client's failure, as the
/// upstream error it becomes; the temporary file's ends the request.
fn unread<'l>(
    e: ReadError,
    b: &'l crate::config::RequestBuffering,
    pp: &'l ProxyPass,
) -> Result<Failure<'l>, Failed<'l>> {
    let error = match e {
        ReadError::Timeout => upstream::Error::ClientBodyTimeout,
        ReadError::Body(e) => upstream::Error::Body(e),
        ReadError::File(error) => {
            let dir = &b.temp_dir;
            return Err(Failed::Client(ProxyError::BodyFile { dir, error }));
        }
    };
    Ok(Failure {
        error,
        authority: pp.authority.as_str(),
        disabled: false,
    })
}

/// A gRPC call's body until the HTTP/2 client takes it ([`How::take`]).
struct Slot(Option<LimitedBody>);

impl hyper::body::Body for Slot {
    type Data = bytes::Bytes;
    type Error = crate::body::BodyError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        match self.0.as_mut() {
            Some(b) => std::pin::Pin::new(b).poll_frame(cx),
            None => std::task::Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(hyper::body::Body::is_end_stream)
    }
}

/// The upstream's 101: the response that makes the connection a tunnel.
fn tunnel_to(
    cx: &Ctx<'_>,
    loc: &Location,
    pp: &ProxyPass,
    target: &str,
    head: Response<()>,
    switched: upstream::Switched,
) -> Response<Body> {
    let limits = tunnel::Limits {
        idle: loc.timeouts.proxy_read,
        to_client: cx.conn.state.timeouts.send,
        to_upstream: loc.timeouts.proxy_send,
    };
    let mut context = Vec::new();
    let upstream = (pp.scheme(), pp.authority.as_str(), target);
    super::log::push_context_upstream(&mut context, &cx.vars, Some(upstream));
    let t = Tunnel::new(switched, limits, cx.conn.id, context);
    tunnel::respond(head, t)
}

/// The protocol an upgrade request asks for (its first `Upgrade` value),
/// by the same words the connection's head gate held its bytes by. Never
/// `h2c`: the HTTP/2 connection it switches to would carry every request
/// after the first past sluice's limits, unseen ("h2c smuggling"), and RFC
/// 9113 retired that upgrade; the request goes as a plain one.
fn upgrade_of(req: &RequestHead) -> Option<&[u8]> {
    let h = &req.fields;
    let upgrades = || h.get_all(&header::UPGRADE);
    // (Most requests have no Upgrade: one lookup for them.)
    upgrades().next()?;
    let (http11, connection) = (
        req.version == Version::HTTP_11,
        h.get_all(&header::CONNECTION),
    );
    if !crate::http1::upgrade_asked(http11, upgrades(), connection) || upgrades().any(lists_h2c) {
        return None;
    }
    upgrades().find(|v| !v.trim_ascii().is_empty())
}

/// An `Upgrade` value offers `h2c` (among its comma-separated protocols).
fn lists_h2c(value: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|p| p.trim_ascii().eq_ignore_ascii_case(b"h2c"))
}

/// The client's own failures — a broken chunked body, too slow, or gone —
/// are not the upstream's.
fn classify(f: Failure<'_>) -> Failed<'_> {
    match &f.error {
        upstream::Error::ClientBodyTimeout => Failed::Client(ProxyError::ClientBodyTimeout),
        upstream::Error::Body(b) if invalid_chunked(&**b) => {
            Failed::Client(ProxyError::InvalidChunked)
        }
        upstream::Error::Body(_) => Failed::Client(ProxyError::ClientGone),
        _ => Failed::Upstream(f),
    }
}
