//! The request as the upstream receives it: the head rewritten (hop-by-hop
//! headers dropped, Host, X-Forwarded-For and the framing written by
//! sluice; `Upgrade` and `Connection: upgrade` for an upgrade request only),
//! then the body, streamed as it arrives.
//!
//! Why the framing is always sluice's own: the client's `Content-Length`
//! or `Transfer-Encoding` (or a `Connection` header naming them) must never
//! decide where the upstream thinks the body ends, or one request could
//! smuggle another. A body of known length goes with a Content-Length, any
//! other is re-chunked, as nginx sends them.

use super::body::Framing;
use super::{Error, Head, UpstreamTimeouts};
use crate::body::BodyError;
use crate::clock::WaitTimer;
use crate::http1::Fields;
use bytes::Bytes;
use http::header;
use http_body::Body;
use http_body_util::BodyExt;
use std::io;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Writes part of the request. As nginx's `proxy_send_timeout`, the timeout
/// bounds each wait for the upstream to take more, not the whole transfer:
/// an upstream that reads slowly but steadily is not timed out (and most
/// writes, done when first tried, take no timer at all). Flushed at the
/// end: TLS keeps what it encrypted until then (TCP has nothing to flush).
pub(super) async fn write_all<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    mut bytes: &[u8],
    timeout: Duration,
) -> Result<(), Error> {
    let mut timer = WaitTimer::default();
    while !bytes.is_empty() {
        match timer.within(timeout, w.write(bytes)).await {
            Some(Ok(0)) => return Err(Error::Send(io::ErrorKind::WriteZero.into())),
            Some(Ok(n)) => bytes = &bytes[n..],
            Some(Err(e)) => return Err(Error::Send(e)),
            None => return Err(Error::SendTimeout),
        }
    }
    match timer.within(timeout, w.flush()).await {
        Some(Ok(())) => Ok(()),
        Some(Err(e)) => Err(Error::Send(e)),
        None => Err(Error::SendTimeout),
    }
}

/// Request headers the client's request does not pass on: those sluice
/// writes itself ([`crate::headers::managed`]: the connection's own, the
/// framing, `Expect`, which sluice answers itself, streaming the body at
/// once) and the proxy credentials, which are this hop's (RFC 9110
/// §11.7). (Those `proxy_set_header` names, Host and X-Forwarded-For by
/// default, are replaced too.)
fn replaced(name: &[u8]) -> bool {
    crate::headers::managed(name) || matches!(name, b"proxy-authenticate" | b"proxy-authorization")
}

/// Names a `Connection` header lists are hop-by-hop too.
fn named_in_connection(fields: &Fields, name: &[u8]) -> bool {
    fields
        .get_all(&header::CONNECTION)
        .flat_map(|v| v.split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(name))
}

/// The request head into `out`; `framing` says how its body is sent
/// (`Done`: no body and no Content-Length).
pub(super) fn write_head(out: &mut Vec<u8>, head: &Head<'_>, framing: Framing) {
    out.clear();
    out.extend_from_slice(head.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    head.proxy.write(out, head.vars, head.proxy_host);
    // The client's own are dropped below: only the protocol asked for, and
    // the option that makes it meant for this hop (nginx's usual
    // `proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection
    // "upgrade"`, for upgrade requests only).
    if let Some(protocol) = head.upgrade {
        out.extend_from_slice(b"upgrade: ");
        out.extend_from_slice(protocol);
        out.extend_from_slice(b"\r\nconnection: upgrade\r\n");
    }
    let listed = head.headers.contains(&header::CONNECTION);
    for (name, value) in head.headers.iter() {
        if replaced(name)
            || head.proxy.replaces(name)
            || (listed && named_in_connection(head.headers, name))
        {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    // The framing is sluice's own, never the client's word for it.
    match framing {
        Framing::Chunked(_) => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Framing::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Framing::UntilClose | Framing::Done => {}
    }
    out.extend_from_slice(b"\r\n");
}

/// Streams the client's body to the upstream as its pieces arrive, each
/// piece one chunk when `chunked`; `client_body_timeout` bounds each wait
/// for the client, `proxy_send_timeout` each write.
pub(super) async fn send_body<B, W>(
    w: &mut W,
    buf: &mut Vec<u8>,
    body: &mut B,
    chunked: bool,
    timeouts: UpstreamTimeouts,
) -> Result<(), Error>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    loop {
        let frame = match tokio::time::timeout(timeouts.client_body, body.frame()).await {
            Ok(Some(frame)) => frame.map_err(Error::Body)?,
            Ok(None) => break,
            Err(_) => return Err(Error::ClientBodyTimeout),
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers are not forwarded
        };
        if data.is_empty() {
            continue;
        }
        if chunked {
            buf.clear();
            buf.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            buf.extend_from_slice(&data);
            buf.extend_from_slice(b"\r\n");
            write_all(w, buf, timeouts.proxy_send).await?;
        } else {
            write_all(w, &data, timeouts.proxy_send).await?;
        }
    }
    if chunked {
        write_all(w, b"0\r\n\r\n", timeouts.proxy_send).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderName, HeaderValue, Method};

    /// An upgrade request's head: its protocol and `Connection: upgrade`,
    /// none of the client's hop-by-hop fields; without the upgrade, neither.
    #[test]
    fn an_upgrade_request_sends_its_protocol_and_nothing_else_hop_by_hop() {
        let mut headers = HeaderMap::new();
        for (n, v) in [
            ("connection", "keep-alive, Upgrade, X-Hop"),
            ("upgrade", "websocket"),
            ("x-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("sec-websocket-key", "k"),
        ] {
            headers.append(HeaderName::from_static(n), HeaderValue::from_static(v));
        }
        let headers = Fields::Map(headers);
        let vars = crate::vars::RequestVars::for_test(&headers, "10.0.0.1");
        let proxy = crate::headers::ProxyHeaders::default();
        let hidden = crate::headers::HiddenHeaders::default();
        let mut head = Head {
            method: &Method::GET,
            target: "/ws",
            headers: &headers,
            proxy: &proxy,
            hidden: &hidden,
            vars: &vars,
            proxy_host: "up:80",
            upgrade: Some(b"websocket"),
        };
        let mut out = Vec::new();
        write_head(&mut out, &head, Framing::Done);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "GET /ws HTTP/1.1\r\nhost: up:80\r\nx-forwarded-for: 10.0.0.1\r\n\
             upgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-key: k\r\n\r\n"
        );
        head.upgrade = None;
        write_head(&mut out, &head, Framing::Done);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /ws HTTP/1.1\r\nhost: up:80\r\nx-forwarded-for: 10.0.0.1\r\nsec-websocket-key: k\r\n\r\n"
        );
    }

    /// The fields of an HTTP/1.1 head go as the client sent them, in its
    /// order (as nginx forwards them), less the hop-by-hop ones and those
    /// its `Connection` names.
    #[test]
    fn wire_fields_go_in_the_clients_order() {
        let raw = b"GET /a HTTP/1.1\r\nHost: c\r\nX-A: 1\r\nConnection: x-hop\r\nX-B: 2\r\nX-Hop: h\r\nX-A: 3\r\nTE: trailers\r\n\r\n";
        let crate::http1::Parsed::Head(h) =
            crate::http1::parse_head(raw, &crate::http1::HeadRules::default())
        else {
            panic!("a head");
        };
        let headers = Fields::Wire(crate::http1::fields::Wire::new(h.canonical.into(), h.spans));
        let vars = crate::vars::RequestVars::for_test(&headers, "10.0.0.1");
        let proxy = crate::headers::ProxyHeaders::default();
        let hidden = crate::headers::HiddenHeaders::default();
        let head = Head {
            method: &Method::GET,
            target: "/a",
            headers: &headers,
            proxy: &proxy,
            hidden: &hidden,
            vars: &vars,
            proxy_host: "up:80",
            upgrade: None,
        };
        let mut out = Vec::new();
        write_head(&mut out, &head, Framing::Done);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /a HTTP/1.1\r\nhost: up:80\r\nx-forwarded-for: 10.0.0.1\r\n\
             x-a: 1\r\nx-b: 2\r\nx-a: 3\r\n\r\n"
        );
    }
}
