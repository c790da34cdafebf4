//! `limit_req` and `limit_conn` lists of a level: nginx's `limit_req
//! zone=NAME burst=N nodelay|delay=N` and `limit_conn NAME N` lines.
//!
//! Read here with their zones by name ([`ZoneUse`]); validation resolves
//! the names once every zone is known, with the rules that need the whole
//! list (a zone twice at one level).

use super::read::{Cx, Key, Named, Schema, Val, get, has};
use crate::limiter::Limit;
use toml::de::{DeTable, DeValue};

/// One item of a list as read: the zone it names and its own settings
/// (each `None` when missing or bad: reported already).
pub(in crate::config) struct ZoneUse<T> {
    pub zone: Option<Named>,
    pub settings: Option<T>,
}

/// A `limit_req` item: burst and delay in milli-requests, and where
/// `burst` and `delay` were written (validation checks them against the
/// zone's algorithm).
pub(in crate::config) type LimitUse = ZoneUse<LimitSettings>;

pub(in crate::config) struct LimitSettings {
    pub burst: u64,
    pub delay: u64,
    pub burst_span: Option<std::ops::Range<usize>>,
    pub delay_span: Option<std::ops::Range<usize>>,
}

/// A `limit_conn` item: how many requests of one key at once.
pub(in crate::config) type ConnUse = ZoneUse<u32>;

/// `limit_req = {…}` or a list of them; `None` (reported) for another type.
pub(super) fn limit_reqs(cx: &mut Cx, k: &str, v: &Val) -> Option<Vec<LimitUse>> {
    let items = cx.tables(v, k)?;
    Some(
        items
            .into_iter()
            .map(|item| match cx.table(item, k) {
                Some(t) => limit_req(cx, t, item.span()),
                None => ZoneUse {
                    zone: None,
                    settings: None,
                },
            })
            .collect(),
    )
}

/// A `limit_req` table as read.
struct LimitDraft {
    zone: Option<Named>,
    burst: u64,
    /// `delay = N` and `nodelay = true` with their positions: nginx takes
    /// the later of the two.
    delays: Vec<(usize, u64)>,
    ok: bool,
}

static LIMIT_REQ: Schema<LimitDraft> = Schema::plain(&[
    Key {
        name: "zone",
        read: |cx, k, v, l| l.zone = zone_name(cx, k, v),
    },
    Key {
        name: "burst",
        read: |cx, k, v, l| match cx.int(v, k) {
            Some(n) if (1..=4_000_000).contains(&n) => l.burst = n as u64 * 1000,
            Some(_) => {
                cx.err(
                    v.span(),
                    "invalid burst value: must be between 1 and 4000000",
                );
                l.ok = false;
            }
            None => l.ok = false,
        },
    },
    Key {
        name: "nodelay",
        read: |cx, k, v, l| match cx.bool(v, k) {
            Some(true) => l.delays.push((v.span().start, Limit::NODELAY)),
            Some(false) => {}
            None => l.ok = false,
        },
    },
    Key {
        name: "delay",
        read: |cx, k, v, l| match cx.int(v, k) {
            Some(n) if (1..=1_000_000_000).contains(&n) => {
                l.delays.push((v.span().start, n as u64 * 1000))
            }
            Some(_) => {
                cx.err(v.span(), "invalid delay value: must be at least 1");
                l.ok = false;
            }
            None => l.ok = false,
        },
    },
]);

fn limit_req(cx: &mut Cx, t: &DeTable, span: std::ops::Range<usize>) -> LimitUse {
    LIMIT_REQ.check_unknown(cx, t, "limit_req");
    let mut l = LimitDraft {
        zone: None,
        burst: 0,
        delays: Vec::new(),
        ok: true,
    };
    if !has(t, "zone") {
        cx.err(span, "\"limit_req\" must have a \"zone\"");
    }
    // nginx's `limit_req` takes at most three arguments: zone, burst and
    // one of nodelay/delay. Without burst both fit, and the later wins.
    let nodelay_on = matches!(
        get(t, "nodelay").map(|v| v.get_ref()),
        Some(DeValue::Boolean(true))
    );
    if let (true, Some(d), true) = (has(t, "burst"), get(t, "delay"), nodelay_on) {
        cx.err(
            d.span(),
            "invalid number of arguments in \"limit_req\" directive: with \"burst\", set either \"nodelay\" or \"delay\", not both",
        );
        l.ok = false;
    }
    LIMIT_REQ.read_keys(cx, t, &mut l);
    let delay = l.delays.iter().max().map_or(0, |&(_, d)| d);
    let span = |name| get(t, name).map(|v| v.span());
    ZoneUse {
        zone: l.zone,
        settings: l.ok.then(|| LimitSettings {
            burst: l.burst,
            delay,
            burst_span: span("burst"),
            delay_span: span("delay"),
        }),
    }
}

/// `limit_conn = {…}` or a list of them; `None` (reported) for another type.
pub(super) fn limit_conns(cx: &mut Cx, k: &str, v: &Val) -> Option<Vec<ConnUse>> {
    let items = cx.tables(v, k)?;
    Some(
        items
            .into_iter()
            .map(|item| match cx.table(item, k) {
                Some(t) => limit_conn(cx, t, item.span()),
                None => ZoneUse {
                    zone: None,
                    settings: None,
                },
            })
            .collect(),
    )
}

static LIMIT_CONN: Schema<ConnUse> = Schema::plain(&[
    Key {
        name: "zone",
        read: |cx, k, v, l| l.zone = zone_name(cx, k, v),
    },
    Key {
        name: "conn",
        read: |cx, k, v, l| {
            l.settings = match cx.int(v, k) {
                Some(n) if n <= 0 => {
                    cx.err(v.span(), format!("invalid number of connections \"{n}\""));
                    None
                }
                // nginx keeps the count in 16 bits.
                Some(n) if n > 65_535 => {
                    cx.err(v.span(), "connection limit must be less 65536");
                    None
                }
                Some(n) => Some(n as u32),
                None => None,
            }
        },
    },
]);

fn limit_conn(cx: &mut Cx, t: &DeTable, span: std::ops::Range<usize>) -> ConnUse {
    let mut l = ZoneUse {
        zone: None,
        settings: None,
    };
    LIMIT_CONN.read(cx, t, "limit_conn", &mut l);
    if !has(t, "zone") {
        cx.err(span.clone(), "\"limit_conn\" must have a \"zone\"");
    }
    if !has(t, "conn") {
        cx.err(
            span,
            "\"limit_conn\" must have \"conn\": how many requests of one key may be processed at once",
        );
    }
    l
}

fn zone_name(cx: &mut Cx, k: &str, v: &Val) -> Option<Named> {
    cx.str(v, k).map(|name| Named {
        name: name.to_string(),
        span: v.span(),
    })
}
