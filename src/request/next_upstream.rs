//! Sending a request to its upstream: the one server of a plain
//! `proxy_pass`, or the servers of its group one after another, as nginx's
//! `ngx_http_upstream_next` does (`proxy_next_upstream`,
//! `proxy_next_upstream_tries`, `proxy_next_upstream_timeout`).
//!
//! nginx's rules, all decided before anything of the response reached the
//! client (sluice reads the whole response head first):
//! - a failure to connect, send, or read the head goes on when its kind
//!   (`error`, `timeout`, `invalid_header`) is listed; a response whose
//!   status is listed (`http_502`, …) is dropped and the request goes on,
//!   unless it is the last try: then it is the answer, as is;
//! - a request once sent with POST, LOCK or PATCH goes on only with
//!   `non_idempotent`; one whose body is not buffered
//!   (`proxy_request_buffering = false`) never goes on once sent;
//! - errors and timeouts count toward `max_fails`, a listed 5xx or 429
//!   too, a 403 or 404 never; the last server's listed status is passed
//!   and not counted (nginx frees it as a success).
//!
//! Every try is logged as nginx logs it (its own error line, and "upstream
//! server temporarily disabled" when it made the server unavailable) and
//! recorded for `$upstream_addr`, `$upstream_status` and
//! `$upstream_response_time`.

use super::Ctx;
use super::log::push_context_upstream;
use crate::body::BodyError;
use crate::config::{Location, ProxyPass};
use crate::errlog::{self, Severity};
use crate::upstream::group::{Attempt, Conditions, Group, Lease, Outcome, Peer};
use crate::upstream::{self, UpstreamBody};
use crate::vars::UpstreamTry;
use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Why no response came: the last try's error, with the server it was
/// sent to (or the group's name when none was live).
pub(super) struct Failure<'l> {
    pub error: upstream::Error,
    pub authority: &'l str,
    /// The failure made the server unavailable (and the warning is still
    /// to be logged, after the error line).
    pub disabled: bool,
}

/// A request body that can be sent again: `rewind` makes it whole again,
/// `false` when it cannot be.
pub(super) type Rewind<B> = fn(&mut B) -> bool;

/// `grpc_pass`: the request goes over HTTP/2, its body taken whole (as a
/// stream hyper owns) once a connection is ready.
pub(super) type Take<B> = fn(&mut B) -> Option<upstream::Outgoing>;

/// How a request's body may go: sent again (`rewind`), never sent twice
/// (`unbuffered`: `proxy_request_buffering` off, or gRPC), over HTTP/2
/// (`take`).
pub(super) struct How<B> {
    pub rewind: Rewind<B>,
    pub unbuffered: bool,
    pub take: Option<Take<B>>,
    /// A gRPC call's deadline (its `grpc-timeout` from when it arrived):
    /// no wait for the upstream outlives it.
    pub deadline: Option<tokio::time::Instant>,
}

impl<B> How<B> {
    /// `loc`'s timeouts, the read timeout cut to what is left of the
    /// deadline.
    fn timeouts(&self, loc: &Location) -> upstream::UpstreamTimeouts {
        let mut t = loc.timeouts;
        if let Some(d) = self.deadline {
            let left = d.saturating_duration_since(crate::clock::now());
            t.proxy_read = t.proxy_read.min(left);
        }
        t
    }
}

/// The request to `pp`'s upstream (its group's servers in turn, or its
/// one server), the servers tried appended to `tries`. `unbuffered`:
/// `proxy_request_buffering` is off (nothing is sent again once sent).
#[allow(clippy::too_many_arguments)]
pub(super) async fn send<'l, B>(
    cx: &Ctx<'_>,
    loc: &'l Location,
    pp: &'l ProxyPass,
    head: &upstream::Head<'_>,
    target: &str,
    body: &mut B,
    how: How<B>,
    tries: &mut Vec<UpstreamTry>,
) -> Result<Response<Leased>, Failure<'l>>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    let tls = loc.upstream_tls.as_ref();
    let Some(group) = &loc.group else {
        super::log::debug_step(
            cx.conn,
            format_args!("http upstream request: \"{target}\" to {}", pp.authority),
        );
        let start = crate::clock::now();
        let sent = match how.take {
            Some(take) => {
                let body = || take(body);
                let timeouts = how.timeouts(loc);
                // Boxed: HTTP/2's future is large, and inline it would grow
                // every request's, HTTP/1.1's too (moved whole).
                Box::pin(upstream::send_http2(
                    &pp.authority,
                    None,
                    tls,
                    timeouts,
                    how.deadline,
                    head,
                    body,
                ))
                .await
            }
            None => upstream::send(&pp.authority, tls, loc.timeouts, head, &mut *body).await,
        };
        let status = match &sent {
            Ok(r) => Some(r.status().as_u16()),
            Err(e) => failed_status(e),
        };
        tries.push(UpstreamTry {
            addr: pp.authority.as_str().into(),
            status,
            ms: crate::clock::since(start).as_millis() as u64,
        });
        return match sent {
            Ok(resp) => Ok(resp.map(|body| Leased { body, lease: None })),
            Err(error) => Err(Failure {
                error,
                authority: pp.authority.as_str(),
                disabled: false,
            }),
        };
    };
    let walk = Walk {
        cx,
        loc,
        group,
        scheme: pp.scheme(),
        target,
        how,
    };
    walk.run(head, body, tries).await
}

/// One request's walk over its group's servers.
struct Walk<'a, 'c, 'l, B> {
    cx: &'a Ctx<'c>,
    loc: &'l Location,
    group: &'l Arc<Group>,
    scheme: &'static str,
    target: &'a str,
    how: How<B>,
}

/// One try as it ended: its server, how long it took, what the walk may
/// still do.
struct Tried<'l> {
    peer: &'l Peer,
    ms: u64,
    /// `proxy_next_upstream_timeout` has passed since the first try.
    timed_out: bool,
    idempotent: bool,
}

/// What a try leaves the walk with: its end, or `None` to go on.
type Step<'l> = Option<Result<Response<Leased>, Failure<'l>>>;

impl<'l, B> Walk<'_, '_, 'l, B>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    async fn run(
        &self,
        head: &upstream::Head<'_>,
        body: &mut B,
        tries: &mut Vec<UpstreamTry>,
    ) -> Result<Response<Leased>, Failure<'l>> {
        let (group, next) = (self.group, &self.loc.next_upstream);
        let key = match &group.hash_key {
            Some(t) => t.eval_to_vec(&self.cx.vars, None),
            None => Vec::new(),
        };
        let mut a = group.start(key, next.tries);
        // (A clock read only where `proxy_next_upstream_timeout` is set.)
        let began = next.timeout.map(|_| crate::clock::now());
        let idempotent = !matches!(head.method.as_str(), "POST" | "LOCK" | "PATCH");
        let tls = self.loc.upstream_tls.as_ref();
        loop {
            let Some(lease) = group.get(&mut a) else {
                tries.push(UpstreamTry {
                    addr: group.name().into(),
                    status: Some(502),
                    ms: 0,
                });
                return Err(Failure {
                    error: upstream::Error::NoLive,
                    authority: group.name(),
                    disabled: false,
                });
            };
            let peer = group.peer(lease.id());
            super::log::debug_step(
                self.cx.conn,
                format_args!(
                    "http upstream request: \"{}\" to {} ({})",
                    self.target,
                    peer.name,
                    group.name()
                ),
            );
            let start = crate::clock::now();
            let keep = group.keepalive();
            let timeouts = self.how.timeouts(self.loc);
            let sent = match self.how.take {
                Some(take) => {
                    let body = || take(body);
                    let deadline = self.how.deadline;
                    let sent = upstream::send_http2(
                        &peer.authority,
                        keep,
                        tls,
                        timeouts,
                        deadline,
                        head,
                        body,
                    );
                    Box::pin(sent).await
                }
                None => {
                    let body = &mut *body;
                    upstream::send_kept(&peer.authority, keep, tls, timeouts, head, body).await
                }
            };
            let tried = Tried {
                peer,
                ms: crate::clock::since(start).as_millis() as u64,
                timed_out: next
                    .timeout
                    .zip(began)
                    .is_some_and(|(t, b)| crate::clock::since(b) >= t),
                idempotent,
            };
            let step = match sent {
                Ok(resp) => self.answered(resp, lease, &mut a, body, &tried, tries),
                Err(e) => self.failed(e, lease, &mut a, body, &tried, tries),
            };
            if let Some(result) = step {
                return result;
            }
        }
    }

    /// Whether the walk may go on after a condition `mask` (`sent`: the
    /// request had gone to the server), the body made ready to go again.
    fn may_go_on(&self, mask: u16, sent: bool, body: &mut B, t: &Tried) -> bool {
        let mask = if sent && !t.idempotent {
            mask | Conditions::NON_IDEMPOTENT
        } else {
            mask
        };
        self.loc.next_upstream.conditions.has(mask)
            && !(sent && self.how.unbuffered)
            && !t.timed_out
            && (!sent || (self.how.rewind)(body))
    }

    /// A response: the answer, or (its status listed, tries left) dropped
    /// for the next server's.
    fn answered(
        &self,
        resp: Response<UpstreamBody>,
        lease: Lease,
        a: &mut Attempt,
        body: &mut B,
        t: &Tried<'l>,
        tries: &mut Vec<UpstreamTry>,
    ) -> Step<'l> {
        let status = resp.status().as_u16();
        tries.push(UpstreamTry {
            addr: t.peer.name.as_str().into(),
            status: Some(status),
            ms: t.ms,
        });
        let listed = Conditions::of_status(status)
            .filter(|&mask| a.tries > 1 && self.may_go_on(mask, true, body, t));
        if listed.is_some() {
            let outcome = if matches!(status, 403 | 404) {
                Outcome::Next
            } else {
                Outcome::Failed
            };
            if lease.free(a, outcome) {
                let phase = "reading response header from upstream";
                self.warn_disabled(&t.peer.name, phase);
            }
            return None;
        }
        lease.free(a, Outcome::Ok);
        let lease = Some(lease);
        Some(Ok(resp.map(|body| Leased { body, lease })))
    }

    /// A failure: the end (logged by the caller), or logged here and on
    /// to the next server.
    fn failed(
        &self,
        error: upstream::Error,
        lease: Lease,
        a: &mut Attempt,
        body: &mut B,
        t: &Tried<'l>,
        tries: &mut Vec<UpstreamTry>,
    ) -> Step<'l> {
        let authority = t.peer.name.as_str();
        tries.push(UpstreamTry {
            addr: authority.into(),
            status: failed_status(&error),
            ms: t.ms,
        });
        // The client's own failures end the request, not the server.
        if matches!(
            error,
            upstream::Error::Body(_) | upstream::Error::ClientBodyTimeout
        ) {
            lease.free(a, Outcome::Ok);
            let disabled = false;
            return Some(Err(Failure {
                error,
                authority,
                disabled,
            }));
        }
        let disabled = lease.free(a, Outcome::Failed);
        let mask = if error.is_timeout() {
            Conditions::TIMEOUT
        } else if matches!(error, upstream::Error::Invalid(_) | upstream::Error::TooBig) {
            Conditions::INVALID_HEADER
        } else {
            Conditions::ERROR
        };
        let go_on = a.tries > 0 && self.may_go_on(mask, !error.is_connect(), body, t);
        // nginx logs a timeout after freeing the server (its warning
        // first), any other error before.
        if disabled && error.is_timeout() {
            self.warn_disabled(authority, phase(&error));
        }
        let disabled = disabled && !error.is_timeout();
        if !go_on {
            return Some(Err(Failure {
                error,
                authority,
                disabled,
            }));
        }
        let upstream = (self.scheme, authority, self.target);
        let (conn, vars) = (self.cx.conn, &self.cx.vars);
        super::log::log_upstream(conn, vars, upstream, format_args!("{error}"));
        if disabled {
            self.warn_disabled(authority, phase(&error));
        }
        None
    }

    fn warn_disabled(&self, authority: &str, phase: &str) {
        warn(self.cx, (self.scheme, authority, self.target), phase);
    }
}

/// The status a failed try is recorded with: 504 for a timeout, 502 for
/// the others; none for the client's own failures.
fn failed_status(e: &upstream::Error) -> Option<u16> {
    match e {
        upstream::Error::Body(_) | upstream::Error::ClientBodyTimeout => None,
        _ if e.is_timeout() => Some(504),
        _ => Some(502),
    }
}

/// What nginx was doing when `e` happened (`connecting to upstream`, …):
/// the end of its message.
fn phase(e: &upstream::Error) -> &'static str {
    match e {
        _ if e.is_connect() => "connecting to upstream",
        upstream::Error::Send(_) | upstream::Error::SendTimeout => "sending request to upstream",
        _ => "reading response header from upstream",
    }
}

/// nginx's warning when a failure makes a server unavailable.
fn warn(cx: &Ctx, upstream: (&str, &str, &str), phase: &str) {
    errlog::emit_with(Severity::Warn, |out| {
        out.push(b'*');
        errlog::push_u64(out, cx.conn.id);
        out.extend_from_slice(b" upstream server temporarily disabled while ");
        out.extend_from_slice(phase.as_bytes());
        push_context_upstream(out, &cx.vars, Some(upstream));
    });
}

/// The warning for the last try's failure, after its error line (see
/// [`Failure::disabled`]).
pub(super) fn log_disabled(cx: &Ctx, upstream: (&str, &str, &str), e: &upstream::Error) {
    warn(cx, upstream, phase(e));
}

/// A response body that holds its server as serving the request (for
/// `least_conn`) until it is read or dropped.
pub(crate) struct Leased {
    pub(super) body: UpstreamBody,
    lease: Option<Lease>,
}

impl Leased {
    /// The body, the server let go (a tunnel's upstream is not counted).
    pub(super) fn into_inner(self) -> UpstreamBody {
        self.body
    }
}

impl Body for Leased {
    type Data = Bytes;
    type Error = <UpstreamBody as Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            this.lease = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
