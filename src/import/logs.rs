//! `error_log` and the `syslog:` form of `access_log`: nginx's arguments
//! are sluice's (`error_log = "FILE LEVEL"`, a list for several lines at
//! one level), files made relative to nginx's prefix, `/dev/stderr` as
//! `stderr`, and `syslog:` parameters checked as nginx checks them. A
//! `syslog:` target without `tag=` gets `tag=nginx`, nginx's default, so
//! that the filters of the syslog server keep matching (sluice's own
//! default is `sluice`).

use super::Cx;
use super::doc::Value;
use super::level::Level;
use super::report::Kind;
use super::tree::Directive;
use crate::errlog::syslog::Params;

/// nginx's levels; `debug_*` (debug of one module) is `debug` here.
const LEVELS: &[&str] = &[
    "debug", "info", "notice", "warn", "error", "crit", "alert", "emerg",
];

/// `error_log TARGET [LEVEL]` at a level (`http`, `server`, `location`, or
/// the main context's, kept apart by the caller).
pub fn error_log(cx: &mut Cx, lv: &mut Level, d: &Directive) {
    let Some(target) = d.args.first() else {
        cx.report(Kind::NotTranslated, d, "invalid number of arguments");
        return;
    };
    let mut level = "error";
    for l in &d.args[1..] {
        if LEVELS.contains(&l.as_str()) {
            level = l;
        } else if l.starts_with("debug_") {
            level = "debug";
            let why = "a module's debug (debug_*) is all of sluice's debug lines";
            cx.report(Kind::Partial, d, why);
        } else {
            cx.report(Kind::NotTranslated, d, format!("invalid log level \"{l}\""));
            return;
        }
    }
    let Some(target) = log_target(cx, d, target) else {
        return;
    };
    lv.push("error_log", Value::Str(format!("{target} {level}")), d);
}

/// A log's target in sluice's words: `stderr`, `syslog:…` or a path.
fn log_target(cx: &mut Cx, d: &Directive, target: &str) -> Option<String> {
    if target == "stderr" || target == "/dev/stderr" {
        return Some("stderr".into());
    }
    if target.starts_with("memory:") {
        cx.report(Kind::NotTranslated, d, "sluice has no memory: log");
        return None;
    }
    match target.strip_prefix("syslog:") {
        Some(args) => syslog(cx, d, args),
        None => Some(cx.path(target)),
    }
}

/// `syslog:ARGS`, checked; with nginx's tag when it names none.
pub fn syslog(cx: &mut Cx, d: &Directive, args: &str) -> Option<String> {
    match Params::parse(args) {
        Ok(_) if args.split(',').any(|p| p.starts_with("tag=")) => Some(format!("syslog:{args}")),
        Ok(_) => Some(format!("syslog:{args},tag=nginx")),
        Err(e) => {
            cx.report(Kind::NotTranslated, d, e);
            None
        }
    }
}

/// The main context's `error_log` lines (the process's) and the `http`
/// block's (the requests'): sluice's top level is both, so the http
/// block's list is kept when there is one, else the main context's.
pub fn top_error_log(cx: &mut Cx, main: &[Directive], http: &mut Level) {
    if !http.has("error_log") {
        for d in main {
            error_log(cx, http, d);
        }
        return;
    }
    for d in main {
        let why = "sluice's top-level error_log is the process's and the requests': \
                   the http block's is kept";
        cx.report(Kind::NotTranslated, d, why);
    }
}
