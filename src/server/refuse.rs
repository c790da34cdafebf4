//! The answer to a request head nginx refuses (see [`crate::http1`]).

use super::Shared;
use super::io::TimedIo;
use crate::accesslog::{AccessLog, Record};
use crate::body::Body;
use crate::config::ServerBlock;
use crate::conn_state::Conn;
use crate::errlog::{self, Severity};
use crate::http1::Refusal;
use crate::respond::ErrorPages;
use crate::respond::{self, Made};
use crate::vars::{RequestVars, Tables, UserVars};
use http::{Response, Uri, header};
use http_body_util::BodyExt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Answers a refused head as nginx does: its status (the server's error
/// page or the problem body), `Connection: close`, an info line; then the
/// connection is closed the way nginx's lingering close does it (the write
/// side first, the rest of what the client sends read and dropped for a
/// while), so that the client reads the answer instead of a reset.
pub(crate) async fn refuse<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut io: TimedIo<S>,
    refusal: &crate::http1::Refusal,
    srv: Option<&ServerBlock>,
    (conn, server): (&Conn, &str),
    tables: &Arc<Tables>,
    send_timeout: Duration,
) {
    let start = crate::clock::now();
    log_refusal(refusal, conn.id, conn.remote.ip(), server);
    let no_pages = crate::respond::ErrorPages::default();
    let pages = srv.map_or(&no_pages, |s| &*s.error_pages);
    let resp = refused_response(pages, refusal);
    let (bytes, body_len) = Box::pin(serialize(resp)).await;
    if let Some(log) = srv.and_then(|s| s.access_log.as_ref()) {
        access_refused(log, refusal, (conn, server), tables, start, body_len);
    }
    let stream = io.get_mut();
    let _ = tokio::time::timeout(send_timeout, async {
        use tokio::io::AsyncWriteExt;
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    })
    .await;
    Box::pin(linger(stream)).await;
}

/// The response to a refused head: its status, the server's error page or
/// the problem body.
pub(crate) fn refused_response(
    pages: &crate::respond::ErrorPages,
    refusal: &crate::http1::Refusal,
) -> Response<Body> {
    respond::error_response(
        pages,
        None,
        &Made::plain(refusal.status, refusal.to_string()),
    )
}

/// nginx's info line for a refused head.
pub(crate) fn log_refusal(refusal: &crate::http1::Refusal, id: u64, client: IpAddr, server: &str) {
    errlog::emit_with(Severity::Info, |out| {
        out.push(b'*');
        errlog::push_u64(out, id);
        out.push(b' ');
        errlog::push_fmt(out, format_args!("{refusal}"));
        out.extend_from_slice(if refusal.in_headers {
            b" while reading client request headers"
        } else {
            b" while reading client request line"
        });
        out.extend_from_slice(b", client: ");
        errlog::push_ip(out, client);
        out.extend_from_slice(b", server: ");
        out.extend_from_slice(server.as_bytes());
        if let Some(line) = &refusal.request_line {
            out.extend_from_slice(b", request: \"");
            out.extend_from_slice(line);
            out.push(b'"');
        }
    });
}

/// The access-log line of a refused head, as nginx writes one: `$request`
/// is the line as sent (nothing of it could be trusted further),
/// `$request_method` its first word if that is a token. The maps and geos
/// (`tables`) and `$http_…` still have their values: nginx computes them
/// in its log phase from what the request has, the client's address and
/// the fields read before the refusal.
pub(crate) fn access_refused(
    log: &Arc<AccessLog>,
    refusal: &crate::http1::Refusal,
    (conn, server): (&Conn, &str),
    tables: &Arc<Tables>,
    start: Instant,
    body_len: u64,
) {
    let line = refusal.request_line.as_deref().unwrap_or(b"");
    let method = line
        .split(|&b| b == b' ')
        .next()
        .and_then(|m| http::Method::from_bytes(m).ok())
        .unwrap_or_else(|| http::Method::from_bytes(b"-").unwrap_or_default());
    let uri = Uri::from_static("/");
    let headers =
        crate::http1::Fields::Wire(refusal.fields.as_deref().cloned().unwrap_or_default());
    let remote = conn.remote;
    let user = (!tables.is_empty()).then(|| Arc::new(UserVars::new(tables.clone(), remote)));
    let vars = RequestVars {
        remote,
        local: conn.local,
        proxy: conn.proxy.as_deref(),
        server_name: server,
        method: &method,
        uri: &uri,
        version: http::Version::HTTP_11,
        path: "",
        headers: &headers,
        raw_request_line: Some(line),
        tls: None,
        user: user.as_ref(),
    };
    let mut r = Record::new(log.clone(), &vars, conn.id, start);
    r.status = refusal.status;
    r.write(body_len);
}

/// nginx's lingering close (`lingering_time` 30 s, `lingering_timeout` 5 s):
/// read and drop what the client still sends, until it stops or closes.
pub(crate) async fn linger<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) {
    use tokio::io::AsyncReadExt;
    let end = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 4096];
    loop {
        let wait = Duration::from_secs(5).min(end.saturating_duration_since(Instant::now()));
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => continue,
            _ => return,
        }
    }
}

/// A response sluice made, as HTTP/1.1 bytes that close the connection,
/// and the length of its body.
pub(crate) async fn serialize(resp: Response<Body>) -> (Vec<u8>, u64) {
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(256 + body.len());
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(parts.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(parts.status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    out.extend_from_slice(
        crate::errlog::Timestamp::coarse_now()
            .http_date()
            .as_bytes(),
    );
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if name == header::CONTENT_LENGTH || name == header::CONNECTION {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Content-Length: ");
    errlog::push_u64(&mut out, body.len() as u64);
    out.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    out.extend_from_slice(&body);
    (out, body.len() as u64)
}

/// The access-log line nginx writes for a stream it reset over a
/// malformed head: no request (`"-"`), status `000`, nothing sent.
pub(super) fn reset_logged(shared: &Shared, conn: &Conn) {
    let config = shared.config();
    let sni = conn.tls.as_ref().and_then(|t| t.server_name.as_deref());
    let server = config.address(conn.listen).map(|a| a.server_for(None, sni));
    if let Some(log) = server.and_then(|s| s.access_log.as_ref()) {
        let reset = Refusal {
            status: 0,
            reason: "",
            detail: None,
            request_line: None,
            in_headers: true,
            fields: None,
        };
        let name = server.map_or("", |s| s.name.as_str());
        let client = (conn, name);
        access_refused(log, &reset, client, &config.vars, crate::clock::now(), 0);
    }
}

/// The answer to a stream whose head the gate refused
/// ([`crate::http2::request`]; HTTP/2 and HTTP/3): nginx's info line, the
/// default server's error page, an access-log line, as for a refused
/// HTTP/1.1 head.
pub(super) fn refused_stream(
    shared: &Shared,
    conn: &Conn,
    refusal: Option<Refusal>,
    start: Instant,
) -> Response<Body> {
    let refusal = refusal.unwrap_or(Refusal {
        status: 400,
        reason: "client sent invalid request",
        detail: None,
        request_line: None,
        in_headers: true,
        fields: None,
    });
    let config = shared.config();
    let sni = conn.tls.as_ref().and_then(|t| t.server_name.as_deref());
    let server = config.address(conn.listen).map(|a| a.server_for(None, sni));
    let name = server.map_or("", |s| s.name.as_str());
    let client = (conn, name);
    log_refusal(&refusal, conn.id, conn.remote.ip(), name);
    let no_pages = ErrorPages::default();
    let pages = server.map_or(&no_pages, |s| &*s.error_pages);
    let resp = refused_response(pages, &refusal);
    if let Some(log) = server.and_then(|s| s.access_log.as_ref()) {
        let len = hyper::body::Body::size_hint(resp.body())
            .exact()
            .unwrap_or(0);
        access_refused(log, &refusal, client, &config.vars, start, len);
    }
    resp
}
