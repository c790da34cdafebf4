//! What the Redis connection went through, as values.
//!
//! The limiter imports nothing from the rest of the crate, so it does not
//! write log lines itself: a backend is given an [`EventSink`] when it is
//! built, and the code that builds it (the configuration) turns each
//! [`RedisEvent`] into an error-log line at the severity it chooses. The
//! `Display` of an event is that line's message.

use super::{CallError, OnError};
use std::fmt;
use std::sync::Arc;

/// Something worth a line in the error log. `url` is the `[redis] url`
/// with its password masked.
#[derive(Debug)]
pub enum RedisEvent<'a> {
    /// The first connection answered `PING`.
    Reachable { url: &'a str },
    /// The first connection failed: `on_error` decides until Redis answers.
    Unreachable {
        url: &'a str,
        error: &'a str,
        on_error: OnError,
    },
    /// A call succeeded after a failure.
    Recovered { url: &'a str },
    /// The subscription to forgiven keys broke, or could not be made: the
    /// rejection caches are not used until it is back. Once per outage.
    Unsubscribed { url: &'a str, error: &'a str },
    /// Subscribed again after [`RedisEvent::Unsubscribed`].
    Resubscribed { url: &'a str },
    /// A call for `zone` failed. Reported at most once a second per zone;
    /// `suppressed` similar failures were not reported since the last one.
    ZoneError {
        zone: &'a str,
        error: &'a CallError,
        on_error: OnError,
        suppressed: u64,
    },
}

impl fmt::Display for RedisEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisEvent::Reachable { url } => write!(f, "redis {url} is reachable"),
            RedisEvent::Unreachable {
                url,
                error,
                on_error,
            } => write!(
                f,
                "redis {url} is not reachable yet ({error}); on_error={} decides meanwhile",
                on_error.as_str()
            ),
            RedisEvent::Recovered { url } => write!(f, "redis {url} answers again"),
            RedisEvent::Unsubscribed { url, error } => write!(
                f,
                "redis {url}: not subscribed to forgiven keys ({error}); rejection caches are off until it is"
            ),
            RedisEvent::Resubscribed { url } => write!(
                f,
                "redis {url}: subscribed to forgiven keys again; rejection caches start empty"
            ),
            RedisEvent::ZoneError {
                zone,
                error,
                on_error,
                suppressed,
            } => {
                write!(
                    f,
                    "redis error in limit_req zone \"{zone}\": {error}; on_error={}",
                    on_error.as_str()
                )?;
                if *suppressed > 0 {
                    write!(f, " ({suppressed} similar errors suppressed)")?;
                }
                Ok(())
            }
        }
    }
}

/// Where a backend sends its events; called from any thread, and from
/// inside the request path (a zone's error), so it should be quick.
pub type EventSink = Arc<dyn Fn(RedisEvent<'_>) + Send + Sync>;

/// A sink that drops every event (tests, tools without an error log).
pub fn ignore_events() -> EventSink {
    Arc::new(|_| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn events_read_as_their_log_lines() {
        let url = "redis://u:***@h:1/0";
        let line = |e: RedisEvent<'_>| e.to_string();
        assert_eq!(
            line(RedisEvent::Reachable { url }),
            "redis redis://u:***@h:1/0 is reachable"
        );
        assert_eq!(
            line(RedisEvent::Unreachable {
                url,
                error: "refused",
                on_error: OnError::Local
            }),
            "redis redis://u:***@h:1/0 is not reachable yet (refused); on_error=local decides meanwhile"
        );
        assert_eq!(
            line(RedisEvent::Recovered { url }),
            "redis redis://u:***@h:1/0 answers again"
        );
        assert_eq!(
            line(RedisEvent::Unsubscribed {
                url,
                error: "refused"
            }),
            "redis redis://u:***@h:1/0: not subscribed to forgiven keys (refused); rejection caches are off until it is"
        );
        assert_eq!(
            line(RedisEvent::Resubscribed { url }),
            "redis redis://u:***@h:1/0: subscribed to forgiven keys again; rejection caches start empty"
        );
        let error = CallError::Timeout(Duration::from_millis(50));
        let zone_error = |suppressed| {
            line(RedisEvent::ZoneError {
                zone: "z",
                error: &error,
                on_error: OnError::Deny,
                suppressed,
            })
        };
        assert_eq!(
            zone_error(0),
            "redis error in limit_req zone \"z\": no answer within 50 ms; on_error=deny"
        );
        assert_eq!(
            zone_error(3),
            "redis error in limit_req zone \"z\": no answer within 50 ms; on_error=deny (3 similar errors suppressed)"
        );
    }
}
