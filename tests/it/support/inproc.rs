//! sluice in the test process, for the tests that need no process of their own.
//!
//! A test that reads no error-log line (sluice writes those to its process's stderr through a
//! global `tracing` subscriber) and sends no signal does not need the binary: [`serve`] parses,
//! compiles, binds and serves its configuration on a thread of its own, in a few milliseconds
//! instead of a process start, and the test talks to it over real sockets as to the binary.
//! Tests start it with [`super::SluiceBuilder::in_process`] (or [`super::Sluice::in_process`]),
//! which completes the configuration as for a process.
//!
//! This file is the only one in the harness that uses sluice's library API: when the server's
//! API moves, this is the file to adapt.
//!
//! Time is real: the delay of a delayed request is slept on sluice's own worker runtimes, which
//! tokio's paused test clock does not reach, so a delay test waits as long as on the binary.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;

use super::spawn::StartError;

/// A sluice serving in this process; stopped (gracefully, without waiting) on Drop.
pub struct Served {
    /// The servers' bound addresses, in server order.
    pub addrs: Vec<SocketAddr>,
    /// The bound `[admin]` address.
    pub admin: Option<SocketAddr>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Serves `text` (a whole configuration, listen addresses included; port 0 allowed) until the
/// returned [`Served`] is dropped. `file` names the configuration in errors. Err if the
/// configuration is refused or cannot be bound.
pub fn serve(file: &str, text: &str) -> Result<Served, StartError> {
    let failed = |what: String| StartError::Failed(format!("{what}\n--- {file} ---\n{text}"));
    let spec = sluice::config::load_text(file, text).map_err(|e| failed(e.to_string()))?;
    let config = sluice::config::Config::compile(spec, None).map_err(|e| failed(e.to_string()))?;
    let (bound_tx, bound_rx) = mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // The control side (the admin listener, the stop) on a runtime of its own, as the binary
    // has; client connections go to sluice's own worker threads.
    let thread = std::thread::Builder::new()
        .name("sluice-in-process".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a tokio runtime for the in-process sluice");
            rt.block_on(async move {
                config.start_backends();
                let proxy = match sluice::server::Server::bind(config).await {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = bound_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = bound_tx.send(Ok((proxy.local_addrs(), proxy.admin_addr())));
                proxy
                    .serve(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        })
        .expect("start the in-process sluice's thread");
    match bound_rx.recv() {
        Ok(Ok((addrs, admin))) => Ok(Served {
            addrs,
            admin,
            stop: Some(stop),
            thread: Some(thread),
        }),
        Ok(Err(e)) if e.contains("Address already in use") => Err(StartError::AddrInUse(e)),
        Ok(Err(e)) => Err(failed(e)),
        Err(_) => {
            let why = match thread.join() {
                Err(panic) => format!("{panic:?}"),
                Ok(()) => "it ended".to_owned(),
            };
            Err(failed(format!(
                "the in-process sluice died while binding: {why}"
            )))
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // The stop drains open connections in the background (up to shutdown_timeout); the
        // test that dropped this has no more use for them.
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        drop(self.thread.take());
    }
}
