//! Free TCP ports on 127.0.0.1.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, OnceLock};

/// A TCP port on 127.0.0.1 that nothing listens on right now.
///
/// The kernel picks it (bind to port 0); the listener is closed before returning so a child
/// process can bind it. Tests run in parallel in one binary, so ports already handed out by this
/// process are never handed out again.
pub fn free_port() -> u16 {
    static GIVEN: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let given = GIVEN.get_or_init(|| Mutex::new(HashSet::new()));
    for _ in 0..1000 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap_or_else(|e| panic!("cannot bind 127.0.0.1:0 to find a free port: {e}"));
        let port = listener
            .local_addr()
            .expect("local address of a bound listener")
            .port();
        if given.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return port;
        }
    }
    panic!("no free port found on 127.0.0.1 after 1000 attempts");
}
