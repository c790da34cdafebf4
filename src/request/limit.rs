//! nginx's preaccess phase for `limit_req`: every limit's key, the
//! decision, the delay, and nginx's log lines for them (written in dry-run
//! too, which is why they are here and not with the rejections in
//! [`super::error`]).

use super::Ctx;
use super::error::{Decided, ProxyError};
use super::log::{log_req, push_req_line};
use crate::accesslog::Record;
use crate::config::Location;
use crate::errlog::{self, Excess, Severity};
use crate::limiter::top::Event;
use crate::limiter::{self, LimitReqStatus, Outcome};
use crate::metrics::Metrics;
use crate::vars::RequestVars;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::time::Instant;

/// What `limit_req` decided for a request that goes on.
pub(crate) struct Limited<'a> {
    pub(crate) outcome: Outcome,
    /// `$limit_req_status` and the deciding zone.
    pub(crate) decided: Decided<'a>,
}

/// Apply `loc`'s limits to the request: decide, count, log, and delay a
/// request the bucket delays. A rejection comes back as the error that
/// answers it, with what was decided. A gRPC call's `deadline` shorter
/// than its delay makes the delay a rejection ([`past_deadline`]).
pub(crate) async fn limit_req<'l>(
    cx: &Ctx<'_>,
    loc: &'l Location,
    record: &mut Option<Record>,
    deadline: Option<Duration>,
) -> Result<Limited<'l>, (ProxyError<'l>, Limited<'l>)> {
    let now = cx.env.clock.ms_at(cx.start);
    let outcome = limiter::decide(loc.limits.set(), now, |i| key(cx, loc, i)).await;
    let outcome = past_deadline(outcome, deadline, cx.start);
    let status = LimitReqStatus::of(&outcome, loc.dry_run);
    let zone = match outcome {
        Outcome::Unlimited => None,
        Outcome::Accepted { limit, .. }
        | Outcome::Rejected { limit, .. }
        | Outcome::NoMemory { limit }
        | Outcome::Unavailable { limit } => Some(&loc.limits.limit(limit).zone),
    };
    if let (Some(z), Some(s)) = (zone, status) {
        z.counts.record(s);
    }
    note_top(cx, loc, &outcome, now);
    if let (Some(z), Some(s)) = (zone, status) {
        super::log::debug_step(
            cx.conn,
            format_args!("limit_req: {} by zone \"{}\"", s.as_str(), z.name),
        );
    }
    let limited = Limited {
        outcome,
        decided: Decided {
            status,
            zone: zone.map_or("", |z| &z.name),
            algorithm: zone.map_or("-", |z| z.policy.algorithm.name()),
        },
    };
    let rejection = match limited.outcome {
        Outcome::Unlimited | Outcome::Accepted { delay_ms: 0, .. } => None,
        Outcome::Accepted {
            delay_ms, excess, ..
        } => {
            log_delay(cx, loc, &limited, excess);
            if !loc.dry_run {
                delay(cx, &limited, record, delay_ms).await;
            }
            None
        }
        Outcome::Rejected {
            limit,
            excess,
            wait_ms,
        } => {
            log_limiting(cx, loc, &limited, excess);
            Some(ProxyError::Limited { limit, wait_ms })
        }
        Outcome::NoMemory { limit } => {
            let zone = limited.decided.zone;
            log_req(
                Severity::Alert,
                cx.conn,
                &cx.vars,
                format_args!("could not allocate node in limit_req zone \"{zone}\""),
            );
            Some(ProxyError::ZoneFull { limit })
        }
        // Redis failed and on_error = "deny": already logged (rate-limited)
        // and counted by the zone.
        Outcome::Unavailable { .. } => Some(ProxyError::Unavailable {
            zone: limited.decided.zone,
        }),
    };
    match rejection {
        Some(e) if !loc.dry_run => Err((e, limited)),
        _ => Ok(limited),
    }
}

/// A gRPC call whose deadline would pass before its delay ends is
/// rejected now, its wait the delay (the client's retry policy then waits
/// that long; delayed, it would only have expired in the queue). It was
/// charged, as nginx keeps the charge of a delayed request whose client
/// leaves: the decision is made before the deadline is looked at, by
/// every store alike (Redis's included).
fn past_deadline(outcome: Outcome, deadline: Option<Duration>, start: Instant) -> Outcome {
    let (
        Outcome::Accepted {
            delay_ms,
            limit,
            excess,
            ..
        },
        Some(deadline),
    ) = (outcome, deadline)
    else {
        return outcome;
    };
    let left = deadline.saturating_sub(crate::clock::since(start));
    if delay_ms > 0 && Duration::from_millis(delay_ms) > left {
        return Outcome::Rejected {
            limit,
            excess,
            wait_ms: delay_ms,
        };
    }
    outcome
}

/// A rejected or delayed request counts for its key in the deciding
/// zone's most limited keys (dry-run too: it is what would happen).
fn note_top(cx: &Ctx, loc: &Location, outcome: &Outcome, now: u64) {
    let (limit, event) = match *outcome {
        Outcome::Rejected { limit, .. } => (limit, Event::Rejected),
        Outcome::Accepted {
            limit,
            delay_ms: 1..,
            ..
        } => (limit, Event::Delayed),
        _ => return,
    };
    let zone = loc.limits.zone(limit);
    if zone.top.k() == 0 {
        return;
    }
    // The deciding key is usually the last one this thread computed: its
    // bytes are still in the buffer (evaluating it again cost a rejection
    // more than the sketch itself).
    let tag = key_tag(cx, loc, limit);
    let reused = KEY_BUF.with_borrow(|buf| {
        let same = LAST_KEY.get() == tag;
        if same {
            zone.top.record(buf, event, now);
        }
        same
    });
    if !reused {
        if let Some(k) = key(cx, loc, limit) {
            zone.top.record(k.as_ref(), event, now);
        }
    }
}

thread_local! {
    /// The last key [`key`] computed on this thread (a request's limits
    /// are decided on one worker thread)...
    static KEY_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    /// ...and whose it is ([`key_tag`]; 0: nobody's). Another request may
    /// compute its keys while this one awaits Redis: then the tag is not
    /// this request's, and its key is evaluated again.
    static LAST_KEY: std::cell::Cell<(usize, usize, usize)> = const { std::cell::Cell::new((0, 0, 0)) };
}

/// Limit `i` of `loc` for the request of `cx` (whose context is at one
/// address while the request lives).
fn key_tag(cx: &Ctx, loc: &Location, i: usize) -> (usize, usize, usize) {
    (
        std::ptr::from_ref(cx) as usize,
        std::ptr::from_ref(loc) as usize,
        i,
    )
}

/// Limit `i`'s key for this request, `None` (not limited by it) when it is
/// empty, too long, or the zone skips the client.
fn key(cx: &Ctx, loc: &Location, i: usize) -> Option<Key> {
    let vars = &cx.vars;
    LAST_KEY.set((0, 0, 0));
    let k = KEY_BUF.with_borrow_mut(|key_buf| {
        let zone = loc.limits.zone(i);
        let ip = zone.client(vars.remote.ip())?;
        key_buf.clear();
        if ip == vars.remote.ip() {
            zone.key.eval(vars, None, key_buf);
        } else {
            let v = RequestVars {
                remote: SocketAddr::new(ip, vars.remote.port()),
                ..*vars
            };
            zone.key.eval(&v, None, key_buf);
        }
        if key_buf.is_empty() {
            return None;
        }
        if key_buf.len() > 65_535 {
            log_req(
                Severity::Error,
                cx.conn,
                vars,
                format_args!(
                    "the value of the \"{}\" key is more than 65535 bytes: \"{}...\"",
                    zone.key.source(),
                    String::from_utf8_lossy(&key_buf[..64]),
                ),
            );
            return None;
        }
        Some(Key::new(key_buf))
    });
    if k.is_some() {
        LAST_KEY.set(key_tag(cx, loc, i));
    }
    k
}

fn dry(loc: &Location) -> &'static str {
    if loc.dry_run { ", dry run" } else { "" }
}

/// nginx's "delaying request" line, one level below `limit_req_log_level`.
fn log_delay(cx: &Ctx, loc: &Location, limited: &Limited, excess: u64) {
    log_req(
        loc.log_level.lower(),
        cx.conn,
        &cx.vars,
        format_args!(
            "delaying request{}, excess: {}, by zone \"{}\"",
            dry(loc),
            Excess(excess),
            limited.decided.zone
        ),
    );
}

/// nginx's "limiting requests" line, the hottest line of all: written piece
/// by piece.
fn log_limiting(cx: &Ctx, loc: &Location, limited: &Limited, excess: u64) {
    errlog::emit_with(loc.log_level, |out| {
        push_req_line(out, cx.conn, &cx.vars, |out| {
            out.extend_from_slice(b"limiting requests");
            out.extend_from_slice(dry(loc).as_bytes());
            out.extend_from_slice(b", excess: ");
            errlog::push_excess(out, excess);
            out.extend_from_slice(b" by zone \"");
            out.extend_from_slice(limited.decided.zone.as_bytes());
            out.push(b'"');
        })
    });
}

/// Wait out a delay; a client that leaves meanwhile is logged as nginx
/// logs it ([`DelayGuard`]).
async fn delay(cx: &Ctx<'_>, limited: &Limited<'_>, record: &mut Option<Record>, delay_ms: u64) {
    if let Some(r) = record.as_mut() {
        r.limit_req_status = limited.decided.status;
        r.zone = limited.decided.zone.to_string();
        r.limit_req_algorithm = limited.decided.algorithm;
    }
    let mut guard = DelayGuard {
        armed: true,
        line: {
            let mut l = Vec::new();
            push_req_line(&mut l, cx.conn, &cx.vars, |out| {
                out.extend_from_slice(b"client prematurely closed connection")
            });
            l
        },
        record,
        metrics: &cx.env.metrics,
        start: cx.start,
    };
    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    guard.armed = false;
}

/// Logs nginx's "client prematurely closed connection" (and a 499 in the
/// access log) if a delayed request is dropped before its delay ends: the
/// client went away. The slot stays charged, as in nginx.
struct DelayGuard<'a> {
    armed: bool,
    line: Vec<u8>,
    record: &'a mut Option<Record>,
    /// The 499 is counted in `sluice_http_responses` too.
    metrics: &'a Metrics,
    start: Instant,
}

impl Drop for DelayGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            errlog::emit_with(Severity::Info, |out| out.extend_from_slice(&self.line));
            self.metrics.response(499, crate::clock::since(self.start));
            if let Some(r) = self.record.as_mut() {
                r.status = 499;
                r.write(0);
            }
        }
    }
}

/// A limit's key, inline when short (addresses, most header values).
pub(crate) enum Key {
    Inline(u8, [u8; Key::INLINE]),
    Heap(Vec<u8>),
}

impl Key {
    const INLINE: usize = 46;

    pub(crate) fn new(k: &[u8]) -> Key {
        if k.len() <= Key::INLINE {
            let mut b = [0; Key::INLINE];
            b[..k.len()].copy_from_slice(k);
            Key::Inline(k.len() as u8, b)
        } else {
            Key::Heap(k.to_vec())
        }
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        match self {
            Key::Inline(n, b) => &b[..*n as usize],
            Key::Heap(v) => v,
        }
    }
}
