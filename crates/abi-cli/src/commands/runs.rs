//! `abictl trigger`, `runs`, `run`, `cancel`: the caller side of jobs
//! (`abi_sdk::jobs`): store a trigger as the reference's `JobProxy` does,
//! read run records from the module's namespace, send a cancel.

use std::time::Duration;

use abi_sdk::documents::{FindQuery, OrderBy, Predicate};
use abi_sdk::jobs::{JobClient, RunRecord, TriggerErrorKind, WaitErrorKind};
use abi_sdk::{CallErrorKind, DiscoveryClient};
use abi_wire::jobs;
use serde_json::json;

use super::Ctx;
use crate::connect;
use crate::error::{EXIT_SERVICE, EXIT_UNREACHABLE, EXIT_USAGE, EXIT_WAIT_TIMEOUT, Failure};
use crate::output::{Table, or_dash, print_json};

/// Triggers `module`'s `job` with `payload`; with `wait_secs`, waits for the
/// run's end.
///
/// # Errors
///
/// A bad payload (exit 2), a refused trigger, a run that did not succeed
/// (exit 1), the deadline (exit 4).
///
/// # Cancel safety
///
/// Not cancel safe: dropped once the trigger is sent, the run may be stored and go ahead with its
/// id never printed (triggering again with the same `key` returns it).
pub async fn trigger(
    cx: Ctx<'_>,
    module: &str,
    job: &str,
    payload: &str,
    key: Option<&str>,
    wait_secs: Option<f64>,
) -> anyhow::Result<()> {
    let payload =
        serde_json::Value::Object(crate::checks::json_object("--payload", payload).await?);
    let wait = wait_duration(wait_secs)?;
    let client = connect::client(cx.global, cx.env).await?;
    send(cx, &client, module, job, payload, key, wait).await
}

/// `--wait`'s seconds as a duration (exit 2 for a negative or odd number).
fn wait_duration(wait_secs: Option<f64>) -> Result<Option<Duration>, Failure> {
    wait_secs
        .map(|s| {
            Duration::try_from_secs_f64(s)
                .map_err(|_| Failure::usage("--wait takes a number of seconds"))
        })
        .transpose()
}

/// Triggers `module`'s `job` again with the payload of `run_id`, an ended
/// run; with `failed_only`, only when it did not succeed (a retry).
///
/// # Errors
///
/// A malformed run id (exit 2), no such run, one not ended (or, for a
/// retry, one that succeeded or was skipped), or as [`trigger`].
///
/// # Cancel safety
///
/// Not cancel safe: dropped once the new trigger is sent, the rerun may be stored and go ahead
/// with its id never printed; it has no key, so trying again starts another run.
pub async fn rerun(
    cx: Ctx<'_>,
    module: &str,
    run_id: &str,
    failed_only: bool,
    wait_secs: Option<f64>,
) -> anyhow::Result<()> {
    let wait = wait_duration(wait_secs)?;
    let client = connect::client(cx.global, cx.env).await?;
    let run = run_handle(&client, module, run_id)?;
    let record = run.status().await.map_err(|e| no_such_run(module, e))?;
    let refused = |message: String, hint: Option<String>| Failure {
        exit: EXIT_SERVICE,
        message,
        hint,
    };
    if !record.is_terminal() {
        return Err(refused(
            format!("run {run_id} is {}; it has not ended", record.status),
            Some(format!("`abictl cancel {module} {run_id}` stops it")),
        )
        .into());
    }
    if failed_only && [jobs::SUCCEEDED, jobs::SKIPPED].contains(&record.status.as_str()) {
        return Err(refused(
            format!("run {run_id} ended {}; nothing to retry", record.status),
            Some(format!("`abictl rerun {module} {run_id}` runs it again")),
        )
        .into());
    }
    let payload = match record.to_json().get(jobs::field::PAYLOAD) {
        Some(payload @ serde_json::Value::Object(_)) => payload.clone(),
        _ => json!({}),
    };
    send(cx, &client, module, &record.job, payload, None, wait).await
}

/// Triggers `job` with `payload` (checked against the module's
/// declarations) and prints the run id, or with `wait_secs` the record of
/// its end.
async fn send(
    cx: Ctx<'_>,
    client: &DiscoveryClient,
    module: &str,
    job: &str,
    payload: serde_json::Value,
    key: Option<&str>,
    wait: Option<Duration>,
) -> anyhow::Result<()> {
    let job = declared_job(client, module, job).await?;
    let run = job.trigger(payload, key).await.map_err(|e| {
        let exit = match e.kind() {
            TriggerErrorKind::TimedOut | TriggerErrorKind::Transport => EXIT_UNREACHABLE,
            _ => EXIT_SERVICE,
        };
        Failure {
            exit,
            message: format!("trigger refused: {e}"),
            hint: (e.kind() == TriggerErrorKind::StreamNotFound)
                .then(|| "abi-discovery creates the jobs stream when it starts".to_owned()),
        }
    })?;
    let Some(wait) = wait else {
        if cx.global.json {
            print_json(&json!({"run_id": run.run_id(), "duplicate": run.duplicate()}));
        } else {
            let note = if run.duplicate() { " (duplicate)" } else { "" };
            println!("{}{note}", run.run_id());
        }
        return Ok(());
    };
    let record = run.wait(wait).await.map_err(|e| match e.kind() {
        WaitErrorKind::TimedOut => Failure {
            exit: EXIT_WAIT_TIMEOUT,
            message: format!("run {} not finished after {wait:?}", run.run_id()),
            hint: Some(format!(
                "`abictl run {module} {}` shows it later",
                run.run_id()
            )),
        },
        _ => Failure {
            exit: EXIT_UNREACHABLE,
            message: format!("cannot follow run {}: {e}", run.run_id()),
            hint: None,
        },
    })?;
    print_json(&record.to_json());
    match record.status.as_str() {
        jobs::SUCCEEDED | jobs::SKIPPED => Ok(()),
        status => Err(Failure {
            exit: EXIT_SERVICE,
            message: format!("run {} ended {status}", run.run_id()),
            hint: None,
        }
        .into()),
    }
}

/// `module`'s `job` once a registered instance declares it: exit 1 naming
/// what the module declares otherwise.
pub(super) async fn declared_job(
    client: &DiscoveryClient,
    module: &str,
    job: &str,
) -> Result<JobClient, Failure> {
    JobClient::from_discovery(client, module, job)
        .await
        .map_err(|e| {
            let exit = match e.kind() {
                TriggerErrorKind::Lookup => EXIT_UNREACHABLE,
                TriggerErrorKind::NoConnection => EXIT_USAGE,
                _ => EXIT_SERVICE,
            };
            Failure {
                exit,
                message: format!("trigger refused: {e}"),
                hint: (e.kind() == TriggerErrorKind::ModuleNotFound)
                    .then(|| "`abictl ls` lists the registered modules".to_owned()),
            }
        })
}

/// Prints the newest runs of `module`'s `job`, optionally of one status.
///
/// # Errors
///
/// The document service refused or is unreachable.
///
/// # Cancel safety
///
/// Cancel safe: it only reads pages of run records; nothing is printed until the last page is in.
pub async fn list(
    cx: Ctx<'_>,
    module: &str,
    job: &str,
    status: Option<&str>,
    limit: i64,
) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let docs = client
        .documents(module)
        .ok_or_else(|| Failure::usage("run records need a NATS connection"))?;
    let mut where_ = vec![Predicate::new(jobs::field::JOB, "eq", job)];
    if let Some(status) = status {
        where_.push(Predicate::new(jobs::field::STATUS, "eq", status));
    }
    let collection = jobs::runs_collection(cx.global.project.as_str());
    let mut records = Vec::new();
    let mut cursor = None;
    // A page is cut short by its size (large payloads make large records):
    // follow the cursor until `limit` runs or the last page.
    loop {
        let query = FindQuery {
            where_: where_.clone(),
            // The trigger's stream sequence: newest trigger first.
            order_by: Some(OrderBy::desc(jobs::field::SEQUENCE)),
            limit: limit - i64::try_from(records.len()).unwrap_or(i64::MAX),
            cursor: cursor.take(),
            ..Default::default()
        };
        let page = match docs.find(&collection, query).await {
            Ok(page) => page,
            // No host of the module ever wrote a record.
            Err(e) if e.kind() == CallErrorKind::CollectionNotFound => break,
            Err(e) => return Err(e.into()),
        };
        let empty = page.items.is_empty();
        records.extend(
            page.items
                .into_iter()
                .map(|d| RunRecord::from_data(&d.id, job, d.version, d.data)),
        );
        cursor = page.cursor;
        // An empty page with a cursor would repeat forever: stop there.
        if empty || cursor.is_none() || i64::try_from(records.len()).unwrap_or(i64::MAX) >= limit {
            break;
        }
    }
    if cx.global.json {
        let out: Vec<_> = records.iter().map(RunRecord::to_json).collect();
        print_json(&json!(out));
        return Ok(());
    }
    let mut table = Table::new(&[
        "RUN", "STATUS", "ATTEMPT", "TRIGGER", "STARTED", "FINISHED", "ERROR",
    ]);
    for record in &records {
        let field = |key: &str| {
            record
                .to_json()
                .get(key)
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        let trigger = record
            .to_json()
            .pointer("/trigger/kind")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let error: String = record.error.chars().take(60).collect();
        table.status_row(
            vec![
                record.run_id.clone(),
                record.status.clone(),
                record.attempt.to_string(),
                or_dash(&trigger),
                or_dash(&field(jobs::field::STARTED_AT)),
                or_dash(&field(jobs::field::FINISHED_AT)),
                or_dash(&error),
            ],
            1,
        );
    }
    print!("{}", table.render(cx.style));
    Ok(())
}

/// Prints one run's record as JSON (`QUEUED` while its trigger waits).
/// Reads only: a run id no trigger of the job was stored under is "no such
/// run" (exit 1).
///
/// # Errors
///
/// A malformed run id (exit 2), no such run (exit 1), or the document
/// service failed.
///
/// # Cancel safety
///
/// Cancel safe: it only reads the run's record; nothing is printed until it has it.
pub async fn show(cx: Ctx<'_>, module: &str, run_id: &str) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let run = run_handle(&client, module, run_id)?;
    let record = run.status().await.map_err(|e| no_such_run(module, e))?;
    print_json(&record.to_json());
    Ok(())
}

/// Sends a cancel for one run that exists and has not ended.
///
/// # Errors
///
/// A malformed run id (exit 2), no such run or one already ended (exit 1),
/// or NATS failed (exit 3).
pub async fn cancel(cx: Ctx<'_>, module: &str, run_id: &str) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let run = run_handle(&client, module, run_id)?;
    // Only a run that exists and has not ended can be cancelled.
    let record = run.status().await.map_err(|e| no_such_run(module, e))?;
    if record.is_terminal() {
        return Err(Failure {
            exit: EXIT_SERVICE,
            message: format!(
                "run {run_id} already ended {}; nothing to cancel",
                record.status
            ),
            hint: None,
        }
        .into());
    }
    run.cancel().await.map_err(|e| Failure {
        exit: EXIT_UNREACHABLE,
        message: format!("cancel not sent: {e}"),
        hint: None,
    })?;
    if cx.global.json {
        print_json(&json!({"run_id": run_id, "cancel": "sent"}));
    } else {
        println!("cancel sent to {module} for {run_id}");
    }
    Ok(())
}

/// "no such run" (exit 1) for `RunNotFound`, the error as it is otherwise.
fn no_such_run(module: &str, e: abi_sdk::CallError) -> anyhow::Error {
    match e.kind() {
        CallErrorKind::RunNotFound => anyhow::Error::from(Failure {
            exit: EXIT_SERVICE,
            message: format!("no such run: {}", e.message()),
            hint: Some(format!(
                "`abictl runs {module} <job>` lists the runs recorded"
            )),
        }),
        _ => e.into(),
    }
}

/// Reads need no declaration: the runs of a job outlive the module's instances.
fn job_client(client: &DiscoveryClient, module: &str, job: &str) -> Result<JobClient, Failure> {
    JobClient::unchecked(client, module, job).map_err(|e| Failure::usage(e.to_string()))
}

fn run_handle(
    client: &DiscoveryClient,
    module: &str,
    run_id: &str,
) -> Result<abi_sdk::JobRun, Failure> {
    let (job, _) = jobs::parse_run_id(run_id)
        .ok_or_else(|| Failure::usage(format!("{run_id:?} is not a run id (<job>:<sequence>)")))?;
    Ok(job_client(client, module, job)?.run(run_id))
}
