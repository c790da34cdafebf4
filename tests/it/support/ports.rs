//! Ports on 127.0.0.1 that no one else takes.
//!
//! A [`Port`] is a socket bound to `127.0.0.1:0` with `SO_REUSEADDR`, that never listens. While
//! it is held, the kernel hands the port to no one else (neither a `bind` to port 0 nor an
//! outgoing connection's source port), a connection to it is refused (a "dead" upstream), and a
//! server that binds with `SO_REUSEADDR` — sluice (tokio), nginx and redis-server all do — can
//! still listen on it. So there is no window between picking a port and the child binding it:
//! the old probe-and-release `free_port` raced with every other process on the machine.
//! [`super::spawn::with_ports`] still retries on `EADDRINUSE`, for anything that slips through.

use std::net::{Ipv4Addr, SocketAddr};

/// A reserved port; released on Drop.
pub struct Port {
    socket: tokio::net::TcpSocket,
    addr: SocketAddr,
}

impl Port {
    /// A port the kernel picks, reserved for this test.
    pub fn reserve() -> Port {
        let socket = tokio::net::TcpSocket::new_v4().expect("create a TCP socket");
        socket.set_reuseaddr(true).expect("SO_REUSEADDR");
        socket
            .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .unwrap_or_else(|e| panic!("cannot bind 127.0.0.1:0 to reserve a port: {e}"));
        let addr = socket
            .local_addr()
            .expect("local address of a bound socket");
        Port { socket, addr }
    }

    pub fn number(&self) -> u16 {
        self.addr.port()
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let _ = &self.socket;
        write!(f, "Port({})", self.addr)
    }
}

/// A tokio listener on 127.0.0.1, a free port, for a test server (`what`, in
/// panics). Must be called inside a tokio runtime.
pub fn local_listener(what: &str) -> tokio::net::TcpListener {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap_or_else(|e| panic!("bind the {what} on 127.0.0.1:0: {e}"));
    std_listener
        .set_nonblocking(true)
        .unwrap_or_else(|e| panic!("non-blocking {what} listener: {e}"));
    tokio::net::TcpListener::from_std(std_listener)
        .unwrap_or_else(|e| panic!("the {what} must start inside a tokio runtime: {e}"))
}
