//! The tests of [`super`]: deadlines, parking and holding, on paused time.

use super::*;
use crate::conn_state::Phase;
use std::sync::atomic::AtomicBool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn timeouts() -> ClientTimeouts {
    ClientTimeouts {
        client_header: Duration::from_secs(5),
        keepalive: Duration::from_secs(20),
        send: Duration::from_secs(7),
    }
}

#[tokio::test(start_paused = true)]
async fn silent_client_times_out_after_client_header_timeout() {
    let (a, _b) = tokio::io::duplex(64);
    let state = ConnState::new(timeouts());
    let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
    let start = Instant::now();
    let mut buf = [0u8; 8];
    let err = io.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(state.expired(), Some(Expired::Header));
}

/// A silent connection is handed back PARK_AFTER after its accept, its
/// header deadline kept; one resumed past that time (its socket was
/// readable, but its first read found nothing yet) waits PARK_AFTER
/// again instead of being parked again at once.
#[tokio::test(start_paused = true)]
async fn a_silent_connection_parks_after_its_accept_and_not_at_once_when_resumed() {
    for (resumed_after, parks_after) in [
        (Duration::ZERO, PARK_AFTER),
        (
            Duration::from_millis(400),
            Duration::from_millis(400) + PARK_AFTER,
        ),
        (
            Duration::from_millis(1500),
            Duration::from_millis(1500) + PARK_AFTER,
        ),
    ] {
        let accepted = Instant::now();
        let header_until = accepted + timeouts().client_header;
        tokio::time::sleep(resumed_after).await;
        let (a, _b) = tokio::io::duplex(64);
        let state = ConnState::until(timeouts(), header_until);
        let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
        io.park_silent(true);
        assert_eq!(io.next_head().await.unwrap(), Filled::Parked);
        assert_eq!(
            accepted.elapsed(),
            parks_after,
            "resumed after {resumed_after:?}"
        );
        assert_eq!(state.read_deadline(), Some((header_until, Expired::Header)));
    }
}

/// An idle connection is handed back (an end of file, `take_parked`)
/// PARK_AFTER into its idle time, but only when hyper certainly holds
/// nothing: the last bytes ended a header and the request had no body.
#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_parked_only_when_quiet() {
    for (sent, reads, body, parks) in [
        (&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..], 1, false, true),
        (&b"GET / HTTP/1.1\nHost: x\n\n"[..], 1, false, true),
        (
            &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab"[..],
            2,
            true,
            false,
        ),
        (
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /next HT"[..],
            1,
            false,
            false,
        ),
    ] {
        let (a, mut b) = tokio::io::duplex(256);
        let state = ConnState::new(timeouts());
        let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
        io.park_when_idle(true);
        io.start_serving();
        b.write_all(sent).await.unwrap();
        let mut buf = [0u8; 64];
        for _ in 0..reads {
            assert!(io.read(&mut buf).await.unwrap() > 0);
        }
        state.busy_with(body);
        state.idle();
        let start = Instant::now();
        let r = io.read(&mut buf).await;
        if parks {
            assert_eq!(r.unwrap(), 0, "{sent:?}");
            assert!(io.take_parked());
            assert_eq!(start.elapsed(), PARK_AFTER);
            assert_eq!(state.idle_deadline(), Some(start + timeouts().keepalive));
        } else {
            assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut, "{sent:?}");
            assert!(!io.take_parked());
            assert_eq!(start.elapsed(), timeouts().keepalive);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn idle_uses_keepalive_then_header_timeout() {
    let (a, mut b) = tokio::io::duplex(64);
    let state = ConnState::new(timeouts());
    let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
    state.busy();
    // Busy: no deadline even after a long wait.
    let mut buf = [0u8; 8];
    let r = tokio::time::timeout(Duration::from_secs(100), io.read(&mut buf)).await;
    assert!(r.is_err(), "a busy connection has no read deadline");
    state.idle();
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(19)).await;
    // A head begins: the gate keeps it (hyper gets nothing until it is
    // whole), and client_header_timeout runs from its first byte.
    b.write_all(b"GE").await.unwrap();
    let err = io.read(&mut buf).await.unwrap_err();
    assert!(matches!(state.phase(), Phase::Header { .. }));
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), Duration::from_secs(19 + 5));
    assert_eq!(state.expired(), Some(Expired::Header));

    let state = ConnState::new(timeouts());
    let (a, _b) = tokio::io::duplex(64);
    let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
    state.busy();
    state.idle();
    let start = Instant::now();
    io.read(&mut buf).await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_secs(20));
    assert_eq!(state.expired(), Some(Expired::Idle));
}

/// hyper polls for the next request while a response is still being
/// written, and may not poll again once it ends: the keep-alive timeout
/// must start anyway, with nobody reading.
#[tokio::test(start_paused = true)]
async fn a_read_parked_while_busy_still_sees_keepalive_expire() {
    struct Flag(std::sync::atomic::AtomicBool);
    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let (a, _b) = tokio::io::duplex(64);
    let state = ConnState::new(timeouts());
    let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
    state.busy();
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = std::task::Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut buf = [0u8; 8];
    let mut rb = ReadBuf::new(&mut buf);
    assert!(Pin::new(&mut io).poll_read(&mut cx, &mut rb).is_pending());
    // The response ends 3 s later; nobody polls the read again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    state.idle();
    let start = Instant::now();
    let mut woken_at = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if flag.0.swap(false, Ordering::SeqCst) {
            // Woken (maybe early): poll as hyper would.
            match Pin::new(&mut io).poll_read(&mut cx, &mut rb) {
                Poll::Ready(Err(e)) => {
                    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
                    woken_at = Some(start.elapsed());
                    break;
                }
                Poll::Pending => {}
                Poll::Ready(Ok(())) => panic!("no data was sent"),
            }
        }
    }
    let at = woken_at.expect("the parked read was never woken");
    assert!(
        at >= Duration::from_secs(20) && at <= Duration::from_millis(20_500),
        "{at:?}"
    );
    assert_eq!(state.expired(), Some(Expired::Idle));
}

/// After an upgrade request hyper is given nothing more until it is
/// answered: the next request after an ordinary answer; after a 101 the
/// socket is a tunnel's, what was held coming back first, as sent.
#[tokio::test(start_paused = true)]
async fn an_upgrade_request_holds_what_follows_until_answered() {
    let ws =
        &b"GET /ws HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n"[..];
    let next = &b"GET /next HTTP/1.1\r\nhost: x\r\n\r\n"[..];
    for switch in [false, true] {
        let (a, mut b) = tokio::io::duplex(1024);
        let state = ConnState::new(timeouts());
        let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
        io.start_serving();
        b.write_all(&[ws, next].concat()).await.unwrap();
        let mut buf = [0u8; 256];
        let n = io.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], ws);
        state.busy();
        let waited = tokio::time::timeout(Duration::from_secs(100), io.read(&mut buf)).await;
        assert!(waited.is_err(), "held while the request is served");
        if switch {
            state.switch(Box::new(()));
        }
        state.idle();
        if !switch {
            let n = io.read(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], next);
            continue;
        }
        let waited = tokio::time::timeout(Duration::from_secs(5), io.read(&mut buf)).await;
        assert!(
            waited.is_err(),
            "held until the connection takes the tunnel"
        );
        assert!(state.take_switch().is_some());
        assert_eq!(&io.start_tunnel(b"hy")[..], [&b"hy"[..], next].concat());
        b.write_all(b"\x81\x00").await.unwrap();
        let n = io.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"\x81\x00");
        // No deadline in a tunnel: the tunnel keeps its own.
        let waited = tokio::time::timeout(Duration::from_secs(1000), io.read(&mut buf)).await;
        assert!(waited.is_err());
    }
}

#[tokio::test(start_paused = true)]
async fn stalled_writes_time_out_after_send_timeout() {
    let (a, _b) = tokio::io::duplex(4);
    let state = ConnState::new(timeouts());
    let mut io = TimedIo::new(a, state.clone(), HeadRules::default());
    let start = Instant::now();
    let err = io.write_all(b"more than four bytes").await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), Duration::from_secs(7));
    assert_eq!(state.expired(), Some(Expired::Send));
}
