//! Compression, side by side with nginx 1.22's gzip module: one upstream ([`upstream`]) behind
//! both, the same requests to each, and for every case the same decision (encoded or not), the
//! same `Vary`, the same framing (`Content-Length` kept, or dropped for chunking / the
//! connection's end), the same `ETag` and `Accept-Ranges`, and bodies that decompress to the
//! upstream's bytes. Beside it: a long streamed response reaches the client in pieces, HTTP/2
//! frames it as nginx does, `$gzip_ratio`, and zstd and brotli by the client's preference.
//!
//! # Layout
//! - this file: the two servers' configurations and the HTTP/1.x differential;
//! - [`more`]: streaming, a slow client, HTTP/2, `$gzip_ratio`, zstd and brotli, server level;
//! - [`upstream`]: the upstream that answers what each request's `X-Up-*` fields ask.

mod more;
mod upstream;

use std::io::Read;
use std::net::SocketAddr;

use crate::support::{Nginx, Reply, Sluice, client, exchange};

/// The http level both share; `/h10`, `/off`, `/any`, `/deny` (an error page) and `/own` (`return`)
/// change it per location.
fn nginx_conf(up: SocketAddr) -> String {
    format!(
        r#"
  gzip on;
  gzip_types application/json text/css;
  gzip_min_length 100;
  gzip_vary on;
  gzip_proxied expired no-cache auth;
  gzip_disable msie6 "badbot";
  gzip_comp_level 5;
  log_format ratio '$uri $gzip_ratio';
  server {{
    access_log logs/ratio.log ratio;
    location /     {{ proxy_pass http://{up}; proxy_http_version 1.1; }}
    location /h10  {{ gzip_http_version 1.0; proxy_pass http://{up}; proxy_http_version 1.1; }}
    location /off  {{ gzip off; proxy_pass http://{up}; proxy_http_version 1.1; }}
    location /any  {{ gzip_types *; gzip_proxied any; gzip_vary off; proxy_pass http://{up};
                      proxy_http_version 1.1; }}
    location /own  {{ default_type text/html; return 200 "{own}"; }}
    location /deny {{ deny all; gzip_types application/problem+json; }}
  }}"#,
        own = own_body()
    )
}

fn sluice_conf(up: SocketAddr) -> String {
    format!(
        r#"gzip = true
gzip_types = ["application/json", "text/css"]
gzip_min_length = 100
gzip_vary = true
gzip_proxied = "expired no-cache auth"
gzip_disable = ["msie6", "badbot"]
gzip_comp_level = 5
log_format = "$uri $gzip_ratio"

[[servers]]
proxy_pass = "http://{up}"
access_log = "stdout"

[[servers.locations]]
path = "/h10"
gzip_http_version = "1.0"

[[servers.locations]]
path = "/off"
gzip = false

[[servers.locations]]
path = "/any"
gzip_types = "*"
gzip_proxied = "any"
gzip_vary = false

[[servers.locations]]
path = "/deny"
access = ["deny all"]
# (sluice's 403 page is problem+json, nginx's text/html: both compressed then.)
gzip_types = "application/problem+json"

[[servers.locations]]
path = "/own"
return = {{ status = 200, body = "{own}", headers = {{ "Content-Type" = "text/html" }} }}
"#,
        own = own_body()
    )
}

/// `return`'s body: sluice's own response, long enough to compress.
fn own_body() -> String {
    "sluice and nginx answer this themselves. ".repeat(20)
}

/// One request: its method, HTTP version, path and fields.
#[derive(Clone, Debug)]
pub struct Case {
    method: &'static str,
    http10: bool,
    path: &'static str,
    fields: Vec<(&'static str, String)>,
}

/// `GET /` asking for `X-Up-Type: ty`, `X-Up-Len: len`, with `Accept-Encoding: gzip, deflate, br`,
/// then `more` fields.
fn case(ty: &str, len: usize, more: &[(&'static str, &str)]) -> Case {
    let mut fields = vec![
        ("X-Up-Type", ty.to_string()),
        ("X-Up-Len", len.to_string()),
        ("Accept-Encoding", "gzip, deflate, br".to_string()),
    ];
    for (n, v) in more {
        if let Some(f) = fields.iter_mut().find(|f| f.0 == *n) {
            f.1 = v.to_string();
        } else {
            fields.push((n, v.to_string()));
        }
    }
    fields.retain(|f| !(f.0 == "Accept-Encoding" && f.1 == "-"));
    Case {
        method: "GET",
        http10: false,
        path: "/",
        fields,
    }
}

impl Case {
    fn at(mut self, path: &'static str) -> Case {
        self.path = path;
        self
    }

    fn method(mut self, m: &'static str) -> Case {
        self.method = m;
        self
    }

    fn http10(mut self) -> Case {
        self.http10 = true;
        self
    }

    fn raw(&self, addr: SocketAddr) -> Vec<u8> {
        let v = if self.http10 { "1.0" } else { "1.1" };
        let mut s = format!("{} {} HTTP/{v}\r\nHost: {addr}\r\n", self.method, self.path);
        for (n, val) in &self.fields {
            s.push_str(&format!("{n}: {val}\r\n"));
        }
        s.push_str("Connection: close\r\n\r\n");
        s.into_bytes()
    }

    fn len(&self) -> usize {
        let f = self.fields.iter().find(|f| f.0 == "X-Up-Len");
        f.map_or(0, |f| f.1.parse().unwrap_or(0))
    }
}

/// Every case of the differential: content types, sizes, statuses, methods, request fields.
fn cases() -> Vec<Case> {
    let mut all = Vec::new();
    for ty in [
        "text/html",
        "text/html; charset=utf-8",
        "text/html;charset=\"utf-8\"",
        "application/json",
        "Application/JSON",
        "application/json; v=1",
        "text/css",
        "text/plain",
        "image/png",
        "",
        "application/grpc",
    ] {
        all.push(case(ty, 5000, &[]));
    }
    for len in [0, 50, 99, 100, 101, 200_000] {
        all.push(case("text/html", len, &[]));
        all.push(case("text/html", len, &[("X-Up-Chunked", "1")]));
    }
    for status in ["201", "204", "206", "304", "403", "404", "500"] {
        all.push(case("text/html", 5000, &[("X-Up-Status", status)]));
    }
    all.push(case("text/html", 5000, &[]).method("HEAD"));
    all.push(case("text/html", 50, &[]).method("HEAD"));
    all.push(case("text/html", 5000, &[("Content-Length", "0")]).method("POST"));
    for ae in [
        "-",
        "gzip",
        "GZIP",
        "gzip;q=0",
        "gzip;q=0.5",
        "gzip; q=1.001",
        "deflate",
        "x-gzip",
        "*",
        "br, gzip",
        "deflate,gzip",
        "identity",
    ] {
        all.push(case("text/html", 5000, &[("Accept-Encoding", ae)]));
    }
    for ua in [
        "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)",
        "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)",
        "Mozilla/5.0 BadBot/1.0",
        "curl/8.0",
    ] {
        all.push(case("text/html", 5000, &[("User-Agent", ua)]));
    }
    all.extend(proxied_cases());
    for h in [
        "Content-Encoding: br",
        "Content-Encoding: identity",
        "ETag: \"v1\"",
        "ETag: W/\"v1\"",
        "ETag: v1",
        "Accept-Ranges: bytes",
        "Last-Modified: Thu, 01 Jan 2015 00:00:00 GMT",
        "Vary: Cookie",
        "Vary: Accept-Encoding",
    ] {
        all.push(case("text/html", 5000, &[("X-Up-Header", h)]));
    }
    all.push(case("text/html", 5000, &[]).http10());
    all.push(case("text/html", 5000, &[]).http10().at("/h10"));
    all.push(case("text/html", 5000, &[]).at("/off"));
    all.push(case("image/png", 5000, &[("Via", "1.1 lb")]).at("/any"));
    all.push(case("", 5000, &[]).at("/any"));
    all.push(case("", 0, &[]).at("/own"));
    all.push(case("", 0, &[("Accept-Encoding", "deflate")]).at("/own"));
    all.push(case("", 0, &[]).at("/deny"));
    all
}

/// `gzip_proxied expired no-cache auth` against `Via` and the upstream's caching fields.
fn proxied_cases() -> Vec<Case> {
    let via = ("Via", "1.1 lb");
    let past = "Expires: Thu, 01 Jan 1970 00:00:00 GMT";
    let future = "Expires: Thu, 01 Jan 2099 00:00:00 GMT";
    vec![
        case("text/html", 5000, &[via]),
        case("text/html", 5000, &[via, ("Authorization", "Basic eDp5")]),
        case("text/html", 5000, &[via, ("X-Up-Header", past)]),
        case("text/html", 5000, &[via, ("X-Up-Header", future)]),
        case("text/html", 5000, &[via, ("X-Up-Header", "Expires: soon")]),
        case(
            "text/html",
            5000,
            &[via, ("X-Up-Header", "Cache-Control: max-age=0, no-cache")],
        ),
        case(
            "text/html",
            5000,
            &[via, ("X-Up-Header", "Cache-Control: private")],
        ),
        case(
            "text/html",
            5000,
            &[via, ("X-Up-Header", "Cache-Control: public")],
        ),
        case("text/html", 5000, &[via, ("X-Up-Header", "ETag: \"v1\"")]),
    ]
}

/// What is compared of an answer: status, `Content-Encoding`, `Vary`, framing, `ETag`,
/// `Accept-Ranges`; and whether its body, decoded, is the upstream's.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    status: u16,
    encoding: Option<String>,
    vary: Vec<String>,
    length: Option<String>,
    chunked: bool,
    etag: Option<String>,
    accept_ranges: Option<String>,
}

fn seen(r: &Reply) -> Seen {
    let all = |name: &str| -> Vec<String> {
        r.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect()
    };
    // (nginx writes its Vary before the upstream's fields, sluice after them: the set counts.)
    let mut vary = all("vary");
    vary.sort();
    Seen {
        status: r.status,
        encoding: r.header("content-encoding").map(str::to_string),
        vary,
        length: r.header("content-length").map(str::to_string),
        chunked: r
            .header("transfer-encoding")
            .is_some_and(|v| v.contains("chunked")),
        etag: r.header("etag").map(str::to_string),
        accept_ranges: r.header("accept-ranges").map(str::to_string),
    }
}

/// The body decoded as its `Content-Encoding` says.
pub fn decoded(r: &Reply) -> Vec<u8> {
    let mut out = Vec::new();
    match r.header("content-encoding") {
        // (A HEAD's answer, or a 204's: no body to decode.)
        _ if r.body.is_empty() => {}
        Some("gzip") => {
            flate2::read::GzDecoder::new(&r.body[..])
                .read_to_end(&mut out)
                .unwrap_or_else(|e| panic!("{}: not gzip: {e}", r.path));
        }
        Some("zstd") => out = zstd::decode_all(&r.body[..]).expect("zstd"),
        Some("br") => {
            brotli::Decompressor::new(&r.body[..], 4096)
                .read_to_end(&mut out)
                .expect("brotli");
        }
        _ => out = r.body.clone(),
    }
    out
}

/// Every case, to nginx and to sluice: the same decision, fields and framing, and bodies that
/// decode to the upstream's bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_gzip_decisions_fields_and_framing() {
    let up = upstream::start();
    let nginx = Nginx::start(&nginx_conf(up.addr));
    let sluice = Sluice::start(&sluice_conf(up.addr));
    let mut wrong = Vec::new();
    for (i, c) in cases().into_iter().enumerate() {
        let n = exchange(nginx.addr(), client(2), &c.raw(nginx.addr())).await;
        let s = exchange(sluice.addr(), client(2), &c.raw(sluice.addr())).await;
        let (sn, ss) = (seen(&n), seen(&s));
        if sn != ss {
            wrong.push(format!("#{i} {c:?}\n  nginx:  {sn:?}\n  sluice: {ss:?}"));
            continue;
        }
        let bodyless = c.method == "HEAD" || [204, 304].contains(&n.status);
        // (An upstream's own `Content-Encoding` is passed, its body as it is.)
        let passed = c.fields.iter().any(|f| f.1.starts_with("Content-Encoding"));
        let want = match () {
            _ if c.path == "/own" => own_body().into_bytes(),
            _ if bodyless => Vec::new(),
            _ => upstream::body(c.len()),
        };
        for (who, r) in [("nginx", &n), ("sluice", &s)] {
            let body = if passed { r.body.clone() } else { decoded(r) };
            // (Each its own error page: that it decodes is what counts.)
            if body != want && c.path != "/deny" {
                wrong.push(format!(
                    "#{i} {c:?}: {who}'s body does not decode to the upstream's"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} cases differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
