//! What a module embeds, in one dependency. This crate is a facade: it
//! re-exports `abi-sdk-core` (the discovery client, module proxies, the lease
//! session, the runner, the host kit and health probes) and, each behind a
//! default feature, the hosts and callers a module may serve or use:
//!
//! - [`jobs`] (feature `jobs`, crate `abi-jobs`): jobs over JetStream, gated
//!   in a rollout, and [`JobClient`] to trigger any module's job;
//! - [`agents`] (feature `agents`, crate `abi-agents`): the agent host and
//!   [`agents::AgentsExt`] for a [`ModuleProxy`]'s agent client;
//! - [`models`] (feature `models`, crate `abi-models`): the chat-model host
//!   and [`models::ModelsExt`] for a proxy's chat model;
//! - [`workflows`] (feature `workflows`, crate `abi-workflows`, with `jobs`):
//!   durable steps on the job host ([`workflows::FlowContext`]);
//! - [`apps`] (feature `apps`, crate `abi-apps`): web apps over NATS, any
//!   tower service and an app folder, and [`apps::AppsExt`] for a proxy's app.
//!
//! A module that serves and calls none of them writes
//! `abi-sdk = { version = "…", default-features = false }` (or depends on
//! `abi-sdk-core`) and compiles none of them.
//!
//! A module is a small struct and one call:
//!
//! ```no_run
//! use abi_sdk::prelude::*;
//!
//! struct Greeter;
//!
//! impl Module for Greeter {
//!     async fn on_initialized(&self, cx: &Context) -> HookResult {
//!         let store = cx.modules().get("store")?;
//!         println!("store has {} ready instances", store.ready_instances().await?.len());
//!         Ok(())
//!     }
//! }
//!
//! # async fn main_() -> Result<(), abi_sdk::RunError> {
//! run_module(ModuleSpec::new("greeter").dependency("store", 1), Greeter).await
//! # }
//! ```

pub use abi_sdk_core::*;

#[cfg(feature = "agents")]
pub use abi_agents as agents;
#[cfg(feature = "apps")]
pub use abi_apps as apps;
#[cfg(feature = "jobs")]
pub use abi_jobs as jobs;
#[cfg(feature = "models")]
pub use abi_models as models;
#[cfg(feature = "workflows")]
pub use abi_workflows as workflows;

#[cfg(feature = "jobs")]
pub use abi_jobs::{JobClient, JobRun, RunRecord};

/// What most modules need, in one import: `use abi_sdk::prelude::*;`. It
/// brings the module's declaration and hooks, the hosts of the enabled
/// features with their specs, and the extension traits that give a
/// [`ModuleProxy`] its `agent_client` and `chat_model`.
pub mod prelude {
    pub use abi_sdk_core::prelude::*;

    #[cfg(feature = "agents")]
    pub use abi_agents::{AgentHost, AgentSpec, AgentsExt as _, invoke_fn};
    #[cfg(feature = "jobs")]
    pub use abi_jobs::{JobContext, JobError, JobHost, JobResult, JobSpec, Trigger};
    #[cfg(feature = "models")]
    pub use abi_models::{ChatInput, ChatMessage, ChatModelSpec, ModelHost, ModelsExt as _};
    #[cfg(feature = "workflows")]
    pub use abi_workflows::{FlowContext, workflow_fn};
}
