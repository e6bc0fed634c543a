//! [`Stopping`]: the one shutdown idiom of every host. Two tokens and a
//! tracker: `accepting` is cancelled when the host stops taking new work
//! (drain), `closed` when everything must stop (close), and `work` tracks
//! the work in flight that a drain waits for.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use tokio_util::task::TaskTracker;

/// Where a host is on its way down.
#[derive(Debug, Default)]
pub struct Stopping {
    accepting: CancellationToken,
    closed: CancellationToken,
    work: TaskTracker,
}

impl Stopping {
    /// A host taking work.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether new work is taken.
    pub fn accepting(&self) -> bool {
        !self.accepting.is_cancelled()
    }

    /// Stops taking new work (a drain or a close).
    pub fn stop_accepting(&self) {
        self.accepting.cancel();
    }

    /// Resolves once the host stopped taking new work. Cancel safe.
    pub fn stopped_accepting(&self) -> WaitForCancellationFuture<'_> {
        self.accepting.cancelled()
    }

    /// Stops everything: no new work, and loops and retries give up.
    pub fn close(&self) {
        self.accepting.cancel();
        self.closed.cancel();
    }

    /// Whether the host closed.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves once the host closed. Cancel safe.
    pub fn closed(&self) -> WaitForCancellationFuture<'_> {
        self.closed.cancelled()
    }

    /// The work in flight: spawn it here so a drain waits for it.
    pub fn work(&self) -> &TaskTracker {
        &self.work
    }

    /// Waits for the work in flight (work spawned meanwhile counts too)
    /// until `deadline`; true when it all ended. Cancel safe: it only waits.
    pub async fn settled_by(&self, deadline: Instant) -> bool {
        self.work.close();
        tokio::time::timeout_at(deadline, self.work.wait())
            .await
            .is_ok()
    }

    /// [`Stopping::settled_by`] `within` from now.
    pub async fn settled_within(&self, within: Duration) -> bool {
        self.settled_by(Instant::now() + within).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn draining_stops_new_work_and_waits_for_the_work_in_flight() {
        let stopping = Stopping::new();
        assert!(stopping.accepting() && !stopping.is_closed());
        let release = CancellationToken::new();
        let gate = release.clone();
        stopping.work().spawn(async move { gate.cancelled().await });
        stopping.stop_accepting();
        assert!(!stopping.accepting() && !stopping.is_closed());
        assert!(
            !stopping.settled_within(Duration::from_secs(1)).await,
            "still working"
        );
        release.cancel();
        assert!(stopping.settled_within(Duration::from_secs(1)).await);
        stopping.close();
        assert!(stopping.is_closed());
        stopping.closed().await;
        stopping.stopped_accepting().await;
    }
}
