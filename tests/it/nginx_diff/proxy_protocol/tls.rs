//! TLS behind HAProxy's `send-proxy-v2`: HAProxy relays the TLS bytes untouched after its
//! header, nginx and sluice terminate TLS (`listen … ssl proxy_protocol`) and HTTP/2 (`listen …
//! ssl http2 proxy_protocol`). curl, bound to 127.0.0.2 or 127.0.0.3, sends five requests on one
//! connection; 1r/m burst=2 nodelay keyed on `$binary_remote_addr`: 200 ×3 then 429 ×2 for each
//! client, whatever the timing, because the PROXY source is the key.

use std::process::Command;

use super::*;
use crate::support::{Haproxy, KeyKind, ProxyVersion, TestCa};

/// What one curl run saw: each transfer's `(status, HTTP version)`, in order, and how many of
/// the upstream's echoes named the client in `X-Real-IP`.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    transfers: Vec<(u16, String)>,
    echoed_client: usize,
}

/// curl from `source` through `front` (HAProxy) to `https://pp.test/x?i=N`, N in 1..=5, over
/// `http` (`--http1.1` or `--http2`), one connection. Err: curl failed, with its output.
fn curl(front: SocketAddr, source: &str, ca: &TestCa, http: &str) -> Result<Run, String> {
    let port = front.port();
    let urls: Vec<String> = (1..=5)
        .map(|i| format!("https://pp.test:{port}/x?i={i}"))
        .collect();
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", http, "--interface", source])
        .arg("--cacert")
        .arg(ca.cert())
        .args(["--resolve", &format!("pp.test:{port}:127.0.0.1")])
        .args(["-w", "\n@@ %{http_code} %{http_version}\n"])
        .args(&urls)
        .output()
        .unwrap_or_else(|e| panic!("cannot run curl ({e}): the TLS tests need it"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "curl {http} from {source} through {front}: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let transfers = text
        .lines()
        .filter_map(|l| l.strip_prefix("@@ "))
        .map(|l| {
            let (code, version) = l.split_once(' ').unwrap_or((l, ""));
            (code.parse().unwrap_or(0), version.to_owned())
        })
        .collect();
    let needle = format!("x-real-ip: {source}\r");
    Ok(Run {
        transfers,
        echoed_client: text.to_ascii_lowercase().matches(&needle).count(),
    })
}

/// curl (see [`curl`]) from 127.0.0.2 and from 127.0.0.3 through each of `fronts`, all at
/// once: the runs in that order, each with its client.
fn curl_all(
    fronts: &[Haproxy],
    ca: &TestCa,
    http: &str,
) -> Vec<(&'static str, Result<Run, String>)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = fronts
            .iter()
            .flat_map(|front| ["127.0.0.2", "127.0.0.3"].map(|c| (front.addr(), c)))
            .map(|(addr, c)| s.spawn(move || (c, curl(addr, c, ca, http))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a curl thread"))
            .collect()
    })
}

/// nginx and sluice with TLS and `listen_flags`, each behind its own `send-proxy-v2` HAProxy;
/// curl over `http` from 127.0.0.2 and 127.0.0.3 to both at once. Each client: 200 ×3, 429 ×2
/// in HTTP `version`, three echoes naming it; the access logs name it too.
async fn tls_behind_haproxy(listen_flags: &str, http: &str, version: &str) {
    let ca = TestCa::new();
    let leaf = ca.leaf("pp", &["pp.test"], KeyKind::EcdsaP256);
    let (chain, key) = (leaf.chain.display(), leaf.key.display());
    let setup = Setup {
        flags: listen_flags,
        zones: &[("z_tls", "$binary_remote_addr", "1r/m")],
        locations: &[("/", "z_tls", 2)],
        nginx_server: format!("ssl_certificate {chain}; ssl_certificate_key {key};"),
        sluice_server: format!("ssl_certificate = \"{chain}\"\nssl_certificate_key = \"{key}\""),
        ..Setup::default()
    };
    let pair = setup.start();
    let fronts = [
        Haproxy::start(pair.nginx.addr(), ProxyVersion::V2),
        Haproxy::start(pair.sluice.addr(), ProxyVersion::V2),
    ];
    let runs = curl_all(&fronts, &ca, http);
    let want = Ok(Run {
        transfers: [200, 200, 200, 429, 429]
            .map(|s| (s, version.to_owned()))
            .to_vec(),
        echoed_client: 3,
    });
    let (nginx, sluice) = runs.split_at(2);
    // The oracle first.
    for (client, n) in nginx {
        assert_eq!(
            n, &want,
            "{listen_flags}: nginx, curl from {client} (oracle)"
        );
    }
    assert_eq!(
        pair.nginx_upstream.hits(),
        6,
        "{listen_flags}: nginx's upstream"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let nginx_log =
        std::fs::read_to_string(pair.nginx.prefix().join("logs/pp.log")).unwrap_or_default();
    let nginx_shapes = access_shapes(&nginx_log, fronts[0].addr().port());
    let mut expected = Vec::new();
    for c in ["127.0.0.2", "127.0.0.3"] {
        expected.extend(lines(3, c, c, 200));
        expected.extend(lines(2, c, c, 429));
    }
    expected.sort();
    assert_eq!(
        nginx_shapes, expected,
        "{listen_flags}: nginx's access log (oracle)"
    );
    // Then sluice against it.
    for ((client, n), (_, s)) in nginx.iter().zip(sluice) {
        assert_eq!(
            s, n,
            "{listen_flags}: sluice differs from nginx, curl from {client}"
        );
    }
    assert_eq!(
        pair.sluice_upstream.hits(),
        6,
        "{listen_flags}: sluice's upstream"
    );
    pair.assert_same_limit_lines(listen_flags).await;
    assert_eq!(
        access_shapes(&pair.sluice.stdout(), fronts[1].addr().port()),
        nginx_shapes,
        "{listen_flags}: sluice's access log differs from nginx's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_tls_behind_haproxy_v2() {
    tls_behind_haproxy("ssl proxy_protocol", "--http1.1", "1.1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_http2_behind_haproxy_v2() {
    tls_behind_haproxy("ssl http2 proxy_protocol", "--http2", "2").await;
}
