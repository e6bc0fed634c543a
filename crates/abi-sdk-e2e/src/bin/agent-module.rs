//! A module process serving one agent, `echo`, with the SDK's `AgentHost`,
//! for the agent tests that need a real process (kill -9, SIGTERM).
//! Configured by the SDK's own variables (`NATS_URL`, `ABI_PROJECT`,
//! `ABI_MODULE_KEY`, ...) plus `E2E_ID` (module id), `E2E_TAG` (answers are
//! `<tag>:<prompt>`) and `E2E_UPKEEP_MS` (the host's upkeep interval).
//! Prompt `block` waits until cancelled; `sleep:<ms>` answers `<tag>:slept`;
//! `relay` triggers the job `E2E_RELAY` names (`<module>/<job>`), waits for
//! its end and answers `relayed:<status>` (a call chain for the trace tests).
//!
//! Prints `EVENT run <invocation_id>` when a handler starts. Exit code 0
//! after a clean stop, 1 otherwise.

use std::sync::Arc;
use std::time::Duration;

use abi_sdk::agents::{AgentHost, AgentHostOptions, AgentSpec, invoke_fn};
use abi_sdk::{Config, Module, ModuleSpec, Runner};

struct AgentModule;

impl Module for AgentModule {}

#[tokio::main]
async fn main() {
    let _ = abi_process::logs::init("off");
    let id = std::env::var("E2E_ID").unwrap_or_else(|_| "agents".into());
    let tag = std::env::var("E2E_TAG").unwrap_or_else(|_| "agent".into());
    let mut options = AgentHostOptions::default();
    if let Some(ms) = std::env::var("E2E_UPKEEP_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        options.upkeep_interval = Duration::from_millis(ms);
    }
    let handler = invoke_fn(move |prompt: String, cx| {
        let tag = tag.clone();
        async move {
            println!("EVENT run {}", cx.invocation_id);
            if prompt == "block" {
                cx.cancelled.cancelled().await;
            }
            if prompt == "relay" {
                return relay()
                    .await
                    .map_err(|e| abi_sdk::agents::HandlerError::new(e.to_string()));
            }
            if let Some(ms) = prompt.strip_prefix("sleep:").and_then(|m| m.parse().ok()) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                return Ok(format!("{tag}:slept"));
            }
            Ok(format!("{tag}:{prompt}"))
        }
    });
    let host = AgentHost::new()
        .agent(AgentSpec::new("echo", "says it back"), handler)
        .options(options);
    let spec = ModuleSpec::new(&id).serve(Arc::new(host));
    let config = match Config::from_env(&id) {
        Ok(config) => config,
        Err(err) => {
            println!("EVENT exit error {err}");
            std::process::exit(1);
        }
    };
    match Runner::new(spec).config(config).run(AgentModule).await {
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

/// Triggers the job `E2E_RELAY` names and waits for its end.
async fn relay() -> Result<String, abi_sdk::BoxError> {
    let target = std::env::var("E2E_RELAY")?;
    let (module, job) = target
        .split_once('/')
        .ok_or("E2E_RELAY is <module>/<job>")?;
    let id = std::env::var("E2E_ID")?;
    let nats = async_nats::connect(std::env::var("NATS_URL")?).await?;
    let token = abi_sdk::TokenSource::module_key(id, std::env::var("ABI_MODULE_KEY")?);
    let project = std::env::var("ABI_PROJECT")?;
    let client = abi_sdk::jobs::JobClient::new(nats, token, project, module, job);
    let run = client
        .trigger(serde_json::json!({"from": "relay"}), None)
        .await?;
    let record = run.wait(Duration::from_secs(30)).await?;
    Ok(format!("relayed:{}", record.status))
}
