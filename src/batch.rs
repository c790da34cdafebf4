//! Log writes batched per worker thread.
//!
//! nginx writes every error-log and access-log line with its own `write(2)`.
//! Under load that is one system call per request just for logging. A
//! sluice worker writes the first line of a scheduler pass at once (a quiet
//! server logs line by line, as nginx) and collects the pass's later lines,
//! per destination, for a flusher task that runs after the tasks already
//! scheduled, or before the thread sleeps (the runtime's `on_thread_park`):
//! one system call for dozens of lines. The flusher is woken by the first
//! line that waits, not by the first of a pass: a pass of one line (one
//! client, a request per wake-up) costs no task wake-up. A batched line
//! waits microseconds, and may trail its response by as much.
//!
//! A batch is whole lines and at most [`BATCH_MAX`] bytes, so that a batch
//! written to a pipe is never interleaved with another thread's writes (a
//! longer line is written on its own, as it would be unbatched).

use std::cell::RefCell;
use std::sync::Arc;
use tokio::sync::Notify;

/// Largest batch written at once: PIPE_BUF.
pub const BATCH_MAX: usize = 4096;

/// Where lines go: stderr, an access-log file, stdout.
pub trait Output: Send + Sync + 'static {
    /// Writes all of `bytes`; errors are dropped (a log cannot report its
    /// own failure anywhere better).
    fn write_out(&self, bytes: &[u8]);
}

/// A worker's lines waiting for its flusher.
struct Pending {
    /// A line was written in this pass: later ones are batched.
    open: bool,
    /// The flusher was woken for this pass's batch.
    woken: bool,
    /// One buffer per destination written to in this pass.
    outs: Vec<(Arc<dyn Output>, Vec<u8>)>,
    flusher: Arc<Notify>,
}

impl Pending {
    fn position<O: Output>(&self, out: &Arc<O>) -> Option<usize> {
        self.outs
            .iter()
            .position(|(o, _)| std::ptr::addr_eq(Arc::as_ptr(o), Arc::as_ptr(out)))
    }
}

/// Writes and empties each destination's waiting lines.
fn write_waiting(outs: &mut [(Arc<dyn Output>, Vec<u8>)]) {
    for (out, buf) in outs {
        if !buf.is_empty() {
            out.write_out(buf);
            buf.clear();
        }
    }
}

thread_local! {
    static PENDING: RefCell<Option<Pending>> = const { RefCell::new(None) };
}

/// Writes the lines `line` appends (whole lines) to `out`: at once when
/// this thread does not batch or this is the first line of its scheduler
/// pass, else with the pass's batch for `out`. Formatted in place: into the
/// batch (no copy of the line), or into a scratch buffer written at once.
/// `line` only formats: it must not log.
pub fn write_with<O: Output>(out: &Arc<O>, line: impl FnOnce(&mut Vec<u8>)) {
    thread_local! {
        static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    let mut line = Some(line);
    let batched = PENDING.with_borrow_mut(|p| {
        let Some(p) = p else { return false };
        if !p.open {
            p.open = true;
            return false;
        }
        let at = p.position(out).unwrap_or_else(|| {
            let o: Arc<dyn Output> = out.clone();
            p.outs.push((o, Vec::with_capacity(BATCH_MAX)));
            p.outs.len() - 1
        });
        let buf = &mut p.outs[at].1;
        let start = buf.len();
        if let Some(f) = line.take() {
            f(buf);
        }
        if buf.len() > BATCH_MAX {
            // Over a batch: what waited goes first, then the line on its
            // own if it is longer than a batch, else it starts the next.
            if start > 0 {
                out.write_out(&buf[..start]);
                buf.drain(..start);
            }
            if buf.len() > BATCH_MAX {
                out.write_out(buf);
                buf.clear();
            }
        }
        if !p.woken && !buf.is_empty() {
            p.woken = true;
            p.flusher.notify_one();
        }
        true
    });
    if let (false, Some(f)) = (batched, line) {
        LINE.with_borrow_mut(|l| {
            l.clear();
            f(l);
            out.write_out(l);
        });
    }
}

/// Batch this worker thread's log lines (see the module docs). Must be
/// called inside the worker's runtime.
pub fn on_this_thread() {
    let flusher = Arc::new(Notify::new());
    PENDING.set(Some(Pending {
        open: false,
        woken: false,
        outs: Vec::new(),
        flusher: flusher.clone(),
    }));
    tokio::spawn(async move {
        // If the runtime goes away while the thread lives on, its lines are
        // written and the thread writes at once from then on.
        let _unbatch = Unbatch;
        loop {
            flusher.notified().await;
            flush();
        }
    });
}

struct Unbatch;

impl Drop for Unbatch {
    fn drop(&mut self) {
        let mut outs = PENDING
            .try_with(|p| p.borrow_mut().take().map(|p| p.outs))
            .ok()
            .flatten()
            .unwrap_or_default();
        write_waiting(&mut outs);
    }
}

/// Write this thread's batched lines now. Buffers are kept for the next
/// pass; a destination no one else holds any more (a log file a reload
/// stopped using) is released, so its file is closed.
pub fn flush() {
    let mut outs = PENDING.with_borrow_mut(|p| match p {
        Some(p) => {
            p.open = false;
            p.woken = false;
            std::mem::take(&mut p.outs)
        }
        None => Vec::new(),
    });
    if outs.is_empty() {
        return;
    }
    // Written outside the borrow: a destination may do anything.
    write_waiting(&mut outs);
    outs.retain(|(o, _)| Arc::strong_count(o) > 1);
    PENDING.with_borrow_mut(|p| {
        if let Some(p) = p {
            if p.outs.is_empty() {
                p.outs = outs;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    fn write<O: Output>(out: &Arc<O>, lines: &[u8]) {
        write_with(out, |buf| buf.extend_from_slice(lines));
    }

    #[derive(Default)]
    struct Recorder(Mutex<Vec<Vec<u8>>>);

    impl Output for Recorder {
        fn write_out(&self, bytes: &[u8]) {
            self.0.lock().push(bytes.to_vec());
        }
    }

    /// Without batching every line is its own write.
    #[test]
    fn a_thread_that_does_not_batch_writes_each_line() {
        let r = Arc::new(Recorder::default());
        write(&r, b"a\n");
        write(&r, b"b\n");
        assert_eq!(*r.0.lock(), vec![b"a\n".to_vec(), b"b\n".to_vec()]);
    }

    /// A pass of one line wakes no flusher: nothing waits. Its pass stays
    /// open until the thread parks, so a line of a later pass that comes
    /// before then is batched, and that wakes the flusher.
    #[test]
    fn a_lone_line_wakes_no_flusher() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let a = Arc::new(Recorder::default());
        let a2 = a.clone();
        rt.block_on(async move {
            on_this_thread();
            write(&a2, b"1\n");
            tokio::task::yield_now().await;
            write(&a2, b"2\n");
            assert_eq!(
                a2.0.lock().len(),
                1,
                "no flusher ran: the pass is still open"
            );
            tokio::task::yield_now().await;
            assert_eq!(*a2.0.lock(), vec![b"1\n".to_vec(), b"2\n".to_vec()]);
            write(&a2, b"3\n");
            assert_eq!(a2.0.lock().len(), 3, "the flusher closed the pass");
        });
    }

    /// The first line of a pass goes out at once; the rest of the pass is
    /// one write per destination, in order, never over BATCH_MAX.
    #[test]
    fn a_pass_writes_its_first_line_at_once_and_batches_the_rest() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let a = Arc::new(Recorder::default());
        let b = Arc::new(Recorder::default());
        let (a2, b2) = (a.clone(), b.clone());
        rt.block_on(async move {
            on_this_thread();
            write(&a2, b"1\n");
            assert_eq!(a2.0.lock().len(), 1, "the first line is written at once");
            write(&a2, b"2\n");
            write(&b2, b"x\n");
            write(&a2, b"3\n");
            assert_eq!(a2.0.lock().len(), 1, "later lines wait for the flusher");
            // The flusher runs after the tasks already scheduled.
            tokio::task::yield_now().await;
            assert_eq!(*a2.0.lock(), vec![b"1\n".to_vec(), b"2\n3\n".to_vec()]);
            assert_eq!(*b2.0.lock(), vec![b"x\n".to_vec()]);
            // A new pass: its first line is at once again.
            write(&a2, b"4\n");
            assert_eq!(a2.0.lock().len(), 3);
            let line = vec![b'y'; 1000];
            for _ in 0..9 {
                write(&b2, &line);
            }
            // Longer than a batch: after what waits, on its own.
            write(&b2, &[b'z'; 5000]);
            flush();
        });
        let sizes: Vec<usize> = b.0.lock().iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![2, 4000, 4000, 1000, 5000]);
        // A runtime that goes away takes the batching with it: what waited
        // is written, and later lines are written at once.
        rt.block_on(async {
            write(&a, b"5\n");
            write(&a, b"6\n");
        });
        assert_eq!(a.0.lock().len(), 4);
        drop(rt);
        assert_eq!(a.0.lock().last().unwrap(), b"6\n");
        write(&a, b"7\n");
        assert_eq!(a.0.lock().len(), 6);
    }
}
