//! nginx's `limit_conn` for a request `limit_req` let through (after it,
//! as in nginx's preaccess phase: a request limit_req rejected or still
//! delays is not counted).

use super::Ctx;
use super::error::ProxyError;
use super::limit::Key;
use super::log::log_req;
use crate::accesslog::Record;
use crate::config::Location;
use crate::connlimit::{self, Held};
use crate::errlog::{self, Severity};

/// nginx's `limit_conn` for a request `limit_req` let through: what the
/// request holds, or its rejection. Sets `$limit_conn_status` in `record`.
pub(crate) fn limit_conn<'l>(
    cx: &Ctx,
    loc: &'l Location,
    record: &mut Option<Record>,
) -> Result<Held, ProxyError<'l>> {
    let (conn, vars) = (cx.conn, &cx.vars);
    if loc.conn_limits.is_empty() {
        return Ok(Held::default());
    }
    thread_local! {
        static KEY_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let decision = connlimit::check(&loc.conn_limits, loc.conn_dry_run, |i| {
        KEY_BUF.with_borrow_mut(|buf| {
            let zone = &loc.conn_limits[i].zone;
            buf.clear();
            zone.key.eval(vars, None, buf);
            if buf.is_empty() {
                return None;
            }
            if buf.len() > connlimit::MAX_KEY_LEN {
                log_req(
                    Severity::Error,
                    conn,
                    vars,
                    format_args!(
                        "the value of the \"{}\" key is more than {} bytes: \"{}\"",
                        zone.key.source(),
                        connlimit::MAX_KEY_LEN,
                        String::from_utf8_lossy(buf),
                    ),
                );
                return None;
            }
            Some(Key::new(buf))
        })
    });
    let set = |record: &mut Option<Record>, status| {
        cx.set_limit_conn_status(status);
        if let Some(r) = record.as_mut() {
            r.limit_conn_status = status;
        }
    };
    let (limit, full) = match decision {
        connlimit::Decision::Unlimited => return Ok(Held::default()),
        connlimit::Decision::Passed(held) => {
            set(record, connlimit::PASSED);
            return Ok(held);
        }
        connlimit::Decision::Rejected { limit, full } => (limit, full),
    };
    let l = &loc.conn_limits[limit];
    let name = &*l.zone.name;
    if full {
        // nginx's line comes from its slab allocator, without the request.
        errlog::emit(
            Severity::Crit,
            format_args!("ngx_slab_alloc() failed: no memory in limit_conn_zone \"{name}\""),
        );
    } else {
        let dry = if loc.conn_dry_run { ", dry run," } else { "" };
        log_req(
            loc.conn_log_level,
            conn,
            vars,
            format_args!("limiting connections{dry} by zone \"{name}\""),
        );
    }
    if loc.conn_dry_run {
        set(record, connlimit::REJECTED_DRY_RUN);
        return Ok(Held::default());
    }
    set(record, connlimit::REJECTED);
    Err(ProxyError::TooManyConnections { limit, full })
}
