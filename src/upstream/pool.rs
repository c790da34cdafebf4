//! Upstream connections, and the ones kept alive between requests: nginx's
//! `keepalive` cache, one per worker thread.
//!
//! Why per worker and lock-free: a request runs on its worker's
//! current-thread runtime from start to end, so the connection it takes
//! and gives back never crosses threads; a thread-local list needs no lock,
//! no channel and no task per connection. A connection is checked in by the
//! response body the moment its last byte is read (see `super::body`), and
//! one sweeper task per worker closes those that expired or that the
//! upstream closed, so they do not sit in CLOSE_WAIT.
//!
//! TLS connections are kept the same way, under a [`Key`] that names how
//! they were made: a request only ever rides a connection made to its
//! upstream, with its scheme, its TLS settings and its TLS name.

use super::Error;
use super::stream::Stream;
use super::tls::{self, Tls};
use bytes::BytesMut;
use http::uri::Authority;
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// Idle connections kept per upstream and worker thread.
const MAX_IDLE: usize = 512;
/// A connection idle for longer is closed, not reused (nginx's upstream
/// `keepalive_timeout` default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often each worker closes idle connections that expired or that the
/// upstream closed.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// Read buffer growth.
pub(super) const READ_CHUNK: usize = 8 * 1024;

/// One upstream connection and its buffers, reused with it.
pub(super) struct Conn {
    pub(super) stream: Stream,
    pub(super) read: BytesMut,
    pub(super) write: Vec<u8>,
    /// `proxy_read_timeout`, for every read of its responses.
    pub(super) timer: crate::clock::WaitTimer,
}

impl Conn {
    /// No news from the upstream since the last response (see
    /// [`Stream::is_quiet`]).
    fn is_quiet(&mut self) -> bool {
        self.stream.is_quiet()
    }
}

/// What a kept-alive connection may be reused for: its upstream (as
/// written in `proxy_pass`), and for TLS the settings and name it was made
/// with.
#[derive(Clone)]
pub(super) struct Key {
    authority: Authority,
    tls: Option<Arc<Tls>>,
    /// An upstream group's `keepalive`: how many idle connections its
    /// servers keep together (else [`MAX_IDLE`] per server).
    keepalive: Option<Keepalive>,
}

/// An upstream group's `keepalive N`: at most `idle` connections kept for
/// all its servers, per worker thread; `group` tells the group's lists
/// apart (any value unique to the group while it serves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    pub group: usize,
    pub idle: usize,
}

impl Key {
    pub(super) fn new(authority: &Authority, tls: Option<&Arc<Tls>>) -> Key {
        Key {
            authority: authority.clone(),
            tls: tls.cloned(),
            keepalive: None,
        }
    }

    /// Its connections speak TLS.
    pub(super) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The key of a connection to a server of a group with `keepalive`.
    pub(super) fn kept(mut self, keepalive: Option<Keepalive>) -> Key {
        self.keepalive = keepalive;
        self
    }

    /// A connection made for `self` may carry a request for `other` (a
    /// group's connections are its own, as nginx's `keepalive` cache).
    /// Compared by bytes: few upstreams per worker, so a list beats hashing
    /// on every request.
    pub(super) fn matches(&self, other: &Key) -> bool {
        self.authority.as_str().as_bytes() == other.authority.as_str().as_bytes()
            && self.keepalive.map(|k| k.group) == other.keepalive.map(|k| k.group)
            && match (&self.tls, &other.tls) {
                (None, None) => true,
                (Some(a), Some(b)) => a.same(b),
                _ => false,
            }
    }
}

struct Idle {
    conn: Conn,
    /// The pool's sweep count when it was checked in.
    since: u64,
}

thread_local! {
    /// This worker's idle upstream connections, most recently used last.
    static IDLE: RefCell<Pool> = RefCell::new(Pool::default());
}

/// Idle connections per [`Key`]. Few upstreams per worker, so a list
/// (compared by bytes) beats hashing the authority on every request; age is
/// counted in sweeps, so checking in and out reads no clock.
#[derive(Default)]
struct Pool {
    idle: Vec<(Key, Vec<Idle>)>,
    sweeps: u64,
    sweeping: bool,
}

/// Sweeps an idle connection may live through: [`IDLE_TIMEOUT`] give or
/// take one sweep.
const MAX_SWEEPS: u64 = IDLE_TIMEOUT.as_secs() / SWEEP_EVERY.as_secs();

impl Pool {
    fn list(&mut self, key: &Key) -> Option<&mut Vec<Idle>> {
        self.idle
            .iter_mut()
            .find(|(k, _)| k.matches(key))
            .map(|(_, l)| l)
    }

    /// Below `k.idle` idle connections for `k`'s group: the oldest ones
    /// closed (this server's first, the lists keep the oldest first).
    fn make_room(&mut self, key: &Key, k: Keepalive) {
        let group = |o: &Key| o.keepalive.is_some_and(|o| o.group == k.group);
        loop {
            let held: usize = self
                .idle
                .iter()
                .filter(|(o, _)| group(o))
                .map(|(_, l)| l.len())
                .sum();
            if held < k.idle.max(1) {
                return;
            }
            let own = self
                .idle
                .iter()
                .position(|(o, l)| o.matches(key) && !l.is_empty());
            let any = || {
                self.idle
                    .iter()
                    .position(|(o, l)| group(o) && !l.is_empty())
            };
            match own.or_else(any) {
                Some(at) => drop(self.idle[at].1.remove(0)),
                None => return,
            }
        }
    }

    /// The list for `key`, made on its first check-in.
    fn list_or_new(&mut self, key: &Key) -> &mut Vec<Idle> {
        let at = match self.idle.iter().position(|(k, _)| k.matches(key)) {
            Some(at) => at,
            None => {
                self.idle.push((key.clone(), Vec::new()));
                self.idle.len() - 1
            }
        };
        &mut self.idle[at].1
    }
}

/// A kept-alive connection to `key` that is still fit for a request, if
/// this worker has one.
pub(super) fn checkout(key: &Key) -> Option<Conn> {
    IDLE.with(|p| {
        let mut p = p.borrow_mut();
        let sweeps = p.sweeps;
        let list = p.list(key)?;
        while let Some(mut idle) = list.pop() {
            // A connection the upstream wrote to since (a 408 before
            // closing, stray bytes) is not reused: nginx closes it too.
            if sweeps - idle.since < MAX_SWEEPS && idle.conn.is_quiet() {
                return Some(idle.conn);
            }
        }
        None
    })
}

/// Keeps `conn` for the next request to `key` (up to [`MAX_IDLE`], or its
/// group's `keepalive`, which closes the group's least recently used one
/// to make room, as nginx), and starts this worker's sweeper the first
/// time.
pub(super) fn checkin(key: &Key, conn: Conn) {
    let start_sweeper = IDLE.with(|p| {
        let mut p = p.borrow_mut();
        let since = p.sweeps;
        if let Some(k) = key.keepalive {
            p.make_room(key, k);
            p.list_or_new(key).push(Idle { conn, since });
        } else {
            let list = p.list_or_new(key);
            if list.len() < MAX_IDLE {
                list.push(Idle { conn, since });
            }
        }
        !std::mem::replace(&mut p.sweeping, true)
    });
    if start_sweeper {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(sweeper());
            }
            Err(_) => IDLE.with(|p| p.borrow_mut().sweeping = false),
        }
    }
}

/// Runs on each worker that has kept a connection: closes the expired and
/// the upstream-closed ones, so they do not sit in CLOSE_WAIT.
async fn sweeper() {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        IDLE.with(|p| {
            let mut p = p.borrow_mut();
            p.sweeps += 1;
            let sweeps = p.sweeps;
            for (_, list) in &mut p.idle {
                list.retain_mut(|i| sweeps - i.since < MAX_SWEEPS && i.conn.is_quiet());
            }
            // A reload makes new TLS settings, so new keys: the old ones go
            // with their last connection.
            p.idle
                .retain(|(k, list)| !list.is_empty() || k.tls.is_none());
        });
    }
}

/// A new connection for `key`, its TLS handshake included, within
/// `proxy_connect_timeout` (nginx counts the handshake in it).
pub(super) async fn connect(key: &Key, timeout: Duration) -> Result<Conn, Error> {
    let upstream = &key.authority;
    let default_port = if key.tls.is_some() { 443 } else { 80 };
    let port = upstream.port_u16().unwrap_or(default_port);
    let host = upstream
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    // One deadline for both: the handshake has what the connect left.
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let tcp = tokio::select! {
        made = TcpStream::connect((host, port)) => made.map_err(Error::Connect)?,
        () = &mut deadline => return Err(Error::ConnectTimeout),
    };
    let _ = tcp.set_nodelay(true);
    let stream = match &key.tls {
        None => Stream::Plain(tcp),
        Some(t) => tokio::select! {
            made = tls::handshake(tcp, t) => Stream::Tls(Box::new(made?)),
            () = &mut deadline => return Err(Error::HandshakeTimeout),
        },
    };
    Ok(Conn {
        stream,
        read: BytesMut::with_capacity(READ_CHUNK),
        write: Vec::with_capacity(1024),
        timer: crate::clock::WaitTimer::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::tls::{Settings, client_config};
    use rustls::pki_types::ServerName;

    fn config(sni: bool) -> Arc<rustls::ClientConfig> {
        let s = Settings {
            roots: None,
            client: None,
            protocols: crate::tls::DEFAULT_PROTOCOLS,
            sni,
        };
        client_config(&s).unwrap()
    }

    fn tls(config: &Arc<rustls::ClientConfig>, name: &str) -> Arc<Tls> {
        let name = ServerName::try_from(name.to_string()).unwrap();
        Arc::new(Tls::new(config.clone(), name, false))
    }

    fn key(authority: &str, tls: Option<&Arc<Tls>>) -> Key {
        Key::new(&authority.parse().unwrap(), tls)
    }

    /// A request rides only a connection made the way it would make one:
    /// same upstream, same scheme, same TLS configuration, same TLS name.
    #[test]
    fn keys_separate_scheme_settings_and_name() {
        let (a, b) = (config(true), config(true));
        let plain = key("up:8443", None);
        let one = key("up:8443", Some(&tls(&a, "up")));
        assert!(plain.matches(&key("up:8443", None)));
        assert!(
            !plain.matches(&one) && !one.matches(&plain),
            "TLS is not plain"
        );
        assert!(!plain.matches(&key("up:8444", None)), "another port");

        // Two locations with the same settings share one configuration,
        // so their connections are one pool.
        assert!(one.matches(&key("up:8443", Some(&tls(&a, "up")))));
        // Another configuration (another CA, client certificate, protocol,
        // or SNI off), even with equal contents: not the same connections.
        assert!(!one.matches(&key("up:8443", Some(&tls(&b, "up")))));
        assert!(!one.matches(&key("up:8443", Some(&tls(&config(false), "up")))));
        // Another proxy_ssl_name: the connection verified another name.
        assert!(!one.matches(&key("up:8443", Some(&tls(&a, "other")))));
        assert!(!one.matches(&key("other:8443", Some(&tls(&a, "up")))));
    }

    /// The lists of the pool follow the keys: a connection checked in
    /// under one key is not checked out under another.
    #[tokio::test]
    async fn checkout_follows_the_key() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let _accepting = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = l.accept().await {
                held.push(s);
            }
        });
        let plain = key(&addr, None);
        let conn = connect(&plain, Duration::from_secs(1)).await.unwrap();
        checkin(&plain, conn);
        let c = config(true);
        let as_tls = key(&addr, Some(&tls(&c, "127.0.0.1")));
        assert!(checkout(&as_tls).is_none(), "a plain connection for TLS");
        assert!(checkout(&plain).is_some());
        assert!(checkout(&plain).is_none(), "checked out once");
    }

    /// A group's `keepalive = 2`: two idle connections for all its servers
    /// together, the least recently used closed for a new one; another
    /// group's and plain proxy_pass's lists are not touched.
    #[tokio::test]
    async fn keepalive_caps_a_group_across_its_servers() {
        let mut addrs = Vec::new();
        for _ in 0..2 {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addrs.push(l.local_addr().unwrap().to_string());
            tokio::spawn(async move {
                let mut held = Vec::new();
                while let Ok((s, _)) = l.accept().await {
                    held.push(s);
                }
            });
        }
        let k = Some(Keepalive { group: 7, idle: 2 });
        let (a, b) = (key(&addrs[0], None).kept(k), key(&addrs[1], None).kept(k));
        let plain = key(&addrs[0], None);
        let t = Duration::from_secs(1);
        checkin(&plain, connect(&plain, t).await.unwrap());
        checkin(&a, connect(&a, t).await.unwrap());
        checkin(&b, connect(&b, t).await.unwrap());
        checkin(&b, connect(&b, t).await.unwrap());
        let idle = |k: &Key| IDLE.with(|p| p.borrow_mut().list(k).map_or(0, |l| l.len()));
        assert_eq!(idle(&b), 1, "b's oldest made room for its newest");
        assert_eq!(idle(&a), 1);
        assert_eq!(idle(&plain), 1, "not the group's: its own list");
        checkin(&a, connect(&a, t).await.unwrap());
        assert_eq!((idle(&a), idle(&b)), (1, 1), "a's own oldest went");
    }
}
