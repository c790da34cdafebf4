//! The one polling loop: [`eventually`].

use std::time::{Duration, Instant};

/// How often [`eventually`] asks again.
const EVERY: Duration = Duration::from_millis(10);

/// Asks `f` every 10 ms until it answers `Some`, and returns the answer; panics after `limit`,
/// naming `what` was awaited. For things that happen soon but at no exact moment: a log line
/// written, a reload applied, a server back.
pub async fn eventually<T>(
    what: &str,
    limit: Duration,
    mut f: impl AsyncFnMut() -> Option<T>,
) -> T {
    match within(limit, &mut f).await {
        Some(v) => v,
        None => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

/// [`eventually`]'s loop, for callers that say more than `what` when it times out.
pub async fn within<T>(limit: Duration, mut f: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if start.elapsed() > limit {
            return None;
        }
        tokio::time::sleep(EVERY).await;
    }
}
