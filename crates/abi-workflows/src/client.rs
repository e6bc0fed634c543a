//! The caller side of a workflow of any module, Python's or ours (the
//! reference's `WorkflowProxy` and `WorkflowRun`): [`WorkflowClient::start`]
//! stores a trigger carrying the input, [`WorkflowClient::run`] waits for the
//! output; a [`WorkflowRun`] reads its record, waits, gives its output, lists
//! its steps, and cancels.

use std::time::Duration;

use abi_document_model::Data;
use abi_jobs::{CancelError, JobClient, JobRun, RunRecord, TriggerError, WaitError};
use abi_sdk_core::CallError;
use abi_wire::jobs::RunStatus;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::call::encode_input;
use crate::store::read_steps;

/// Why a workflow call did not give an output.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowCallError {
    /// The input is not a JSON object (`TypeError`).
    #[error("{0}")]
    Input(abi_jobs::JobError),
    /// The trigger was not stored.
    #[error("workflow not started: {0}")]
    Start(#[source] TriggerError),
    /// The run did not end in time, or its record could not be read.
    #[error("workflow run not waited for: {0}")]
    Wait(#[source] WaitError),
    /// The run ended another way than SUCCEEDED or SKIPPED, or succeeded
    /// with an output its host kept only a preview of (the reference's
    /// `WorkflowRunFailed`).
    #[error("Workflow run {run_id} ended {status}: {error}")]
    Failed {
        /// The run.
        run_id: String,
        /// Its final status.
        status: String,
        /// Its error.
        error: String,
    },
    /// The output does not decode as the caller's type.
    #[error("the output of run {run_id} does not decode: {source}")]
    Output {
        /// The run.
        run_id: String,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// The journal could not be read.
    #[error("steps not read: {0}")]
    Steps(#[source] CallError),
    /// The cancel was not sent.
    #[error("cancel not sent: {0}")]
    Cancel(#[source] CancelError),
}

/// One workflow of one module: start it, or run it for its output.
#[derive(Debug, Clone)]
pub struct WorkflowClient {
    job: JobClient,
}

impl WorkflowClient {
    /// The workflow served as job `job` (a [`JobClient`] of the workflow's
    /// module and name: [`JobClient::from_discovery`] checks that a
    /// registered instance declares it).
    pub fn new(job: JobClient) -> Self {
        Self { job }
    }

    /// The workflow's job client.
    pub fn job(&self) -> &JobClient {
        &self.job
    }

    /// Stores a trigger carrying `input` (a JSON object; `null` is `{}`);
    /// the run starts when a host takes it. A repeated `idempotency_key`
    /// inside the stream's duplicate window (2 minutes) is the same run
    /// ([`WorkflowRun::duplicate`]).
    ///
    /// # Errors
    ///
    /// [`WorkflowCallError::Input`], [`WorkflowCallError::Start`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped, the trigger may have been stored (repeat
    /// with the same idempotency key to learn its run).
    pub async fn start<I: Serialize>(
        &self,
        input: &I,
        idempotency_key: Option<&str>,
    ) -> Result<WorkflowRun, WorkflowCallError> {
        let payload = encode_input(input).map_err(WorkflowCallError::Input)?;
        let run = self
            .job
            .trigger(payload, idempotency_key)
            .await
            .map_err(WorkflowCallError::Start)?;
        Ok(WorkflowRun { run })
    }

    /// Starts a run on `input` and returns its output once it ends, waiting
    /// at most `timeout` (the run goes on past it).
    ///
    /// # Errors
    ///
    /// As [`WorkflowClient::start`] and [`WorkflowRun::result`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, as [`WorkflowClient::start`].
    pub async fn run<I: Serialize, O: DeserializeOwned>(
        &self,
        input: &I,
        timeout: Duration,
    ) -> Result<O, WorkflowCallError> {
        self.start(input, None).await?.result(timeout).await
    }

    /// A handle on an existing run of this workflow, from its id.
    pub fn run_of(&self, run_id: impl Into<String>) -> WorkflowRun {
        WorkflowRun {
            run: self.job.run(run_id),
        }
    }
}

/// A started workflow run.
#[derive(Debug, Clone)]
pub struct WorkflowRun {
    run: JobRun,
}

impl WorkflowRun {
    /// The run id, `<workflow>:<stream sequence>`.
    pub fn run_id(&self) -> &str {
        self.run.run_id()
    }

    /// Whether the start repeated an idempotency key inside the duplicate
    /// window: this is the first start's run.
    pub fn duplicate(&self) -> bool {
        self.run.duplicate()
    }

    /// The run as a job run.
    pub fn job_run(&self) -> &JobRun {
        &self.run
    }

    /// The run record (`QUEUED` until a host takes the run).
    ///
    /// # Errors
    ///
    /// As [`JobRun::status`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`JobRun::status`].
    pub async fn status(&self) -> Result<RunRecord, CallError> {
        self.run.status().await
    }

    /// The run record once the run is terminal, waiting at most `timeout`
    /// (woken by its host's completion notice, polling as a fallback).
    ///
    /// # Errors
    ///
    /// As [`JobRun::wait`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn wait(&self, timeout: Duration) -> Result<RunRecord, WaitError> {
        self.run.wait(timeout).await
    }

    /// The output once the run ends, decoded as `O`: a run that skipped
    /// gives `null` (decode into an `Option`).
    ///
    /// # Errors
    ///
    /// [`WorkflowCallError::Wait`]; [`WorkflowCallError::Failed`] for a run
    /// that ended another way, or with a truncated output;
    /// [`WorkflowCallError::Output`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn result<O: DeserializeOwned>(
        &self,
        timeout: Duration,
    ) -> Result<O, WorkflowCallError> {
        let record = self.wait(timeout).await.map_err(WorkflowCallError::Wait)?;
        output(&record)
    }

    /// The run's step summaries in start order (`key`, `kind`, `status`,
    /// `attempt`, times, `error`, `child`, `result_bytes`; never results).
    ///
    /// # Errors
    ///
    /// [`WorkflowCallError::Steps`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn steps(&self) -> Result<Vec<Data>, WorkflowCallError> {
        let job = self.run.job();
        let steps = read_steps(job.documents(), job.project(), self.run_id())
            .await
            .map_err(WorkflowCallError::Steps)?;
        Ok(steps.iter().map(crate::journal::summary_view).collect())
    }

    /// Asks the run's host to cancel it (cooperative: the run stops between
    /// steps and cancels the children it waits for).
    ///
    /// # Errors
    ///
    /// [`WorkflowCallError::Cancel`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe; dropped, the cancel may or may not have been sent.
    pub async fn cancel(&self) -> Result<(), WorkflowCallError> {
        self.run.cancel().await.map_err(WorkflowCallError::Cancel)
    }
}

/// A terminal record's output, as the reference's `WorkflowRun.result`
/// reads it.
fn output<O: DeserializeOwned>(record: &RunRecord) -> Result<O, WorkflowCallError> {
    let failed = |error: String| WorkflowCallError::Failed {
        run_id: record.run_id.clone(),
        status: record.status.clone(),
        error,
    };
    let value = match record.run_status() {
        Some(RunStatus::Skipped) => serde_json::Value::Null,
        Some(RunStatus::Succeeded) if record.result_truncated() => {
            return Err(failed(
                "its output went over what a run record keeps; return a reference to \
                 object storage instead"
                    .to_owned(),
            ));
        }
        Some(RunStatus::Succeeded) => record.result.clone().unwrap_or_default(),
        _ => return Err(failed(record.error.clone())),
    };
    serde_json::from_value(value).map_err(|source| WorkflowCallError::Output {
        run_id: record.run_id.clone(),
        source,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn ended(status: &str, result: Option<serde_json::Value>, error: &str) -> RunRecord {
        RunRecord {
            status: status.to_owned(),
            result,
            error: error.to_owned(),
            ..RunRecord::queued("flow:1", "flow")
        }
    }

    #[test]
    fn a_records_output_is_read_as_the_reference_reads_it() {
        let out: serde_json::Value =
            output(&ended("SUCCEEDED", Some(json!({"n": 2})), "")).unwrap();
        assert_eq!(out, json!({"n": 2}));
        let skipped: Option<i64> = output(&ended("SKIPPED", None, "")).unwrap();
        assert_eq!(skipped, None);
        let failed = output::<serde_json::Value>(&ended("FAILED", None, "ValueError: x"));
        assert_eq!(
            failed.unwrap_err().to_string(),
            "Workflow run flow:1 ended FAILED: ValueError: x"
        );
        let truncated = ended(
            "SUCCEEDED",
            Some(json!({"truncated": true, "preview": "{"})),
            "",
        );
        assert!(matches!(
            output::<serde_json::Value>(&truncated),
            Err(WorkflowCallError::Failed { .. })
        ));
        assert!(matches!(
            output::<i64>(&ended("SUCCEEDED", Some(json!("x")), "")),
            Err(WorkflowCallError::Output { .. })
        ));
    }
}
