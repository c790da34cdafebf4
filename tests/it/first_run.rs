//! A newcomer's first run: the README's run command starts sluice on config/sluice.toml, and
//! what the README's tour points at must be there — the dashboard, the status API, `sluice
//! top` — read-only, since the example has no token: a write is refused and changes nothing.
//!
//! The shipped file is run as a process, as the README runs it; only its three addresses (the
//! proxy on 7060, the built-in upstream on 7070, the admin listener on 9090) move to free ports.

use crate::support::{Reply, Sluice, burst, client, request};
use serde_json::Value;
use std::net::SocketAddr;

const SHIPPED: &str = include_str!("../../config/sluice.toml");

async fn get(admin: SocketAddr, path: &str) -> Reply {
    request(admin, client(1), "GET", path, &[]).await
}

async fn json(admin: SocketAddr, path: &str) -> Value {
    let r = get(admin, path).await;
    assert_eq!(r.status, 200, "GET {path}: {r:?}");
    serde_json::from_str(&r.body_text()).unwrap_or_else(|e| panic!("GET {path}: {e}: {r:?}"))
}

#[tokio::test]
async fn the_example_serves_the_dashboard_and_a_read_only_api() {
    // The README's tour names this address; the example must keep it on loopback.
    assert!(
        SHIPPED.contains("[admin]\nlisten = \"127.0.0.1:9090\"\n"),
        "config/sluice.toml no longer opens [admin] on 127.0.0.1:9090"
    );
    assert!(
        !SHIPPED.contains("\ntoken_file"),
        "the example has no token"
    );
    let s = Sluice::builder(SHIPPED)
        .relocate("127.0.0.1:7060")
        .relocate("127.0.0.1:7070")
        .relocate("127.0.0.1:9090")
        .start();
    let (proxy, admin) = (s.addr_of(0), s.addr_of(2));

    let page = get(admin, "/").await;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "{page:?}"
    );
    assert!(page.body_text().contains("<title>sluice</title>"));
    assert_eq!(get(admin, "/healthz").await.status, 200);

    // The article's burst on /plain: one passes, nine are rejected; the API counts them.
    let statuses: Vec<u16> = burst(proxy, client(31), "/plain", 10)
        .await
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(
        statuses.iter().filter(|&&c| c == 200).count(),
        1,
        "{statuses:?}"
    );
    let zones = json(admin, "/api/9/http/limit_reqs").await;
    for z in ["z_plain", "z_burst", "z_nodelay", "z_delay"] {
        assert!(zones.get(z).is_some(), "no zone {z} in {zones}");
    }
    assert_eq!(zones["z_plain"]["passed"], 1, "{zones}");
    assert_eq!(zones["z_plain"]["rejected"], 9, "{zones}");
    let key = "/api/sluice/limit_reqs/z_plain/keys/127.0.0.31";
    assert_eq!(json(admin, key).await["known"], true);

    // Read-only: without a token file every write is refused (403), with or without a bearer
    // token, and nothing changes.
    for (path, auth) in [
        ("/api/9/http/limit_reqs/z_plain", None),
        ("/api/9/http/limit_reqs/z_plain", Some("Bearer anything")),
        (key, None),
    ] {
        let headers: Vec<(&str, &str)> =
            auth.map(|a| vec![("Authorization", a)]).unwrap_or_default();
        let r = request(admin, client(1), "DELETE", path, &headers).await;
        assert_eq!(r.status, 403, "DELETE {path}: {r:?}");
    }
    assert_eq!(
        json(admin, "/api/9/http/limit_reqs/z_plain").await["rejected"],
        9
    );
    assert_eq!(json(admin, key).await["known"], true, "not forgiven");
    let metrics = get(admin, "/metrics").await.body_text();
    assert!(
        metrics.contains("sluice_admin_requests_total{result=\"writes_off\"} 3"),
        "{metrics}"
    );
}

/// `sluice top --config FILE`, as the README's tour runs it, finds the admin listener in the file.
#[tokio::test]
async fn sluice_top_reads_the_examples_admin_listener() {
    let s = Sluice::builder(SHIPPED)
        .relocate("127.0.0.1:7060")
        .relocate("127.0.0.1:7070")
        .relocate("127.0.0.1:9090")
        .start();
    let statuses: Vec<u16> = burst(s.addr_of(0), client(32), "/nodelay", 10)
        .await
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(
        statuses.iter().filter(|&&c| c == 429).count(),
        4,
        "{statuses:?}"
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["top", "--once", "--interval", "300ms", "--config"])
        .arg(s.config_path())
        .kill_on_drop(true)
        .output()
        .await
        .expect("sluice top runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&s.addr_of(2).to_string()), "{text}");
    // ZONE ALGORITHM RATE BACKEND STATES/CAP PASSED DELAYED REJECTED …
    let row: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&"z_nodelay"))
        .unwrap_or_else(|| panic!("no z_nodelay row:\n{text}"));
    assert_eq!(row[1..3], ["leaky_bucket", "2r/s"], "{text}");
    assert_eq!(row[5..8], ["6", "0", "4"], "{text}");
}

fn repo(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The README's plot is what `sluice simulate --scenario B --plot` draws now, byte for byte:
/// scripts/readme-images.sh remakes it after a change to the simulator or its plot.
#[test]
fn the_readmes_plot_is_what_the_simulator_draws_now() {
    let readme = std::fs::read_to_string(repo("README.md")).expect("README.md");
    assert!(
        readme.contains("](config/images/scenario-b.svg)"),
        "the README shows the plot"
    );
    let dir = tempfile::tempdir().expect("a temp dir");
    let fresh = dir.path().join("b.svg");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["simulate", "--scenario", "B", "--plot"])
        .arg(&fresh)
        .output()
        .expect("sluice simulate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = std::fs::read_to_string(&fresh).expect("the fresh plot");
    let shown = std::fs::read_to_string(repo("config/images/scenario-b.svg")).expect("the plot");
    assert!(shown.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(shown.len() <= 150 * 1024, "{} bytes", shown.len());
    assert!(
        shown == fresh,
        "config/images/scenario-b.svg is not what sluice draws now: run scripts/readme-images.sh --svg"
    );
}

/// The README's screenshot of the dashboard: a PNG (signature, then IHDR's width and height), at
/// most 150 KB.
#[test]
fn the_readmes_screenshot_is_a_small_png() {
    let readme = std::fs::read_to_string(repo("README.md")).expect("README.md");
    assert!(
        readme.contains("](config/images/dashboard.png)"),
        "the README shows the dashboard"
    );
    let png = std::fs::read(repo("config/images/dashboard.png")).expect("the screenshot");
    assert!(
        png.len() <= 150 * 1024,
        "{} bytes: run scripts/readme-images.sh",
        png.len()
    );
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().expect("4 bytes"));
    let (width, height) = (be(16), be(20));
    assert!(
        (800..=1600).contains(&width) && (500..=1200).contains(&height),
        "{width}×{height}"
    );
}
