//! The TLS handshake of a client connection on an `ssl` address.
//!
//! The ClientHello is read first and its SNI name chooses the server (and
//! so the certificate, protocols and ALPN) among the address's servers, in
//! the configuration generation current at that moment: a reload with new
//! certificates applies to the next handshake, never to one half done. The
//! whole handshake must end within the chosen server's
//! `client_header_timeout`, as nginx times it. Failures are one info line,
//! as nginx logs them, and a counter.

use super::Shared;
use crate::errlog::{self, Severity};
use crate::tls::{Protocol, Session};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;

/// A client connection once its handshake is done.
pub(super) struct Handshaken {
    pub stream: TlsStream<TcpStream>,
    pub session: Arc<Session>,
}

/// The handshake, or `None` when it failed (logged and counted).
pub(super) async fn handshake(
    shared: &Shared,
    stream: TcpStream,
    listen: SocketAddr,
    (id, remote): (u64, SocketAddr),
) -> Option<Handshaken> {
    let config = shared.config();
    // None after a reload removed the address: closed.
    let address = config.address(listen)?;
    // Until the ClientHello names a server, the default server's timeout.
    let timeout = address.default_server().client_header_timeout;
    let deadline = Instant::now()
        + if timeout.is_zero() {
            Duration::from_secs(60)
        } else {
            timeout
        };
    let acceptor =
        tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
    let failed = |what: std::fmt::Arguments, result: &'static str| {
        shared.env.metrics.tls_handshake(result);
        errlog::emit(
            Severity::Info,
            format_args!(
                "*{id} {what} while SSL handshaking, client: {}, server: {listen}",
                remote.ip()
            ),
        );
        None
    };
    let start = match tokio::time::timeout_at(deadline, acceptor).await {
        Ok(Ok(start)) => start,
        Ok(Err(e)) => return failed(format_args!("{}", describe(&e)), "failed"),
        Err(_) => {
            return failed(
                format_args!("client timed out (110: Connection timed out)"),
                "timeout",
            );
        }
    };
    let sni = start.client_hello().server_name().map(Box::<str>::from);
    let server = address.server_for(None, sni.as_deref());
    let Some(tls) = &server.tls else {
        // Validation gives every server on an ssl address a certificate.
        return failed(
            format_args!("no \"ssl_certificate\" is defined for the server"),
            "failed",
        );
    };
    let stream =
        match tokio::time::timeout_at(deadline, start.into_stream(tls.config.clone())).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return failed(format_args!("{}", describe(&e)), "failed"),
            Err(_) => {
                return failed(
                    format_args!("client timed out (110: Connection timed out)"),
                    "timeout",
                );
            }
        };
    let (_, c) = stream.get_ref();
    let protocol = c
        .protocol_version()
        .and_then(Protocol::of)
        .unwrap_or(Protocol::Tls13);
    let cipher = c
        .negotiated_cipher_suite()
        .and_then(|s| s.suite().as_str())
        .unwrap_or("");
    let h2 = c.alpn_protocol() == Some(b"h2");
    shared.env.metrics.tls_handshake("ok");
    Some(Handshaken {
        session: Arc::new(Session {
            protocol,
            server_name: sni,
            cipher,
            h2,
        }),
        stream,
    })
}

/// A failed handshake as nginx's line says it: the peer's end, or the TLS
/// library's reason.
fn describe(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::UnexpectedEof => "peer closed connection in SSL handshake".into(),
        ErrorKind::ConnectionReset => {
            "peer closed connection in SSL handshake (104: Connection reset by peer)".into()
        }
        _ => match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            Some(tls) => format!("SSL_do_handshake() failed (rustls: {tls})"),
            None => format!("SSL_do_handshake() failed ({e})"),
        },
    }
}
