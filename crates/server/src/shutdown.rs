//! Graceful shutdown: the server-wide signal that tells every connection to stop
//! reading requests, finish the ones in flight and close.
//!
//! [`crate::Server::run_until`] starts it; each connection's read loop sees it, stops
//! taking new requests, waits until every request it already took has been answered
//! and written (its budget is whole again) or the deadline passes, then closes.
//! Asynchronous operations still pending (a CHANGE_NOTIFY waiting for a change, a
//! blocked LOCK) are not waited for: they end with their connection.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// How long requests in flight may take to finish after a shutdown begins (SIGTERM)
/// before their connections are closed anyway. The systemd unit's `TimeoutStopSec`
/// leaves room for it.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// How long connections get to close after being told to, past the drain deadline.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The shutdown signal: unset until a shutdown begins, then the drain deadline.
pub struct Shutdown {
    deadline: watch::Sender<Option<Instant>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown {
            deadline: watch::Sender::new(None),
        }
    }
}

impl Shutdown {
    /// Begins the shutdown (once; later calls keep the first deadline).
    pub fn begin(&self, deadline: Instant) {
        self.deadline.send_if_modified(|d| {
            if d.is_none() {
                *d = Some(deadline);
                true
            } else {
                false
            }
        });
    }

    /// The drain deadline, once a shutdown has begun.
    pub fn deadline(&self) -> Option<Instant> {
        *self.deadline.borrow()
    }

    /// Resolves with the drain deadline once a shutdown begins.
    pub async fn begun(&self) -> Instant {
        let mut rx = self.deadline.subscribe();
        loop {
            if let Some(d) = *rx.borrow_and_update() {
                return d;
            }
            if rx.changed().await.is_err() {
                // The sender lives as long as `self`: not reached.
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn begun_resolves_with_the_first_deadline() {
        let s = Shutdown::default();
        assert_eq!(s.deadline(), None);
        let first = Instant::now() + Duration::from_secs(5);
        let waiter = async { s.begun().await };
        let (got, ()) = tokio::join!(waiter, async {
            tokio::task::yield_now().await;
            s.begin(first);
            s.begin(first + Duration::from_secs(60));
        });
        assert_eq!(got, first);
        assert_eq!(s.deadline(), Some(first));
        // Already begun: resolves at once.
        assert_eq!(s.begun().await, first);
    }
}
