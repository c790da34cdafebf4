//! Floods of HTTP/2 frames that serve no request, each cut with `GOAWAY ENHANCE_YOUR_CALM`:
//! PING, SETTINGS, WINDOW_UPDATE, PRIORITY, RST_STREAM on a closed stream, DATA without payload
//! or end, CONTINUATIONs without bytes or of one byte each, unknown frame types. Each is cut
//! within 2 s and 50 000 frames (a header block continued byte by byte: within 64 KB of it),
//! logged once at info level (`http2 flood detected`, naming the kind) and counted in
//! `sluice_http2_floods_total{frame}`, and sluice serves the next client.
//!
//! Then the clients that must never be cut, however busy: 2000 streams in a row on one
//! connection, each with a PRIORITY, a PING and WINDOW_UPDATEs; a download of 16 MB, and a
//! response streamed in pieces of 512 bytes, with WINDOW_UPDATEs for every DATA frame read; a
//! request whose header block comes in 59 CONTINUATION frames (nginx serves it too).
//!
//! Rapid reset (CVE-2023-44487) is in [`super::protections`]; scripts/h2-flood.sh measures
//! every kind, rapid reset included, against nginx.

use std::net::SocketAddr;
use std::time::Duration;

use super::NginxH2;
use super::client::H2;
use super::raw::{self, Raw, frame};
use crate::support::{Sluice, Upstream, client, get};

/// The longest a flood may last before sluice closes the connection.
const CUT_WITHIN: Duration = Duration::from_secs(2);
/// The most frames a flood may take before it is cut: the client sends no more.
const MOST_FRAMES: usize = 50_000;
/// sluice's fixed allowance per kind, the least a flood's log line may count: fewer would cut
/// a busy client that was served little.
const ALLOWANCE: u64 = 1000;
/// Empty DATA frames (no payload, no end): the h2 crate's own lifetime bound, 100, which sluice
/// meets first so that the cut is logged and counted.
const EMPTY_DATA_ALLOWANCE: u64 = 100;

/// sluice with `http2 = true` and `[admin]` (the metrics): `/` answered locally, `/upload` and
/// `/big` proxied to `upstream` (an upload's body is read whole before it goes upstream: one
/// that never ends keeps its stream open).
fn sluice_for(upstream: SocketAddr) -> Sluice {
    Sluice::start(&format!(
        r#"[admin]
[[servers]]
http2 = true
[[servers.locations]]
path = "/"
return = {{ status = 200, body = "ok\n" }}
[[servers.locations]]
path = "/upload"
proxy_pass = "http://{upstream}"
[[servers.locations]]
path = "/big"
proxy_pass = "http://{upstream}"
"#
    ))
}

/// One flood: what is sent before it (after a first request, answered), the `i`th frame, the
/// most frames sent, and what sluice logs and counts for it.
struct Flood {
    setup: fn(&str) -> Vec<u8>,
    frame: fn(usize) -> Vec<u8>,
    most: usize,
    /// The log's name of the kind (`… 1001 PING frames …`).
    logged: &'static str,
    /// The `frame` label of `sluice_http2_floods_total`.
    label: &'static str,
}

/// A request's pseudo-fields on stream 3, as a HEADERS frame that ends no header block.
fn open_block(authority: &str) -> Vec<u8> {
    let block = raw::request_block("GET", "/", authority, &[]);
    frame(raw::HEADERS, raw::END_STREAM, 3, &block)
}

fn nothing(_: &str) -> Vec<u8> {
    Vec::new()
}

/// Floods `flood` at a fresh sluice after one answered request, and checks the cut: GOAWAY
/// ENHANCE_YOUR_CALM and the close within [`CUT_WITHIN`] and `flood.most` frames, one log line,
/// the metric; then a new connection is served.
async fn is_cut(flood: Flood) {
    let upstream = Upstream::start();
    let s = sluice_for(upstream.addr);
    let authority = s.addr().to_string();
    let mut c = Raw::connect(s.addr()).await;
    c.send(&frame(
        raw::HEADERS,
        raw::END_STREAM | raw::END_HEADERS,
        1,
        &raw::request_block("GET", "/", &authority, &[]),
    ))
    .await;
    let first = c.until_end(1).await;
    assert!(
        first.iter().any(raw::Frame::is_200),
        "the first request: {first:?}"
    );
    c.send(&(flood.setup)(&authority)).await;
    let flooded = c.flood(flood.frame, flood.most, CUT_WITHIN).await;
    assert!(
        flooded.goaway == Some(0xb) && flooded.closed.is_some(),
        "{}: GOAWAY ENHANCE_YOUR_CALM and the close within {CUT_WITHIN:?} and {} frames; got \
         GOAWAY {:?}, closed after {:?}, {} frames sent, the server's frames by type {:?}\n{}",
        flood.label,
        flood.most,
        flooded.goaway,
        flooded.closed,
        flooded.sent,
        flooded.kinds,
        s.log()
    );

    let log = s.wait_log(|l| l.contains("http2 flood detected")).await;
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("http2 flood detected"))
        .collect();
    assert_eq!(lines.len(), 1, "one flood line:\n{log}");
    let line = lines[0];
    for want in [
        " [info] ",
        &format!(" {} frames, ", flood.logged),
        "(ENHANCE_YOUR_CALM)",
        "client: 127.0.0.1",
    ] {
        assert!(line.contains(want), "{want:?} in {line}");
    }
    let count: u64 = line
        .split("http2 flood detected: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count after \"http2 flood detected: \" in {line}"));
    let least = if flood.label == "data" {
        EMPTY_DATA_ALLOWANCE
    } else {
        ALLOWANCE
    };
    assert!(count >= least, "cut before the allowance: {line}");

    let metrics = get(s.admin_addr(), "/metrics").await.body_text();
    let floods: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_http2_floods_total{") && !l.ends_with(" 0"))
        .collect();
    assert_eq!(
        floods,
        [format!(
            "sluice_http2_floods_total{{frame=\"{}\"}} 1",
            flood.label
        )],
        "{metrics}"
    );
    // The flood took one connection, not the server.
    let mut next = H2::connect(s.addr(), client(2)).await;
    assert_eq!(next.fetch("/").await.status, 200);
}

#[tokio::test]
async fn a_ping_flood_is_cut() {
    is_cut(Flood {
        setup: nothing,
        frame: |_| frame(raw::PING, 0, 0, b"floodpng"),
        most: MOST_FRAMES,
        logged: "PING",
        label: "ping",
    })
    .await;
}

/// Each SETTINGS asks for an acknowledgement, the flood's reader takes them all.
#[tokio::test]
async fn a_settings_flood_is_cut() {
    is_cut(Flood {
        setup: nothing,
        frame: |_| frame(raw::SETTINGS, 0, 0, &[]),
        most: MOST_FRAMES,
        logged: "SETTINGS",
        label: "settings",
    })
    .await;
}

/// Increments of 1 on the connection and on stream 1 (closed) in turn: no window overflows.
#[tokio::test]
async fn a_window_update_flood_is_cut() {
    is_cut(Flood {
        setup: nothing,
        frame: |i| frame(raw::WINDOW_UPDATE, 0, (i % 2) as u32, &1u32.to_be_bytes()),
        most: MOST_FRAMES,
        logged: "WINDOW_UPDATE",
        label: "window_update",
    })
    .await;
}

/// On 100 idle streams in turn, each depending on the root (CVE-2019-9513's resource loop).
#[tokio::test]
async fn a_priority_flood_is_cut() {
    is_cut(Flood {
        setup: nothing,
        frame: |i| {
            frame(
                raw::PRIORITY,
                0,
                3 + 2 * (i % 100) as u32,
                &[0, 0, 0, 0, 15],
            )
        },
        most: MOST_FRAMES,
        logged: "PRIORITY",
        label: "priority",
    })
    .await;
}

/// RST_STREAM CANCEL on stream 1, answered and closed (on an idle stream it is a protocol error
/// that ends the connection at once: no flood).
#[tokio::test]
async fn an_rst_stream_flood_on_a_closed_stream_is_cut() {
    is_cut(Flood {
        setup: nothing,
        frame: |_| frame(raw::RST_STREAM, 0, 1, &8u32.to_be_bytes()),
        most: MOST_FRAMES,
        logged: "RST_STREAM",
        label: "rst_stream",
    })
    .await;
}

/// DATA without payload or END_STREAM on an upload whose body (1 MB announced) never ends.
#[tokio::test]
async fn an_empty_data_flood_is_cut() {
    is_cut(Flood {
        setup: |authority| {
            let block = raw::request_block(
                "POST",
                "/upload",
                authority,
                &[("content-length", "1000000")],
            );
            frame(raw::HEADERS, raw::END_HEADERS, 3, &block)
        },
        frame: |_| frame(raw::DATA, 0, 3, &[]),
        most: MOST_FRAMES,
        logged: "empty DATA",
        label: "data",
    })
    .await;
}

/// A header block that never ends, continued by CONTINUATIONs without a byte: cut by the
/// budget of frames that carry nothing.
#[tokio::test]
async fn a_flood_of_empty_continuations_is_cut() {
    is_cut(Flood {
        setup: open_block,
        frame: |_| frame(raw::CONTINUATION, 0, 3, &[]),
        most: MOST_FRAMES,
        logged: "CONTINUATION",
        label: "continuation",
    })
    .await;
}

/// A header block that never ends, continued one byte a frame: cut by the block's size
/// (`large_client_header_buffers`, 32 KB, and some slack), before 64 KB. The byte is 0x90,
/// HPACK's static `accept-encoding: gzip, deflate`: a whole valid field each, nothing a decoder
/// could refuse before the size.
#[tokio::test]
async fn a_flood_of_one_byte_continuations_is_cut_by_the_block_size() {
    is_cut(Flood {
        setup: open_block,
        frame: |_| frame(raw::CONTINUATION, 0, 3, &[0x90]),
        most: 64 * 1024,
        logged: "CONTINUATION",
        label: "continuation",
    })
    .await;
}

/// Frames of type 0x42, which RFC 9113 §5.5 says to ignore: ignored, and counted.
#[tokio::test]
async fn an_unknown_frame_flood_is_cut() {
    is_cut(Flood {
        setup: nothing,
        frame: |_| frame(0x42, 0, 0, &[]),
        most: MOST_FRAMES,
        logged: "unknown",
        label: "unknown",
    })
    .await;
}

/// The log has no flood line and the metrics count none.
async fn no_flood(s: &Sluice) {
    let log = s.log();
    assert!(!log.contains("http2 flood detected"), "{log}");
    let metrics = get(s.admin_addr(), "/metrics").await.body_text();
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("sluice_http2_floods_total{") && !l.ends_with(" 0")),
        "{metrics}"
    );
}

/// 2000 streams in a row on one connection, each sent with what browsers send beside it: a
/// PRIORITY, a PING, WINDOW_UPDATEs for the stream and the connection. Twice the fixed
/// allowance of PINGs and PRIORITYs, four times that of WINDOW_UPDATEs, in all: the budgets
/// grow with what was served, so none is ever cut.
#[tokio::test]
async fn a_busy_polite_connection_is_never_cut() {
    let upstream = Upstream::start();
    let s = sluice_for(upstream.addr);
    let authority = s.addr().to_string();
    let block = raw::request_block("GET", "/", &authority, &[]);
    let mut c = Raw::connect(s.addr()).await;
    for i in 0..2000u32 {
        let id = 1 + 2 * i;
        let mut bytes = frame(raw::HEADERS, raw::END_STREAM | raw::END_HEADERS, id, &block);
        bytes.extend(frame(raw::PRIORITY, 0, id, &[0, 0, 0, 0, 15]));
        bytes.extend(frame(raw::PING, 0, 0, &u64::from(i).to_be_bytes()));
        bytes.extend(frame(raw::WINDOW_UPDATE, 0, id, &65536u32.to_be_bytes()));
        bytes.extend(frame(raw::WINDOW_UPDATE, 0, 0, &1024u32.to_be_bytes()));
        c.send(&bytes).await;
        let (mut answered, mut ponged, mut status) = (false, false, None);
        while !(answered && ponged) {
            let f = c
                .next(Duration::from_secs(5))
                .await
                .unwrap_or_else(|| panic!("stream {id}: the connection ended\n{}", s.log()));
            assert_eq!(f.goaway_code(), None, "stream {id}: {f:?}\n{}", s.log());
            if f.kind == raw::PING && f.flags & raw::ACK != 0 {
                ponged = true;
            }
            if f.stream == id && f.kind == raw::HEADERS {
                status = Some(f.is_200());
            }
            answered |= f.stream == id && f.flags & raw::END_STREAM != 0;
        }
        assert_eq!(status, Some(true), "stream {id} answered 200");
    }
    no_flood(&s).await;
}

/// An upstream that answers every request with `pieces` pieces of `piece` bytes, each its own
/// write, `pace` apart (zero: as fast as the proxy takes them).
async fn download_upstream(
    pieces: usize,
    piece: usize,
    pace: Duration,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    use crate::support::Reader;
    use tokio::io::AsyncWriteExt;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut s = Reader::new(s);
                if s.request().await.is_none() {
                    return;
                }
                let size = pieces * piece;
                let top = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n");
                let _ = s.write_all(top.as_bytes()).await;
                let bytes = vec![b'x'; piece];
                for _ in 0..pieces {
                    if s.write_all(&bytes).await.is_err() {
                        return;
                    }
                    // The pace is the scenario (a response streamed as it is made), not a
                    // wait for an event.
                    if !pace.is_zero() {
                        tokio::time::sleep(pace).await;
                    }
                }
            });
        }
    });
    (addr, task)
}

/// Downloads `path` over a new connection as a client that gives back every DATA frame's
/// bytes at once, to the stream and to the connection (two WINDOW_UPDATEs per DATA frame);
/// returns the bytes and the DATA frames. Panics if the connection ends first.
async fn download(s: &Sluice, path: &str) -> (usize, usize) {
    let mut c = Raw::connect(s.addr()).await;
    let block = raw::request_block("GET", path, &s.addr().to_string(), &[]);
    c.send(&frame(
        raw::HEADERS,
        raw::END_STREAM | raw::END_HEADERS,
        1,
        &block,
    ))
    .await;
    let (mut got, mut frames) = (0, 0);
    loop {
        let f = c.next(Duration::from_secs(10)).await.unwrap_or_else(|| {
            panic!(
                "the connection ended after {got} bytes in {frames} DATA frames\n{}",
                s.log()
            )
        });
        assert_eq!(
            f.goaway_code(),
            None,
            "after {got} bytes in {frames} DATA frames: {f:?}\n{}",
            s.log()
        );
        if f.kind == raw::DATA && f.stream == 1 {
            got += f.payload.len();
            frames += 1;
            if !f.payload.is_empty() {
                let n = (f.payload.len() as u32).to_be_bytes();
                let mut wu = frame(raw::WINDOW_UPDATE, 0, 1, &n);
                wu.extend(frame(raw::WINDOW_UPDATE, 0, 0, &n));
                c.send(&wu).await;
            }
            if f.flags & raw::END_STREAM != 0 {
                return (got, frames);
            }
        }
    }
}

/// A 16 MB download by a client that gives back every DATA frame's bytes at once: two
/// WINDOW_UPDATEs per DATA frame, thousands in all, each earned by what was sent.
#[tokio::test]
async fn a_download_with_a_window_update_per_data_frame_is_never_cut() {
    let (up, task) = download_upstream(256, 64 * 1024, Duration::ZERO).await;
    let s = sluice_for(up);
    let (got, frames) = download(&s, "/big").await;
    task.abort();
    assert_eq!(got, 16 << 20, "in {frames} DATA frames");
    no_flood(&s).await;
}

/// The same client on a response streamed in pieces of 512 bytes a millisecond apart (events,
/// a log followed, a slow upstream): each piece is a DATA frame of its own, and the client's
/// two WINDOW_UPDATEs for it are as legitimate as for a frame of 16 KB. nginx (`proxy_buffering
/// off`) serves the whole of it to such a client.
#[tokio::test]
async fn a_streamed_response_with_a_window_update_per_small_data_frame_is_never_cut() {
    let (up, task) = download_upstream(1500, 512, Duration::from_millis(1)).await;
    let s = sluice_for(up);
    let (got, frames) = download(&s, "/big").await;
    task.abort();
    assert_eq!(got, 1500 * 512, "in {frames} DATA frames");
    no_flood(&s).await;
}

/// A request whose header block (5 KB, one long field) comes in a HEADERS frame and 59
/// CONTINUATIONs of about 90 bytes each is served, as nginx serves it: what bounds a block is
/// its size, not its number of frames.
#[tokio::test]
async fn a_request_in_59_continuation_frames_is_served() {
    let upstream = Upstream::start();
    let s = sluice_for(upstream.addr);
    let nginx = NginxH2::start("", "    location / { return 200 \"ok\\n\"; }");
    let pad = "p".repeat(5000);
    let served = async |addr: SocketAddr| {
        let block = raw::request_block("GET", "/", &addr.to_string(), &[("x-pad", &pad)]);
        let pieces: Vec<&[u8]> = block.chunks(block.len().div_ceil(60)).collect();
        assert_eq!(pieces.len(), 60);
        let mut bytes = frame(raw::HEADERS, raw::END_STREAM, 1, pieces[0]);
        for (i, p) in pieces.iter().enumerate().skip(1) {
            let flags = if i == 59 { raw::END_HEADERS } else { 0 };
            bytes.extend(frame(raw::CONTINUATION, flags, 1, p));
        }
        let mut c = Raw::connect(addr).await;
        c.send(&bytes).await;
        c.until_end(1).await.iter().any(raw::Frame::is_200)
    };
    assert!(served(nginx.addr()).await, "nginx");
    assert!(served(s.addr()).await, "sluice\n{}", s.log());
    no_flood(&s).await;
}
