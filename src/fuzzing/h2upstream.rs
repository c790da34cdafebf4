//! The `h2upstream` fuzz target: what a hostile HTTP/2 upstream sends to
//! a `grpc_pass` connection, interleaved with what its calls do. The
//! harness and its checks live beside the state they drive
//! (`crate::upstream::h2conn`, whose fields they read), this is its entry.

/// See the `h2conn::fuzz` module: bytes as operations (open a stream,
/// send, read, cancel, reset, a frame from the upstream); no panic, and
/// flow control, stream order and the state's bookkeeping hold throughout.
pub fn h2upstream(data: &[u8]) {
    crate::upstream::h2conn_frames(data);
}
