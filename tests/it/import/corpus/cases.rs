//! The corpus cases: one test per file of `corpus/`, each its warnings table and its steps.
//! nginx's answers are written out per step (status counts, delays where they matter), so
//! each step checks nginx first, then sluice against nginx.

use super::*;

/// Every corpus file, by name (see `corpus_every_file_has_a_case`).
pub const CASES: &[&str] = &[
    "allow_list",
    "api_gateway",
    "backup",
    "balance",
    "cors",
    "dry_run",
    "headers",
    "include",
    "inheritance",
    "json_log",
    "keepalive",
    "limit_conn",
    "locations",
    "login",
    "nginx_tests",
    "realip",
    "rewrite",
    "timeouts",
    "tls",
    "vhosts",
];

const NOTHING: Compare = Compare {
    show: &[],
    seen: &[],
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_inheritance() {
    let pair = import("inheritance", 1, &preamble(3, 16)).side_by_side();
    pair.run(
        &NOTHING,
        vec![
            step(
                "/ has no list of its own: the server's (burst=1)",
                get(2, "/page").times(4),
                "200=2 429=2",
            ),
            step(
                "/search's own list hides the server's (burst=3)",
                get(3, "/search?q=x").times(6),
                "200=4 429=2",
            ),
            step(
                "/reports: its own list and its own status",
                get(4, "/reports/a").times(5),
                "200=3 503=2",
            ),
            step(
                "/reports/heavy, nested: its own list, the parent's status",
                get(5, "/reports/heavy").times(3),
                "200=1 503=2",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_backup() {
    let pair = import("backup", 1, &preamble(3, 16)).side_by_side();
    let mut steps = vec![step(
        "/app/: the live primary refuses, the other is down: the backup answers",
        vec![get(2, "/app/a")],
        "200=1",
    )];
    for i in 0..2 {
        steps.push(step(
            "/app/: the failed primary is skipped for fail_timeout",
            vec![get(2, &format!("/app/b{i}"))],
            "200=1",
        ));
    }
    steps.push(step(
        "/web/: round robin over the primaries, the backup unused",
        get(3, "/web/x").times(4),
        "200=4",
    ));
    pair.run(&NOTHING, steps).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_cors() {
    let pair = import("cors", 1, &preamble(3, 16)).side_by_side();
    let compare = Compare {
        show: &[
            "Access-Control-Allow-Origin",
            "Access-Control-Allow-Credentials",
            "Access-Control-Expose-Headers",
            "Vary",
            "Access-Control-Allow-Methods",
            "Access-Control-Allow-Headers",
            "Access-Control-Max-Age",
        ],
        seen: &["Origin"],
    };
    let origin = |r: Req| r.header("Origin", "https://app.example.com");
    pair.run(
        &compare,
        vec![
            step(
                "/api/: the always headers on 200 and 429 alike, Vary on 200 only",
                origin(get(2, "/api/items")).times(5),
                "200=3 429=2",
            ),
            step(
                "the preflight, answered by the proxy itself",
                vec![origin(get(3, "/api/preflight").method("OPTIONS"))],
                "204=1",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_realip() {
    let pair = import("realip", 1, &preamble(3, 16)).side_by_side();
    let compare = Compare {
        show: &[],
        seen: &["X-Real-IP"],
    };
    let mut behind_lb = get(2, "/")
        .header("X-Forwarded-For", "203.0.113.1")
        .times(3);
    behind_lb.extend(
        get(3, "/")
            .header("X-Forwarded-For", "203.0.113.2, 10.1.1.1")
            .times(3),
    );
    pair.run(
        &compare,
        vec![
            step(
                "two clients behind the trusted balancers: a bucket each",
                behind_lb,
                "200=4 429=2",
            ),
            step(
                "an untrusted source's X-Forwarded-For is ignored",
                get(9, "/")
                    .header("X-Forwarded-For", "203.0.113.1")
                    .times(3),
                "200=2 429=1",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_nginx_tests() {
    let pair = import("nginx_tests", 1, &preamble(3, 16)).side_by_side();
    let compare = Compare {
        show: &["Retry-After"],
        seen: &[],
    };
    pair.run(
        &compare,
        vec![
            step(
                "/: burst=1 nodelay, rejections through the named error page",
                get(2, "/").times(4),
                "200=2 429=2",
            ),
            step(
                "/status: limit_req_status 501, which the error page does not cover",
                get(3, "/status").times(3),
                "200=2 501=1",
            )
            // sluice's own answer to a rejection always has Retry-After (documented).
            .show(&[]),
            step(
                "/long: burst=2 at 4r/s, delayed",
                get(4, "/long").times(4),
                "200=3 429=1",
            )
            .delays(&[0, 250, 500]),
            step("/fast: 1000r/s, burst=1", get(5, "/fast").times(2), "200=2"),
            step(
                "/stage: burst=3 delay=1 at 4r/s",
                get(6, "/stage").times(5),
                "200=4 429=1",
            )
            .delays(&[0, 0, 250, 500]),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_login() {
    let pair = import("login", 1, &preamble(3, 16)).side_by_side();
    let users: Vec<Req> = ["bob", "carol", "dave", "erin", "frank"]
        .iter()
        .map(|u| get(3, &format!("/login?user={u}")).method("POST"))
        .collect();
    let mut api = get(4, "/api/session").header("X-User", "u1").times(3);
    api.extend(get(4, "/api/session").times(3));
    pair.run(
        &NOTHING,
        vec![
            step(
                "one user from one address: the user's zone (burst=1) decides",
                get(2, "/login?user=alice").method("POST").times(5),
                "200=2 429=3",
            ),
            step(
                "many users from one address: the address's zone (burst=3) decides",
                users,
                "200=4 429=1",
            )
            .any_target(),
            step(
                "the API's user header, and no header (an empty key: not limited)",
                api,
                "200=5 429=1",
            ),
            step(
                "the rest of the site is open",
                get(5, "/").times(5),
                "200=5",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_vhosts() {
    let pair = import(
        "vhosts",
        1,
        &[
            preamble(3, 16),
            [("nginx.conf", 21, PART, "server")].to_vec(),
        ]
        .concat(),
    )
    .side_by_side();
    let compare = Compare {
        show: &["X-Site"],
        seen: &["Host"],
    };
    let host = |n: u8, h: &str| get(n, "/").header("Host", h);
    pair.run(
        &compare,
        vec![
            step(
                "the shop by its name, limited",
                host(2, "shop.example.com").times(3),
                "200=2 429=1",
            ),
            step(
                "the shop by its second name, the blog, a wildcard name",
                vec![
                    host(3, "www.shop.example.com"),
                    host(4, "blog.example.com"),
                    host(4, "img.static.example.com"),
                ],
                "200=3",
            ),
            step(
                "an unknown name: the default server closes the connection (444)",
                vec![host(5, "other.example.com")],
                "closed=1",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_locations() {
    let pair = import("locations", 1, &preamble(4, 17)).side_by_side();
    let compare = Compare {
        show: &["X-Loc"],
        seen: &[],
    };
    let reqs = [
        "/",
        "/other",
        "/app/users?id=1",
        "/app",
        "/static/logo.png",
        "/img/logo.PNG",
        "/index.php?x=1",
        "/app/run.php",
        "/health",
        "/health/more",
    ]
    .iter()
    .map(|p| get(2, p))
    .collect();
    pair.run(
        &compare,
        vec![step(
            "each modifier in nginx's order, proxy_pass with and without a URI",
            reqs,
            "200=9 301=1",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_headers() {
    let pair = import("headers", 1, &preamble(4, 17)).side_by_side();
    let compare = Compare {
        show: &[
            "X-Frame-Options",
            "X-Content-Type-Options",
            "X-Powered-By",
            "X-Internal",
            "Server",
        ],
        seen: &[
            "Host",
            "X-Real-IP",
            "X-Forwarded-For",
            "X-Forwarded-Proto",
            "Accept-Encoding",
            "X-Via",
        ],
    };
    let browser = |n: u8, path: &str| {
        get(n, path)
            .header("Host", "www.example.com")
            .header("Accept-Encoding", "gzip")
    };
    pair.run(
        &compare,
        vec![
            step(
                "the server's proxy_set_header list, hidden and passed headers",
                vec![browser(2, "/page")],
                "200=1",
            ),
            step(
                "X-Forwarded-For appended to the client's",
                vec![browser(4, "/page").header("X-Forwarded-For", "198.51.100.9")],
                "200=1",
            ),
            // sluice always sends X-Forwarded-For (documented), nginx only when it is set:
            // not compared where the location's own list leaves it out.
            step(
                "/internal/: its own lists replace the server's and the http level's",
                vec![browser(3, "/internal/x")],
                "200=1",
            )
            .seen(&[
                "Host",
                "X-Real-IP",
                "X-Forwarded-Proto",
                "Accept-Encoding",
                "X-Via",
            ]),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_json_log() {
    let pair = import("json_log", 1, &preamble(3, 15)).side_by_side();
    let agent = |r: Req| r.header("User-Agent", r#"probe "quoted" \ 1"#);
    pair.run(
        &NOTHING,
        vec![
            step(
                "a limited location",
                agent(get(2, "/api/x?a=1")).times(3),
                "200=2 429=1",
            ),
            step("an open one", vec![agent(get(3, "/page"))], "200=1"),
        ],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let nginx_log = std::fs::read_to_string(pair.nginx.prefix().join("logs/access.json"))
        .expect("nginx's JSON access log");
    let lines = sorted_lines(&nginx_log);
    assert_eq!(
        lines,
        vec![
            r#"{"remote":"127.0.0.2","method":"GET","uri":"/api/x?a=1","status":200,"limit":"PASSED","agent":"probe \"quoted\" \\ 1"}"#,
            r#"{"remote":"127.0.0.2","method":"GET","uri":"/api/x?a=1","status":200,"limit":"PASSED","agent":"probe \"quoted\" \\ 1"}"#,
            r#"{"remote":"127.0.0.2","method":"GET","uri":"/api/x?a=1","status":429,"limit":"REJECTED","agent":"probe \"quoted\" \\ 1"}"#,
            r#"{"remote":"127.0.0.3","method":"GET","uri":"/page","status":200,"limit":"","agent":"probe \"quoted\" \\ 1"}"#,
        ],
        "nginx's JSON lines"
    );
    if let Some(sluice) = &pair.sluice {
        let sluice_log = sluice.file("logs/access.json");
        assert_eq!(sorted_lines(&sluice_log), lines, "sluice's JSON lines");
    }
}

/// The non-empty lines of a log, sorted (requests finish in any order).
fn sorted_lines(log: &str) -> Vec<String> {
    let mut v: Vec<String> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_timeouts() {
    let pair = import("timeouts", 1, &preamble(3, 16)).side_by_side();
    let post = |n: u8, path: &str, len: usize| get(n, path).method("POST").body(vec![b'x'; len]);
    pair.run(
        &NOTHING,
        vec![
            step(
                "bodies against the http-level 1k and the upload's own 8k",
                vec![
                    post(2, "/form", 2000),
                    post(2, "/form", 500),
                    post(2, "/upload", 4000),
                    post(2, "/upload", 9000),
                ],
                "200=2 413=2",
            ),
            step(
                "a backend slower than the server's proxy_read_timeout (300ms)",
                vec![get(3, "/slow").header("X-Echo-Delay", "700")],
                "504=1",
            ),
            step(
                "the upload's own 2s proxy_read_timeout",
                vec![get(3, "/upload").header("X-Echo-Delay", "500")],
                "200=1",
            )
            .delays(&[500]),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_dry_run() {
    let pair = import("dry_run", 1, &preamble(3, 16)).side_by_side();
    let compare = Compare {
        show: &["X-Limit"],
        seen: &[],
    };
    pair.run(
        &compare,
        vec![
            step(
                "/trial in dry run: everything passes, the header says what would not",
                get(2, "/trial").times(4),
                "200=4",
            ),
            step(
                "/enforced: rejected, the header on the 429s too (always)",
                get(3, "/enforced").times(4),
                "200=2 429=2",
            ),
            step(
                "no limit: $limit_req_status is empty, the header not sent",
                vec![get(4, "/")],
                "200=1",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_limit_conn() {
    let pair = import("limit_conn", 1, &preamble(3, 16)).side_by_side();
    let slow = |n: u8| get(n, "/download/f").header("X-Echo-Delay", "300");
    pair.run(
        &NOTHING,
        vec![
            step(
                "one download in flight per client",
                slow(2).times(3),
                "200=1 503=2",
            ),
            step(
                "other clients have their own count",
                vec![slow(3), slow(4)],
                "200=2",
            ),
            step(
                "limit_req first (burst=5 nodelay), then limit_conn on what passed",
                slow(5).times(8),
                "200=1 429=2 503=5",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_include() {
    let pair = import("include", 2, &preamble(3, 16)).side_by_side();
    let compare = Compare {
        show: &["X-Admin"],
        seen: &[],
    };
    pair.run(
        &compare,
        vec![
            step(
                "the site of one included file, the zone of another",
                get(2, "/").times(4),
                "200=3 429=1",
            ),
            step(
                "the second site, on its own listener",
                vec![get(3, "/").on(2)],
                "200=1",
            ),
        ],
    )
    .await;
}

/// Import and check only: `root`, `try_files`, `rewrite` and `if` are what this site is made
/// of, and sluice has none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_rewrite() {
    let _imported = import(
        "rewrite",
        1,
        &[
            preamble(3, 16),
            [
                ("nginx.conf", 22, NOT, "root"),
                ("nginx.conf", 23, NOT, "index"),
                ("nginx.conf", 25, NOT, "rewrite"),
                ("nginx.conf", 27, NOT, "if"),
                ("nginx.conf", 32, NOT, "try_files"),
                ("nginx.conf", 35, NOT, "location"),
            ]
            .to_vec(),
        ]
        .concat(),
    );
    let pair = nginx_alone("rewrite", 1);
    let compare = Compare {
        show: &["Location"],
        seen: &[],
    };
    pair.run(
        &compare,
        vec![step(
            "nginx: a rewrite, a static file, try_files' fallback, the maintenance switch",
            vec![
                get(2, "/old/page"),
                get(2, "/new/page"),
                get(2, "/ok.txt"),
                get(2, "/missing"),
                get(3, "/").header("X-Maintenance", "1"),
            ],
            "200=3 301=1 503=1",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_balance() {
    let pair = import("balance", 1, &preamble(3, 16)).side_by_side();
    let mut steps: Vec<Step> = (0..6)
        .map(|i| {
            step(
                "/app/: smooth weighted round robin (3, 1, 2), request by request",
                vec![get(2, &format!("/app/{i}"))],
                "200=1",
            )
        })
        .collect();
    for uri in ["a", "b", "c", "d", "e", "f", "a", "c", "e"] {
        steps.push(step(
            "/cache/: consistent hash of the URI",
            vec![get(3, &format!("/cache/{uri}"))],
            "200=1",
        ));
    }
    let replies = pair.run(&NOTHING, steps).await;
    let mut per_echo: BTreeMap<String, usize> = BTreeMap::new();
    for (nginx, _) in &replies[..6] {
        let echo = nginx[0].header("X-Echo").unwrap_or("-").to_owned();
        *per_echo.entry(echo).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = [("up1", 3), ("up2", 1), ("up3", 2)]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), *v))
        .collect();
    assert_eq!(per_echo, want, "nginx's round robin over weights 3, 1, 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_keepalive() {
    let pair = import(
        "keepalive",
        1,
        &[
            preamble(3, 16),
            [("nginx.conf", 27, IGNORED, "proxy_http_version")].to_vec(),
        ]
        .concat(),
    )
    // Idle upstream connections are kept per worker (nginx's per worker process too): one
    // worker each, so that the same connection is the one to reuse on both sides.
    .side_by_side_with(&[("SLUICE_WORKERS", "1")]);
    let compare = Compare {
        show: &["X-Echo-Seq"],
        seen: &[":version", "Host", "Connection"],
    };
    let steps = (1..=3)
        .map(|i| {
            step(
                "sequential requests reuse one upstream connection",
                vec![get(2, &format!("/k{i}"))],
                "200=1",
            )
        })
        .collect();
    pair.run(&compare, steps).await;
}

/// Translated in part: the per-client zone is keyed on a `map`, which the import reports and
/// replaces with the client's address. Side by side where that is the same (no key, or a key
/// from one address); the key shared by two addresses goes to nginx alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_api_gateway() {
    let pair = import(
        "api_gateway",
        1,
        &[
            preamble(3, 16),
            [
                // sluice has no $request_id: the header is left out, and said so.
                ("nginx.conf", 42, NOT, "proxy_set_header"),
            ]
            .to_vec(),
        ]
        .concat(),
    )
    .side_by_side();
    let compare = Compare {
        show: &["Content-Type"],
        seen: &["Host"],
    };
    let key = "abcdefghijklmnop1234";
    pair.run(
        &compare,
        vec![
            step("the status endpoint", vec![get(2, "/v1/status")], "200=1"),
            step(
                "no API key: the client's zone keyed by address (burst=5)",
                get(3, "/v1/users/1").times(7),
                "200=6 429=1",
            ),
            step(
                "an API key: keyed by the key",
                get(4, "/v1/users/2").header("X-Api-Key", key).times(7),
                "200=6 429=1",
            ),
            step(
                "the same key from another address shares its bucket (the map)",
                vec![get(5, "/v1/users/3").header("X-Api-Key", key)],
                "429=1",
            ),
            step(
                "writes at 1r/s, burst=2, delayed",
                get(6, "/v1/orders/9").method("POST").times(2),
                "200=2",
            )
            .delays(&[0, 1000]),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_tls() {
    let pair = import(
        "tls",
        2,
        &[
            preamble(3, 16),
            [("nginx.conf", 35, PART, "server")].to_vec(),
        ]
        .concat(),
    )
    .side_by_side();
    let compare = Compare {
        show: &["Location", "X-Test-Version"],
        seen: &["X-Forwarded-Proto"],
    };
    pair.run(
        &compare,
        vec![step(
            "plain HTTP: sent to HTTPS",
            vec![get(2, "/x?y=1").on(2)],
            "301=1",
        )],
    )
    .await;
    let ca = pair.ca_cert();
    let over_tls = |addr: Option<SocketAddr>| {
        let ca = ca.clone();
        async move {
            let Some(addr) = addr else {
                return Vec::new();
            };
            let mut replies = Vec::new();
            for i in 0..3 {
                replies.push(curl_h2(addr, &ca, &format!("/secure/{i}")).await);
            }
            replies
        }
    };
    let (n, s) = tokio::join!(
        over_tls(Some(pair.nginx.addr_of(0))),
        over_tls(pair.sluice.as_ref().map(|s| s.addr_of(0)))
    );
    pair.compare_step(
        &compare,
        "HTTPS over HTTP/2, limited (burst=1 nodelay), X-Forwarded-Proto from $scheme",
        "200=2 429=1",
        &n,
        &s,
    );
}
