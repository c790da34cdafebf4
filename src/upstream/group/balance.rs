//! The balancers of an upstream group, as a pure core: nginx 1.22's
//! choices (`ngx_http_upstream_round_robin.c`, `…_least_conn_module.c`,
//! `…_hash_module.c`) on plain data, with `now` (milliseconds) passed in,
//! so that every sequence can be tested without a socket or a clock.
//!
//! The shapes follow nginx's so that the choices are the same, request for
//! request: a [`Balancer`] is the group as configured (nginx's `peers`:
//! primary servers, then the backup ones), its [`State`] is what requests
//! change (current and effective weights, failures, active requests), and
//! an [`Attempt`] is one request's walk over the servers (nginx's
//! per-request `rrp`/`hp`: the servers already tried, the tries left, the
//! hash and its rehash count). `get` picks a server or answers `None`
//! (nginx's `NGX_BUSY`: no live upstreams); `free` reports how it went.
//!
//! One difference: nginx's clock here is in whole seconds (`ngx_time()`),
//! ours in milliseconds, so `fail_timeout = "1s"` is one second after the
//! last check, where nginx's comparison of whole seconds gives 1 to 2.

use super::crc32::{Crc, crc32};

/// nginx: a request walks at most 20 hash values before falling back to
/// round robin.
const HASH_TRIES: u32 = 20;
/// `hash … consistent`: points on the circle per unit of weight (ketama's
/// 160, as nginx).
pub const POINTS_PER_WEIGHT: i64 = 160;

/// How a group chooses (nginx's `least_conn`, `hash KEY [consistent]`, or
/// round robin when neither is written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    RoundRobin,
    LeastConn,
    Hash,
    Consistent,
}

/// One server address as configured (a host name's addresses are one
/// each, as nginx's peers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerConf {
    pub weight: i64,
    /// 0: failures never make it unavailable.
    pub max_fails: u32,
    /// Milliseconds.
    pub fail_timeout: u64,
    pub down: bool,
    /// Which written server it comes from, by the first entry with the same
    /// text: what the points of `hash … consistent` name (nginx compares
    /// the `server` text).
    pub server: usize,
}

/// What requests change about one server (nginx's `ngx_http_upstream_rr_peer_t`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerState {
    pub current_weight: i64,
    pub effective_weight: i64,
    pub fails: u32,
    /// When it last failed.
    pub accessed: u64,
    /// When it was last failed or chosen in a new `fail_timeout` window.
    pub checked: u64,
    /// Requests it is serving now (least_conn's measure).
    pub conns: u32,
    /// Requests sent to it, and those that failed (for the metrics).
    pub requests: u64,
    pub failures: u64,
}

/// Which server: a primary one or a backup one, by its index in its tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerId {
    pub backup: bool,
    pub index: usize,
}

/// The state of every server of a group: what the group's lock guards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    pub primary: Vec<PeerState>,
    pub backup: Vec<PeerState>,
}

impl State {
    fn tier(&mut self, backup: bool) -> &mut Vec<PeerState> {
        if backup {
            &mut self.backup
        } else {
            &mut self.primary
        }
    }

    pub fn peer(&self, p: PeerId) -> &PeerState {
        if p.backup {
            &self.backup[p.index]
        } else {
            &self.primary[p.index]
        }
    }

    fn peer_mut(&mut self, p: PeerId) -> &mut PeerState {
        &mut self.tier(p.backup)[p.index]
    }
}

/// How a server did (nginx's `NGX_PEER_FAILED`, `NGX_PEER_NEXT` for a 403
/// or 404 passed over, or neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Passed over for its 403/404: not a failure.
    Next,
    Failed,
}

/// One request's walk over the servers.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// It has moved on to the backup servers.
    backup: bool,
    /// Servers of the current tier already tried.
    tried: Vec<bool>,
    /// Tries left (nginx's `pc->tries`).
    pub tries: usize,
    /// The hash key, empty without one.
    key: Vec<u8>,
    hash_tries: u32,
    rehash: u32,
    /// The running hash (`hash`), or the point index (`consistent`).
    hash: u32,
}

/// A group as configured: its servers and how it chooses.
#[derive(Clone, Debug)]
pub struct Balancer {
    pub method: Method,
    pub primary: Vec<PeerConf>,
    pub backup: Vec<PeerConf>,
    /// One primary server and no backup: never marked failed (nginx's
    /// `peers->single`).
    single: bool,
    primary_weight: i64,
    /// Non-down servers of each tier: the tries a request has.
    tries: (usize, usize),
    /// `consistent`: the circle, sorted, one point per hash value, each
    /// naming its written server.
    points: Vec<(u32, usize)>,
}

fn available(c: &PeerConf, s: &PeerState, now: u64) -> bool {
    let failed = c.max_fails > 0
        && s.fails >= c.max_fails
        && now.saturating_sub(s.checked) <= c.fail_timeout;
    !c.down && !failed
}

/// A chosen server starts a new `fail_timeout` window when the last one
/// is over.
fn touch(c: &PeerConf, s: &mut PeerState, now: u64) {
    if now.saturating_sub(s.checked) > c.fail_timeout {
        s.checked = now;
    }
}

impl Balancer {
    /// `names` is each primary server's written name (`host:port`), for
    /// the circle of `consistent`.
    pub fn new(
        method: Method,
        primary: Vec<PeerConf>,
        backup: Vec<PeerConf>,
        names: &[&str],
    ) -> Balancer {
        let non_down = |t: &[PeerConf]| t.iter().filter(|p| !p.down).count();
        let points = if method == Method::Consistent {
            circle(&primary, names)
        } else {
            Vec::new()
        };
        Balancer {
            method,
            single: primary.len() == 1 && backup.is_empty(),
            primary_weight: primary.iter().map(|p| p.weight).sum(),
            tries: (non_down(&primary), non_down(&backup)),
            points,
            primary,
            backup,
        }
    }

    /// The state of a group nobody used yet.
    pub fn fresh_state(&self) -> State {
        let fresh = |t: &[PeerConf]| {
            t.iter()
                .map(|c| PeerState {
                    effective_weight: c.weight,
                    ..PeerState::default()
                })
                .collect()
        };
        State {
            primary: fresh(&self.primary),
            backup: fresh(&self.backup),
        }
    }

    pub fn conf(&self, p: PeerId) -> &PeerConf {
        if p.backup {
            &self.backup[p.index]
        } else {
            &self.primary[p.index]
        }
    }

    fn tier(&self, backup: bool) -> &[PeerConf] {
        if backup { &self.backup } else { &self.primary }
    }

    /// A request's walk: `key` is the evaluated hash key (ignored by the
    /// other methods), `max_tries` is `proxy_next_upstream_tries` (0: no
    /// limit).
    pub fn start(&self, key: Vec<u8>, max_tries: usize) -> Attempt {
        let mut tries = self.tries.0 + self.tries.1;
        if max_tries > 0 {
            tries = tries.min(max_tries);
        }
        let hash = if self.method == Method::Consistent && !self.points.is_empty() {
            let h = crc32(&key);
            self.points.partition_point(|&(p, _)| p < h) as u32
        } else {
            0
        };
        Attempt {
            backup: false,
            tried: vec![false; self.primary.len().max(self.backup.len())],
            tries,
            key,
            hash_tries: 0,
            rehash: 0,
            hash,
        }
    }

    /// The next server for `a`, counted as serving one more request;
    /// `None` when none is live.
    pub fn get(&self, st: &mut State, a: &mut Attempt, now: u64) -> Option<PeerId> {
        let found = match self.method {
            Method::RoundRobin => self.get_rr(st, a, now),
            Method::LeastConn => self.get_least_conn(st, a, now),
            Method::Hash => self.get_hash(st, a, now),
            Method::Consistent => self.get_consistent(st, a, now),
        }?;
        let s = st.peer_mut(found);
        s.conns += 1;
        s.requests += 1;
        Some(found)
    }

    /// After a tier has nothing left: the backup servers, if this was the
    /// primary tier and there are some (the walk starts over there).
    fn to_backup(&self, a: &mut Attempt) -> bool {
        if a.backup || self.backup.is_empty() {
            return false;
        }
        a.backup = true;
        a.tried.iter_mut().for_each(|t| *t = false);
        true
    }

    /// nginx's `ngx_http_upstream_get_round_robin_peer`.
    fn get_rr(&self, st: &mut State, a: &mut Attempt, now: u64) -> Option<PeerId> {
        let found = if self.single && !a.backup {
            // A single server is never judged by its failures.
            (!self.primary[0].down).then_some(0)
        } else {
            self.smooth(st, a, now)
        };
        match found {
            Some(index) => Some(PeerId {
                backup: a.backup,
                index,
            }),
            None if self.to_backup(a) => self.get_rr(st, a, now),
            None => None,
        }
    }

    /// Smooth weighted round robin over the live, untried servers of the
    /// current tier (nginx's `ngx_http_upstream_get_peer`): each gains its
    /// effective weight, the highest (the first of equals) is chosen and
    /// loses the total; an effective weight lowered by failures grows back
    /// by one each time it is counted.
    fn smooth(&self, st: &mut State, a: &mut Attempt, now: u64) -> Option<usize> {
        let conf = self.tier(a.backup);
        let state = st.tier(a.backup);
        let mut best: Option<(usize, i64)> = None;
        let mut total = 0;
        for (i, (c, s)) in conf.iter().zip(state.iter_mut()).enumerate() {
            if a.tried[i] || !available(c, s, now) {
                continue;
            }
            s.current_weight += s.effective_weight;
            total += s.effective_weight;
            if s.effective_weight < c.weight {
                s.effective_weight += 1;
            }
            if best.is_none_or(|(_, w)| s.current_weight > w) {
                best = Some((i, s.current_weight));
            }
        }
        let (best, _) = best?;
        state[best].current_weight -= total;
        touch(&conf[best], &mut state[best], now);
        a.tried[best] = true;
        Some(best)
    }

    /// nginx's `ngx_http_upstream_get_least_conn_peer`.
    fn get_least_conn(&self, st: &mut State, a: &mut Attempt, now: u64) -> Option<PeerId> {
        if self.single && !a.backup {
            return self.get_rr(st, a, now);
        }
        match self.least_conn(st, a, now) {
            Some(index) => Some(PeerId {
                backup: a.backup,
                index,
            }),
            None if self.to_backup(a) => self.get_least_conn(st, a, now),
            None => None,
        }
    }

    /// The fewest active requests per unit of weight; among equals, smooth
    /// round robin from the first of them on.
    fn least_conn(&self, st: &mut State, a: &mut Attempt, now: u64) -> Option<usize> {
        let conf = self.tier(a.backup);
        let state = st.tier(a.backup);
        let live = |i: usize, s: &PeerState| !a.tried[i] && available(&conf[i], s, now);
        let load = |i: usize, s: &[PeerState]| (i64::from(s[i].conns), conf[i].weight);
        let mut best: Option<usize> = None;
        let mut many = false;
        for i in 0..conf.len() {
            if !live(i, &state[i]) {
                continue;
            }
            let Some(b) = best else {
                best = Some(i);
                continue;
            };
            let ((pc, pw), (bc, bw)) = (load(i, state), load(b, state));
            if pc * bw < bc * pw {
                best = Some(i);
                many = false;
            } else if pc * bw == bc * pw {
                many = true;
            }
        }
        let mut best = best?;
        let mut total = 0;
        if many {
            let first = best;
            for i in first..conf.len() {
                let ((pc, pw), (fc, fw)) = (load(i, state), load(first, state));
                if !live(i, &state[i]) || pc * fw != fc * pw {
                    continue;
                }
                let s = &mut state[i];
                s.current_weight += s.effective_weight;
                total += s.effective_weight;
                if s.effective_weight < conf[i].weight {
                    s.effective_weight += 1;
                }
                if state[i].current_weight > state[best].current_weight {
                    best = i;
                }
            }
        }
        state[best].current_weight -= total;
        touch(&conf[best], &mut state[best], now);
        a.tried[best] = true;
        Some(best)
    }

    /// nginx's `ngx_http_upstream_get_hash_peer`: Cache::Memcached's
    /// `((crc32([REHASH] KEY) >> 16) & 0x7fff) + PREVIOUS`, taken modulo the
    /// total weight (down servers included) and walked by weight; a server
    /// tried, down or failed makes it hash again, 20 times at most, then
    /// round robin.
    fn get_hash(&self, st: &mut State, a: &mut Attempt, now: u64) -> Option<PeerId> {
        if a.hash_tries > HASH_TRIES || self.single || a.key.is_empty() || self.primary.is_empty() {
            return self.get_rr(st, a, now);
        }
        let index = loop {
            let mut crc = Crc::new();
            if a.rehash > 0 {
                crc = crc.update(a.rehash.to_string().as_bytes());
            }
            let h = (crc.update(&a.key).finish() >> 16) & 0x7fff;
            a.hash = a.hash.wrapping_add(h);
            a.rehash += 1;
            let mut w = i64::from(a.hash) % self.primary_weight.max(1);
            let mut p = 0;
            while p + 1 < self.primary.len() && w >= self.primary[p].weight {
                w -= self.primary[p].weight;
                p += 1;
            }
            if !a.tried[p] && available(&self.primary[p], &st.primary[p], now) {
                break p;
            }
            a.hash_tries += 1;
            if a.hash_tries > HASH_TRIES {
                return self.get_rr(st, a, now);
            }
        };
        touch(&self.primary[index], &mut st.primary[index], now);
        a.tried[index] = true;
        Some(PeerId {
            backup: false,
            index,
        })
    }

    /// nginx's `ngx_http_upstream_get_chash_peer`: the server of the first
    /// point at or after the key's CRC-32 (smooth round robin among its
    /// live addresses); none: the next point, 20 times at most, then round
    /// robin.
    fn get_consistent(&self, st: &mut State, a: &mut Attempt, now: u64) -> Option<PeerId> {
        if a.hash_tries > HASH_TRIES || self.single || a.key.is_empty() || self.points.is_empty() {
            return self.get_rr(st, a, now);
        }
        let index = loop {
            let server = self.points[a.hash as usize % self.points.len()].1;
            let mut best: Option<(usize, i64)> = None;
            let mut total = 0;
            for (i, (c, s)) in self.primary.iter().zip(st.primary.iter_mut()).enumerate() {
                if a.tried[i] || !available(c, s, now) || c.server != server {
                    continue;
                }
                s.current_weight += s.effective_weight;
                total += s.effective_weight;
                if s.effective_weight < c.weight {
                    s.effective_weight += 1;
                }
                if best.is_none_or(|(_, w)| s.current_weight > w) {
                    best = Some((i, s.current_weight));
                }
            }
            if let Some((b, _)) = best {
                st.primary[b].current_weight -= total;
                break b;
            }
            a.hash = a.hash.wrapping_add(1);
            a.hash_tries += 1;
            if a.hash_tries > HASH_TRIES {
                return self.get_rr(st, a, now);
            }
        };
        touch(&self.primary[index], &mut st.primary[index], now);
        a.tried[index] = true;
        Some(PeerId {
            backup: false,
            index,
        })
    }

    /// How the request to `p` went (nginx's
    /// `ngx_http_upstream_free_round_robin_peer`): a failure counts, lowers
    /// the effective weight by `weight / max_fails` and, at `max_fails`,
    /// makes the server unavailable for `fail_timeout` (the answer is
    /// `true` then: nginx's "upstream server temporarily disabled"); a
    /// success after a new check forgets the failures. Uses a try. The
    /// request still counts as active until [`Balancer::release`].
    pub fn free(
        &self,
        st: &mut State,
        a: &mut Attempt,
        p: PeerId,
        outcome: Outcome,
        now: u64,
    ) -> bool {
        if self.single && !p.backup {
            // Counted for the metrics only: a single server is never
            // judged by its failures.
            if outcome == Outcome::Failed {
                st.peer_mut(p).failures += 1;
            }
            a.tries = 0;
            return false;
        }
        let c = self.conf(p);
        let s = st.peer_mut(p);
        let mut disabled = false;
        if outcome == Outcome::Failed {
            s.fails += 1;
            s.failures += 1;
            s.accessed = now;
            s.checked = now;
            if c.max_fails > 0 {
                s.effective_weight -= c.weight / i64::from(c.max_fails);
                disabled = s.fails >= c.max_fails;
            }
            s.effective_weight = s.effective_weight.max(0);
        } else if s.accessed < s.checked {
            s.fails = 0;
        }
        a.tries = a.tries.saturating_sub(1);
        disabled
    }

    /// The request to `p` is over: one fewer active.
    pub fn release(&self, st: &mut State, p: PeerId) {
        let s = st.peer_mut(p);
        s.conns = s.conns.saturating_sub(1);
    }

    /// What the metrics call a server now: `down` (configured so),
    /// `unavailable` (failed `max_fails` times, within `fail_timeout`),
    /// `backup`, or `up`.
    pub fn condition(&self, st: &State, p: PeerId, now: u64) -> &'static str {
        let c = self.conf(p);
        if c.down {
            "down"
        } else if !available(c, st.peer(p), now) {
            "unavailable"
        } else if p.backup {
            "backup"
        } else {
            "up"
        }
    }
}

/// The points of `hash … consistent` (nginx's `ngx_http_upstream_init_chash`):
/// for each server, `weight × 160` CRC-32s of its host, a NUL, its port and
/// the previous point (little-endian), Cache::Memcached::Fast's ketama.
fn circle(primary: &[PeerConf], names: &[&str]) -> Vec<(u32, usize)> {
    let mut points = Vec::new();
    for p in primary {
        let name = names.get(p.server).copied().unwrap_or("");
        let (host, port) = split_port(name);
        let base = Crc::new()
            .update(host.as_bytes())
            .update(&[0])
            .update(port.as_bytes());
        let mut prev = 0u32;
        for _ in 0..p.weight * POINTS_PER_WEIGHT {
            let h = base.update(&prev.to_le_bytes()).finish();
            points.push((h, p.server));
            prev = h;
        }
    }
    // Stable: of equal hashes, the first server's point stays.
    points.sort_by_key(|&(h, _)| h);
    points.dedup_by_key(|&mut (h, _)| h);
    points
}

/// `host:port` → (`host`, `port`), where the port is the digits after the
/// last colon; no such digits: all host (nginx's split, `[::1]:80` too).
fn split_port(name: &str) -> (&str, &str) {
    if name
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("unix:"))
    {
        return (&name[5..], "");
    }
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    let colon = name.len() - digits;
    if colon > 0 && name.as_bytes()[colon - 1] == b':' {
        (&name[..colon - 1], &name[colon..])
    } else {
        (name, "")
    }
}
