//! HTTP/3 on every worker: one worker reads a `quic` listener's socket, and each connection is
//! served by the least busy worker (ties in turn), as TCP connections spread over workers.

use super::{ADDR, h3, leaf_for, server, status};
use crate::support::{Sluice, TestCa, client};
use std::collections::BTreeSet;

/// The `PID#TID` of an error-log line (nginx's: the worker that wrote it).
fn writer(line: &str) -> Option<&str> {
    line.split("] ").nth(1)?.split(':').next()
}

/// Four clients, each over its own QUIC connection, each refused its second request: the
/// refusals' log lines come from both workers, and each connection's from one.
#[tokio::test]
async fn connections_are_served_by_every_worker() {
    let ca = TestCa::new();
    let leaf = leaf_for(&ca);
    let zone = "[zones.one]\nsize = \"1m\"\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n";
    let body = "[[servers.locations]]\npath = \"/\"\n\
                limit_req = { zone = \"one\" }\nlimit_req_status = 429\n\
                return = { status = 200, body = \"ok\" }\n";
    let toml = format!(
        "error_log = \"stderr info\"\n{zone}{}",
        server("h3.test", &leaf, "", body)
    );
    let s = Sluice::builder(&toml)
        .relocate(ADDR)
        .env("SLUICE_WORKERS", "2")
        .start();
    let spec = serde_json::json!([{"path": "/1"}, {"path": "/2", "at": 0.2}]);
    for i in 2..6 {
        let got = h3(s.addr(), "h3.test", &ca, client(i), spec.clone()).await;
        let statuses: Vec<_> = got[..2].iter().map(status).collect();
        assert_eq!(statuses, [Some(200), Some(429)], "client {i}: {got:?}");
    }
    let log = s
        .wait_log(|l| l.contains("limiting requests") && l.contains("client: 127.0.0.5"))
        .await;
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("limiting requests"))
        .collect();
    assert_eq!(refusals.len(), 4, "{log}");
    let writers: BTreeSet<_> = refusals.iter().filter_map(|l| writer(l)).collect();
    assert_eq!(
        writers.len(),
        2,
        "both workers served connections: {refusals:?}"
    );
}
