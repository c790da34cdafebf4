//! A real HAProxy (TCP mode, `send-proxy` or `send-proxy-v2`) in front of each side; clients
//! connect to it from 127.0.0.2 and 127.0.0.3, HAProxy connects on from 127.0.0.1 and names them
//! in the PROXY header.

use super::*;
use crate::support::{Haproxy, ProxyVersion};

/// nginx and sluice, each behind its own HAProxy.
struct Behind {
    pair: Pair,
    nginx: Haproxy,
    sluice: Haproxy,
}

impl Behind {
    fn start(setup: &Setup<'_>, version: ProxyVersion) -> Behind {
        let pair = setup.start();
        let nginx = Haproxy::start(pair.nginx.addr(), version);
        let sluice = Haproxy::start(pair.sluice.addr(), version);
        Behind {
            pair,
            nginx,
            sluice,
        }
    }

    /// The same requests through both HAProxies at the same time.
    async fn fire(&self, requests: Vec<Request>) -> (Vec<Reply>, Vec<Reply>) {
        tokio::join!(
            fire(self.nginx.addr(), requests.clone()),
            fire(self.sluice.addr(), requests)
        )
    }

    /// nginx's access log, sorted, with the client's port written `PORT` and the HAProxy's
    /// (`$proxy_protocol_server_port`) `FRONT` ([`access_shapes`]), checked against `want`.
    async fn nginx_access(&self, scenario: &str, want: &[String]) -> Vec<String> {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let log = std::fs::read_to_string(self.pair.nginx.prefix().join("logs/pp.log"))
            .unwrap_or_default();
        let nginx = access_shapes(&log, self.nginx.addr().port());
        assert_eq!(nginx, want, "{scenario}: nginx's access log (oracle)");
        nginx
    }

    /// sluice's access log in the same shapes, checked against `want`: nginx's, or what
    /// sluice's own replies make of it where the order of arrival picks who passes.
    fn sluice_access(&self, scenario: &str, want: &[String]) {
        let sluice = access_shapes(&self.pair.sluice.stdout(), self.sluice.addr().port());
        assert_eq!(sluice, want, "{scenario}: sluice's access log");
    }
}

/// Each 200 of `replies` reached the upstream with `fields` `(name, value)`; a value of `None`
/// stands for the reply's own client address.
fn assert_echoed(scenario: &str, side: &str, replies: &[Reply], fields: &[(&str, Option<&str>)]) {
    for r in replies.iter().filter(|r| r.status == 200) {
        let ip = r.source.to_string();
        for (field, value) in fields {
            assert_eq!(
                echoed(r, field).as_deref(),
                Some(value.unwrap_or(&ip)),
                "{scenario}: {side}'s upstream got {field} for a request from {ip}:\n{}",
                r.body_text()
            );
        }
    }
}

/// The `client:` of nginx's limit lines, sorted.
fn nginx_limited_clients(pair: &Pair) -> Vec<String> {
    let lines = limit_lines(&pair.nginx.error_log()).expect("nginx's error log parses");
    let mut clients: Vec<String> = lines.into_iter().map(|l| l.client).collect();
    clients.sort();
    clients
}

/// 2r/s burst=2 nodelay keyed on `$binary_remote_addr`, `real_ip` from 127.0.0.1 by the PROXY
/// header; five requests from each of 127.0.0.2 and 127.0.0.3 at once through HAProxy: each
/// client has its own bucket (3 pass, 2 rejected), the upstream sees each client as `X-Real-IP`
/// and `X-Forwarded-For`, the rejections name it, the access log has it as `$remote_addr` and
/// `$proxy_protocol_addr`, HAProxy's frontend as the server address.
async fn each_client_limited_on_its_own(version: ProxyVersion) {
    let setup = Setup {
        zones: &[("z_pp", "$binary_remote_addr", "2r/s")],
        locations: &[("/", "z_pp", 2)],
        ..Setup::default()
    };
    let behind = Behind::start(&setup, version);
    let scenario = format!("HAProxy {version:?}");
    let mut requests = vec![Request::get(client(2), "/x?c=2"); 5];
    requests.extend(vec![Request::get(client(3), "/x?c=3"); 5]);
    let (nginx, sluice) = behind.fire(requests).await;
    let paths = ["/x?c=2", "/x?c=3"];
    let three_two = expect(&[(200, &[0; 3]), (429, &[0; 2])]);
    let fields = [("X-Real-IP", None), ("X-Forwarded-For", None)];
    // The oracle first.
    for path in paths {
        let label = format!("nginx {scenario} {path}");
        assert_expected(&label, "nginx", &on_paths(&nginx, &[path]), &three_two);
    }
    assert_echoed(&scenario, "nginx", &nginx, &fields);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        nginx_limited_clients(&behind.pair),
        ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"],
        "{scenario}: nginx's rejections name the PROXY source (oracle)"
    );
    let want: Vec<String> = [
        lines(3, "127.0.0.2", "127.0.0.2", 200),
        lines(2, "127.0.0.2", "127.0.0.2", 429),
        lines(3, "127.0.0.3", "127.0.0.3", 200),
        lines(2, "127.0.0.3", "127.0.0.3", 429),
    ]
    .concat();
    let nginx_access = behind.nginx_access(&scenario, &want).await;
    // Then sluice against it.
    for path in paths {
        let label = format!("{scenario} {path}: nginx vs sluice");
        assert_same(
            &label,
            &on_paths(&nginx, &[path]),
            &on_paths(&sluice, &[path]),
        );
    }
    behind.pair.assert_upstream_hits(&scenario, &nginx, &sluice);
    assert_echoed(&scenario, "sluice", &sluice, &fields);
    behind.pair.assert_same_limit_lines(&scenario).await;
    behind.sluice_access(&scenario, &nginx_access);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_haproxy_v1_limits_each_client() {
    each_client_limited_on_its_own(ProxyVersion::V1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_haproxy_v2_limits_each_client() {
    each_client_limited_on_its_own(ProxyVersion::V2).await;
}

/// Request targets answered together, and what nginx must answer them.
type Group<'a> = (&'a [&'a str], Vec<(u16, u64)>);

/// `real_ip` trusting 10.0.0.0/8 only: HAProxy (127.0.0.1) is not trusted, so `$remote_addr`
/// stays 127.0.0.1 while `$proxy_protocol_addr` still names the client. Behind `send-proxy-v2`,
/// five requests from each of 127.0.0.2 and 127.0.0.3 at once to `/ra` (1r/m burst=2 on
/// `$binary_remote_addr`: one bucket for all, 3 pass, 7 rejected) and to `/pa` (the same on
/// `$proxy_protocol_addr`: one bucket per client, 3 pass each). The upstream sees `X-Real-IP:
/// 127.0.0.1` and `X-PP-Addr` (`$proxy_protocol_addr`) the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_pp_untrusted_source_keeps_the_peer_address() {
    let setup = Setup {
        trusted: "10.0.0.0/8",
        zones: &[
            ("z_ra", "$binary_remote_addr", "1r/m"),
            ("z_pa", "$proxy_protocol_addr", "1r/m"),
        ],
        locations: &[("/ra", "z_ra", 2), ("/pa", "z_pa", 2)],
        headers: &[("X-PP-Addr", "$proxy_protocol_addr")],
        ..Setup::default()
    };
    let behind = Behind::start(&setup, ProxyVersion::V2);
    let mut requests = Vec::new();
    // One target for both clients on /ra: which of them is rejected is up to the arrival order.
    for c in [2, 3] {
        requests.extend(vec![Request::get(client(c), "/ra"); 5]);
        requests.extend(vec![Request::get(client(c), &format!("/pa?c={c}")); 5]);
    }
    let (nginx, sluice) = behind.fire(requests).await;
    let scenario = "untrusted PROXY source";
    let groups: [Group<'_>; 3] = [
        (&["/ra"], expect(&[(200, &[0; 3]), (429, &[0; 7])])),
        (&["/pa?c=2"], expect(&[(200, &[0; 3]), (429, &[0; 2])])),
        (&["/pa?c=3"], expect(&[(200, &[0; 3]), (429, &[0; 2])])),
    ];
    let fields = [("X-Real-IP", Some("127.0.0.1")), ("X-PP-Addr", None)];
    for (paths, want) in &groups {
        let label = format!("nginx {scenario} {paths:?}");
        assert_expected(&label, "nginx", &on_paths(&nginx, paths), want);
    }
    assert_echoed(scenario, "nginx", &nginx, &fields);
    // One access line per reply: the peer, then the client. Which client's requests to /ra
    // pass is the order of arrival's choice: each side's log is held to its own replies.
    let want = |replies: &[Reply]| {
        let mut v: Vec<String> = replies
            .iter()
            .flat_map(|r| lines(1, "127.0.0.1", &r.source.to_string(), r.status))
            .collect();
        v.sort();
        v
    };
    behind.nginx_access(scenario, &want(&nginx)).await;
    for (paths, _) in &groups {
        let label = format!("{scenario} {paths:?}: nginx vs sluice");
        assert_same(&label, &on_paths(&nginx, paths), &on_paths(&sluice, paths));
    }
    behind.pair.assert_upstream_hits(scenario, &nginx, &sluice);
    assert_echoed(scenario, "sluice", &sluice, &fields);
    behind.pair.assert_same_limit_lines(scenario).await;
    behind.sluice_access(scenario, &want(&sluice));
}
