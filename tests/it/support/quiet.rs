//! Timing-sensitive tests and machine-heavy tests never overlap within the test binary.
//!
//! The differential limit tests compare latencies within ±100 ms; the conformance suite drives
//! thousands of connections through nginx and sluice at once, which on a two-core machine delays
//! everything else by more than that. libtest runs the tests of one binary in parallel, so the
//! heavy test holds this lock exclusively and the timing-sensitive ones hold it shared: they run
//! alongside each other, never alongside the heavy one.
//!
//! The guards are held across `.await`s on purpose: each test has its own runtime, the lock is
//! only ever taken at the start of a test (blocking that test's thread, nothing else), so no task
//! of the same runtime can wait for it.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static LOCK: RwLock<()> = RwLock::new(());

/// Held by a test whose assertions depend on latencies, for its whole run.
pub struct Timing {
    _guard: RwLockReadGuard<'static, ()>,
}

/// Waits until no heavy test runs. A poisoned lock (a test panicked holding it) is still a lock.
pub fn timing() -> Timing {
    Timing {
        _guard: LOCK.read().unwrap_or_else(|e| e.into_inner()),
    }
}

/// Held by a test that loads the machine, for its whole run.
pub struct Heavy {
    _guard: RwLockWriteGuard<'static, ()>,
}

/// Waits until no timing-sensitive test runs, and keeps new ones waiting.
pub fn heavy() -> Heavy {
    Heavy {
        _guard: LOCK.write().unwrap_or_else(|e| e.into_inner()),
    }
}
