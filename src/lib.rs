//! sluice: nginx's `limit_req` in front of any HTTP backend.
//!
//! # Layout
//! A request's path, top to bottom: [`control`] runs the process and drives
//! a [`server::Server`], whose connections hand each request to
//! `request::handle`; the request reads the compiled [`config::Config`]
//! and the [`limiter`]. Imports only go down the layers below (held by
//! `tests/it/layout.rs`), and each layer's modules are:
//!
//! - [`control`]: running the process: signals (reload, reopen, stop), the
//!   pid file, the file watcher, `sluice reload`.
//! - [`server`]: an embeddable server: worker threads (one runtime per
//!   core), listeners and accept loops, one client connection, the head
//!   gate's socket with nginx's timeouts, refused heads, the admin listener,
//!   reload and graceful stop.
//! - [`request`]: one request's phases: find (server, realip, path,
//!   location), limit_req, limit_conn, content (`return` or upstream),
//!   finish; every early end is a `ProxyError` answered in one place.
//! - [`metrics`]: Prometheus counters for the admin listener;
//!   [`check`]: the summary `sluice check` prints; [`simulate`]: `sluice
//!   simulate`, the limiter's algorithms compared over a request sequence;
//!   [`import`]: `sluice import-nginx`, an nginx.conf translated into
//!   sluice's TOML (checked by [`config`]'s own stages); [`top`]: `sluice
//!   top`, the admin API's zones, top keys and upstreams in a terminal.
//! - [`config`]: the TOML file → a validated [`config::Spec`], every error
//!   reported as `FILE:LINE:COL: message` → the [`config::Config`] that
//!   serves (inheritance resolved, zones allocated, locations in nginx's
//!   lookup order).
//! - [`accesslog`]: nginx's access log; [`connlimit`]: `limit_conn`
//!   (requests in flight per key) and `worker_connections`; [`upstream`]:
//!   sluice's own HTTP/1.1 client with kept-alive connections per worker;
//!   [`client_body`]: a request body cut at `client_max_body_size` and read
//!   whole before it is forwarded (nginx's `proxy_request_buffering`);
//!   [`compress`]: nginx's gzip filter, and zstd and brotli beside it.
//! - [`respond`]: responses sluice makes itself (error pages,
//!   problem+json); [`conn_state`]: one client connection's state, shared by its
//!   reader and its requests.
//! - [`vars`]: nginx variables in keys, logs, error pages and `return`.
//! - [`limiter`]: nginx's leaky bucket and multi-limit accounting, pure
//!   (time is an argument), over a store seam (memory, Redis); it imports
//!   nothing from the rest of the crate.
//! - [`errlog`]: nginx-format error-log lines through `tracing`.
//! - Leaves: [`fmt`] (nginx's renderings of numbers, addresses and times),
//!   [`batch`] (log lines written per worker in batches), [`body`] (the
//!   response body type), [`clock`] (the only place that reads clocks),
//!   [`http1`] (request heads and chunked bodies read with nginx's rules,
//!   before hyper: what nginx refuses never reaches the upstream),
//!   [`http2`] (every frame an HTTP/2 client sends, before hyper: request
//!   heads judged by [`http1`]'s gate, frame floods cut),
//!   [`proxy_protocol`] (the PROXY protocol header a load balancer sends
//!   before a connection's bytes), [`realip`] (nginx's `real_ip`), [`tls`] (certificates read and
//!   checked at load, the rustls server configuration).
//! - `fuzzing` (tests and the `fuzzing` feature only): the checks of the
//!   fuzz targets in `fuzz/`, shared with the corpus replay of the tests.

pub mod access;
pub(crate) mod accesslog;
pub(crate) mod batch;
pub(crate) mod body;
pub mod check;
pub(crate) mod client_body;
pub(crate) mod clock;
pub(crate) mod compress;
pub mod config;
pub(crate) mod conn_state;
pub(crate) mod connlimit;
pub mod control;
pub mod errlog;
pub(crate) mod fmt;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub(crate) mod headers;
pub(crate) mod http1;
pub(crate) mod http2;
pub mod import;
pub mod limiter;
pub(crate) mod metrics;
pub(crate) mod proxy_protocol;
pub(crate) mod realip;
pub(crate) mod request;
pub(crate) mod respond;
pub mod server;
pub mod simulate;
pub(crate) mod tls;
pub mod top;
pub(crate) mod upstream;
pub mod vars;
