//! `[redis]`: where zones with `backend = "redis"` keep their states: one
//! server (`url`), a Redis Cluster (`cluster`, seed nodes) or the master
//! Redis Sentinel names (`sentinel` + `master_name`); exactly one of the
//! three, which this step settles (it sees every key of the table).
//!
//! The TLS files are only named here (resolved against the configuration
//! file's directory): reading them is the file step's work (see
//! [`crate::config::files`]), and whether they fit the url is validation's,
//! once it is known which of them could be read.

use super::read::{Cx, Key, Reported, Schema, Val, get, type_name};
use crate::limiter::redis::RedisServers;
use crate::limiter::{OnError, RedisConfig};
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;
use toml::de::{DeTable, DeValue};

/// A file the configuration names, and where.
pub(in crate::config) struct FileRef {
    /// The key naming it, for the messages.
    pub key: &'static str,
    pub path: PathBuf,
    pub span: Range<usize>,
}

/// A TLS file key: `None` when not set.
pub(in crate::config) type TlsFile = Option<Result<FileRef, Reported>>;

/// `[redis]` as read.
pub(in crate::config) struct RedisDraft {
    /// The table, for the problems of the table as a whole.
    pub span: Range<usize>,
    /// The directory of the configuration file: TLS paths are relative to it.
    dir: PathBuf,
    url: Option<Result<String, Reported>>,
    cluster: Option<Result<Vec<String>, Reported>>,
    sentinel: Option<Result<Vec<String>, Reported>>,
    master_name: Option<Result<String, Reported>>,
    /// What `url`, `cluster` and `sentinel` make together (set once read).
    pub servers: Result<RedisServers, Reported>,
    pub password: Result<Option<String>, Reported>,
    pub sentinel_password: Result<Option<String>, Reported>,
    pub timeout: Result<Duration, Reported>,
    pub on_error: Result<OnError, Reported>,
    pub prefix: Result<String, Reported>,
    pub tls_ca: TlsFile,
    pub tls_cert: TlsFile,
    pub tls_key: TlsFile,
    /// `reject_cache` (default on).
    pub reject_cache: Result<bool, Reported>,
    /// `connections` (per server; default 1).
    pub connections: Result<usize, Reported>,
}

impl RedisDraft {
    /// The TLS files, for the steps that check them.
    pub(crate) fn tls_files(&mut self) -> [&mut TlsFile; 3] {
        [&mut self.tls_ca, &mut self.tls_cert, &mut self.tls_key]
    }
}

static REDIS: Schema<RedisDraft> = Schema::plain(&[
    Key {
        name: "url",
        read: |cx, k, v, r| r.url = Some(url(cx, k, v)),
    },
    Key {
        name: "cluster",
        read: |cx, k, v, r| r.cluster = Some(urls(cx, k, v)),
    },
    Key {
        name: "sentinel",
        read: |cx, k, v, r| r.sentinel = Some(urls(cx, k, v)),
    },
    Key {
        name: "master_name",
        read: |cx, k, v, r| r.master_name = Some(master_name(cx, k, v)),
    },
    Key {
        name: "password",
        read: |cx, k, v, r| r.password = cx.str(v, k).map(|s| Some(s.to_string())).ok_or(Reported),
    },
    Key {
        name: "sentinel_password",
        read: |cx, k, v, r| {
            r.sentinel_password = cx.str(v, k).map(|s| Some(s.to_string())).ok_or(Reported)
        },
    },
    Key {
        name: "timeout",
        read: |cx, k, v, r| {
            r.timeout = match cx.duration(v, k) {
                Some(d) if d.is_zero() => {
                    cx.err(v.span(), "\"timeout\" must be at least 1ms");
                    Err(Reported)
                }
                Some(d) => Ok(d),
                None => Err(Reported),
            }
        },
    },
    Key {
        name: "on_error",
        read: |cx, k, v, r| r.on_error = on_error(cx, k, v),
    },
    Key {
        name: "prefix",
        read: |cx, k, v, r| r.prefix = prefix(cx, k, v),
    },
    Key {
        name: "tls_ca",
        read: |cx, k, v, r| r.tls_ca = Some(file(cx, k, v, &r.dir)),
    },
    Key {
        name: "tls_cert",
        read: |cx, k, v, r| r.tls_cert = Some(file(cx, k, v, &r.dir)),
    },
    Key {
        name: "tls_key",
        read: |cx, k, v, r| r.tls_key = Some(file(cx, k, v, &r.dir)),
    },
    Key {
        name: "reject_cache",
        read: |cx, k, v, r| r.reject_cache = cx.bool(v, k).ok_or(Reported),
    },
    Key {
        name: "connections",
        read: |cx, k, v, r| {
            r.connections = match cx.int(v, k) {
                Some(n) if (1..=RedisConfig::MAX_CONNECTIONS as i128).contains(&n) => {
                    Ok(n as usize)
                }
                Some(_) => {
                    cx.err(
                        v.span(),
                        format!(
                            "\"connections\": value must be between 1 and {}",
                            RedisConfig::MAX_CONNECTIONS
                        ),
                    );
                    Err(Reported)
                }
                None => Err(Reported),
            }
        },
    },
]);

fn url(cx: &mut Cx, k: &str, v: &Val) -> Result<String, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    crate::limiter::redis::check_url(s).map_err(|e| {
        cx.err(v.span(), e);
        Reported
    })?;
    Ok(s.to_string())
}

/// A non-empty list of URLs, all `redis://` or all `rediss://`.
fn urls(cx: &mut Cx, k: &str, v: &Val) -> Result<Vec<String>, Reported> {
    let DeValue::Array(items) = v.get_ref() else {
        cx.err(
            v.span(),
            format!(
                "\"{k}\" must be a list of urls, found {}",
                type_name(v.get_ref())
            ),
        );
        return Err(Reported);
    };
    if items.is_empty() {
        cx.err(
            v.span(),
            format!("\"{k}\" is empty (list at least one \"redis://HOST:PORT\")"),
        );
        return Err(Reported);
    }
    let mut out: Vec<String> = Vec::new();
    let mut ok = true;
    for item in items.iter() {
        match url(cx, k, item) {
            Ok(u) if !out.is_empty() && tls(&u) != tls(&out[0]) => {
                cx.err(
                    item.span(),
                    format!("\"{k}\" mixes redis:// and rediss:// urls (TLS is all or none)"),
                );
                ok = false;
            }
            Ok(u) => out.push(u),
            Err(Reported) => ok = false,
        }
    }
    if ok { Ok(out) } else { Err(Reported) }
}

fn tls(url: &str) -> bool {
    url.starts_with("rediss://")
}

fn master_name(cx: &mut Cx, k: &str, v: &Val) -> Result<String, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    if s.is_empty() || s.contains(char::is_whitespace) {
        cx.err(
            v.span(),
            format!("invalid master_name \"{s}\" (the name the sentinels monitor the master as)"),
        );
        return Err(Reported);
    }
    Ok(s.to_string())
}

fn on_error(cx: &mut Cx, k: &str, v: &Val) -> Result<OnError, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    OnError::parse(s).ok_or_else(|| {
        cx.err(
            v.span(),
            format!("invalid on_error \"{s}\" (expected \"allow\", \"deny\" or \"local\")"),
        );
        Reported
    })
}

fn prefix(cx: &mut Cx, k: &str, v: &Val) -> Result<String, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    if s.contains(['{', '}']) {
        cx.err(
            v.span(),
            format!(
                "invalid prefix \"{s}\": \"{{\" and \"}}\" are reserved for the cluster hash tag"
            ),
        );
        return Err(Reported);
    }
    Ok(s.to_string())
}

pub(super) fn file(
    cx: &mut Cx,
    k: &'static str,
    v: &Val,
    dir: &std::path::Path,
) -> Result<FileRef, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    Ok(FileRef {
        key: k,
        path: dir.join(s),
        span: v.span(),
    })
}

/// Read `[redis]`; `file` is the configuration file's name.
pub(super) fn redis(cx: &mut Cx, k: &str, v: &Val, file: &str) -> Option<RedisDraft> {
    let t = cx.table(v, k)?;
    let mut r = RedisDraft {
        span: v.span(),
        dir: std::path::Path::new(file)
            .parent()
            .unwrap_or(std::path::Path::new(""))
            .to_path_buf(),
        url: None,
        cluster: None,
        sentinel: None,
        master_name: None,
        servers: Err(Reported),
        password: Ok(None),
        sentinel_password: Ok(None),
        timeout: Ok(RedisConfig::DEFAULT_TIMEOUT),
        on_error: Ok(OnError::Allow),
        prefix: Ok(RedisConfig::DEFAULT_PREFIX.to_string()),
        tls_ca: None,
        tls_cert: None,
        tls_key: None,
        reject_cache: Ok(true),
        connections: Ok(1),
    };
    REDIS.read(cx, t, "[redis]", &mut r);
    r.servers = servers(cx, t, &mut r);
    Some(r)
}

/// Exactly one of `url`, `cluster` and `sentinel` (the later ones
/// reported at their value), `master_name` with `sentinel` and only there,
/// `sentinel_password` only with `sentinel`.
fn servers(cx: &mut Cx, t: &DeTable, r: &mut RedisDraft) -> Result<RedisServers, Reported> {
    let given: Vec<&str> = ["url", "cluster", "sentinel"]
        .into_iter()
        .filter(|k| get(t, k).is_some())
        .collect();
    let span = |k: &str| get(t, k).map_or(r.span.clone(), |v| v.span());
    if given.is_empty() {
        cx.err(
            r.span.clone(),
            "[redis] must have a \"url\" (e.g. \"redis://127.0.0.1:6379\"), or a \"cluster\" or \"sentinel\" list",
        );
    }
    for k in given.iter().skip(1) {
        cx.err(
            span(k),
            format!(
                "\"{k}\" cannot be used with \"{}\": [redis] names one of url, cluster or sentinel",
                given[0]
            ),
        );
    }
    let sentinel = given.contains(&"sentinel");
    for k in ["master_name", "sentinel_password"] {
        if !sentinel && get(t, k).is_some() {
            cx.err(span(k), format!("\"{k}\" is only used with \"sentinel\""));
        }
    }
    if sentinel && r.master_name.is_none() {
        cx.err(
            span("sentinel"),
            "\"sentinel\" needs \"master_name\" (the name the sentinels monitor the master as)",
        );
    }
    if given.len() != 1
        || (!sentinel && (r.master_name.is_some() || get(t, "sentinel_password").is_some()))
    {
        return Err(Reported);
    }
    match (r.url.take(), r.cluster.take(), r.sentinel.take()) {
        (Some(url), None, None) => Ok(RedisServers::Url(url?)),
        (None, Some(seeds), None) => Ok(RedisServers::Cluster(seeds?)),
        (None, None, Some(sentinels)) => Ok(RedisServers::Sentinel {
            sentinels: sentinels?,
            master_name: r.master_name.take().ok_or(Reported)??,
        }),
        _ => Err(Reported),
    }
}
