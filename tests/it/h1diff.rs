//! Differential: sluice's own HTTP/1.1 server loop (`src/server/h1`) against hyper's HTTP/1.1
//! server, the path it replaced, while both exist (`SLUICE_HTTP1_HYPER=1` selects hyper's).
//!
//! Two sluice processes with the same configuration, each in front of its own recording
//! upstream ([`Recorder`], which answers from its [`MENU`] as each request's `X-Answer` asks:
//! lengths, chunks with and without trailers, 204, 304, HTTP/1.0, the connection's end, repeated
//! fields). Generated requests (methods, versions, targets, `Connection`, `Expect:
//! 100-continue`, bodies by length and chunks, pipelining, limits, `return`, a body over
//! `client_max_body_size`), then the same requests mutated (bytes replaced, removed, lines
//! repeated, cut short), are sent to both the same way; for every case the test asserts the
//! same response bytes (the `date` field's value aside), the same close, and the same bytes at
//! the upstream (in both, a name's repeated fields grouped at its first on both sides: see
//! [`grouped`]).

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::raw::{Step, exchange};
use crate::support::recorder::{MENU, Recorder};
use crate::support::{Sluice, heavy};

const SLOTS: usize = 16;
/// Generated cases, and as many mutated ones.
const CASES: usize = 1500;
const IDLE: Duration = Duration::from_millis(300);
const LIMIT: Duration = Duration::from_secs(10);

/// A small deterministic generator (xorshift64*): the same cases every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// One request, well formed.
fn request(rng: &mut Rng) -> Vec<u8> {
    let method = *rng.pick(&[
        "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH",
    ]);
    let target = *rng.pick(&[
        "/",
        "/a?b=c",
        "/limited/x",
        "/ret",
        "/small/up",
        "/%7Euser/",
        "/a/../b",
        "//x?y",
        "/stream/s",
    ]);
    let http10 = rng.chance(15);
    let mut r = format!(
        "{method} {target} HTTP/1.{}\r\n",
        if http10 { 0 } else { 1 }
    );
    if !http10 || rng.chance(50) {
        r.push_str("Host: example.test\r\n");
    }
    let _ = write!(r, "X-Answer: {}\r\n", rng.below(MENU.len()));
    for _ in 0..rng.below(4) {
        let field = *rng.pick(&[
            "Connection: close",
            "Connection: keep-alive",
            "Connection: Keep-Alive, TE",
            "Connection: upgrade",
            "User-Agent: gen/1.0",
            "Accept: */*",
            "Cookie: a=1",
            "X-Dup: 1",
            "X-Dup: 2",
            "Accept-Encoding: gzip",
            "Te: trailers",
            "X-Forwarded-For: 10.0.0.1",
        ]);
        r.push_str(field);
        r.push_str("\r\n");
    }
    let body = rng.below(4);
    let continue_ = rng.chance(20);
    let mut bytes = Vec::new();
    match body {
        1 => {
            let n = rng.below(40);
            let _ = write!(r, "Content-Length: {n}\r\n");
            if continue_ {
                r.push_str("Expect: 100-continue\r\n");
            }
            r.push_str("\r\n");
            bytes.extend(std::iter::repeat_n(b'x', n));
        }
        2 if !http10 => {
            r.push_str("Transfer-Encoding: chunked\r\n");
            if continue_ {
                r.push_str("Expect: 100-continue\r\n");
            }
            r.push_str("\r\n");
            for _ in 0..rng.below(3) {
                let n = 1 + rng.below(20);
                let ext = if rng.chance(20) { ";e=1" } else { "" };
                bytes.extend_from_slice(format!("{n:x}{ext}\r\n").as_bytes());
                bytes.extend(std::iter::repeat_n(b'y', n));
                bytes.extend_from_slice(b"\r\n");
            }
            bytes.extend_from_slice(if rng.chance(20) {
                b"0\r\nX-T: 1\r\n\r\n"
            } else {
                b"0\r\n\r\n"
            });
        }
        _ => r.push_str("\r\n"),
    }
    let mut out = r.into_bytes();
    out.extend_from_slice(&bytes);
    out
}

/// One connection's bytes: one to three requests, pipelined.
fn generated(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..=rng.below(3) {
        out.extend_from_slice(&request(rng));
    }
    out
}

/// `bytes` with one to three mutations; whether it may end mid-request.
fn mutated(rng: &mut Rng, mut bytes: Vec<u8>) -> (Vec<u8>, bool) {
    let mut cut = false;
    for _ in 0..=rng.below(3) {
        if bytes.is_empty() {
            break;
        }
        let i = rng.below(bytes.len());
        match rng.below(5) {
            0 | 1 => bytes[i] = *rng.pick(b" \r\n\t:\0\x7f\x80A_/%;,0-"),
            2 => {
                bytes.remove(i);
            }
            3 => {
                let start = bytes[..i]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1);
                let end = bytes[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |p| i + p + 1);
                let line = bytes[start..end].to_vec();
                bytes.splice(start..start, line);
            }
            _ => {
                bytes.truncate(i);
                cut = true;
            }
        }
    }
    (bytes, cut)
}

fn cases() -> Vec<Vec<Step>> {
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut out = Vec::new();
    for _ in 0..CASES {
        out.push(vec![Step::Write(generated(&mut rng))]);
    }
    for _ in 0..CASES {
        let bytes = generated(&mut rng);
        let (bytes, cut) = mutated(&mut rng, bytes);
        let mut steps = vec![Step::Write(bytes)];
        if cut {
            // Both reach a verdict instead of waiting for the rest.
            steps.push(Step::ShutWrite);
        }
        out.push(steps);
    }
    out
}

fn toml(recorder: &Recorder) -> String {
    let mut s = String::from(
        "limit_req_status = 429\n\n[zones.lim]\nkey = \"$remote_addr:$remote_port\"\nsize = \"1m\"\nrate = \"1r/m\"\n\n",
    );
    for slot in 0..SLOTS {
        let up = recorder.addr(slot);
        let _ = write!(
            s,
            "[[servers]]\nproxy_pass = \"http://{up}\"\n\
             [[servers.locations]]\npath = \"/\"\n\
             [[servers.locations]]\npath = \"/limited/\"\nlimit_req = {{ zone = \"lim\" }}\n\
             [[servers.locations]]\npath = \"/ret\"\nreturn = {{ status = 200, body = \"returned\\n\" }}\n\
             [[servers.locations]]\npath = \"/small/\"\nclient_max_body_size = \"10\"\n\
             [[servers.locations]]\npath = \"/stream/\"\nproxy_request_buffering = false\n\n"
        );
    }
    s
}

/// What a case came to on one side.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Outcome {
    response: String,
    closed: bool,
    /// What each upstream connection received, the upstream's port replaced by `UP`.
    upstream: Vec<String>,
}

/// The response bytes with each `date` value blanked (the only field that may differ).
fn normalized(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut rest = &*text;
    while let Some(i) = rest.find("\r\ndate: ") {
        out.push_str(&rest[..i + 8]);
        rest = &rest[i + 8..];
        let end = rest.find("\r\n").unwrap_or(rest.len());
        out.push_str("DATE");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where a request head's fields start (after its request line's end) and where a response head
/// starts (its status line).
const REQUEST: &str = " HTTP/1.1\r\n";
const RESPONSE: &str = "HTTP/1.";

/// Each head's fields with every name's values moved up to its first (stable), as hyper's
/// `HeaderMap` forwarded and answered them: request heads (`start` " HTTP/1.1\r\n", the end
/// of their request line) or response heads (`start` "HTTP/1.", the start of their status
/// line). The own loop forwards a request's fields in the client's order and answers with the
/// upstream's fields in the upstream's order, as nginx does: the one difference in the bytes,
/// and only where a name repeats with another between.
fn grouped(stream: &str, start: &str) -> String {
    let mut out = String::new();
    let mut rest = stream;
    while let Some(i) = rest.find(start) {
        let Some(line_end) = rest[i..].find("\r\n") else {
            break;
        };
        let fields_at = i + line_end + 2;
        out.push_str(&rest[..fields_at]);
        rest = &rest[fields_at..];
        if rest.starts_with("\r\n") {
            continue;
        }
        let Some(end) = rest.find("\r\n\r\n") else {
            break;
        };
        let mut lines: Vec<(String, &str)> = Vec::new();
        for line in rest[..end].split("\r\n") {
            let name = line.split(':').next().unwrap_or("").to_ascii_lowercase();
            match lines.iter().rposition(|(n, _)| *n == name) {
                Some(j) => lines.insert(j + 1, (name, line)),
                None => lines.push((name, line)),
            }
        }
        let head: Vec<&str> = lines.iter().map(|(_, l)| *l).collect();
        out.push_str(&head.join("\r\n"));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn grouping_moves_repeated_fields_up_to_their_first() {
    let wire = "xxGET / HTTP/1.1\r\nhost: h\r\nx-a: 1\r\nx-b: 2\r\nx-a: 3\r\n\r\nyy";
    assert_eq!(
        grouped(wire, REQUEST),
        "xxGET / HTTP/1.1\r\nhost: h\r\nx-a: 1\r\nx-a: 3\r\nx-b: 2\r\n\r\nyy"
    );
    let wire =
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nx-a: 1\r\nx-b: 2\r\nx-a: 3\r\n\r\nok";
    assert_eq!(
        grouped(wire, RESPONSE),
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nx-a: 1\r\nx-a: 3\r\nx-b: 2\r\n\r\nok"
    );
}

/// The one difference on purpose: after an exchange that ends the connection (HTTP/1.0
/// without keep-alive), hyper had read on, and a head the gate refused there was answered
/// (the connection's own 400, written with `Date:`). The own loop reads nothing after such an
/// exchange, as nginx, which closes then.
fn deliberate(steps: &[Step], own: &Outcome, hyper: &Outcome) -> bool {
    // A race, not a difference: a client that ends its side right after a request may see
    // that last request served (sent upstream, answered) or not, on either loop, by whether
    // its end of file was read before the request began. Everything before it must agree.
    let cut = steps.iter().any(|s| matches!(s, Step::ShutWrite));
    let prefix = |a: &Outcome, b: &Outcome| {
        b.response.starts_with(&a.response) && b.upstream.concat().starts_with(&a.upstream.concat())
    };
    if cut && own.closed && hyper.closed && (prefix(own, hyper) || prefix(hyper, own)) {
        return true;
    }
    let Some(i) = hyper.response.find("HTTP/1.1 400 Bad Request\r\nDate: ") else {
        return false;
    };
    hyper.response[..i] == own.response
        && own.closed
        && hyper.closed
        && own.upstream == hyper.upstream
}

fn steps_text(steps: &[Step]) -> String {
    let mut out = String::new();
    for s in steps {
        match s {
            Step::Write(b) => out.push_str(&String::from_utf8_lossy(b)),
            other => out.push_str(&format!("{other:?}")),
        }
    }
    out
}

async fn run(
    sluice: &Sluice,
    recorder: Arc<Recorder>,
    cases: Arc<Vec<Vec<Step>>>,
    first: u8,
) -> Vec<Outcome> {
    let next = Arc::new(Mutex::new(0usize));
    let out = Arc::new(Mutex::new(vec![Outcome::default(); cases.len()]));
    let mut tasks = Vec::new();
    for slot in 0..SLOTS {
        let addr = sluice.addrs()[slot];
        let (recorder, cases, next, out) =
            (recorder.clone(), cases.clone(), next.clone(), out.clone());
        let slot_byte = u8::try_from(slot).expect("slots fit in a byte");
        let source = IpAddr::V4(Ipv4Addr::new(127, 0, 0, first + slot_byte));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    *n += 1;
                    *n - 1
                };
                let Some(steps) = cases.get(i) else { break };
                recorder.take(slot);
                let ex = exchange(addr, source, steps, IDLE, LIMIT).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                let port = recorder.addr(slot).port().to_string();
                let client = source.to_string();
                let upstream = recorder
                    .take(slot)
                    .iter()
                    .map(|b| {
                        let text = String::from_utf8_lossy(b).replace(&port, "UP");
                        grouped(&text.replace(&client, "CLIENT"), REQUEST)
                    })
                    .collect();
                let o = Outcome {
                    response: grouped(&normalized(&ex.bytes), RESPONSE),
                    closed: ex.closed,
                    upstream,
                };
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = o;
            }
        }));
    }
    for t in tasks {
        t.await.expect("slot task");
    }
    std::mem::take(&mut *out.lock().unwrap_or_else(|e| e.into_inner()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn own_loop_answers_and_forwards_as_hyper_did() {
    let _heavy = heavy();
    let cases = Arc::new(cases());
    let own_rec = Arc::new(Recorder::start(SLOTS));
    let hyper_rec = Arc::new(Recorder::start(SLOTS));
    let own = Sluice::start(&toml(&own_rec));
    let hyper = Sluice::builder(&toml(&hyper_rec))
        .env("SLUICE_HTTP1_HYPER", "1")
        .start();
    let (o, h) = tokio::join!(
        run(&own, own_rec.clone(), cases.clone(), 20),
        run(&hyper, hyper_rec.clone(), cases.clone(), 20)
    );
    let mut differ = Vec::new();
    for (i, (o, h)) in o.iter().zip(&h).enumerate() {
        if o != h && !deliberate(&cases[i], o, h) {
            differ.push(i);
        }
    }
    // A difference on a loaded machine may be timing (a late answer): each is tried again,
    // one at a time, and counts only if it is seen twice.
    let mut confirmed = String::new();
    for &i in &differ {
        let one = Arc::new(vec![cases[i].clone()]);
        let (o2, h2) = tokio::join!(
            run(&own, own_rec.clone(), one.clone(), 20),
            run(&hyper, hyper_rec.clone(), one, 20)
        );
        if o2 != h2 && !deliberate(&cases[i], &o2[0], &h2[0]) {
            let _ = writeln!(
                confirmed,
                "case {i}: {:?}\n  own:   {:?}\n  hyper: {:?}",
                steps_text(&cases[i]),
                o2[0],
                h2[0]
            );
        }
    }
    let forwarded = o.iter().filter(|x| !x.upstream.is_empty()).count();
    assert!(
        forwarded > CASES / 2,
        "only {forwarded} cases reached the upstream"
    );
    assert!(
        confirmed.is_empty(),
        "{} differences:\n{confirmed}",
        confirmed.lines().count() / 3
    );
}
