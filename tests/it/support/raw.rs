//! Raw byte exchanges: write exactly the given bytes (in steps, with pauses and a half-close),
//! read everything that comes back, and split it into responses.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, sleep, timeout};

use super::http1::{self, Kind};

/// One thing the client does, in order.
#[derive(Clone, Debug)]
pub enum Step {
    /// Write these bytes (one write call; the kernel may still split them).
    Write(Vec<u8>),
    /// Wait before the next step.
    Pause(Duration),
    /// `shutdown(SHUT_WR)`: the client's end of file, the connection stays open for reading.
    ShutWrite,
}

/// How the exchange ended, seen from the client.
#[derive(Clone, Debug, Default)]
pub struct Exchange {
    /// Everything the server sent.
    pub bytes: Vec<u8>,
    /// The server closed (end of file or reset) before the client gave up waiting.
    pub closed: bool,
    /// The whole exchange hit `limit` with the connection still open.
    pub timed_out: bool,
    /// A write that failed (the server had already closed), if any.
    pub write_error: Option<String>,
}

/// Sends `steps` from `source` to `addr` and reads until the server closes, or nothing has
/// arrived for `idle` after the last step, or `limit` passes.
pub async fn exchange(
    addr: SocketAddr,
    source: IpAddr,
    steps: &[Step],
    idle: Duration,
    limit: Duration,
) -> Exchange {
    // Bound to `source`, TCP_NODELAY on.
    let stream = super::client::connect(addr, source).await;
    let (mut rd, mut wr) = stream.into_split();
    let steps = steps.to_vec();
    // The writer runs beside the reader: a server that answers and closes before reading a
    // large request must not block the client's write forever.
    let writer = tokio::spawn(async move {
        for step in steps {
            match step {
                Step::Write(b) => {
                    if let Err(e) = wr.write_all(&b).await {
                        return (Some(e.to_string()), wr);
                    }
                }
                Step::Pause(d) => sleep(d).await,
                Step::ShutWrite => {
                    if let Err(e) = wr.shutdown().await {
                        return (Some(e.to_string()), wr);
                    }
                }
            }
        }
        (None, wr)
    });
    let start = Instant::now();
    let mut out = Exchange::default();
    let mut buf = vec![0u8; 64 * 1024];
    let mut writer = Some(writer);
    let mut last = Instant::now();
    let mut _kept_writer = None;
    loop {
        if let Some(w) = writer.as_ref().filter(|w| w.is_finished()) {
            let _ = w;
            let w = writer.take().expect("checked above");
            let (err, half) = w.await.expect("writer task");
            out.write_error = err;
            // Keep the write half alive: dropping it would shut the socket down for writing.
            _kept_writer = Some(half);
            last = last.max(Instant::now());
        }
        let now = Instant::now();
        if now >= start + limit {
            out.timed_out = true;
            break;
        }
        let wait = if writer.is_none() {
            if now >= last + idle {
                break;
            }
            (last + idle - now).min(start + limit - now)
        } else {
            Duration::from_millis(10).min(start + limit - now)
        };
        match timeout(wait, rd.read(&mut buf)).await {
            Err(_) => {}
            Ok(Ok(0)) | Ok(Err(_)) => {
                out.closed = true;
                break;
            }
            Ok(Ok(n)) => {
                out.bytes.extend_from_slice(&buf[..n]);
                last = Instant::now();
            }
        }
    }
    if let Some(w) = writer {
        w.abort();
    }
    out
}

/// One response read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code; 0 for bytes that are not an HTTP/1.x response (an HTTP/0.9 answer).
    pub status: u16,
    /// It carries the recording upstream's `X-Recorder: hit`: the upstream answered it.
    pub upstream: bool,
    /// The body was cut short by the end of the data.
    pub truncated: bool,
}

/// Splits what a server sent into responses ([`http1::parse`], the data ending with `bytes`).
pub fn responses(bytes: &[u8]) -> Vec<Response> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if !rest.starts_with(b"HTTP/") {
            // An HTTP/0.9 answer is the bare body: the recorder's if it is exactly that.
            out.push(Response {
                status: 0,
                upstream: rest == b"ok\n",
                truncated: false,
            });
            break;
        }
        let recorded = |m: &http1::Message| {
            m.header("x-recorder")
                .is_some_and(|v| v.eq_ignore_ascii_case("hit"))
        };
        match http1::parse(rest, Kind::Response, true) {
            Ok(Some((m, used))) => {
                out.push(Response {
                    status: m.status,
                    upstream: recorded(&m),
                    truncated: false,
                });
                pos += used;
            }
            // Cut short (or malformed): the status and the head as far as they came.
            _ => {
                let head = http1::parse_head(rest, Kind::Response).ok().flatten();
                out.push(Response {
                    status: status_of(rest),
                    upstream: head.is_some_and(|(m, _)| recorded(&m)),
                    truncated: true,
                });
                break;
            }
        }
    }
    out
}

fn status_of(rest: &[u8]) -> u16 {
    rest.get(9..12)
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// `bytes` as printable ASCII: `\r`, `\n`, `\t`, `\0`, `\xNN`, `\\`; runs of more than 12 equal
/// bytes as `X{×N}`; at most `max` characters, then `…(N bytes)`.
pub fn escape(bytes: &[u8], max: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if s.len() >= max {
            s.push_str(&format!("…({} bytes)", bytes.len()));
            break;
        }
        let b = bytes[i];
        let run = bytes[i..].iter().take_while(|&&c| c == b).count();
        let one = match b {
            b'\r' => "\\r".to_owned(),
            b'\n' => "\\n".to_owned(),
            b'\t' => "\\t".to_owned(),
            b'\0' => "\\0".to_owned(),
            b'\\' => "\\\\".to_owned(),
            0x20..=0x7e => (b as char).to_string(),
            _ => format!("\\x{b:02x}"),
        };
        if run > 12 {
            s.push_str(&format!("{one}{{×{run}}}"));
            i += run;
        } else {
            s.push_str(&one);
            i += 1;
        }
    }
    s
}
