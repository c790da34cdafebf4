//! Parse: TOML text → [`Draft`], every problem of every table reported at
//! once. Pure: the text is all it reads (files the text names are checked
//! by the file step, [`super::files`]).
//!
//! We walk toml's spanned document tree by hand instead of deriving serde
//! types: serde stops at the first unknown key or wrong type, and users
//! fixing a file want the whole list, each with its line and column. Each
//! section is one schema table ([`read::Schema`]): its keys in the order
//! messages list them, each with the function that reads it. What needs
//! more than one section (zones named by levels, a location's `proxy_pass`
//! from its server, duplicates) is left to validation.

/// A key of the level settings, read by `$read` into the section's
/// [`level::LevelDraft`].
macro_rules! level_key {
    ($name:literal, $read:path) => {
        $crate::config::parse::read::Key {
            name: $name,
            read: |cx, k, v, s| $read(cx, k, v, $crate::config::parse::level::Leveled::level(s)),
        }
    };
}

mod compress;
mod headers;
pub(super) mod level;
pub(super) mod limits;
mod quic;
pub(super) mod read;
pub(super) mod redis;
pub(super) mod servers;
mod upstreams;
pub(super) mod vars;
mod zones;

use super::error::Diagnostics;
use super::spec::{AdminSpec, ConnZoneSpec, OpsSpec, UpstreamSpec, ZoneSpec};
use super::values;
use crate::vars::{Context, LogEscape, Template};
use level::{LevelDraft, Leveled};
use read::{Cx, Key, Schema, Val};
use redis::RedisDraft;
use servers::ServerDraft;
use toml::de::DeTable;

/// A file as read: what parsed, with what failed left out or marked
/// [`read::Reported`], for the file step and validation to finish.
pub(super) struct Draft {
    pub http: LevelDraft,
    pub log_format: Option<Template>,
    /// The zones without a problem.
    pub zones: Vec<ZoneSpec>,
    /// The names of the `[zones]` tables with one (reported).
    pub broken_zones: Vec<String>,
    pub conn_zones: Vec<ConnZoneSpec>,
    /// `None`: the file has no `servers` at all.
    pub servers: Option<Vec<ServerDraft>>,
    pub ops: OpsSpec,
    pub redis: Option<RedisDraft>,
    /// `[upstreams.NAME]` without a problem.
    pub upstreams: Vec<UpstreamSpec>,
    /// The names of every `[upstreams]` table (a `proxy_pass` naming a
    /// broken one still names a group).
    pub upstream_names: Vec<String>,
    /// `[admin] token_file`, for the file step to read.
    pub admin_token_file: Option<TokenFile>,
    /// `[maps]` and `[geos]`.
    pub vars: vars::VarsDraft,
}

/// The top level while it is read.
struct Top {
    /// The configuration file's name: TLS files are relative to it.
    file: String,
    /// Whether the file has a `[redis]` table (zones may use it).
    have_redis: bool,
    draft: Draft,
}

impl Leveled for Top {
    fn level(&mut self) -> &mut LevelDraft {
        &mut self.draft.http
    }
}

/// The top level's keys. Read in this order: `[zones]` before
/// `[conn_zones]`, which may not reuse their names.
static TOP: Schema<Top> = Schema {
    own: &[
        Key {
            name: "zones",
            read: |cx, k, v, t| {
                t.draft.zones = zones::zones(cx, k, v, t.have_redis, &mut t.draft.broken_zones)
            },
        },
        Key {
            name: "servers",
            read: |cx, k, v, t| t.draft.servers = Some(servers::servers(cx, k, v, &t.file)),
        },
        level_key!("client_header_timeout", level::client_header_timeout),
        Key {
            name: "log_format",
            read: |cx, k, v, t| t.draft.log_format = cx.template(v, k, Context::Log),
        },
        level_key!("real_ip", level::real_ip),
        level_key!("keepalive_timeout", level::keepalive_timeout),
        level_key!("send_timeout", level::send_timeout),
        level_key!("underscores_in_headers", level::underscores_in_headers),
        level_key!("ignore_invalid_headers", level::ignore_invalid_headers),
        level_key!(
            "large_client_header_buffers",
            level::large_client_header_buffers
        ),
        Key {
            name: "pid_file",
            read: |cx, k, v, t| match cx.str(v, k) {
                Some("") => cx.err(v.span(), "\"pid_file\" must be a file path"),
                Some(s) => t.draft.ops.pid_file = Some(s.into()),
                None => {}
            },
        },
        Key {
            name: "watch",
            read: |cx, k, v, t| t.draft.ops.watch = cx.bool(v, k).unwrap_or(false),
        },
        Key {
            name: "shutdown_timeout",
            read: |cx, k, v, t| t.draft.ops.shutdown_timeout = cx.duration(v, k),
        },
        Key {
            name: "error_log_level",
            read: |cx, k, v, t| t.draft.ops.error_log_level = cx.log_level(v, k),
        },
        Key {
            name: "log_format_escape",
            read: |cx, k, v, t| log_format_escape(cx, k, v, &mut t.draft.ops),
        },
        Key {
            name: "admin",
            read: |cx, k, v, t| admin(cx, k, v, &mut t.draft),
        },
        Key {
            name: "redis",
            read: |cx, k, v, t| t.draft.redis = redis::redis(cx, k, v, &t.file),
        },
        Key {
            name: "conn_zones",
            read: |cx, k, v, t| t.draft.conn_zones = zones::conn_zones(cx, k, v, &t.draft.zones),
        },
        Key {
            name: "maps",
            read: |cx, k, v, t| t.draft.vars.maps(cx, k, v),
        },
        Key {
            name: "geos",
            read: |cx, k, v, t| t.draft.vars.geos(cx, k, v),
        },
        Key {
            name: "upstreams",
            read: |cx, k, v, t| {
                if let toml::de::DeValue::Table(names) = v.get_ref() {
                    t.draft.upstream_names =
                        names.iter().map(|(n, _)| n.get_ref().to_string()).collect();
                }
                t.draft.upstreams = upstreams::upstreams(cx, k, v)
            },
        },
        Key {
            name: "worker_connections",
            read: |cx, k, v, t| worker_connections(cx, k, v, &mut t.draft.ops),
        },
    ],
    shared: Top::LEVEL,
};

/// Parse a whole file; `file` names it (TLS paths are relative to it).
/// `None` when the text is not TOML (the syntax errors are reported: the
/// rest cannot be looked at).
pub(super) fn parse(file: &str, text: &str, d: &mut Diagnostics) -> Option<Draft> {
    let (doc, syntax) = DeTable::parse_recoverable(text);
    let doc_names = vars::names(doc.get_ref());
    let mut cx = Cx {
        d,
        names: doc_names.iter().map(|n| n.name.clone()).collect(),
    };
    if !syntax.is_empty() {
        for e in syntax {
            let span = e.span().unwrap_or(0..0);
            cx.err(span, e.message().trim().to_string());
        }
        return None;
    }
    let doc = doc.get_ref();
    let mut top = Top {
        file: file.to_string(),
        have_redis: read::has(doc, "redis"),
        draft: Draft {
            http: LevelDraft::default(),
            log_format: None,
            zones: Vec::new(),
            broken_zones: Vec::new(),
            conn_zones: Vec::new(),
            servers: None,
            ops: OpsSpec::default(),
            redis: None,
            upstreams: Vec::new(),
            upstream_names: Vec::new(),
            admin_token_file: None,
            vars: vars::VarsDraft::new(doc_names),
        },
    };
    TOP.read(&mut cx, doc, "the top level", &mut top);
    // `error_log_level` is `error_log = "stderr LEVEL"` for short: both at
    // once would say two things of one log.
    let both = top.draft.ops.error_log_level.is_some() && top.draft.http.level.error_log.is_some();
    if let (true, Some(v)) = (both, doc.get("error_log_level")) {
        cx.err(
            v.span(),
            "\"error_log_level\" and \"error_log\" both set at the top level: \
             give the level in \"error_log\" (e.g. \"stderr info\")",
        );
    }
    Some(top.draft)
}

fn log_format_escape(cx: &mut Cx, k: &str, v: &Val, ops: &mut OpsSpec) {
    match cx.str(v, k) {
        Some("default") => ops.log_escape = LogEscape::Default,
        Some("json") => ops.log_escape = LogEscape::Json,
        Some("none") => ops.log_escape = LogEscape::None,
        Some(s) => cx.err(
            v.span(),
            format!("invalid log_format_escape \"{s}\" (expected default, json or none)"),
        ),
        None => {}
    }
}

/// nginx's own maximum is the descriptor limit; a million per worker thread
/// is far beyond any real one and keeps the arithmetic small.
fn worker_connections(cx: &mut Cx, k: &str, v: &Val, ops: &mut OpsSpec) {
    match cx.int(v, k) {
        Some(n) if (1..=1_000_000).contains(&n) => ops.worker_connections = Some(n as usize),
        Some(_) => cx.err(
            v.span(),
            "\"worker_connections\": value must be between 1 and 1000000",
        ),
        None => {}
    }
}

/// `[admin]` while it is read.
#[derive(Default)]
struct AdminDraft {
    listen: Option<std::net::SocketAddr>,
    allow: Vec<ipnet::IpNet>,
    top_keys: Option<usize>,
}

/// `[admin]`'s keys.
static ADMIN: Schema<(AdminDraft, Option<TokenFile>)> = Schema::plain(&[
    Key {
        name: "listen",
        read: |cx, k, v, (a, _)| {
            if let Some(s) = cx.str(v, k) {
                match values::parse_listen(s) {
                    Ok(l) => a.listen = Some(l),
                    Err(e) => cx.err(v.span(), e),
                }
            }
        },
    },
    Key {
        name: "allow",
        read: |cx, k, v, (a, _)| a.allow = cx.cidrs(v, k),
    },
    Key {
        name: "token_file",
        read: |cx, k, v, (_, t)| match cx.str(v, k) {
            Some("") => cx.err(v.span(), "\"token_file\" must be a file path"),
            Some(s) => {
                *t = Some(TokenFile {
                    path: s.into(),
                    span: v.span(),
                })
            }
            None => {}
        },
    },
    Key {
        name: "top_keys",
        read: |cx, k, v, (a, _)| match cx.int(v, k) {
            Some(n) if (0..=1000).contains(&n) => a.top_keys = Some(n as usize),
            Some(_) => cx.err(v.span(), "\"top_keys\": value must be between 0 and 1000"),
            None => {}
        },
    },
]);

/// `[admin] token_file`, read by the file step.
pub(super) struct TokenFile {
    pub path: std::path::PathBuf,
    pub span: std::ops::Range<usize>,
}

/// `[admin]`: `/metrics`, `/healthz`, the status API and the dashboard.
fn admin(cx: &mut Cx, k: &str, v: &Val, draft: &mut Draft) {
    let Some(t) = cx.table(v, k) else { return };
    let mut read = (AdminDraft::default(), None);
    ADMIN.read(cx, t, "[admin]", &mut read);
    let (a, token_file) = read;
    let Some(listen) = a.listen else {
        if !read::has(t, "listen") {
            cx.err(v.span(), "[admin] must have \"listen\"");
        }
        return;
    };
    draft.ops.admin = Some(AdminSpec {
        listen,
        allow: a.allow,
        token: None,
        top_keys: a.top_keys.unwrap_or(AdminSpec::DEFAULT_TOP_KEYS),
    });
    draft.admin_token_file = token_file;
}
