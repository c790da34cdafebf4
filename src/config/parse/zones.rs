//! `[zones.NAME]` (nginx's `limit_req_zone KEY zone=NAME:SIZE rate=RATE`)
//! and `[conn_zones.NAME]` (nginx's `limit_conn_zone KEY zone=NAME:SIZE`).
//!
//! Only zones without a problem are kept; the names of the others are
//! kept too, so that a `limit_req` naming one is told the zone has an
//! error rather than that it does not exist.

use super::super::spec::{Backend, ConnZoneSpec, ZoneSpec};
use super::super::values;
use super::read::{Cx, Key, Name, Schema, Val, has};
use crate::limiter::{Algorithm, Policy, algorithm};
use crate::vars::{Context, Template};

/// A zone table as read (either kind); `name` is for the messages.
struct ZoneDraft {
    name: String,
    name_span: std::ops::Range<usize>,
    /// Whether the file has a `[redis]` table (for `backend = "redis"`).
    have_redis: bool,
    key: Option<Template>,
    size: Option<u64>,
    /// `(count, period_ms)` and where `rate` was written (nginx's default
    /// 1r/s when it was not).
    rate: Option<(u64, u64)>,
    rate_span: Option<std::ops::Range<usize>>,
    algorithm: Option<Algorithm>,
    ipv6_prefix: Option<u8>,
    exempt: Vec<ipnet::IpNet>,
    backend: Option<Backend>,
}

const KEY: Key<ZoneDraft> = Key {
    name: "key",
    read: |cx, k, v, z| z.key = cx.template(v, k, Context::Key),
};

const SIZE: Key<ZoneDraft> = Key {
    name: "size",
    read: |cx, k, v, z| z.size = zone_size(cx, k, v, &z.name),
};

/// `[zones.NAME]`'s keys.
static ZONE: Schema<ZoneDraft> = Schema::plain(&[
    KEY,
    SIZE,
    Key {
        name: "rate",
        read: |cx, k, v, z| {
            z.rate_span = Some(v.span());
            z.rate = cx.scalar_text(v, k).and_then(|text| {
                algorithm::parse_rate(&text)
                    .map_err(|e| cx.err(v.span(), e))
                    .ok()
            })
        },
    },
    Key {
        name: "algorithm",
        read: |cx, k, v, z| {
            z.algorithm = cx.str(v, k).and_then(|name| {
                let found = Algorithm::from_name(name);
                if found.is_none() {
                    let names: Vec<_> = Algorithm::ALL
                        .iter()
                        .map(|a| format!("\"{}\"", a.name()))
                        .collect();
                    cx.err(
                        v.span(),
                        format!(
                            "unknown algorithm \"{name}\" (expected one of {})",
                            names.join(", ")
                        ),
                    );
                }
                found
            })
        },
    },
    Key {
        name: "ipv6_prefix",
        read: |cx, k, v, z| {
            z.ipv6_prefix = match cx.int(v, k) {
                Some(n) if (1..=128).contains(&n) => Some(n as u8),
                Some(_) => {
                    cx.err(v.span(), "\"ipv6_prefix\" must be between 1 and 128");
                    None
                }
                None => None,
            }
        },
    },
    Key {
        name: "exempt",
        read: |cx, k, v, z| z.exempt = cx.cidrs(v, k),
    },
    Key {
        name: "backend",
        read: |cx, k, v, z| z.backend = backend(cx, k, v, z),
    },
]);

/// `[conn_zones.NAME]`'s keys.
static CONN_ZONE: Schema<ZoneDraft> = Schema::plain(&[KEY, SIZE]);

fn backend(cx: &mut Cx, k: &str, v: &Val, z: &ZoneDraft) -> Option<Backend> {
    let name = &z.name;
    match cx.str(v, k)? {
        "memory" => Some(Backend::Memory),
        "redis" if !z.have_redis => {
            cx.err(
                v.span(),
                format!("zone \"{name}\" has backend = \"redis\" but there is no [redis] table (add [redis] with url = \"redis://HOST:PORT\")"),
            );
            None
        }
        "redis" if name.contains(['{', '}']) => {
            cx.err(
                z.name_span.clone(),
                format!("zone \"{name}\" cannot use backend = \"redis\": \"{{\" and \"}}\" in its name would break the cluster hash tag"),
            );
            None
        }
        "redis" => Some(Backend::Redis),
        other => {
            cx.err(
                v.span(),
                format!("invalid backend \"{other}\" (expected \"memory\" or \"redis\")"),
            );
            None
        }
    }
}

/// A zone's size: nginx's syntax, at least 32k.
fn zone_size(cx: &mut Cx, k: &str, v: &Val, zone: &str) -> Option<u64> {
    let text = cx.scalar_text(v, k)?;
    match values::parse_size(&text) {
        Ok(n) if n < values::MIN_ZONE_SIZE => {
            cx.err(
                v.span(),
                format!(
                    "zone \"{zone}\" is too small: size \"{text}\" is below the minimum of 32k"
                ),
            );
            None
        }
        Ok(n) => Some(n),
        Err(e) => {
            cx.err(v.span(), e);
            None
        }
    }
}

/// Read one zone table of either kind: `what` is `[zones.NAME]` or
/// `[conn_zones.NAME]`. `key` and `size` are required.
fn read_zone(
    cx: &mut Cx,
    name: &Name,
    t: &toml::de::DeTable,
    schema: &Schema<ZoneDraft>,
    what: &str,
    have_redis: bool,
) -> ZoneDraft {
    let mut z = ZoneDraft {
        name: name.get_ref().to_string(),
        name_span: name.span(),
        have_redis,
        key: None,
        size: None,
        // nginx: rate absent = 1r/s.
        rate: Some((1, 1000)),
        rate_span: None,
        algorithm: Some(Algorithm::LeakyBucket),
        ipv6_prefix: None,
        exempt: Vec::new(),
        backend: Some(Backend::Memory),
    };
    schema.read_keys(cx, t, &mut z);
    if !has(t, "key") {
        cx.err(name.span(), format!("{what} must have a \"key\""));
    }
    if !has(t, "size") {
        cx.err(
            name.span(),
            format!("{what} must have a \"size\" (e.g. \"10m\")"),
        );
    }
    z
}

/// `[zones]`: the zones without a problem; the names of the others go to
/// `broken`.
pub(super) fn zones(
    cx: &mut Cx,
    k: &str,
    v: &Val,
    have_redis: bool,
    broken: &mut Vec<String>,
) -> Vec<ZoneSpec> {
    let mut out = Vec::new();
    let Some(t) = cx.table(v, k) else { return out };
    for (name, zv) in t.iter() {
        let Some(zt) = cx.table(zv, name.get_ref()) else {
            broken.push(name.get_ref().to_string());
            continue;
        };
        let what = format!("[zones.{}]", name.get_ref());
        ZONE.check_unknown(cx, zt, &what);
        let z = read_zone(cx, name, zt, &ZONE, &what, have_redis);
        let policy = policy(cx, &z);
        if let (Some(key), Some(size), Some(policy), Some(backend)) =
            (z.key, z.size, policy, z.backend)
        {
            out.push(ZoneSpec {
                name: z.name,
                key,
                ipv6_prefix: z.ipv6_prefix,
                exempt: z.exempt,
                size,
                policy,
                backend,
            });
        } else {
            broken.push(name.get_ref().to_string());
        }
    }
    out
}

/// A zone's algorithm with its rate; the leaky bucket needs at least one
/// milli-request per second (nginx's unit), so `1r/h` is for the others.
/// (Every other failure of `Policy::new` is a rate `parse_rate` refused.)
fn policy(cx: &mut Cx, z: &ZoneDraft) -> Option<Policy> {
    let (algorithm, (count, period)) = (z.algorithm?, z.rate?);
    let policy = Policy::new(algorithm, count, period);
    if policy.is_none() {
        let span = z.rate_span.clone().unwrap_or_else(|| z.name_span.clone());
        cx.err(
            span,
            format!(
                "zone \"{}\": rate \"{}\" is too slow for algorithm \"leaky_bucket\" (nginx's, the default), which counts whole milli-requests per second: its slowest rate is 1r/1000s (4r/h); raise the rate, or choose \"token_bucket\", \"gcra\" or a window, which take any rate",
                z.name,
                algorithm::rate_text(count, period)
            ),
        );
    }
    policy
}

/// `[conn_zones]`: the conn zones without a problem. nginx keeps both kinds
/// of zone in one namespace (a shared memory zone has one use), so a name
/// of `req` (the `[zones]` read) cannot be a conn zone too: a file
/// translated from or to nginx stays valid. Such a table is not read
/// further.
pub(super) fn conn_zones(cx: &mut Cx, k: &str, v: &Val, req: &[ZoneSpec]) -> Vec<ConnZoneSpec> {
    let mut out = Vec::new();
    let Some(t) = cx.table(v, k) else { return out };
    for (name, zv) in t.iter() {
        let Some(zt) = cx.table(zv, name.get_ref()) else {
            continue;
        };
        let what = format!("[conn_zones.{}]", name.get_ref());
        CONN_ZONE.check_unknown(cx, zt, &what);
        if req.iter().any(|z| z.name == name.get_ref().as_ref()) {
            cx.err(
                name.span(),
                format!(
                    "the shared memory zone \"{}\" is already declared for a different use (a [zones] table, for limit_req, has this name)",
                    name.get_ref()
                ),
            );
            continue;
        }
        let z = read_zone(cx, name, zt, &CONN_ZONE, &what, false);
        if let (Some(key), Some(size)) = (z.key, z.size) {
            out.push(ConnZoneSpec {
                name: z.name,
                key,
                size,
            });
        }
    }
    out
}
