//! `[redis]`: where zones with `backend = "redis"` keep their states.
//!
//! The TLS files are only named here (resolved against the configuration
//! file's directory): reading them is the file step's work (see
//! [`crate::config::files`]), and whether they fit the url is validation's,
//! once it is known which of them could be read.

use super::read::{Cx, Key, Reported, Schema, Val, has};
use crate::limiter::{OnError, RedisConfig};
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

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
    pub url: Result<String, Reported>,
    pub timeout: Result<Duration, Reported>,
    pub on_error: Result<OnError, Reported>,
    pub prefix: Result<String, Reported>,
    pub tls_ca: TlsFile,
    pub tls_cert: TlsFile,
    pub tls_key: TlsFile,
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
        read: |cx, k, v, r| r.url = url(cx, k, v),
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
]);

fn url(cx: &mut Cx, k: &str, v: &Val) -> Result<String, Reported> {
    let s = cx.str(v, k).ok_or(Reported)?;
    crate::limiter::redis::check_url(s).map_err(|e| {
        cx.err(v.span(), e);
        Reported
    })?;
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
        url: Err(Reported),
        timeout: Ok(RedisConfig::DEFAULT_TIMEOUT),
        on_error: Ok(OnError::Allow),
        prefix: Ok(RedisConfig::DEFAULT_PREFIX.to_string()),
        tls_ca: None,
        tls_cert: None,
        tls_key: None,
    };
    REDIS.read(cx, t, "[redis]", &mut r);
    if !has(t, "url") {
        cx.err(
            v.span(),
            "[redis] must have a \"url\" (e.g. \"redis://127.0.0.1:6379\")",
        );
    }
    Some(r)
}
