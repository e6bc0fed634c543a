//! The child runs an attempt waits for, and what the attempt's end does to
//! them (the reference's `FlowContext.finish`): a run that ends for good
//! without its output (cancelled, or its last attempt failed or timed out)
//! cancels the children it still waited for, so they free their slots; an
//! attempt that will be retried, or handed back, leaves them running, and
//! the next attempt re-attaches to them through the journal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use abi_jobs::{JobRun, StopReason};
use abi_wire::jobs::RunStatus;

/// How an attempt of a workflow run ended, as far as its children care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    /// The handler returned its output.
    Succeeded,
    /// The handler failed; `last` when no attempt follows (a permanent
    /// error, or the last attempt).
    Failed {
        /// Whether the run ends with this attempt.
        last: bool,
    },
    /// The attempt passed the job's timeout; `last` as for `Failed`.
    TimedOut {
        /// Whether the run ends with this attempt.
        last: bool,
    },
    /// A caller cancelled the run.
    Cancelled,
    /// The host handed the run back (shutting down): it runs again elsewhere.
    HandedBack,
    /// Another attempt took the run over, or the handler was stopped for a
    /// reason this version does not know: the children are someone else's.
    Abandoned,
}

impl AttemptEnd {
    /// The end of an attempt asked to stop for `reason` (`None`: the handler
    /// returned on its own, `failed` telling how, `last` whether no attempt
    /// follows a failure).
    pub fn of(reason: Option<StopReason>, failed: bool, last: bool) -> Self {
        match reason {
            None if failed => Self::Failed { last },
            None => Self::Succeeded,
            Some(StopReason::Cancel) => Self::Cancelled,
            Some(StopReason::HandBack) => Self::HandedBack,
            Some(StopReason::Timeout) => Self::TimedOut { last },
            Some(_) => Self::Abandoned,
        }
    }

    /// The error journaled on the calls still waiting when their children
    /// are cancelled; `None` when the children stay.
    pub fn stops_children(self) -> Option<String> {
        let ended = |status: RunStatus| format!("The parent run ended {}", status.as_str());
        match self {
            Self::Cancelled => Some("The parent run was cancelled".to_owned()),
            Self::Failed { last: true } => Some(ended(RunStatus::Failed)),
            Self::TimedOut { last: true } => Some(ended(RunStatus::TimedOut)),
            Self::Succeeded
            | Self::Failed { last: false }
            | Self::TimedOut { last: false }
            | Self::HandedBack
            | Self::Abandoned => None,
        }
    }
}

/// The child runs an attempt waits for, by the key of their call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Children(Arc<Mutex<HashMap<String, JobRun>>>);

impl Children {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, JobRun>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that the call `key` waits for `run`.
    pub(crate) fn waiting(&self, key: &str, run: JobRun) {
        self.lock().insert(key.to_owned(), run);
    }

    /// Notes that the call `key` is done waiting.
    pub(crate) fn done(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Every child still waited for, removed from the registry.
    pub(crate) fn take(&self) -> Vec<(String, JobRun)> {
        self.lock().drain().collect()
    }

    /// Whether no child is waited for.
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_run_ending_for_good_cancels_its_children() {
        let rows = [
            (None, false, false, None),
            (None, true, false, None),
            (None, true, true, Some("The parent run ended FAILED")),
            (
                Some(StopReason::Cancel),
                false,
                false,
                Some("The parent run was cancelled"),
            ),
            (
                Some(StopReason::Cancel),
                true,
                true,
                Some("The parent run was cancelled"),
            ),
            (Some(StopReason::HandBack), true, true, None),
            (Some(StopReason::Timeout), true, false, None),
            (
                Some(StopReason::Timeout),
                true,
                true,
                Some("The parent run ended TIMED_OUT"),
            ),
        ];
        for (reason, failed, last, expected) in rows {
            let end = AttemptEnd::of(reason, failed, last);
            assert_eq!(
                end.stops_children().as_deref(),
                expected,
                "{reason:?} failed={failed} last={last}"
            );
        }
        assert_eq!(AttemptEnd::Abandoned.stops_children(), None);
    }
}
