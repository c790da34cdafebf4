mod support;

mod article;
mod nginx_diff;
mod proxy;
mod client_contract;
