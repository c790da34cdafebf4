//! Behind a load balancer (issue #43), what the differential tests against nginx cannot show:
//! with `real_ip` from the PROXY protocol, `geo`, `map`, `allow`/`deny` and the limits all follow
//! the header's client; the `$proxy_protocol_*` variables feed a `map` and a `geo` of their own;
//! `default_server` combines with `proxy_protocol`; and `real_ip.header = "Forwarded"` (RFC
//! 7239, which nginx does not read) names the client through trusted proxies.

use super::*;

/// A request on a fresh connection from 127.0.0.1 that begins with `header`; the status and
/// body (`None`: closed without an answer).
async fn via_header(addr: SocketAddr, header: &[u8], path: &str) -> Option<(u16, String)> {
    let mut s = crate::support::connect(addr, client(1)).await;
    let req = format!("GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    s.write_all(&[header, req.as_bytes()].concat()).await.ok()?;
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got))
        .await
        .expect("an answer or a close within 5 s")
        .ok()?;
    let reply = crate::support::Reply::parse(&got).ok()?;
    Some((reply.status, reply.body_text()))
}

fn v1(src: &str, port: u16) -> Vec<u8> {
    format!("PROXY TCP4 {src} 198.51.100.9 {port} 443\r\n").into_bytes()
}

/// `geo` (blocked network), `map` of the geo into the zone key, `access` and the limit, all on
/// the PROXY header's client; a `map` and a `geo` over `$proxy_protocol_addr` and
/// `$proxy_protocol_server_port` themselves; the address's `default_server`.
#[tokio::test]
async fn geo_map_access_and_limits_follow_the_proxy_protocol_client() {
    let toml = r#"
limit_req_status = 429
real_ip = { from = ["127.0.0.1"], header = "proxy_protocol" }

[geos.tier]
default  = "std"
networks = { "192.0.2.0/24" = "free", "198.18.0.0/15" = "staff" }

[geos.claimed]
source   = "$proxy_protocol_addr"
default  = "elsewhere"
networks = { "192.0.2.0/24" = "docnet" }

[maps.tier_key]
source = "$tier"
values = { "staff" = "" }
default = "$binary_remote_addr"

[maps.port_class]
source = "$proxy_protocol_server_port"
values = { "443" = "tls" }
default = "other"

[zones.z]
key  = "$tier_key"
size = "1m"
rate = "1r/m"

[[servers]]
listen = "proxy_protocol default_server"
access = ["deny 192.0.2.66", "allow all"]
[[servers.locations]]
path      = "/"
limit_req = { zone = "z" }
return    = { status = 200, body = "$remote_addr $tier $claimed $port_class\n" }
"#;
    let s = Sluice::in_process(toml);
    let addr = s.addr();
    // One client: its first request passes, its next is limited; another has its own bucket.
    let a = via_header(addr, &v1("192.0.2.7", 5000), "/").await;
    assert_eq!(a, Some((200, "192.0.2.7 free docnet tls\n".into())));
    let a2 = via_header(addr, &v1("192.0.2.7", 5001), "/").await;
    assert_eq!(a2.map(|r| r.0), Some(429));
    let b = via_header(addr, &v1("203.0.113.5", 5002), "/").await;
    assert_eq!(b, Some((200, "203.0.113.5 std elsewhere tls\n".into())));
    // `deny` reads the header's client too.
    let denied = via_header(addr, &v1("192.0.2.66", 5003), "/").await;
    assert_eq!(denied.map(|r| r.0), Some(403));
    // staff: an empty key, never limited.
    for port in 6000..6003 {
        let r = via_header(addr, &v1("198.18.0.1", port), "/").await;
        assert_eq!(r.map(|r| r.0), Some(200));
    }
    // A v2 LOCAL header (a health check): the connection's own address, variables empty.
    let local = b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00";
    let l = via_header(addr, local, "/").await;
    assert_eq!(l, Some((200, "127.0.0.1 std elsewhere other\n".into())));
    // No header at all: closed, nothing answered.
    assert_eq!(via_header(addr, b"", "/").await, None);
}

/// `real_ip.header = "Forwarded"`: `for=` nodes right to left through the trusted proxies;
/// `unknown` and an element that is not RFC 7239's grammar stop the walk (a broken element on
/// the client's side does not hide the proxies' on its right); an untrusted peer's field is
/// ignored.
#[tokio::test]
async fn forwarded_names_the_client_through_trusted_proxies() {
    let toml = r#"
limit_req_status = 429
real_ip = { from = ["127.0.0.1", "10.0.0.0/8"], header = "Forwarded", recursive = true }
[zones.z]
key  = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[[servers]]
[[servers.locations]]
path      = "/"
limit_req = { zone = "z" }
return    = { status = 200, body = "$remote_addr\n" }
"#;
    let s = Sluice::in_process(toml);
    let via = |peer: u8, fwd: &'static str| {
        let addr = s.addr();
        async move { request(addr, client(peer), "GET", "/", &[("Forwarded", fwd)]).await }
    };
    let a = via(
        1,
        r#"for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https, for=10.1.1.1"#,
    )
    .await;
    assert_eq!(
        (a.status, a.body_text().as_str()),
        (200, "2001:db8:cafe::17\n")
    );
    // The same client through another chain: limited.
    let again = via(1, r#"For="[2001:db8:cafe::17]""#).await;
    assert_eq!(again.status, 429);
    // `unknown` at the nearest hop but one: the walk stops at 10.2.2.2.
    let u = via(1, "for=198.51.100.1, for=unknown, for=10.2.2.2").await;
    assert_eq!(u.body_text(), "10.2.2.2\n");
    // Not the grammar, alone: the peer (127.0.0.1, which then has its first request).
    let bad = via(1, "for=198.51.100.2;for=198.51.100.3").await;
    assert_eq!((bad.status, bad.body_text().as_str()), (200, "127.0.0.1\n"));
    // A broken element the client wrote, then its proxy's: the proxy's is read.
    let forged = via(1, "for=\"198.51.100.2, for=198.51.100.7").await;
    assert_eq!(
        (forged.status, forged.body_text().as_str()),
        (200, "198.51.100.7\n")
    );
    // An untrusted peer (127.0.0.2) names nobody.
    let stranger = via(2, "for=198.51.100.4").await;
    assert_eq!(stranger.body_text(), "127.0.0.2\n");
}

/// HTTP/2 with prior knowledge (`listen = "… proxy_protocol http2"`): the header comes before
/// the preface, and the stream's request sees it (curl's `--haproxy-protocol` sends a v1 line
/// naming its own socket's addresses).
#[tokio::test]
async fn h2c_prior_knowledge_after_the_header() {
    let toml = r#"
[[servers]]
listen = "proxy_protocol http2"
[[servers.locations]]
path   = "/"
return = { status = 200, body = "$server_protocol $proxy_protocol_addr $proxy_protocol_server_port\n" }
"#;
    let s = Sluice::in_process(toml);
    let url = format!("http://{}/", s.addr());
    let out = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "5",
            "--http2-prior-knowledge",
            "--haproxy-protocol",
        ])
        .arg(&url)
        .output()
        .await
        .expect("curl runs");
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = String::from_utf8_lossy(&out.stdout);
    assert_eq!(body, format!("HTTP/2.0 127.0.0.1 {}\n", s.addr().port()));
}
