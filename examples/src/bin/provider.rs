//! `demo-provider`: a module that serves an agent and a job, and does a little
//! periodic work. Copy it to start your own module.
//!
//! Run it next to a NATS server and `abi-discovery`:
//!
//! ```sh
//! export NATS_URL=nats://127.0.0.1:4222 ABI_PROJECT=demo
//! export ABI_MODULE_KEY=$(abictl key demo-provider)   # needs ABI_JWT_SECRET
//! cargo run -p abi-examples --bin provider
//! ```
//!
//! Everything else comes from the environment the SDK reads (`NATS_URL`,
//! `ABI_PROJECT`, `ABI_MODULE_KEY` or `ABI_SERVICE_TOKEN`, `ABI_ROLLOUT_ID`,
//! `ABI_ROLLOUT_MODULES`, `ABI_HEALTH_PORT`); `DEMO_VERSION` sets the package
//! version it declares and `DEMO_WORK_MS` how often it works (default 2000).

use std::process::ExitCode;
use std::time::Duration;

use abi_sdk::{Context, HookResult, Module, ModuleSpec, pb, run_module};
use tracing::info;

/// The module id other modules use to find this one.
const MODULE_ID: &str = "demo-provider";

/// The module's state: here only how often it works.
struct Provider {
    work_interval: Duration,
}

impl Module for Provider {
    /// Called once every dependency is READY (this module has none), before
    /// the instance tells discovery it is initialized. Open connections,
    /// warm caches, ... here.
    async fn on_initialized(&self, cx: &Context) -> HookResult {
        let instance = cx.session().map(|s| s.instance_id()).unwrap_or("-");
        info!(module_id = MODULE_ID, instance, "provider initialized");
        Ok(())
    }

    /// The module's work, until it is asked to stop (SIGTERM, Ctrl-C, or a
    /// newer rollout generation took over and discovery asked it to drain).
    async fn run(&self, cx: Context) -> HookResult {
        let mut ticks = tokio::time::interval(self.work_interval);
        let mut done: u64 = 0;
        loop {
            tokio::select! {
                () = cx.stopping().cancelled() => break,
                _ = ticks.tick() => {}
            }
            // A work guard makes a draining module wait for this piece of
            // work before it unregisters; `None` means stop taking work.
            let Some(_guard) = cx.begin_work() else { break };
            done += 1;
            info!(done, status = %cx.status(), "provider did a piece of work");
        }
        info!(done, "provider stopping");
        Ok(())
    }
}

/// What the module declares to discovery: identity, contract, what it serves.
fn spec() -> ModuleSpec {
    ModuleSpec::new(MODULE_ID)
        .package_version(std::env::var("DEMO_VERSION").unwrap_or_else(|_| "1.0.0".into()))
        .contract_major(1)
        .agent(pb::AgentDescriptor {
            name: "summarizer".into(),
            description: "Summarizes a text".into(),
            contract_major: 1,
            capabilities: vec!["summarize".into()],
        })
        .job(pb::JobDescriptor {
            name: "nightly-report".into(),
            description: "Builds the nightly report".into(),
            contract_major: 1,
            kind: "job".into(),
            max_concurrency: 1,
            max_attempts: 3,
            timeout_seconds: 600.0,
            triggers: vec![pb::JobTrigger {
                kind: "cron".into(),
                spec: "0 2 * * *".into(),
                time_zone: "UTC".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
}

#[tokio::main]
async fn main() -> ExitCode {
    // Logs go to stderr; ABI_LOG (or RUST_LOG) filters them, default info.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ABI_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let work_ms = std::env::var("DEMO_WORK_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let module = Provider {
        work_interval: Duration::from_millis(work_ms),
    };
    // The runner registers, renews the lease, waits for dependencies, calls
    // the hooks, serves /health and /ready, and drains on SIGTERM.
    match run_module(spec(), module).await {
        Ok(()) => ExitCode::SUCCESS,
        // The runner already logged the error; the exit code tells a supervisor.
        Err(_) => ExitCode::FAILURE,
    }
}
