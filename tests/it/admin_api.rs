//! The admin listener's status API on a real sluice: NGINX Plus's
//! `limit_reqs`, `limit_conns` and `upstreams` objects and their resets,
//! one key's state and its reset (memory and Redis zones), the most
//! limited keys, and who may write.

use crate::support::{InProcess, RedisServer, Reply, Sluice, client, request};
use serde_json::Value;
use std::net::SocketAddr;

pub(crate) const TOKEN: &str = "s3cret-token-0123456789";

/// A zone `z` (1 request per minute, burst 1, nodelay) on `/z`, keyed by
/// address; a limit_conn zone `c` on `/c`; an upstream group `g`.
/// `admin` is the `[admin]` table's extra lines, `zone` the zone's.
pub(crate) fn config(admin: &str, zone: &str) -> String {
    format!(
        r#"
limit_req_status = 429
[admin]
{admin}
[zones.z]
key = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
{zone}
[conn_zones.c]
key = "$binary_remote_addr"
size = "1m"
[upstreams.g]
servers = [{{ address = "127.0.0.1:9" }}]
[[servers]]
[[servers.locations]]
path = "/z"
limit_req = {{ zone = "z", burst = 1, nodelay = true }}
return = {{ status = 200 }}
[[servers.locations]]
path = "/c"
limit_conn = {{ zone = "c", conn = 5 }}
return = {{ status = 200 }}
"#
    )
}

/// `method path` on the admin listener from 127.0.0.1, with `auth` as
/// the bearer token if given.
pub(crate) async fn api(s: &InProcess, method: &str, path: &str, auth: Option<&str>) -> Reply {
    let bearer = auth.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .as_deref()
        .map(|b| vec![("Authorization", b)])
        .unwrap_or_default();
    request(s.admin_addr(), client(1), method, path, &headers).await
}

pub(crate) async fn json(s: &InProcess, path: &str) -> Value {
    let r = api(s, "GET", path, None).await;
    assert_eq!(r.status, 200, "{path}: {r:?}");
    assert_eq!(r.header("content-type"), Some("application/json"));
    serde_json::from_str(&r.body_text()).unwrap_or_else(|e| panic!("{path}: {e}: {r:?}"))
}

pub(crate) async fn hits(addr: SocketAddr, client_n: u8, path: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(
            request(addr, client(client_n), "GET", path, &[])
                .await
                .status,
        );
    }
    out
}

/// A file holding [`TOKEN`], removed with the returned guard.
pub(crate) fn token_file() -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), format!("{TOKEN}\n")).unwrap();
    f
}

#[tokio::test]
async fn nginx_plus_counters_and_their_reset_need_the_token() {
    let file = token_file();
    let with_token = format!("token_file = \"{}\"", file.path().display());
    let s = Sluice::in_process(&config(&with_token, ""));
    let a = s.addr();
    assert_eq!(hits(a, 2, "/z", 4).await, [200, 200, 429, 429]);
    assert_eq!(hits(a, 3, "/c", 1).await, [200]);

    assert_eq!(json(&s, "/api").await, serde_json::json!([9]));
    let all = json(&s, "/api/9/http/limit_reqs").await;
    let z = &all["z"];
    assert_eq!(
        (z["passed"].as_u64(), z["rejected"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(z["delayed"], 0);
    assert_eq!(z["rejected_dry_run"], 0);
    let only = json(&s, "/api/9/http/limit_reqs/z?fields=rejected").await;
    assert_eq!(only, serde_json::json!({ "rejected": 2 }));
    let c = json(&s, "/api/9/http/limit_conns/c").await;
    assert_eq!(
        (c["passed"].as_u64(), c["rejected"].as_u64()),
        (Some(1), Some(0))
    );
    let g = json(&s, "/api/9/http/upstreams/g").await;
    assert_eq!(g["peers"][0]["server"], "127.0.0.1:9");
    assert_eq!(g["peers"][0]["state"], "up");
    let missing = api(&s, "GET", "/api/9/http/limit_reqs/nope", None).await;
    assert_eq!(missing.status, 404);
    assert!(
        missing.body_text().contains("LimitReqNotFound"),
        "{missing:?}"
    );

    // Writes: no token, a wrong one → 401, nothing changes; the right one → 204.
    for auth in [None, Some("wrong-token-0123456789")] {
        let r = api(&s, "DELETE", "/api/9/http/limit_reqs/z", auth).await;
        assert_eq!(r.status, 401, "{r:?}");
        assert!(
            r.header("www-authenticate")
                .is_some_and(|v| v.starts_with("Bearer"))
        );
    }
    assert_eq!(json(&s, "/api/9/http/limit_reqs/z").await["rejected"], 2);
    let r = api(&s, "DELETE", "/api/9/http/limit_reqs/z", Some(TOKEN)).await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(json(&s, "/api/9/http/limit_reqs/z").await["rejected"], 0);
    let r = api(&s, "DELETE", "/api/9/http/limit_conns/c", Some(TOKEN)).await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(json(&s, "/api/9/http/limit_conns/c").await["passed"], 0);

    let m = api(&s, "GET", "/metrics", None).await.body_text();
    assert!(
        m.contains("sluice_admin_requests_total{result=\"unauthorized\"} 2"),
        "{m}"
    );
    assert!(!m.contains(TOKEN), "the token is never shown");
}

#[tokio::test]
async fn without_a_token_file_writes_are_off() {
    let s = Sluice::in_process(&config("", ""));
    assert_eq!(hits(s.addr(), 2, "/z", 3).await, [200, 200, 429]);
    let r = api(&s, "DELETE", "/api/9/http/limit_reqs/z", Some(TOKEN)).await;
    assert_eq!(r.status, 403, "{r:?}");
    let r = api(
        &s,
        "DELETE",
        "/api/sluice/limit_reqs/z/keys/127.0.0.2",
        None,
    )
    .await;
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(json(&s, "/api/9/http/limit_reqs/z").await["rejected"], 1);
    assert_eq!(hits(s.addr(), 2, "/z", 1).await, [429], "not forgotten");
    let m = api(&s, "GET", "/metrics", None).await.body_text();
    assert!(
        m.contains("sluice_admin_requests_total{result=\"writes_off\"} 2"),
        "{m}"
    );
}

#[tokio::test]
async fn one_key_is_described_and_forgiven() {
    let file = token_file();
    let with_token = format!("token_file = \"{}\"", file.path().display());
    let s = Sluice::in_process(&config(&with_token, ""));
    assert_eq!(hits(s.addr(), 2, "/z", 3).await, [200, 200, 429]);

    let k = json(&s, "/api/sluice/limit_reqs/z/keys/127.0.0.2").await;
    assert_eq!(k["key"], "127.0.0.2");
    assert_eq!(k["known"], true);
    let l = &k["limits"][0];
    assert_eq!(l["burst"], 1);
    assert_eq!(l["admits_now"], false);
    // Two stored at 1r/m, which nginx truncates to 16 milli-requests a
    // second: one request leaks away in 62.5 s.
    let wait = l["next_admit_ms"].as_u64().unwrap();
    assert!((62_000..=62_500).contains(&wait), "{k}");
    assert!(
        l["summary"].as_str().unwrap().starts_with("over its limit"),
        "{k}"
    );
    assert_eq!(l["locations"], serde_json::json!(["/z"]));
    let other = json(&s, "/api/sluice/limit_reqs/z/keys/127.0.0.3").await;
    assert_eq!(other["known"], false);
    assert_eq!(other["limits"][0]["remaining"], 2);

    let bad = api(
        &s,
        "GET",
        "/api/sluice/limit_reqs/z/keys/not-an-address",
        None,
    )
    .await;
    assert_eq!(bad.status, 400, "{bad:?}");
    let r = api(
        &s,
        "DELETE",
        "/api/sluice/limit_reqs/z/keys/127.0.0.2",
        Some(TOKEN),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body_text().contains("\"forgotten\": true"), "{r:?}");
    assert_eq!(
        hits(s.addr(), 2, "/z", 3).await,
        [200, 200, 429],
        "starts afresh"
    );
}

#[tokio::test]
async fn the_most_limited_keys_come_first() {
    let s = Sluice::in_process(&config("top_keys = 5", ""));
    hits(s.addr(), 2, "/z", 7).await; // 5 rejected
    hits(s.addr(), 3, "/z", 4).await; // 2 rejected
    hits(s.addr(), 4, "/z", 2).await; // none
    let top = json(&s, "/api/sluice/limit_reqs/z/top").await;
    let keys = top["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "{top}");
    assert_eq!(keys[0]["key"], "127.0.0.2");
    assert_eq!(
        (keys[0]["rejected"].as_u64(), keys[0]["error"].as_u64()),
        (Some(5), Some(0))
    );
    assert_eq!(keys[1]["key"], "127.0.0.3");
    assert_eq!(keys[1]["count"], 2);
    let one = json(&s, "/api/sluice/limit_reqs/z/top?k=1").await;
    assert_eq!(one["keys"].as_array().unwrap().len(), 1);
    let zone = json(&s, "/api/sluice/limit_reqs/z").await;
    assert_eq!(zone["algorithm"], "leaky_bucket");
    assert_eq!(zone["backend"], "memory");
    assert_eq!(zone["states"], 3);
    assert_eq!(zone["limits"][0]["delay"], "nodelay");
}

#[tokio::test]
async fn a_redis_key_is_described_and_forgotten_for_every_instance() {
    let redis = RedisServer::start();
    let redis_table = format!("[redis]\nurl = \"{}\"\n", redis.url());
    let file = token_file();
    let with_token = format!("token_file = \"{}\"", file.path().display());
    let toml = config(&with_token, "backend = \"redis\"") + &redis_table;
    let (a, b) = (Sluice::in_process(&toml), Sluice::in_process(&toml));
    assert_eq!(hits(a.addr(), 2, "/z", 2).await, [200, 200]);
    assert_eq!(hits(b.addr(), 2, "/z", 1).await, [429], "shared");

    let k = json(&b, "/api/sluice/limit_reqs/z/keys/127.0.0.2").await;
    assert_eq!(k["known"], true, "{k}");
    assert_eq!(k["limits"][0]["admits_now"], false, "{k}");
    assert!(
        k["limits"][0]["state"]["excess"].as_u64().unwrap() >= 900,
        "{k}"
    );

    // Forgiven through b (whose rejection cache holds the refusal: it goes
    // too), in Redis: a, which stored the state, starts afresh as well.
    let r = api(
        &b,
        "DELETE",
        "/api/sluice/limit_reqs/z/keys/127.0.0.2",
        Some(TOKEN),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body_text().contains("\"forgotten\": true"), "{r:?}");
    let k = json(&a, "/api/sluice/limit_reqs/z/keys/127.0.0.2").await;
    assert_eq!(k["known"], false, "{k}");
    assert_eq!(hits(a.addr(), 2, "/z", 1).await, [200], "forgiven for a");
    assert_eq!(hits(b.addr(), 2, "/z", 1).await, [200], "and for b");
    assert_eq!(
        hits(a.addr(), 2, "/z", 1).await,
        [429],
        "then limited again"
    );
}

/// With two limits the key counted is the deciding limit's: the header's when the second
/// refuses (the last key computed), the address when the first refuses (the header's key was
/// never computed for those requests).
#[tokio::test]
async fn the_deciding_limits_key_is_counted() {
    let toml = r#"
limit_req_status = 429
[admin]
top_keys = 5
[zones.addr]
key  = "$binary_remote_addr"
size = "1m"
rate = "1r/m"
[zones.hdr]
key  = "$http_x_key"
size = "1m"
rate = "1r/m"
[[servers]]
[[servers.locations]]
path      = "/two"
limit_req = [{ zone = "addr", burst = 4, nodelay = true }, { zone = "hdr", nodelay = true }]
return    = { status = 200 }
"#;
    let s = Sluice::in_process(toml);
    // hdr refuses k1's second and third request; then addr (burst 4: 5 admitted) refuses all.
    let mut statuses = Vec::new();
    for key in ["k1", "k1", "k1", "k2", "k3", "k4", "k5", "k6", "k7"] {
        let r = request(s.addr(), client(2), "GET", "/two", &[("X-Key", key)]).await;
        statuses.push(r.status);
    }
    assert_eq!(statuses, [200, 429, 429, 200, 200, 200, 200, 429, 429]);
    let hdr = json(&s, "/api/sluice/limit_reqs/hdr/top").await["keys"].clone();
    assert_eq!(hdr.as_array().unwrap().len(), 1, "{hdr}");
    assert_eq!(
        (&hdr[0]["key"], &hdr[0]["rejected"]),
        (&"k1".into(), &2.into())
    );
    let addr = json(&s, "/api/sluice/limit_reqs/addr/top").await["keys"].clone();
    assert_eq!(addr.as_array().unwrap().len(), 1, "{addr}");
    assert_eq!(
        (&addr[0]["key"], &addr[0]["rejected"]),
        (&"127.0.0.2".into(), &2.into())
    );
}
