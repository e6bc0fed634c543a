//! The reaper of lost runs (the reference's `reap_lost_runs`): runs nothing
//! will finish are FAILED, compare-and-swap on the version read, so a run
//! whose host is alive (it heartbeats, bumping the version) is never touched.
//!
//! - RUNNING on its last attempt, no heartbeat for `lost_after`: its host
//!   stopped and no attempt is left.
//! - RUNNING with attempts left and no heartbeat as long, or RETRYING past
//!   its retry time, whose trigger left the stream: nothing can redeliver it.
//!
//! The active runs are read with a cursor, page after page (the reference
//! reads one page of 1000 and never sees the rest).

use abi_document_model::{Data, Datetime, FindQuery, Predicate, Value};
use abi_wire::jobs::{self as wire, field};
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use futures::StreamExt as _;
use std::sync::Arc;
use tracing::{info, warn};

use super::machine::Lost;
use super::recorded::Change;
use super::{Job, JobHostError, Shared};
use abi_sdk_core::CallErrorKind;

/// Active runs read per page (the reference's single page).
const PAGE: i64 = 1000;

/// One pass over `jobs`; returns how many runs it failed. Retries of ours
/// their host will not run are taken over on the way (`retry.rs`).
pub(super) async fn reap(shared: &Arc<Shared>, jobs: &[Job]) -> Result<usize, JobHostError> {
    let now = Datetime::now();
    let now_iso = now.isoformat();
    let lost_micros = i64::try_from(shared.options.lost_after.as_micros()).unwrap_or(i64::MAX);
    let cutoff = Datetime::from_unix_micros(now.unix_micros().saturating_sub(lost_micros))
        .unwrap_or(now)
        .isoformat();
    let mut reaped = 0;
    for job in jobs {
        let job = &Arc::new(job.clone());
        let query = FindQuery {
            where_: vec![
                Predicate::new(field::JOB, "eq", job.spec.name()),
                Predicate::new(
                    field::STATUS,
                    "in",
                    Value::List(vec![wire::RUNNING.into(), wire::RETRYING.into()]),
                ),
            ],
            limit: PAGE,
            ..FindQuery::default()
        };
        let mut active = std::pin::pin!(shared.links.documents.find_all(&shared.collection, query));
        while let Some(doc) = active.next().await {
            let doc = doc?;
            if shared.runs.contains(&doc.id) {
                continue;
            }
            let Some(error) = lost(shared, job, &doc.id, &doc.data, &now_iso, &cutoff).await?
            else {
                super::retry::take_over(shared, job, &doc, &cutoff).await?;
                continue;
            };
            let mut data = doc.data.clone();
            Change::Reaped {
                error: &error,
                at: &now_iso,
            }
            .apply(&mut data);
            match shared
                .links
                .documents
                .put(&shared.collection, &doc.id, data, Some(doc.version))
                .await
            {
                Ok(_) => {
                    reaped += 1;
                    info!(run_id = %doc.id, "lost job run failed");
                    let notice = wire::completion_notice(&doc.id, wire::FAILED);
                    if let Err(err) = shared
                        .links
                        .nats
                        .publish(job.done.clone(), notice.into())
                        .await
                    {
                        warn!(run_id = %doc.id, error = %err, "could not publish a job completion");
                    }
                }
                // Its host is alive after all, or another replica reaped it.
                Err(e)
                    if matches!(
                        e.kind(),
                        CallErrorKind::VersionConflict | CallErrorKind::DocumentNotFound
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(reaped)
}

/// Why nothing will finish this run, or `None` while something still can.
async fn lost(
    shared: &Shared,
    job: &Job,
    run_id: &str,
    data: &Data,
    now: &str,
    cutoff: &str,
) -> Result<Option<String>, JobHostError> {
    let error = match super::machine::on_lost(data, now, cutoff) {
        Lost::No => return Ok(None),
        Lost::Yes(error) => return Ok(Some(error)),
        Lost::IfTriggerGone(error) => error,
    };
    Ok(trigger_gone(shared, job, run_id, data)
        .await?
        .then_some(error))
}

/// Whether the run's trigger message left the jobs stream.
async fn trigger_gone(
    shared: &Shared,
    job: &Job,
    run_id: &str,
    data: &Data,
) -> Result<bool, JobHostError> {
    let Some(sequence) = super::recorded::Recorded::of(data).trigger_sequence(run_id) else {
        return Ok(false);
    };
    let stream = shared
        .js
        .get_stream(&shared.stream)
        .await
        .map_err(|e| JobHostError::JetStream(e.to_string()))?;
    match stream.get_raw_message(sequence).await {
        // A recreated stream reuses sequences: another job's message is not its trigger.
        Ok(stored) => Ok(stored.subject.as_str() != job.subjects.trigger()),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(true),
        Err(e) => Err(JobHostError::JetStream(e.to_string())),
    }
}
