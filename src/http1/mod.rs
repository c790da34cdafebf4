//! The client side of HTTP/1.1 as nginx reads it: every request head and
//! every chunked request body passes through here before hyper sees a byte.
//!
//! Why a reader of our own in front of hyper: sluice must never forward a
//! request nginx would refuse, and the upstream must read exactly the
//! requests sluice limited and logged. hyper's parser is correct but more
//! lenient than nginx in the places request smuggling lives (header names
//! with `_`, `Content-Length` beside `Transfer-Encoding`, codings before
//! `chunked`, duplicate `Host`, …), and it keeps 16 KB of buffers for a
//! connection from its first byte, which a slowloris pays per connection.
//!
//! So [`head`] reads a request head with nginx's rules (its request-line and
//! header-line grammar, its unique headers, its `Host` validation, its
//! `large_client_header_buffers` arithmetic) and answers either nginx's
//! refusal (status and error-log reason) or a *canonical* head: one space
//! between the parts, `CRLF` line ends, the headers nginx would keep and
//! nothing else, origin-form target. hyper then parses only what we wrote,
//! so two parsers cannot disagree on a request. [`chunked`] checks a chunked
//! body with nginx's grammar and re-frames it canonically (no extensions, no
//! trailers, as nginx forwards none), so that hyper and sluice agree on
//! where every body ends. [`Gate`] is the per-connection state that runs
//! both over the bytes of the socket.
//!
//! HTTP/1.1 connections are now served by sluice's own loop
//! (`server::h1`): its gate ([`Gate::whole_heads`]) hands over each head
//! whole and each body as its data, and the loop makes the request of the
//! canonical head without a second parse. The canonical byte stream stays
//! for hyper's HTTP/1.1 server, kept beside the loop (`SLUICE_HTTP1_HYPER=1`)
//! while a differential test holds the two to the same bytes, and for HTTP/2,
//! whose heads are judged by the same rules.

pub mod chunked;
pub mod fields;
pub mod gate;
pub mod head;

pub use chunked::ChunkError;
#[cfg(any(test, feature = "fuzzing"))]
pub use chunked::Chunked;
pub use fields::{Fields, lowercase};
pub use gate::{Fill, Gate};
#[cfg(any(test, feature = "fuzzing"))]
pub use head::parse_head;
pub use head::{Framing, Head};
pub use head::{HeadParser, HeadRules, Parsed, Refusal, any_control_byte, upgrade_asked};
