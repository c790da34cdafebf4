//! HEAD over HTTP/3: the head a GET would get, Content-Length included, and no body (RFC 9110
//! §9.3.2), whoever made the answer: a `return`, a refusal, or the upstream.

use super::{h3, header, leaf_for, server, start, status};
use crate::support::{TestCa, Upstream, client};

#[tokio::test]
async fn a_head_request_gets_the_head_without_the_body() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let up = Upstream::start();
    let zone = "[zones.one]\nsize = \"1m\"\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n";
    let body = format!(
        "[[servers.locations]]\npath = \"/r\"\nreturn = {{ status = 200, body = \"hello\" }}\n\
         [[servers.locations]]\npath = \"/limited\"\nlimit_req = {{ zone = \"one\" }}\n\
         limit_req_status = 429\nreturn = {{ status = 200, body = \"ok\" }}\n\
         [[servers.locations]]\npath = \"/up\"\nproxy_pass = \"http://{}\"\n",
        up.addr
    );
    let s = start(&format!("{zone}{}", server("h3.test", &leaf, "", &body)));
    let spec = serde_json::json!([
        {"path": "/r"},
        {"method": "HEAD", "path": "/r"},
        {"method": "HEAD", "path": "/limited"},
        {"method": "HEAD", "path": "/limited", "at": 0.3},
        {"method": "HEAD", "path": "/up"},
    ]);
    let got = h3(s.addr(), "h3.test", &ca, client(2), spec).await;
    assert_eq!(got[0]["body"], "hello", "{got:?}");
    assert_eq!(
        (status(&got[1]), header(&got[1], "content-length")),
        (Some(200), Some("5")),
        "{got:?}"
    );
    assert_eq!(status(&got[2]), Some(200), "{got:?}");
    assert_eq!(status(&got[3]), Some(429), "{got:?}");
    assert_eq!(status(&got[4]), Some(200), "{got:?}");
    for g in &got[1..5] {
        assert_eq!(g["body"], "", "a HEAD answer has no body: {g}");
        assert_eq!(g["reset"], serde_json::Value::Null, "{g}");
    }
    assert!(
        header(&got[3], "content-length").is_some_and(|n| n != "0"),
        "the refusal's head says its page's length: {got:?}"
    );
}
