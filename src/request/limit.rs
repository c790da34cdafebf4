//! nginx's preaccess phase for `limit_req`: every limit's key, the
//! decision, the delay, and nginx's log lines for them.

use crate::accesslog::Record;
use crate::errlog::{self, Severity};
use crate::limiter::Outcome;
use crate::metrics::Metrics;
use tokio::time::Instant;

/// `$limit_req_status`.
pub(crate) fn status_name(o: &Outcome, dry_run: bool) -> &'static str {
    match (o, dry_run) {
        (Outcome::Unlimited, _) => "-",
        (Outcome::Accepted { delay_ms: 0, .. }, _) => "PASSED",
        (Outcome::Accepted { .. }, false) => "DELAYED",
        (Outcome::Accepted { .. }, true) => "DELAYED_DRY_RUN",
        (_, false) => "REJECTED",
        (_, true) => "REJECTED_DRY_RUN",
    }
}

/// Logs nginx's "client prematurely closed connection" (and a 499 in the
/// access log) if a delayed request is dropped before its delay ends: the
/// client went away. The slot stays charged, as in nginx.
pub(crate) struct DelayGuard<'a> {
    pub(crate) armed: bool,
    pub(crate) line: Vec<u8>,
    pub(crate) record: &'a mut Option<Record>,
    /// The 499 is counted in `sluice_http_responses` too.
    pub(crate) metrics: &'a Metrics,
    pub(crate) start: Instant,
}

impl Drop for DelayGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            errlog::emit_with(Severity::Info, |out| out.extend_from_slice(&self.line));
            self.metrics.response(499, self.start.elapsed());
            if let Some(r) = self.record.as_mut() {
                r.status = 499;
                r.write(0);
            }
        }
    }
}

/// A limit's key, inline when short (addresses, most header values).
pub(crate) enum Key {
    Inline(u8, [u8; Key::INLINE]),
    Heap(Vec<u8>),
}

impl Key {
    const INLINE: usize = 46;

    pub(crate) fn new(k: &[u8]) -> Key {
        if k.len() <= Key::INLINE {
            let mut b = [0; Key::INLINE];
            b[..k.len()].copy_from_slice(k);
            Key::Inline(k.len() as u8, b)
        } else {
            Key::Heap(k.to_vec())
        }
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        match self {
            Key::Inline(n, b) => &b[..*n as usize],
            Key::Heap(v) => v,
        }
    }
}
