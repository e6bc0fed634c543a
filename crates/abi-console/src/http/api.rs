//! The JSON the pages read. Reads only.

use std::collections::BTreeMap;

use abi_sdk::jobs::record::data_json;
use abi_wire::ErrorCode;
use abi_wire::jobs::RunStatus;
use axum::Json;
use axum::extract::{Path, Query};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::future::join_all;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, State};
use crate::model::{jobs, search as find};
use crate::reads;

/// The runs a job list shows unless asked otherwise.
const DEFAULT_RUNS: i64 = 50;

/// `GET /api/modules`: the modules view as last read.
pub async fn modules(state: State) -> Response {
    let registry = state.live.registry();
    (
        [(header::CONTENT_TYPE, "application/json")],
        registry.json.to_string(),
    )
        .into_response()
}

/// `GET /api/jobs`: every declared job, its triggers and next ticks, and
/// how many of its runs are RUNNING and RETRYING.
pub async fn jobs(state: State) -> Result<Json<Value>, ApiError> {
    let registry = state.live.registry();
    // Stored times of the `every` schedules, read first (the view is pure).
    let mut wanted = Vec::new();
    for instance in registry
        .live
        .records
        .iter()
        .filter_map(|r| r.instance.as_ref())
    {
        let module = abi_registry::overview::module_of(instance);
        for job in instance.descriptor.iter().flat_map(|d| &d.jobs) {
            let schedules = job
                .triggers
                .iter()
                .filter(|t| {
                    matches!(
                        abi_sdk::jobs::Trigger::from_pb(t),
                        Ok(abi_sdk::jobs::Trigger::Cron { .. }
                            | abi_sdk::jobs::Trigger::Every { .. })
                    )
                })
                .count();
            for index in 0..schedules {
                wanted.push((module.to_owned(), job.name.clone(), index));
            }
        }
    }
    wanted.sort();
    wanted.dedup();
    let client = &state.client;
    let times = join_all(wanted.iter().map(|(module, job, index)| async move {
        let at = reads::schedule_stored_at(client, module, job, *index).await;
        ((module.clone(), job.clone(), *index), at)
    }))
    .await;
    let stored: BTreeMap<(String, String, usize), jiff::Timestamp> = times
        .into_iter()
        .filter_map(|(key, at)| at.map(|at| (key, at)))
        .collect();
    let lookup = |module: &str, job: &str, index: usize| {
        stored
            .get(&(module.to_owned(), job.to_owned(), index))
            .copied()
    };
    let rows = jobs::jobs_view(&registry.live, jiff::Timestamp::now(), &lookup);
    let counts = join_all(rows.iter().map(|row| async move {
        let running = reads::count_runs(
            client,
            &row.module_id,
            &row.name,
            RunStatus::Running.as_str(),
        );
        let retrying = reads::count_runs(
            client,
            &row.module_id,
            &row.name,
            RunStatus::Retrying.as_str(),
        );
        let (running, retrying) = futures::join!(running, retrying);
        (running.unwrap_or(0), retrying.unwrap_or(0))
    }))
    .await;
    let out: Vec<Value> = rows
        .iter()
        .zip(counts)
        .map(|(row, (running, retrying))| {
            let mut value = serde_json::to_value(row).unwrap_or(Value::Null);
            value["running"] = json!(running);
            value["retrying"] = json!(retrying);
            value
        })
        .collect();
    Ok(Json(json!({ "jobs": out })))
}

/// Filters of a run list.
#[derive(Debug, Deserialize)]
pub struct RunsQuery {
    /// Statuses, comma separated (empty: all).
    #[serde(default)]
    status: String,
    /// How many (default 50, at most 500).
    limit: Option<i64>,
}

/// The statuses of a filter, each one the wire knows.
///
/// # Errors
///
/// `INVALID_ARGUMENT` naming an unknown status.
pub fn statuses(filter: &str) -> Result<Vec<String>, ApiError> {
    filter
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            RunStatus::parse(s)
                .map(|status| status.as_str().to_owned())
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidArgument,
                        format!(
                            "unknown status {s:?}; one of {}",
                            RunStatus::ALL
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                })
        })
        .collect()
}

/// `GET /api/jobs/{module}/{job}/runs`: the newest runs.
pub async fn job_runs(
    state: State,
    Path((module, job)): Path<(String, String)>,
    Query(query): Query<RunsQuery>,
) -> Result<Json<Value>, ApiError> {
    let statuses = statuses(&query.status)?;
    let limit = query.limit.unwrap_or(DEFAULT_RUNS);
    let runs = reads::job_runs(
        &state.client,
        &module,
        &job,
        &statuses,
        limit,
        reads::now_epoch(),
    )
    .await?;
    Ok(Json(
        json!({ "module_id": module, "job": job, "runs": runs }),
    ))
}

/// `GET /api/runs/{module}/{run}`: one run, its steps when a workflow.
pub async fn run(
    state: State,
    Path((module, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        reads::run_detail(&state.client, &module, &run_id).await?,
    ))
}

/// A declared agent or model and the instances serving it.
#[derive(Debug, Default, serde::Serialize)]
struct Declared {
    module_id: String,
    name: String,
    description: String,
    instances: Vec<Value>,
}

/// `GET /api/agents`: declared agents and models, and the chats counted
/// per model and replica since the console started.
pub async fn agents(state: State) -> Json<Value> {
    let registry = state.live.registry();
    let mut agents: BTreeMap<(String, String), Declared> = BTreeMap::new();
    let mut models: BTreeMap<(String, String), Declared> = BTreeMap::new();
    for instance in registry
        .live
        .records
        .iter()
        .filter_map(|r| r.instance.as_ref())
    {
        let Some(descriptor) = &instance.descriptor else {
            continue;
        };
        let module = &descriptor.module_id;
        let serving = json!({"instance_id": instance.instance_id, "status": instance.status});
        for a in &descriptor.agents {
            let entry = agents
                .entry((module.clone(), a.name.clone()))
                .or_insert_with(|| Declared {
                    module_id: module.clone(),
                    name: a.name.clone(),
                    description: a.description.clone(),
                    instances: Vec::new(),
                });
            entry.instances.push(serving.clone());
        }
        for m in &descriptor.models {
            let entry = models
                .entry((module.clone(), m.name.clone()))
                .or_insert_with(|| Declared {
                    module_id: module.clone(),
                    name: m.name.clone(),
                    ..Declared::default()
                });
            entry.instances.push(serving.clone());
        }
    }
    Json(json!({
        "agents": agents.into_values().collect::<Vec<_>>(),
        "models": models.into_values().collect::<Vec<_>>(),
        "chats": state.live.chats(),
    }))
}

/// Filters of an agent run list.
#[derive(Debug, Deserialize)]
pub struct AgentRunsQuery {
    /// One agent (empty: all of the module's).
    #[serde(default)]
    agent: String,
    /// How many (default 50, at most 500).
    limit: Option<i64>,
}

/// `GET /api/agents/{module}/runs`: the newest agent runs.
pub async fn agent_runs(
    state: State,
    Path(module): Path<String>,
    Query(query): Query<AgentRunsQuery>,
) -> Result<Json<Value>, ApiError> {
    let agent = (!query.agent.is_empty()).then_some(query.agent.as_str());
    let limit = query.limit.unwrap_or(DEFAULT_RUNS);
    let runs = reads::agent_runs(&state.client, &module, agent, limit).await?;
    Ok(Json(json!({ "module_id": module, "runs": runs })))
}

/// `GET /api/agents/{module}/runs/{invocation}`: one agent run's record.
pub async fn agent_run(
    state: State,
    Path((module, invocation)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    match reads::agent_run(&state.client, &module, &invocation).await? {
        Some(record) => {
            let json = data_json(&record);
            Ok(Json(json!({
                "module_id": module,
                "row": crate::model::runs::AgentRunRow::from_record(&json),
                "record": json,
            })))
        }
        None => Err(ApiError::new(
            ErrorCode::InvocationNotFound,
            format!("{module} has no agent run {invocation}"),
        )),
    }
}

/// A search.
#[derive(Debug, Deserialize)]
pub struct SearchQuery {
    /// What to look for.
    #[serde(default)]
    q: String,
}

/// `GET /api/search?q=`: what the query names in the registry, and the
/// agent run it is the invocation id of, if any.
pub async fn search(state: State, Query(query): Query<SearchQuery>) -> Json<Value> {
    let registry = state.live.registry();
    let mut hits = find::search(&query.q, &registry.view);
    let q = query.q.trim();
    // An invocation id: looked up in the run records of each module with agents.
    if abi_wire::agents::is_invocation_id(q) {
        let with_agents: Vec<&str> = registry
            .view
            .modules
            .iter()
            .filter(|m| !m.declares.agents.is_empty())
            .map(|m| m.module_id.as_str())
            .collect();
        let client = &state.client;
        let found = join_all(with_agents.iter().map(|module| async move {
            let found = reads::agent_run(client, module, q).await.ok().flatten();
            found.map(|_| *module)
        }))
        .await;
        for module in found.into_iter().flatten() {
            hits.push(find::Hit {
                kind: "agent run",
                label: format!("{module} {q}"),
                href: format!("/agents/{module}/{q}"),
                module_id: module.to_owned(),
            });
        }
    }
    Json(json!({ "query": query.q, "hits": hits }))
}
