//! The shutdown budget: one deadline from the stop request to the runner's
//! return, shared by the steps of a stop in order of importance.
//!
//! Work in flight comes first: it may use the budget up to a small reserve
//! (and no more than the drain timeout). What is left goes to the steps
//! that only tidy up (the draining renewal, unregistering, the last NATS
//! flush), each capped at [`STEP_CAP`] so that one slow call cannot eat the
//! time of the next. A step that finds no time left is skipped: the lease
//! then expires on its own, which is what a killed process would leave too.

use std::time::Duration;

use tokio::time::Instant;

/// The longest one tidy-up step (a discovery call, the flush) may take. A
/// discovery call answers in milliseconds when the service is up; while it
/// is not, the transport resends for up to 5 s, which a stop cannot afford.
pub(super) const STEP_CAP: Duration = Duration::from_secs(2);

/// The deadline of one stop.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    started: Instant,
    deadline: Instant,
    /// Kept back from work in flight for unregistering and flushing.
    reserve: Duration,
}

impl Budget {
    /// A budget of `grace` starting now.
    pub(super) fn start(grace: Duration) -> Self {
        let started = Instant::now();
        Self {
            started,
            deadline: started + grace,
            reserve: STEP_CAP.min(grace / 4),
        }
    }

    /// When everything must be done.
    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// How long the stop has taken so far.
    pub(super) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// When waiting for work in flight ends: the budget less the reserve,
    /// and never later than `drain_timeout` from the start.
    pub(super) fn work_deadline(&self, drain_timeout: Duration) -> Instant {
        (self.deadline - self.reserve).min(self.started + drain_timeout)
    }

    /// When closing the hosts ends: the budget less the reserve, so that
    /// `on_unloaded` and the tidy-up steps keep some time.
    pub(super) fn hosts_deadline(&self) -> Instant {
        self.deadline - self.reserve
    }

    /// The time one tidy-up step may take now: at most [`STEP_CAP`] and
    /// never more than what is left; `None` once nothing is left.
    pub(super) fn step(&self) -> Option<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        (!left.is_zero()).then(|| left.min(STEP_CAP))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_gets_the_budget_less_a_reserve_and_steps_share_the_rest() {
        let budget = Budget::start(Duration::from_secs(8));
        let start = Instant::now();
        assert_eq!(
            budget.work_deadline(Duration::from_secs(300)) - start,
            Duration::from_secs(6)
        );
        assert_eq!(
            budget.work_deadline(Duration::from_secs(1)) - start,
            Duration::from_secs(1)
        );
        assert_eq!(budget.hosts_deadline() - start, Duration::from_secs(6));
        assert_eq!(budget.step(), Some(STEP_CAP));
        tokio::time::advance(Duration::from_millis(7500)).await;
        assert_eq!(budget.step(), Some(Duration::from_millis(500)));
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(budget.step(), None);
        assert_eq!(budget.elapsed(), Duration::from_secs(8));

        // A small budget keeps a quarter back.
        let small = Budget::start(Duration::from_secs(2));
        assert_eq!(
            small.work_deadline(Duration::from_secs(300)) - Instant::now(),
            Duration::from_millis(1500)
        );
    }
}
