//! `geo`, `map`, `allow` and `deny`: nginx's allow-list idiom, tiers chosen by `map`, and access
//! rules checked after the limits, on nginx and on sluice's `[geos]`, `[maps]` and `access`.
//!
//! IPv6 clients are named by `X-Forwarded-For` from a trusted 127.0.0.0/8 peer (realip), and in
//! [`diff_ipv6_loopback_clients`] connect from `::1` to a second server on `[::1]`.

use super::*;

/// nginx's idiom, word for word from its blog: `geo` classifies, `map` turns the class into a key,
/// an empty key is not limited. Zone 1r/m, burst=1 nodelay: a limited client passes 2 of 3, an
/// allow-listed one passes all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_geo_map_allow_list() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  geo $limited {{ default 1; 127.0.0.2/31 0; 10.0.0.0/8 0; 2001:db8::/32 0; ::1 0; }}
  map $limited $limit_key {{ 0 \"\"; 1 $binary_remote_addr; }}
  limit_req_zone $limit_key zone=req:1m rate=1r/m;
  limit_req_status 429;
  server {{
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Forwarded-For;
    location / {{ limit_req zone=req burst=1 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

[geos.limited]
default  = "1"
networks = {{ "127.0.0.2/31" = "0", "10.0.0.0/8" = "0", "2001:db8::/32" = "0", "::1" = "0" }}

[maps.limit_key]
source = "$limited"
values = {{ "0" = "", "1" = "$binary_remote_addr" }}

[zones.req]
key  = "$limit_key"
size = "1m"
rate = "1r/m"

[[servers]]
proxy_pass = "http://{up}"
real_ip    = {{ from = ["127.0.0.1"], header = "X-Forwarded-For" }}

[[servers.locations]]
path      = "/"
limit_req = {{ zone = "req", burst = 1, nodelay = true }}
"#
            )
        },
    );
    let xff = |path: &str, ip: &str| vec![get_with(client(1), path, &[("X-Forwarded-For", ip)]); 3];
    let mut reqs = Vec::new();
    for n in 2..=6u8 {
        reqs.extend(vec![Request::get(client(n), &format!("/?c={n}")); 3]);
    }
    for (i, ip) in [
        "2001:db8::5",
        "2001:db9::5",
        "::1",
        "::2",
        "10.9.8.7",
        "11.0.0.1",
    ]
    .iter()
    .enumerate()
    {
        reqs.extend(xff(&format!("/?x={i}"), ip));
    }
    let (n, s) = pair.fire(reqs).await;
    let all = expect(&[(200, &[0; 3])]);
    let limited = expect(&[(200, &[0; 2]), (429, &[0])]);
    let groups = [
        ("/?c=2", &all),
        ("/?c=3", &all),
        ("/?c=4", &limited),
        ("/?c=5", &limited),
        ("/?c=6", &limited),
        ("/?x=0", &all),
        ("/?x=1", &limited),
        ("/?x=2", &all),
        ("/?x=3", &limited),
        ("/?x=4", &all),
        ("/?x=5", &limited),
    ];
    for (path, expected) in groups {
        check_group(
            path,
            &on_paths(&n, &[path]),
            &on_paths(&s, &[path]),
            expected,
        );
    }
    pair.assert_upstream_hits("allow list", &n, &s);
    pair.assert_same_limit_lines("allow list").await;
}

/// Tiers by `map`: bots by User-Agent (a `~*` regex), writes stricter than reads (exact strings,
/// which nginx matches whatever their case), API tokens by plan (a regex whose capture is the
/// key, named and numbered), hosts by `hostnames` masks. Each zone 1r/m, burst=1 nodelay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_map_tiers() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  map $http_user_agent $bot_key {{ default \"\"; ~*(bot|spider) $binary_remote_addr; }}
  map $request_method $write_key {{ default $binary_remote_addr; get \"\"; HEAD \"\"; }}
  map $http_authorization $api_key {{
    default $binary_remote_addr;
    \"~^Bearer pro-\" \"\";
    \"~^Bearer (?<tok>[a-z]+)-\" t-$tok;
    \"~^Basic (.+)$\" b-$1;
  }}
  map $http_host $host_key {{
    hostnames;
    default $binary_remote_addr;
    .free.test \"\";
    *.paid.test paid;
    www.mirror.* mirror;
  }}
  limit_req_zone $bot_key zone=bots:1m rate=1r/m;
  limit_req_zone $write_key zone=writes:1m rate=1r/m;
  limit_req_zone $api_key zone=api:1m rate=1r/m;
  limit_req_zone $host_key zone=hosts:1m rate=1r/m;
  limit_req_status 429;
  server {{
    location /bots {{ limit_req zone=bots burst=1 nodelay; proxy_pass http://{up}; }}
    location /writes {{ limit_req zone=writes burst=1 nodelay; proxy_pass http://{up}; }}
    location /api {{ limit_req zone=api burst=1 nodelay; proxy_pass http://{up}; }}
    location /hosts {{ limit_req zone=hosts burst=1 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

[maps.bot_key]
source = "$http_user_agent"
values = {{ "~*(bot|spider)" = "$binary_remote_addr" }}

[maps.write_key]
source  = "$request_method"
default = "$binary_remote_addr"
values  = {{ get = "", HEAD = "" }}

[maps.api_key]
source  = "$http_authorization"
default = "$binary_remote_addr"
values  = {{ "~^Bearer pro-" = "", "~^Bearer (?<tok>[a-z]+)-" = "t-$tok", "~^Basic (.+)$" = "b-$1" }}

[maps.host_key]
source    = "$http_host"
hostnames = true
default   = "$binary_remote_addr"
values    = {{ ".free.test" = "", "*.paid.test" = "paid", "www.mirror.*" = "mirror" }}

{}{}{}{}[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/bots"
limit_req = {{ zone = "bots", burst = 1, nodelay = true }}

[[servers.locations]]
path      = "/writes"
limit_req = {{ zone = "writes", burst = 1, nodelay = true }}

[[servers.locations]]
path      = "/api"
limit_req = {{ zone = "api", burst = 1, nodelay = true }}

[[servers.locations]]
path      = "/hosts"
limit_req = {{ zone = "hosts", burst = 1, nodelay = true }}
"#,
                keyed_zone("bots", "$bot_key"),
                keyed_zone("writes", "$write_key"),
                keyed_zone("api", "$api_key"),
                keyed_zone("hosts", "$host_key"),
            )
        },
    );
    let with = |n: u8, path: &str, h: (&str, &str)| vec![get_with(client(n), path, &[h]); 3];
    let method = |n: u8, path: &str, m: &str| {
        let mut r = Request::get(client(n), path);
        r.method = m.to_owned();
        vec![r; 3]
    };
    let cases: Vec<(&str, Vec<Request>, bool)> = vec![
        (
            "/bots?a",
            with(2, "/bots?a", ("User-Agent", "curl/8")),
            false,
        ),
        (
            "/bots?b",
            with(3, "/bots?b", ("User-Agent", "Googlebot/2.1")),
            true,
        ),
        (
            "/bots?c",
            with(4, "/bots?c", ("User-Agent", "BaiduSPIDER")),
            true,
        ),
        ("/writes?a", method(2, "/writes?a", "GET"), false),
        ("/writes?b", method(3, "/writes?b", "DELETE"), true),
        (
            "/api?a",
            with(2, "/api?a", ("Authorization", "Bearer pro-1")),
            false,
        ),
        (
            "/api?b",
            with(3, "/api?b", ("Authorization", "Bearer abc-1")),
            true,
        ),
        (
            "/api?c",
            with(4, "/api?c", ("Authorization", "Basic eHk=")),
            true,
        ),
        (
            "/api?d",
            with(5, "/api?d", ("Authorization", "Bearer ABC-1")),
            true,
        ),
        (
            "/hosts?a",
            with(2, "/hosts?a", ("Host", "free.test")),
            false,
        ),
        (
            "/hosts?b",
            with(3, "/hosts?b", ("Host", "x.FREE.test.")),
            false,
        ),
        (
            "/hosts?c",
            with(4, "/hosts?c", ("Host", "a.paid.test")),
            true,
        ),
        (
            "/hosts?d",
            with(5, "/hosts?d", ("Host", "www.mirror.org")),
            true,
        ),
        ("/hosts?e", with(6, "/hosts?e", ("Host", "paid.test")), true),
    ];
    fire_groups(&pair, &cases).await;
    // Keys shared across clients: tokens `abc-` from two clients share `t-abc`; every
    // `*.paid.test` host shares `paid`.
    let (n2, s2) = pair
        .fire(with(6, "/api?e", ("Authorization", "Bearer abc-2")))
        .await;
    check_group(
        "/api?e (the t-abc bucket)",
        &n2,
        &s2,
        &expect(&[(429, &[0; 3])]),
    );
    pair.assert_same_limit_lines("map tiers").await;
}

/// Each group's three requests fired together at both sides; a limited group (1r/m, burst=1
/// nodelay) passes 2 of 3, the others all. Returns both sides' replies.
async fn fire_groups(
    pair: &Pair,
    groups: &[(&str, Vec<Request>, bool)],
) -> (Vec<Reply>, Vec<Reply>) {
    let reqs: Vec<Request> = groups.iter().flat_map(|(_, r, _)| r.clone()).collect();
    let (n, s) = pair.fire(reqs).await;
    let all = expect(&[(200, &[0; 3])]);
    let limited = expect(&[(200, &[0; 2]), (429, &[0])]);
    for (path, _, is_limited) in groups {
        let expected = if *is_limited { &limited } else { &all };
        check_group(
            path,
            &on_paths(&n, &[path]),
            &on_paths(&s, &[path]),
            expected,
        );
    }
    (n, s)
}

/// `[zones.NAME]` keyed on `key`, 1m, 1r/m.
fn keyed_zone(name: &str, key: &str) -> String {
    format!("[zones.{name}]\nkey = \"{key}\"\nsize = \"1m\"\nrate = \"1r/m\"\n\n")
}

/// `allow`/`deny` after the limits: the first rule that matches decides; a refused client is
/// still counted by the zone (nginx's access phase follows the preaccess phase), so its third
/// request gets the limit's 429, not 403. A location with its own rules hides the server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_allow_deny_after_the_limits() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  limit_req_zone $binary_remote_addr zone=z:1m rate=1r/m;
  limit_req_status 429;
  server {{
    deny 127.0.0.3;
    allow 127.0.0.0/29;
    deny all;
    location /a {{ limit_req zone=z burst=1 nodelay; proxy_pass http://{up}; }}
    location /open {{ allow all; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

{}[[servers]]
proxy_pass = "http://{up}"
access     = ["deny 127.0.0.3", "allow 127.0.0.0/29", "deny all"]

[[servers.locations]]
path      = "/a"
limit_req = {{ zone = "z", burst = 1, nodelay = true }}

[[servers.locations]]
path   = "/open"
access = ["allow all"]
"#,
                zone("z", "1r/m"),
            )
        },
    );
    let three = |n: u8, path: &str| vec![Request::get(client(n), path); 3];
    let reqs = [
        three(2, "/a?c=2"),
        three(3, "/a?c=3"),
        three(9, "/a?c=9"),
        three(3, "/open?c=3"),
        three(9, "/open?c=9"),
    ]
    .concat();
    let (n, s) = pair.fire(reqs).await;
    let denied = expect(&[(403, &[0; 2]), (429, &[0])]);
    for (path, expected) in [
        ("/a?c=2", expect(&[(200, &[0; 2]), (429, &[0])])),
        ("/a?c=3", denied.clone()),
        ("/a?c=9", denied),
        ("/open?c=3", expect(&[(200, &[0; 3])])),
        ("/open?c=9", expect(&[(200, &[0; 3])])),
    ] {
        check_group(
            path,
            &on_paths(&n, &[path]),
            &on_paths(&s, &[path]),
            &expected,
        );
    }
    pair.assert_upstream_hits("allow/deny", &n, &s);
    let forbidden = |log: &str| log.matches("access forbidden by rule").count();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(forbidden(&pair.nginx.error_log()), 4, "nginx's error log");
    assert_eq!(forbidden(&pair.sluice.log()), 4, "sluice's error log");
}

/// `geo`'s own ways to find the address: `proxy` with `proxy_recursive` (the client named by
/// `X-Forwarded-For` when the peer is a listed proxy, past every listed hop), a `source`
/// variable (`$arg_ip`; an address that does not parse is looked up as 255.255.255.255), and
/// `ranges`. Each limited group has its own key (`$arg_c`): 2 of 3 pass; the others all pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_geo_proxy_source_and_ranges() {
    let pair = Pair::start(
        |up| {
            format!(
                "
  geo $via {{ default 1; proxy 127.0.0.1; proxy_recursive; 10.0.0.0/8 0; 127.0.0.1 0; }}
  geo $arg_ip $named {{ default 1; 10.0.0.0/8 0; 255.255.255.255 0; }}
  geo $span {{ ranges; default 1; 127.0.0.2-127.0.0.3 0; }}
  map $via $via_key {{ 0 \"\"; default $arg_c; }}
  map $named $named_key {{ 0 \"\"; default $arg_c; }}
  map $span $span_key {{ 0 \"\"; default $arg_c; }}
  limit_req_zone $via_key zone=via:1m rate=1r/m;
  limit_req_zone $named_key zone=named:1m rate=1r/m;
  limit_req_zone $span_key zone=span:1m rate=1r/m;
  limit_req_status 429;
  server {{
    location /p {{ limit_req zone=via burst=1 nodelay; proxy_pass http://{up}; }}
    location /s {{ limit_req zone=named burst=1 nodelay; proxy_pass http://{up}; }}
    location /r {{ limit_req zone=span burst=1 nodelay; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

[geos.via]
default = "1"
proxy = ["127.0.0.1"]
proxy_recursive = true
networks = {{ "10.0.0.0/8" = "0", "127.0.0.1" = "0" }}

[geos.named]
source = "$arg_ip"
default = "1"
networks = {{ "10.0.0.0/8" = "0", "255.255.255.255" = "0" }}

[geos.span]
ranges = true
default = "1"
networks = {{ "127.0.0.2-127.0.0.3" = "0" }}

{}{}{}{}{}{}[[servers]]
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/p"
limit_req = {{ zone = "via", burst = 1, nodelay = true }}

[[servers.locations]]
path      = "/s"
limit_req = {{ zone = "named", burst = 1, nodelay = true }}

[[servers.locations]]
path      = "/r"
limit_req = {{ zone = "span", burst = 1, nodelay = true }}
"#,
                key_map("via"),
                key_map("named"),
                key_map("span"),
                keyed_zone("via", "$via_key"),
                keyed_zone("named", "$named_key"),
                keyed_zone("span", "$span_key"),
            )
        },
    );
    let xff =
        |n: u8, path: &str, v: &str| vec![get_with(client(n), path, &[("X-Forwarded-For", v)]); 3];
    let plain = |n: u8, path: &str| vec![Request::get(client(n), path); 3];
    let cases: Vec<(&str, Vec<Request>, bool)> = vec![
        ("/p?c=1", xff(1, "/p?c=1", "10.1.1.1"), false),
        ("/p?c=2", xff(1, "/p?c=2", "10.1.1.1, 127.0.0.1"), false),
        ("/p?c=3", xff(1, "/p?c=3", "11.1.1.1"), true),
        ("/p?c=4", xff(2, "/p?c=4", "10.1.1.1"), true),
        ("/p?c=5", plain(1, "/p?c=5"), false),
        ("/s?c=1&ip=10.2.3.4", plain(2, "/s?c=1&ip=10.2.3.4"), false),
        ("/s?c=2&ip=11.2.3.4", plain(2, "/s?c=2&ip=11.2.3.4"), true),
        ("/s?c=3&ip=nonsense", plain(2, "/s?c=3&ip=nonsense"), false),
        ("/s?c=4", plain(2, "/s?c=4"), false),
        ("/r?c=2", plain(2, "/r?c=2"), false),
        ("/r?c=3", plain(3, "/r?c=3"), false),
        ("/r?c=4", plain(4, "/r?c=4"), true),
    ];
    let (n, s) = fire_groups(&pair, &cases).await;
    pair.assert_upstream_hits("geo address sources", &n, &s);
}

/// `[maps.NAME_key]`: empty (not limited) where geo `$NAME` is `0`, else the group's `$arg_c`.
fn key_map(geo: &str) -> String {
    format!(
        "[maps.{geo}_key]\nsource = \"${geo}\"\ndefault = \"$arg_c\"\nvalues = {{ \"0\" = \"\" }}\n\n"
    )
}

/// A port free on `[::1]` now.
fn free_v6_port() -> u16 {
    let l = std::net::TcpListener::bind("[::1]:0").expect("bind [::1]:0");
    l.local_addr().expect("its address").port()
}

/// IPv6 loopback clients on a real IPv6 socket: each side has a second server on `[::1]`;
/// `$binary_remote_addr` is 16 bytes there, the geo's IPv6 table classifies `::1`, and
/// `allow`/`deny` name it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_ipv6_loopback_clients() {
    let (np, sp) = (free_v6_port(), free_v6_port());
    let pair = Pair::start(
        |up| {
            format!(
                "
  geo $limited {{ default 0; ::1 1; }}
  map $limited $limit_key {{ 0 \"\"; 1 $binary_remote_addr; }}
  limit_req_zone $limit_key zone=req:1m rate=1r/m;
  limit_req_status 429;
  server {{ location / {{ return 204; }} }}
  server {{
    listen [::1]:{np};
    location /a {{ limit_req zone=req burst=1 nodelay; proxy_pass http://{up}; }}
    location /d {{ deny ::1; allow all; proxy_pass http://{up}; }}
    location /ok {{ allow ::1; deny all; proxy_pass http://{up}; }}
  }}"
            )
        },
        |up| {
            format!(
                r#"limit_req_status = 429

[geos.limited]
default  = "0"
networks = {{ "::1" = "1" }}

[maps.limit_key]
source = "$limited"
values = {{ "0" = "", "1" = "$binary_remote_addr" }}

{}[[servers]]
[[servers.locations]]
path   = "/"
return = {{ status = 204 }}

[[servers]]
listen     = "[::1]:{sp}"
proxy_pass = "http://{up}"

[[servers.locations]]
path      = "/a"
limit_req = {{ zone = "req", burst = 1, nodelay = true }}

[[servers.locations]]
path   = "/d"
access = ["deny ::1", "allow all"]

[[servers.locations]]
path   = "/ok"
access = ["allow ::1", "deny all"]
"#,
                keyed_zone("req", "$limit_key"),
            )
        },
    );
    let v6: std::net::IpAddr = "::1".parse().expect("::1");
    let three = |path: &str| vec![Request::get(v6, path); 3];
    let reqs = [three("/a"), three("/d"), three("/ok")].concat();
    let (n, s) = tokio::join!(
        fire(SocketAddr::from((v6, np)), reqs.clone()),
        fire(SocketAddr::from((v6, sp)), reqs)
    );
    for (path, expected) in [
        ("/a", expect(&[(200, &[0; 2]), (429, &[0])])),
        ("/d", expect(&[(403, &[0; 3])])),
        ("/ok", expect(&[(200, &[0; 3])])),
    ] {
        check_group(
            path,
            &on_paths(&n, &[path]),
            &on_paths(&s, &[path]),
            &expected,
        );
    }
    pair.assert_upstream_hits("IPv6 loopback", &n, &s);
}
