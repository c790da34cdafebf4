//! The seed article (nginx-limit-req.md §11): the oracle reproduces the reference table, and
//! sluice answers each of the four locations as nginx does.

use super::*;

const NGINX_ERROR_PAGE: &str = r#"
    error_page 429 @too_many;
    location @too_many {
      add_header Retry-After 1 always;
      return 429 "too many requests\n";
    }"#;

const NGINX_ARTICLE_ZONES: &str = "
  limit_req_zone $binary_remote_addr zone=z_plain:1m   rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_burst:1m   rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_nodelay:1m rate=2r/s;
  limit_req_zone $binary_remote_addr zone=z_delay:1m   rate=2r/s;
  limit_req_status 429;";

/// config/nginx/seed.conf's server, answering from html/ok.txt as in the article.
fn nginx_seed() -> String {
    format!(
        "{NGINX_ARTICLE_ZONES}
  server {{
    root html;
    location /plain   {{ limit_req zone=z_plain;                   try_files /ok.txt =404; }}
    location /burst   {{ limit_req zone=z_burst burst=5;           try_files /ok.txt =404; }}
    location /nodelay {{ limit_req zone=z_nodelay burst=5 nodelay; try_files /ok.txt =404; }}
    location /delay   {{ limit_req zone=z_delay burst=5 delay=2;   try_files /ok.txt =404; }}
    {NGINX_ERROR_PAGE}
  }}"
    )
}

/// The article's server with proxy_pass to `upstream`.
fn nginx_article(upstream: SocketAddr) -> String {
    format!(
        "{NGINX_ARTICLE_ZONES}
  server {{
    location /plain   {{ limit_req zone=z_plain;                   proxy_pass http://{upstream}; }}
    location /burst   {{ limit_req zone=z_burst burst=5;           proxy_pass http://{upstream}; }}
    location /nodelay {{ limit_req zone=z_nodelay burst=5 nodelay; proxy_pass http://{upstream}; }}
    location /delay   {{ limit_req zone=z_delay burst=5 delay=2;   proxy_pass http://{upstream}; }}
    {NGINX_ERROR_PAGE}
  }}"
    )
}

/// The seed article's server (config/sluice.toml), proxying to `upstream`.
fn sluice_article(upstream: SocketAddr) -> String {
    let zones: String = ["z_plain", "z_burst", "z_nodelay", "z_delay"]
        .iter()
        .map(|z| zone(z, "2r/s"))
        .collect();
    format!(
        r#"limit_req_status    = 429
limit_req_log_level = "error"

{zones}[[servers]]
proxy_pass = "http://{upstream}"

[[servers.locations]]
path      = "/plain"
limit_req = {{ zone = "z_plain" }}

[[servers.locations]]
path      = "/burst"
limit_req = {{ zone = "z_burst", burst = 5 }}

[[servers.locations]]
path      = "/nodelay"
limit_req = {{ zone = "z_nodelay", burst = 5, nodelay = true }}

[[servers.locations]]
path      = "/delay"
limit_req = [{{ zone = "z_delay", burst = 5, delay = 2 }}]

[servers.error_pages.429]
status  = 429
headers = {{ "Retry-After" = "$retry_after" }}
body    = "too many requests\n"
"#
    )
}

/// nginx-limit-req.md §11: 10 simultaneous requests per location at 2r/s.
fn article_expected(path: &str) -> Vec<(u16, u64)> {
    match path {
        "/plain" => expect(&[(200, &[0]), (429, &[0; 9])]),
        "/burst" => expect(&[(200, &[0, 500, 1000, 1500, 2000, 2500]), (429, &[0; 4])]),
        "/nodelay" => expect(&[(200, &[0; 6]), (429, &[0; 4])]),
        "/delay" => expect(&[(200, &[0, 0, 0, 500, 1000, 1500]), (429, &[0; 4])]),
        _ => unreachable!("not an article location: {path}"),
    }
}

/// The oracle itself: nginx with config/nginx/seed.conf's locations reproduces the table of
/// nginx-limit-req.md §11 through this harness (bodies from html/ok.txt, the @too_many page).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_oracle_reproduces_the_reference_table() {
    let _timing = timing();
    let nginx = Nginx::start(&nginx_seed());
    let addr = nginx.addr();
    let (plain, burst_, nodelay, delay) = tokio::join!(
        burst(addr, client(2), "/plain", 10),
        burst(addr, client(3), "/burst", 10),
        burst(addr, client(4), "/nodelay", 10),
        burst(addr, client(5), "/delay", 10),
    );
    for (path, replies) in [
        ("/plain", &plain),
        ("/burst", &burst_),
        ("/nodelay", &nodelay),
        ("/delay", &delay),
    ] {
        assert_expected(
            &format!("nginx {path} (seed.conf)"),
            "nginx",
            replies,
            &article_expected(path),
        );
        for r in replies.iter() {
            match r.status {
                200 => assert_eq!(r.body_text(), "ok\n", "{r:#?}"),
                429 => {
                    assert_eq!(r.body_text(), "too many requests\n", "{r:#?}");
                    assert_eq!(r.header("Retry-After"), Some("1"), "{r:#?}");
                }
                _ => panic!("nginx {path}: unexpected {r}"),
            }
        }
    }
}

async fn diff_article(path: &str) {
    let pair = Pair::start(nginx_article, sluice_article);
    let (nginx, sluice) = pair.fire(vec![Request::get(client(2), path); 10]).await;
    assert_expected(
        &format!("nginx {path}"),
        "nginx",
        &nginx,
        &article_expected(path),
    );
    assert_same(&format!("article {path}: nginx vs sluice"), &nginx, &sluice);
    for r in nginx.iter().chain(&sluice).filter(|r| r.status == 429) {
        assert_eq!(
            r.body_text(),
            "too many requests\n",
            "article {path}: the 429 error page body differs: {r}"
        );
    }
    pair.assert_upstream_hits(&format!("article {path}"), &nginx, &sluice);
    pair.assert_same_limit_lines(&format!("article {path}"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_article_plain() {
    diff_article("/plain").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_article_burst() {
    diff_article("/burst").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_article_nodelay() {
    diff_article("/nodelay").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_article_delay() {
    diff_article("/delay").await;
}
