//! The server keys nginx's http level may set for every server (TLS,
//! HTTP/2, HTTP/3, 0-RTT), translated where they stand: in a `server`, or
//! at http level into the defaults every server's table gets.

use super::Cx;
use super::doc::Value;
use super::level::{self, Level};
use super::report::Kind;
use super::tree::Directive;
use super::values;

/// The server keys http may set for every server, as nginx names them.
pub const SERVER_KEYS: [&str; 11] = [
    "ssl_certificate",
    "ssl_certificate_key",
    "ssl_protocols",
    "http2",
    "http3",
    "quic_retry",
    "ssl_early_data",
    "quic_gso",
    "http3_hq",
    "http3_max_concurrent_streams",
    "http3_stream_buffer_size",
];

/// `ssl_certificate`, `ssl_certificate_key`, `ssl_protocols`, `http2`,
/// `ssl_early_data` and HTTP/3's: a server's keys, which http may set for every server.
pub fn server_key(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    let Some(key) = SERVER_KEYS.iter().copied().find(|k| *k == d.name) else {
        return;
    };
    if key.starts_with("http3_") || key == "quic_gso" {
        return super::quic::quic_key(cx, lv, d, key);
    }
    if lv.has(key) {
        let why = "sluice has one certificate per server (no RSA beside ECDSA)";
        cx.report(Kind::NotTranslated, d, why);
        return;
    }
    let value = match key {
        "ssl_protocols" => match level::protocol_list(cx, d) {
            Some(p) => Value::Str(p),
            None => return,
        },
        "http2" | "http3" | "quic_retry" | "ssl_early_data" => match values::flag(d.arg(0)) {
            Ok(b) => Value::Bool(b),
            Err(e) => return cx.report(Kind::NotTranslated, d, e),
        },
        _ if d.arg(0).contains('$') => {
            return cx.report(
                Kind::NotTranslated,
                d,
                "sluice's certificates take no variables",
            );
        }
        _ => Value::Str(cx.conf_path(d.arg(0))),
    };
    let early = value == Value::Bool(true) && key == "ssl_early_data";
    lv.push(key, value, d);
    if early {
        let why = "sluice takes 0-RTT on a quic listen only; TLS over TCP refuses early data";
        cx.report(Kind::Partial, d, why);
    }
}
