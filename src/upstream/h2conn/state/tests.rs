//! The connection's state driven frame by frame, without a socket: what it
//! queues to write, what each call sees.

use super::*;
use crate::http2::hpack;
use std::task::Waker;

fn cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

/// A state whose preface and settings were written.
fn fresh() -> State {
    let mut s = State::new(100);
    s.out.clear();
    s
}

/// The frames queued to write, as (kind, flags, stream, payload), taken.
fn written(s: &mut State) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut out = std::mem::take(&mut s.out);
    let mut frames = Vec::new();
    while out.len() >= 9 {
        let len = usize::from(out[0]) << 16 | usize::from(out[1]) << 8 | usize::from(out[2]);
        let id = u32::from_be_bytes([out[5], out[6], out[7], out[8]]);
        frames.push((out[3], out[4], id, out[9..9 + len].to_vec()));
        let _ = out.split_to(9 + len);
    }
    frames
}

fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        hpack::encode(&mut b, n.as_bytes(), v.as_bytes());
    }
    b
}

fn send(s: &mut State, kind: u8, flags: u8, id: u32, payload: &[u8]) {
    s.frame(kind, flags, id, payload);
}

const HEAD: &[(&str, &str)] = &[(":status", "200"), ("content-type", "application/grpc")];

#[test]
fn a_fresh_connection_writes_the_preface_its_settings_and_window() {
    let mut s = State::new(100);
    assert!(s.out.starts_with(crate::http2::inbound::PREFACE));
    let _ = s.out.split_to(crate::http2::inbound::PREFACE.len());
    let f = written(&mut s);
    assert_eq!((f[0].0, f[0].3.len()), (SETTINGS, 18));
    assert_eq!(f[1].0, WINDOW_UPDATE);
    assert_eq!(f[1].3, (CONNECTION_WINDOW - 65_535).to_be_bytes());
}

#[test]
fn a_call_opens_sends_and_reads_its_answer() {
    let mut s = fresh();
    let id = s.open(&block(&[(":method", "POST")]), false);
    assert_eq!(id, 1);
    s.send_data(id, Bytes::from_static(b"hello"), true).unwrap();
    let f = written(&mut s);
    assert_eq!((f[0].0, f[0].1, f[0].2), (HEADERS, END_HEADERS, 1));
    assert_eq!(
        (f[1].0, f[1].1, &f[1].3[..]),
        (DATA, END_STREAM, &b"hello"[..])
    );
    s.frame(HEADERS, END_HEADERS, id, &block(HEAD));
    send(&mut s, DATA, 0, id, b"answer");
    s.frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        id,
        &block(&[("grpc-status", "0")]),
    );
    let Poll::Ready(Ok(head)) = s.poll_head(id, &cx()) else {
        panic!("no head")
    };
    assert_eq!(head.status, 200);
    assert!(matches!(s.poll_data(id, &cx()), Poll::Ready(Some(Ok(d))) if d == "answer"));
    assert!(matches!(s.poll_data(id, &cx()), Poll::Ready(None)));
    let Poll::Ready(Ok(Some(t))) = s.poll_trailers(id, &cx()) else {
        panic!("no trailers")
    };
    assert_eq!(t["grpc-status"], "0");
    assert_eq!(s.open, 0, "a stream over both ways no longer counts");
    s.forget(id);
    assert!(
        written(&mut s).is_empty(),
        "no reset for a stream that ended"
    );
}

#[test]
fn data_waits_for_the_windows_and_goes_when_they_open() {
    let mut s = fresh();
    send(&mut s, SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 10]);
    let id = s.open(&block(&[(":method", "POST")]), false);
    s.send_data(id, Bytes::from(vec![b'x'; 25]), false).unwrap();
    let f = written(&mut s);
    assert_eq!(f[0], (SETTINGS, ACK, 0, vec![]));
    assert_eq!((f[2].0, f[2].3.len()), (DATA, 10));
    assert!(s.poll_room(id, &cx()).is_pending(), "15 bytes wait");
    send(&mut s, WINDOW_UPDATE, 0, id, &20u32.to_be_bytes());
    assert_eq!(written(&mut s)[0].3.len(), 15);
    assert!(s.poll_room(id, &cx()).is_ready());
    // A larger initial window opens every stream's by the difference.
    s.send_data(id, Bytes::from(vec![b'y'; 30]), true).unwrap();
    assert_eq!(written(&mut s)[0].3.len(), 5);
    send(&mut s, SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 40]);
    let f = written(&mut s);
    assert_eq!((f[1].0, f[1].1, f[1].3.len()), (DATA, END_STREAM, 25));
}

#[test]
fn what_the_client_takes_goes_back_to_the_windows() {
    let mut s = fresh();
    let id = s.open(&block(&[(":method", "GET")]), true);
    s.frame(HEADERS, END_HEADERS, id, &block(HEAD));
    let piece = vec![0u8; 16_384];
    let mut sent = 0;
    while sent < STREAM_WINDOW as usize {
        send(&mut s, DATA, 0, id, &piece);
        sent += piece.len();
    }
    assert!(s.ended.is_none());
    send(&mut s, DATA, 0, id, b"x");
    assert!(matches!(s.poll_head(id, &cx()), Poll::Ready(Ok(_))));
    // Over the stream's window: reset FLOW_CONTROL_ERROR, the connection goes on.
    assert!(matches!(s.streams[&id].failure, Some(Failure::Reset(3))));
    assert!(s.ended.is_none());

    let id = s.open(&block(&[(":method", "GET")]), true);
    s.frame(HEADERS, END_HEADERS, id, &block(HEAD));
    written(&mut s);
    for _ in 0..64 {
        send(&mut s, DATA, 0, id, &piece);
    }
    for _ in 0..64 {
        assert!(matches!(s.poll_data(id, &cx()), Poll::Ready(Some(Ok(_)))));
    }
    let updates: Vec<_> = written(&mut s)
        .into_iter()
        .filter(|f| f.0 == WINDOW_UPDATE)
        .map(|f| (f.2, u32::from_be_bytes(f.3[..].try_into().unwrap())))
        .collect();
    // The connection's as the data came (past half of its window with the 32nd piece of the
    // second stream, the first's 2 MB and a byte before them), whether read or not; the
    // stream's as its client took half of its window.
    let given = STREAM_WINDOW + 1 + 32 * 16_384;
    assert_eq!(updates, [(0, given), (id, STREAM_WINDOW / 2)]);
    s.check();
}

#[test]
fn goaway_fails_the_streams_above_its_last_and_takes_no_new_one() {
    let mut s = fresh();
    let a = s.open(&block(&[(":method", "GET")]), true);
    let b = s.open(&block(&[(":method", "GET")]), true);
    let mut p = a.to_be_bytes().to_vec();
    p.extend_from_slice(&0u32.to_be_bytes());
    send(&mut s, GOAWAY, 0, 0, &p);
    assert!(s.refuses());
    assert!(matches!(
        s.poll_head(b, &cx()),
        Poll::Ready(Err(Failure::GoAway(0)))
    ));
    assert!(s.poll_head(a, &cx()).is_pending());
    s.frame(HEADERS, END_HEADERS | END_STREAM, a, &block(HEAD));
    assert!(matches!(s.poll_head(a, &cx()), Poll::Ready(Ok(_))));
    s.forget(a);
    s.forget(b);
    assert!(s.finished());
}

#[test]
fn the_upstreams_limit_on_streams_holds_new_ones() {
    let mut s = fresh();
    send(&mut s, SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 1]);
    assert!(s.poll_open(&cx()).is_ready());
    let a = s.open(&block(&[(":method", "GET")]), true);
    assert!(s.poll_open(&cx()).is_pending());
    send(&mut s, RST_STREAM, 0, a, &8u32.to_be_bytes());
    assert!(matches!(
        s.poll_head(a, &cx()),
        Poll::Ready(Err(Failure::Reset(8)))
    ));
    assert!(s.poll_open(&cx()).is_ready());
}

#[test]
fn malformed_heads_and_trailers_reset_their_stream_only() {
    let mut s = fresh();
    let a = s.open(&block(&[(":method", "GET")]), true);
    s.frame(
        HEADERS,
        END_HEADERS,
        a,
        &block(&[("X-Up", "1"), (":status", "200")]),
    );
    assert!(matches!(
        s.poll_head(a, &cx()),
        Poll::Ready(Err(Failure::Reset(1)))
    ));
    let f = written(&mut s);
    assert_eq!(
        (f[1].0, f[1].2, &f[1].3[..]),
        (RST_STREAM, a, &1u32.to_be_bytes()[..])
    );
    let b = s.open(&block(&[(":method", "GET")]), true);
    s.frame(HEADERS, END_HEADERS, b, &block(&[(":status", "100")]));
    s.frame(HEADERS, END_HEADERS, b, &block(HEAD));
    assert!(matches!(s.poll_head(b, &cx()), Poll::Ready(Ok(h)) if h.status == 200));
    s.frame(HEADERS, END_HEADERS, b, &block(&[("grpc-status", "0")]));
    assert!(matches!(
        s.poll_data(b, &cx()),
        Poll::Ready(Some(Err(Failure::Reset(1))))
    ));
    assert!(s.ended.is_none());
}

#[test]
fn floods_and_connection_faults_end_the_connection() {
    type Case = fn(&mut State, u32);
    let cases: [(Case, u32); 6] = [
        (
            |s, id| {
                for _ in 0..=EMPTY_DATA_MAX {
                    send(s, DATA, 0, id, b"");
                }
            },
            ENHANCE_YOUR_CALM,
        ),
        (
            |s, id| {
                send(s, HEADERS, 0, id, b"");
                for _ in 0..BLOCK_FRAMES_MAX {
                    send(s, CONTINUATION, 0, id, b"\x90");
                }
            },
            ENHANCE_YOUR_CALM,
        ),
        (
            |s, _| {
                let inc = 0x7fff_ffffu32.to_be_bytes();
                send(s, WINDOW_UPDATE, 0, 0, &inc);
            },
            FLOW_CONTROL_ERROR,
        ),
        (
            |s, id| send(s, HEADERS, END_HEADERS, id + 2, b""),
            PROTOCOL_ERROR,
        ),
        (|s, _| send(s, PING, 0, 0, &[0u8; 5]), FRAME_SIZE_ERROR),
        (
            |s, id| send(s, HEADERS, END_HEADERS, id, b"\xff"),
            COMPRESSION_ERROR,
        ),
    ];
    for (i, (case, code)) in cases.into_iter().enumerate() {
        let mut s = fresh();
        let id = s.open(&block(&[(":method", "GET")]), true);
        s.frame(HEADERS, END_HEADERS, id, &block(HEAD));
        written(&mut s);
        case(&mut s, id);
        assert!(
            matches!(s.ended, Some(Failure::GoAway(c)) if c == code),
            "case {i}: {:?}",
            s.ended
        );
        let f = written(&mut s);
        assert_eq!(
            f.last().map(|f| (f.0, f.3[4..].to_vec())),
            Some((GOAWAY, code.to_be_bytes().to_vec()))
        );
        assert!(matches!(s.poll_data(id, &cx()), Poll::Ready(Some(Err(_)))));
    }
}

#[test]
fn padding_goes_back_to_both_windows() {
    let mut s = fresh();
    let id = s.open(&block(&[(":method", "GET")]), true);
    s.frame(HEADERS, END_HEADERS, id, &block(HEAD));
    let mut padded = vec![254u8, b'x'];
    padded.extend([0u8; 254]);
    for _ in 0..2 * STREAM_WINDOW / 256 {
        send(&mut s, DATA, PADDED, id, &padded);
        while let Poll::Ready(Some(Ok(_))) = s.poll_data(id, &cx()) {}
        s.check();
    }
    assert!(s.ended.is_none() && s.streams[&id].failure.is_none());
}
