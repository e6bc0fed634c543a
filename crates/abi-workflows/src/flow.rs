//! [`FlowContext`]: a workflow run's context, a [`JobContext`] plus durable
//! steps. A step that succeeded in an earlier attempt of the run returns its
//! stored result without running again; the reference's `FlowContext.step`,
//! with its journal, messages and error types.

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi_jobs::time::now_iso;
use abi_jobs::{JobContext, JobError};
use abi_pyjson::python_str_repr;
use abi_sdk_core::CallError;
use abi_wire::workflows::{StepKind, StepStatus, check_step_key, error_type};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tracing::warn;

use crate::children::Children;
use crate::journal::{self, Finish};
use crate::result::{StepResultError, encode_result};
use crate::store::StepStore;

/// Why a workflow handler or context cannot run off a host.
pub(crate) const NO_RUNTIME: &str = "A FlowContext needs the runtime of its host";

/// Local retries of one step: how many more tries follow a failure, and the
/// first pause (doubling after each try; the reference's `backoff`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepOptions {
    /// Tries after the first (default 0).
    pub retries: u32,
    /// The pause before the first retry (default 1 s).
    pub backoff: Duration,
    /// Store a result above 256 KiB of JSON (up to 256 MiB) in the
    /// claim-check object store instead of failing the step (default off,
    /// the reference's `StepResultTooLarge`). Ours only: a Python host finds
    /// no stored result for such a step and runs it again (where a result
    /// this large fails), so keep a workflow that opts in on Rust hosts.
    pub large_results: bool,
}

impl Default for StepOptions {
    fn default() -> Self {
        Self {
            retries: 0,
            backoff: Duration::from_secs(1),
            large_results: false,
        }
    }
}

/// Why a step did not return a value. Each becomes the run's error as the
/// reference records it (`<type>: <message>`), through `JobError::from`.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// A bad or repeated step key (`StepKeyError`, not retried).
    #[error("{}: {}", error_type::STEP_KEY, .0)]
    Key(String),
    /// The run was cancelled (`WorkflowCancelled`).
    #[error("{}: Run {} was cancelled", error_type::CANCELLED, .0)]
    Cancelled(String),
    /// The result cannot be journaled (`StepResultTooLarge`,
    /// `StepResultNotJSON`; not retried).
    #[error("{type_name}: {message}")]
    Result {
        /// The reference's exception name.
        type_name: &'static str,
        /// Its message.
        message: String,
    },
    /// The journal could not be read or written (the run is retried).
    #[error("{}: {}", error_type::JOURNAL, .0)]
    Journal(#[from] CallError),
    /// A workflow called itself (`SelfCall`, not retried).
    #[error("{}: {}", error_type::SELF_CALL, .0)]
    SelfCall(String),
    /// A call's child run ended without succeeding (`ChildRunFailed`: the
    /// parent's attempt fails, and a retry calls again).
    #[error("{}: {}", error_type::CHILD_RUN_FAILED, .0)]
    ChildFailed(String),
    /// A call's child run succeeded with an output its host truncated
    /// (`ChildOutputTruncated`, not retried).
    #[error("{}: {}", error_type::CHILD_OUTPUT_TRUNCATED, .0)]
    ChildTruncated(String),
    /// A call's child run could not be triggered or its record read (the
    /// run is retried, and its next attempt finds the same child).
    #[error("{}: {}", error_type::CHILD_RUN_ERROR, .0)]
    Child(String),
    /// The step's own failure, after its local retries.
    #[error("{0}")]
    Step(JobError),
}

impl From<FlowError> for JobError {
    fn from(err: FlowError) -> Self {
        match err {
            FlowError::Step(err) => err,
            FlowError::Key(message) => JobError::new(error_type::STEP_KEY, message).permanent(),
            FlowError::Cancelled(run_id) => {
                JobError::new(error_type::CANCELLED, format!("Run {run_id} was cancelled"))
            }
            FlowError::Result { type_name, message } => {
                JobError::new(type_name, message).permanent()
            }
            FlowError::Journal(err) => JobError::new(error_type::JOURNAL, err.to_string()),
            FlowError::SelfCall(message) => {
                JobError::new(error_type::SELF_CALL, message).permanent()
            }
            FlowError::ChildFailed(message) => JobError::new(error_type::CHILD_RUN_FAILED, message),
            FlowError::ChildTruncated(message) => {
                JobError::new(error_type::CHILD_OUTPUT_TRUNCATED, message).permanent()
            }
            FlowError::Child(message) => JobError::new(error_type::CHILD_RUN_ERROR, message),
        }
    }
}

/// A workflow run's context: what its handler gets.
#[derive(Debug, Clone)]
pub struct FlowContext {
    pub(crate) job: JobContext,
    pub(crate) store: StepStore,
    used: Arc<Mutex<HashSet<String>>>,
    /// Calls made without a key so far (their keys count them).
    pub(crate) auto_calls: Arc<AtomicUsize>,
    /// The child runs this attempt waits for, by step key.
    pub(crate) children: Children,
}

impl FlowContext {
    /// The flow of `job` over its journal `store`.
    pub fn new(job: JobContext, store: StepStore) -> Self {
        Self {
            job,
            store,
            used: Arc::default(),
            auto_calls: Arc::default(),
            children: Children::default(),
        }
    }

    /// The run's job context (run id, attempt, payload, logs, cancellation).
    pub fn job(&self) -> &JobContext {
        &self.job
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        self.job.run_id()
    }

    /// Checks `key` and takes it for this run: a key names one journal entry.
    pub(crate) fn claim(&self, key: &str) -> Result<(), FlowError> {
        check_step_key(key).map_err(|err| FlowError::Key(err.to_string()))?;
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !used.insert(key.to_owned()) {
            return Err(FlowError::Key(format!(
                "Step key {} is used twice in run {}: keys name journal entries and must be unique",
                python_str_repr(key),
                self.run_id()
            )));
        }
        Ok(())
    }

    pub(crate) fn check_cancelled(&self) -> Result<(), FlowError> {
        if self.job.cancelled().is_cancelled() {
            return Err(FlowError::Cancelled(self.run_id().to_owned()));
        }
        Ok(())
    }

    /// Runs `f` once for this run, as step `key`, and journals its result
    /// ([`FlowContext::step_with`] without local retries).
    ///
    /// # Errors
    ///
    /// As [`FlowContext::step_with`].
    ///
    /// # Cancel safety
    ///
    /// As [`FlowContext::step_with`].
    pub async fn step<T, F, Fut>(&self, key: &str, f: F) -> Result<T, FlowError>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, JobError>>,
    {
        self.step_with(key, StepOptions::default(), f).await
    }

    /// Runs `f` as step `key`: a step that already succeeded for this
    /// trigger of the run returns its stored result without calling `f`;
    /// otherwise the start is journaled, `f` runs (again up to
    /// `options.retries` times after a retryable failure, pausing
    /// `backoff * 2^(n-1)`), and its result is stored before the summary
    /// says SUCCEEDED. The value returned is the stored JSON read back, the
    /// same on the first run as on a replay.
    ///
    /// # Errors
    ///
    /// [`FlowError::Key`] for a bad or repeated key; [`FlowError::Cancelled`]
    /// when the run is cancelled before or during the step (journaled
    /// CANCELLED); [`FlowError::Result`] for a result that is not JSON or
    /// above 256 KiB; [`FlowError::Step`] for `f`'s last failure (journaled
    /// FAILED: the step runs again on a retry of the run); [`FlowError::Journal`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped while `f` runs, the summary stays RUNNING
    /// and the step runs again on the next attempt (a stored result is never
    /// lost, and a SUCCEEDED summary always has one).
    pub async fn step_with<T, F, Fut>(
        &self,
        key: &str,
        options: StepOptions,
        mut f: F,
    ) -> Result<T, FlowError>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, JobError>>,
    {
        self.claim(key)?;
        self.check_cancelled()?;
        let summary = self.store.read(key).await?;
        if let Some(stored) = self.replayed(key, &summary).await? {
            return decode(key, &stored);
        }
        self.store
            .start(key, StepKind::Step, &now_iso(), false)
            .await?;
        let started = Instant::now();
        let mut failure = None;
        for n in 0..=options.retries {
            if n > 0 {
                self.store.retry(key).await?;
                let pause = options.backoff.saturating_mul(1 << (n - 1).min(20));
                if self
                    .cancelled_during(tokio::time::sleep(pause))
                    .await
                    .is_none()
                {
                    return Err(self.cancel(key, started).await);
                }
            }
            let Some(outcome) = self.cancelled_during(f()).await else {
                return Err(self.cancel(key, started).await);
            };
            let value = match outcome {
                Ok(value) => value,
                Err(err) if err.kind() == abi_jobs::JobErrorKind::NonRetryable => {
                    self.fail(key, &err.to_string(), started).await?;
                    return Err(FlowError::Step(err));
                }
                Err(err) => {
                    warn!(run_id = %self.run_id(), key, attempt = n + 1, error = %err, "step failed");
                    failure = Some(err);
                    continue;
                }
            };
            let json = match to_json(key, &value) {
                Ok(json) => json,
                Err(err) => {
                    self.fail(key, &err.to_string(), started).await?;
                    return Err(err);
                }
            };
            return self
                .succeed(key, &json, started, options.large_results)
                .await;
        }
        let err = failure.unwrap_or_else(|| JobError::retryable("the step did not run"));
        self.fail(key, &err.to_string(), started).await?;
        Err(FlowError::Step(err))
    }

    /// The stored result of a step that finished in an earlier attempt of
    /// this trigger, given its summary: SUCCEEDED with its result, or (better
    /// than the reference, which runs the step again) RUNNING with its result
    /// stored, where a host died between the result and the summary; that
    /// summary is completed here (SUCCEEDED, duration unknown: 0).
    pub(crate) async fn replayed(
        &self,
        key: &str,
        summary: &abi_document_model::Data,
    ) -> Result<Option<String>, FlowError> {
        let status = journal::status(summary);
        if !matches!(status, Some(StepStatus::Succeeded | StepStatus::Running)) {
            return Ok(None);
        }
        if let Some(name) = self.store.journal().claim_checked(summary) {
            return self.claimed(key, name).await.map(Some);
        }
        let Some(stored) = self.store.result(key).await? else {
            return Ok(None);
        };
        if status == Some(StepStatus::Running) {
            self.store.complete(key, &stored, &now_iso()).await?;
        }
        Ok(Some(stored))
    }

    /// The host running this attempt (its connection, documents, job).
    pub(crate) fn runtime(&self) -> Result<&abi_jobs::RunHost, FlowError> {
        self.job
            .host()
            .ok_or_else(|| FlowError::Step(JobError::non_retryable(NO_RUNTIME)))
    }

    /// The JetStream context of the host's connection (claim checks).
    fn jetstream(&self) -> Result<async_nats::jetstream::Context, FlowError> {
        Ok(async_nats::jetstream::new(self.runtime()?.nats.clone()))
    }

    /// The result of `key` stored as claim-check object `name`.
    async fn claimed(&self, key: &str, name: &str) -> Result<String, FlowError> {
        let body = abi_jobs::claim_check::fetch(&self.jetstream()?, name)
            .await
            .map_err(|err| {
                FlowError::Step(JobError::new(
                    error_type::JOURNAL,
                    format!(
                        "The result of step {} is not readable: {err}",
                        python_str_repr(key)
                    ),
                ))
            })?;
        String::from_utf8(body).map_err(|err| FlowError::Result {
            type_name: error_type::RESULT_NOT_JSON,
            message: format!(
                "Step {}'s stored result is not UTF-8: {err}",
                python_str_repr(key)
            ),
        })
    }

    /// Journals `value` as the result of `key` (result, then summary) and
    /// returns it read back from its JSON, as a replay would; a result above
    /// the limit fails the step (`StepResultTooLarge`), unless `large`: then
    /// it goes to the claim-check store first, and the summary names it.
    pub(crate) async fn succeed<T: DeserializeOwned>(
        &self,
        key: &str,
        value: &serde_json::Value,
        started: Instant,
        large: bool,
    ) -> Result<T, FlowError> {
        let (encoded, claim_check) = match encode_result(key, value) {
            Ok(encoded) => (encoded, None),
            Err(StepResultError::TooLarge { json, .. }) if large => {
                let js = self.jetstream()?;
                let max = self.job.host().map_or(0, |h| h.nats.max_payload());
                match abi_jobs::claim_check::store(&js, json.as_bytes(), max).await {
                    Ok(name) => (json, Some(name)),
                    Err(err) => {
                        let permanent =
                            matches!(err, abi_jobs::claim_check::ClaimCheckError::TooLarge { .. });
                        let message = format!(
                            "Step {}'s result was not stored: {err}",
                            python_str_repr(key)
                        );
                        self.fail(key, &message, started).await?;
                        if permanent {
                            return Err(FlowError::Result {
                                type_name: error_type::RESULT_TOO_LARGE,
                                message,
                            });
                        }
                        return Err(FlowError::Step(JobError::new(error_type::JOURNAL, message)));
                    }
                }
            }
            Err(err) => {
                let err = FlowError::Result {
                    type_name: error_type::RESULT_TOO_LARGE,
                    message: err.to_string(),
                };
                self.fail(key, &err.to_string(), started).await?;
                return Err(err);
            }
        };
        let end = Finish {
            status: StepStatus::Succeeded,
            result_json: Some(&encoded),
            error: "",
            duration_ms: elapsed_ms(started),
            claim_check: claim_check.as_deref(),
        };
        self.store.finish(key, &end, &now_iso()).await?;
        decode(key, &encoded)
    }

    /// `work`'s output, `None` when the run is cancelled first.
    pub(crate) async fn cancelled_during<O>(&self, work: impl Future<Output = O>) -> Option<O> {
        tokio::select! {
            biased;
            () = self.job.cancelled().cancelled() => None,
            out = work => Some(out),
        }
    }

    async fn cancel(&self, key: &str, started: Instant) -> FlowError {
        let end = Finish {
            status: StepStatus::Cancelled,
            result_json: None,
            error: "Run cancelled",
            duration_ms: elapsed_ms(started),
            claim_check: None,
        };
        if let Err(err) = self.store.finish(key, &end, &now_iso()).await {
            warn!(run_id = %self.run_id(), key, error = %err, "cancelled step not journaled");
        }
        FlowError::Cancelled(self.run_id().to_owned())
    }

    pub(crate) async fn fail(
        &self,
        key: &str,
        error: &str,
        started: Instant,
    ) -> Result<(), FlowError> {
        let end = Finish {
            status: StepStatus::Failed,
            result_json: None,
            error,
            duration_ms: elapsed_ms(started),
            claim_check: None,
        };
        self.store.finish(key, &end, &now_iso()).await?;
        Ok(())
    }
}

pub(crate) fn elapsed_ms(started: Instant) -> i64 {
    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX)
}

fn to_json<T: Serialize>(key: &str, value: &T) -> Result<serde_json::Value, FlowError> {
    serde_json::to_value(value).map_err(|err| FlowError::Result {
        type_name: error_type::RESULT_NOT_JSON,
        message: format!(
            "Step {} returned a value that is not JSON: {err}",
            python_str_repr(key)
        ),
    })
}

pub(crate) fn decode<T: DeserializeOwned>(key: &str, stored: &str) -> Result<T, FlowError> {
    serde_json::from_str(stored).map_err(|err| FlowError::Result {
        type_name: error_type::RESULT_NOT_JSON,
        message: format!(
            "Step {}'s stored result does not decode as the step's type: {err}",
            python_str_repr(key)
        ),
    })
}
