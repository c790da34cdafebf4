//! One request's life, in nginx's phases: [`find`] (server, realip, the
//! normalised path, the location), [`limit`] (limit_req: keys, decision,
//! delay, its log lines) and [`limit_conn`], [`content`] (`return` or the
//! upstream), [`finish`] (quota headers, the access record). Everything that
//! ends a request early is an [`error::ProxyError`], mapped to its status,
//! log line and response in one place ([`error`]).
//!
//! Unlike nginx, `return` does not bypass the limits (the seed article's
//! pitfall).

mod content;
mod error;
mod find;
mod finish;
mod limit;
mod limit_conn;
mod log;

pub use error::CloseConnection;
pub use find::normalize_path;

use self::content::*;
use self::error::*;
use self::find::*;
use self::finish::*;
use self::limit::*;
use self::limit_conn::*;
use self::log::*;
use crate::accesslog::{AccessLog, Record};
use crate::body::Body;
use crate::clock::Clock;
use crate::config::{Action, Config};
use crate::conn::Conn;
use crate::errlog::{self, Excess, Severity};
use crate::limiter::{self, Outcome};
use crate::metrics::Metrics;
use crate::respond::{self, Made};
use crate::vars::RequestVars;
use arc_swap::ArcSwap;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What every request reads besides its connection: the configuration
/// generation to use, the clock, the counters.
pub struct Env {
    pub(crate) config: ArcSwap<Config>,
    pub clock: Clock,
    /// Counters for `/metrics`.
    pub metrics: Metrics,
}

impl Env {
    pub fn new(config: Config) -> Env {
        Env {
            config: ArcSwap::from_pointee(config),
            clock: Clock::new(),
            metrics: Metrics::new(),
        }
    }

    /// The configuration generation new requests use.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// From now on, new requests use `config`.
    pub fn switch(&self, config: Arc<Config>) {
        self.config.store(config);
    }
}

pub(crate) async fn handle(
    shared: Arc<Env>,
    conn: Arc<Conn>,
    req: Request<Incoming>,
    start: Instant,
) -> Result<Response<Body>, CloseConnection> {
    let rt = shared.config();
    let Some(server) = rt.servers.iter().find(|s| s.listen == conn.listen) else {
        return Ok(plain_status(StatusCode::SERVICE_UNAVAILABLE));
    };
    let (parts, body) = req.into_parts();
    let path = normalize_path(parts.uri.path());
    let remote = match &server.real_ip {
        Some(r) => SocketAddr::new(
            r.resolve(conn.remote.ip(), &parts.headers),
            conn.remote.port(),
        ),
        None => conn.remote,
    };
    let vars = request_vars(remote, &conn, server, &parts, path.as_deref().unwrap_or(""));
    let record = |log: &Option<Arc<AccessLog>>| {
        log.as_ref()
            .map(|l| Record::new(l.clone(), &vars, conn.id, start))
    };
    let Some(path) = path.as_deref() else {
        let resp = respond::error_response(
            &server.error_pages,
            Some(&vars),
            &Made::plain(400, "The request path is invalid.".into()),
        );
        return finish(Ok(resp), record(&server.access_log), "-", "");
    };
    let Some(loc) = server.locations.find(path) else {
        let resp = respond::error_response(
            &server.error_pages,
            Some(&vars),
            &Made::plain(404, format!("No location matches \"{path}\".")),
        );
        return finish(Ok(resp), record(&server.access_log), "-", "");
    };
    let mut record = record(&loc.access_log);
    if let Some(resp) = body_too_large(loc, &conn, &vars, &parts.headers) {
        return finish(Ok(resp), record, "-", "");
    }

    // Limits (nginx's preaccess phase).
    let now = shared.clock.ms_at(start);
    thread_local! {
        static KEY_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let outcome = limiter::decide(&loc.limits, now, |i| {
        KEY_BUF.with_borrow_mut(|key_buf| {
            let zone = &loc.zones[i];
            let ip = zone.client(vars.remote.ip())?;
            key_buf.clear();
            if ip == vars.remote.ip() {
                zone.key.eval(&vars, None, key_buf);
            } else {
                let v = RequestVars {
                    remote: SocketAddr::new(ip, vars.remote.port()),
                    ..vars
                };
                zone.key.eval(&v, None, key_buf);
            }
            if key_buf.is_empty() {
                return None;
            }
            if key_buf.len() > 65_535 {
                log_req(
                    Severity::Error,
                    &conn,
                    &vars,
                    format_args!(
                        "the value of the \"{}\" key is more than 65535 bytes: \"{}...\"",
                        zone.key.source(),
                        String::from_utf8_lossy(&key_buf[..64]),
                    ),
                );
                return None;
            }
            Some(Key::new(key_buf))
        })
    })
    .await;
    let lrs = status_name(&outcome, loc.dry_run);
    let dry = if loc.dry_run { ", dry run" } else { "" };
    let decided_by = match outcome {
        Outcome::Unlimited => None,
        Outcome::Accepted { limit, .. }
        | Outcome::Rejected { limit, .. }
        | Outcome::NoMemory { limit }
        | Outcome::Unavailable { limit } => Some(&loc.limits[limit].zone),
    };
    let zone: &str = decided_by.map_or("", |z| &z.name);
    if let Some(z) = decided_by {
        z.counts.record(lrs);
    }
    match outcome {
        Outcome::Unlimited | Outcome::Accepted { delay_ms: 0, .. } => {}
        Outcome::Accepted {
            delay_ms, excess, ..
        } => {
            log_req(
                Severity::from(loc.log_level.lower()),
                &conn,
                &vars,
                format_args!(
                    "delaying request{dry}, excess: {}, by zone \"{zone}\"",
                    Excess(excess),
                ),
            );
            if !loc.dry_run {
                if let Some(r) = record.as_mut() {
                    r.limit_req_status = lrs;
                    r.zone = zone.to_string();
                }
                let mut guard = DelayGuard {
                    armed: true,
                    line: {
                        let mut l = Vec::new();
                        push_req_line(&mut l, &conn, &vars, |out| {
                            out.extend_from_slice(b"client prematurely closed connection")
                        });
                        l
                    },
                    record: &mut record,
                    metrics: &shared.metrics,
                    start,
                };
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                guard.armed = false;
            }
        }
        Outcome::Rejected {
            limit,
            excess,
            wait_ms,
        } => {
            // The hottest line of all: written piece by piece.
            errlog::emit_with(Severity::from(loc.log_level), |out| {
                push_req_line(out, &conn, &vars, |out| {
                    out.extend_from_slice(b"limiting requests");
                    out.extend_from_slice(dry.as_bytes());
                    out.extend_from_slice(b", excess: ");
                    errlog::push_excess(out, excess);
                    out.extend_from_slice(b" by zone \"");
                    out.extend_from_slice(zone.as_bytes());
                    out.push(b'"');
                })
            });
            if !loc.dry_run {
                let resp =
                    reject(loc, &vars, limit, Some(wait_ms)).map(|r| with_quota(r, loc, &outcome));
                return finish(resp, record, lrs, zone);
            }
        }
        Outcome::NoMemory { limit } => {
            log_req(
                Severity::Alert,
                &conn,
                &vars,
                format_args!("could not allocate node in limit_req zone \"{zone}\""),
            );
            if !loc.dry_run {
                return finish(reject(loc, &vars, limit, None), record, lrs, zone);
            }
        }
        // Redis failed and on_error = "deny": already logged (rate-limited)
        // and counted by the zone.
        Outcome::Unavailable { .. } => {
            if !loc.dry_run {
                return finish(reject_unavailable(loc, &vars, zone), record, lrs, zone);
            }
        }
    }

    // limit_conn, after limit_req as in nginx's preaccess phase: a request
    // limit_req rejected or still delays is not counted.
    let held = match limit_conn(loc, &conn, &vars, &mut record, (lrs, zone)) {
        ConnCheck::Go(held) => held,
        ConnCheck::Answer(resp) => return finish(resp, record, lrs, zone),
    };

    let resp = match &loc.action {
        Action::Return(ret) => Ok(respond::return_response(ret, &vars, lrs)),
        Action::Proxy(pp) => {
            let target = upstream_target(pp, loc, &parts.uri, path);
            let up_start = record.as_ref().map(|_| Instant::now());
            let resp = forward(
                &shared,
                loc,
                &conn,
                &vars,
                (lrs, zone),
                &parts,
                body,
                &target,
                pp,
            )
            .await;
            if let Some(r) = record.as_mut() {
                r.upstream_ms = up_start.map(|t| t.elapsed().as_millis() as u64);
            }
            resp
        }
    };
    // The counts are held until the response body has been sent (or
    // dropped), as nginx releases them when the request is freed.
    finish(
        resp.map(|r| with_quota(r, loc, &outcome)),
        record,
        lrs,
        zone,
    )
    .map(|r| held.keep_until_sent(r))
}
