//! Triggers that expired unrun (better than the reference, whose caller
//! waits forever for one): a trigger whose `Nats-TTL` passed before any
//! host took it leaves the stream without a run record, so its run would
//! stay `QUEUED` for good. A caller that finds no record and no stored
//! trigger at the run's sequence knows no host will ever run it, and ends
//! it `FAILED` with [`wire::EXPIRED_UNRUN_ERROR`].
//!
//! `FAILED` rather than a new status: the reference's `JobRun.wait` ends
//! only on its five terminal statuses and its retention prunes only those,
//! so an unknown status would keep Python callers waiting and the record
//! forever. The error text tells this case apart.
//!
//! The record is written create-only (`if_version = 0`) in the module's
//! namespace, so every reader (Python callers, `abictl runs`) sees the same
//! end; if it cannot be written (no host ever created the collection, or
//! the caller may not write there) the caller still gets the terminal view.

use abi_document_model::{Data, Value};
use abi_wire::jobs as wire;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use tracing::debug;

use crate::error::{CallError, CallErrorKind};
use crate::jobs::client::Inner;
use crate::jobs::record::RunRecord;
use crate::jobs::time::now_iso;

/// What became of a run without a record.
pub(super) enum Unrun {
    /// Its trigger is stored: it is queued.
    Queued,
    /// Its trigger left the stream unrun: the terminal record (stored, or
    /// the view of it when it could not be stored).
    Expired(RunRecord),
    /// A host wrote a record meanwhile: read it again.
    Raced,
}

/// Checks whether the trigger of `run_id` (no record yet) is still stored.
///
/// # Errors
///
/// `Transport` when the stream cannot be read (the run then stays `QUEUED`
/// for the caller, who asks again later).
pub(super) async fn check(inner: &Inner, run_id: &str) -> Result<Unrun, CallError> {
    let Some((_, sequence)) = wire::parse_run_id(run_id) else {
        return Ok(Unrun::Queued);
    };
    let js = async_nats::jetstream::new(inner.nats.clone());
    let stream = js
        .get_stream_no_info(wire::stream(&inner.project))
        .await
        .map_err(|e| CallError::new(CallErrorKind::Transport, e.to_string()))?;
    match stream.get_raw_message(sequence).await {
        Ok(stored) if stored.subject.as_str() == inner.subjects.trigger() => {
            return Ok(Unrun::Queued);
        }
        // Another message at that sequence: the stream was recreated and
        // this trigger is gone with the old one.
        Ok(_) => {}
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {}
        Err(e) => return Err(CallError::new(CallErrorKind::Transport, e.to_string())),
    }
    let data = record(inner, run_id, sequence);
    let collection = wire::runs_collection(&inner.project);
    match inner
        .documents
        .put(&collection, run_id, data.clone(), Some(0))
        .await
    {
        Ok(doc) => Ok(Unrun::Expired(RunRecord::from_data(
            run_id,
            &inner.job,
            doc.version,
            doc.data,
        ))),
        Err(e) if e.kind() == CallErrorKind::VersionConflict => Ok(Unrun::Raced),
        Err(e) => {
            debug!(run_id = %run_id, error = %e, "expired run's record not stored");
            Ok(Unrun::Expired(RunRecord::from_data(
                run_id, &inner.job, 0, data,
            )))
        }
    }
}

/// The terminal record of a run whose trigger expired unrun: the fields a
/// queued cancel writes, with no attempt made and no host.
fn record(inner: &Inner, run_id: &str, sequence: u64) -> Data {
    let now = now_iso();
    let mut data = Data::new();
    for (k, v) in [
        ("created_at", Value::from(now.as_str())),
        ("job", inner.job.as_str().into()),
        ("run_id", run_id.into()),
        ("module_id", inner.module_id.as_str().into()),
        ("status", "FAILED".into()),
        ("attempt", Value::Int(0)),
        ("instance", "".into()),
        (
            "sequence",
            Value::Int(i64::try_from(sequence).unwrap_or(i64::MAX)),
        ),
        ("error", wire::EXPIRED_UNRUN_ERROR.into()),
        ("logs", Value::List(Vec::new())),
        ("finished_at", now.as_str().into()),
    ] {
        data.insert(k.to_owned(), v);
    }
    data
}
