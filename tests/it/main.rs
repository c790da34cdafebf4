mod support;

mod article;
mod client_contract;
mod nginx_diff;
mod proxy;
