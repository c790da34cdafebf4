//! Upstream groups side by side with real nginx 1.22: the same backends behind an nginx
//! `upstream` block and a sluice `[upstreams.NAME]`, the same requests in the same order, and
//! the same servers chosen for each (from the body each backend answers with, its port), the
//! same `$upstream_addr`/`$upstream_status` lists, the same error-log lines.

use crate::support::{
    Answer, Nginx, Options, Port, Sluice, Upstream, client, eventually, exchange, get, timing,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A backend of a group: it answers `status` with its own port as the body, so the client sees
/// who served it.
fn backend(status: u16) -> Upstream {
    Upstream::answering(Answer::Port, status)
}

/// An address that refuses connections: reserved, never listening.
fn refusing() -> Port {
    Port::reserve()
}

/// The access-log line both sides write: path, status, the servers tried and their statuses.
const LOG: &str = "$request_uri $status $upstream_addr|$upstream_status|$upstream_response_time";

/// nginx's side: `upstream backend { … }` (`upstream`: its inside) and one server whose
/// locations are `locations`, logging [`LOG`] to `logs/groups.log`.
fn nginx(upstreams: &str, locations: &str) -> Nginx {
    Nginx::start(&format!(
        "log_format groups '{LOG}';
         {upstreams}
         server {{ access_log logs/groups.log groups; {locations} }}"
    ))
}

/// sluice's side: `[upstreams]` tables and `[[servers.locations]]` tables, logging [`LOG`].
fn sluice(upstreams: &str, locations: &str) -> Sluice {
    Sluice::start(&format!(
        "log_format = \"{LOG}\"\nerror_log_level = \"info\"\naccess_log = \"access.log\"\n{upstreams}\n[[servers]]\n{locations}"
    ))
}

fn nginx_log(n: &Nginx) -> String {
    std::fs::read_to_string(n.prefix().join("logs/groups.log")).unwrap_or_default()
}

/// The ports that answered `paths`, one request after another.
async fn sequence(addr: SocketAddr, paths: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for p in paths {
        let r = get(addr, p).await;
        // (The body of an error is each one's own.)
        let who = if r.status == 200 {
            r.body_text()
        } else {
            String::new()
        };
        out.push(format!("{} {who}", r.status));
    }
    out
}

/// The access log's lines once it has `n`, the response times replaced by their shape.
async fn log_lines(read: impl Fn() -> String, n: usize) -> Vec<String> {
    let text = eventually(
        "the access log's lines",
        Duration::from_secs(5),
        async || {
            let t = read();
            (t.lines().count() >= n).then_some(t)
        },
    )
    .await;
    // Each worker thread writes its lines in batches: in request order by the path's number.
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_by_key(|l| {
        let path = l.split(' ').next().unwrap_or("");
        let digits = path.bytes().rev().take_while(u8::is_ascii_digit).count();
        let n: usize = path[path.len() - digits..].parse().unwrap_or(0);
        (n, path.to_string())
    });
    lines
        .into_iter()
        .map(|l| {
            let (rest, times) = l.rsplit_once('|').unwrap();
            for t in times.split(", ") {
                assert!(is_secs(t), "a response time as nginx's: {t:?} in {l}");
            }
            rest.to_string()
        })
        .collect()
}

/// `0.001`: seconds with three decimals.
fn is_secs(t: &str) -> bool {
    t.split_once('.').is_some_and(|(s, ms)| {
        !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && ms.len() == 3
            && ms.bytes().all(|b| b.is_ascii_digit())
    })
}

fn paths(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Smooth weighted round robin: weights 5, 1, 1 (and a server marked down) give nginx's
/// a a b a c a a from both, request for request.
#[tokio::test]
async fn round_robin_with_weights_is_nginx_sequence() {
    let (a, b, c, d) = (backend(200), backend(200), backend(200), backend(200));
    let ng = nginx(
        &format!(
            "upstream backend {{ server {} weight=5; server {}; server {}; server {} down; }}",
            a.addr, b.addr, c.addr, d.addr
        ),
        "location / { proxy_pass http://backend; }",
    );
    let s = sluice(
        &format!(
            "[upstreams.backend]\nservers = [{{ address = \"{}\", weight = 5 }}, {{ address = \"{}\" }}, {{ address = \"{}\" }}, {{ address = \"{}\", down = true }}]",
            a.addr, b.addr, c.addr, d.addr
        ),
        "[[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://backend\"",
    );
    let p = paths("/r", 14);
    let theirs = sequence(ng.addr(), &p).await;
    let ours = sequence(s.addr(), &p).await;
    let (pa, pb, pc) = (a.addr.port(), b.addr.port(), c.addr.port());
    let expected: Vec<String> = [pa, pa, pb, pa, pc, pa, pa]
        .repeat(2)
        .iter()
        .map(|p| format!("200 {p}"))
        .collect();
    assert_eq!(theirs, expected, "nginx, against the reference");
    assert_eq!(ours, theirs, "sluice against nginx");
    assert_eq!(d.hits(), 0, "a down server gets nothing");
    let ng_lines = log_lines(|| nginx_log(&ng), 14).await;
    let our_lines = log_lines(|| s.file("access.log"), 14).await;
    assert_eq!(our_lines, ng_lines);
}

/// hash $request_uri, plain and consistent: the same URIs on the same servers as nginx's.
#[tokio::test]
async fn hash_and_consistent_hash_choose_as_nginx() {
    let backends = [backend(200), backend(200), backend(200)];
    let list = |w: &[u32]| -> Vec<String> {
        backends
            .iter()
            .zip(w)
            .map(|(b, w)| format!("{} weight={w}", b.addr))
            .collect()
    };
    let servers = list(&[1, 2, 1]);
    let ng = nginx(
        &format!(
            "upstream plain {{ hash $request_uri; server {}; }}
             upstream ring {{ hash $request_uri consistent; server {}; }}",
            servers.join("; server "),
            servers.join("; server ")
        ),
        "location /h/ { proxy_pass http://plain; } location /c/ { proxy_pass http://ring; }",
    );
    let entries: Vec<String> = backends
        .iter()
        .zip([1, 2, 1])
        .map(|(b, w)| format!("{{ address = \"{}\", weight = {w} }}", b.addr))
        .collect();
    let entries = entries.join(", ");
    let s = sluice(
        &format!(
            "[upstreams.plain]\nservers = [{entries}]\nbalance = \"hash\"\nhash = \"$request_uri\"\n\
             [upstreams.ring]\nservers = [{entries}]\nbalance = \"hash\"\nhash = \"$request_uri\"\nconsistent = true"
        ),
        "[[servers.locations]]\npath = \"/h/\"\nproxy_pass = \"http://plain\"\n\
         [[servers.locations]]\npath = \"/c/\"\nproxy_pass = \"http://ring\"",
    );
    for prefix in ["/h/item", "/c/item"] {
        let p = paths(prefix, 40);
        let theirs = sequence(ng.addr(), &p).await;
        let ours = sequence(s.addr(), &p).await;
        assert_eq!(ours, theirs, "{prefix}");
        let used: std::collections::HashSet<&String> = theirs.iter().collect();
        assert_eq!(used.len(), 3, "every server serves some keys: {theirs:?}");
    }
}

/// The lines about upstreams of an nginx-format error log, each as `[level] message |
/// upstream` (without the times, connection numbers, client, server and host, which differ
/// between the two sides).
fn upstream_events(log: &str) -> Vec<String> {
    let mut events: Vec<String> = log
        .lines()
        .filter(|l| l.contains("upstream") && l.contains(", client: "))
        .map(|l| {
            let level = l
                .split_once('[')
                .and_then(|(_, r)| r.split_once(']'))
                .map_or("", |(lv, _)| lv);
            let msg = l.split_once(": *").map_or(l, |(_, r)| r);
            let msg = msg.split_once(' ').map_or(msg, |(_, r)| r);
            let (text, ctx) = msg.split_once(", client: ").unwrap_or((msg, ""));
            let upstream = ctx
                .split_once("upstream: \"")
                .and_then(|(_, r)| r.split_once('"'))
                .map_or("", |(u, _)| u);
            format!("[{level}] {text} | {upstream}")
        })
        .collect();
    // Each worker thread writes its lines in batches: by request (the path's number), each
    // request's lines in their order.
    events.sort_by_key(|e| {
        let digits = e.bytes().rev().take_while(u8::is_ascii_digit).count();
        e[e.len() - digits..].parse::<usize>().unwrap_or(0)
    });
    events
}

/// A group with one server refusing connections: the request goes on to the next server, the
/// refusing one is marked down at max_fails and skipped; the same servers, statuses and
/// error-log lines from both.
#[tokio::test]
async fn a_refusing_server_is_skipped_then_marked_down_as_nginx() {
    let (r, a, b) = (refusing(), backend(200), backend(200));
    let ng = nginx(
        &format!(
            "upstream backend {{ server {} max_fails=2; server {}; server {}; }}",
            r.addr(),
            a.addr,
            b.addr
        ),
        "location / { proxy_pass http://backend; }",
    );
    let s = sluice(
        &format!(
            "[upstreams.backend]\nservers = [{{ address = \"{}\", max_fails = 2 }}, {{ address = \"{}\" }}, {{ address = \"{}\" }}]",
            r.addr(),
            a.addr,
            b.addr
        ),
        "[[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://backend\"",
    );
    let p = paths("/f", 8);
    let theirs = sequence(ng.addr(), &p).await;
    let ours = sequence(s.addr(), &p).await;
    assert_eq!(ours, theirs);
    assert!(theirs.iter().all(|l| l.starts_with("200 ")), "{theirs:?}");
    let ng_lines = log_lines(|| nginx_log(&ng), 8).await;
    let our_lines = log_lines(|| s.file("access.log"), 8).await;
    assert_eq!(our_lines, ng_lines);
    let tried_r = ng_lines
        .iter()
        .filter(|l| l.contains(&r.addr().to_string()))
        .count();
    assert_eq!(tried_r, 2, "twice, then down: {ng_lines:?}");
    tokio::time::sleep(crate::support::LOG_SETTLE).await;
    let (ng_events, our_events) = (upstream_events(&ng.error_log()), upstream_events(&s.log()));
    assert_eq!(our_events, ng_events);
    assert!(
        ng_events.iter().any(|e| e.starts_with(
            "[warn] upstream server temporarily disabled while connecting to upstream"
        )),
        "{ng_events:?}"
    );
}

/// Every server down: 502, and nginx's "no live upstreams" with the group's name as the
/// upstream, in both.
#[tokio::test]
async fn all_servers_down_is_502_no_live_upstreams_as_nginx() {
    let (r1, r2) = (refusing(), refusing());
    let ng = nginx(
        &format!(
            "upstream backend {{ server {}; server {}; }}",
            r1.addr(),
            r2.addr()
        ),
        "location / { proxy_pass http://backend; }",
    );
    let s = sluice(
        &format!(
            "[upstreams.backend]\nservers = [{{ address = \"{}\" }}, {{ address = \"{}\" }}]",
            r1.addr(),
            r2.addr()
        ),
        "[[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://backend\"",
    );
    let p = paths("/d", 3);
    let theirs = sequence(ng.addr(), &p).await;
    let ours = sequence(s.addr(), &p).await;
    assert!(theirs.iter().all(|l| l.starts_with("502 ")), "{theirs:?}");
    assert_eq!(
        ours.iter().map(|l| &l[..3]).collect::<Vec<_>>(),
        vec!["502"; 3]
    );
    let ng_lines = log_lines(|| nginx_log(&ng), 3).await;
    let our_lines = log_lines(|| s.file("access.log"), 3).await;
    assert_eq!(our_lines, ng_lines);
    assert_eq!(ng_lines[1], "/d1 502 backend|502");
    tokio::time::sleep(crate::support::LOG_SETTLE).await;
    let (ng_events, our_events) = (upstream_events(&ng.error_log()), upstream_events(&s.log()));
    assert_eq!(our_events, ng_events);
    assert!(
        ng_events.contains(
            &"[error] no live upstreams while connecting to upstream | http://backend/d1"
                .to_string()
        ),
        "{ng_events:?}"
    );
}

/// proxy_next_upstream http_502 http_503 drops those answers for the next server's; `off`
/// passes the first answer; the default passes a 502 response (it is not an error).
#[tokio::test]
async fn next_upstream_on_statuses_and_off_as_nginx() {
    let (b502, b503, ok) = (backend(502), backend(503), backend(200));
    let ng = nginx(
        &format!(
            "upstream st {{ server {} max_fails=0; server {} max_fails=0; server {} max_fails=0; }}",
            b502.addr, b503.addr, ok.addr
        ),
        "location /n { proxy_pass http://st; proxy_next_upstream error timeout http_502 http_503; }
         location /off { proxy_pass http://st; proxy_next_upstream off; }
         location /p { proxy_pass http://st; }",
    );
    let s = sluice(
        &format!(
            "[upstreams.st]\nservers = [{{ address = \"{}\", max_fails = 0 }}, {{ address = \"{}\", max_fails = 0 }}, {{ address = \"{}\", max_fails = 0 }}]",
            b502.addr, b503.addr, ok.addr
        ),
        "[[servers.locations]]\npath = \"/n\"\nproxy_pass = \"http://st\"\nproxy_next_upstream = [\"error\", \"timeout\", \"http_502\", \"http_503\"]\n\
         [[servers.locations]]\npath = \"/off\"\nproxy_pass = \"http://st\"\nproxy_next_upstream = \"off\"\n\
         [[servers.locations]]\npath = \"/p\"\nproxy_pass = \"http://st\"",
    );
    let mut p = paths("/n", 4);
    p.extend(paths("/off", 3));
    p.extend(paths("/p", 3));
    p.extend(["/n4".to_string(), "/n5".to_string()]);
    let theirs = sequence(ng.addr(), &p).await;
    let ours = sequence(s.addr(), &p).await;
    assert_eq!(ours, theirs);
    assert!(
        theirs[..4].iter().all(|l| l.starts_with("200 ")),
        "{theirs:?}"
    );
    let ng_lines = log_lines(|| nginx_log(&ng), p.len()).await;
    let our_lines = log_lines(|| s.file("access.log"), p.len()).await;
    assert_eq!(our_lines, ng_lines);
    let first = format!(
        "/n0 200 {}, {}, {}|502, 503, 200",
        b502.addr, b503.addr, ok.addr
    );
    assert_eq!(ng_lines[0], first);
}

/// A POST once sent is not sent again (a server that closed without answering: 502), unless
/// proxy_next_upstream has non_idempotent; a GET is, but not with proxy_request_buffering off.
#[tokio::test]
async fn non_idempotent_requests_go_on_only_when_allowed_as_nginx() {
    let (closing, ok) = (Upstream::answering(Answer::Close, 200), backend(200));
    let ng = nginx(
        &format!(
            "upstream b {{ server {} max_fails=0; server {} max_fails=0; }}",
            closing.addr, ok.addr
        ),
        "location /plain { proxy_pass http://b; }
         location /any { proxy_pass http://b; proxy_next_upstream error timeout non_idempotent; }
         location /stream { proxy_pass http://b; proxy_request_buffering off; }",
    );
    let s = sluice(
        &format!(
            "[upstreams.b]\nservers = [{{ address = \"{}\", max_fails = 0 }}, {{ address = \"{}\", max_fails = 0 }}]",
            closing.addr, ok.addr
        ),
        "[[servers.locations]]\npath = \"/plain\"\nproxy_pass = \"http://b\"\n\
         [[servers.locations]]\npath = \"/any\"\nproxy_pass = \"http://b\"\nproxy_next_upstream = [\"error\", \"timeout\", \"non_idempotent\"]\n\
         [[servers.locations]]\npath = \"/stream\"\nproxy_pass = \"http://b\"\nproxy_request_buffering = false",
    );
    let reqs = [
        ("POST", "/plain0"),
        ("POST", "/plain1"),
        ("GET", "/plain2"),
        ("POST", "/any0"),
        ("POST", "/any1"),
    ];
    let mut statuses = Vec::new();
    for addr in [ng.addr(), s.addr()] {
        let mut seen = Vec::new();
        for (m, p) in reqs {
            let raw = format!(
                "{m} {p} HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody"
            );
            let r = exchange(addr, client(1), raw.as_bytes()).await;
            seen.push(r.status);
        }
        statuses.push(seen);
    }
    assert_eq!(statuses[1], statuses[0]);
    assert_eq!(
        statuses[0],
        vec![502, 200, 200, 200, 200],
        "nginx against the reference"
    );
    let ng_lines = log_lines(|| nginx_log(&ng), reqs.len()).await;
    let our_lines = log_lines(|| s.file("access.log"), reqs.len()).await;
    assert_eq!(our_lines, ng_lines);
    let again = format!("/any1 200 {}, {}|502, 200", closing.addr, ok.addr);
    assert!(ng_lines.contains(&again), "{ng_lines:?}");
}

/// proxy_next_upstream_tries = 2: two servers at most, then the last one's failure.
#[tokio::test]
async fn next_upstream_tries_limits_the_walk_as_nginx() {
    let (c1, c2, ok) = (
        Upstream::answering(Answer::Close, 200),
        Upstream::answering(Answer::Close, 200),
        backend(200),
    );
    let ng = nginx(
        &format!(
            "upstream b {{ server {} max_fails=0; server {} max_fails=0; server {} max_fails=0; }}",
            c1.addr, c2.addr, ok.addr
        ),
        "location / { proxy_pass http://b; proxy_next_upstream_tries 2; }",
    );
    let s = sluice(
        &format!(
            "[upstreams.b]\nservers = [{{ address = \"{}\", max_fails = 0 }}, {{ address = \"{}\", max_fails = 0 }}, {{ address = \"{}\", max_fails = 0 }}]",
            c1.addr, c2.addr, ok.addr
        ),
        "proxy_next_upstream_tries = 2\n[[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://b\"",
    );
    let p = paths("/t", 4);
    let theirs = sequence(ng.addr(), &p).await;
    let ours = sequence(s.addr(), &p).await;
    assert_eq!(ours, theirs);
    assert!(theirs[0].starts_with("502"), "{theirs:?}");
    let ng_lines = log_lines(|| nginx_log(&ng), 4).await;
    let our_lines = log_lines(|| s.file("access.log"), 4).await;
    assert_eq!(our_lines, ng_lines);
    assert_eq!(
        ng_lines[0],
        format!("/t0 502 {}, {}|502, 502", c1.addr, c2.addr)
    );
}

/// least_conn with a slow server: while it holds a request, the others take the next ones;
/// the same choices as nginx's.
#[tokio::test]
async fn least_conn_avoids_the_busy_server_as_nginx() {
    let _quiet = timing();
    let slow = Upstream::with(Options {
        delay: Duration::from_millis(600),
        answer: Answer::Port,
        ..Options::default()
    });
    let (a, b) = (backend(200), backend(200));
    let ng = nginx(
        &format!(
            "upstream lc {{ least_conn; server {}; server {}; server {}; }}",
            slow.addr, a.addr, b.addr
        ),
        "location / { proxy_pass http://lc; }",
    );
    let s = sluice(
        &format!(
            "[upstreams.lc]\nbalance = \"least_conn\"\nservers = [{{ address = \"{}\" }}, {{ address = \"{}\" }}, {{ address = \"{}\" }}]",
            slow.addr, a.addr, b.addr
        ),
        "[[servers.locations]]\npath = \"/\"\nproxy_pass = \"http://lc\"",
    );
    let mut runs = Vec::new();
    for addr in [ng.addr(), s.addr()] {
        let held = tokio::spawn(async move { get(addr, "/held").await.body_text() });
        tokio::time::sleep(Duration::from_millis(150)).await;
        let quick = sequence(addr, &paths("/q", 4)).await;
        let held = held.await.unwrap();
        runs.push((held, quick));
    }
    assert_eq!(runs[1], runs[0]);
    let (held, quick) = &runs[0];
    assert_eq!(held, &slow.addr.port().to_string(), "the first of equals");
    assert!(
        !quick
            .iter()
            .any(|q| q.ends_with(&slow.addr.port().to_string())),
        "{quick:?}"
    );
}

/// One of three servers killed in the middle of 200 requests (4 at a time): none fails, the
/// others take its share.
#[tokio::test]
async fn a_server_killed_mid_run_fails_no_request() {
    let mut ups: Vec<Option<Upstream>> = (0..3).map(|_| Some(Upstream::start())).collect();
    let entries: Vec<String> = ups
        .iter()
        .flatten()
        .map(|u| format!("{{ address = \"{}\", fail_timeout = \"1s\" }}", u.addr))
        .collect();
    let s = Sluice::start(&format!(
        "[upstreams.b]\nservers = [{}]\n[[servers]]\nproxy_pass = \"http://b\"\n",
        entries.join(", ")
    ));
    let addr = s.addr();
    // $proxy_host is the group's name (nginx's), the Host sent by default.
    let first = get(addr, "/first").await;
    assert!(
        first
            .body_text()
            .to_ascii_lowercase()
            .contains("\r\nhost: b\r\n"),
        "{}",
        first.body_text()
    );
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..4 {
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut bad = Vec::new();
            for i in 0..50 {
                let r = get(addr, &format!("/k/{t}/{i}")).await;
                if r.status != 200 {
                    bad.push(format!("{r}"));
                }
                done.fetch_add(1, Ordering::SeqCst);
            }
            bad
        }));
    }
    eventually("100 requests done", Duration::from_secs(20), async || {
        (done.load(Ordering::SeqCst) >= 100).then_some(())
    })
    .await;
    let killed = ups[1].take().unwrap();
    let at_kill = killed.hits();
    drop(killed);
    let mut bad = Vec::new();
    for t in tasks {
        bad.extend(t.await.unwrap());
    }
    assert!(bad.is_empty(), "failed requests: {bad:?}");
    let rest: usize = ups.iter().flatten().map(Upstream::hits).sum();
    // (The killed server may answer the few requests in flight as it is being stopped, or
    // take one it never answers, which goes on to another.)
    let total = rest + at_kill;
    assert!(
        (196..=204).contains(&total),
        "about every request once: {total}"
    );
    assert!(
        rest >= 200 - at_kill - 4,
        "the others took the rest: {rest} + {at_kill}"
    );
}

/// A reload that leaves a group as it was keeps its health: a server marked down stays down;
/// one that changes the group starts it afresh (the server is tried again). The metrics say
/// so, per server.
#[tokio::test]
async fn a_reload_keeps_an_unchanged_groups_health_and_metrics_count_per_server() {
    let (r, ok) = (refusing(), backend(200));
    let config = |fail_timeout: &str, status: u16| {
        format!(
            "log_format = \"{LOG}\"\naccess_log = \"access.log\"\n[admin]\n\
             [upstreams.b]\nservers = [{{ address = \"{}\", fail_timeout = \"{fail_timeout}\" }}, {{ address = \"{}\" }}]\n\
             [[servers]]\nproxy_pass = \"http://b\"\nlimit_req_status = {status}\n",
            r.addr(),
            ok.addr
        )
    };
    let s = Sluice::start(&config("30s", 503));
    let tried = |n: usize| {
        let s = &s;
        async move {
            let lines = log_lines(|| s.file("access.log"), n).await;
            lines[n - 1].clone()
        }
    };
    assert_eq!(get(s.addr(), "/a0").await.status, 200);
    let both = format!("/a0 200 {}, {}|502, 200", r.addr(), ok.addr);
    assert_eq!(tried(1).await, both);
    let metrics = get(s.admin_addr(), "/metrics").await.body_text();
    let series = |m: &str, name: &str, server: String, extra: &str| {
        let key = format!("{name}{{upstream=\"b\",server=\"{server}\"{extra}}}");
        m.lines()
            .find_map(|l| l.strip_prefix(&key).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no {key} in\n{m}"))
    };
    let (ra, oa) = (r.addr().to_string(), ok.addr.to_string());
    assert_eq!(
        series(
            &metrics,
            "sluice_upstream_server_requests_total",
            ra.clone(),
            ""
        ),
        "1"
    );
    assert_eq!(
        series(
            &metrics,
            "sluice_upstream_server_failures_total",
            ra.clone(),
            ""
        ),
        "1"
    );
    assert_eq!(
        series(
            &metrics,
            "sluice_upstream_server_state",
            ra.clone(),
            ",state=\"unavailable\""
        ),
        "1"
    );
    assert_eq!(
        series(
            &metrics,
            "sluice_upstream_server_state",
            ra.clone(),
            ",state=\"up\""
        ),
        "0"
    );
    assert_eq!(
        series(
            &metrics,
            "sluice_upstream_server_state",
            oa.clone(),
            ",state=\"up\""
        ),
        "1"
    );
    assert_eq!(
        series(
            &metrics,
            "sluice_upstream_server_failures_total",
            oa.clone(),
            ""
        ),
        "0"
    );

    // Another setting changes; the group does not: the refusing server is still down.
    let out = s.reload(&config("30s", 429)).await;
    assert!(out.contains("reconfigured"), "{out}");
    assert_eq!(get(s.addr(), "/b1").await.status, 200);
    assert_eq!(tried(2).await, format!("/b1 200 {}|200", ok.addr));
    // The group changes: afresh, the first server is tried again.
    let out = s.reload(&config("20s", 429)).await;
    assert!(out.contains("reconfigured"), "{out}");
    assert_eq!(get(s.addr(), "/c2").await.status, 200);
    assert_eq!(
        tried(3).await,
        format!("/c2 200 {}, {}|502, 200", r.addr(), ok.addr)
    );
}
