//! A module that serves one agent and depends on nothing.
//!
//! ```text
//! NATS_URL=nats://127.0.0.1:4222 ABI_PROJECT=default ABI_MODULE_KEY=... \
//!     cargo run -p abi-sdk --example provider
//! ```
//!
//! Without `ABI_PROJECT` it runs without discovery. Stop it with Ctrl-C: it
//! drains, unloads and unregisters.

use abi_sdk::{Context, HookResult, Module, ModuleSpec, pb, run_module};

struct Provider;

impl Module for Provider {
    async fn on_initialized(&self, cx: &Context) -> HookResult {
        println!("{} initialized", cx.module_id());
        Ok(())
    }

    async fn run(&self, cx: Context) -> HookResult {
        println!("serving; status {}", cx.status());
        cx.stopping().cancelled().await;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), abi_sdk::RunError> {
    let spec = ModuleSpec::new("provider")
        .package_version("1.0.0")
        .agent(pb::AgentDescriptor {
            name: "echo".into(),
            description: "Says back what it hears".into(),
            contract_major: 1,
            capabilities: vec!["agent.invoke.v1".into()],
        });
    run_module(spec, Provider).await
}
