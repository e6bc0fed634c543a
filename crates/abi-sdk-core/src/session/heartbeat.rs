//! The renewal loop: renews on the reference's schedule until a failure no
//! retry can fix, counts outcomes for the health summary, and marks the
//! instance unavailable while renewals fail.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::lease::Lease;
use super::{SessionError, SessionErrorKind};
use crate::error::{CallError, CallErrorKind};
use crate::status::Status;

/// What the renewal loop drives: one attempt at a time, the schedule, and
/// how a failure shows. A trait so the loop runs on a paused clock in tests.
trait Renewal: Send + Sync + 'static {
    fn attempt(&self) -> impl Future<Output = Result<Status, CallError>> + Send;
    fn delay(&self, failures: u32) -> Duration;
    fn failed(&self);
    fn instance_id(&self) -> &str;
    /// Zero: no summary.
    fn summary_interval(&self) -> Duration;
    fn summary(&self, tally: &Tally, now: Instant);
}

impl Renewal for Lease {
    fn attempt(&self) -> impl Future<Output = Result<Status, CallError>> + Send {
        self.renew_or_register()
    }

    fn delay(&self, failures: u32) -> Duration {
        self.next_delay(failures)
    }

    fn failed(&self) {
        self.mark_unavailable();
    }

    fn instance_id(&self) -> &str {
        &self.instance_id
    }

    fn summary_interval(&self) -> Duration {
        self.state().summary_interval
    }

    fn summary(&self, tally: &Tally, now: Instant) {
        let status = self.status();
        info!(
            instance_id = %self.instance_id,
            renewals_ok = tally.ok,
            renewals_failed = tally.failed,
            success_rate = tally.success_rate(),
            secs_since_last_success = now.saturating_duration_since(tally.last_ok).as_secs_f64(),
            status = %status,
            "lease health (renewals since the session started)"
        );
    }
}

/// Starts the renewal loop of `lease`, registered just now.
pub(super) fn spawn(lease: Arc<Lease>) -> JoinHandle<SessionError> {
    tokio::spawn(heartbeat(lease))
}

/// Renews until a failure no retry can fix, and returns it.
///
/// `LEASE_EXPIRED` is handled inside an attempt (a fresh registration); here
/// it only counts as a failure when registering again failed too.
///
/// After a renewal, once the summary interval passed since the last summary
/// (or the start), logs the counts since the start.
async fn heartbeat<R: Renewal>(lease: Arc<R>) -> SessionError {
    let mut failures = 0u32;
    let mut tally = Tally::new(Instant::now());
    let mut last_summary = Instant::now();
    loop {
        tokio::time::sleep(lease.delay(failures)).await;
        let outcome = lease.attempt().await;
        let now = Instant::now();
        tally.record(outcome.is_ok(), now);
        let interval = lease.summary_interval();
        if !interval.is_zero() && now.saturating_duration_since(last_summary) >= interval {
            lease.summary(&tally, now);
            last_summary = now;
        }
        match outcome {
            Ok(_) => failures = 0,
            Err(err) if err.is_retryable() || err.kind() == CallErrorKind::LeaseExpired => {
                lease.failed();
                failures = failures.saturating_add(1);
                warn!(instance_id = %lease.instance_id(), error = %err, failures, "lease renewal will retry");
            }
            Err(err) => {
                lease.failed();
                error!(instance_id = %lease.instance_id(), error = %err, "lease renewal cannot recover");
                return SessionError::new(
                    SessionErrorKind::Renew,
                    "discovery refused the lease renewal",
                )
                .with_source(err);
            }
        }
    }
}

/// Renewal outcomes since the renewal loop started, for the health summary.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tally {
    ok: u64,
    failed: u64,
    /// The last successful renewal, or the start of the loop (the lease was
    /// just confirmed by the registration).
    last_ok: Instant,
}

impl Tally {
    fn new(now: Instant) -> Self {
        Self {
            ok: 0,
            failed: 0,
            last_ok: now,
        }
    }

    fn record(&mut self, ok: bool, now: Instant) {
        if ok {
            self.ok = self.ok.saturating_add(1);
            self.last_ok = now;
        } else {
            self.failed = self.failed.saturating_add(1);
        }
    }

    /// Successful renewals over all renewals, 1.0 before the first one.
    fn success_rate(&self) -> f64 {
        let total = self.ok.saturating_add(self.failed);
        if total == 0 {
            1.0
        } else {
            self.ok as f64 / total as f64
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;
    use crate::schedule;
    use crate::session::DEFAULT_HEALTH_SUMMARY_INTERVAL;

    /// A lease of 20 s whose attempts follow a script and are timed.
    struct Scripted {
        outcomes: Mutex<VecDeque<Result<Status, CallErrorKind>>>,
        attempts: Mutex<Vec<Instant>>,
        confirmed_until: Mutex<Instant>,
        unavailable: Mutex<usize>,
        summary_interval: Duration,
        summaries: Mutex<Vec<(Tally, Instant)>>,
    }

    const LEASE: Duration = Duration::from_secs(20);

    impl Renewal for Scripted {
        fn attempt(&self) -> impl Future<Output = Result<Status, CallError>> + Send {
            let now = Instant::now();
            self.attempts.lock().unwrap().push(now);
            let outcome = self
                .outcomes
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Ok(Status::Ready));
            if outcome.is_ok() {
                *self.confirmed_until.lock().unwrap() = now + LEASE;
            }
            async move { outcome.map_err(|kind| CallError::new(kind, "scripted")) }
        }

        fn delay(&self, failures: u32) -> Duration {
            let left = self
                .confirmed_until
                .lock()
                .unwrap()
                .saturating_duration_since(Instant::now());
            schedule::renew_delay(LEASE, failures, Some(left), schedule::jitter())
        }

        fn failed(&self) {
            *self.unavailable.lock().unwrap() += 1;
        }

        fn instance_id(&self) -> &str {
            "i"
        }

        fn summary_interval(&self) -> Duration {
            self.summary_interval
        }

        fn summary(&self, tally: &Tally, now: Instant) {
            self.summaries.lock().unwrap().push((*tally, now));
        }
    }

    fn scripted(outcomes: Vec<Result<Status, CallErrorKind>>) -> Arc<Scripted> {
        scripted_with_summary(outcomes, DEFAULT_HEALTH_SUMMARY_INTERVAL)
    }

    fn scripted_with_summary(
        outcomes: Vec<Result<Status, CallErrorKind>>,
        summary_interval: Duration,
    ) -> Arc<Scripted> {
        Arc::new(Scripted {
            outcomes: Mutex::new(outcomes.into()),
            attempts: Mutex::default(),
            confirmed_until: Mutex::new(Instant::now() + LEASE),
            unavailable: Mutex::default(),
            summary_interval,
            summaries: Mutex::default(),
        })
    }

    fn gaps(lease: &Scripted) -> Vec<f64> {
        let attempts = lease.attempts.lock().unwrap();
        attempts
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect()
    }

    fn near(actual: f64, expected: f64) -> bool {
        (expected * 0.9 - 1e-3..=expected * 1.1 + 1e-3).contains(&actual)
    }

    #[tokio::test(start_paused = true)]
    async fn healthy_renewals_every_five_seconds_and_backoff_within_the_lease() {
        use CallErrorKind::*;
        let lease = scripted(vec![
            Ok(Status::Ready),
            Err(Unavailable),
            Err(RegistryBusy),
            Ok(Status::Ready),
            Ok(Status::Ready),
        ]);
        let started = Instant::now();
        let task = tokio::spawn(heartbeat(lease.clone()));
        // Let the paused clock run through the script and one more attempt.
        tokio::time::sleep(Duration::from_secs(40)).await;
        task.abort();
        let first = (lease.attempts.lock().unwrap()[0] - started).as_secs_f64();
        assert!(near(first, 5.0), "first renewal after {first}");
        let gaps = gaps(&lease);
        // Renewed at ~5 s, so the lease runs to ~25 s. The failure at ~10 s
        // would double the wait to ~10 s, but half of the ~15 s left caps it
        // (7.5 s); the next failure gets half of what is left then.
        assert!(near(gaps[0], 5.0), "{gaps:?}");
        assert!((gaps[1] - (20.0 - gaps[0]) / 2.0).abs() < 1e-3, "{gaps:?}");
        assert!((gaps[2] - gaps[1] / 2.0).abs() < 1e-3, "{gaps:?}");
        assert!(
            near(gaps[3], 5.0),
            "back to healthy after a success: {gaps:?}"
        );
        assert_eq!(*lease.unavailable.lock().unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_lease_backs_off_by_half_a_lease_without_spinning() {
        let lease = scripted(vec![Err(CallErrorKind::TimedOut); 6]);
        let task = tokio::spawn(heartbeat(lease.clone()));
        tokio::time::sleep(Duration::from_secs(120)).await;
        task.abort();
        let gaps = gaps(&lease);
        assert!(gaps.len() >= 4, "{gaps:?}");
        // Once the lease passed, each wait is the backoff capped at half a lease.
        for gap in &gaps[2..] {
            assert!((0.05..=10.0 + 1e-3).contains(gap), "{gaps:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_code_no_retry_can_fix_ends_the_loop() {
        let lease = scripted(vec![
            Ok(Status::Ready),
            Err(CallErrorKind::PermissionDenied),
        ]);
        let err = tokio::time::timeout(Duration::from_secs(60), heartbeat(lease.clone()))
            .await
            .unwrap();
        assert_eq!(err.kind(), SessionErrorKind::Renew);
        assert_eq!(lease.attempts.lock().unwrap().len(), 2);
        assert_eq!(*lease.unavailable.lock().unwrap(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn lease_expired_after_a_failed_registration_is_retried() {
        let lease = scripted(vec![Err(CallErrorKind::LeaseExpired), Ok(Status::Starting)]);
        let task = tokio::spawn(heartbeat(lease.clone()));
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!task.is_finished());
        task.abort();
        assert!(lease.attempts.lock().unwrap().len() >= 3);
    }

    #[tokio::test(start_paused = true)]
    async fn the_health_summary_counts_renewals_since_the_start() {
        use CallErrorKind::*;
        // ok, fail, fail, ok, then ok forever.
        let lease = scripted_with_summary(
            vec![
                Ok(Status::Ready),
                Err(Unavailable),
                Err(TimedOut),
                Ok(Status::Ready),
            ],
            Duration::from_secs(60),
        );
        let started = Instant::now();
        let task = tokio::spawn(heartbeat(lease.clone()));
        tokio::time::sleep(Duration::from_secs(150)).await;
        task.abort();
        let summaries = lease.summaries.lock().unwrap().clone();
        let attempts = lease.attempts.lock().unwrap().clone();
        // A summary at the first renewal a minute or more after the last one
        // (or the start); healthy renewals are at most ~5.5 s apart.
        assert_eq!(summaries.len(), 2, "{summaries:?}");
        let mut previous = started;
        for (tally, at) in &summaries {
            let gap = (*at - previous).as_secs_f64();
            assert!((60.0..66.0).contains(&gap), "{gap}");
            previous = *at;
            let so_far = attempts.iter().filter(|a| **a <= *at).count() as u64;
            assert_eq!(tally.ok + tally.failed, so_far, "{tally:?}");
            assert_eq!(tally.failed, 2, "{tally:?}");
            assert!((tally.success_rate() - (so_far - 2) as f64 / so_far as f64).abs() < 1e-9);
            // The summary follows a successful renewal.
            assert_eq!(tally.last_ok, *at);
        }
        // A zero interval turns the summary off.
        let quiet = scripted_with_summary(vec![], Duration::ZERO);
        let task = tokio::spawn(heartbeat(quiet.clone()));
        tokio::time::sleep(Duration::from_secs(120)).await;
        task.abort();
        assert!(quiet.summaries.lock().unwrap().is_empty());
        assert!(quiet.attempts.lock().unwrap().len() > 10);
    }

    #[test]
    fn tally_reports_time_since_the_last_success_and_the_rate() {
        let start = Instant::now();
        let mut tally = Tally::new(start);
        assert_eq!(tally.success_rate(), 1.0);
        tally.record(true, start + Duration::from_secs(5));
        tally.record(false, start + Duration::from_secs(10));
        tally.record(false, start + Duration::from_secs(15));
        tally.record(true, start + Duration::from_secs(20));
        tally.record(false, start + Duration::from_secs(25));
        assert_eq!((tally.ok, tally.failed), (2, 3));
        assert!((tally.success_rate() - 0.4).abs() < 1e-9);
        assert_eq!(tally.last_ok, start + Duration::from_secs(20));
    }
}
