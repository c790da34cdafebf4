//! nginx 1.25's QUIC tuning, which http or a server may set: `quic_gso`,
//! `http3_max_concurrent_streams`, `http3_stream_buffer_size` as sluice
//! has them, `http3_hq off` as the no-op it is; `http3_hq on` (hq-interop,
//! the test protocol of QUIC's interoperability runs) is not served.

use super::Cx;
use super::doc::Value;
use super::level::{self, Level};
use super::report::Kind;
use super::tree::Directive;
use super::values;

/// One of them, to `lv`: sluice's key and value, or a report.
pub(super) fn quic_key(cx: &mut Cx, lv: &mut Level, d: &Directive, key: &'static str) {
    if !level::arity(cx, d, 1) {
        return;
    }
    if lv.has(key) {
        return cx.report(
            Kind::NotTranslated,
            d,
            format!("\"{key}\" directive is duplicate"),
        );
    }
    let arg = d.arg(0);
    let value = match key {
        "quic_gso" | "http3_hq" => match values::flag(arg) {
            Ok(true) if key == "http3_hq" => {
                let why = "sluice serves HTTP/3 only, not hq-interop (HTTP/0.9 over QUIC, a test protocol)";
                return cx.report(Kind::NotTranslated, d, why);
            }
            Ok(b) => Value::Bool(b),
            Err(e) => return cx.report(Kind::NotTranslated, d, e),
        },
        "http3_max_concurrent_streams" => match arg.parse::<i64>() {
            Ok(n) if (1..=65535).contains(&n) => Value::Int(n),
            _ => {
                let why = format!("invalid number \"{arg}\" (sluice takes 1 to 65535)");
                return cx.report(Kind::NotTranslated, d, why);
            }
        },
        _ => match crate::config::values::parse_size(arg) {
            Ok(n) if (1024..=1 << 30).contains(&n) => Value::str(arg),
            _ => {
                let why = format!("invalid size \"{arg}\" (sluice takes 1k to 1g)");
                return cx.report(Kind::NotTranslated, d, why);
            }
        },
    };
    lv.push(key, value, d);
}
