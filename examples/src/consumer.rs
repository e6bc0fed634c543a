//! `demo-consumer`: a module that depends on `demo-provider` at contract
//! major 1, looks it up once it is initialized, then calls its echo agent and
//! echo chat model once. Copy it (with
//! `src/bin/consumer.rs`) to start a module that uses another one.

use std::sync::Arc;

use abi_sdk::agents::AgentsExt as _;
use abi_sdk::jobs::{JobContext, JobHost, JobResult, JobSpec};
use abi_sdk::models::ModelsExt as _;
use std::time::Duration;

use abi_sdk::models::ChatMessage;
use abi_sdk::{Context, HookResult, Module, ModuleSpec};
use tracing::{info, warn};

use crate::provider::{ECHO_AGENT, ECHO_MODEL};

/// This module's id.
pub const MODULE_ID: &str = "demo-consumer";
/// The module this one needs, and the contract major it speaks.
pub const PROVIDER: &str = "demo-provider";
/// The provider's contract major this module speaks.
pub const PROVIDER_MAJOR: u32 = 1;

/// The consumer: no state.
#[derive(Debug, Clone, Copy, Default)]
pub struct Consumer;

impl Module for Consumer {
    /// Runs once the provider has a READY instance.
    async fn on_initialized(&self, cx: &Context) -> HookResult {
        // Only declared dependencies get a proxy; anything else is refused
        // without a network call.
        let provider = cx.modules().get(PROVIDER)?;
        let ready = provider.ready_instances().await?;
        info!(
            provider = PROVIDER,
            ready = ready.len(),
            "provider has ready instances"
        );
        // Look up what the provider declared, on one of its READY instances.
        let agent = provider.agent("summarizer").await?;
        info!(
            agent = %agent.descriptor.name,
            instance = %agent.instance_id,
            capabilities = ?agent.descriptor.capabilities,
            "found the provider's agent"
        );
        let job = provider.job("nightly-report").await?;
        info!(job = %job.descriptor.name, instance = %job.instance_id, "found the provider's job");
        Ok(())
    }

    /// Calls the provider's echo agent and echo chat model once (when the
    /// provider serves them), then serves until asked to stop.
    async fn run(&self, cx: Context) -> HookResult {
        let provider = cx.modules().get(PROVIDER)?;
        if provider.agent(ECHO_AGENT).await.is_ok() {
            match provider
                .agent_client(ECHO_AGENT)
                .invoke("hello from the consumer", Some(Duration::from_secs(30)))
                .await
            {
                Ok(answer) => info!(agent = ECHO_AGENT, %answer, "the provider's agent answered"),
                Err(error) => warn!(agent = ECHO_AGENT, %error, "the provider's agent failed"),
            }
        }
        if provider.model(ECHO_MODEL).await.is_ok() {
            let messages = vec![ChatMessage::human("hello, model")];
            match provider.chat_model(ECHO_MODEL).invoke(messages).await {
                Ok(reply) => info!(
                    model = ECHO_MODEL,
                    answer = %reply.content_text(),
                    "the provider's chat model answered"
                ),
                Err(error) => warn!(model = ECHO_MODEL, %error, "the provider's chat model failed"),
            }
        }
        cx.stopping().cancelled().await;
        info!("consumer stopping");
        Ok(())
    }
}

/// The job the consumer serves: `shout` returns `{"text": <its text in
/// capitals>}` (the provider's digest workflow calls it).
pub const SHOUT_JOB: &str = "shout";

/// The spec with the job the consumer serves over NATS (the demo stack runs
/// it): [`SHOUT_JOB`].
///
/// # Panics
///
/// Never: the declaration is a constant within the reference's limits (a
/// test builds it).
#[allow(clippy::expect_used)]
pub fn with_jobs(spec: ModuleSpec) -> ModuleSpec {
    let shout = JobSpec::new(SHOUT_JOB)
        .map(|j| j.description("Returns its text in capitals"))
        .expect("a valid job declaration");
    let jobs = JobHost::new().job(shout, |cx: JobContext| async move {
        let text = cx.payload()["text"].as_str().unwrap_or_default();
        JobResult::Ok(serde_json::json!({"text": text.to_uppercase()}))
    });
    spec.serve(Arc::new(jobs))
}

/// What the module declares: its id and its dependency on the provider.
pub fn spec() -> ModuleSpec {
    ModuleSpec::new(MODULE_ID)
        .package_version("1.0.0")
        // Declaring the dependency makes the runner wait for it and lets
        // discovery compute this module's status from the provider's.
        .dependency(PROVIDER, PROVIDER_MAJOR)
}
