//! The driver on an in-memory socket, the upstream's end in the test's hands.

use super::Connection;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PING: [u8; 17] = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];

/// Writes `bytes` over and over for `time`; how many went (the peer reads them).
async fn flood(theirs: &mut tokio::io::DuplexStream, bytes: &[u8], time: Duration) -> usize {
    let deadline = tokio::time::Instant::now() + time;
    let mut sent = 0;
    while let Ok(Ok(())) = tokio::time::timeout_at(deadline, theirs.write_all(bytes)).await {
        sent += bytes.len();
    }
    sent
}

/// An upstream that never reads and floods PINGs: their answers wait to be written, and past
/// half a megabyte of them sluice reads no more; a minute later the connection is let go.
#[tokio::test(start_paused = true)]
async fn a_ping_flood_that_never_reads_is_bounded_then_let_go() {
    let (ours, mut theirs) = tokio::io::duplex(1024);
    let conn = Connection::start(ours);
    let sent = flood(&mut theirs, &PING.repeat(100), Duration::from_millis(500)).await;
    assert!(
        (512 * 1024..600 * 1024).contains(&sent),
        "{sent} bytes read"
    );
    assert!(!conn.is_closed());
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert!(conn.is_closed());
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(
        theirs.write_all(b"x").await.is_err(),
        "the socket is still held"
    );
}

/// An upstream that never reads (PINGs' answers fill the socket), then breaks the connection
/// (a frame over 16 KB) and sends junk on: sluice reads nothing more after the break, the
/// connection takes no new call, and its driver gives up on the GOAWAY it cannot write after
/// five seconds: the socket is closed.
#[tokio::test(start_paused = true)]
async fn a_broken_connection_is_read_no_more_and_let_go() {
    let (ours, mut theirs) = tokio::io::duplex(1024);
    let conn = Connection::start(ours);
    theirs.write_all(&PING.repeat(100)).await.unwrap();
    theirs
        .write_all(&[0, 0x40, 0x01, 0, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let sent = flood(&mut theirs, &[0u8; 1024], Duration::from_millis(500)).await;
    assert!(sent < 4 * 1024, "sluice read on: {sent} bytes");
    assert!(conn.is_closed());
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(
        theirs.write_all(b"x").await.is_err(),
        "the socket is still held"
    );
}

/// The same break from an upstream that reads: it gets GOAWAY FRAME_SIZE_ERROR, then the end.
#[tokio::test]
async fn a_broken_connection_says_why() {
    let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
    let _conn = Connection::start(ours);
    theirs
        .write_all(&[0, 0x40, 0x01, 0, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), theirs.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the connection was not closed");
    let goaway = [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6];
    assert!(got.ends_with(&goaway), "{got:?}");
}
