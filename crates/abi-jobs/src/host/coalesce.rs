//! Tick coalescing ([`crate::JobSpec::coalesce_ticks`]): a schedule
//! tick that fired while another run of its job was going is recorded
//! SKIPPED instead of run, so a slow job does not catch up on a backlog of
//! ticks back to back.
//!
//! "Going" is read from the run records, so runs of every host count
//! (Python ones too), and the ticks a busy job's `max_ack_pending` held back
//! in the stream are coalesced when they are finally delivered:
//! - a RUNNING run started at or before the tick fired, heartbeating within
//!   the ack wait (a run whose host died stops counting);
//! - a finished run that started at or before the tick fired and finished
//!   after it.
//!
//! Timestamps compare as text, the reference's format (`started_at` and
//! `finished_at` from the hosts' clocks, `fired_at` from the server's).

use abi_document_model::{Data, Datetime, FindQuery, Predicate, Value};
use abi_wire::jobs::{self as wire, field};

use super::Shared;
use abi_sdk_core::CallError;

/// The run of `job` that was going when the tick `run_id` fired at `fired`.
pub(super) async fn overlapping(
    shared: &Shared,
    job: &str,
    run_id: &str,
    fired: &str,
) -> Result<Option<String>, CallError> {
    let wait = i64::try_from(shared.options.ack_wait.as_micros()).unwrap_or(i64::MAX);
    let now = Datetime::now();
    let alive = Datetime::from_unix_micros(now.unix_micros().saturating_sub(wait))
        .unwrap_or(now)
        .isoformat();
    let running = vec![
        Predicate::new(field::JOB, "eq", job),
        Predicate::new(field::STATUS, "eq", wire::RUNNING),
        Predicate::new(field::STARTED_AT, "lte", fired),
        Predicate::new(field::HEARTBEAT_AT, "gt", alive),
    ];
    let finished = vec![
        Predicate::new(field::JOB, "eq", job),
        Predicate::new(field::STARTED_AT, "lte", fired),
        Predicate::new(field::FINISHED_AT, "gt", fired),
    ];
    for where_ in [running, finished] {
        let query = FindQuery {
            where_,
            // The tick's own record may match (a redelivery): one more.
            limit: 2,
            ..FindQuery::default()
        };
        let page = shared
            .links
            .documents
            .find(&shared.collection, query)
            .await?;
        if let Some(other) = page.items.into_iter().find(|doc| doc.id != run_id) {
            return Ok(Some(other.id));
        }
    }
    Ok(None)
}

/// The fields of a coalesced tick's record, from those its run would have
/// started with: SKIPPED, never started, no attempt used.
pub(super) fn skipped(mut fields: Data, attempts_used: i64, other: &str) -> Data {
    fields.remove(field::STARTED_AT);
    fields.remove(field::HEARTBEAT_AT);
    let now = crate::time::now_iso();
    for (k, v) in [
        (field::STATUS, Value::from(wire::SKIPPED)),
        (field::ATTEMPT, Value::Int(attempts_used)),
        (field::LOGS, Value::List(Vec::new())),
        (field::RESULT, Value::Null),
        (
            field::SKIP_REASON,
            format!("Coalesced: fired while run {other} was still going").into(),
        ),
        (field::FINISHED_AT, now.into()),
    ] {
        fields.insert(k.to_owned(), v);
    }
    fields
}
