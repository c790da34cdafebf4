//! The balancers on plain data: nginx's sequences, failures and their
//! windows, backups, the circle of `consistent`. (The same choices as
//! real nginx's, request for request, are tested side by side in
//! tests/it/proxy/upstreams.rs.)

use super::balance::{Attempt, Balancer, Method, Outcome, PeerConf, PeerId, State};

fn conf(weight: i64, max_fails: u32, fail_timeout: u64) -> PeerConf {
    PeerConf {
        weight,
        max_fails,
        fail_timeout,
        down: false,
        server: 0,
    }
}

/// Servers numbered as their entries (their own `server` index).
fn numbered(mut v: Vec<PeerConf>) -> Vec<PeerConf> {
    for (i, c) in v.iter_mut().enumerate() {
        c.server = i;
    }
    v
}

fn rr(weights: &[i64]) -> Balancer {
    let peers = numbered(weights.iter().map(|&w| conf(w, 1, 10_000)).collect());
    Balancer::new(Method::RoundRobin, peers, Vec::new(), &[])
}

/// One whole request at `now`: pick, then free with `outcome`, release.
fn one(b: &Balancer, st: &mut State, now: u64, outcome: Outcome) -> Option<PeerId> {
    let mut a = b.start(Vec::new(), 0);
    let p = b.get(st, &mut a, now)?;
    b.free(st, &mut a, p, outcome, now);
    b.release(st, p);
    Some(p)
}

fn letters(b: &Balancer, st: &mut State, n: usize) -> String {
    (0..n)
        .map(|_| match one(b, st, 0, Outcome::Ok) {
            Some(p) if p.backup => (b'A' + p.index as u8) as char,
            Some(p) => (b'a' + p.index as u8) as char,
            None => '-',
        })
        .collect()
}

/// nginx's smooth weighted round robin: weights 5, 1, 1 give
/// a a b a c a a, again and again.
#[test]
fn smooth_weighted_round_robin_is_nginx_sequence() {
    let b = rr(&[5, 1, 1]);
    let mut st = b.fresh_state();
    assert_eq!(letters(&b, &mut st, 14), "aabacaaaabacaa");
    let b = rr(&[1, 1, 1]);
    let mut st = b.fresh_state();
    assert_eq!(letters(&b, &mut st, 6), "abcabc");
    let b = rr(&[3, 2]);
    let mut st = b.fresh_state();
    assert_eq!(letters(&b, &mut st, 5), "ababa");
}

/// A failure lowers the effective weight by weight / max_fails, and each
/// choice after that gives one back.
#[test]
fn failures_lower_the_effective_weight_and_it_recovers() {
    let peers = numbered(vec![conf(4, 4, 10_000), conf(4, 4, 10_000)]);
    let b = Balancer::new(Method::RoundRobin, peers, Vec::new(), &[]);
    let mut st = b.fresh_state();
    assert_eq!(
        one(&b, &mut st, 0, Outcome::Failed).map(|p| p.index),
        Some(0)
    );
    assert_eq!(st.primary[0].effective_weight, 3);
    assert_eq!(st.primary[0].fails, 1);
    // Next round: a counts with 3 (and grows back to 4), b with 4: b, twice
    // (a at -1 + 4 = 3 against b's 0 + 4).
    assert_eq!(one(&b, &mut st, 0, Outcome::Ok).map(|p| p.index), Some(1));
    assert_eq!(st.primary[0].effective_weight, 4, "grew back by one");
    assert_eq!(one(&b, &mut st, 0, Outcome::Ok).map(|p| p.index), Some(1));
    assert_eq!(one(&b, &mut st, 0, Outcome::Ok).map(|p| p.index), Some(0));
    // Never below zero; weight 1 / max_fails 3 lowers nothing.
    let peers = numbered(vec![conf(1, 3, 10_000), conf(1, 3, 10_000)]);
    let b = Balancer::new(Method::RoundRobin, peers, Vec::new(), &[]);
    let mut st = b.fresh_state();
    one(&b, &mut st, 0, Outcome::Failed);
    assert_eq!(st.primary[0].effective_weight, 1);
    // Weight 6, max_fails 2: 3 a failure; after two, unavailable, then
    // each choice gives one back until it is 6 again.
    let peers = numbered(vec![conf(6, 2, 1000), conf(1, 2, 1000)]);
    let b = Balancer::new(Method::RoundRobin, peers, Vec::new(), &[]);
    let mut st = b.fresh_state();
    for _ in 0..2 {
        let mut a = b.start(Vec::new(), 0);
        let p = PeerId {
            backup: false,
            index: 0,
        };
        b.free(&mut st, &mut a, p, Outcome::Failed, 0);
    }
    assert_eq!(st.primary[0].effective_weight, 0);
    let seq: Vec<usize> = (0..8)
        .map(|_| one(&b, &mut st, 2000, Outcome::Ok).unwrap().index)
        .collect();
    // Weights seen by the choice: 0→1, 1→2, …: the light server wins the
    // first rounds.
    assert_eq!(seq, vec![1, 0, 1, 0, 0, 0, 0, 1]);
    assert_eq!(st.primary[0].effective_weight, 6);
}

/// max_fails failures within fail_timeout: unavailable until fail_timeout
/// after the last; then one request probes it; a success forgets the
/// failures, a failure makes it unavailable again.
#[test]
fn max_fails_and_fail_timeout_windows() {
    let peers = numbered(vec![conf(1, 2, 1000), conf(1, 2, 1000)]);
    let b = Balancer::new(Method::RoundRobin, peers, Vec::new(), &[]);
    let mut st = b.fresh_state();
    let a0 = PeerId {
        backup: false,
        index: 0,
    };
    let fail = |st: &mut State, now| {
        let mut a = b.start(Vec::new(), 0);
        b.free(st, &mut a, a0, Outcome::Failed, now)
    };
    assert!(!fail(&mut st, 0), "one failure of two");
    assert!(fail(&mut st, 100), "the second disables it");
    assert_eq!(b.condition(&st, a0, 100), "unavailable");
    for now in [100, 600, 1100] {
        assert_eq!(
            one(&b, &mut st, now, Outcome::Ok).unwrap().index,
            1,
            "at {now}"
        );
    }
    assert_eq!(b.condition(&st, a0, 1101), "up");
    // The probe: chosen at once (its weight waited), and it succeeds.
    let mut a = b.start(Vec::new(), 0);
    let p = b.get(&mut st, &mut a, 1101).unwrap();
    assert_eq!(p, a0);
    assert_eq!(st.primary[0].checked, 1101, "a new window");
    b.free(&mut st, &mut a, p, Outcome::Ok, 1101);
    b.release(&mut st, p);
    assert_eq!(st.primary[0].fails, 0, "checked after it failed: forgotten");

    // A success within the window of the failures forgets nothing.
    let mut st = b.fresh_state();
    fail(&mut st, 5000);
    let mut a = b.start(Vec::new(), 0);
    b.free(&mut st, &mut a, a0, Outcome::Ok, 5001);
    assert_eq!(st.primary[0].fails, 1);
    // A failed probe: unavailable for another fail_timeout.
    let mut st = b.fresh_state();
    fail(&mut st, 0);
    fail(&mut st, 0);
    let mut a = b.start(Vec::new(), 0);
    let p = b.get(&mut st, &mut a, 1500).unwrap();
    assert_eq!(p, a0);
    assert!(b.free(&mut st, &mut a, p, Outcome::Failed, 1500));
    assert_eq!(b.condition(&st, a0, 2500), "unavailable");
    assert_eq!(b.condition(&st, a0, 2501), "up");
}

/// max_fails = 0: failures never make a server unavailable; a 403/404
/// passed over is not a failure.
#[test]
fn max_fails_zero_and_next_are_not_failures() {
    let peers = numbered(vec![conf(1, 0, 1000), conf(1, 1, 1000)]);
    let b = Balancer::new(Method::RoundRobin, peers, Vec::new(), &[]);
    let mut st = b.fresh_state();
    for _ in 0..5 {
        let mut a = b.start(Vec::new(), 0);
        let p = PeerId {
            backup: false,
            index: 0,
        };
        assert!(!b.free(&mut st, &mut a, p, Outcome::Failed, 0));
        let p1 = PeerId {
            backup: false,
            index: 1,
        };
        assert!(!b.free(&mut st, &mut a, p1, Outcome::Next, 0));
    }
    assert_eq!(
        b.condition(
            &st,
            PeerId {
                backup: false,
                index: 0
            },
            0
        ),
        "up"
    );
    assert_eq!(
        b.condition(
            &st,
            PeerId {
                backup: false,
                index: 1
            },
            0
        ),
        "up"
    );
}

/// A single server is never marked down, whatever its failures; its one
/// failure ends the request's tries.
#[test]
fn a_single_server_is_never_marked_down() {
    let b = Balancer::new(Method::RoundRobin, vec![conf(1, 1, 1000)], Vec::new(), &[]);
    let mut st = b.fresh_state();
    for now in 0..5 {
        let mut a = b.start(Vec::new(), 0);
        assert_eq!(a.tries, 1);
        let p = b.get(&mut st, &mut a, now).unwrap();
        assert!(!b.free(&mut st, &mut a, p, Outcome::Failed, now));
        assert_eq!(a.tries, 0);
        b.release(&mut st, p);
    }
    assert_eq!(st.primary[0].fails, 0);
    assert_eq!(st.primary[0].failures, 5, "counted for the metrics");
    assert_eq!(
        b.condition(
            &st,
            PeerId {
                backup: false,
                index: 0
            },
            5
        ),
        "up"
    );
}

/// Backup servers serve only while every primary is down or failed; the
/// walk of one request goes on there once the primaries are tried.
#[test]
fn backups_only_when_all_primaries_are_out() {
    let primary = numbered(vec![conf(1, 1, 1000), conf(1, 1, 1000)]);
    let backup = vec![conf(1, 1, 1000), conf(1, 1, 1000)];
    let b = Balancer::new(Method::RoundRobin, primary, backup, &[]);
    let mut st = b.fresh_state();
    assert_eq!(letters(&b, &mut st, 4), "abab");
    // One request: a fails, b fails, then the backups.
    let mut a = b.start(Vec::new(), 0);
    assert_eq!(a.tries, 4);
    let mut seen = Vec::new();
    while let Some(p) = b.get(&mut st, &mut a, 10) {
        seen.push(p);
        b.free(&mut st, &mut a, p, Outcome::Failed, 10);
        b.release(&mut st, p);
        if a.tries == 0 {
            break;
        }
    }
    let ids: Vec<(bool, usize)> = seen.iter().map(|p| (p.backup, p.index)).collect();
    assert_eq!(ids, vec![(false, 0), (false, 1), (true, 0), (true, 1)]);
    // Everything failed: no live upstreams until fail_timeout passes.
    assert_eq!(letters(&b, &mut st, 1), "-");
    // The primaries are back first.
    let mut st2 = st.clone();
    assert_eq!(
        one(&b, &mut st2, 1011, Outcome::Ok).map(|p| p.backup),
        Some(false)
    );
    // down = true primaries: the backups, in round robin.
    let mut down = numbered(vec![conf(1, 1, 1000)]);
    down[0].down = true;
    let b = Balancer::new(
        Method::RoundRobin,
        down,
        vec![conf(2, 1, 1000), conf(1, 1, 1000)],
        &[],
    );
    let mut st = b.fresh_state();
    assert_eq!(letters(&b, &mut st, 6), "ABAABA");
    assert_eq!(b.start(Vec::new(), 0).tries, 2, "down servers give no try");
    assert_eq!(b.start(Vec::new(), 1).tries, 1, "proxy_next_upstream_tries");
}

/// least_conn: the fewest active requests per weight; ties by round robin.
#[test]
fn least_conn_fewest_active_then_round_robin() {
    let peers = numbered(vec![conf(1, 1, 1000), conf(1, 1, 1000), conf(2, 1, 1000)]);
    let b = Balancer::new(Method::LeastConn, peers, Vec::new(), &[]);
    let mut st = b.fresh_state();
    // Nothing active: a tie of all three, smooth round robin by weight.
    let mut held = Vec::new();
    let mut pick = |st: &mut State| {
        let mut a = b.start(Vec::new(), 0);
        let p = b.get(st, &mut a, 0).unwrap();
        held.push(p);
        p.index
    };
    assert_eq!(pick(&mut st), 2, "weight 2 first among equals");
    // Now c has 1 of 2: a and b (0 of 1) are less loaded.
    assert_eq!(pick(&mut st), 0);
    assert_eq!(pick(&mut st), 1);
    // a 1/1, b 1/1, c 1/2: c.
    assert_eq!(pick(&mut st), 2);
    // All at 1 per weight: round robin among them.
    let next = pick(&mut st);
    assert!(next < 3);
    // Released requests count no more.
    for p in held.drain(..) {
        b.release(&mut st, p);
    }
    assert!(st.primary.iter().all(|s| s.conns == 0));
    // Sequential requests: a plain round robin by weight.
    assert_eq!(letters(&b, &mut st, 4).len(), 4);
}

fn hash_group(method: Method, names: &[&str]) -> Balancer {
    let peers = numbered(names.iter().map(|_| conf(1, 1, 10_000)).collect());
    Balancer::new(method, peers, Vec::new(), names)
}

fn pick_key(b: &Balancer, st: &mut State, key: &str) -> Option<usize> {
    let mut a = b.start(key.as_bytes().to_vec(), 0);
    let p = b.get(st, &mut a, 0)?;
    b.free(st, &mut a, p, Outcome::Ok, 0);
    b.release(st, p);
    Some(p.index)
}

/// hash: the same key, the same server; a failed server makes the key
/// rehash to another, the same one each time.
#[test]
fn hash_is_stable_and_rehashes_around_failures() {
    let names = ["127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"];
    let b = hash_group(Method::Hash, &names);
    let mut st = b.fresh_state();
    let first: Vec<usize> = (0..50)
        .map(|i| pick_key(&b, &mut st, &format!("/k{i}")).unwrap())
        .collect();
    let again: Vec<usize> = (0..50)
        .map(|i| pick_key(&b, &mut st, &format!("/k{i}")).unwrap())
        .collect();
    assert_eq!(first, again);
    assert!(
        (0..3).all(|s| first.contains(&s)),
        "all servers used: {first:?}"
    );
    // crc32("/k0") etc.: the first hash is ((crc >> 16) & 0x7fff) % 3.
    let expected = |k: &str| ((super::crc32::crc32(k.as_bytes()) >> 16) & 0x7fff) as usize % 3;
    assert_eq!(first[7], expected("/k7"));
    // Server 0 fails: its keys move, the others stay.
    let mut a = b.start(Vec::new(), 0);
    b.free(
        &mut st,
        &mut a,
        PeerId {
            backup: false,
            index: 0,
        },
        Outcome::Failed,
        0,
    );
    for (i, &was) in first.iter().enumerate() {
        let now = pick_key(&b, &mut st, &format!("/k{i}")).unwrap();
        if was == 0 {
            assert_ne!(now, 0);
        } else {
            assert_eq!(now, was);
        }
    }
}

/// After 20 hash values that all land on unavailable servers: round robin.
#[test]
fn hash_falls_back_to_round_robin_after_20_tries() {
    let mut peers = numbered(vec![conf(1000, 1, 10_000), conf(1, 1, 10_000)]);
    peers[0].max_fails = 1;
    let b = Balancer::new(Method::Hash, peers, Vec::new(), &["a:1", "b:1"]);
    let mut st = b.fresh_state();
    let mut a = b.start(Vec::new(), 0);
    b.free(
        &mut st,
        &mut a,
        PeerId {
            backup: false,
            index: 0,
        },
        Outcome::Failed,
        0,
    );
    let mut a: Attempt = b.start(b"key".to_vec(), 0);
    let p = b.get(&mut st, &mut a, 1).unwrap();
    assert_eq!(p.index, 1, "round robin found the live one");
    assert!(format!("{a:?}").contains("hash_tries: 21"), "{a:?}");
    // An empty key: round robin at once.
    let mut a = b.start(Vec::new(), 0);
    assert_eq!(b.get(&mut st, &mut a, 1).map(|p| p.index), Some(1));
}

/// consistent: adding a fifth server moves about a fifth of the keys, all
/// to it; the rest stay where they were.
#[test]
fn consistent_hash_moves_only_the_new_servers_share() {
    let four = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"];
    let five = [
        "10.0.0.1:80",
        "10.0.0.2:80",
        "10.0.0.3:80",
        "10.0.0.4:80",
        "10.0.0.5:80",
    ];
    let (b4, b5) = (
        hash_group(Method::Consistent, &four),
        hash_group(Method::Consistent, &five),
    );
    let (mut s4, mut s5) = (b4.fresh_state(), b5.fresh_state());
    let n = 5000;
    let mut moved = 0;
    let mut counts = [0usize; 5];
    for i in 0..n {
        let key = format!("/item/{i}");
        let (x, y) = (
            pick_key(&b4, &mut s4, &key).unwrap(),
            pick_key(&b5, &mut s5, &key).unwrap(),
        );
        counts[y] += 1;
        if x != y {
            moved += 1;
            assert_eq!(y, 4, "a key moved, to the new server only");
        }
    }
    let share = moved as f64 / n as f64;
    assert!((0.12..0.28).contains(&share), "moved {share}");
    assert!(counts.iter().all(|&c| c > n / 10), "{counts:?}");
}

/// The circle's points are nginx's: the first point of a server is the
/// CRC-32 of its host, NUL, port and four zero bytes.
#[test]
fn consistent_points_are_ketama_of_the_written_name() {
    let b = hash_group(Method::Consistent, &["10.0.0.1:80"]);
    let dump = format!("{b:?}");
    let first = super::crc32::crc32(b"10.0.0.1\x0080\0\0\0\0");
    assert!(dump.contains(&format!("({first}, 0)")), "no point {first}");
}
