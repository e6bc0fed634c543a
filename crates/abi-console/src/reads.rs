//! What the console reads besides the registry: run records and workflow
//! journals in each module's document namespace, and when a job's `every`
//! schedules were stored in the jobs stream. Reads only; a collection no
//! host ever wrote is an empty list.

use abi_sdk::documents::{Data, FindQuery, OrderBy, Predicate, Value};
use abi_sdk::jobs::record::data_json;
use abi_sdk::{CallError, CallErrorKind, DiscoveryClient};
use abi_wire::{agents, jobs};
use jiff::Timestamp;
use serde_json::json;

use crate::model::runs::{AgentRunRow, RunRow};

/// The largest page of runs a list shows.
pub const MAX_LIST: i64 = 500;

/// Records of a list, or an error to show.
pub type Listed<T> = Result<Vec<T>, CallError>;

fn documents(client: &DiscoveryClient, module: &str) -> Result<abi_sdk::DocumentClient, CallError> {
    client
        .documents(module)
        .ok_or_else(|| CallError::new(CallErrorKind::NoResponders, "no NATS connection"))
}

/// An empty list for a collection nobody created yet.
fn none_yet<T>(result: Result<Vec<T>, CallError>) -> Listed<T> {
    match result {
        Err(e) if e.kind() == CallErrorKind::CollectionNotFound => Ok(Vec::new()),
        other => other,
    }
}

/// The newest `limit` runs of `module`'s `job`, of `statuses` only when
/// some are given, newest trigger first.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn job_runs(
    client: &DiscoveryClient,
    module: &str,
    job: &str,
    statuses: &[String],
    limit: i64,
    now: f64,
) -> Listed<RunRow> {
    let docs = documents(client, module)?;
    let mut where_ = vec![Predicate::eq(jobs::field::JOB, job)];
    if !statuses.is_empty() {
        let values = statuses.iter().map(|s| Value::String(s.clone())).collect();
        where_.push(Predicate::is_in(jobs::field::STATUS, values));
    }
    let query = FindQuery {
        where_,
        order_by: Some(OrderBy::desc(jobs::field::SEQUENCE)),
        limit: limit.clamp(1, MAX_LIST),
        ..Default::default()
    };
    let page = docs
        .find(&jobs::runs_collection(client.project()), query)
        .await;
    none_yet(page.map(|page| {
        page.items
            .iter()
            .map(|d| RunRow::from_record(&data_json(&d.data), now))
            .collect()
    }))
}

/// How many of `module`'s `job` runs have `status`.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn count_runs(
    client: &DiscoveryClient,
    module: &str,
    job: &str,
    status: &str,
) -> Result<i64, CallError> {
    let docs = documents(client, module)?;
    let where_ = vec![
        Predicate::eq(jobs::field::JOB, job),
        Predicate::eq(jobs::field::STATUS, status),
    ];
    match docs
        .count(&jobs::runs_collection(client.project()), where_)
        .await
    {
        Err(e) if e.kind() == CallErrorKind::CollectionNotFound => Ok(0),
        other => other,
    }
}

/// One run: its record (or the reference's `QUEUED` placeholder, or
/// `RunNotFound`) and, for a workflow, its journal's steps.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn run_detail(
    client: &DiscoveryClient,
    module: &str,
    run_id: &str,
) -> Result<serde_json::Value, CallError> {
    let (job, _) = jobs::parse_run_id(run_id).ok_or_else(|| {
        CallError::new(
            CallErrorKind::InvalidArgument,
            "not a run id (<job>:<sequence>)",
        )
    })?;
    let handle = abi_sdk::jobs::JobClient::unchecked(client, module, job)
        .map_err(|e| CallError::new(CallErrorKind::InvalidArgument, e.to_string()))?
        .run(run_id);
    let record = handle.status().await?;
    let docs = documents(client, module)?;
    let steps = abi_sdk::workflows::read_steps(&docs, client.project(), run_id).await?;
    let steps: Vec<serde_json::Value> = steps
        .iter()
        .map(|s| data_json(&abi_sdk::workflows::journal::summary_view(s)))
        .collect();
    let now = now_epoch();
    let json = record.to_json();
    Ok(json!({
        "module_id": module,
        "row": RunRow::from_record(&json, now),
        "record": json,
        "steps": steps,
    }))
}

/// The newest `limit` runs of `module`'s agents (of `agent` only when
/// given), newest first.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn agent_runs(
    client: &DiscoveryClient,
    module: &str,
    agent: Option<&str>,
    limit: i64,
) -> Listed<AgentRunRow> {
    let docs = documents(client, module)?;
    let where_ = agent
        .map(|a| vec![Predicate::eq(agents::field::AGENT_NAME, a)])
        .unwrap_or_default();
    let query = FindQuery {
        where_,
        order_by: Some(OrderBy::desc(agents::field::SUBMITTED_AT)),
        limit: limit.clamp(1, MAX_LIST),
        ..Default::default()
    };
    let page = docs
        .find(&agents::runs_collection(client.project()), query)
        .await;
    none_yet(page.map(|page| {
        page.items
            .iter()
            .map(|d| AgentRunRow::from_record(&data_json(&d.data)))
            .collect()
    }))
}

/// One agent run's whole record, `None` when `module` has none of that
/// invocation id (its record is kept under a hash of the agent's name and
/// the id, so it is found by its field).
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn agent_run(
    client: &DiscoveryClient,
    module: &str,
    invocation: &str,
) -> Result<Option<Data>, CallError> {
    if !agents::is_invocation_id(invocation) {
        return Err(CallError::new(
            CallErrorKind::InvalidArgument,
            "not an invocation id (1 to 128 of A-Z a-z 0-9 _ . : -)",
        ));
    }
    let docs = documents(client, module)?;
    let query = FindQuery {
        where_: vec![Predicate::eq(agents::field::INVOCATION_ID, invocation)],
        limit: 1,
        ..Default::default()
    };
    let found = docs
        .find(&agents::runs_collection(client.project()), query)
        .await;
    Ok(none_yet(found.map(|page| page.items))?
        .into_iter()
        .next()
        .map(|d| d.data))
}

/// When the `index`-th schedule of `module`'s `job` was stored in the
/// jobs stream (an `every` schedule fires from then on), if it is.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn schedule_stored_at(
    client: &DiscoveryClient,
    module: &str,
    job: &str,
    index: usize,
) -> Option<Timestamp> {
    let nats = client.nats()?.clone();
    let js = async_nats::jetstream::new(nats);
    let stream = js.get_stream(jobs::stream(client.project())).await.ok()?;
    let subject = jobs::JobSubjects::new(client.project(), module, job).schedule(index);
    let message = stream
        .get_last_raw_message_by_subject(&subject)
        .await
        .ok()?;
    let nanos = message.time.unix_timestamp_nanos();
    Timestamp::from_nanosecond(nanos).ok()
}

/// Seconds since the Unix epoch.
pub fn now_epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
