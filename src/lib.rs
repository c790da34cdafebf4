//! sluice: nginx's `limit_req` in front of any HTTP backend.
//!
//! # Layout
//! - [`config`]: the TOML file → a validated [`config::Spec`], every error
//!   reported as `FILE:LINE:COL: message` → the [`config::Config`] that
//!   serves (inheritance resolved, zones allocated, locations in nginx's
//!   lookup order).
//! - [`connlimit`]: nginx's `limit_conn` (requests in flight per key) and
//!   `worker_connections` (open connections per worker thread).
//! - [`limiter`]: nginx's leaky bucket and multi-limit accounting, pure (time
//!   is an argument), over a store seam (memory now, remote later).
//! - [`vars`]: nginx variables in keys, error pages and `return` bodies.
//! - [`proxy`]: listeners, connections, and one request's life: location,
//!   limits, delay, `return` or upstream.
//! - [`respond`]: responses sluice makes itself (error pages, problem+json).
//! - [`errlog`]: nginx-format error-log lines through `tracing`.
//! - [`fmt`]: nginx's renderings of numbers, addresses and times, shared
//!   by the logs and the variables (a leaf: it imports nothing).
//! - [`batch`]: log lines written per worker in batches, not one write each.
//! - [`check`]: the summary `sluice check` prints.
//! - [`control`]: running the process: signals (reload, reopen, stop), the
//!   pid file, the file watcher, `sluice reload`.
//! - [`http1`]: request heads and chunked bodies read with nginx's rules,
//!   before hyper: what nginx refuses never reaches the upstream.
//! - [`client_body`]: a request body read whole before it is forwarded
//!   (nginx's `proxy_request_buffering`).
//! - [`client_io`]: what a client connection is allowed: header, keep-alive
//!   and send timeouts, body size.
//! - [`metrics`]: Prometheus counters for the admin listener.
//! - `fuzzing` (tests and the `fuzzing` feature only): the checks of the
//!   fuzz targets in `fuzz/`, shared with the corpus replay of the tests.

pub mod accesslog;
pub mod batch;
pub mod body;
pub mod check;
pub mod client_body;
pub mod clock;
pub mod config;
pub mod conn;
pub mod connlimit;
pub mod control;
pub mod errlog;
pub mod fmt;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod http1;
pub mod limiter;
pub mod metrics;
pub mod realip;
pub mod request;
pub mod respond;
pub mod server;
pub mod upstream;
pub mod vars;
