//! `demo-consumer`: a module that depends on `demo-provider` at contract
//! major 1 and looks it up once it is initialized. Copy it to start a module
//! that uses another one.
//!
//! ```sh
//! export NATS_URL=nats://127.0.0.1:4222 ABI_PROJECT=demo
//! export ABI_MODULE_KEY=$(abictl key demo-consumer)
//! cargo run -p abi-examples --bin consumer
//! ```
//!
//! It stays STARTING until a `demo-provider` instance is READY (the runner
//! waits up to 60 s), then becomes READY itself. If the provider goes away
//! later, discovery reports this module DEGRADED until one is back.

use std::process::ExitCode;

use abi_sdk::{Context, HookResult, Module, ModuleSpec, run_module};
use tracing::info;

const MODULE_ID: &str = "demo-consumer";
/// The module this one needs, and the contract major it speaks.
const PROVIDER: &str = "demo-provider";
const PROVIDER_MAJOR: u32 = 1;

struct Consumer;

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

    /// Serves until asked to stop: here there is nothing more to do.
    async fn run(&self, cx: Context) -> HookResult {
        cx.stopping().cancelled().await;
        info!("consumer stopping");
        Ok(())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ABI_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let spec = ModuleSpec::new(MODULE_ID)
        .package_version("1.0.0")
        // Declaring the dependency makes the runner wait for it and lets
        // discovery compute this module's status from the provider's.
        .dependency(PROVIDER, PROVIDER_MAJOR);
    match run_module(spec, Consumer).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
