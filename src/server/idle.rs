//! Idle client connections, kept as nginx keeps them: a socket and a
//! few words each, no task, no buffer, no timer of their own.
//!
//! A plain HTTP/1.1 connection that has been idle for
//! [`super::io::PARK_AFTER`] (after a response, or since it was accepted
//! without sending a byte) leaves its task: its socket leaves tokio's
//! reactor for this accept loop's own epoll set, and what the connection
//! needs to go on (its number, `worker_connections` slot and deadline:
//! `keepalive_timeout`, or `client_header_timeout` from its accept) goes
//! into one [`Entry`] of a slab. A task
//! of sluice costs several kilobytes (its future, the socket's registration,
//! its timers); an entry costs about fifty bytes (and the kernel its own
//! share), where nginx spends about 0.25–0.6 KB per idle connection.
//!
//! One task per accept loop ([`run`]) waits for the set: when a parked
//! socket becomes readable (a request, or the client closing) it goes back
//! to tokio and gets a task again ([`super::conn::resume`]); when its
//! deadline passes it is closed, as nginx closes it ([`super::conn::expired`]:
//! nginx's "client timed out" line for one that never sent a header);
//! when the server stops, every parked connection is closed at once (nginx
//! closes idle keep-alive connections at a graceful stop). Deadlines are in
//! one heap, and a connection woken before its deadline leaves a stale
//! heap entry, told apart by the slot's generation.
//!
//! A worker out of `worker_connections` closes some of its parked
//! connections to make room, as nginx closes its idle ("reusable") ones
//! ([`reuse_here`]).
//!
//! The memory a connection's task held goes back to the system soon after
//! it parks: 100 ms after a park, the worker asks mimalloc to purge the
//! pages it freed ([`COLLECT_AFTER`]; mimalloc itself would purge them only
//! at its next allocation in those size classes, which a worker whose
//! clients all went idle never makes).

use super::Shared;
use crate::connlimit::WorkerSlot;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Weak};
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;
use tokio::time::Instant;

/// What a parked connection keeps (its addresses are the socket's, read
/// again when it resumes; its `listen` is the set's; its deadline is in
/// the set's heap).
pub(crate) struct Entry {
    pub(crate) stream: std::net::TcpStream,
    pub(crate) id: u64,
    pub(crate) slot: WorkerSlot,
    /// It has sent nothing yet: its header is due by then (its deadline
    /// passing is nginx's "client timed out" line).
    pub(crate) header_until: Option<Instant>,
    /// An HTTP/2 connection's state, while it waits here.
    pub(crate) h2: Option<Box<super::h2::Parked>>,
    /// What its PROXY protocol header named (its socket's peer is the
    /// load balancer).
    pub(crate) proxy: Option<Box<crate::proxy_protocol::Addresses>>,
}

struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

#[derive(Default)]
struct Inner {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// (deadline, slot, generation): the earliest first.
    deadlines: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    stopped: bool,
}

/// The parked connections of one accept loop.
pub(crate) struct IdleSet {
    /// The `listen` of the loop: every connection's.
    pub(crate) configured: SocketAddr,
    inner: parking_lot::Mutex<Inner>,
    epoll: AsyncFd<OwnedFd>,
    /// A connection was parked (its deadline may be the earliest).
    parked: Notify,
}

/// Events read from the epoll set at a time.
const BATCH: usize = 64;

/// How long after a park the worker's freed pages are purged (at most
/// once per period, only when connections park).
const COLLECT_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

// mimalloc is sluice's allocator (src/main.rs); without it the call finds
// an empty heap and does nothing.
use libmimalloc_sys as _;
unsafe extern "C" {
    /// mimalloc: free and purge what the calling thread's heap can.
    fn mi_collect(force: bool);
}

thread_local! {
    /// This worker's idle sets, one per accept loop ([`reuse_here`]).
    static HERE: std::cell::RefCell<Vec<Weak<IdleSet>>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// nginx's `ngx_drain_connections`, for a worker with no
/// `worker_connections` left: takes max(min(32, parked / 8), 1) of this
/// worker's parked connections, those nearest their deadline first, so
/// that a burst of new clients does not drain at every accept. A parked
/// connection has been idle for at least [`super::io::PARK_AFTER`]; one
/// idle for less still holds its task, and is not taken (nginx reuses any
/// idle one, the least recently used first). The connections to close are
/// returned (each gives back its slot when dropped).
pub(crate) fn reuse_here() -> Vec<Entry> {
    let sets: Vec<Arc<IdleSet>> = HERE.with_borrow_mut(|here| {
        here.retain(|w| w.strong_count() > 0);
        here.iter().filter_map(Weak::upgrade).collect()
    });
    let parked: usize = sets.iter().map(|s| s.len()).sum();
    let want = (parked / 8).clamp(1, 32);
    let mut closed = Vec::new();
    for set in &sets {
        if closed.len() >= want {
            break;
        }
        set.take_nearest(want - closed.len(), &mut closed);
    }
    closed
}

impl IdleSet {
    pub(crate) fn new(configured: SocketAddr) -> io::Result<Arc<IdleSet>> {
        // SAFETY: epoll_create1 has no memory-safety preconditions; a valid
        // descriptor is owned from here on.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an OwnedFd stays open, as the same descriptor, until it
        // is dropped with the AsyncFd.
        let epoll = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)? };
        let set = Arc::new(IdleSet {
            configured,
            inner: parking_lot::Mutex::new(Inner::default()),
            epoll,
            parked: Notify::new(),
        });
        HERE.with_borrow_mut(|here| here.push(Arc::downgrade(&set)));
        Ok(set)
    }

    /// Keeps `entry` until its socket is readable, `deadline` passes or
    /// the server stops. `Err` gives it back when it cannot be parked (the
    /// server is stopping, or the kernel refused): the caller closes it.
    pub(crate) fn park(&self, entry: Entry, deadline: Instant) -> Result<(), Entry> {
        let mut inner = self.inner.lock();
        if inner.stopped {
            return Err(entry);
        }
        let index = match inner.free.pop() {
            Some(i) => i,
            None => {
                let Ok(i) = u32::try_from(inner.slots.len()) else {
                    return Err(entry);
                };
                inner.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                i
            }
        };
        let slot = &mut inner.slots[index as usize];
        slot.generation = slot.generation.wrapping_add(1);
        let generation = slot.generation;
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: (u64::from(generation) << 32) | u64::from(index),
        };
        let fd = entry.stream.as_raw_fd();
        // SAFETY: both descriptors are open; `event` outlives the call.
        let added = unsafe {
            libc::epoll_ctl(
                self.epoll.get_ref().as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd,
                &mut event,
            )
        };
        if added < 0 {
            inner.free.push(index);
            return Err(entry);
        }
        inner.slots[index as usize].entry = Some(entry);
        inner.deadlines.push(Reverse((deadline, index, generation)));
        drop(inner);
        self.parked.notify_one();
        Ok(())
    }

    /// How many connections are parked.
    fn len(&self) -> usize {
        let inner = self.inner.lock();
        inner.slots.len() - inner.free.len()
    }

    /// Takes up to `n` parked connections, those nearest their deadline
    /// first.
    fn take_nearest(&self, n: usize, out: &mut Vec<Entry>) {
        let mut inner = self.inner.lock();
        let mut taken = 0;
        while taken < n {
            let Some(Reverse((_, index, generation))) = inner.deadlines.pop() else {
                break;
            };
            if let Some(entry) = self.take(&mut inner, index, generation) {
                out.push(entry);
                taken += 1;
            }
        }
    }

    /// Takes slot `index` out of the set, if it still holds `generation`.
    fn take(&self, inner: &mut Inner, index: u32, generation: u32) -> Option<Entry> {
        let slot = inner.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        let entry = slot.entry.take()?;
        // SAFETY: both descriptors are open; DEL ignores the event.
        unsafe {
            libc::epoll_ctl(
                self.epoll.get_ref().as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                entry.stream.as_raw_fd(),
                std::ptr::null_mut(),
            );
        }
        inner.free.push(index);
        Some(entry)
    }

    /// The parked connections whose sockets are readable.
    fn ready(&self, woken: &mut Vec<Entry>) -> bool {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
        // SAFETY: `events` has room for BATCH events; a zero timeout never
        // blocks.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll.get_ref().as_raw_fd(),
                events.as_mut_ptr(),
                BATCH as i32,
                0,
            )
        };
        let n = usize::try_from(n).unwrap_or(0);
        let mut inner = self.inner.lock();
        for e in &events[..n] {
            let (index, generation) = (e.u64 as u32, (e.u64 >> 32) as u32);
            woken.extend(self.take(&mut inner, index, generation));
        }
        n == BATCH
    }

    /// Takes the connections whose deadline has passed; returns the next
    /// deadline.
    fn expired(&self, now: Instant, gone: &mut Vec<Entry>) -> Option<Instant> {
        let mut inner = self.inner.lock();
        while let Some(&Reverse((deadline, index, generation))) = inner.deadlines.peek() {
            let live = inner
                .slots
                .get(index as usize)
                .is_some_and(|s| s.generation == generation && s.entry.is_some());
            if live && deadline > now {
                return Some(deadline);
            }
            inner.deadlines.pop();
            if live {
                gone.extend(self.take(&mut inner, index, generation));
            }
        }
        None
    }

    /// Every parked connection, taken at a stop; nothing is parked after.
    fn stop(&self) -> Vec<Entry> {
        let mut inner = self.inner.lock();
        inner.stopped = true;
        inner.deadlines.clear();
        let all = inner.slots.iter_mut().filter_map(|s| s.entry.take());
        all.collect()
    }
}

/// Serves one accept loop's idle set until the server stops: resumes the
/// connections that become readable, closes the ones whose deadline
/// passed.
pub(crate) async fn run(
    shared: Arc<Shared>,
    set: Arc<IdleSet>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let mut woken = Vec::new();
    let mut collect_at: Option<Instant> = None;
    loop {
        let next = set.expired(Instant::now(), &mut woken);
        for entry in woken.drain(..) {
            super::conn::expired(&shared, &set, entry);
        }
        let far = Instant::now() + std::time::Duration::from_secs(3600);
        tokio::select! {
            biased;
            _ = stopping.wait_for(|stop| *stop) => break,
            ready = set.epoll.readable() => {
                let Ok(mut guard) = ready else { break };
                if !set.ready(&mut woken) {
                    guard.clear_ready();
                }
            }
            _ = tokio::time::sleep_until(next.unwrap_or(far)) => {}
            _ = set.parked.notified() => {
                collect_at.get_or_insert_with(|| Instant::now() + COLLECT_AFTER);
            }
            _ = tokio::time::sleep_until(collect_at.unwrap_or(far)), if collect_at.is_some() => {
                collect_at = None;
                // SAFETY: no preconditions; it runs on this worker's thread,
                // whose heap the parked connections' tasks freed into.
                unsafe { mi_collect(true) };
            }
        }
        for entry in woken.drain(..) {
            super::conn::resume(&shared, &stopping, &set, entry);
        }
    }
    for entry in set.stop() {
        super::h2::closing(&shared, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    /// A connected pair: the client's end, and the server's as a parkable
    /// entry.
    fn pair(listener: &std::net::TcpListener, id: u64) -> (std::net::TcpStream, Entry) {
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let slot = WorkerSlot::take(100, 0).unwrap_or_else(|_| panic!("a slot"));
        (
            client,
            Entry {
                stream: server,
                id,
                slot,
                header_until: None,
                h2: None,
                proxy: None,
            },
        )
    }

    #[tokio::test]
    async fn readable_sockets_and_passed_deadlines_leave_the_set() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let set = IdleSet::new(listener.local_addr().unwrap()).unwrap();
        let now = Instant::now();
        let (mut c1, e1) = pair(&listener, 1);
        let (_c2, e2) = pair(&listener, 2);
        let (_c3, e3) = pair(&listener, 3);
        set.park(e1, now + Duration::from_secs(60)).ok().unwrap();
        set.park(e2, now + Duration::from_secs(5)).ok().unwrap();
        set.park(e3, now + Duration::from_secs(10)).ok().unwrap();
        assert_eq!(set.len(), 3);

        // Nothing readable yet.
        let mut woken = Vec::new();
        assert!(!set.ready(&mut woken));
        assert!(woken.is_empty());
        // The client of 1 sends: 1 (only) is taken, its slot reusable.
        c1.write_all(b"GET").unwrap();
        tokio::time::timeout(Duration::from_secs(2), set.epoll.readable())
            .await
            .unwrap()
            .unwrap()
            .clear_ready();
        set.ready(&mut woken);
        let ids: Vec<u64> = woken.drain(..).map(|e| e.id).collect();
        assert_eq!(ids, [1]);
        assert_eq!(set.len(), 2);

        // A new park reuses 1's slot: 1's stale deadline (60 s) does not
        // expire it early, its own does.
        let (_c4, e4) = pair(&listener, 4);
        set.park(e4, now + Duration::from_secs(7)).ok().unwrap();
        let mut gone = Vec::new();
        let next = set.expired(now + Duration::from_secs(6), &mut gone);
        let ids: Vec<u64> = gone.drain(..).map(|e| e.id).collect();
        assert_eq!(ids, [2], "only 2's deadline (5 s) passed");
        assert_eq!(next, Some(now + Duration::from_secs(7)));
        let next = set.expired(now + Duration::from_secs(61), &mut gone);
        let mut ids: Vec<u64> = gone.drain(..).map(|e| e.id).collect();
        ids.sort();
        assert_eq!(ids, [3, 4]);
        assert_eq!(next, None, "1's old deadline was stale");
        assert_eq!(set.len(), 0);
    }

    /// Out of worker_connections, a worker takes max(min(32, parked / 8), 1)
    /// of its parked connections, nearest their deadline first, from every
    /// set it has; a stale deadline (of a connection resumed since) does not
    /// count. (The warning's once a second is connlimit's.)
    #[tokio::test(flavor = "current_thread")]
    async fn reuse_takes_the_connections_nearest_their_deadline() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (a, b) = (
            IdleSet::new(listener.local_addr().unwrap()).unwrap(),
            IdleSet::new(listener.local_addr().unwrap()).unwrap(),
        );
        let now = Instant::now();
        let mut clients = Vec::new();
        let mut park = |set: &IdleSet, id: u64, secs: u64| {
            let (c, e) = pair(&listener, id);
            clients.push(c);
            set.park(e, now + Duration::from_secs(secs)).ok().unwrap();
        };
        park(&a, 1, 30);
        park(&a, 2, 10);
        for id in 3..=16 {
            park(&b, id, 60 + id);
        }
        // 2 was resumed (its heap entry is stale), then parked again later.
        let mut woken = Vec::new();
        {
            let mut inner = a.inner.lock();
            let (index, generation) = inner
                .slots
                .iter()
                .enumerate()
                .find(|(_, s)| s.entry.as_ref().is_some_and(|e| e.id == 2))
                .map(|(i, s)| (i as u32, s.generation))
                .unwrap();
            woken.extend(a.take(&mut inner, index, generation));
        }
        a.park(woken.pop().unwrap(), now + Duration::from_secs(90))
            .ok()
            .unwrap();
        // 16 parked: 2 taken, a's first (1 at 30 s, then 2 at 90 s).
        let ids: Vec<u64> = reuse_here().iter().map(|e| e.id).collect();
        assert_eq!(ids, [1, 2]);
        let ids: Vec<u64> = reuse_here().iter().map(|e| e.id).collect();
        assert_eq!(ids, [3], "14 parked: one, b's nearest");
        assert_eq!(reuse_here().len(), 1, "13 parked: one");
        assert_eq!(a.len() + b.len(), 12);
    }

    #[tokio::test]
    async fn a_stop_takes_everything_and_refuses_later_parks() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let set = IdleSet::new(listener.local_addr().unwrap()).unwrap();
        let later = Instant::now() + Duration::from_secs(60);
        for id in 0..3 {
            let (_c, e) = pair(&listener, id);
            set.park(e, later).ok().unwrap();
        }
        assert_eq!(set.stop().len(), 3);
        let (_c, e) = pair(&listener, 9);
        assert_eq!(set.park(e, later).err().map(|e| e.id), Some(9));
        let mut gone = Vec::new();
        assert_eq!(set.expired(later, &mut gone), None);
        assert!(gone.is_empty());
    }
}
