//! The harness before the one spawner, kept while tests move off it.
#![allow(dead_code)]
pub mod nginx;
pub mod ports;
pub mod process;
pub mod sluice;
pub use nginx::Nginx;
pub use ports::free_port;
pub use sluice::Sluice;
