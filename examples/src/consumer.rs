//! `demo-consumer`: a module that depends on `demo-provider` at contract
//! major 1, looks it up once it is initialized, then calls its echo agent and
//! echo chat model once. Copy it (with
//! `src/bin/consumer.rs`) to start a module that uses another one.

use abi_sdk::agents::AgentsExt as _;
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

/// What the module declares: its id and its dependency on the provider.
pub fn spec() -> ModuleSpec {
    ModuleSpec::new(MODULE_ID)
        .package_version("1.0.0")
        // Declaring the dependency makes the runner wait for it and lets
        // discovery compute this module's status from the provider's.
        .dependency(PROVIDER, PROVIDER_MAJOR)
}
