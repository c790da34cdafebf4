//! A server's QUIC tuning: `quic_gso`, `http3_max_concurrent_streams`,
//! `http3_stream_buffer_size`, nginx 1.25's directives, and `http3_hq`,
//! which sluice accepts only off: hq-interop (HTTP/0.9 over QUIC, ALPN
//! `hq-interop`) is the test protocol of QUIC's interoperability runs,
//! requests without header fields (no `Host`, nothing for the gate, the
//! limits' keys or the logs to read), which no browser or client speaks.

use super::super::compiled::QuicTuning;
use super::super::values;
use super::read::{Cx, Val};

/// The keys as read (`None`: unset or reported).
#[derive(Default)]
pub(in crate::config) struct QuicDraft {
    pub gso: Option<bool>,
    pub max_concurrent_streams: Option<u32>,
    pub stream_buffer_size: Option<u64>,
}

impl QuicDraft {
    /// The tuning, nginx's defaults where unset.
    pub(in crate::config) fn tuning(&self) -> QuicTuning {
        let d = QuicTuning::default();
        QuicTuning {
            gso: self.gso.unwrap_or(d.gso),
            max_concurrent_streams: self
                .max_concurrent_streams
                .unwrap_or(d.max_concurrent_streams),
            stream_buffer_size: self.stream_buffer_size.unwrap_or(d.stream_buffer_size),
        }
    }
}

/// The most `http3_max_concurrent_streams` sluice takes (each stream may
/// hold `http3_stream_buffer_size` of body: 65535 × 64k is 4 GB).
const MAX_STREAMS: i128 = 65535;

/// `http3_max_concurrent_streams = N`, 1 to 65535.
pub(super) fn max_streams(cx: &mut Cx, k: &str, v: &Val) -> Option<u32> {
    match cx.int(v, k)? {
        n @ 1..=MAX_STREAMS => u32::try_from(n).ok(),
        _ => {
            cx.err(
                v.span(),
                format!("\"{k}\": value must be between 1 and {MAX_STREAMS}"),
            );
            None
        }
    }
}

/// `http3_stream_buffer_size = "64k"`, nginx's size, 1k to 1g.
pub(super) fn stream_buffer(cx: &mut Cx, k: &str, v: &Val) -> Option<u64> {
    let s = cx.scalar_text(v, k)?;
    match values::parse_size(&s) {
        Ok(n) if (1024..=1 << 30).contains(&n) => Some(n),
        _ => {
            cx.err(
                v.span(),
                format!("\"{k}\": invalid size \"{s}\" (e.g. \"64k\", from 1k to 1g)"),
            );
            None
        }
    }
}

/// `http3_hq = false` is nginx's default and changes nothing; `true` is
/// refused.
pub(super) fn hq(cx: &mut Cx, k: &str, v: &Val) {
    if cx.bool(v, k) == Some(true) {
        cx.err(
            v.span(),
            format!(
                "\"{k}\": sluice serves HTTP/3 (ALPN h3) only, not hq-interop (HTTP/0.9 over \
                 QUIC, a test protocol); remove the key or set it to false"
            ),
        );
    }
}
