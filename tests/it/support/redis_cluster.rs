//! A real Redis Cluster of the test's own: 3 masters and 3 replicas, each a `redis-server` with
//! `cluster-enabled yes` on reserved ports (the client port and the cluster bus port, both
//! reserved: `cluster-port` names the bus port, so no `port + 10000` guess), joined by
//! `redis-cli --cluster create … --cluster-replicas 1`, and waited for until every node says
//! `cluster_state:ok` and every replica is in sync. Every process is killed on Drop (and when
//! the test binary dies, by the spawner).
//!
//! `cluster-node-timeout` is small (1000 ms) so that a killed master's replica is promoted within
//! a few seconds.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::ports::Port;
use super::spawn::{Process, StartError, Stop, read, with_ports};

/// How long a node waits before it calls a silent peer failed (`cluster-node-timeout`).
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// One `redis-server` started by a test with extra arguments: its process, directory and
/// reserved ports (the first one is the client port).
pub struct Node {
    // Field order is drop order: stop the process before deleting its directory.
    process: Option<Process>,
    dir: TempDir,
    ports: Vec<Port>,
}

impl Node {
    /// `redis-server` without persistence, `args(ports, dir)` first (they may name a file they
    /// write in the node's directory), listening on `ports[0]`; retried on new ports when one
    /// was taken. `ports` is how many to reserve.
    pub fn start(what: &str, ports: usize, args: impl Fn(&[Port], &Path) -> Vec<String>) -> Node {
        require("redis-server");
        let ((process, dir), ports) = with_ports(what, ports, |ports| {
            let dir = tempfile::Builder::new()
                .prefix("sluice-it-redis-")
                .tempdir()
                .expect("temporary directory for redis-server");
            let mut cmd = Command::new("redis-server");
            cmd.args(args(ports, dir.path()))
                .args(["--port", &ports[0].number().to_string()])
                .args(["--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir.path())
                .current_dir(dir.path());
            let process =
                Process::start(what, cmd, dir.path(), &[ports[0].number()], Stop::Kill, &[])?;
            Ok::<_, StartError>((process, dir))
        });
        Node {
            process: Some(process),
            dir,
            ports,
        }
    }

    pub fn port(&self) -> u16 {
        self.ports[0].number()
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port())
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// SIGKILL, as in a crash.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
    }

    pub fn running(&self) -> bool {
        self.process.is_some()
    }

    /// What the node wrote to stdout (redis-server's log).
    pub fn log(&self) -> String {
        self.process
            .as_ref()
            .map(|p| read(p.stdout_path()))
            .unwrap_or_default()
    }

    /// A connection of the test's own, answering within 2 s.
    pub fn client(&self) -> redis::Connection {
        let c = redis::Client::open(self.url())
            .expect("a redis url")
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("connect to redis-server on {}: {e}", self.port()));
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        c
    }

    /// `cmd args…` on this node (panics on an error: for the test's own checks).
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = self.client();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c)
            .unwrap_or_else(|e| panic!("{args:?} on {}: {e}", self.port()))
    }

    /// `INFO section` as `field → value`.
    pub fn info(&self, section: &str) -> BTreeMap<String, String> {
        let text: String = self.query(&["INFO", section]);
        fields(&text)
    }
}

/// `a:b` lines as a map (INFO, CLUSTER INFO).
pub fn fields(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Panics unless `name` is on PATH: the Redis tests fail, never skip, without Redis.
pub fn require(name: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{name} is not installed (the Redis tests start their own): \
         run scripts/test.sh, or apt-get install redis-server"
    );
}

/// Polls `f` every 50 ms until it answers, or panics with `what` after `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Redis Cluster: 3 masters, 3 replicas.
pub struct RedisCluster {
    pub nodes: Vec<Node>,
}

impl RedisCluster {
    /// Starts the six nodes, creates the cluster and waits until it is ok everywhere.
    pub fn start() -> RedisCluster {
        require("redis-cli");
        let nodes: Vec<Node> = (0..6)
            .map(|i| {
                Node::start(&format!("redis-cluster-node-{i}"), 2, |ports, _| {
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        &NODE_TIMEOUT_MS.to_string(),
                        "--cluster-port",
                        &ports[1].number().to_string(),
                        // a replica may be promoted however stale it is: the test kills masters
                        "--cluster-replica-validity-factor",
                        "0",
                    ]
                    .map(String::from)
                    .to_vec()
                })
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.port()));
        }
        create.args(["--cluster-replicas", "1", "--cluster-yes"]);
        let out = create.output().expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster { nodes };
        cluster.wait_ok(Duration::from_secs(30));
        cluster
    }

    /// The seed URLs: every node.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// Waits until every running node says `cluster_state:ok` and knows 3 masters with every
    /// slot, and every master has a replica in sync.
    pub fn wait_ok(&self, limit: Duration) {
        wait_for("the cluster is ok on every node", limit, || {
            let ok = self.nodes.iter().filter(|n| n.running()).all(|n| {
                let info = fields(&n.query::<String>(&["CLUSTER", "INFO"]));
                info.get("cluster_state").map(String::as_str) == Some("ok")
                    && info.get("cluster_slots_ok").map(String::as_str) == Some("16384")
            });
            (ok && self.masters().len() == 3 && self.replicas_in_sync()).then_some(())
        });
    }

    /// Every running master has a replica whose link is up.
    fn replicas_in_sync(&self) -> bool {
        self.masters().iter().all(|&i| {
            let info = self.nodes[i].info("replication");
            info.get("connected_slaves").map(String::as_str) == Some("1")
                && info
                    .get("slave0")
                    .is_some_and(|s| s.contains("state=online"))
        })
    }

    /// Indexes of the running nodes that are masters owning slots.
    pub fn masters(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i].running()
                    && self.nodes[i]
                        .info("replication")
                        .get("role")
                        .map(String::as_str)
                        == Some("master")
            })
            .collect()
    }

    /// The index of the node that owns `slot`, as a running node says.
    pub fn owner_of(&self, slot: u16) -> usize {
        self.slot_owners()[usize::from(slot)]
    }

    /// For every slot, the index of the node that owns it, as a running node says.
    pub fn slot_owners(&self) -> Vec<usize> {
        use redis::Value;
        let asker = self
            .nodes
            .iter()
            .find(|n| n.running())
            .expect("a node runs");
        let Value::Array(ranges) = asker.query::<Value>(&["CLUSTER", "SLOTS"]) else {
            panic!("CLUSTER SLOTS is not an array")
        };
        let mut owners = vec![usize::MAX; 16384];
        for r in ranges {
            let Value::Array(r) = r else { continue };
            let (Some(Value::Int(lo)), Some(Value::Int(hi)), Some(Value::Array(master))) =
                (r.first(), r.get(1), r.get(2))
            else {
                panic!("CLUSTER SLOTS entry {r:?}")
            };
            let Some(Value::Int(port)) = master.get(1) else {
                panic!("CLUSTER SLOTS master {master:?}")
            };
            let owner = self.index_of_port(*port as u16);
            for slot in *lo..=*hi {
                owners[slot as usize] = owner;
            }
        }
        owners
    }

    fn index_of_port(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// The replica of master `i` (by `INFO replication`).
    pub fn replica_of(&self, i: usize) -> usize {
        let info = self.nodes[i].info("replication");
        let slave = info.get("slave0").expect("the master has a replica");
        let port = slave
            .split(',')
            .find_map(|f| f.strip_prefix("port="))
            .and_then(|p| p.parse::<u16>().ok())
            .expect("slave0 has a port");
        self.index_of_port(port)
    }

    /// The nodes' logs, for a failure message.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("--- node {} ---\n{}", n.port(), n.log()))
            .collect()
    }
}
