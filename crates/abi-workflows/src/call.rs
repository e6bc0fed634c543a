//! [`FlowContext::call`] and [`FlowContext::map_call`]: another module's
//! workflow as a child run (the reference's `FlowContext.call`). The child's
//! run id is journaled before the call waits for it, so a retried or resumed
//! parent re-attaches to the same child instead of starting another; the
//! trigger carries the idempotency key `<run_id>/<key>/<attempt>`, so a host
//! that died between the trigger and the journal write gets the same child
//! from the stream's duplicate window.

use std::time::Duration;

use abi_jobs::{JobClient, JobError, JobRun};
use abi_pyjson::python_str_repr;
use abi_wire::jobs::RunStatus;
use abi_wire::workflows::{
    NOTICE_FALLBACK_POLL, StepKind, StepStatus, auto_call_key, child_idempotency_key, error_type,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::flow::{FlowContext, FlowError, decode};
use crate::journal::{self, Child};

/// How long one wait for a child lasts before the next (a child has no
/// deadline of its own here: the parent's timeout bounds the call).
const CHILD_WAIT_ROUND: Duration = Duration::from_secs(3600);

/// A call's input as the JSON object a trigger carries (the reference's
/// `encode_input`): `null` is `{}`, anything but an object is refused.
///
/// # Errors
///
/// `TypeError` (not retried) for a value that is not a JSON object, or
/// does not serialize.
pub fn encode_input<I: Serialize>(input: &I) -> Result<serde_json::Value, JobError> {
    let refuse = || {
        JobError::new(
            error_type::TYPE,
            "A workflow input is a dict or a model (a JSON object)",
        )
        .permanent()
    };
    match serde_json::to_value(input).map_err(|_| refuse())? {
        serde_json::Value::Null => Ok(serde_json::Value::Object(serde_json::Map::new())),
        value @ serde_json::Value::Object(_) => Ok(value),
        _ => Err(refuse()),
    }
}

impl FlowContext {
    fn refuse_self(&self, module_id: &str, workflow: &str) -> Result<(), FlowError> {
        let host = self.runtime()?;
        if module_id == host.module_id && workflow == self.job.job() {
            return Err(FlowError::SelfCall(format!(
                "Workflow {} of module {} cannot call itself: its child would wait for the \
                 slot its parent holds. Split the work into another workflow.",
                python_str_repr(workflow),
                python_str_repr(module_id)
            )));
        }
        Ok(())
    }

    /// The job client of `module_id`'s `workflow`, over the host's NATS
    /// connection and its module's token.
    fn child_client(&self, module_id: &str, workflow: &str) -> Result<JobClient, FlowError> {
        let host = self.runtime()?;
        Ok(JobClient::with_documents(
            host.nats.clone(),
            &host.documents,
            host.project.clone(),
            module_id,
            workflow,
        ))
    }

    /// Runs `module_id`'s workflow `workflow` on `input` as a child run and
    /// returns its output, under the key `call:<module>.<workflow>#<n>` (the
    /// `n`th call made without a key). Use [`FlowContext::call_keyed`] where
    /// calls are conditional, so keys stay the same on every attempt.
    ///
    /// # Errors
    ///
    /// As [`FlowContext::call_keyed`].
    ///
    /// # Cancel safety
    ///
    /// As [`FlowContext::call_keyed`].
    pub async fn call<I, O>(
        &self,
        module_id: &str,
        workflow: &str,
        input: &I,
    ) -> Result<O, FlowError>
    where
        I: Serialize,
        O: DeserializeOwned,
    {
        let n = self
            .auto_calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let key = auto_call_key(module_id, workflow, n);
        self.call_keyed(&key, module_id, workflow, input).await
    }

    /// Runs `module_id`'s workflow `workflow` on `input` as the child run of
    /// step `key`, and returns its output (journaled as the step's result):
    /// a call that succeeded before returns the stored output; one whose
    /// child was started before waits for that child; otherwise the child is
    /// triggered and its run id journaled before the wait. A child that ends
    /// SKIPPED gives `null`. The parent keeps its slot and heartbeats while
    /// it waits; cancelling the parent cancels the child.
    ///
    /// # Errors
    ///
    /// [`FlowError::SelfCall`] for a workflow calling itself;
    /// [`FlowError::Key`]; [`FlowError::Cancelled`]; [`FlowError::Step`]
    /// (`TypeError`) for an input that is not a JSON object;
    /// [`FlowError::Child`] when the trigger is not stored or the child's
    /// record cannot be read (the summary stays RUNNING, and the retry
    /// finds the same child); [`FlowError::ChildFailed`] when the child
    /// ends any other way than SUCCEEDED or SKIPPED;
    /// [`FlowError::ChildTruncated`] for an output its host kept only a
    /// preview of; [`FlowError::Result`] for an output above 256 KiB.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped while it waits, the child goes on and the
    /// next attempt of the run re-attaches to it.
    pub async fn call_keyed<I, O>(
        &self,
        key: &str,
        module_id: &str,
        workflow: &str,
        input: &I,
    ) -> Result<O, FlowError>
    where
        I: Serialize,
        O: DeserializeOwned,
    {
        self.refuse_self(module_id, workflow)?;
        self.call_unchecked(key, module_id, workflow, input).await
    }

    /// Runs `module_id`'s workflow `workflow` once per input as child
    /// `key[i]`, at most `concurrency` children at once (each on whichever
    /// host takes it), and returns the outputs in the inputs' order.
    /// [`abi_wire::workflows::DEFAULT_FAN_OUT_CONCURRENCY`] is the
    /// reference's default.
    ///
    /// # Errors
    ///
    /// [`FlowError::SelfCall`]; as [`FlowContext::map`] for the key, the
    /// concurrency and the count; else the first child's failure, as
    /// [`FlowContext::call_keyed`] gives it.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, as [`FlowContext::call_keyed`].
    pub async fn map_call<I, O>(
        &self,
        key: &str,
        module_id: &str,
        workflow: &str,
        inputs: Vec<I>,
        concurrency: usize,
    ) -> Result<Vec<O>, FlowError>
    where
        I: Serialize,
        O: DeserializeOwned,
    {
        self.refuse_self(module_id, workflow)?;
        self.fan_out(key, inputs, concurrency, |item_key, input| async move {
            self.call_unchecked(&item_key, module_id, workflow, &input)
                .await
        })
        .await
    }

    async fn call_unchecked<I, O>(
        &self,
        key: &str,
        module_id: &str,
        workflow: &str,
        input: &I,
    ) -> Result<O, FlowError>
    where
        I: Serialize,
        O: DeserializeOwned,
    {
        self.claim(key)?;
        self.check_cancelled()?;
        let payload = encode_input(input).map_err(FlowError::Step)?;
        let summary = self.store.read(key).await?;
        if let Some(stored) = self.replayed(key, &summary).await? {
            return decode(key, &stored);
        }
        let journaled = if journal::status(&summary) == Some(StepStatus::Running) {
            Child::from_summary(&summary)
        } else {
            None
        };
        let started = Instant::now();
        let (child, run) = match journaled {
            // A replay: the child was triggered before; wait for that run.
            Some(child) => {
                let run = self
                    .child_client(&child.module_id, &child.workflow)?
                    .triggered_run(child.run_id.clone());
                (child, run)
            }
            None => {
                let start = self
                    .store
                    .start(key, StepKind::Call, &abi_jobs::time::now_iso(), true)
                    .await?;
                let attempt = journal::attempt(&start);
                let client = self.child_client(module_id, workflow)?;
                let idempotency = child_idempotency_key(self.run_id(), key, attempt);
                let run = client
                    .trigger(payload, Some(&idempotency))
                    .await
                    .map_err(|err| {
                        FlowError::Child(format!(
                            "Child run of {module_id}.{workflow} not triggered: {err}"
                        ))
                    })?;
                let child = Child {
                    module_id: module_id.to_owned(),
                    workflow: workflow.to_owned(),
                    run_id: run.run_id().to_owned(),
                };
                self.store.set_child(key, &child).await?;
                (child, run)
            }
        };
        self.children.waiting(key, run.clone());
        let record = self.wait_child(&run).await?;
        self.children.done(key);
        let name = format!("{}.{}", child.module_id, child.workflow);
        let ended = record.run_status();
        if !matches!(ended, Some(RunStatus::Succeeded | RunStatus::Skipped)) {
            let error = if record.error.is_empty() {
                "no error recorded"
            } else {
                record.error.as_str()
            };
            let message = format!(
                "Child run {} of {name} ended {}: {error}",
                run.run_id(),
                record.status
            );
            self.fail(key, &message, started).await?;
            return Err(FlowError::ChildFailed(message));
        }
        if record.result_truncated() {
            let message = format!(
                "Child run {} of {name} returned more than the host keeps of a result; \
                 return a reference to object storage instead",
                run.run_id()
            );
            self.fail(key, &message, started).await?;
            return Err(FlowError::ChildTruncated(message));
        }
        let output = record.result.clone().unwrap_or(serde_json::Value::Null);
        self.succeed(key, &output, started, false).await
    }

    /// The child's record once it is terminal; the run's cancellation ends
    /// the wait first (the attempt's end decides what becomes of the child).
    async fn wait_child(&self, run: &JobRun) -> Result<abi_jobs::RunRecord, FlowError> {
        loop {
            let waited = self
                .cancelled_during(run.wait_with(CHILD_WAIT_ROUND, NOTICE_FALLBACK_POLL))
                .await;
            match waited {
                None => return Err(FlowError::Cancelled(self.run_id().to_owned())),
                Some(Ok(record)) => return Ok(record),
                Some(Err(err)) if err.kind() == abi_jobs::client::run::WaitErrorKind::TimedOut => {}
                Some(Err(err)) => {
                    return Err(FlowError::Child(format!(
                        "Child run {} not read: {err}",
                        run.run_id()
                    )));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_input_is_a_json_object() {
        assert_eq!(encode_input(&json!(null)).unwrap(), json!({}));
        assert_eq!(encode_input(&json!({"n": 1})).unwrap(), json!({"n": 1}));
        for bad in [json!(1), json!([1]), json!("x")] {
            let err = encode_input(&bad).unwrap_err();
            assert_eq!(err.kind(), abi_jobs::JobErrorKind::NonRetryable);
            assert_eq!(
                err.to_string(),
                "TypeError: A workflow input is a dict or a model (a JSON object)"
            );
        }
    }
}
