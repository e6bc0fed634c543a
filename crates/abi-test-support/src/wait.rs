//! Bounded polling and unique names.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often [`wait_until`] re-checks its condition.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// [`wait_until`]'s condition did not hold before the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimedOut(pub Duration);

impl std::fmt::Display for WaitTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "condition not met within {:?}", self.0)
    }
}

impl std::error::Error for WaitTimedOut {}

/// Polls `condition` (every 20 ms) until it returns `true`, or fails once
/// `timeout` has passed.
///
/// Time is tokio's clock, so under `start_paused = true` the deadline is in
/// virtual time (and idle polls advance it).
///
/// # Errors
///
/// [`WaitTimedOut`] when the condition still does not hold at the deadline.
///
/// # Cancel safety
///
/// Cancel safe as long as `condition` is: dropping the future just stops
/// polling.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
/// let ready = std::sync::atomic::AtomicBool::new(true);
/// abi_test_support::wait_until(Duration::from_secs(30), || async {
///     ready.load(std::sync::atomic::Ordering::SeqCst)
/// })
/// .await
/// .unwrap();
/// # }
/// ```
pub async fn wait_until<F, Fut>(timeout: Duration, mut condition: F) -> Result<(), WaitTimedOut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(WaitTimedOut(timeout));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// A name unique among concurrent tests: `<prefix>_<pid>_<counter>_<nanos>`,
/// made only of `[A-Za-z0-9_]` (valid as a bucket, stream or project name;
/// keep `prefix` to those characters too).
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}_{}_{n}_{nanos}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ() {
        let a = unique_name("t");
        let b = unique_name("t");
        assert_ne!(a, b);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_until_times_out() {
        let result = wait_until(Duration::from_secs(1), || async { false }).await;
        assert_eq!(result, Err(WaitTimedOut(Duration::from_secs(1))));
    }
}
