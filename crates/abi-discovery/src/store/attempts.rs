//! Store calls under one deadline, made of short attempts.
//!
//! On a JetStream cluster a request sent while a stream elects a new leader
//! (or while the client reconnects to another server) is not refused: it is
//! never answered. Waiting the whole store deadline on such a request and
//! then giving up turned a leader election of ~6 s into a write outage of
//! ~10 s (two deadlines in a row). Instead every store call is a series of
//! attempts, each bounded by [`ATTEMPT_TIMEOUT`], retried after a short pause
//! until the call's overall deadline: the first attempt sent after the new
//! leader is elected succeeds, so writes resume within about one attempt of
//! the election.
//!
//! Only idempotent requests go through [`retry`]; the compare-and-swap, whose
//! retry needs care, uses [`Deadline`] and [`pause`] itself.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::StoreError;

/// Longest wait for one attempt. A healthy JetStream answers in about a
/// millisecond, and a loaded one well under this; an attempt left
/// unanswered this long was most likely sent into a leader election or a
/// dead connection, and a fresh one has a better chance.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(1000);

/// Pause before the second attempt; it doubles up to [`MAX_PAUSE`]. Short,
/// because an election ends at an unknown moment and the first attempt after
/// it should come soon.
const FIRST_PAUSE: Duration = Duration::from_millis(20);
/// Longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// The overall deadline of one store call.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    op: &'static str,
    timeout: Duration,
    at: Instant,
}

impl Deadline {
    /// A deadline `timeout` from now for operation `op`.
    pub fn after(op: &'static str, timeout: Duration) -> Self {
        Self {
            op,
            timeout,
            at: Instant::now() + timeout,
        }
    }

    /// The error reported when the deadline passed.
    pub fn timed_out(&self) -> StoreError {
        StoreError::TimedOut {
            op: self.op,
            timeout: self.timeout,
        }
    }

    /// Runs one attempt of `future`, bounded by [`ATTEMPT_TIMEOUT`] and by
    /// what is left of the deadline; `None` when it ran out of time.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `future`: dropping it drops `future`.
    pub async fn attempt<F: Future>(&self, future: F) -> Option<F::Output> {
        let left = self.at.saturating_duration_since(Instant::now());
        tokio::time::timeout(left.min(ATTEMPT_TIMEOUT), future)
            .await
            .ok()
    }

    /// Waits before attempt number `attempt + 1` (`attempt` counts from 1);
    /// false when no time is left for another attempt.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only sleeps.
    pub async fn pause(&self, attempt: u32) -> bool {
        let pause = pause_after(attempt);
        if Instant::now() + pause >= self.at {
            return false;
        }
        tokio::time::sleep(pause).await;
        true
    }
}

/// The pause after attempt number `attempt` (from 1).
fn pause_after(attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    FIRST_PAUSE.saturating_mul(1 << doublings).min(MAX_PAUSE)
}

/// Runs `call` until it succeeds or the deadline passes, each attempt bounded
/// as [`Deadline::attempt`] says. Every error is retried (a definite answer,
/// such as "no such message", is an `Ok` of the call); at the deadline the
/// last error, or [`StoreError::TimedOut`], is returned.
///
/// # Cancel safety
///
/// As cancel safe as `call`'s futures: a dropped retry drops the attempt in flight.
pub async fn retry<T, F, Fut>(deadline: &Deadline, mut call: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut attempt = 1;
    loop {
        let error = match deadline.attempt(call()).await {
            Some(Ok(value)) => return Ok(value),
            Some(Err(error)) => error,
            None => deadline.timed_out(),
        };
        if !deadline.pause(attempt).await {
            return Err(error);
        }
        tracing::debug!(op = deadline.op, attempt, %error, "store call retried");
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap() {
        assert_eq!(pause_after(1), FIRST_PAUSE);
        assert_eq!(pause_after(2), FIRST_PAUSE * 2);
        assert_eq!(pause_after(50), MAX_PAUSE);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_attempt_is_abandoned_and_the_next_one_succeeds() {
        let calls = AtomicU32::new(0);
        let started = Instant::now();
        let deadline = Deadline::after("read", Duration::from_secs(5));
        let value = retry(&deadline, || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                std::future::pending::<()>().await;
            }
            Ok(7)
        })
        .await
        .unwrap();
        assert_eq!(value, 7);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        // Two abandoned attempts and two pauses, far less than the deadline.
        assert_eq!(
            started.elapsed(),
            ATTEMPT_TIMEOUT * 2 + pause_after(1) + pause_after(2)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_bounds_the_whole_call() {
        let started = Instant::now();
        let deadline = Deadline::after("read", Duration::from_millis(2500));
        let error = retry(&deadline, || async {
            std::future::pending::<Result<(), StoreError>>().await
        })
        .await
        .unwrap_err();
        assert!(matches!(error, StoreError::TimedOut { op: "read", .. }));
        assert!(started.elapsed() <= Duration::from_millis(2500));
    }

    #[tokio::test(start_paused = true)]
    async fn errors_are_retried_until_the_deadline_and_the_last_one_is_kept() {
        let calls = AtomicU32::new(0);
        let deadline = Deadline::after("read", Duration::from_secs(1));
        let error = retry(&deadline, || async {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(StoreError::backend("read", format!("refused {n}")))
        })
        .await
        .unwrap_err();
        let n = calls.load(Ordering::SeqCst);
        assert!(n > 3, "{n}");
        assert!(
            std::error::Error::source(&error)
                .unwrap()
                .to_string()
                .ends_with(&(n - 1).to_string())
        );
    }
}
