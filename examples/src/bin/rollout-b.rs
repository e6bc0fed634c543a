//! `demo-rollout-b`: the second half of the two-module rollout (see
//! `rollout-a.rs`). It depends on `demo-rollout-a`, so it starts once an
//! `demo-rollout-a` instance is READY: during a rollout that is the old
//! generation's, which still serves while the new one is STAGED.

use std::process::ExitCode;

use abi_sdk::{Context, HookResult, Module, ModuleSpec, run_module};
use tracing::info;

const MODULE_ID: &str = "demo-rollout-b";

struct RolloutB;

impl Module for RolloutB {
    async fn on_initialized(&self, cx: &Context) -> HookResult {
        let a = cx.modules().get("demo-rollout-a")?;
        // Every live instance, whatever its status: both generations show up
        // while a rollout is under way.
        for instance in a.instances().await? {
            info!(
                instance = %instance.instance_id,
                status = %instance.status,
                rollout = %instance.rollout_id,
                "demo-rollout-a instance"
            );
        }
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
        // Colours only on a terminal: `docker logs` and files get plain text.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .init();
    let version = std::env::var("ABI_ROLLOUT_ID").unwrap_or_else(|_| "1.0.0".into());
    let spec = ModuleSpec::new(MODULE_ID)
        .package_version(version)
        .dependency("demo-rollout-a", 1);
    match run_module(spec, RolloutB).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
