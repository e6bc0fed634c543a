//! [`workflow_fn`]: a workflow's handler, `async fn(FlowContext, Input) ->
//! Result<Output, JobError>`, as the job handler its job host runs (the
//! reference's `workflow_handler`): the payload is decoded into the input
//! before the function runs (an input that does not decode fails the run at
//! once, `InvalidWorkflowInput`, not retried), and the output becomes the
//! run's result.

use std::future::Future;
use std::sync::Arc;

use abi_jobs::{JobContext, JobError, JobHandler, JobResult};
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;

use crate::flow::FlowContext;
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
        types: std::marker::PhantomData,
    }
}

struct Workflow<I, O, F> {
    f: Arc<F>,
    /// Set once the journal's collections exist (checked once per host).
    ensured: Arc<OnceCell<()>>,
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
        let (f, ensured) = (self.f.clone(), self.ensured.clone());
        Box::pin(async move {
            let Some(host) = cx.host().cloned() else {
                return Err(JobError::non_retryable(
                    "A FlowContext needs the runtime of its host",
                ));
            };
            let input: I = serde_json::from_value(cx.payload().clone()).map_err(|err| {
                JobError::new(
                    "InvalidWorkflowInput",
                    truncated(format!("Invalid input: {err}")),
                )
                .permanent()
            })?;
            let store = StepStore::new(host.documents, &host.project, cx.run_id(), &host.fired_at);
            ensured
                .get_or_try_init(|| store.ensure())
                .await
                .map_err(|err| JobError::new("JournalError", err.to_string()))?;
            let output = f(FlowContext::new(cx, store), input).await?;
            serde_json::to_value(output).map_err(|err| {
                JobError::new(
                    "InvalidWorkflowOutput",
                    truncated(format!("Invalid output: {err}")),
                )
                .permanent()
            })
        })
    }
}

fn truncated(text: String) -> String {
    text.chars().take(MAX_ERROR_CHARS).collect()
}
