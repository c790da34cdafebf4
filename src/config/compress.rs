//! The compression settings of a level (nginx's `gzip_*` directives, and
//! `compress`, `zstd_comp_level`, `brotli_comp_level` beyond them), each
//! inherited http → server → location on its own, as nginx merges them,
//! and compiled per location into a [`Compression`] (or none: off).

use crate::compress::{Coding, Compression, Proxied, Types};
use std::sync::Arc;

/// A level's compression keys; `None`: not set here, inherited.
#[derive(Clone, Default)]
pub(crate) struct CompressLevel {
    /// `gzip`.
    pub gzip: Option<bool>,
    /// `compress`: the codings, in preference order.
    pub codings: Option<Arc<Vec<Coding>>>,
    /// `gzip_types`.
    pub types: Option<Arc<Types>>,
    pub min_length: Option<u64>,
    pub proxied: Option<Proxied>,
    pub vary: Option<bool>,
    /// `gzip_disable`: its regexes, and whether `msie6` was one.
    pub disable: Option<Arc<(Vec<regex::bytes::Regex>, bool)>>,
    /// `gzip_http_version = "1.0"`.
    pub http10: Option<bool>,
    pub gzip_level: Option<u32>,
    pub zstd_level: Option<i32>,
    pub brotli_level: Option<u32>,
    pub buffers: Option<(usize, usize)>,
}

impl CompressLevel {
    /// These settings with unset values taken from `parent`.
    pub(crate) fn inherit(&self, parent: &CompressLevel) -> CompressLevel {
        CompressLevel {
            gzip: self.gzip.or(parent.gzip),
            codings: self.codings.clone().or_else(|| parent.codings.clone()),
            types: self.types.clone().or_else(|| parent.types.clone()),
            min_length: self.min_length.or(parent.min_length),
            proxied: self.proxied.or(parent.proxied),
            vary: self.vary.or(parent.vary),
            disable: self.disable.clone().or_else(|| parent.disable.clone()),
            http10: self.http10.or(parent.http10),
            gzip_level: self.gzip_level.or(parent.gzip_level),
            zstd_level: self.zstd_level.or(parent.zstd_level),
            brotli_level: self.brotli_level.or(parent.brotli_level),
            buffers: self.buffers.or(parent.buffers),
        }
    }

    /// The effective settings of a location, compiled: `None` when
    /// compression is off there (`gzip = false`, or neither `gzip = true`
    /// nor a `compress` list). nginx's defaults fill the rest.
    pub(crate) fn compile(&self) -> Option<Arc<Compression>> {
        let listed = self.codings.as_ref().is_some_and(|c| !c.is_empty());
        if !self.gzip.unwrap_or(listed) {
            return None;
        }
        let d = Compression::default();
        let (disable, msie6) = match &self.disable {
            Some(d) => (d.0.clone(), d.1),
            None => (Vec::new(), false),
        };
        Some(Arc::new(Compression {
            codings: match &self.codings {
                Some(c) if !c.is_empty() => c.to_vec(),
                _ => d.codings,
            },
            types: self.types.as_deref().cloned().unwrap_or(d.types),
            min_length: self.min_length.unwrap_or(d.min_length),
            proxied: self.proxied.unwrap_or(d.proxied),
            vary: self.vary.unwrap_or(d.vary),
            disable,
            msie6,
            http10: self.http10.unwrap_or(d.http10),
            gzip_level: self.gzip_level.unwrap_or(d.gzip_level),
            zstd_level: self.zstd_level.unwrap_or(d.zstd_level),
            brotli_level: self.brotli_level.unwrap_or(d.brotli_level),
            buffers: self.buffers.unwrap_or(d.buffers),
        }))
    }
}
