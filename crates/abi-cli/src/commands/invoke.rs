//! `abictl invoke <module> <agent> <prompt...>`: one run of a module's
//! agent through the SDK's caller (a READY replica declaring it), printing
//! each event as it comes (`event: data`; `--json`: one JSON object a line),
//! then the result (`--json`: `{"result": ...}`).
//!
//! The calls' tokens are bound to the instance they go to: with a module
//! key (`ABI_MODULE_KEY` and `--as`) the SDK signs them; with the project
//! secret abictl signs service tokens bound to that instance for `--as`
//! (default `api`). An issued `ABI_SERVICE_TOKEN` cannot be bound.

use abi_sdk::agents::AgentsExt as _;
use std::time::Duration;

use abi_sdk::CallErrorKind;
use abi_sdk::agents::{AgentErrorKind, SubmitOptions};
use serde_json::json;

use super::Ctx;
use crate::connect;
use crate::error::{EXIT_SERVICE, EXIT_UNREACHABLE, EXIT_WAIT_TIMEOUT, Failure};

/// What `abictl invoke` sends.
pub struct InvokeArgs<'a> {
    /// The module serving the agent.
    pub module: &'a str,
    /// Its contract major.
    pub major: u32,
    /// The agent's name.
    pub agent: &'a str,
    /// The prompt's words, joined by spaces.
    pub words: &'a [String],
    /// Use the agent's `invoke` handler (one message) instead of its stream.
    pub no_stream: bool,
    /// The run's deadline and the wait, in seconds.
    pub timeout_secs: u64,
}

/// Runs the agent once and prints its events and result.
///
/// # Errors
///
/// A bad timeout (exit 2), a refusal or a run that did not succeed (exit
/// 1), unreachable (exit 3), the deadline passed while waiting (exit 4).
///
/// # Cancel safety
///
/// Not cancel safe: dropped after the submit, the run goes on on the agent's host with nobody
/// reading it, and only some of its events may have been printed.
pub async fn run(cx: Ctx<'_>, args: InvokeArgs<'_>) -> anyhow::Result<()> {
    if !(1..=3600).contains(&args.timeout_secs) {
        return Err(Failure::usage("--timeout takes 1 to 3600 seconds").into());
    }
    let timeout = Duration::from_secs(args.timeout_secs);
    let client = connect::client(cx.global, cx.env).await?;
    let agent = client
        .module(args.module, args.major)
        .agent_client(args.agent)
        .request_timeout(Duration::from_secs(cx.global.timeout_secs.max(1)));
    let prompt = args.words.join(" ");
    let options = SubmitOptions {
        stream: !args.no_stream,
        deadline_secs: u32::try_from(args.timeout_secs).unwrap_or(3600),
        ..Default::default()
    };
    let mut run = agent.submit(&prompt, options).await.map_err(failure)?;
    let deadline = tokio::time::Instant::now() + timeout;
    while let Some(event) = run.next_event(Some(deadline)).await.map_err(failure)? {
        if cx.global.json {
            // One compact object a line, so that a reader can follow it.
            println!(
                "{}",
                json!({"sequence": event.sequence, "event": event.event, "data": event.data})
            );
        } else {
            println!("{}: {}", event.event, event.data);
        }
    }
    let result = run
        .last_status()
        .map(|s| s.result.clone())
        .unwrap_or_default();
    if cx.global.json {
        println!(
            "{}",
            json!({"invocation_id": run.invocation_id(), "result": result})
        );
    } else {
        println!("{result}");
    }
    Ok(())
}

fn failure(e: abi_sdk::agents::AgentError) -> anyhow::Error {
    let exit = match e.kind() {
        AgentErrorKind::WaitTimeout => EXIT_WAIT_TIMEOUT,
        AgentErrorKind::SubmissionUncertain
        | AgentErrorKind::Call(
            CallErrorKind::TimedOut | CallErrorKind::Transport | CallErrorKind::NoResponders,
        ) => EXIT_UNREACHABLE,
        _ => EXIT_SERVICE,
    };
    Failure {
        exit,
        message: format!("invoke failed: {e}"),
        hint: None,
    }
    .into()
}
