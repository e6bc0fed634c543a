//! `abictl steps`: a workflow run's step timeline, read from its journal
//! (`workflow_steps_<h16>` in the module's namespace), Python and Rust hosts'
//! alike: key, kind, status, attempt, duration, child run, error.

use abi_sdk::documents::{Data, Value};
use abi_sdk::jobs::record::data_json;
use abi_sdk::workflows::journal::summary_view;
use abi_sdk::workflows::read_steps;
use abi_wire::{jobs, workflows};
use serde_json::json;

use super::Ctx;
use crate::connect;
use crate::error::Failure;
use crate::output::{Table, or_dash, print_json};

fn text(data: &Data, key: &str) -> String {
    match data.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Int(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Prints the steps `module`'s run `run_id` journaled, in the order they
/// started (`--json`: the summaries as the reference's `steps()` gives them).
///
/// # Errors
///
/// A malformed run id (exit 2), or the document service refused or is
/// unreachable.
///
/// # Cancel safety
///
/// Cancel safe: it only reads pages of summaries; nothing is printed until
/// the last page is in.
pub async fn run(cx: Ctx<'_>, module: &str, run_id: &str) -> anyhow::Result<()> {
    if jobs::parse_run_id(run_id).is_none() {
        return Err(
            Failure::usage(format!("{run_id:?} is not a run id (<job>:<sequence>)")).into(),
        );
    }
    let client = connect::client(cx.global, cx.env).await?;
    let docs = client
        .documents(module)
        .ok_or_else(|| Failure::usage("a journal needs a NATS connection"))?;
    let steps = read_steps(&docs, cx.global.project.as_str(), run_id).await?;
    if cx.global.json {
        let out: Vec<_> = steps.iter().map(|s| data_json(&summary_view(s))).collect();
        print_json(&json!(out));
        return Ok(());
    }
    if steps.is_empty() {
        println!("run {run_id} of {module} has no journaled steps");
        return Ok(());
    }
    let mut table = Table::new(&[
        "KEY", "KIND", "STATUS", "ATTEMPT", "DURATION", "CHILD", "ERROR",
    ]);
    for step in &steps {
        let child = match step.get(workflows::field::CHILD) {
            Some(Value::Object(child)) => text(child, workflows::field::CHILD_RUN_ID),
            _ => String::new(),
        };
        let duration = match step.get(workflows::field::DURATION_MS) {
            Some(Value::Int(ms)) if *ms > 0 => format!("{ms} ms"),
            _ => String::new(),
        };
        let error: String = text(step, workflows::field::ERROR)
            .chars()
            .take(60)
            .collect();
        table.status_row(
            vec![
                text(step, workflows::field::KEY),
                text(step, workflows::field::KIND),
                text(step, workflows::field::STATUS),
                text(step, workflows::field::ATTEMPT),
                or_dash(&duration),
                or_dash(&child),
                or_dash(&error),
            ],
            2,
        );
    }
    print!("{}", table.render(cx.style));
    Ok(())
}
