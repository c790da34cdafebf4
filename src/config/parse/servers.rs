//! `[[servers]]` and their `[[servers.locations]]`, with a location's
//! `return`.
//!
//! What depends on more than one table (a location's `proxy_pass` from its
//! server, duplicate paths and listen addresses) is validation's: here
//! each table is read on its own.

use super::super::spec::PathMatch;
use super::super::values::{self, Listen, PathRule, ProxyPass, ServerName};
use super::level::{self, LevelDraft, Leveled};
use super::read::{Cx, Key, Reported, Schema, Val, has};
use super::redis::{FileRef, file};
use crate::respond::ReturnSpec;
use crate::vars::Context;
use std::ops::Range;
use toml::de::DeValue;

/// A `[[servers]]` table as read.
#[derive(Default)]
pub(in crate::config) struct ServerDraft {
    /// The address and its flags, and the span of its value; `None` when
    /// missing or bad (reported).
    pub listen: Option<(Listen, Range<usize>)>,
    /// The first name as written (`$server_name`, the logs' `server:`).
    pub server_name: String,
    pub names: Vec<ServerName>,
    /// The span of `server_name`'s value (conflicting names are reported there).
    pub names_span: Option<Range<usize>>,
    /// The directory of the configuration file: certificate paths are
    /// relative to it.
    pub dir: std::path::PathBuf,
    pub ssl_certificate: Option<Result<FileRef, Reported>>,
    pub ssl_certificate_key: Option<Result<FileRef, Reported>>,
    pub ssl_protocols: Option<Result<Vec<crate::tls::Protocol>, Reported>>,
    /// The certificate and key, read by the file step (`None`: not both
    /// named, or not read yet).
    pub certificate: Option<Result<crate::tls::Certificate, Reported>>,
    /// `http2 = true | false`.
    pub http2: Option<bool>,
    /// `http3 = true | false` and `quic_retry = true | false`.
    pub http3: Option<bool>,
    pub quic_retry: Option<bool>,
    /// `ssl_early_data = true | false`.
    pub ssl_early_data: Option<bool>,
    pub proxy_pass: Option<Result<ProxyPass, Reported>>,
    /// Where `proxy_pass` was written.
    pub proxy_pass_span: Option<Range<usize>>,
    pub level: LevelDraft,
    pub locations: Vec<LocationDraft>,
}

impl Leveled for ServerDraft {
    fn level(&mut self) -> &mut LevelDraft {
        &mut self.level
    }
}

/// A `[[servers.locations]]` table as read. One without a usable `path`
/// is kept too: validation still resolves the zones its level names.
pub(in crate::config) struct LocationDraft {
    pub path: Result<PathDraft, Reported>,
    pub level: LevelDraft,
    /// The location's own `proxy_pass`, and the span of its value.
    pub proxy_pass: Option<(Result<ProxyPass, Reported>, Range<usize>)>,
    pub ret: Option<Result<ReturnSpec, Reported>>,
}

/// A location's `path`.
pub(in crate::config) struct PathDraft {
    /// As written, e.g. `"= /api"`.
    pub text: String,
    pub span: Range<usize>,
    /// The rule as written, to compare locations.
    pub rule: PathRule,
    /// The rule to match with: a regex compiled (or reported).
    pub matcher: Result<PathMatch, Reported>,
}

impl Leveled for LocationDraft {
    fn level(&mut self) -> &mut LevelDraft {
        &mut self.level
    }
}

/// `[[servers]]`'s keys.
static SERVER: Schema<ServerDraft> = Schema {
    own: &[
        Key {
            name: "listen",
            read: |cx, k, v, s| s.listen = read_listens(cx, k, v).map(|a| (a, v.span())),
        },
        Key {
            name: "server_name",
            read: |cx, k, v, s| {
                let text = cx.str(v, k).unwrap_or("");
                s.server_name = text.split_ascii_whitespace().next().unwrap_or("").into();
                s.names_span = Some(v.span());
                match values::parse_server_names(text) {
                    Ok(names) => s.names = names,
                    Err(e) => cx.err(v.span(), e),
                }
            },
        },
        Key {
            name: "ssl_certificate",
            read: |cx, _, v, s| s.ssl_certificate = Some(file(cx, "ssl_certificate", v, &s.dir)),
        },
        Key {
            name: "ssl_certificate_key",
            read: |cx, _, v, s| {
                s.ssl_certificate_key = Some(file(cx, "ssl_certificate_key", v, &s.dir))
            },
        },
        Key {
            name: "ssl_protocols",
            read: |cx, k, v, s| {
                let read = cx.scalar_list(v, k).ok_or(Reported).and_then(|words| {
                    crate::tls::parse_protocols(&words).map_err(|e| {
                        cx.err(v.span(), e);
                        Reported
                    })
                });
                s.ssl_protocols = Some(read);
            },
        },
        Key {
            name: "http2",
            read: |cx, k, v, s| s.http2 = cx.bool(v, k),
        },
        Key {
            name: "http3",
            read: |cx, k, v, s| s.http3 = cx.bool(v, k),
        },
        Key {
            name: "quic_retry",
            read: |cx, k, v, s| s.quic_retry = cx.bool(v, k),
        },
        Key {
            name: "ssl_early_data",
            read: |cx, k, v, s| s.ssl_early_data = cx.bool(v, k),
        },
        Key {
            name: "proxy_pass",
            read: |cx, k, v, s| {
                if duplicate_pass(cx, k, v, s.proxy_pass.is_some()) {
                    s.proxy_pass_span = Some(v.span());
                    s.proxy_pass = Some(proxy_pass(cx, k, v))
                }
            },
        },
        Key {
            name: "grpc_pass",
            read: |cx, k, v, s| {
                if duplicate_pass(cx, k, v, s.proxy_pass.is_some()) {
                    s.proxy_pass_span = Some(v.span());
                    s.proxy_pass = Some(grpc_pass(cx, k, v))
                }
            },
        },
        Key {
            name: "locations",
            read: |cx, k, v, s| s.locations = locations(cx, k, v),
        },
        level_key!("client_header_timeout", level::client_header_timeout),
        level_key!("real_ip", level::real_ip),
        level_key!("keepalive_timeout", level::keepalive_timeout),
        level_key!("send_timeout", level::send_timeout),
        level_key!("underscores_in_headers", level::underscores_in_headers),
        level_key!("ignore_invalid_headers", level::ignore_invalid_headers),
        level_key!(
            "large_client_header_buffers",
            level::large_client_header_buffers
        ),
    ],
    shared: ServerDraft::LEVEL,
};

/// `[[servers.locations]]`'s keys. A location without a usable `path` is
/// not read for its `return` (as it always was); its other keys are.
static LOCATION: Schema<LocationDraft> = Schema {
    own: &[
        Key {
            name: "path",
            read: |cx, k, v, l| l.path = path(cx, k, v),
        },
        Key {
            name: "proxy_pass",
            read: |cx, k, v, l| {
                if duplicate_pass(cx, k, v, l.proxy_pass.is_some()) {
                    l.proxy_pass = Some((proxy_pass(cx, k, v), v.span()))
                }
            },
        },
        Key {
            name: "grpc_pass",
            read: |cx, k, v, l| {
                if duplicate_pass(cx, k, v, l.proxy_pass.is_some()) {
                    l.proxy_pass = Some((grpc_pass(cx, k, v), v.span()))
                }
            },
        },
        Key {
            name: "return",
            read: |cx, k, v, l| {
                if l.path.is_ok() {
                    l.ret = Some(read_return(cx, k, v));
                }
            },
        },
    ],
    shared: LocationDraft::LEVEL,
};

fn proxy_pass(cx: &mut Cx, k: &str, v: &Val) -> Result<ProxyPass, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    values::parse_proxy_pass(s).map_err(|e| {
        cx.err(v.span(), e);
        Reported
    })
}

fn grpc_pass(cx: &mut Cx, k: &str, v: &Val) -> Result<ProxyPass, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    values::parse_grpc_pass(s).map_err(|e| {
        cx.err(v.span(), e);
        Reported
    })
}

/// `proxy_pass` and `grpc_pass` are one content handler: a level has one
/// (nginx: "directive is duplicate"). `true` when `k` may be read.
fn duplicate_pass(cx: &mut Cx, k: &str, v: &Val, already: bool) -> bool {
    if already {
        cx.err(
            v.span(),
            format!("\"{k}\" directive is duplicate (proxy_pass and grpc_pass: one per level)"),
        );
    }
    !already
}

/// The `servers` array.
pub(super) fn servers(cx: &mut Cx, k: &str, v: &Val, file: &str) -> Vec<ServerDraft> {
    let dir = std::path::Path::new(file)
        .parent()
        .unwrap_or(std::path::Path::new(""));
    cx.array_of_tables(v, k, "[[servers]]")
        .into_iter()
        .map(|(t, span)| {
            let mut s = ServerDraft {
                dir: dir.to_path_buf(),
                ..ServerDraft::default()
            };
            SERVER.read(cx, t, "[[servers]]", &mut s);
            if !has(t, "listen") {
                cx.err(
                    span.start..span.start + 1,
                    "[[servers]] must have \"listen\"",
                );
            }
            s
        })
        .collect()
}

/// A server's `locations` array.
fn locations(cx: &mut Cx, k: &str, v: &Val) -> Vec<LocationDraft> {
    cx.array_of_tables(v, k, "[[servers.locations]]")
        .into_iter()
        .map(|(t, span)| location(cx, t, span))
        .collect()
}

/// One location.
fn location(cx: &mut Cx, t: &toml::de::DeTable, span: Range<usize>) -> LocationDraft {
    let mut l = LocationDraft {
        path: Err(Reported),
        level: LevelDraft::default(),
        proxy_pass: None,
        ret: None,
    };
    LOCATION.read(cx, t, "[[servers.locations]]", &mut l);
    if !has(t, "path") {
        cx.err(
            span.start..span.start + 1,
            "[[servers.locations]] must have \"path\"",
        );
    }
    l
}

/// A location's path, with its regex compiled.
fn path(cx: &mut Cx, k: &str, v: &Val) -> Result<PathDraft, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    let rule = values::parse_path(s).map_err(|e| {
        cx.err(v.span(), e);
        Reported
    })?;
    let matcher = match &rule {
        PathRule::Exact(p) => Ok(PathMatch::Exact(p.clone())),
        PathRule::Prefix { prefix, stop_regex } => Ok(PathMatch::Prefix {
            prefix: prefix.clone(),
            stop_regex: *stop_regex,
        }),
        PathRule::Regex { pattern, caseless } => regex::RegexBuilder::new(pattern)
            .case_insensitive(*caseless)
            .build()
            .map(PathMatch::Regex)
            .map_err(|e| {
                cx.err(
                    v.span(),
                    format!(
                        "invalid regex \"{pattern}\": {}",
                        e.to_string().lines().last().unwrap_or("")
                    ),
                );
                Reported
            }),
    };
    Ok(PathDraft {
        text: s.to_string(),
        span: v.span(),
        rule,
        matcher,
    })
}

/// `return`'s keys, read up to the first bad value (as they always were:
/// a bad `status` hides the problems of `body` and `headers`).
static RETURN: Schema<ReturnDraft> = Schema::plain(&[
    Key {
        name: "status",
        read: |cx, k, v, r| r.status = cx.status(v, k, 100..=999).ok_or(Reported),
    },
    Key {
        name: "body",
        read: |cx, k, v, r| {
            if r.status.is_ok() {
                r.body = cx
                    .template(v, k, Context::Response)
                    .map(Some)
                    .ok_or(Reported);
            }
        },
    },
    Key {
        name: "headers",
        read: |cx, _, v, r| {
            if r.status.is_ok() && r.body.is_ok() {
                r.headers = level::headers(cx, v);
            }
        },
    },
]);

/// `return = { status, body, headers }` as read.
struct ReturnDraft {
    status: Result<u16, Reported>,
    body: Result<Option<crate::vars::Template>, Reported>,
    headers: Vec<(http::HeaderName, crate::vars::Template)>,
}

fn read_return(cx: &mut Cx, k: &str, v: &Val) -> Result<ReturnSpec, Reported> {
    let t = cx.table(v, k).ok_or(Reported)?;
    let mut r = ReturnDraft {
        status: Ok(200),
        body: Ok(None),
        headers: Vec::new(),
    };
    RETURN.read(cx, t, "return", &mut r);
    Ok(ReturnSpec {
        status: r.status?,
        body: r.body?,
        headers: r.headers,
    })
}

/// `listen`: one string, or an array of them (nginx's `listen` lines),
/// merged by [`values::merge_listens`]; each entry's error at the entry.
fn read_listens(cx: &mut Cx<'_>, k: &str, v: &Val) -> Option<Listen> {
    let items: Vec<&Val> = match v.get_ref() {
        DeValue::Array(items) => items.iter().collect(),
        _ => vec![v],
    };
    let mut entries = Vec::new();
    for item in items {
        let text = cx.str(item, k)?;
        match values::parse_listen_flags(text) {
            Ok(l) => entries.push(l),
            Err(e) => {
                cx.err(item.span(), e);
                return None;
            }
        }
    }
    values::merge_listens(&entries)
        .map_err(|e| cx.err(v.span(), e))
        .ok()
}
