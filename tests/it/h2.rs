//! HTTP/2 to clients (h2c with prior knowledge, `http2 = true`), with real peers: curl
//! (`--http2-prior-knowledge`), h2load and nghttp (nghttp2-client), real nginx 1.22 with
//! `listen … http2` beside sluice for the same bursts, and a client of our own (the `h2` crate)
//! where a test needs each stream timed or reset, or raw frames.
//!
//! # Layout
//! - [`client`]: [`client::H2`], one connection driven stream by stream; [`raw`]: frames by hand;
//! - [`basics`]: curl through to the upstream, headers both ways, the access log, metrics,
//!   HTTP/1.1 beside HTTP/2 on one listener, `http2 = false`;
//! - [`limits`]: the burst over one connection against nginx (statuses and delays), h2load,
//!   a delayed stream not holding up another, limit_conn per stream, nginx-tests'
//!   h2_limit_req.t cases in our own words, a client resetting a delayed stream;
//! - [`reset`]: a client's RST_STREAM at each phase of a stream (nginx-tests' h2_limit_conn.t
//!   among them): its request and `limit_conn` count let go at once, its upstream closed;
//! - [`protections`]: advertised settings, header sizes, rapid reset, idle timeouts, a
//!   graceful stop;
//! - [`floods`]: floods of frames that serve no request (PING, SETTINGS, WINDOW_UPDATE,
//!   PRIORITY, RST_STREAM, empty DATA, CONTINUATION, unknown kinds) cut with ENHANCE_YOUR_CALM,
//!   and busy clients that are not (scripts/h2-flood.sh measures the same floods, nginx beside);
//! - [`park`]: idle connections parked (hyper's connection let go) and woken in step with
//!   real clients (python3-h2, the `h2` crate, curl over TLS), old streams' frames, timeouts;
//! - [`tls`]: HTTP/2 by ALPN on `ssl` listeners (curl, openssl s_client, h2load), `http2 =
//!   false` offering HTTP/1.1 only, the burst against nginx's `listen … ssl http2`;
//! - [`grpc_answers`]: what sluice answers gRPC calls itself on `grpc_pass` locations
//!   (trailers-only, by cause, error pages, `grpc_errors = "http"`, `grpc-timeout`);
//! - [`conformance`]: malformed and hostile requests (tests/it/h2/conformance.py writes their
//!   frames) against nginx and sluice side by side: each stream's answer, the connection's,
//!   and what the upstream received.

mod basics;
mod client;
mod conformance;
mod floods;
mod grpc_answers;
mod limits;
mod park;
mod protections;
mod raw;
mod reset;
mod tls;

use std::net::SocketAddr;
use std::process::Output;

use tokio::process::Command;

use crate::support::{Nginx, Port};

/// Runs a command of the nghttp2 or curl packages and returns its output (the test's runtime
/// keeps serving meanwhile: the upstreams live on it); a missing tool is a failure with the
/// package to install, never a skip.
async fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {program} ({e}): install it (curl; h2load and nghttp are in Debian's \
                 nghttp2-client; scripts/test.sh installs them)"
            )
        })
}

/// Real nginx with one `listen ADDR http2;` server (nginx 1.22 speaks only h2c there), whose
/// inside is `server`, after `http` (zones and the like). The harness gives ports to servers
/// without `listen`: a second, idle server takes that one.
struct NginxH2 {
    nginx: Nginx,
    port: Port,
}

impl NginxH2 {
    fn start(http: &str, server: &str) -> NginxH2 {
        NginxH2::listen("http2", http, server)
    }

    /// With `listen ADDR FLAGS` (`ssl http2`: ALPN offers h2 and http/1.1).
    fn listen(flags: &str, http: &str, server: &str) -> NginxH2 {
        let port = Port::reserve();
        let nginx = Nginx::start(&format!(
            "{http}\n  server {{\n    listen {} {flags};\n{server}\n  }}\n  server {{ return 444; }}\n",
            port.addr()
        ));
        NginxH2 { nginx, port }
    }

    fn addr(&self) -> SocketAddr {
        self.port.addr()
    }
}

/// HTTP/2's connection preface (RFC 9113 §3.4).
fn h2_preface() -> &'static [u8] {
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
}
