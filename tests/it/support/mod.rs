//! The integration-test harness: real nginx, real redis-server, the real sluice binary (or
//! sluice in-process), a raw HTTP/1.1 client and an echo upstream, all on 127.0.0.1.
//!
//! # Layout
//! - [`spawn`]: the one process spawner. A [`Process`] is stopped on Drop and when the test
//!   binary dies (parent-death signal), writes stdout and stderr to files, and is waited for
//!   until it accepts on its ports or exits; [`with_ports`] retries a start whose ports were
//!   taken on new ones.
//! - [`ports`]: [`Port`], a port reserved for the test (bound, never listening) that a server
//!   can still listen on: no probe-and-release race with other processes.
//! - [`config`]: completes configurations with the reserved ports: `[[servers]]` and `[admin]`
//!   tables, and nginx `server { }` blocks, without `listen` get one.
//! - [`sluice`]: [`Sluice`] (built by [`SluiceBuilder`]), the binary under test in its own
//!   directory: error log (read, wait for a line), access log, reload (SIGHUP or `sluice
//!   reload`), signals, exit; or [`InProcess`], the same configuration served in the test
//!   process, for tests that read no error-log line and send no signal.
//! - [`inproc`]: the one function that serves a configuration in-process, and the only use of
//!   sluice's library API in the harness (the file to adapt when the server's API moves).
//! - [`nginx`]: [`Nginx`], a real nginx in a temporary prefix; [`nginx_binary`] finds it or panics.
//! - [`haproxy`]: [`Haproxy`], a real HAProxy in TCP mode that passes each client's connection on
//!   with a PROXY protocol header ([`ProxyVersion`] 1 or 2); [`haproxy_binary`] finds it or panics.
//! - [`redis`]: [`RedisServer`], a real redis-server; [`TlsFiles`], throw-away certificates.
//! - [`redis_cluster`]: [`RedisCluster`], 3 masters + 3 replicas joined by `redis-cli --cluster
//!   create`; [`Node`], one redis-server with arguments of the test's choosing.
//! - [`redis_sentinel`]: [`RedisSentinels`], a master, its replica and three sentinels.
//! - [`certs`]: [`TestCa`], a throw-away CA and the leaf certificates it signs (any names,
//!   ECDSA, RSA or Ed25519 keys), for the TLS tests.
//! - [`upstream`]: [`Upstream`], the one in-process upstream: an echo server that counts the
//!   requests it reads, or (by its [`Options`]) one that answers its name, its port, the
//!   request's body, nothing at all, late.
//! - [`http1`]: the one HTTP/1.x reader, of responses and requests: [`http1::parse`] for bytes
//!   in hand, [`Reader`] for a connection.
//! - [`client`]: the one client: [`request`], [`get`], [`exchange`], [`burst`] and [`fire`], all
//!   answering a [`Reply`], and [`connect`] for a connection the test writes on itself; the
//!   source address is bound (see [`client()`]).
//! - [`wait`]: [`eventually`], the one polling loop.
//! - [`compare`]: the status and latency comparisons (±[`TOLERANCE`]) with readable tables.
//! - [`logs`]: parsing nginx-format `limiting requests` / `delaying request` error-log lines.
//! - [`quiet`]: [`timing`] and [`heavy`], which keep latency comparisons and the conformance
//!   suite's load apart.
//! - [`raw`], [`readings`], [`recorder`]: raw byte exchanges, the ways a backend may split a
//!   byte stream into requests, and an upstream that records every byte (the conformance suite).
//!
//! Rules every test follows: servers bind 127.0.0.1 on reserved ports, each test owns its
//! processes (tests run in parallel), nothing is skipped silently (a missing nginx is a panic),
//! and every scenario also checks nginx against the reference's absolute numbers, so a broken
//! harness cannot make both sides agree on nonsense.

// Each test module uses a different part of the harness; not every helper is used by a test yet.
#![allow(dead_code, unused_imports)]

mod certs;
mod client;
mod compare;
mod config;
mod haproxy;
pub mod http1;
mod inproc;
mod logs;
mod nginx;
mod ports;
mod quiet;
pub mod raw;
pub mod readings;
pub mod recorder;
mod redis;
mod redis_cluster;
mod redis_sentinel;
mod sluice;
mod spawn;
mod upstream;
mod wait;

pub use certs::{KeyKind, Leaf, TestCa};
pub use client::{Reply, Request, burst, connect, exchange, fire, get, request};
pub use compare::{
    TOLERANCE, assert_expected, assert_same, expect, group_by_source, status_counts,
};
pub use haproxy::{Haproxy, ProxyVersion, haproxy_binary};
pub use http1::{Message, Reader};
pub use logs::{
    EXCESS_TOLERANCE, Event, LimitLine, assert_same_limit_lines, conn_lines, limit_lines,
};
pub use nginx::{Nginx, nginx_binary};
pub use ports::{Port, local_listener};
pub use quiet::{Heavy, Timing, heavy, timing};
pub use redis::{RedisServer, TlsFiles};
pub use redis_cluster::{Node, RedisCluster, wait_for};
pub use redis_sentinel::{MASTER_NAME, RedisSentinels};
pub use sluice::{InProcess, Sluice, SluiceBuilder};
pub use spawn::{Process, StartError, Stop, with_ports};
pub use upstream::{Answer, Options, Upstream};
pub use wait::{eventually, within};

use std::net::{IpAddr, Ipv4Addr};

/// How long a test lets sluice's batched error- and access-log lines reach their files
/// before reading it (they trail their responses by microseconds).
pub const LOG_SETTLE: std::time::Duration = std::time::Duration::from_millis(30);

/// Client source address `127.0.0.N`. On Linux the whole of 127.0.0.0/8 is local, so each `N`
/// is a distinct client for `$binary_remote_addr` without any setup.
pub fn client(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}
