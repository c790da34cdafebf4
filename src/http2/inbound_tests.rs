use super::*;
use crate::http2::ledger;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.extend_from_slice(&ledger::frame_head(payload.len(), kind, flags, stream));
    out.extend_from_slice(payload);
    out.to_vec()
}

fn block(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        hpack::encode(&mut out, n, v);
    }
    out
}

const GET: &[(&[u8], &[u8])] = &[
    (b":method", b"GET"),
    (b":scheme", b"http"),
    (b":authority", b"example.com"),
    (b":path", b"/a"),
];

fn inbound() -> Inbound {
    let mut i = Inbound::new(HeadRules::default());
    i.input()
        .extend_from_slice(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    i.process().unwrap();
    assert_eq!(
        i.output().split().as_ref(),
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    );
    i
}

/// The fields of the header block `out` holds (one HEADERS frame).
fn written(out: &mut BytesMut) -> Vec<(String, String)> {
    let bytes = out.split();
    assert_eq!(bytes[3], HEADERS);
    let len = usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
    Decoder::new()
        .decode(&bytes[9..9 + len], 1 << 20)
        .unwrap()
        .fields
        .into_iter()
        .map(|f| {
            (
                String::from_utf8(f.name.to_vec()).unwrap(),
                String::from_utf8(f.value.to_vec()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_request_goes_on_as_its_canonical_head() {
    let mut i = inbound();
    let mut fields = GET.to_vec();
    fields.push((b"x_smuggle", b"1"));
    fields.push((b"accept", b"*/*"));
    i.input().extend_from_slice(&frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        1,
        &block(&fields),
    ));
    i.process().unwrap();
    let got = written(i.output());
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            ":method",
            ":scheme",
            ":path",
            "host",
            "accept",
            request::STREAM_FIELD
        ]
    );
    assert_eq!(got[3].1, "example.com");
    let notices = i.take_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(
        notices[0].to_string(),
        "client sent invalid header: \"x_smuggle\""
    );
}

#[test]
fn a_field_http2_forbids_resets_its_stream_alone() {
    let mut i = inbound();
    let mut bad = GET.to_vec();
    bad.push((b"X-A", b"1"));
    i.input()
        .extend_from_slice(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block(&bad)));
    i.input()
        .extend_from_slice(&frame(HEADERS, END_STREAM | END_HEADERS, 3, &block(GET)));
    i.process().unwrap();
    assert!(i.take_refused().is_empty());
    let notices = i.take_notices();
    assert_eq!(
        notices[0].to_string(),
        "client sent invalid header name: \"X-A\""
    );
    let out = i.output();
    let first = written(&mut out.split_to(9 + usize::from(out[2])));
    assert!(first.iter().any(|(n, _)| n == "connection"), "{first:?}");
    assert_eq!(written(out)[0].1, "GET");
}

#[test]
fn an_empty_field_name_ends_the_connection() {
    let mut i = inbound();
    let mut bad = GET.to_vec();
    bad.push((b"", b"1"));
    i.input()
        .extend_from_slice(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block(&bad)));
    assert_eq!(i.process(), Err(Abort::Field("zero header name length")));
}

#[test]
fn a_refused_request_becomes_a_stand_in_and_the_next_goes_on() {
    let mut i = inbound();
    let mut bad = GET.to_vec();
    bad.push((b"content-length", b"1"));
    bad.push((b"content-length", b"1"));
    i.input()
        .extend_from_slice(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block(&bad)));
    i.input()
        .extend_from_slice(&frame(HEADERS, END_STREAM | END_HEADERS, 3, &block(GET)));
    i.process().unwrap();
    let refused = i.take_refused();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].refusal.status, 400);
    let out = i.output();
    let first = written(&mut out.split_to(9 + usize::from(out[2])));
    assert_eq!(first[0].1, request::STAND_IN_METHOD);
    assert_eq!(written(out)[0].1, "GET");
}

#[test]
fn data_passes_through_as_it_arrives() {
    let mut i = inbound();
    let data = frame(DATA, 0, 1, &[7u8; 100]);
    i.input().extend_from_slice(&data[..50]);
    i.process().unwrap();
    assert_eq!(i.output().split().as_ref(), &data[..50]);
    i.input().extend_from_slice(&data[50..]);
    i.process().unwrap();
    assert_eq!(i.output().split().as_ref(), &data[50..]);
}

#[test]
fn a_block_in_59_continuations_is_served() {
    let mut i = inbound();
    let b = block(GET);
    let mut pieces = b.chunks(b.len().div_ceil(59)).collect::<Vec<_>>();
    while pieces.len() < 59 {
        pieces.push(&[]);
    }
    i.input()
        .extend_from_slice(&frame(HEADERS, END_STREAM, 1, pieces[0]));
    for (n, p) in pieces.iter().enumerate().skip(1) {
        let flags = if n == 58 { END_HEADERS } else { 0 };
        i.input()
            .extend_from_slice(&frame(CONTINUATION, flags, 1, p));
    }
    i.process().unwrap();
    assert_eq!(written(i.output())[0].1, "GET");
}

#[test]
fn floods_are_cut_at_their_budget() {
    for (kind, flags, len, flood) in [
        (PING, 0, 8, Flood::Ping),
        (SETTINGS, 0, 0, Flood::Settings),
        (WINDOW_UPDATE, 0, 4, Flood::WindowUpdate),
        (PRIORITY, 0, 5, Flood::Priority),
        (RST_STREAM, 0, 4, Flood::RstStream),
        (0x42, 0, 3, Flood::Unknown),
    ] {
        let mut i = inbound();
        let f = frame(kind, flags, u32::from(kind == DATA), &vec![0u8; len]);
        for _ in 0..BASE {
            i.input().extend_from_slice(&f);
        }
        i.process().unwrap();
        i.input().extend_from_slice(&f);
        assert_eq!(
            i.process(),
            Err(Abort::Flood {
                kind: flood,
                count: BASE + 1
            })
        );
    }
}

#[test]
fn empty_data_is_cut_at_the_h2_crates_bound() {
    let mut i = inbound();
    let f = frame(DATA, 0, 1, &[]);
    for _ in 0..EMPTY_DATA_MAX {
        i.input().extend_from_slice(&f);
    }
    i.process().unwrap();
    i.input().extend_from_slice(&f);
    assert!(matches!(
        i.process(),
        Err(Abort::Flood {
            kind: Flood::Data,
            count: 101
        })
    ));
}

#[test]
fn what_was_served_raises_the_budget() {
    let mut i = inbound();
    for _ in 0..5 {
        i.served();
    }
    let f = frame(PING, 0, 1, &[0u8; 8]);
    for _ in 0..BASE + 10 {
        i.input().extend_from_slice(&f);
    }
    i.process().unwrap();
    i.input().extend_from_slice(&f);
    assert!(i.process().is_err());
}

#[test]
fn an_endless_block_is_cut_by_its_bytes() {
    let mut i = inbound();
    i.input()
        .extend_from_slice(&frame(HEADERS, 0, 1, &block(GET)));
    let piece = frame(CONTINUATION, 0, 1, &[0x40; 1000]);
    let mut cut = None;
    for n in 0..100 {
        i.input().extend_from_slice(&piece);
        if let Err(a) = i.process() {
            cut = Some((n, a));
            break;
        }
    }
    let (n, a) = cut.expect("the block was cut");
    assert!((40..60).contains(&n), "cut after {n} KB");
    assert!(matches!(
        a,
        Abort::Flood {
            kind: Flood::Continuation,
            ..
        }
    ));
}

#[test]
fn broken_hpack_is_a_compression_error() {
    let mut i = inbound();
    i.input()
        .extend_from_slice(&frame(HEADERS, END_HEADERS, 1, &[0x80]));
    assert!(matches!(i.process(), Err(Abort::Compression(_))));
}

#[test]
fn trailers_with_a_pseudo_header_reset_the_stream() {
    let mut i = inbound();
    i.input()
        .extend_from_slice(&frame(HEADERS, END_HEADERS, 1, &block(GET)));
    i.process().unwrap();
    i.output().clear();
    i.input().extend_from_slice(&frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        1,
        &block(&[(b":path", b"/x")]),
    ));
    i.process().unwrap();
    assert_eq!(written(i.output())[0].0, "connection");
}

/// A connection that served stream 1 and was parked.
fn parked() -> (Inbound, ledger::Replay) {
    let mut i = inbound();
    i.input()
        .extend_from_slice(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0x10, 0]));
    i.input()
        .extend_from_slice(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block(GET)));
    i.process().unwrap();
    i.output().clear();
    // hyper's answers: its SETTINGS, their acknowledgements, the response.
    let l = i.ledger();
    l.server_frame(SETTINGS, 0, 0, 12, &[]);
    l.server_frame(SETTINGS, 0x1, 0, 0, &[]);
    l.server_frame(HEADERS, END_STREAM | END_HEADERS, 1, 20, &[]);
    i.input().extend_from_slice(&frame(SETTINGS, 0x1, 0, &[]));
    i.process().unwrap();
    i.output().clear();
    assert!(i.parkable(1 << 20));
    let replay = i.park(1 << 20).expect("parked");
    (i, replay)
}

/// After a park, frames on the streams of before it are answered here as h2
/// answers a closed stream; hyper never sees them.
#[test]
fn frames_on_streams_of_before_a_park_are_answered_here() {
    let (mut i, _) = parked();
    let mut late = frame(WINDOW_UPDATE, 0, 1, &7u32.to_be_bytes());
    late.extend(frame(PRIORITY, 0, 1, &[0, 0, 0, 0, 1]));
    late.extend(frame(RST_STREAM, 0, 1, &[0, 0, 0, 8]));
    late.extend(frame(DATA, 0, 1, b"abc"));
    late.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, &block(GET)));
    i.input().extend_from_slice(&late);
    i.process().unwrap();
    assert!(i.output().is_empty(), "hyper sees none of them");
    let mut want = ledger::rst_stream(1, STREAM_CLOSED).to_vec();
    want.extend(ledger::window_update(0, 3));
    want.extend(ledger::rst_stream(1, STREAM_CLOSED));
    assert_eq!(std::mem::take(i.answers()), want);
    // A new stream goes on.
    i.input()
        .extend_from_slice(&frame(HEADERS, END_STREAM | END_HEADERS, 3, &block(GET)));
    i.process().unwrap();
    assert_eq!(written(i.output())[0], (":method".into(), "GET".into()));
}

/// A client window below a fresh connection's: its next WINDOW_UPDATEs reach
/// hyper less the difference, and it is counted as granted in full.
#[test]
fn the_deficit_is_taken_from_the_clients_next_window_updates() {
    let (mut i, replay) = parked();
    assert_eq!(replay.deficit, 0);
    let (mut i, deficit) = {
        // Stream 3's response took 40 000 of the client's window.
        i.input()
            .extend_from_slice(&frame(HEADERS, END_STREAM | END_HEADERS, 3, &block(GET)));
        i.process().unwrap();
        i.output().clear();
        i.ledger().server_frame(HEADERS, 0x4, 3, 20, &[]);
        i.ledger().server_frame(DATA, END_STREAM, 3, 40_000, &[]);
        let r = i.park(1 << 20).expect("parked again");
        (i, r.deficit)
    };
    assert_eq!(deficit, 40_000);
    i.input()
        .extend_from_slice(&frame(WINDOW_UPDATE, 0, 0, &30_000u32.to_be_bytes()));
    i.input()
        .extend_from_slice(&frame(WINDOW_UPDATE, 0, 0, &30_000u32.to_be_bytes()));
    i.input()
        .extend_from_slice(&frame(WINDOW_UPDATE, 0, 0, &5u32.to_be_bytes()));
    i.process().unwrap();
    let mut want = ledger::window_update(0, 20_000).to_vec();
    want.extend(frame(WINDOW_UPDATE, 0, 0, &5u32.to_be_bytes()));
    assert_eq!(i.output().split().as_ref(), want.as_slice());
    assert_eq!(i.deficit(), 0);
    assert_eq!(i.take_granted(), 60_005);
}

/// A client's RST_STREAM stops the reading once it is whole in the output
/// (the server lets its stream go before hyper reads on); the frames after
/// it come with the next call.
#[test]
fn a_clients_rst_stream_stops_the_reading_after_it() {
    let mut i = inbound();
    let get = |stream| frame(HEADERS, END_STREAM | END_HEADERS, stream, &block(GET));
    let rst = frame(RST_STREAM, 0, 1, &8u32.to_be_bytes());
    i.input().extend_from_slice(&get(1));
    i.input().extend_from_slice(&rst[..11]);
    i.process().unwrap();
    assert!(i.take_client_resets().is_empty(), "not whole yet");
    i.input().extend_from_slice(&rst[11..]);
    i.input().extend_from_slice(&get(3));
    i.process().unwrap();
    assert_eq!(i.take_client_resets(), [1]);
    assert!(i.stopped());
    assert!(i.output().ends_with(&rst), "up to the reset");
    i.output().clear();
    i.process().unwrap();
    assert!(!i.stopped());
    assert_eq!(written(i.output())[0], (":method".into(), "GET".into()));
}

/// HEADERS on a stream the client may not open (even: the server's; 0: the connection's) is a
/// connection error (RFC 9113 §5.1.1), as nginx's "incorrect identifier".
#[test]
fn headers_on_an_even_stream_end_the_connection() {
    for stream in [0, 2, 4] {
        let mut i = inbound();
        i.input().extend_from_slice(&frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            stream,
            &block(GET),
        ));
        assert_eq!(
            i.process(),
            Err(Abort::Protocol("HEADERS frame with incorrect identifier")),
            "stream {stream}"
        );
        assert!(i.output().is_empty(), "nothing of it reaches hyper");
    }
}

/// A request whose priority fields name its own stream is reset (RFC 9113 §5.3.1), never a
/// request: hyper gets the block that makes it reset the stream; the next stream is served.
#[test]
fn a_stream_depending_on_itself_is_reset_and_the_next_served() {
    let mut i = inbound();
    let mut payload = vec![0x80, 0, 0, 1, 15]; // exclusive, depends on 1, weight 16
    payload.extend(block(GET));
    i.input().extend_from_slice(&frame(
        HEADERS,
        END_STREAM | END_HEADERS | 0x20,
        1,
        &payload,
    ));
    i.process().unwrap();
    let got = written(i.output());
    assert!(
        got.iter().any(|(n, v)| n == "connection" && v == "close"),
        "{got:?}"
    );
    assert_eq!(
        i.take_resets(),
        0,
        "no access-log line: it never was a request"
    );
    // Depending on another stream is fine.
    let mut payload = vec![0, 0, 0, 1, 15];
    payload.extend(block(GET));
    i.input().extend_from_slice(&frame(
        HEADERS,
        END_STREAM | END_HEADERS | 0x20,
        3,
        &payload,
    ));
    i.process().unwrap();
    let got = written(i.output());
    assert!(
        got.iter().any(|(n, v)| n == ":path" && v == "/a"),
        "{got:?}"
    );
    assert!(!got.iter().any(|(n, _)| n == "connection"), "{got:?}");
}
