//! The client side of HTTP/2 as nginx reads it: every frame a client sends
//! passes through here before hyper's HTTP/2 server sees a byte.
//!
//! Why a reader in front of hyper, as [`crate::http1`] is for HTTP/1.1:
//! - one gate for both protocols: a request head that came as HPACK is
//!   decoded here to the client's own bytes and judged by the same
//!   [`crate::http1::HeadParser`] as an HTTP/1.1 head ([`request`]), so
//!   HTTP/2 can never be looser than HTTP/1.1; what nginx refuses gets
//!   nginx's answer on that stream alone, and the connection goes on;
//! - floods: every frame is counted by kind against what the connection
//!   was served ([`inbound`]), and a client past its budget is sent
//!   `GOAWAY ENHANCE_YOUR_CALM`, whatever the frame (PING, SETTINGS,
//!   WINDOW_UPDATE, PRIORITY, RST_STREAM, empty DATA, CONTINUATION,
//!   unknown kinds). A header block is bounded by its bytes, not by its
//!   number of frames.
//!
//! hyper then reads only header blocks sluice wrote (plain literals, which
//! never touch its HPACK table) and the client's other frames unchanged.

mod frames;
pub mod hpack;
mod huffman;
pub mod inbound;
pub mod ledger;
pub mod request;

pub use frames::{headers_fragment, write_headers};
pub use inbound::{Abort, Inbound};
