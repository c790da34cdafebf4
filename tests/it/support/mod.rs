//! The integration-test harness: real nginx, the real sluice binary, a raw HTTP/1.1 client and an
//! echo upstream, all on 127.0.0.1.
//!
//! # Layout
//! - [`ports`]: [`free_port`], never the same port twice in one test binary.
//! - [`process`]: child processes that stop on Drop (and when the test binary dies), and the wait
//!   until a child's ports accept connections.
//! - [`nginx`]: [`Nginx`], a real nginx in a temporary prefix; [`nginx_binary`] finds it or panics.
//! - [`sluice`]: [`Sluice`], the binary under test with a temporary config file.
//! - [`upstream`]: [`Upstream`], an in-process echo server that counts the requests it answers.
//! - [`client`]: [`request`], [`burst`] and [`fire`], a raw HTTP/1.1 client that binds its source
//!   address (127.0.0.2, 127.0.0.3, … are different clients to a limiter keyed on the address).
//! - [`compare`]: the status and latency comparisons (±[`TOLERANCE`]) with readable tables.
//! - [`logs`]: parsing nginx-format `limiting requests` / `delaying request` error-log lines.
//! - [`quiet`]: [`timing`] and [`heavy`], which keep latency comparisons and the conformance
//!   suite's load apart.
//! - [`raw`], [`readings`], [`recorder`]: raw byte exchanges, the ways a backend may split a
//!   byte stream into requests, and an upstream that records every byte (the conformance suite).
//!
//! Rules every test follows: servers bind 127.0.0.1 on free ports, each test owns its processes
//! (tests run in parallel), nothing is skipped silently (a missing nginx is a panic), and every
//! scenario also checks nginx against the reference's absolute numbers, so a broken harness
//! cannot make both sides agree on nonsense.

// Each test module uses a different part of the harness; not every helper is used by a test yet.
#![allow(dead_code, unused_imports)]

mod client;
mod compare;
mod logs;
mod nginx;
mod ports;
mod process;
mod quiet;
pub mod raw;
pub mod readings;
pub mod recorder;
mod sluice;
mod upstream;

pub use client::{Reply, Request, burst, fire, request};
pub use compare::{
    TOLERANCE, assert_expected, assert_same, expect, group_by_source, status_counts,
};
pub use logs::{Event, LimitLine, assert_same_limit_lines, conn_lines, limit_lines};
pub use nginx::{Nginx, nginx_binary};
pub use ports::free_port;
pub use quiet::{Heavy, Timing, heavy, timing};
pub use sluice::Sluice;
pub use upstream::Upstream;

use std::net::{IpAddr, Ipv4Addr};

/// How long a test lets sluice's batched error- and access-log lines reach their files
/// before reading it (they trail their responses by microseconds).
pub const LOG_SETTLE: std::time::Duration = std::time::Duration::from_millis(30);

/// Client source address `127.0.0.N`. On Linux the whole of 127.0.0.0/8 is local, so each `N`
/// is a distinct client for `$binary_remote_addr` without any setup.
pub fn client(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}
