//! A module that needs `provider` (contract 1): it initializes only once a
//! provider instance is READY, then looks up its agent.
//!
//! ```text
//! NATS_URL=nats://127.0.0.1:4222 ABI_PROJECT=default ABI_MODULE_KEY=... \
//!     cargo run -p abi-sdk --example consumer
//! ```

use abi_sdk::{Context, HookResult, Module, ModuleSpec, run_module};

struct Consumer;

impl Module for Consumer {
    async fn on_initialized(&self, cx: &Context) -> HookResult {
        let provider = cx.modules().get("provider")?;
        let echo = provider.agent("echo").await?;
        println!("echo is served by instance {}", echo.instance_id);
        // Asking for a module this one did not declare fails at once.
        assert!(cx.modules().get("billing").is_err());
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), abi_sdk::RunError> {
    run_module(
        ModuleSpec::new("consumer").dependency("provider", 1),
        Consumer,
    )
    .await
}
