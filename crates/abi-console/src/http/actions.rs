//! The actions: trigger a run, cancel one, cancel the runs a filter
//! selects (with a typed confirmation), evict an instance. Each is refused
//! unless the console runs with actions allowed, and each is logged with
//! who asked (the peer's address and the console's identity) and what it
//! did.

use std::net::SocketAddr;

use abi_sdk::jobs::JobClient;
use abi_wire::ErrorCode;
use abi_wire::jobs::RunStatus;
use axum::Json;
use axum::extract::{ConnectInfo, Path};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::info;

use super::api::statuses;
use super::{ApiError, State};
use crate::reads;

/// The runs a batch cancel takes at most.
const MAX_BATCH: i64 = reads::MAX_LIST;

fn allowed(state: &State) -> Result<(), ApiError> {
    if state.options.allow_actions {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::PermissionDenied,
            "actions are off: start the console with --allow-actions",
        ))
    }
}

/// `POST /api/jobs/{module}/{job}/trigger` with the payload (a JSON
/// object, `{}` when empty): the run id.
pub async fn trigger(
    state: State,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((module, job)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    allowed(&state)?;
    let payload: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(
                ErrorCode::InvalidArgument,
                format!("the payload is not JSON: {e}"),
            )
        })?
    };
    if !payload.is_object() {
        return Err(ApiError::new(
            ErrorCode::InvalidArgument,
            "the payload must be a JSON object",
        ));
    }
    let client = JobClient::from_discovery(&state.client, &module, &job)
        .await
        .map_err(|e| ApiError::new(ErrorCode::JobNotFound, e.to_string()))?;
    let run = client
        .trigger(payload, None)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))?;
    info!(
        action = "trigger",
        %peer,
        identity = %state.options.identity,
        module = %module,
        job = %job,
        run_id = %run.run_id(),
        "console action"
    );
    Ok(Json(
        json!({"run_id": run.run_id(), "duplicate": run.duplicate()}),
    ))
}

/// `POST /api/runs/{module}/{run}/cancel`: a cancel sent to a run that
/// has not ended.
pub async fn cancel(
    state: State,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((module, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    allowed(&state)?;
    cancel_one(&state, &module, &run_id).await?;
    info!(
        action = "cancel",
        %peer,
        identity = %state.options.identity,
        module = %module,
        run_id = %run_id,
        "console action"
    );
    Ok(Json(json!({"run_id": run_id, "cancel": "sent"})))
}

async fn cancel_one(state: &State, module: &str, run_id: &str) -> Result<(), ApiError> {
    let (job, _) = abi_wire::jobs::parse_run_id(run_id).ok_or_else(|| {
        ApiError::new(
            ErrorCode::InvalidArgument,
            format!("{run_id:?} is not a run id"),
        )
    })?;
    let run = JobClient::unchecked(&state.client, module, job)
        .map_err(|e| ApiError::new(ErrorCode::InvalidArgument, e.to_string()))?
        .run(run_id);
    let record = run.status().await?;
    if record.is_terminal() {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("run {run_id} already ended {}", record.status),
        ));
    }
    run.cancel()
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))
}

/// A batch cancel: the filter and its confirmation.
#[derive(Debug, Deserialize)]
pub struct CancelMany {
    /// Statuses, comma separated; only runs not ended can be cancelled.
    status: String,
    /// Must read `cancel <n>`, `n` the number of runs the filter selects
    /// now (the page shows it).
    #[serde(default)]
    confirm: String,
}

/// `POST /api/jobs/{module}/{job}/cancel`: cancels every run of the job
/// the filter selects, once the confirmation names how many.
pub async fn cancel_many(
    state: State,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((module, job)): Path<(String, String)>,
    Json(request): Json<CancelMany>,
) -> Result<Json<Value>, ApiError> {
    allowed(&state)?;
    let statuses = statuses(&request.status)?;
    if statuses.is_empty()
        || statuses
            .iter()
            .any(|s| RunStatus::parse(s).is_none_or(RunStatus::is_terminal))
    {
        return Err(ApiError::new(
            ErrorCode::InvalidArgument,
            "name the statuses to cancel: only runs that have not ended (RUNNING, RETRYING) can be",
        ));
    }
    let runs = reads::job_runs(
        &state.client,
        &module,
        &job,
        &statuses,
        MAX_BATCH,
        reads::now_epoch(),
    )
    .await?;
    let expected = format!("cancel {}", runs.len());
    if request.confirm.trim() != expected {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "type {expected:?} to cancel the {} runs selected",
                runs.len()
            ),
        ));
    }
    let mut sent = Vec::new();
    let mut failed = Vec::new();
    for row in &runs {
        match cancel_one(&state, &module, &row.run_id).await {
            Ok(()) => sent.push(row.run_id.clone()),
            Err(err) => failed.push(json!({"run_id": row.run_id, "error": err.message()})),
        }
    }
    info!(
        action = "cancel-many",
        %peer,
        identity = %state.options.identity,
        module = %module,
        job = %job,
        statuses = %request.status,
        sent = sent.len(),
        failed = failed.len(),
        "console action"
    );
    Ok(Json(json!({"sent": sent, "failed": failed})))
}

/// `POST /api/instances/{instance}/evict`: removes an instance from the
/// registry (its process registers again if it lives).
pub async fn evict(
    state: State,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(instance): Path<String>,
) -> Result<Json<Value>, ApiError> {
    allowed(&state)?;
    let evicted = state.client.evict(&instance).await?;
    info!(
        action = "evict",
        %peer,
        identity = %state.options.identity,
        instance_id = %instance,
        "console action"
    );
    Ok(Json(
        json!({"instance_id": evicted.instance_id, "evicted": true}),
    ))
}
