//! A module process serving one job, `ingest`, on a `JobHost` given to
//! `ModuleSpec::serve`, for the job tests that need a real process and
//! real signals. Configured by the SDK's own variables (`NATS_URL`,
//! `ABI_PROJECT`, `ABI_MODULE_KEY`, `ABI_SHUTDOWN_GRACE_SECS`, ...) plus
//! `E2E_ID` (module id), `E2E_JOB_BLOCK=1` (a `{"block": true}` payload
//! then waits until the run is cancelled or handed back; else it returns its
//! payload) and `E2E_DRAIN_MS` (the time to drain discovery gives work).
//!
//! It also serves the workflow `flow` (3 attempts): step `first`, then step
//! `second`, which with `E2E_JOB_BLOCK=1` never ends (the host is killed
//! there); each prints `EVENT step <key>` when its function runs.
//!
//! Prints `EVENT run <run_id>` when a handler starts. Exit code 0 after a
//! clean stop, 1 otherwise.

use abi_sdk::jobs::{JobContext, JobError, JobHost, JobSpec};
use abi_sdk::workflows::{FlowContext, workflow_fn};
use abi_sdk::{Config, Module, ModuleSpec, Runner};

struct JobModule;

impl Module for JobModule {}

#[tokio::main]
async fn main() {
    let _ = abi_process::logs::init("off");
    let id = std::env::var("E2E_ID").unwrap_or_else(|_| "jobs".into());
    let block = std::env::var("E2E_JOB_BLOCK").is_ok_and(|v| v == "1");
    let spec = match JobSpec::new("ingest") {
        Ok(spec) => spec,
        Err(err) => {
            println!("EVENT exit error {err}");
            std::process::exit(1);
        }
    };
    let handler = move |cx: JobContext| async move {
        println!("EVENT run {}", cx.run_id());
        if block && cx.payload()["block"].as_bool() == Some(true) {
            cx.cancelled().cancelled().await;
            return Err(JobError::new("CancelledError", "stopped"));
        }
        Ok(cx.payload().clone())
    };
    let flow = match JobSpec::new("flow").and_then(|j| j.as_workflow().max_attempts(3)) {
        Ok(flow) => flow,
        Err(err) => {
            println!("EVENT exit error {err}");
            std::process::exit(1);
        }
    };
    let steps = workflow_fn(
        move |cx: FlowContext, _input: serde_json::Value| async move {
            let first: u32 = cx
                .step("first", || async {
                    println!("EVENT step first");
                    Ok(1)
                })
                .await?;
            let second: u32 = cx
                .step("second", || async move {
                    println!("EVENT step second");
                    if block {
                        std::future::pending::<()>().await;
                    }
                    Ok(2)
                })
                .await?;
            Ok(serde_json::json!({"sum": first + second}))
        },
    );
    let jobs = JobHost::new().job(spec, handler).job(flow, steps);
    let spec = ModuleSpec::new(&id).serve(std::sync::Arc::new(jobs));
    let mut config = match Config::from_env(&id) {
        Ok(config) => config,
        Err(err) => {
            println!("EVENT exit error {err}");
            std::process::exit(1);
        }
    };
    if let Some(ms) = std::env::var("E2E_DRAIN_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config = config.drain_timeout(std::time::Duration::from_millis(ms));
    }
    match Runner::new(spec).config(config).run(JobModule).await {
        Ok(()) => println!("EVENT exit ok"),
        Err(err) => {
            println!(
                "EVENT exit error {:?} {}",
                err.kind(),
                abi_process::error_chain(&err)
            );
            std::process::exit(1);
        }
    }
}
