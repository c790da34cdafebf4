//! sluice's own status API, under `/api/sluice/`: what NGINX Plus's does
//! not have.
//!
//! - `limit_reqs[/ZONE]`: each zone's algorithm, rate, backend, key,
//!   states and capacity, evictions, counters, and the `limit_req` lines
//!   (location, burst, delay) that use it;
//! - `limit_reqs/ZONE/keys/KEY`: one client's state, for each burst the
//!   zone is used with (`GET`), and `DELETE` to forget it (its next
//!   request starts afresh; in Redis, for every instance);
//! - `limit_reqs/ZONE/top[?k=N]`: the keys rejected or delayed most over
//!   the last one to two minutes, with each count's error bound;
//! - `grpc`: gRPC calls by the status they ended with;
//! - `protocols`: requests and connections by the protocol clients speak
//!   (`http/1.1`, `h2`, `h3`) and QUIC's handshakes, so that the share of
//!   each, and what HTTP/3 costs in handshakes, reads without Prometheus.
//!
//! A key is written as a client would see it: for a zone keyed by
//! `$binary_remote_addr`, the address (`192.0.2.7`, `2001:db8::1`; with
//! `ipv6_prefix`, any address of the prefix); for any other key its text,
//! percent-encoded in the path where needed; `hex:…` names any bytes.

use super::Answer;
use crate::config::{Config, Zone};
use crate::limiter::Store;
use crate::limiter::inspect::{KeyState, fresh, inspect};
use http::{Method, StatusCode};
use serde_json::{Value, json};

/// `/api/sluice…` (`rest` is the path after `/api/sluice`).
pub(super) async fn route(
    shared: &super::Shared,
    config: &Config,
    method: &Method,
    rest: &str,
    query: &str,
) -> Answer {
    let parts: Vec<&str> = rest.trim_matches('/').split('/').collect();
    let read = matches!(*method, Method::GET | Method::HEAD);
    let zone = |name: &str| config.zones.iter().find(|z| z.name() == name);
    let now = shared.env.clock.now_ms();
    let v = match (read, parts.as_slice()) {
        (true, [""]) => json!(["limit_reqs", "grpc", "protocols"]),
        (true, ["protocols"]) => protocols(&shared.env.metrics),
        // gRPC calls on grpc_pass locations by the status they ended with.
        (true, ["grpc"]) => {
            let calls = shared.env.metrics.grpc_calls().by_code();
            json!({ "calls": Value::Object(calls.map(|(c, n)| (c.to_string(), json!(n))).collect()) })
        }
        (true, ["limit_reqs"]) => {
            let all = config
                .zones
                .iter()
                .map(|z| (z.name().to_string(), describe(config, z)));
            Value::Object(all.collect())
        }
        (true, ["limit_reqs", name]) => match zone(name) {
            Some(z) => describe(config, z),
            None => return no_zone(name),
        },
        (true, ["limit_reqs", name, "top"]) => match zone(name) {
            Some(z) => top(z, query, now),
            None => return no_zone(name),
        },
        (_, ["limit_reqs", name, "keys", key]) => {
            let Some(z) = zone(name) else {
                return no_zone(name);
            };
            let key = match client_key(z, key) {
                Ok(k) => k,
                Err(e) => return Answer::error(StatusCode::BAD_REQUEST, e, "KeyInvalid"),
            };
            return match *method {
                Method::DELETE => forget(z, &key).await,
                _ if read => key_state(config, z, &key, now).await,
                _ => not_allowed(),
            };
        }
        (false, _) => return not_allowed(),
        _ => return Answer::error(StatusCode::NOT_FOUND, "path not found", "PathNotFound"),
    };
    Answer::json(StatusCode::OK, &v)
}

/// Requests and connections by the protocol clients speak (HTTP/1.1,
/// HTTP/2, HTTP/3), and QUIC's handshakes: the same counts as `/metrics`.
fn protocols(metrics: &crate::metrics::Metrics) -> Value {
    let mut out = serde_json::Map::new();
    for c in metrics.by_protocol() {
        let mut v = json!({
            "requests": c.requests,
            "connections": { "accepted": c.accepted, "active": c.open },
        });
        if c.protocol == crate::metrics::Protocol::Http3 {
            let handshakes = metrics
                .quic_handshakes()
                .map(|(r, n)| (r.to_string(), json!(n)));
            v["handshakes"] = Value::Object(handshakes.into_iter().collect());
        }
        out.insert(c.protocol.label().to_string(), v);
    }
    Value::Object(out)
}

fn not_allowed() -> Answer {
    let text = "method not supported";
    Answer::error(StatusCode::METHOD_NOT_ALLOWED, text, "MethodNotSupported")
}

fn no_zone(name: &str) -> Answer {
    let text = format!("limit_req zone not found: \"{name}\"");
    Answer::error(StatusCode::NOT_FOUND, text, "LimitReqNotFound")
}

/// The `limit_req` lines that use `z`: (location, burst, delay), both in
/// milli-requests as the limiter has them.
fn uses<'a>(config: &'a Config, z: &'a Zone) -> Vec<(&'a str, u64, u64)> {
    let mut out = Vec::new();
    for s in &config.servers {
        for loc in s.locations.iter() {
            for i in 0..loc.limits.len() {
                if std::ptr::eq(loc.limits.zone(i), z) {
                    let l = loc.limits.limit(i);
                    out.push((loc.path.as_str(), l.burst, l.delay));
                }
            }
        }
    }
    out
}

/// A zone in full.
fn describe(config: &Config, z: &Zone) -> Value {
    let p = &z.limiter.policy;
    let store = &*z.limiter.store;
    let (backend, memory) = match store {
        Store::Memory(m) => ("memory", m),
        Store::Redis(r) => ("redis", r.local()),
    };
    let limits: Vec<Value> = uses(config, z)
        .into_iter()
        .map(|(location, burst, delay)| {
            json!({
                "location": location,
                "burst": burst / 1000,
                "delay": if delay == crate::limiter::Limit::NODELAY { Value::from("nodelay") } else { Value::from(delay / 1000) },
            })
        })
        .collect();
    json!({
        "algorithm": p.algorithm.name(),
        "rate": crate::limiter::algorithm::rate_text(p.count, p.period_ms),
        "backend": backend,
        "key": z.key.source(),
        "size": z.size,
        // For a Redis zone: the states of its local fallback.
        "states": memory.len(),
        "capacity": memory.capacity(),
        "evictions": memory.evictions(),
        "counters": super::plus::limit_req(z),
        "limits": limits,
        "top_keys": z.top.k(),
    })
}

/// The client key the path names, as the zone stores it.
fn client_key(z: &Zone, text: &str) -> Result<Vec<u8>, String> {
    let text = percent_decode(text).ok_or("the key is not valid percent-encoding")?;
    if let Some(hex) = text.strip_prefix(b"hex:") {
        return from_hex(hex).ok_or_else(|| "the key after \"hex:\" is not hexadecimal".into());
    }
    if z.key.source() != "$binary_remote_addr" {
        return Ok(text);
    }
    let shown = String::from_utf8_lossy(&text).into_owned();
    let ip: std::net::IpAddr = shown
        .parse()
        .map_err(|_| format!("zone key is $binary_remote_addr: \"{shown}\" is not an address"))?;
    let ip = z
        .client(ip)
        .ok_or_else(|| format!("{shown} is exempt from this zone"))?;
    Ok(match ip {
        std::net::IpAddr::V4(a) => a.octets().to_vec(),
        std::net::IpAddr::V6(a) => a.octets().to_vec(),
    })
}

/// A stored key as a person reads it: an address for
/// `$binary_remote_addr`, its text if it is UTF-8, else `hex:…`.
fn shown_key(z: &Zone, key: &[u8]) -> String {
    if z.key.source() == "$binary_remote_addr" {
        if let Ok(b) = <[u8; 4]>::try_from(key) {
            return std::net::Ipv4Addr::from(b).to_string();
        }
        if let Ok(b) = <[u8; 16]>::try_from(key) {
            return std::net::Ipv6Addr::from(b).to_string();
        }
    }
    match std::str::from_utf8(key) {
        Ok(s) if !s.bytes().any(|b| b.is_ascii_control()) => s.to_string(),
        _ => {
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            format!("hex:{hex}")
        }
    }
}

/// `GET …/keys/KEY`: the key's state for each `limit_req` line using the
/// zone.
async fn key_state(config: &Config, z: &Zone, key: &[u8], now: u64) -> Answer {
    let p = &z.limiter.policy;
    let (now, state) = match &*z.limiter.store {
        Store::Memory(m) => {
            let cell = m.inspect_raw(key);
            (now, cell)
        }
        Store::Redis(r) => match r.peek(key, p.algorithm).await {
            Ok(found) => found,
            Err(e) => {
                let text = format!("Redis could not answer: {e}");
                return Answer::error(StatusCode::BAD_GATEWAY, text, "RedisUnavailable");
            }
        },
    };
    let mut bursts: Vec<(u64, Vec<&str>)> = Vec::new();
    for (location, burst, _) in uses(config, z) {
        match bursts.iter_mut().find(|(b, _)| *b == burst) {
            Some((_, locs)) => locs.push(location),
            None => bursts.push((burst, vec![location])),
        }
    }
    let limits: Vec<Value> = bursts
        .into_iter()
        .map(|(burst, locations)| {
            let s = match &state {
                Some((cell, log)) => inspect(p, burst, cell, log, now),
                None => fresh(p, burst, now),
            };
            let mut v = state_json(&s);
            v["burst"] = json!(burst / 1000);
            v["locations"] = json!(locations);
            v
        })
        .collect();
    let v = json!({
        "zone": z.name(),
        "key": shown_key(z, key),
        "known": state.is_some(),
        "algorithm": p.algorithm.name(),
        "limits": limits,
    });
    Answer::json(StatusCode::OK, &v)
}

fn state_json(s: &KeyState) -> Value {
    let fields: serde_json::Map<String, Value> = s
        .fields
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "summary": s.summary(),
        "admits_now": s.admits_now,
        "remaining": s.remaining,
        "next_admit_ms": s.next_admit_ms,
        "last_admitted_ms_ago": s.last_admitted_ms_ago,
        "state": fields,
    })
}

/// `DELETE …/keys/KEY`: forgotten, here and (Redis) for every instance.
async fn forget(z: &Zone, key: &[u8]) -> Answer {
    z.top.forget(key);
    let known = match &*z.limiter.store {
        Store::Memory(m) => m.forget(key),
        Store::Redis(r) => {
            // This instance's cached refusal goes too, at once; the other
            // instances' when they hear of it (`r.forget` publishes it:
            // limiter::redis::forgive).
            if let Some(c) = &z.limiter.reject_cache {
                c.forget(key);
            }
            let local = r.local().forget(key);
            match r.forget(key).await {
                Ok(k) => k || local,
                Err(e) => {
                    let text = format!("Redis could not answer: {e}");
                    return Answer::error(StatusCode::BAD_GATEWAY, text, "RedisUnavailable");
                }
            }
        }
    };
    let v = json!({ "zone": z.name(), "key": shown_key(z, key), "forgotten": known });
    Answer::json(StatusCode::OK, &v)
}

/// `GET …/top?k=N` (N up to the zone's `top_keys`).
fn top(z: &Zone, query: &str, now: u64) -> Value {
    let k = query
        .split('&')
        .find_map(|p| p.strip_prefix("k="))
        .and_then(|k| k.parse::<usize>().ok())
        .unwrap_or(z.top.k())
        .min(z.top.k());
    let keys: Vec<Value> = z
        .top
        .top(k, now)
        .into_iter()
        .map(|t| {
            json!({
                "key": shown_key(z, &t.key),
                "count": t.count,
                "error": t.error,
                "rejected": t.rejected,
                "delayed": t.delayed,
            })
        })
        .collect();
    json!({
        "zone": z.name(),
        "window_ms": z.top.window_ms(),
        "tracked": z.top.capacity(),
        "keys": keys,
    })
}

/// `%XX` escapes decoded; `None` for a `%` not followed by two hex digits.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(hex_byte(b.get(i + 1..i + 3)?)?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// `hex:…`'s digits as bytes.
fn from_hex(h: &[u8]) -> Option<Vec<u8>> {
    if h.len() % 2 != 0 {
        return None;
    }
    h.chunks(2).map(hex_byte).collect()
}

/// Two hex digits as a byte (exactly two digits: no sign, no space).
fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |b: u8| (b as char).to_digit(16);
    match pair {
        [h, l] => Some((digit(*h)? * 16 + digit(*l)?) as u8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_decode_only_real_hex_digits() {
        assert_eq!(percent_decode("a%2Fb%20"), Some(b"a/b ".to_vec()));
        assert_eq!(percent_decode("%+1"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(from_hex(b"7f000002"), Some(vec![127, 0, 0, 2]));
        assert_eq!(from_hex(b"+f"), None);
        assert_eq!(from_hex(b"abc"), None);
    }
}
