//! nginx's `limit_conn` for a request `limit_req` let through.

use super::error::*;
use super::limit::*;
use super::log::*;
use crate::accesslog::Record;
use crate::body::Body;
use crate::config::Location;
use crate::conn::Conn;
use crate::connlimit::{self, Held};
use crate::errlog::{self, Severity};
use crate::respond::{self, Made};
use crate::vars::RequestVars;
use http::Response;

/// What `limit_conn` made of a request.
pub(crate) enum ConnCheck {
    /// Go on, holding these counts.
    Go(Held),
    /// Rejected: answer this.
    Answer(Result<Response<Body>, CloseConnection>),
}

/// nginx's `limit_conn` for a request `limit_req` let through: what the
/// request holds, or its rejection. Sets `$limit_conn_status` in `record`.
pub(crate) fn limit_conn(
    loc: &Location,
    conn: &Conn,
    vars: &RequestVars,
    record: &mut Option<Record>,
    (lrs, req_zone): (&'static str, &str),
) -> ConnCheck {
    if loc.conn_limits.is_empty() {
        return ConnCheck::Go(Held::default());
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
        if let Some(r) = record.as_mut() {
            r.limit_conn_status = status;
        }
    };
    let (limit, full) = match decision {
        connlimit::Decision::Unlimited => return ConnCheck::Go(Held::default()),
        connlimit::Decision::Passed(held) => {
            set(record, connlimit::PASSED);
            return ConnCheck::Go(held);
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
            Severity::from(loc.conn_log_level),
            conn,
            vars,
            format_args!("limiting connections{dry} by zone \"{name}\""),
        );
    }
    if loc.conn_dry_run {
        set(record, connlimit::REJECTED_DRY_RUN);
        return ConnCheck::Go(Held::default());
    }
    set(record, connlimit::REJECTED);
    if loc.conn_status == 444 {
        return ConnCheck::Answer(Err(CloseConnection::NO_RESPONSE));
    }
    let detail = if full {
        format!("The limit_conn zone \"{name}\" is full.")
    } else {
        format!(
            "Too many requests of this client are being processed at once (at most {} in limit_conn zone \"{name}\").",
            l.conn
        )
    };
    ConnCheck::Answer(Ok(respond::error_response(
        &loc.error_pages,
        Some(vars),
        &Made {
            status: loc.conn_status,
            retry_after: None,
            limit_req_status: lrs,
            zone: req_zone,
            detail,
            violated: None,
        },
    )))
}
