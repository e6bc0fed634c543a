//! What a handler gets ([`JobContext`]) and returns ([`JobResult`]).

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// Most log lines a run keeps (the reference's).
pub const MAX_LOG_LINES: usize = 200;
/// Longest log line kept, in characters (the reference's).
pub const MAX_LOG_LINE_CHARS: usize = 2000;

/// What a handler returns: its result (any JSON) or why it failed.
pub type JobResult = Result<serde_json::Value, JobError>;

/// Whether another attempt could do better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobErrorKind {
    /// Retried while attempts remain.
    Retryable,
    /// Fails the run now, whatever attempts remain (the reference's `NonRetryable`).
    NonRetryable,
}

/// A handler's failure, recorded as `"<type_name>: <message>"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{type_name}: {message}")]
pub struct JobError {
    kind: JobErrorKind,
    type_name: String,
    message: String,
}

impl JobError {
    /// A retryable failure named `type_name` (the reference records the
    /// exception's class name there).
    pub fn new(type_name: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: JobErrorKind::Retryable,
            type_name: type_name.into(),
            message: message.into(),
        }
    }

    /// A retryable failure of type `Error`.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::new("Error", message)
    }

    /// A failure no attempt would fix, of type `NonRetryable`.
    pub fn non_retryable(message: impl Into<String>) -> Self {
        Self::new("NonRetryable", message).permanent()
    }

    /// The same failure, not retried.
    #[must_use]
    pub fn permanent(mut self) -> Self {
        self.kind = JobErrorKind::NonRetryable;
        self
    }

    /// Whether it is retried.
    pub fn kind(&self) -> JobErrorKind {
        self.kind
    }
}

/// One attempt of one run, as its handler sees it. Cheap to clone: one
/// reference count (the host hands its handler a clone of every run's).
#[derive(Clone, Debug)]
pub struct JobContext {
    run: Arc<Attempt>,
}

/// What a [`JobContext`] shares between its clones.
#[derive(Clone, Debug)]
struct Attempt {
    run_id: String,
    job: String,
    attempt: u32,
    trigger: serde_json::Value,
    payload: serde_json::Value,
    cancelled: CancellationToken,
    notes: Arc<Mutex<Notes>>,
    host: Option<RunHost>,
}

/// What a run can reach of the host running it: workflows journal their
/// steps through it ([`JobContext::host`]).
#[derive(Clone, Debug)]
pub struct RunHost {
    /// The host module's NATS connection.
    pub nats: async_nats::Client,
    /// The host module's documents (its own namespace).
    pub documents: abi_sdk_core::DocumentClient,
    /// The project.
    pub project: String,
    /// The module serving the job.
    pub module_id: String,
    /// When the stream stored the run's trigger (ISO text, the record's
    /// `fired_at`): what tells this trigger's journal from an older one.
    pub fired_at: String,
    /// The job as its host serves it: `max_attempts` (whether a failed
    /// attempt is the run's last), its schemas.
    pub spec: std::sync::Arc<crate::JobSpec>,
    /// Whether this attempt created the run's record. Every attempt, ours
    /// or the reference's, writes the record before its handler runs, so a
    /// record this attempt created means no attempt of the run ran before:
    /// it has journaled nothing for this trigger.
    pub first_record: bool,
}

/// What a run wrote down while it ran.
#[derive(Debug, Default)]
pub(crate) struct Notes {
    pub(crate) logs: Vec<String>,
    pub(crate) skipped: Option<String>,
    pub(crate) stop: Option<StopReason>,
}

/// Why a run was asked to stop ([`JobContext::stop_reason`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// A caller cancelled the run: it ends CANCELLED.
    Cancel,
    /// Its host is shutting down and hands it back: it runs again elsewhere,
    /// the attempt given back (save what lets the next attempt resume).
    HandBack,
    /// The attempt passed the job's timeout: it ends TIMED_OUT (retried
    /// while attempts are left).
    Timeout,
}

impl JobContext {
    /// A context for tests and for hosts.
    pub fn new(
        run_id: impl Into<String>,
        job: impl Into<String>,
        attempt: u32,
        trigger: serde_json::Value,
        payload: serde_json::Value,
    ) -> Self {
        Self {
            run: Arc::new(Attempt {
                run_id: run_id.into(),
                job: job.into(),
                attempt,
                trigger,
                payload,
                cancelled: CancellationToken::new(),
                notes: Arc::default(),
                host: None,
            }),
        }
    }

    /// The same context, running on `host` (what a host does before it calls
    /// the handler; a test may too).
    #[must_use]
    pub fn on_host(mut self, host: RunHost) -> Self {
        // A context not cloned yet (the host's case) is changed in place; a
        // cloned one is copied first, sharing its cancel token and notes.
        Arc::make_mut(&mut self.run).host = Some(host);
        self
    }

    /// The host running this attempt, `None` for a context made by hand.
    pub fn host(&self) -> Option<&RunHost> {
        self.run.host.as_ref()
    }

    /// The run id, `<job>:<stream sequence>`.
    pub fn run_id(&self) -> &str {
        &self.run.run_id
    }

    /// The job's name.
    pub fn job(&self) -> &str {
        &self.run.job
    }

    /// This attempt, from 1.
    pub fn attempt(&self) -> u32 {
        self.run.attempt
    }

    /// `{"kind": "manual"|"schedule"|"event"[, "scheduler": <subject>]}`.
    pub fn trigger(&self) -> &serde_json::Value {
        &self.run.trigger
    }

    /// The trigger's payload, always a JSON object.
    pub fn payload(&self) -> &serde_json::Value {
        &self.run.payload
    }

    /// Cancelled when the run should stop: a caller cancelled it, it timed
    /// out, or its host hands it back while shutting down
    /// ([`JobContext::stop_reason`] says which).
    pub fn cancelled(&self) -> &CancellationToken {
        &self.run.cancelled
    }

    /// Why the run was asked to stop, once it was (`None` before): the
    /// first reason given wins.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.lock().stop
    }

    /// Asks the run to stop for `reason` (kept unless one was given before).
    pub(crate) fn stop(&self, reason: StopReason) {
        self.lock().stop.get_or_insert(reason);
        self.run.cancelled.cancel();
    }

    /// Adds a line to the run's logs (at most 200 lines of 2000 characters
    /// are kept; saved with every heartbeat and at the end).
    pub fn log(&self, line: impl Into<String>) {
        let line: String = line.into().chars().take(MAX_LOG_LINE_CHARS).collect();
        let mut notes = self.lock();
        if notes.logs.len() >= MAX_LOG_LINES {
            notes.logs.remove(0);
        }
        notes.logs.push(line);
    }

    /// Ends the run as SKIPPED (once the handler returns) with `reason`.
    pub fn skip(&self, reason: impl Into<String>) {
        self.lock().skipped = Some(reason.into());
    }

    pub(crate) fn logs(&self) -> Vec<String> {
        self.lock().logs.clone()
    }

    /// The reason the handler gave [`JobContext::skip`], once it did.
    pub fn skipped(&self) -> Option<String> {
        self.lock().skipped.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Notes> {
        // A panic while holding this lock leaves plain data: keep using it.
        self.run
            .notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A job's handler: an async function of its [`JobContext`].
pub trait JobHandler: Send + Sync + 'static {
    /// Runs one attempt.
    fn call(&self, cx: JobContext) -> BoxFuture<'static, JobResult>;
}

impl<F, Fut> JobHandler for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
{
    fn call(&self, cx: JobContext) -> BoxFuture<'static, JobResult> {
        Box::pin(self(cx))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_first_stop_reason_is_kept() {
        let cx = JobContext::new("j:1", "j", 1, serde_json::json!({}), serde_json::json!({}));
        assert_eq!(cx.stop_reason(), None);
        cx.stop(StopReason::HandBack);
        cx.stop(StopReason::Cancel);
        assert!(cx.cancelled().is_cancelled());
        assert_eq!(cx.stop_reason(), Some(StopReason::HandBack));
    }

    #[test]
    fn logs_keep_the_last_200_lines_and_errors_read_as_the_references() {
        let cx = JobContext::new("j:1", "j", 1, serde_json::json!({}), serde_json::json!({}));
        for i in 0..205 {
            cx.log(format!("{i}"));
        }
        cx.log("x".repeat(3000));
        let logs = cx.logs();
        assert_eq!(logs.len(), 200);
        assert_eq!(logs[0], "6");
        assert_eq!(logs[199].len(), 2000);
        assert_eq!(
            JobError::new("ValueError", "bad").to_string(),
            "ValueError: bad"
        );
        assert_eq!(
            JobError::non_retryable("no").kind(),
            JobErrorKind::NonRetryable
        );
    }
}
