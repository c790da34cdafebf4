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
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;

/// A client connection once its handshake is done.
pub(super) struct Handshaken {
    pub stream: TlsStream<TcpStream>,
    pub session: Arc<Session>,
}

/// How a connection on an `ssl` address began.
pub(super) enum Accepted {
    Tls(Box<Handshaken>),
    /// With plain HTTP (nginx then reads the request, to answer 400 "The
    /// plain HTTP request was sent to HTTPS port").
    Plain(TcpStream),
    /// It failed, timed out or was closed (logged and counted).
    Failed,
}

/// A connection on an `ssl` address: as nginx, its first byte says
/// whether it is a TLS handshake (a record of type 22, or an SSLv2-style
/// hello) or plain HTTP; then the handshake, all within the default
/// server's `client_header_timeout`.
pub(super) async fn accept(
    shared: &Shared,
    stream: TcpStream,
    listen: SocketAddr,
    (id, remote): (u64, SocketAddr),
) -> Accepted {
    let config = shared.config();
    // None after a reload removed the address: closed.
    let Some(address) = config.address(listen) else {
        return Accepted::Failed;
    };
    let timeout = address.default_server().client_header_timeout;
    let deadline = crate::clock::now()
        + if timeout.is_zero() {
            crate::config::DEFAULT_TIMEOUT
        } else {
            timeout
        };
    let failed = |what: std::fmt::Arguments, result: &'static str| {
        shared.env.metrics.tls_handshake(result);
        errlog::emit(
            Severity::Info,
            format_args!(
                "*{id} {what} while SSL handshaking, client: {}, server: {listen}",
                remote.ip()
            ),
        );
        Accepted::Failed
    };
    let timed_out = "client timed out (110: Connection timed out)";
    let mut first = [0u8; 1];
    match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] & 0x80 != 0 || first[0] == 0x16 => {}
        Ok(Ok(1)) => return Accepted::Plain(stream),
        Ok(Ok(_)) => return failed(format_args!("client closed connection"), "failed"),
        Ok(Err(e)) => return failed(format_args!("recv() failed ({e})"), "failed"),
        Err(_) => return failed(format_args!("{timed_out}"), "timeout"),
    }
    match handshake(address, stream, deadline).await {
        Ok(h) => {
            shared.env.metrics.tls_handshake("ok");
            Accepted::Tls(Box::new(h))
        }
        Err(Failure::TimedOut) => failed(format_args!("{timed_out}"), "timeout"),
        Err(Failure::Io(e)) => failed(format_args!("{}", describe(&e)), "failed"),
        Err(Failure::NoCertificate) => failed(
            format_args!("no \"ssl_certificate\" is defined for the server"),
            "failed",
        ),
    }
}

/// Why a handshake failed.
enum Failure {
    TimedOut,
    Io(std::io::Error),
    NoCertificate,
}

/// The handshake itself, by `deadline`: the ClientHello's name chooses the
/// server whose TLS configuration answers it.
async fn handshake(
    address: &crate::config::Address,
    stream: TcpStream,
    deadline: Instant,
) -> Result<Handshaken, Failure> {
    let acceptor =
        tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
    let start = tokio::time::timeout_at(deadline, acceptor)
        .await
        .map_err(|_| Failure::TimedOut)?
        .map_err(Failure::Io)?;
    let sni = start.client_hello().server_name().map(Box::<str>::from);
    let server = address.server_for(None, sni.as_deref());
    // Validation gives every server on an ssl address a certificate.
    let tls = server.tls.as_ref().ok_or(Failure::NoCertificate)?;
    let stream = tokio::time::timeout_at(deadline, start.into_stream(tls.config.clone()))
        .await
        .map_err(|_| Failure::TimedOut)?
        .map_err(Failure::Io)?;
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
    Ok(Handshaken {
        session: Arc::new(Session {
            protocol,
            server_name: sni,
            cipher,
            h2,
            // (TLS over TCP takes no early data: rustls' default.)
            early_data: false,
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
