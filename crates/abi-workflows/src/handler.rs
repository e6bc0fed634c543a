//! [`workflow_fn`]: a workflow's handler, `async fn(FlowContext, Input) ->
//! Result<Output, JobError>`, as the job handler its job host runs (the
//! reference's `workflow_handler`): the payload is decoded into the input
//! before the function runs (an input that does not decode fails the run at
//! once, `InvalidWorkflowInput`, not retried), and the output becomes the
//! run's result. Once the function ends, or its task is aborted (a timeout),
//! the attempt's end decides what becomes of the child runs it still waited
//! for ([`crate::children`]).

use std::future::Future;
use std::sync::{Arc, OnceLock};

use abi_jobs::{JobContext, JobError, JobErrorKind, JobHandler, JobResult};
use abi_wire::workflows::{StepStatus, error_type};
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;
use tracing::warn;

use crate::children::AttemptEnd;
use crate::flow::FlowContext;
use crate::journal::Finish;
use crate::schema::SchemaChecks;
use crate::store::StepStore;

/// The longest input or output error kept, in characters (the reference's).
const MAX_ERROR_CHARS: usize = 2000;

/// The job handler of the workflow function `f`.
pub fn workflow_fn<I, O, F, Fut>(f: F) -> impl JobHandler
where
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(FlowContext, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, JobError>> + Send + 'static,
{
    Workflow {
        f: Arc::new(f),
        ensured: Arc::new(OnceCell::new()),
        checks: Arc::new(OnceLock::new()),
        types: std::marker::PhantomData,
    }
}

struct Workflow<I, O, F> {
    f: Arc<F>,
    /// Set once the journal's collections exist (checked once per host).
    ensured: Arc<OnceCell<()>>,
    /// The declared schemas, compiled on the first run.
    checks: Arc<OnceLock<SchemaChecks>>,
    types: std::marker::PhantomData<fn(I) -> O>,
}

impl<I, O, F, Fut> JobHandler for Workflow<I, O, F>
where
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(FlowContext, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, JobError>> + Send + 'static,
{
    fn call(&self, cx: JobContext) -> BoxFuture<'static, JobResult> {
        let (f, ensured, checks) = (self.f.clone(), self.ensured.clone(), self.checks.clone());
        Box::pin(async move {
            let Some(host) = cx.host().cloned() else {
                return Err(JobError::non_retryable(crate::flow::NO_RUNTIME));
            };
            let checks = checks.get_or_init(|| SchemaChecks::of(&host.spec));
            checks.input(cx.payload()).map_err(|refusal| {
                JobError::new(
                    error_type::INVALID_INPUT,
                    truncated(format!("Invalid input: {refusal}")),
                )
                .permanent()
            })?;
            let input: I = serde_json::from_value(cx.payload().clone()).map_err(|err| {
                JobError::new(
                    error_type::INVALID_INPUT,
                    truncated(format!("Invalid input: {err}")),
                )
                .permanent()
            })?;
            let mut store =
                StepStore::new(host.documents, &host.project, cx.run_id(), &host.fired_at);
            if host.first_record {
                store = store.known_empty();
            }
            ensured
                .get_or_try_init(|| store.ensure())
                .await
                .map_err(|err| JobError::new(error_type::JOURNAL, err.to_string()))?;
            let flow = FlowContext::new(cx.clone(), store);
            let mut guard = EndGuard(Some(flow.clone()));
            let output = f(flow.clone(), input).await;
            guard.0 = None;
            let failed = output.as_ref().err();
            let last = failed.is_some_and(|err| {
                err.kind() == JobErrorKind::NonRetryable || cx.attempt() >= host.spec.attempts()
            });
            flow.end_attempt(AttemptEnd::of(cx.stop_reason(), failed.is_some(), last))
                .await;
            let invalid = |why: String| {
                JobError::new(
                    error_type::INVALID_OUTPUT,
                    truncated(format!("Invalid output: {why}")),
                )
                .permanent()
            };
            let output = serde_json::to_value(output?).map_err(|err| invalid(err.to_string()))?;
            // A skipped run has no output to check (the reference's `None`).
            if cx.skipped().is_none() {
                checks.output(&output).map_err(invalid)?;
            }
            Ok(output)
        })
    }
}

/// Decides the children's fate when the handler's task is aborted before
/// it could (a timeout, a hand-back past its grace, a takeover): the
/// cancels run on a task of their own.
struct EndGuard(Option<FlowContext>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        let Some(flow) = self.0.take() else {
            return;
        };
        if flow.has_no_children() {
            return;
        }
        let cx = flow.job();
        let last = cx
            .host()
            .is_some_and(|host| cx.attempt() >= host.spec.attempts());
        // Aborted with no reason given: another attempt took the run over,
        // and the children are its.
        let end = match cx.stop_reason() {
            None => AttemptEnd::Abandoned,
            reason => AttemptEnd::of(reason, true, last),
        };
        if end.stops_children().is_none() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { flow.end_attempt(end).await });
        }
    }
}

impl FlowContext {
    /// What the end `end` of this attempt does to the children it still
    /// waits for: cancels them and journals their calls CANCELLED, or
    /// leaves them. Failures are logged: a child left running ends on its
    /// own.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped, some children may be left running.
    pub(crate) async fn end_attempt(&self, end: AttemptEnd) {
        let Some(error) = end.stops_children() else {
            return;
        };
        for (key, run) in self.children.take() {
            if let Err(err) = run.cancel().await {
                warn!(run_id = %self.run_id(), child = %run.run_id(), error = %err, "child run not cancelled");
                continue;
            }
            let end = Finish {
                status: StepStatus::Cancelled,
                result_json: None,
                error: &error,
                duration_ms: 0,
                claim_check: None,
            };
            if let Err(err) = self
                .store
                .finish(&key, &end, &abi_jobs::time::now_iso())
                .await
            {
                warn!(run_id = %self.run_id(), key, error = %err, "cancelled call not journaled");
            }
        }
    }

    /// Whether this attempt waits for no child.
    pub(crate) fn has_no_children(&self) -> bool {
        self.children.is_empty()
    }
}

fn truncated(text: String) -> String {
    text.chars().take(MAX_ERROR_CHARS).collect()
}
