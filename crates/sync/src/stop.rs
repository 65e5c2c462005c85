//! [`StopSignal`]: how a follower (and its background maintenance) is
//! asked to stop.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Asks a follower to stop; cheap to share.
#[derive(Debug, Default)]
pub struct StopSignal {
    requested: AtomicBool,
    notify: Notify,
}

impl StopSignal {
    /// Asks the follower to stop: the round in progress commits, no other
    /// starts.
    pub fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Returns once a stop is asked for (at once if it was already).
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.requested() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_stop_requested_before_waiting_is_seen_at_once() {
        let stop = StopSignal::default();
        stop.request();
        tokio::time::timeout(Duration::from_secs(1), stop.wait())
            .await
            .expect("wait returns when the stop was already requested");
    }
}
