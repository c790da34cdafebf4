//! Redis killed, frozen, or down at startup: each `on_error` policy, no request held past
//! `timeout`, recovery without restart; and Redis over TLS with a private CA.

use super::*;

fn policy_config(redis_url: &str, policy: &str) -> String {
    format!(
        r#"
limit_req_status = 429

[redis]
url      = "{redis_url}"
timeout  = "50ms"
on_error = "{policy}"
prefix   = "t"

[zones.z]
key     = "$http_x_key"
size    = "1m"
rate    = "1r/m"
backend = "redis"

[[servers]]
[[servers.locations]]
path      = "/"
limit_req = {{ zone = "z" }}
return    = {{ status = 200, body = "ok\n" }}
"#
    )
}

/// Limited through Redis, then Redis killed (each policy), then frozen (each
/// request still bounded by the timeout), then back on the same port.
async fn outage(policy: &str) {
    let mut redis = RedisServer::start();
    let mut s = start_sluice(&policy_config(&redis.url(), policy));
    assert_eq!(twice(&s, "before").await, (200, 429));
    assert!(key_in_redis(&redis, "before"));
    // Retry-After from the Redis bucket: 1r/m leaks one request in 62.5 s.
    let r = get_with(&s, "X-Key", "before").await;
    assert_eq!((r.status, r.header("retry-after")), (429, Some("63")));

    redis.kill();
    // The first decision to reach the dead Redis fails (on_error decides it), which also
    // retires this instance's cached refusals: Redis's states went with it. Until then a key
    // the cache knows as refused (here "before") is answered from the cache.
    let first = get_with(&s, "X-Key", "first").await;
    assert_eq!(first.status, if policy == "deny" { 429 } else { 200 });
    let during = match policy {
        // fail open: even the key limited in Redis passes
        "allow" => {
            assert_eq!(twice(&s, "before").await, (200, 200));
            assert_eq!(twice(&s, "new").await, (200, 200));
            "allow"
        }
        // fail closed, without Retry-After (no bucket to compute it from)
        "deny" => {
            let r = get_with(&s, "X-Key", "new").await;
            assert_eq!(r.status, 429);
            assert_eq!(r.header("retry-after"), None);
            assert_eq!(twice(&s, "new").await, (429, 429));
            "deny"
        }
        // per-instance limiting: a fresh bucket here, then limited
        "local" => {
            assert_eq!(twice(&s, "before").await, (200, 429));
            assert_eq!(twice(&s, "new").await, (200, 429));
            "local"
        }
        _ => unreachable!(),
    };
    assert!(s.alive(), "sluice died:\n{}", s.log());
    let log = s.log();
    assert!(
        log.contains("redis error in limit_req zone \"z\"")
            && log.contains(&format!("on_error={during}")),
        "the failure is logged:\n{log}"
    );

    redis.restart();
    // Recovery without restart: requests are decided in Redis again.
    let mut n = 0;
    eventually(
        "decisions in Redis again",
        Duration::from_secs(20),
        async || {
            n += 1;
            let key = format!("after-{n}");
            let _ = get_with(&s, "X-Key", &key).await;
            key_in_redis(&redis, &key).then_some(())
        },
    )
    .await;
    assert_eq!(twice(&s, "fresh").await, (200, 429));
    assert!(s.log().contains("answers again"), "{}", s.log());

    // A Redis that accepts connections but does not answer: each request is
    // decided by on_error within the timeout, never held.
    redis.signal(libc::SIGSTOP);
    for i in 0..5 {
        let r = get_with(&s, "X-Key", &format!("frozen-{i}")).await;
        assert!(r.elapsed < Duration::from_millis(500), "{:?}", r.elapsed);
        let want = if policy == "deny" { 429 } else { 200 };
        assert_eq!(r.status, want, "{policy} while frozen");
    }
    redis.signal(libc::SIGCONT);
    assert!(s.alive());
}

#[tokio::test]
async fn outage_allow() {
    outage("allow").await;
}

#[tokio::test]
async fn outage_deny() {
    outage("deny").await;
}

#[tokio::test]
async fn outage_local() {
    outage("local").await;
}

#[tokio::test]
async fn starts_while_redis_is_down_and_connects_later() {
    // A port with nothing on it yet, reserved until Redis starts there.
    let port = Port::reserve();
    let url = format!("redis://{}", port.addr());
    let s = start_sluice(&policy_config(&url, "local"));
    let r = get_with(&s, "X-Key", "a").await;
    assert_eq!(r.status, 200);
    assert!(r.elapsed < Duration::from_millis(1000), "{:?}", r.elapsed);
    eventually("the startup warning", Duration::from_secs(10), async || {
        s.log().contains("is not reachable yet").then_some(())
    })
    .await;

    // Now start Redis on that port.
    let redis = RedisServer::start_on(port);
    let mut n = 0;
    eventually("sluice to use Redis", Duration::from_secs(20), async || {
        n += 1;
        let key = format!("late-{n}");
        let _ = get_with(&s, "X-Key", &key).await;
        key_in_redis(&redis, &key).then_some(())
    })
    .await;
}

fn tls_config(port: u16, certs: &TlsFiles, with_ca: bool) -> String {
    let p = |f: &str| certs.dir().join(f).display().to_string();
    let ca = if with_ca {
        format!("tls_ca = \"{}\"", p("ca.crt"))
    } else {
        String::new()
    };
    format!(
        r#"
limit_req_status = 429

[redis]
url      = "rediss://127.0.0.1:{port}"
timeout  = "300ms"
on_error = "deny"
prefix   = "t"
{ca}
tls_cert = "{cert}"
tls_key  = "{key}"

[zones.z]
key     = "$http_x_key"
size    = "1m"
rate    = "1r/m"
backend = "redis"

[[servers]]
[[servers.locations]]
path      = "/"
limit_req = {{ zone = "z" }}
return    = {{ status = 200, body = "ok\n" }}
"#,
        cert = p("client.crt"),
        key = p("client.key"),
    )
}

#[tokio::test]
async fn rediss_with_a_private_ca_and_a_client_certificate() {
    let certs = TlsFiles::generate();
    let redis = RedisServer::start_tls(&certs);
    let tls_port = redis.tls_port();
    let s = start_sluice(&tls_config(tls_port, &certs, true));
    assert_eq!(twice(&s, "tls").await, (200, 429));
    assert!(key_in_redis(&redis, "tls"), "the state is in Redis");

    // Without the CA, the server's certificate is not trusted: no decision
    // from Redis, on_error = "deny" answers.
    let s = start_sluice(&tls_config(tls_port, &certs, false));
    assert_eq!(twice(&s, "untrusted").await, (429, 429));
    assert!(!key_in_redis(&redis, "untrusted"));
    eventually(
        "the TLS failure in the log",
        Duration::from_secs(10),
        async || {
            s.log()
                .contains("redis error in limit_req zone")
                .then_some(())
        },
    )
    .await;
}
