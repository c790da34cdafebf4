//! gRPC calls by status: `sluice_grpc_calls{code="…"}` counts every call on
//! a `grpc_pass` location when it ends, by the `grpc-status` it ended with
//! — the upstream's (in its trailers, or its trailers-only answer) or
//! sluice's own (a limit, `deny`, an upstream that failed). HTTP statuses
//! say little about gRPC: every call is a 200, its outcome is in the
//! trailers. A call that ended without a status is counted `CANCELLED`
//! when the client left first, `UNKNOWN` when the answer carried none.

use crate::respond::grpc::Code;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// Codes by number.
const CODES: usize = Code::ALL.len();

/// The code label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Label {
    code: &'static str,
}

/// One counter per code, taken from the family once: counting a call is
/// one atomic add.
#[derive(Clone)]
pub struct GrpcCalls(Arc<[Counter; CODES]>);

impl GrpcCalls {
    pub(super) fn register(registry: &mut Registry) -> GrpcCalls {
        let family = Family::<Label, Counter>::default();
        registry.register(
            "sluice_grpc_calls",
            "gRPC calls on grpc_pass locations by the grpc-status they ended with (the upstream's or sluice's own answer)",
            family.clone(),
        );
        GrpcCalls(Arc::new(
            Code::ALL.map(|c| family.get_or_create(&Label { code: c.name() }).clone()),
        ))
    }

    /// A call ended with `grpc-status` `code` (one beyond 16 counts as
    /// UNKNOWN, as gRPC clients read it).
    pub fn count(&self, code: u32) {
        let i = usize::try_from(code).ok().filter(|&i| i < CODES);
        self.0[i.unwrap_or(Code::Unknown as usize)].inc();
    }

    /// Calls so far, by code name (the status API's view).
    pub fn by_code(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Code::ALL
            .iter()
            .zip(self.0.iter())
            .map(|(code, c)| (code.name(), c.get()))
    }
}
