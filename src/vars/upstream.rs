//! `$upstream_addr`, `$upstream_status`, `$upstream_response_time` (and
//! `$upstream_header_time`, the same times: sluice measures each try until
//! its response head): nginx's lists, one value per server tried.

use super::{Var, push_secs};
use crate::fmt::push_u64;

/// One server a request was sent to (or the group's name when none was
/// live): `$upstream_addr`, `$upstream_status`, `$upstream_response_time`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamTry {
    pub addr: std::sync::Arc<str>,
    /// `None` (`-`): no status (the client's body failed).
    pub status: Option<u16>,
    /// Until its response head was read (or it failed).
    pub ms: u64,
}

/// nginx's list of one value per server tried: `a, b`; `-` for none.
fn push_tries(out: &mut Vec<u8>, tries: &[UpstreamTry], each: impl Fn(&mut Vec<u8>, &UpstreamTry)) {
    if tries.is_empty() {
        out.push(b'-');
    }
    for (i, t) in tries.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        each(out, t);
    }
}

/// One of the list variables.
pub(super) fn eval(v: &Var, tries: &[UpstreamTry], out: &mut Vec<u8>) {
    match v {
        Var::UpstreamAddr => push_tries(out, tries, |out, t| {
            out.extend_from_slice(t.addr.as_bytes())
        }),
        Var::UpstreamStatus => push_tries(out, tries, |out, t| match t.status {
            Some(s) => push_u64(out, s.into()),
            None => out.push(b'-'),
        }),
        _ => push_tries(out, tries, |out, t| push_secs(out, t.ms)),
    }
}

/// `$upstream_trailer_NAME` (the upstream's trailers), `$grpc_status`
/// (the code of a gRPC answer) and `$gzip_ratio`.
pub(super) fn eval_grpc(v: &Var, l: &super::LogVars, out: &mut Vec<u8>) {
    match v {
        Var::UpstreamTrailer(name) => {
            if let Some(v) = l.upstream_trailers.as_ref().and_then(|t| t.get(name)) {
                out.extend_from_slice(v.as_bytes());
            }
        }
        Var::GrpcStatus => {
            if let Some(c) = l.grpc_status {
                push_u64(out, c.into());
            }
        }
        Var::GzipRatio => {
            if let Some((zin, zout)) = l.gzip_ratio.filter(|r| r.1 > 0) {
                push_ratio(out, zin, zout);
            }
        }
        _ => {}
    }
}

/// nginx's `$gzip_ratio`: `in / out` with two decimals, rounded half up
/// (`ngx_http_gzip_ratio_variable`).
pub(super) fn push_ratio(out: &mut Vec<u8>, zin: u64, zout: u64) {
    let (mut int, mut frac) = (zin / zout, (zin * 100 / zout) % 100);
    if (zin * 1000 / zout) % 10 > 4 {
        frac += 1;
        if frac > 99 {
            int += 1;
            frac = 0;
        }
    }
    push_u64(out, int);
    out.push(b'.');
    if frac < 10 {
        out.push(b'0');
    }
    push_u64(out, frac);
}
