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
//! What counts as going, and the SKIPPED record, are decided in
//! `machine.rs`; this file only reads the records.

use abi_document_model::{Datetime, FindQuery};

use super::{Shared, machine};
use abi_sdk_core::CallError;

/// The run of `job` that was going when the tick `run_id` fired at `fired`
/// ([`machine::going_when_fired`] says what "going" is; this reads it).
pub(super) async fn overlapping(
    shared: &Shared,
    job: &str,
    run_id: &str,
    fired: &str,
) -> Result<Option<String>, CallError> {
    let wait = i64::try_from(shared.options.ack_wait.as_micros()).unwrap_or(i64::MAX);
    let now = Datetime::now();
    let alive_since = Datetime::from_unix_micros(now.unix_micros().saturating_sub(wait))
        .unwrap_or(now)
        .isoformat();
    for where_ in machine::going_when_fired(job, fired, &alive_since) {
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
