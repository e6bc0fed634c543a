//! `demo-rollout-a`: the first half of a two-module rollout. It hosts a job
//! scheduler, which in a rollout only *prepares* until its generation serves.
//!
//! A rollout replaces both `demo-rollout-a` and `demo-rollout-b` together.
//! Start every process of one generation with the same rollout id and the
//! list of modules the generation needs:
//!
//! ```sh
//! export ABI_ROLLOUT_MODULES=demo-rollout-a,demo-rollout-b
//! ABI_ROLLOUT_ID=v1 ABI_MODULE_KEY=$(abictl key demo-rollout-a) rollout-a &
//! ABI_ROLLOUT_ID=v1 ABI_MODULE_KEY=$(abictl key demo-rollout-b) rollout-b &
//! # later, the new generation:
//! ABI_ROLLOUT_ID=v2 ABI_MODULE_KEY=$(abictl key demo-rollout-a) rollout-a &   # STAGED
//! ABI_ROLLOUT_ID=v2 ABI_MODULE_KEY=$(abictl key demo-rollout-b) rollout-b &   # v2 READY, v1 DRAINING
//! ```
//!
//! v2 stays STAGED (initialized, not serving) until every module of its list
//! has an initialized v2 instance; then v2 serves (READY) and discovery asks
//! the v1 instances to drain: they finish their work, unregister and exit 0.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use abi_sdk::{BoxError, Context, HookResult, Host, Module, ModuleSpec, Runner};
use futures::future::BoxFuture;
use tracing::info;

const MODULE_ID: &str = "demo-rollout-a";

/// A stand-in for a job scheduler: schedules are module-wide, so only the
/// serving generation may run them.
struct Scheduler;

impl Host for Scheduler {
    fn name(&self) -> &str {
        "scheduler"
    }

    // Create what must exist before serving (queues, consumers), nothing more.
    fn prepare(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async {
            info!("scheduler prepared; waiting for this generation to serve");
            Ok(())
        })
    }

    // This generation serves: start firing schedules.
    fn start(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async {
            info!("scheduler started");
            Ok(())
        })
    }

    // A newer generation took over: stop firing, finish what runs.
    fn drain(&self, _timeout: Duration) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async {
            info!("scheduler drained");
            Ok(())
        })
    }
}

struct RolloutA;

impl Module for RolloutA {
    async fn on_initialized(&self, cx: &Context) -> HookResult {
        let rollout = cx
            .session()
            .map(|s| s.rollout().id.clone())
            .unwrap_or_default();
        info!(module_id = MODULE_ID, rollout = %rollout, "initialized");
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
    // The rollout id doubles as the package version here, so that `abictl ls`
    // shows which generation each instance belongs to.
    let version = std::env::var("ABI_ROLLOUT_ID").unwrap_or_else(|_| "1.0.0".into());
    let spec = ModuleSpec::new(MODULE_ID).package_version(version);
    // `Runner` is the builder behind `run_module`: here it adds a job host.
    let runner = Runner::new(spec).job_host(Arc::new(Scheduler));
    match runner.run(RolloutA).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
