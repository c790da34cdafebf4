//! gRPC through `grpc_pass`, with a real gRPC stack on both ends (Debian's python3-grpcio:
//! tests/it/grpc/server.py upstream, tests/it/grpc/client.py in front), side by side with real
//! nginx 1.22's `grpc_pass`: each scenario runs through nginx, whose results are checked
//! against what gRPC promises (so a broken harness cannot make both sides agree on nonsense),
//! then through sluice with the equivalent configuration, whose results must be nginx's — what
//! the client saw (codes, messages, metadata, trailers, message counts and bytes) and what the
//! upstream saw (`:authority`, metadata, the deadline, the messages, whether the call was
//! cancelled). The upstream, grpcio's own server, also refuses a call without `te: trailers`
//! ("Missing :te header"), so every passing call shows the proxy sent it.
//!
//! # Layout
//! - [`peers`]: the shared gRPC server (servers `a`, `b`, TLS `s`, and a dead port), the
//!   client, and the views of a call that are compared;
//! - [`calls`]: unary with metadata and trailers, the three streaming kinds message by
//!   message, 4 MB messages, a thousand concurrent calls over one channel;
//! - [`ends`]: a client's cancellation and deadline reaching the upstream, failures passed
//!   through (status, message, trailing metadata), an unreachable upstream;
//! - [`upstreams`]: `grpcs://` verified (and refused), a group failing over a server that is
//!   down.
//!
//! Where sluice differs from nginx on purpose (issue #45: what sluice answers itself is a gRPC
//! trailers-only status, not nginx's HTTP 502), the test says so and compares the gRPC code only.

mod calls;
mod ends;
mod peers;
mod upstreams;

use crate::support::{Nginx, Sluice};

/// nginx with the `server { }` blocks `servers` (each listens `http2`, h2c with prior
/// knowledge, as gRPC clients without TLS speak; the harness gives each its port), after
/// `http` (upstream blocks). Request bodies up to 16 MB (nginx's 1 MB default would refuse the
/// 4 MB messages).
fn nginx(http: &str, servers: &[&str]) -> Nginx {
    let mut conf = format!("client_max_body_size 16m;\n{http}\n");
    for s in servers {
        conf.push_str(&format!("server {{\n  listen http2;\n{s}\n}}\n"));
    }
    Nginx::start(&conf)
}

/// sluice with one `[[servers]]` (`http2 = true`, so h2c with prior knowledge) per entry of
/// `servers`, each followed by its own keys and `[[servers.locations]]`, after `top` (keys of
/// the top level and `[upstreams.NAME]` tables). Request bodies up to 16 MB, as [`nginx`].
fn sluice(top: &str, servers: &[&str]) -> Sluice {
    let mut toml = format!("client_max_body_size = \"16m\"\n{top}\n");
    for s in servers {
        toml.push_str(&format!("[[servers]]\nhttp2 = true\n{s}\n"));
    }
    Sluice::start(&toml)
}

/// A location `/` with `grpc_pass` to `target` and `more` keys, for [`sluice`].
fn sluice_location(target: &str, more: &str) -> String {
    format!("[[servers.locations]]\npath = \"/\"\ngrpc_pass = \"{target}\"\n{more}")
}

/// A location `/` with `grpc_pass` to `target` and `more` directives, for [`nginx`].
fn nginx_location(target: &str, more: &str) -> String {
    format!("  location / {{\n    grpc_pass {target};\n    {more}\n  }}")
}
