//! Access-log escaping: nginx's `log_format … escape=default|json`.

use super::LogEscape;
use crate::fmt::push_fmt;

/// Escape `out[from..]` in place, as nginx's `ngx_http_log_escape` (default)
/// or `ngx_escape_json` (json).
pub(super) fn escape_tail(out: &mut Vec<u8>, from: usize, escape: LogEscape) {
    let needs = |b: u8| match escape {
        LogEscape::Default => crate::fmt::log_escapes(b),
        _ => b == b'"' || b == b'\\' || b < 0x20,
    };
    if !out[from..].iter().any(|&b| needs(b)) {
        return;
    }
    let value = out.split_off(from);
    for b in value {
        match (escape, b) {
            (LogEscape::Json, b'"') => out.extend_from_slice(b"\\\""),
            (LogEscape::Json, b'\\') => out.extend_from_slice(b"\\\\"),
            (LogEscape::Json, b'\n') => out.extend_from_slice(b"\\n"),
            (LogEscape::Json, b'\r') => out.extend_from_slice(b"\\r"),
            (LogEscape::Json, b'\t') => out.extend_from_slice(b"\\t"),
            (LogEscape::Json, 0x08) => out.extend_from_slice(b"\\b"),
            (LogEscape::Json, 0x0c) => out.extend_from_slice(b"\\f"),
            (LogEscape::Json, b) if b < 0x20 => push_fmt(out, format_args!("\\u{b:04x}")),
            (LogEscape::Default, b) => crate::fmt::push_log_escaped(out, b),
            (_, b) => out.push(b),
        }
    }
}
