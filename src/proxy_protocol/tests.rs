use super::*;

fn done(buf: &[u8]) -> Header {
    match parse(buf) {
        Ok(Parsed::Done(h)) => h,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
    }
}

fn addrs(src: &str, dst: &str) -> Option<Addresses> {
    Some(Addresses {
        source: src.parse().unwrap(),
        destination: dst.parse().unwrap(),
    })
}

/// A version 2 header: command, family/transport, address block, TLVs.
fn v2(command: u8, fam: u8, block: &[u8], tlvs: &[u8]) -> Vec<u8> {
    let mut b = SIGNATURE.to_vec();
    b.push(0x20 | command);
    b.push(fam);
    b.extend_from_slice(&((block.len() + tlvs.len()) as u16).to_be_bytes());
    b.extend_from_slice(block);
    b.extend_from_slice(tlvs);
    b
}

const V4_BLOCK: [u8; 12] = [192, 0, 2, 7, 198, 51, 100, 1, 0xc8, 0x22, 0x01, 0xbb];

#[test]
fn v1_tcp4_tcp6_and_unknown() {
    let line = b"PROXY TCP4 192.0.2.7 198.51.100.1 51234 443\r\nGET /";
    let h = done(line);
    assert_eq!(h.len, line.len() - 5);
    assert_eq!(h.addresses, addrs("192.0.2.7:51234", "198.51.100.1:443"));
    let h = done(b"PROXY TCP6 2001:db8::7 ::1 65535 0\r\n");
    assert_eq!(h.addresses, addrs("[2001:db8::7]:65535", "[::1]:0"));
    let h = done(b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n");
    assert_eq!((h.len, h.addresses), (35, None));
    assert_eq!(done(b"PROXY UNKNOWN\r\n").len, 15);
}

#[test]
fn v1_is_read_whole_however_it_is_split() {
    let line = b"PROXY TCP4 192.0.2.7 198.51.100.1 51234 443\r\n";
    for cut in 0..line.len() {
        assert_eq!(parse(&line[..cut]), Ok(Parsed::Incomplete), "cut at {cut}");
    }
    assert_eq!(done(line).len, line.len());
}

#[test]
fn v1_broken_lines_are_refused_with_what_nginx_shows() {
    for bad in [
        &b"GET / HTTP/1.1\r\n"[..],
        b"PROXY TCP4 192.0.2.7 198.51.100.1 51234 443\n",
        b"PROXY TCP5 1.2.3.4 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 1.2.3 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 ::1 1.2.3.4 1 2\r\n",
        b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 65536 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 -1 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 1  2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 1 2 3\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 1\r\n",
        b"PROXY\r\n",
        b"proxy TCP4 1.2.3.4 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 01.2.3.4 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 1.2.3.256 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 1.2.3.4.5 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 1..3.4 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 +1 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 123456 2\r\n",
    ] {
        assert!(
            matches!(parse(bad), Err(Broken::Line(_))),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // All that was read is shown, as nginx quotes its first read.
    let e = parse(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "broken header: \"GET / HTTP/1.1\\x0D\\x0AHost: a\\x0D\\x0A\\x0D\\x0A\""
    );
    let e = parse(b"\x16\x03\x01\x02\x00\x01").unwrap_err();
    assert_eq!(
        e.to_string(),
        "broken header: \"\\x16\\x03\\x01\\x02\\x00\\x01\""
    );
}

#[test]
fn v1_longer_than_107_bytes_is_refused_at_107() {
    let mut long = b"PROXY UNKNOWN ".to_vec();
    long.resize(106, b'x');
    assert_eq!(parse(&long), Ok(Parsed::Incomplete));
    long.push(b'x');
    assert!(matches!(parse(&long), Err(Broken::Line(shown)) if shown == long));
    let mut longer = long.clone();
    longer.resize(2000, b'y');
    assert!(matches!(parse(&longer), Err(Broken::Line(shown)) if shown.len() == SHOWN_MAX));
    // A line ending exactly at the bound is whole.
    let mut fits = b"PROXY UNKNOWN ".to_vec();
    fits.resize(105, b'x');
    fits.extend_from_slice(b"\r\n");
    assert_eq!(done(&fits).len, 107);
}

#[test]
fn v2_proxy_local_families_and_tlvs() {
    let h = done(&v2(1, 0x11, &V4_BLOCK, &[]));
    assert_eq!(h.addresses, addrs("192.0.2.7:51234", "198.51.100.1:443"));
    assert_eq!(h.len, 28);
    let mut block6 = [0u8; 36];
    block6[..16].copy_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
    block6[16..32].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
    block6[32..].copy_from_slice(&[0, 80, 1, 187]);
    let h = done(&v2(1, 0x21, &block6, &[]));
    assert_eq!(h.addresses, addrs("[2001:db8::7]:80", "[::1]:443"));
    // TLVs (a NOOP, an authority) are skipped within the length.
    let tlvs = [0x04, 0, 2, 0, 0, 0x02, 0, 3, b'a', b'.', b'b'];
    let with = v2(1, 0x11, &V4_BLOCK, &tlvs);
    let mut stream = with.clone();
    stream.extend_from_slice(b"GET / HTTP/1.1\r\n");
    let h = done(&stream);
    assert_eq!(h.len, with.len());
    assert_eq!(h.addresses, addrs("192.0.2.7:51234", "198.51.100.1:443"));
    // LOCAL (health checks), UNSPEC, UNIX, datagrams: no addresses.
    for (cmd, fam) in [(0, 0x11), (0, 0x00), (1, 0x00), (1, 0x31), (1, 0x12)] {
        let h = done(&v2(cmd, fam, &[0; 216], &[]));
        assert_eq!((h.len, h.addresses), (232, None), "cmd {cmd} fam {fam:#x}");
    }
    assert_eq!(done(&v2(0, 0, &[], &[])).len, 16);
}

#[test]
fn v2_is_read_whole_however_it_is_split() {
    let h = v2(1, 0x11, &V4_BLOCK, &[0x04, 0, 1, 0]);
    for cut in 0..h.len() {
        assert_eq!(parse(&h[..cut]), Ok(Parsed::Incomplete), "cut at {cut}");
    }
    assert_eq!(done(&h).len, h.len());
}

#[test]
fn v2_broken_headers() {
    let mut bad = v2(1, 0x11, &V4_BLOCK, &[]);
    bad[12] = 0x11;
    assert_eq!(parse(&bad), Err(Broken::Version(1)));
    assert_eq!(
        Broken::Version(1).to_string(),
        "unknown PROXY protocol version: 1"
    );
    bad[12] = 0x22;
    assert_eq!(parse(&bad), Err(Broken::Command(2)));
    assert_eq!(
        parse(&v2(1, 0x11, &V4_BLOCK[..8], &[])),
        Err(Broken::ShortAddresses)
    );
    assert_eq!(
        parse(&v2(1, 0x21, &[0; 20], &[])),
        Err(Broken::ShortAddresses)
    );
    let big = v2(1, 0x11, &V4_BLOCK, &[0; V2_MAX - 16 - 12 + 1]);
    assert_eq!(parse(&big[..16]), Err(Broken::TooLarge));
    let most = v2(1, 0x11, &V4_BLOCK, &[0; V2_MAX - 16 - 12]);
    assert_eq!(done(&most).len, V2_MAX);
}

#[test]
fn nothing_panics_on_any_short_input() {
    // Every prefix of every byte value after the signature.
    for b in 0..=255u8 {
        let mut buf = SIGNATURE.to_vec();
        buf.extend_from_slice(&[b, b, 0, 1, b]);
        for cut in 0..=buf.len() {
            let _ = parse(&buf[..cut]);
        }
        let _ = parse(&[b]);
        let _ = parse(&[b'P', b'R', b'O', b'X', b'Y', b' ', b, b'\n']);
    }
}

#[test]
fn a_header_cut_short_is_judged_as_nginx_judges_a_first_read() {
    let v1 = b"PROXY TCP4 192.0.2.7 ";
    assert_eq!(parse(v1), Ok(Parsed::Incomplete));
    assert_eq!(cut_short(v1), Broken::Line(v1.to_vec()));
    let v2 = v2(1, 0x11, &V4_BLOCK, &[]);
    assert_eq!(cut_short(&v2[..20]), Broken::TooLarge);
    assert_eq!(
        cut_short(&v2[..10]).to_string(),
        "broken header: \"\\x0D\\x0A\\x0D\\x0A\\x00\\x0D\\x0AQUI\""
    );
}

#[test]
fn v1_ipv4_reads_as_rusts_parser_does() {
    for a in ["0.0.0.0", "255.255.255.255", "10.0.0.1", "1.22.133.4"] {
        assert_eq!(ipv4(a.as_bytes()), a.parse().ok(), "{a}");
    }
    for bad in [
        "",
        "1.2.3",
        "1.2.3.4.",
        ".1.2.3",
        "1.2.3.04",
        "1.2.3.a",
        "256.1.1.1",
        "1.2.3.4444",
    ] {
        assert_eq!(ipv4(bad.as_bytes()), None, "{bad}");
        assert!(bad.parse::<Ipv4Addr>().is_err(), "{bad}");
    }
    assert_eq!(port(b"0"), Some(0));
    assert_eq!(port(b"00080"), Some(80));
    assert_eq!(port(b"65536"), None);
}
