mod support;

mod article;
mod client_contract;
mod conformance;
mod layout;
mod limit_conn;
mod nginx_diff;
mod ops;
mod proxy;
mod redis;
