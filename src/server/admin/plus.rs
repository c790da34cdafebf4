//! NGINX Plus's API (version 9) as far as sluice has its objects: the
//! `limit_req` and `limit_conn` zones' counters and the upstream groups,
//! at NGINX Plus's paths with its field names, and its `DELETE` that
//! resets a zone's counters. `?fields=a,b` keeps only those fields, as
//! NGINX Plus does.

use super::Answer;
use crate::config::Config;
use crate::limiter::LimitReqStatus as S;
use http::{Method, StatusCode};
use serde_json::{Map, Value, json};
use std::sync::atomic::Ordering;

/// The API version sluice speaks.
pub(super) const VERSION: u32 = 9;

/// `/api…` below `/api/sluice`.
pub(super) fn route(config: &Config, method: &Method, path: &str, query: &str) -> Answer {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(2).collect();
    let read = matches!(*method, Method::GET | Method::HEAD);
    let fields = query
        .split('&')
        .find_map(|p| p.strip_prefix("fields="))
        .map(|f| f.split(',').collect::<Vec<_>>());
    let v = match (read, parts.as_slice()) {
        (true, []) => json!([VERSION]),
        (true, ["9"]) => json!(["http"]),
        (true, ["9", "http"]) => json!(["limit_conns", "limit_reqs", "upstreams"]),
        (true, ["9", "http", "limit_reqs"]) => {
            let all = config.zones.iter().map(|z| (z.name(), limit_req(z)));
            Value::Object(
                all.map(|(n, v)| (n.to_string(), only(v, &fields)))
                    .collect(),
            )
        }
        (_, ["9", "http", "limit_reqs", name]) => {
            let Some(z) = config.zones.iter().find(|z| z.name() == *name) else {
                return not_found("limit_req", name, "LimitReqNotFound");
            };
            if !read {
                return reset(method, || z.limiter.counts.reset());
            }
            only(limit_req(z), &fields)
        }
        (true, ["9", "http", "limit_conns"]) => {
            let all = config.conn_zones.iter().map(|z| (&*z.name, limit_conn(z)));
            Value::Object(
                all.map(|(n, v)| (n.to_string(), only(v, &fields)))
                    .collect(),
            )
        }
        (_, ["9", "http", "limit_conns", name]) => {
            let Some(z) = config.conn_zones.iter().find(|z| &*z.name == *name) else {
                return not_found("limit_conn", name, "LimitConnNotFound");
            };
            if !read {
                return reset(method, || z.counts.reset());
            }
            only(limit_conn(z), &fields)
        }
        (true, ["9", "http", "upstreams"]) => {
            let all = config.upstreams.iter().map(|g| (g.name(), upstream(g)));
            Value::Object(
                all.map(|(n, v)| (n.to_string(), only(v, &fields)))
                    .collect(),
            )
        }
        (true, ["9", "http", "upstreams", name]) => {
            let Some(g) = config.upstreams.iter().find(|g| g.name() == *name) else {
                return not_found("upstream", name, "UpstreamNotFound");
            };
            only(upstream(g), &fields)
        }
        (false, _) => {
            let text = "method not supported";
            return Answer::error(StatusCode::METHOD_NOT_ALLOWED, text, "MethodNotSupported");
        }
        _ => {
            let text = "path not found";
            return Answer::error(StatusCode::NOT_FOUND, text, "PathNotFound");
        }
    };
    Answer::json(StatusCode::OK, &v)
}

/// `DELETE`: the counters start from zero (204, as NGINX Plus answers).
fn reset(method: &Method, reset: impl FnOnce()) -> Answer {
    if *method != Method::DELETE {
        let text = "method not supported";
        return Answer::error(StatusCode::METHOD_NOT_ALLOWED, text, "MethodNotSupported");
    }
    reset();
    Answer::no_content()
}

fn not_found(what: &str, name: &str, code: &str) -> Answer {
    let text = format!("{what} not found: \"{name}\"");
    Answer::error(StatusCode::NOT_FOUND, text, code)
}

/// `v` with only `fields` (all without `?fields=`).
fn only(v: Value, fields: &Option<Vec<&str>>) -> Value {
    match (v, fields) {
        (Value::Object(m), Some(f)) => {
            let kept: Map<String, Value> =
                m.into_iter().filter(|(k, _)| f.contains(&&**k)).collect();
            Value::Object(kept)
        }
        (v, _) => v,
    }
}

/// A `limit_req` zone's counters, NGINX Plus's names.
pub(super) fn limit_req(z: &crate::config::Zone) -> Value {
    let c = &z.limiter.counts;
    json!({
        "passed": c.get(S::Passed),
        "delayed": c.get(S::Delayed),
        "rejected": c.get(S::Rejected),
        "delayed_dry_run": c.get(S::DelayedDryRun),
        "rejected_dry_run": c.get(S::RejectedDryRun),
    })
}

/// A `limit_conn` zone's counters, NGINX Plus's names.
fn limit_conn(z: &crate::connlimit::ConnZone) -> Value {
    let c = &z.counts;
    json!({
        "passed": c.passed.load(Ordering::Relaxed),
        "rejected": c.rejected.load(Ordering::Relaxed),
        "rejected_dry_run": c.rejected_dry_run.load(Ordering::Relaxed),
    })
}

/// An upstream group as NGINX Plus describes one: its peers with their
/// state, weight, requests and failures.
pub(super) fn upstream(g: &crate::upstream::group::Group) -> Value {
    let peers: Vec<Value> = g
        .servers()
        .iter()
        .enumerate()
        .map(|(id, s)| {
            let def = g.def.servers.iter().find(|d| d.address == s.peer.server);
            json!({
                "id": id,
                "server": s.peer.name,
                "name": s.peer.server,
                "backup": def.is_some_and(|d| d.backup),
                "weight": def.map_or(1, |d| d.weight),
                "state": match s.condition {
                    "unavailable" => "unavail",
                    "down" => "down",
                    _ => "up",
                },
                "requests": s.requests,
                "fails": s.failures,
            })
        })
        .collect();
    json!({ "peers": peers, "keepalive": 0, "zombies": 0, "zone": g.name() })
}
