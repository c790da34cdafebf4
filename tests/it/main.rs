//! The integration tests: one binary, real sockets, real nginx and Redis.

// The tests time real processes (nginx, Redis, sluice) over real sockets:
// std's clock is the right one here; clippy.toml bars it only from src/.
#![allow(clippy::disallowed_methods)]

mod support;

mod admin_api;
mod admin_dashboard;
mod admin_top;
mod article;
mod client_contract;
mod compress;
mod conformance;
mod docs;
mod error_log;
mod first_run;
mod grpc;
mod grpc_hostile;
mod h1diff;
mod h2;
mod h3;
mod import;
mod layout;
mod limit_conn;
mod nginx_diff;
mod ops;
mod packaging;
mod proxy;
mod redis;
mod simulate;
mod tls;
