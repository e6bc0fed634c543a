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
    // Logs go to stderr: ABI_LOG (or RUST_LOG) filters them (default info),
    // ABI_LOG_FORMAT=json for log shippers, colours only on a terminal.
    if let Err(error) = abi_process::logs::init("info") {
        eprintln!("{error}");
        return ExitCode::from(2);
    }
    let version = std::env::var("ABI_ROLLOUT_ID").unwrap_or_else(|_| "1.0.0".into());
    let spec = ModuleSpec::new(MODULE_ID)
        .package_version(version)
        .dependency("demo-rollout-a", 1);
    match run_module(spec, RolloutB).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
