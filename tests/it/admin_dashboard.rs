//! The dashboard in a real browser against a sluice that has seen traffic:
//! headless Chromium (Debian's `chromium`, which scripts/test.sh installs;
//! its absence is a failure, not a skip) loads the admin listener's `/`,
//! and every number the page shows is the API's at that moment.

use crate::admin_api::{api, hits, json};
use crate::support::{InProcess, Sluice, Upstream};
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;

/// Zone `z` (1r/m, burst 1, nodelay) on `/z`; zone `d` (20r/s, burst 5,
/// delayed) on `/d`, proxied to group `g`: `up` and a dead server that
/// goes unavailable at its first failure; limit_conn zone `c` on `/c`.
pub(crate) fn config(up: &Upstream) -> String {
    format!(
        r#"
limit_req_status = 429
[admin]
top_keys = 5
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[zones.d]
key = "$binary_remote_addr"
size = "1m"
rate = "20r/s"
[conn_zones.c]
key = "$binary_remote_addr"
size = "1m"
[upstreams.g]
servers = [{{ address = "127.0.0.1:9", max_fails = 1 }}, {{ address = "{}" }}]
[[servers]]
[[servers.locations]]
path = "/z"
limit_req = {{ zone = "z", burst = 1, nodelay = true }}
return = {{ status = 200 }}
[[servers.locations]]
path = "/d"
limit_req = {{ zone = "d", burst = 5 }}
proxy_pass = "http://g"
[[servers.locations]]
path = "/c"
limit_conn = {{ zone = "c", conn = 5 }}
return = {{ status = 200 }}
"#,
        up.addr
    )
}

/// Traffic from 127.0.0.2 to .5 that passes, is rejected and is delayed;
/// then the API's counters are what this traffic makes them.
pub(crate) async fn traffic(s: &InProcess) {
    let a = s.addr();
    assert_eq!(hits(a, 2, "/z", 5).await, [200, 200, 429, 429, 429]);
    assert_eq!(hits(a, 3, "/z", 3).await, [200, 200, 429]);
    assert_eq!(hits(a, 4, "/d", 3).await, [200, 200, 200]); // 2 delayed
    assert_eq!(hits(a, 5, "/c", 2).await, [200, 200]);
    let z = json(s, "/api/9/http/limit_reqs/z").await;
    assert_eq!(
        (z["passed"].as_u64(), z["rejected"].as_u64()),
        (Some(4), Some(4))
    );
    let d = json(s, "/api/9/http/limit_reqs/d").await;
    assert_eq!(
        (d["passed"].as_u64(), d["delayed"].as_u64()),
        (Some(1), Some(2))
    );
}

/// The browser: `chromium` (Debian) or `chromium-browser`, on PATH.
fn chromium() -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("no chromium on PATH: install Debian's `chromium` (scripts/test.sh does)");
}

/// The page at `url` as Chromium has it after `budget_ms` of its virtual
/// time (the page polls at load and every 2 s).
async fn dump_dom(url: &str, budget_ms: u64) -> String {
    let profile = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(chromium())
        .args(["--headless=new", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .args(["--dump-dom", url])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("chromium dumped the page within 60 s")
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && dom.contains("</html>"),
        "chromium: {:?}\n{}\n{dom}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    dom
}

/// The text of the element whose id is `id`, as the page shows it.
fn shown(dom: &str, id: &str) -> String {
    let at = dom
        .find(&format!(" id=\"{id}\""))
        .unwrap_or_else(|| panic!("the page has no element #{id}:\n{dom}"));
    let text = &dom[at..];
    let text = &text[text.find('>').unwrap() + 1..];
    let text = &text[..text.find('<').unwrap_or(text.len())];
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// `v` as the page writes it: numbers and strings as they are.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

#[tokio::test]
async fn the_dashboard_shows_the_apis_numbers() {
    let up = Upstream::start();
    let s = Sluice::in_process(&config(&up));
    traffic(&s).await;
    let page = api(&s, "GET", "/", None).await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'sha256-"),
        "{csp}"
    );
    let head = api(&s, "HEAD", "/", None).await;
    assert_eq!((head.status, head.body_text().as_str()), (200, ""));

    let dom = dump_dom(&format!("http://{}/", s.admin_addr()), 3000).await;
    // Traffic has stopped: the API's answer now is what the page read.
    let polls: u32 = dom
        .split("data-polls=\"")
        .nth(1)
        .and_then(|r| r[..r.find('"')?].parse().ok())
        .unwrap_or_else(|| panic!("the page never read the API:\n{dom}"));
    assert!(polls >= 1);

    let zones = json(&s, "/api/sluice/limit_reqs").await;
    for (name, z) in zones.as_object().unwrap() {
        for f in ["algorithm", "rate", "backend", "states", "capacity"] {
            assert_eq!(
                shown(&dom, &format!("lr-{name}-{f}")),
                text(&z[f]),
                "{name} {f}"
            );
        }
        for f in ["passed", "delayed", "rejected"] {
            let c = &z["counters"][f];
            assert_eq!(
                shown(&dom, &format!("lr-{name}-{f}")),
                text(c),
                "{name} {f}"
            );
        }
        let top = json(&s, &format!("/api/sluice/limit_reqs/{name}/top")).await;
        let keys = top["keys"].as_array().unwrap();
        assert!(!keys.is_empty(), "{top}");
        for (i, k) in keys.iter().enumerate() {
            for f in ["key", "count", "error", "rejected", "delayed"] {
                let id = format!("top-{name}-{i}-{f}");
                assert_eq!(shown(&dom, &id), text(&k[f]), "{id}");
            }
        }
        assert!(!dom.contains(&format!("id=\"top-{name}-{}-key\"", keys.len())));
    }
    assert_eq!(shown(&dom, "lr-z-rejected"), "4");
    assert_eq!(shown(&dom, "lr-d-delayed"), "2");
    assert_eq!(shown(&dom, "top-z-0-key"), "127.0.0.2");
    assert_eq!(shown(&dom, "top-z-0-count"), "3");
    assert_eq!(shown(&dom, "top-d-0-key"), "127.0.0.4");

    let groups = json(&s, "/api/9/http/upstreams").await;
    let peers = groups["g"]["peers"].as_array().unwrap();
    for (i, p) in peers.iter().enumerate() {
        for f in ["server", "state", "requests", "fails"] {
            let id = format!("up-g-{i}-{f}");
            assert_eq!(shown(&dom, &id), text(&p[f]), "{id}");
        }
    }
    assert_eq!(shown(&dom, "up-g-0-state"), "unavail");
    assert_eq!(shown(&dom, "up-g-1-state"), "up");
    let c = json(&s, "/api/9/http/limit_conns/c").await;
    assert_eq!(shown(&dom, "lc-c-passed"), text(&c["passed"]));
    assert_eq!(shown(&dom, "lc-c-passed"), "2");
}
