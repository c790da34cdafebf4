//! PROXY headers written by hand on fresh connections from 127.0.0.1 (trusted), each followed by
//! [`REQUEST`]: what is served and with which address, what is refused and logged how, and where
//! sluice must do better than nginx 1.22 (see the parent module's notes).

use super::*;

/// The v2 signature.
const SIG: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// A v2 header: version/command byte, family/protocol byte, the length field, then `payload`.
fn v2(ver_cmd: u8, family: u8, len: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = SIG.to_vec();
    h.extend([ver_cmd, family]);
    h.extend(len.to_be_bytes());
    h.extend(payload);
    h
}

/// 192.0.2.7:51000 → 198.51.100.9:443, v2's IPv4 address block.
fn inet4() -> Vec<u8> {
    let mut b = vec![192, 0, 2, 7, 198, 51, 100, 9];
    b.extend(51000u16.to_be_bytes());
    b.extend(443u16.to_be_bytes());
    b
}

/// [2001:db8::7]:51000 → [2001:db8::9]:443, v2's IPv6 address block.
fn inet6() -> Vec<u8> {
    let src: std::net::Ipv6Addr = "2001:db8::7".parse().expect("an address");
    let dst: std::net::Ipv6Addr = "2001:db8::9".parse().expect("an address");
    let mut b = src.octets().to_vec();
    b.extend(dst.octets());
    b.extend(51000u16.to_be_bytes());
    b.extend(443u16.to_be_bytes());
    b
}

/// A v2 `PROXY` over IPv4 with `tlvs` after the addresses.
fn v2_inet4(tlvs: &[u8]) -> Vec<u8> {
    let payload = [inet4(), tlvs.to_vec()].concat();
    v2(
        0x21,
        0x11,
        u16::try_from(payload.len()).expect("short"),
        &payload,
    )
}

/// `header` then [`REQUEST`] in one write.
fn with_request(header: &[u8]) -> Vec<Step> {
    vec![Step::Write([header, REQUEST].concat())]
}

const V1_TCP4: &[u8] = b"PROXY TCP4 192.0.2.7 198.51.100.9 51000 443\r\n";
const ACCESS4: &str = "192.0.2.7 192.0.2.7 51000 198.51.100.9 443 200";
const ACCESS6: &str = "2001:db8::7 2001:db8::7 51000 2001:db8::9 443 200";
const ACCESS_NONE: &str = "127.0.0.1 - - - - 200";

/// Both ways of the header: v1 TCP4 and TCP6, UNKNOWN with and without addresses; v2 PROXY over
/// IPv4 and IPv6, with TLVs, and LOCAL. Each served, with the header's source as `$remote_addr`
/// (the peer, 127.0.0.1, for UNKNOWN and LOCAL) upstream and in the access log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_headers_accepted() {
    let pair = plain_pair();
    // ALPN "h2", then a NOOP of three bytes.
    let tlvs = [&[0x01, 0, 2][..], b"h2", &[0x04, 0, 3, 0, 0, 0]].concat();
    let served = |real_ip, access| Want::Served { real_ip, access };
    let cases: Vec<(&str, Vec<u8>, Want)> = vec![
        ("v1 TCP4", V1_TCP4.to_vec(), served("192.0.2.7", ACCESS4)),
        (
            "v1 TCP6",
            b"PROXY TCP6 2001:db8::7 2001:db8::9 51000 443\r\n".to_vec(),
            served("2001:db8::7", ACCESS6),
        ),
        (
            "v1 UNKNOWN",
            b"PROXY UNKNOWN\r\n".to_vec(),
            served("127.0.0.1", ACCESS_NONE),
        ),
        (
            "v1 UNKNOWN with addresses",
            b"PROXY UNKNOWN 192.0.2.7 198.51.100.9 51000 443\r\n".to_vec(),
            served("127.0.0.1", ACCESS_NONE),
        ),
        ("v2 IPv4", v2_inet4(&[]), served("192.0.2.7", ACCESS4)),
        (
            "v2 IPv6",
            v2(0x21, 0x21, 36, &inet6()),
            served("2001:db8::7", ACCESS6),
        ),
        (
            "v2 LOCAL",
            v2(0x20, 0x00, 0, &[]),
            served("127.0.0.1", ACCESS_NONE),
        ),
        (
            "v2 IPv4 with TLVs",
            v2_inet4(&tlvs),
            served("192.0.2.7", ACCESS4),
        ),
    ];
    let cases = cases
        .into_iter()
        .map(|(name, header, want)| (name, with_request(&header), want.clone(), want))
        .collect();
    run_cases(&pair, cases, Duration::from_secs(3)).await;
}

/// Headers both refuse: the connection closed without a byte, nothing forwarded, one error-log
/// entry. Where sluice's entry differs from nginx's on purpose, each side has its own:
/// - `broken header: "…"`: nginx quotes every byte of its first read, raw (a client writes
///   lines of its own into the error log); sluice quotes what it read, escaped as `\xNN`
///   ([`quoted_line`]);
/// - a v2 length shorter than its address block: nginx writes nothing, sluice says so.
///
/// A v2 header announcing 200 bytes, 12 sent, then FIN: nginx judges its first read (`header is
/// too large`); sluice waits for the rest, as for any split header, and judges the same bytes
/// the same way when the client closes.
///
/// A v2 header announcing 5000 bytes (more than sluice's 4096) is `header is too large` on both,
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_headers_refused() {
    let pair = plain_pair();
    let bad_port = b"PROXY TCP4 192.0.2.7 198.51.100.9 70000 443\r\n";
    let garbage = b"HELLO WORLD\r\n";
    let refused = |line: String| Want::Refused { log: vec![line] };
    let quoted = |bytes: &[u8]| (refused(broken_header(bytes)), refused(quoted_line(bytes)));
    let same = |line: String| (refused(line.clone()), refused(line));
    let cases: Vec<(&str, Vec<Step>, (Want, Want))> = vec![
        (
            "no header",
            vec![Step::Write(REQUEST.to_vec())],
            quoted(REQUEST),
        ),
        (
            "garbage",
            with_request(garbage),
            quoted(&[&garbage[..], REQUEST].concat()),
        ),
        (
            "v1 port 70000",
            with_request(bad_port),
            quoted(&[&bad_port[..], REQUEST].concat()),
        ),
        (
            "v2 version 3",
            with_request(&v2(0x31, 0x11, 12, &inet4())),
            same(format!(
                "[error] unknown PROXY protocol version: 3{READING}"
            )),
        ),
        (
            "v2 length 4 < the IPv4 block",
            with_request(&v2(0x21, 0x11, 4, &inet4())),
            (
                Want::Refused { log: Vec::new() },
                refused(format!(
                    "[error] broken header: PROXY protocol v2 addresses shorter than their \
                     family{READING}"
                )),
            ),
        ),
        (
            "v2 announcing 200 bytes, 12 sent, then FIN",
            vec![Step::Write(v2(0x21, 0x11, 200, &inet4())), Step::ShutWrite],
            same(format!("[error] header is too large{READING}")),
        ),
        (
            "v2 announcing 5000 bytes, 12 sent",
            vec![Step::Write(v2(0x21, 0x11, 5000, &inet4()))],
            same(format!("[error] header is too large{READING}")),
        ),
    ];
    let cases = cases
        .into_iter()
        .map(|(name, steps, (nginx, sluice))| (name, steps, nginx, sluice))
        .collect();
    run_cases(&pair, cases, Duration::from_secs(3)).await;
}

/// Headers nginx 1.22 serves although they break the protocol: an IPv4 address that is not one
/// (`$proxy_protocol_addr` `192.0.2.999`, `$remote_addr` stays the peer), and a v1 line of 148
/// bytes (the limit is 107) whose address is 100 digits. sluice must refuse them: closed, nothing
/// forwarded, a `broken header` line ([`quoted_line`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_headers_nginx_accepts_sluice_refuses() {
    let pair = plain_pair();
    let long = [
        &b"PROXY TCP4 "[..],
        &[b'1'; 100],
        b" 198.51.100.9 51000 443\r\n",
    ]
    .concat();
    assert!(long.len() > 107);
    let bad_addr = b"PROXY TCP4 192.0.2.999 198.51.100.9 51000 443\r\n";
    // What sluice read: the header and the request written with it.
    let strict = |header: &[u8]| Want::Refused {
        log: vec![quoted_line(&[header, REQUEST].concat())],
    };
    let cases = vec![
        (
            "v1 TCP4 192.0.2.999",
            with_request(bad_addr),
            Want::Served {
                real_ip: "127.0.0.1",
                access: "127.0.0.1 192.0.2.999 51000 198.51.100.9 443 200",
            },
            strict(bad_addr),
        ),
        (
            "v1 line of 148 bytes",
            with_request(&long),
            Want::Served {
                real_ip: "127.0.0.1",
                access: "127.0.0.1 1111111111111111111111111111111111111111111111111111111111\
                         111111111111111111111111111111111111111111 51000 198.51.100.9 443 200",
            },
            // Quoted up to the 107th byte: the longest a v1 line may be.
            strict(&long),
        ),
    ];
    run_cases(&pair, cases, Duration::from_secs(3)).await;
}

/// A header split across two TCP segments 50 ms apart (v1 after `PROXY TCP4 192.0.2.7 `, v2
/// after 10 bytes): nginx 1.22 reads only its first segment and closes with `broken header`;
/// sluice must read the whole header and serve the request as if it came in one piece.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_header_split_across_segments() {
    let pair = plain_pair();
    let pause = Step::Pause(Duration::from_millis(50));
    let split = |header: &[u8], at: usize| {
        vec![
            Step::Write(header[..at].to_vec()),
            pause.clone(),
            Step::Write([&header[at..], REQUEST].concat()),
        ]
    };
    let v2_header = v2_inet4(&[]);
    let served = Want::Served {
        real_ip: "192.0.2.7",
        access: ACCESS4,
    };
    let cases = vec![
        (
            "v1 in two segments",
            split(V1_TCP4, 21),
            Want::Refused {
                log: vec![broken_header(b"PROXY TCP4 192.0.2.7 ")],
            },
            served.clone(),
        ),
        (
            "v2 in two segments",
            split(&v2_header, 10),
            Want::Refused {
                log: vec![broken_header(&SIG[..10])],
            },
            served,
        ),
    ];
    run_cases(&pair, cases, Duration::from_secs(3)).await;
}

/// `client_header_timeout 1s` while the header is awaited. Nothing sent: both close after about
/// a second with nginx's `client timed out` line, nothing forwarded. The header trickling in a
/// byte every 100 ms: nginx refuses its first byte (`broken header: "P"`), sluice waits and
/// closes at the timeout with the same line as for silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_header_timeout() {
    let pair = plain_pair();
    let timed_out = format!("[info] client timed out (110: Connection timed out){READING}");
    let mut trickle = Vec::new();
    for &b in V1_TCP4 {
        trickle.push(Step::Write(vec![b]));
        trickle.push(Step::Pause(Duration::from_millis(100)));
    }
    let (n, s) = pair.sides();
    let limit = Duration::from_secs(4);
    // The client holds the connection, silent, for 2 s.
    let silence = [Step::Pause(Duration::from_secs(2))];
    let (silent_n, silent_s) =
        tokio::join!(observe(&n, &silence, limit), observe(&s, &silence, limit));
    let want = Want::Refused {
        log: vec![timed_out.clone()],
    };
    check("silence", "nginx (oracle)", &silent_n, &want);
    check("silence", "sluice", &silent_s, &want);
    for (side, seen) in [("nginx", &silent_n), ("sluice", &silent_s)] {
        assert!(
            (900..1800).contains(&seen.elapsed.as_millis()),
            "silence: {side} closed after {:?}, not client_header_timeout's 1 s",
            seen.elapsed
        );
    }
    let (slow_n, slow_s) = tokio::join!(observe(&n, &trickle, limit), observe(&s, &trickle, limit));
    let nginx_want = Want::Refused {
        log: vec![broken_header(b"P")],
    };
    check("trickle", "nginx (oracle)", &slow_n, &nginx_want);
    check("trickle", "sluice", &slow_s, &want);
    assert!(
        (900..1800).contains(&slow_s.elapsed.as_millis()),
        "trickle: sluice closed after {:?}, not client_header_timeout's 1 s",
        slow_s.elapsed
    );
}

/// A PROXY header sent to a listener without `proxy_protocol` is an ordinary bad request: `400`
/// and nginx's `client sent invalid request` (v1) / `client sent invalid method` (v2) lines,
/// nothing forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_header_to_a_plain_listener_is_a_bad_request() {
    // The same servers, listening without `proxy_protocol` and without `real_ip`.
    let setup = Setup::default();
    let pair = Pair::start(
        |up| {
            let conf = setup.nginx(up);
            conf.replace("listen proxy_protocol;", "")
                .replace("real_ip_header proxy_protocol;", "")
                .replace("set_real_ip_from 127.0.0.1;", "")
        },
        |up| {
            let conf = setup.sluice(up);
            let conf = conf.replace("listen           = \"proxy_protocol\"\n", "");
            conf.lines()
                .filter(|l| !l.starts_with("real_ip "))
                .map(|l| format!("{l}\n"))
                .collect()
        },
    );
    let (n, s) = pair.sides();
    let cases = [
        (
            "v1 line",
            with_request(V1_TCP4),
            "[info] client sent invalid request while reading client request line, client: \
             127.0.0.1, server: , request: \"PROXY TCP4 192.0.2.7 198.51.100.9 51000 443\"",
        ),
        (
            "v2 header",
            with_request(&v2_inet4(&[])),
            "[info] client sent invalid method while reading client request line, client: \
             127.0.0.1, server: , request: \"\0\"",
        ),
    ];
    for (case, steps, line) in cases {
        let limit = Duration::from_secs(3);
        let (seen_n, seen_s) = tokio::join!(observe(&n, &steps, limit), observe(&s, &steps, limit));
        for (side, seen) in [("nginx (oracle)", &seen_n), ("sluice", &seen_s)] {
            assert_eq!(seen.status, Some(400), "{case}: {side}: {seen:#?}");
            assert!(seen.closed, "{case}: {side} kept the connection: {seen:#?}");
            assert_eq!(seen.forwarded, 0, "{case}: {side} forwarded: {seen:#?}");
            assert_eq!(seen.log, [line], "{case}: {side}'s error log");
            assert_eq!(
                seen.access,
                ["127.0.0.1 - - - - 400"],
                "{case}: {side}'s access log"
            );
        }
    }
}
