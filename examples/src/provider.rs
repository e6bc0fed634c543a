//! `demo-provider`: a module that serves an agent and a job, and does a little
//! periodic work. Copy it (with `src/bin/provider.rs`) to start your own module.

use std::time::Duration;

use abi_sdk::{Context, HookResult, Module, ModuleSpec, pb};
use tracing::info;

/// The module id other modules use to find this one.
pub const MODULE_ID: &str = "demo-provider";

/// The module's state: here only how often it works.
#[derive(Debug, Clone)]
pub struct Provider {
    /// Time between two pieces of work.
    pub work_interval: Duration,
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
pub fn spec(package_version: &str) -> ModuleSpec {
    ModuleSpec::new(MODULE_ID)
        .package_version(package_version)
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
