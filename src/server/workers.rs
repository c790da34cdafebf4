//! Thread-per-core serving.

/// Thread-per-core serving: one single-threaded tokio runtime per CPU, each
/// accepting on its own copy of every listening socket and running the
/// connections it accepted to the end, upstream pool included. Profiles of
/// a work-stealing runtime showed most time in the kernel waking threads
/// and switching between them; here a request never changes thread.
pub(crate) struct Workers {
    pub(crate) handles: Vec<tokio::runtime::Handle>,
}

impl Workers {
    pub(crate) fn start() -> Workers {
        let n = std::env::var("SLUICE_WORKERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let handles = (0..n)
            .map(|i| {
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::Builder::new()
                    .name(format!("sluice-worker-{i}"))
                    .spawn(move || {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .on_thread_park(crate::batch::flush)
                            .build()
                            .expect("a worker runtime");
                        let _ = tx.send(rt.handle().clone());
                        // Runs until the process exits.
                        rt.block_on(async {
                            crate::batch::on_this_thread();
                            std::future::pending::<()>().await
                        });
                    })
                    .expect("a worker thread");
                rx.recv().expect("the worker's runtime handle")
            })
            .collect();
        Workers { handles }
    }

    /// Write every worker's batched log lines (see [`crate::batch`]) now.
    pub(crate) async fn flush_logs(&self) {
        for h in &self.handles {
            let _ = h.spawn(async { crate::batch::flush() }).await;
        }
    }
}
