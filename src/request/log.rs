//! The error-log lines about a request, with nginx's context
//! (`*CONN message, client: …, server: …, request: "…", host: "…"`).

use crate::conn_state::Conn;
use crate::errlog::{self, Severity};
use crate::vars::RequestVars;
use http::header;

/// Appends `, client: …, server: …, request: "…", host: "…"`: nginx's
/// context of a line about a request.
pub(crate) fn push_context(out: &mut Vec<u8>, r: &RequestVars) {
    push_context_upstream(out, r, None)
}

/// [`push_context`] with nginx's `upstream: "…"` (after the request, before
/// the host): its scheme, authority and target.
pub(crate) fn push_context_upstream(
    out: &mut Vec<u8>,
    r: &RequestVars,
    upstream: Option<(&str, &str, &str)>,
) {
    out.extend_from_slice(b", client: ");
    errlog::push_ip(out, r.remote.ip());
    out.extend_from_slice(b", server: ");
    out.extend_from_slice(r.server_name.as_bytes());
    out.extend_from_slice(b", request: \"");
    out.extend_from_slice(r.method.as_str().as_bytes());
    out.push(b' ');
    let target = r.uri.path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(target.as_bytes());
    out.push(b' ');
    out.extend_from_slice(crate::vars::version_str(r.version).as_bytes());
    out.push(b'"');
    if let Some((scheme, authority, target)) = upstream {
        out.extend_from_slice(b", upstream: \"");
        out.extend_from_slice(scheme.as_bytes());
        out.extend_from_slice(b"://");
        out.extend_from_slice(authority.as_bytes());
        out.extend_from_slice(target.as_bytes());
        out.push(b'"');
    }
    if let Some(h) = r.headers.get(&header::HOST) {
        out.extend_from_slice(b", host: \"");
        out.extend_from_slice(h);
        out.push(b'"');
    }
}

/// `*CONN message, client: …`: the whole line about a request, `msg`
/// appending the message.
pub(crate) fn push_req_line(
    out: &mut Vec<u8>,
    conn: &Conn,
    vars: &RequestVars,
    msg: impl FnOnce(&mut Vec<u8>),
) {
    out.push(b'*');
    errlog::push_u64(out, conn.id);
    out.push(b' ');
    msg(out);
    push_context(out, vars);
}

/// An error about the upstream of a request, with nginx's `upstream:` field.
pub(crate) fn log_upstream(
    conn: &Conn,
    vars: &RequestVars,
    upstream: (&str, &str, &str),
    msg: std::fmt::Arguments<'_>,
) {
    errlog::emit_with(Severity::Error, |out| {
        out.push(b'*');
        errlog::push_u64(out, conn.id);
        out.push(b' ');
        errlog::push_fmt(out, msg);
        push_context_upstream(out, vars, Some(upstream));
    });
}

/// One error-log line about a request: `*CONN message, client: …`.
pub(crate) fn log_req(
    sev: Severity,
    conn: &Conn,
    vars: &RequestVars,
    msg: std::fmt::Arguments<'_>,
) {
    errlog::emit_with(sev, |out| {
        push_req_line(out, conn, vars, |out| errlog::push_fmt(out, msg))
    });
}

/// `*CONN ` then `msg`: nginx's debug lines carry no request context.
fn debug(conn: &Conn, msg: impl FnOnce(&mut Vec<u8>)) {
    errlog::emit_with(Severity::Debug, |out| {
        out.push(b'*');
        errlog::push_u64(out, conn.id);
        out.push(b' ');
        msg(out);
    });
}

/// The request is in `loc`: its lines go to the location's `error_log`
/// from now on, starting with the debug lines about the request (in the
/// location's log, unlike nginx's, so that a location's `debug` shows the
/// requests it chases).
#[inline(always)]
pub(crate) fn at_location(cx: &super::Ctx, loc: &crate::config::Location) {
    cx.log_to(&loc.error_log);
    if errlog::debug_possible() {
        debug_request(cx, loc);
    }
}

/// With `error_log … debug`: the request as it arrived, in nginx's words
/// (`http request line`, `http uri`, `http args`, `http header`), and the
/// location chosen (`using configuration`).
#[cold]
#[inline(never)]
fn debug_request(cx: &super::Ctx, loc: &crate::config::Location) {
    if !errlog::enabled(Severity::Debug) {
        return;
    }
    let v = &cx.vars;
    debug(cx.conn, |out| {
        out.extend_from_slice(b"http request line: \"");
        out.extend_from_slice(v.method.as_str().as_bytes());
        out.push(b' ');
        let target = v.uri.path_and_query().map_or("/", |p| p.as_str());
        out.extend_from_slice(target.as_bytes());
        out.push(b' ');
        out.extend_from_slice(crate::vars::version_str(v.version).as_bytes());
        out.push(b'"');
    });
    debug(cx.conn, |out| {
        errlog::push_fmt(out, format_args!("http uri: \"{}\"", v.path));
    });
    debug(cx.conn, |out| {
        errlog::push_fmt(
            out,
            format_args!("http args: \"{}\"", v.uri.query().unwrap_or("")),
        );
    });
    if let Some(h) = v.headers.get(&header::HOST) {
        debug(cx.conn, |out| {
            out.extend_from_slice(b"http header: \"Host: ");
            out.extend_from_slice(h);
            out.push(b'"');
        });
    }
    debug(cx.conn, |out| {
        errlog::push_fmt(out, format_args!("http server: \"{}\"", v.server_name));
    });
    debug(cx.conn, |out| {
        errlog::push_fmt(out, format_args!("using configuration \"{}\"", loc.path));
    });
}

/// With `error_log … debug`: any step of a request, `*CONN what`.
#[inline(always)]
pub(crate) fn debug_step(conn: &Conn, what: std::fmt::Arguments<'_>) {
    if errlog::debug_possible() {
        debug_line(conn, what);
    }
}

/// [`debug_step`]'s line, out of the way of the requests that log none.
#[cold]
#[inline(never)]
fn debug_line(conn: &Conn, what: std::fmt::Arguments<'_>) {
    debug(conn, |out| errlog::push_fmt(out, what));
}
