//! `abictl agent-runs <module> [agent]`: recent runs of a module's agents,
//! newest first, from the run records its agent hosts keep in its document
//! namespace (`agent_runs_*`, as the reference stores them). The job
//! `runs` command reads job records; agent records have other fields.
//! `abictl agent-run <module> <invocation id>` prints one whole record.

use abi_sdk::CallErrorKind;
use abi_sdk::documents::{Data, FindQuery, OrderBy, Predicate, Value};
use abi_wire::agents::{self, field};
use serde_json::json;

use super::Ctx;
use crate::connect;
use crate::error::{EXIT_SERVICE, Failure};
use crate::output::{Table, or_dash, print_json};

/// The record fields shown, in order.
const FIELDS: [&str; 9] = [
    field::AGENT_NAME,
    field::INVOCATION_ID,
    field::STATUS,
    field::CALLER,
    field::OWNER,
    field::SUBMITTED_AT,
    field::FINISHED_AT,
    field::ERROR_CODE,
    field::LAST_SEQUENCE,
];

/// Prints up to `limit` runs of `module`'s agents (of `agent` only when
/// given), newest first.
///
/// # Errors
///
/// The document service refused or is unreachable; a bad limit (exit 2).
///
/// # Cancel safety
///
/// Cancel safe: it only reads run records; nothing is printed until the page is in.
pub async fn run(
    cx: Ctx<'_>,
    module: &str,
    agent: Option<&str>,
    status: Option<&str>,
    limit: i64,
) -> anyhow::Result<()> {
    if !(1..=1000).contains(&limit) {
        return Err(Failure::usage("--limit takes 1 to 1000").into());
    }
    let client = connect::client(cx.global, cx.env).await?;
    let docs = client
        .documents(module)
        .ok_or_else(|| Failure::usage("run records need a NATS connection"))?;
    let mut where_ = Vec::new();
    if let Some(agent) = agent {
        where_.push(Predicate::new(field::AGENT_NAME, "eq", agent));
    }
    if let Some(status) = status {
        where_.push(Predicate::new(field::STATUS, "eq", status));
    }
    let query = FindQuery {
        where_,
        order_by: Some(OrderBy::desc(field::SUBMITTED_AT)),
        limit,
        ..Default::default()
    };
    let collection = agents::runs_collection(cx.global.project.as_str());
    let records = match docs.find(&collection, query).await {
        Ok(page) => page.items,
        // No host of the module ever wrote a record.
        Err(e) if e.kind() == CallErrorKind::CollectionNotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    if cx.global.json {
        let out: Vec<_> = records
            .iter()
            .map(|d| {
                let mut row = serde_json::Map::new();
                for field in FIELDS {
                    row.insert(field.into(), field_json(&d.data, field));
                }
                serde_json::Value::Object(row)
            })
            .collect();
        print_json(&json!(out));
        return Ok(());
    }
    let mut table = Table::new(&[
        "AGENT",
        "INVOCATION",
        "STATUS",
        "CALLER",
        "OWNER",
        "SUBMITTED",
        "FINISHED",
        "ERROR",
        "EVENTS",
    ]);
    for doc in &records {
        let cells = FIELDS
            .iter()
            .map(|f| match field_json(&doc.data, f) {
                serde_json::Value::String(s) => or_dash(&s),
                serde_json::Value::Null => "-".to_owned(),
                other => other.to_string(),
            })
            .collect();
        table.status_row(cells, 2);
    }
    print!("{}", table.render(cx.style));
    Ok(())
}

fn field_json(data: &Data, field: &str) -> serde_json::Value {
    match data.get(field) {
        Some(Value::String(s)) => json!(s),
        Some(Value::Int(i)) => json!(i),
        _ => serde_json::Value::Null,
    }
}

/// Prints the whole record of one invocation of `module`'s agents, as JSON.
///
/// # Errors
///
/// A malformed invocation id (exit 2), no such invocation (exit 1), the
/// document service refused or is unreachable.
///
/// # Cancel safety
///
/// Cancel safe: it only looks the record up; nothing is printed until it is found.
pub async fn show(cx: Ctx<'_>, module: &str, invocation_id: &str) -> anyhow::Result<()> {
    if !agents::is_invocation_id(invocation_id) {
        return Err(Failure::usage(format!(
            "{invocation_id:?} is not an invocation id (1 to 128 of A-Z a-z 0-9 _ . : -)"
        ))
        .into());
    }
    let client = connect::client(cx.global, cx.env).await?;
    let docs = client
        .documents(module)
        .ok_or_else(|| Failure::usage("run records need a NATS connection"))?;
    let query = FindQuery {
        where_: vec![Predicate::new(field::INVOCATION_ID, "eq", invocation_id)],
        limit: 1,
        ..Default::default()
    };
    let collection = agents::runs_collection(cx.global.project.as_str());
    let found = match docs.find(&collection, query).await {
        Ok(page) => page.items.into_iter().next(),
        Err(e) if e.kind() == CallErrorKind::CollectionNotFound => None,
        Err(e) => return Err(e.into()),
    };
    let Some(record) = found else {
        return Err(Failure {
            exit: EXIT_SERVICE,
            message: format!("no such invocation: {module} has no agent run {invocation_id:?}"),
            hint: Some(format!(
                "`abictl agent-runs {module}` lists the runs recorded"
            )),
        }
        .into());
    };
    print_json(&abi_sdk::jobs::record::data_json(&record.data));
    Ok(())
}
