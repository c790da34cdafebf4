//! Thread-per-core serving: one single-threaded tokio runtime per CPU, each
//! accepting on its own copy of every listening socket and running the
//! connections it accepted to the end, upstream pool included. Profiles of
//! a work-stealing runtime showed most time in the kernel waking threads
//! and switching between them; here a request never changes thread. Every
//! worker is woken by each new connection; one with clearly more open than
//! another lets that one accept first ([`Workers::busier_than_others`]), or
//! the first to wake would take a whole burst.

use crate::connlimit::{WorkerLoad, WorkerSlot};
use parking_lot::Mutex;
use std::io;
use tokio::sync::oneshot;

/// The worker threads of one server, started with it and joined when it
/// stops.
pub(crate) struct Workers {
    pub(crate) handles: Vec<tokio::runtime::Handle>,
    /// Each worker's open connections.
    loads: Vec<WorkerLoad>,
    /// Where [`Workers::least_busy`] starts looking next.
    turn: std::sync::atomic::AtomicUsize,
    /// Each worker's stop signal and thread, taken by [`Workers::join`].
    threads: Mutex<Vec<(oneshot::Sender<()>, std::thread::JoinHandle<()>)>>,
}

impl Workers {
    /// `n` workers (0: `SLUICE_WORKERS`, or one per CPU). Fails, having
    /// stopped those already started, if a thread or its runtime cannot be
    /// made.
    pub(crate) fn start(n: usize) -> io::Result<Workers> {
        let n = match n {
            0 => std::env::var("SLUICE_WORKERS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&n: &usize| n > 0)
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            n => n,
        };
        let mut workers = Workers {
            handles: Vec::with_capacity(n),
            loads: Vec::with_capacity(n),
            turn: std::sync::atomic::AtomicUsize::new(0),
            threads: Mutex::new(Vec::with_capacity(n)),
        };
        for i in 0..n {
            let (handle, load, stop, thread) = Self::spawn(i)?;
            workers.handles.push(handle);
            workers.loads.push(load);
            workers.threads.lock().push((stop, thread));
        }
        Ok(workers)
    }

    /// One worker thread, its runtime's handle and load, the sender that
    /// stops it.
    fn spawn(
        i: usize,
    ) -> io::Result<(
        tokio::runtime::Handle,
        WorkerLoad,
        oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    )> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("sluice-worker-{i}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .on_thread_park(crate::batch::flush)
                    .build();
                let rt = match rt {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let _ = tx.send(Ok((rt.handle().clone(), WorkerLoad::here())));
                // Until the server stops (or drops its workers).
                rt.block_on(async {
                    crate::batch::on_this_thread();
                    let _ = stopped.await;
                    crate::batch::flush();
                });
            })?;
        match rx.recv() {
            Ok(Ok((handle, load))) => Ok((handle, load, stop, thread)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other("a worker thread ended before it started")),
        }
    }

    /// Whether the calling worker has clearly more connections open than
    /// the least busy worker (by more than one and an eighth of that one's),
    /// so that it should let that one accept the next client first. Every
    /// worker's accept loop is woken by each new connection; without this
    /// the first to wake accepts the whole burst (wrk's 64 connections all
    /// on one worker of two, the other idle, and p99 twice nginx's).
    pub(crate) fn busier_than_others(&self) -> bool {
        let Some(least) = self.loads.iter().map(WorkerLoad::open).min() else {
            return false;
        };
        WorkerSlot::open_here() > least + 1 + least / 8
    }

    /// The worker with the fewest connections open, ties taken in turn:
    /// where a connection goes that arrived on a socket only one worker
    /// reads (a `quic` listener's).
    pub(crate) fn least_busy(&self) -> Option<&tokio::runtime::Handle> {
        let n = self.handles.len();
        let start = self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let best = (0..n)
            .map(|i| (start + i) % n)
            .min_by_key(|&i| self.loads.get(i).map_or(0, WorkerLoad::open))?;
        self.handles.get(best)
    }

    /// Write every worker's batched log lines (see [`crate::batch`]) now.
    pub(crate) async fn flush_logs(&self) {
        for h in &self.handles {
            let _ = h.spawn(async { crate::batch::flush() }).await;
        }
    }

    /// Stop every worker (what still runs on it is dropped) and wait for
    /// its thread to end, off the calling runtime's threads.
    pub(crate) async fn join(&self) {
        let threads = std::mem::take(&mut *self.threads.lock());
        for (stop, thread) in threads {
            let _ = stop.send(());
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}
