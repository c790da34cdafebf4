//! gRPC calls by status: `sluice_grpc_calls{code="…"}` counts every call on
//! a `grpc_pass` location when it ends, by the `grpc-status` it ended with
//! — the upstream's (in its trailers, or its trailers-only answer) or
//! sluice's own (a limit, `deny`, an upstream that failed). HTTP statuses
//! say little about gRPC: every call is a 200, its outcome is in the
//! trailers. A call that ended without a status is counted `CANCELLED`
//! when the client left first, `UNKNOWN` when the answer carried none.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// gRPC's status codes, by number (the gRPC "Status codes" document).
pub const CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The code label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Code {
    code: &'static str,
}

/// One counter per code, taken from the family once: counting a call is
/// one atomic add.
#[derive(Clone)]
pub struct GrpcCalls(Arc<[Counter; CODES.len()]>);

impl GrpcCalls {
    pub(super) fn register(registry: &mut Registry) -> GrpcCalls {
        let family = Family::<Code, Counter>::default();
        registry.register(
            "sluice_grpc_calls",
            "gRPC calls on grpc_pass locations by the grpc-status they ended with (the upstream's or sluice's own answer)",
            family.clone(),
        );
        GrpcCalls(Arc::new(
            CODES.map(|code| family.get_or_create(&Code { code }).clone()),
        ))
    }

    /// A call ended with `grpc-status` `code` (one beyond 16 counts as
    /// UNKNOWN, as gRPC clients read it).
    pub fn count(&self, code: u32) {
        let i = usize::try_from(code).ok().filter(|&i| i < CODES.len());
        self.0[i.unwrap_or(2)].inc();
    }

    /// Calls so far, by code name (the status API's view).
    pub fn by_code(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        CODES.iter().zip(self.0.iter()).map(|(n, c)| (*n, c.get()))
    }
}

/// `grpc-status`'s value as a number (`None`: absent or not a number).
pub fn parse_status(v: &[u8]) -> Option<u32> {
    if v.is_empty() || v.len() > 9 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}
