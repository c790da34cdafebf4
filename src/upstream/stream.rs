//! An upstream connection's byte stream: plain TCP, or TLS over it
//! (`proxy_pass = "https://…"`).
//!
//! Why one enum rather than a boxed trait object: the plain case stays a
//! bare `TcpStream` with its borrowed, lock-free `split` and its
//! system-call-free idle probe, the same code as before HTTPS upstreams
//! existed; only a TLS connection pays for TLS. The TLS side is boxed: a
//! rustls client connection is large, and most connections are plain.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp;
use tokio_rustls::client::TlsStream;

/// An upstream connection's bytes.
pub(super) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// The reading half of [`Stream::split`].
pub(super) enum ReadHalf<'a> {
    Plain(tcp::ReadHalf<'a>),
    Tls(tokio::io::ReadHalf<&'a mut TlsStream<TcpStream>>),
}

/// The writing half of [`Stream::split`].
pub(super) enum WriteHalf<'a> {
    Plain(tcp::WriteHalf<'a>),
    Tls(tokio::io::WriteHalf<&'a mut TlsStream<TcpStream>>),
}

impl Stream {
    /// Read and write at once (a request body sent while the response is
    /// read). A TLS connection is one state machine for both directions, so
    /// its halves share it through tokio's lock; TCP's need none.
    pub(super) fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        match self {
            Stream::Plain(s) => {
                let (r, w) = s.split();
                (ReadHalf::Plain(r), WriteHalf::Plain(w))
            }
            Stream::Tls(s) => {
                let (r, w) = tokio::io::split(&mut **s);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
        }
    }

    /// No news from the upstream since the last response: not closed, no
    /// stray bytes. Costs no system call while the socket is quiet.
    ///
    /// On TLS, the records that came are decrypted first: a session
    /// ticket (TLS 1.3 servers may send one at any time) is taken in and
    /// changes nothing, while a `close_notify`, a TCP close, an error or
    /// any application byte means the connection is not reused.
    pub(super) fn is_quiet(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        match self {
            Stream::Plain(s) => match s.poll_read_ready(&mut cx) {
                Poll::Pending => true,
                Poll::Ready(Err(_)) => false,
                Poll::Ready(Ok(())) => {
                    let mut probe = [0u8; 1];
                    matches!(s.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
                }
            },
            Stream::Tls(s) => {
                let mut probe = [0u8; 1];
                let mut buf = ReadBuf::new(&mut probe);
                // Ready with no byte is close_notify (or EOF), with one a
                // stray byte: both end the connection, as errors do.
                Pin::new(&mut **s).poll_read(&mut cx, &mut buf).is_pending()
            }
        }
    }
}

impl Drop for Stream {
    /// A TLS connection is closed as nginx closes its own (`SSL_shutdown`):
    /// with a `close_notify`, written if the socket takes it now (never
    /// waited for), so the upstream sees an orderly close, not a truncation.
    fn drop(&mut self) {
        let Stream::Tls(s) = self else { return };
        let (tcp, tls) = s.get_mut();
        tls.send_close_notify();
        let mut out = TryWrite(tcp);
        while tls.wants_write() {
            match tls.write_tls(&mut out) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }
}

/// Writes what the socket takes at once, never blocking.
struct TryWrite<'a>(&'a TcpStream);

impl io::Write for TryWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `$name` dispatches `AsyncRead` to each variant.
macro_rules! read_by_variant {
    ($name:ident) => {
        impl AsyncRead for $name<'_> {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $name::Plain(s) => Pin::new(s).poll_read(cx, buf),
                    $name::Tls(s) => Pin::new(s).poll_read(cx, buf),
                }
            }
        }
    };
}

/// `$name` dispatches `AsyncWrite` to each variant.
macro_rules! write_by_variant {
    ($name:ident $(<$l:lifetime>)?) => {
        impl AsyncWrite for $name $(<$l>)? {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $name::Plain(s) => Pin::new(s).poll_write(cx, buf),
                    $name::Tls(s) => Pin::new(s).poll_write(cx, buf),
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $name::Plain(s) => Pin::new(s).poll_flush(cx),
                    $name::Tls(s) => Pin::new(s).poll_flush(cx),
                }
            }

            fn poll_shutdown(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $name::Plain(s) => Pin::new(s).poll_shutdown(cx),
                    $name::Tls(s) => Pin::new(s).poll_shutdown(cx),
                }
            }
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

read_by_variant!(ReadHalf);
write_by_variant!(Stream);
write_by_variant!(WriteHalf<'_>);
