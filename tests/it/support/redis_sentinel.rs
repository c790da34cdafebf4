//! A real Redis Sentinel setup of the test's own: a master, its replica, and three sentinels
//! (`redis-server FILE --sentinel`, each with a generated configuration: quorum 2, small
//! `down-after-milliseconds` and `failover-timeout`), waited for until every sentinel knows the
//! replica and the other two sentinels. Every process is killed on Drop.

use std::time::Duration;

use super::redis_cluster::{Node, fields, wait_for};

/// The name the sentinels monitor the master as.
pub const MASTER_NAME: &str = "sluice-master";

/// How long the sentinels wait before they call a silent master down.
pub const DOWN_AFTER_MS: u64 = 1000;

/// A master, a replica and three sentinels.
pub struct RedisSentinels {
    /// The data nodes: `[0]` started as the master, `[1]` as its replica.
    pub servers: Vec<Node>,
    pub sentinels: Vec<Node>,
}

impl RedisSentinels {
    pub fn start() -> RedisSentinels {
        let master = Node::start("redis-master", 1, |_, _| vec![]);
        let port = master.port().to_string();
        let replica = Node::start("redis-replica", 1, |_, _| {
            vec!["--replicaof".into(), "127.0.0.1".into(), port.clone()]
        });
        let sentinels = (0..3)
            .map(|i| {
                Node::start(&format!("redis-sentinel-{i}"), 1, |ports, dir| {
                    let conf = sentinel_conf(ports[0].number(), master.port());
                    let path = dir.join("sentinel.conf");
                    std::fs::write(&path, conf).expect("write sentinel.conf");
                    // The file comes first; --sentinel after it.
                    vec![path.display().to_string(), "--sentinel".into()]
                })
            })
            .collect();
        let s = RedisSentinels {
            servers: vec![master, replica],
            sentinels,
        };
        s.wait_ready(Duration::from_secs(30));
        s
    }

    /// `redis://127.0.0.1:PORT` of each sentinel.
    pub fn urls(&self) -> Vec<String> {
        self.sentinels.iter().map(Node::url).collect()
    }

    /// Waits until every sentinel names a master that has a replica in sync, knows that replica
    /// and the two other sentinels.
    pub fn wait_ready(&self, limit: Duration) {
        wait_for(
            "the sentinels know the master, its replica and each other",
            limit,
            || {
                let ready = self.sentinels.iter().filter(|s| s.running()).all(|s| {
                    let m = self.master_state(s);
                    m.get("num-slaves").map(String::as_str) == Some("1")
                        && m.get("num-other-sentinels").map(String::as_str) == Some("2")
                        && m.get("flags").map(String::as_str) == Some("master")
                });
                let master = self.master();
                let synced = self.servers[master]
                    .info("replication")
                    .get("slave0")
                    .is_some_and(|s| s.contains("state=online"));
                (ready && synced).then_some(())
            },
        );
    }

    /// `SENTINEL MASTER name` as a map.
    fn master_state(&self, s: &Node) -> std::collections::BTreeMap<String, String> {
        let v: Vec<String> = s.query(&["SENTINEL", "MASTER", MASTER_NAME]);
        v.chunks(2)
            .map(|kv| (kv[0].clone(), kv.get(1).cloned().unwrap_or_default()))
            .collect()
    }

    /// The index in `servers` of the master the first running sentinel names.
    pub fn master(&self) -> usize {
        let s = self
            .sentinels
            .iter()
            .find(|s| s.running())
            .expect("a sentinel runs");
        let (_, port): (String, u16) =
            s.query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME]);
        self.servers
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("the sentinels name port {port}, not one of ours"))
    }

    /// `ROLE` of server `i`, as `INFO replication` says it.
    pub fn role(&self, i: usize) -> String {
        fields(&self.servers[i].query::<String>(&["INFO", "replication"]))
            .get("role")
            .cloned()
            .unwrap_or_default()
    }

    pub fn logs(&self) -> String {
        self.servers
            .iter()
            .chain(&self.sentinels)
            .map(|n| format!("--- {} ---\n{}", n.port(), n.log()))
            .collect()
    }
}

fn sentinel_conf(port: u16, master: u16) -> String {
    format!(
        "port {port}\n\
         bind 127.0.0.1\n\
         sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
         sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
         sentinel failover-timeout {MASTER_NAME} 5000\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n"
    )
}
