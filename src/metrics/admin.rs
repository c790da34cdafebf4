//! `sluice_admin_requests`: how the admin listener's requests ended.

use super::Outcome;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// How an admin listener request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdminResult {
    Ok,
    NotFound,
    /// The client's address is not loopback nor in `[admin] allow`.
    Forbidden,
    /// A write without the token, or with a wrong one.
    Unauthorized,
    /// A write, and no `token_file`: writes are off.
    WritesOff,
}

impl AdminResult {
    pub(super) const ALL: [AdminResult; 5] = [
        AdminResult::Ok,
        AdminResult::NotFound,
        AdminResult::Forbidden,
        AdminResult::Unauthorized,
        AdminResult::WritesOff,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            AdminResult::Ok => "ok",
            AdminResult::NotFound => "not_found",
            AdminResult::Forbidden => "forbidden",
            AdminResult::Unauthorized => "unauthorized",
            AdminResult::WritesOff => "writes_off",
        }
    }
}

pub(super) fn register_admin(registry: &mut Registry) -> Family<Outcome, Counter> {
    let admin = Family::<Outcome, Counter>::default();
    registry.register(
        "sluice_admin_requests",
        "Admin listener requests by result (ok, not_found, forbidden: an address not allowed, unauthorized: no or a wrong token, writes_off: a write without token_file)",
        admin.clone(),
    );
    for result in AdminResult::ALL {
        drop(admin.get_or_create(&Outcome {
            result: result.label(),
        }));
    }
    admin
}
