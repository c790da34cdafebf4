//! Beyond the decision: a streamed response compressed as it arrives, a slow client that never
//! makes sluice hold a response, HTTP/2's framing beside nginx's, `$gzip_ratio` beside nginx's,
//! zstd and brotli chosen by the client, and a server's own answers.

use super::{decoded, nginx_conf, sluice_conf, upstream};
use crate::support::{Nginx, Reply, Sluice, client, connect, request};
use std::io::Write;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The bytes of a chunked body that have arrived, de-chunked (the last chunk may be partial).
fn dechunk_partial(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol]).ok();
        let Some(size) = size.and_then(|s| usize::from_str_radix(s.trim(), 16).ok()) else {
            break;
        };
        let data = &b[eol + 2..];
        out.extend_from_slice(&data[..size.min(data.len())]);
        if size == 0 || data.len() < size + 2 {
            break;
        }
        b = &data[size + 2..];
    }
    out
}

/// A body the upstream sends in 5 pieces 400 ms apart reaches the client as they come: what
/// arrived within 300 ms of the first piece decodes to the whole first piece, well before the
/// end; the whole decodes to the upstream's bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_response_is_compressed_as_it_arrives() {
    let up = upstream::start();
    let sluice = Sluice::start(&sluice_conf(up.addr));
    let mut conn = connect(sluice.addr(), client(2)).await;
    let req = "GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nX-Up-Type: text/html\r\n\
               X-Up-Len: 20000\r\nX-Up-Pieces: 5\r\nX-Up-Gap: 400\r\nConnection: close\r\n\r\n";
    let start = Instant::now();
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut got: Vec<(Duration, Vec<u8>)> = Vec::new();
    let mut buf = vec![0; 65536];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf))
            .await
            .expect("the stream within 10 s")
            .unwrap();
        if n == 0 {
            break;
        }
        got.push((start.elapsed(), buf[..n].to_vec()));
    }
    let all: Vec<u8> = got.iter().flat_map(|g| g.1.clone()).collect();
    let head_end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let reply = Reply::parse(&all).unwrap();
    assert_eq!(reply.header("content-encoding"), Some("gzip"));
    assert_eq!(reply.header("transfer-encoding"), Some("chunked"));
    assert_eq!(decoded(&reply), upstream::body(20000));
    let total = got.last().unwrap().0;
    assert!(
        total >= Duration::from_millis(1500),
        "the whole took {total:?}"
    );
    // What had come 300 ms after the first body bytes.
    let mut seen = 0;
    let first = got
        .iter()
        .find(|g| {
            seen += g.1.len();
            seen > head_end
        })
        .expect("body bytes")
        .0;
    let early: Vec<u8> = got
        .iter()
        .filter(|g| g.0 <= first + Duration::from_millis(300))
        .flat_map(|g| g.1.clone())
        .collect();
    assert!(
        first + Duration::from_millis(800) < total,
        "first {first:?}, end {total:?}"
    );
    let mut dec = flate2::write::GzDecoder::new(Vec::new());
    dec.write_all(&dechunk_partial(&early[head_end..])).unwrap();
    dec.flush().unwrap();
    let piece = &upstream::body(20000)[..4000];
    assert!(
        dec.get_ref().starts_with(piece),
        "within 300 ms of the first bytes, {} bytes decode (the first piece is 4000)",
        dec.get_ref().len()
    );
}

/// curl over HTTP/2 (prior knowledge) to `addr`: the response fields (names lowercase) and body.
async fn h2(addr: std::net::SocketAddr, fields: &[&str]) -> Reply {
    let dir = tempfile::tempdir().unwrap();
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let mut cmd = tokio::process::Command::new("curl");
    cmd.args(["-s", "--http2-prior-knowledge", "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&body);
    for f in fields {
        cmd.args(["-H", f]);
    }
    let out = cmd
        .arg(format!("http://{addr}/"))
        .output()
        .await
        .expect("curl");
    assert!(out.status.success(), "curl to {addr}: {out:?}");
    let head = std::fs::read_to_string(&head).unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        reason: String::new(),
        headers,
        body: std::fs::read(&body).unwrap(),
        elapsed: Duration::ZERO,
        source: client(1),
        path: "/".into(),
    }
}

/// Over HTTP/2 both answer with the same coding, `Vary` and length (none when encoded), and the
/// DATA frames decode to the upstream's bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_http2_framing() {
    let up = upstream::start();
    let conf = nginx_conf(up.addr).replace("server {", "server {\n    listen http2;");
    let nginx = Nginx::start(&conf);
    let toml = sluice_conf(up.addr).replace("[[servers]]\n", "[[servers]]\nlisten = \"http2\"\n");
    let sluice = Sluice::start(&toml);
    for (ae, len) in [
        ("gzip", 5000),
        ("deflate", 5000),
        ("gzip", 50),
        ("gzip", 300_000),
    ] {
        let fields = [
            &format!("Accept-Encoding: {ae}")[..],
            "X-Up-Type: text/html",
            &format!("X-Up-Len: {len}"),
        ];
        let (n, s) = (
            h2(nginx.addr(), &fields).await,
            h2(sluice.addr(), &fields).await,
        );
        for name in ["content-encoding", "vary", "content-length"] {
            assert_eq!(n.header(name), s.header(name), "{name} for {ae} {len}");
        }
        assert_eq!(decoded(&n), upstream::body(len), "nginx {ae} {len}");
        assert_eq!(decoded(&s), upstream::body(len), "sluice {ae} {len}");
    }
}

/// `$gzip_ratio`: nginx's and sluice's for the same response within a tenth of each other (two
/// zlibs, one level), and `-` for one sent as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_gzip_ratio_in_the_access_log() {
    let up = upstream::start();
    let nginx = Nginx::start(&nginx_conf(up.addr));
    let sluice = Sluice::start(&sluice_conf(up.addr));
    let fields = [
        ("Accept-Encoding", "gzip"),
        ("X-Up-Type", "text/html"),
        ("X-Up-Len", ""),
    ];
    for addr in [nginx.addr(), sluice.addr()] {
        for len in ["100000", "10"] {
            let mut f = fields;
            f[2].1 = len;
            request(addr, client(2), "GET", "/", &f).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let n = std::fs::read_to_string(nginx.prefix().join("logs/ratio.log")).unwrap();
    let s = sluice.stdout();
    let ratios = |log: &str| -> Vec<String> {
        log.lines()
            .filter_map(|l| l.strip_prefix("/ "))
            .map(str::to_string)
            .collect()
    };
    let (n, s) = (ratios(&n), ratios(&s));
    assert_eq!(n.len(), 2, "nginx: {n:?}");
    assert_eq!(s.len(), 2, "sluice: {s:?}");
    assert_eq!((&n[1][..], &s[1][..]), ("-", "-"));
    let (rn, rs): (f64, f64) = (n[0].parse().unwrap(), s[0].parse().unwrap());
    assert!(
        rn > 5.0 && (rs - rn).abs() / rn < 0.1,
        "nginx {rn}, sluice {rs}"
    );
    assert!(
        s[0].split_once('.').is_some_and(|(_, f)| f.len() == 2),
        "{}",
        s[0]
    );
}

/// `compress = ["zstd", "br", "gzip"]`: the client's preference by q-values, the list's order
/// for ties, gzip by nginx's rules; the same `Vary` and framing for every coding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zstd_and_brotli_by_the_clients_preference() {
    let up = upstream::start();
    let toml = sluice_conf(up.addr).replace(
        "gzip = true\n",
        "gzip = true\ncompress = [\"zstd\", \"br\", \"gzip\"]\n",
    );
    let sluice = Sluice::start(&toml);
    for (ae, want) in [
        ("gzip, deflate, br, zstd", Some("zstd")),
        ("gzip, br", Some("br")),
        ("br;q=0.5, gzip", Some("gzip")),
        ("zstd;q=0.1, br;q=0.2", Some("br")),
        ("zstd;q=0, gzip;q=0", None),
        ("deflate", None),
    ] {
        let f = [
            ("Accept-Encoding", ae),
            ("X-Up-Type", "text/html"),
            ("X-Up-Len", "70000"),
        ];
        let r = request(sluice.addr(), client(2), "GET", "/", &f).await;
        assert_eq!(r.header("content-encoding"), want, "{ae}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{ae}");
        assert_eq!(r.header("content-length").is_none(), want.is_some(), "{ae}");
        assert_eq!(decoded(&r), upstream::body(70000), "{ae}");
    }
}

/// What a server answers before any location is found (here nginx's 404 for a path no location
/// matches) goes through the server's settings too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_own_answer_is_compressed_by_its_settings() {
    let sluice = Sluice::start(
        "gzip = true\ngzip_types = \"application/problem+json\"\ngzip_min_length = 10\n\
         [[servers]]\n[[servers.locations]]\npath = \"/only\"\nreturn = { status = 200 }\n",
    );
    let f = [("Accept-Encoding", "gzip")];
    let r = request(sluice.addr(), client(2), "GET", "/elsewhere", &f).await;
    assert_eq!(
        (r.status, r.header("content-encoding")),
        (404, Some("gzip"))
    );
    assert!(
        String::from_utf8(decoded(&r))
            .unwrap()
            .contains("\"status\":404")
    );
}

/// The resident memory of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap();
    kb.trim()
        .trim_end_matches(" kB")
        .trim()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// A client that does not read: sluice stops reading the upstream once the sockets are full, so
/// a 24 MB response that does not compress never sits in its memory; read later, it is whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_never_makes_sluice_hold_the_response() {
    let up = upstream::start();
    let sluice = Sluice::start(&sluice_conf(up.addr));
    let len = 24 << 20;
    let mut conn = connect(sluice.addr(), client(2)).await;
    let before = rss(sluice.pid());
    let req = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nX-Up-Type: text/html\r\n\
         X-Up-Len: {len}\r\nX-Up-Noise: 1\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let held = rss(sluice.pid()).saturating_sub(before);
    let mut all = Vec::new();
    conn.read_to_end(&mut all).await.unwrap();
    let reply = Reply::parse(&all).unwrap();
    assert_eq!(reply.header("content-encoding"), Some("gzip"));
    assert!(
        decoded(&reply) == upstream::noise(len),
        "the body decodes to the upstream's"
    );
    assert!(
        held < 8 << 20,
        "sluice grew by {held} bytes while the client did not read"
    );
}
