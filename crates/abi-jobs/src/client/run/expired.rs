//! Triggers that expired unrun (better than the reference, whose caller
//! waits forever for one): a trigger whose `Nats-TTL` passed before any
//! host took it leaves the stream without a run record, so its run would
//! stay `QUEUED` for good. A caller that triggered the run (so it knows the
//! trigger was stored) and finds no record and no stored trigger at the
//! run's sequence knows no host will ever run it, and ends it `FAILED` with
//! [`wire::EXPIRED_UNRUN_ERROR`].
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
//!
//! A handle made from a run id alone never writes: it cannot tell a
//! trigger that expired from a sequence that was never this job's (a
//! future one, a schedule message's, another job's), so without a record
//! and a stored trigger the run is unknown ([`CallErrorKind::RunNotFound`]).

use abi_document_model::{Data, Value};
use abi_wire::jobs::{self as wire, field};
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use tracing::debug;

use crate::client::Inner;
use crate::record::RunRecord;
use crate::time::now_iso;
use abi_sdk_core::{CallError, CallErrorKind};

/// What became of a run without a record.
pub(super) enum Unrun {
    /// Its trigger is stored: it is queued.
    Queued,
    /// Its trigger left the stream unrun: the terminal record (stored, or
    /// the view of it when it could not be stored).
    Expired(RunRecord),
    /// A host wrote a record meanwhile: read it again.
    Raced,
    /// Nothing says such a run exists (a handle from a run id whose
    /// sequence holds no trigger of this job).
    Unknown,
}

/// What the stream holds at a run's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtSequence {
    /// This job's trigger.
    Trigger,
    /// Another message (another job's trigger, a schedule message, or a
    /// message of a recreated stream).
    Other,
    /// Nothing, below the stream's last sequence: removed (expired).
    Removed,
    /// Nothing yet: past the stream's last sequence.
    Future,
}

/// What to make of a run without a record, by what the stream holds and
/// whether the caller knows the trigger was stored (it triggered the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Queued,
    Expired,
    Unknown,
}

fn verdict(at: AtSequence, stored: bool) -> Verdict {
    match (at, stored) {
        (AtSequence::Trigger, _) => Verdict::Queued,
        // Ours was stored at that sequence: the stream lost it (expired, or
        // recreated and another message took the sequence).
        (AtSequence::Removed | AtSequence::Other, true) => Verdict::Expired,
        // A sequence not reached yet cannot have held our trigger.
        (AtSequence::Future, true) => Verdict::Queued,
        (AtSequence::Removed | AtSequence::Other | AtSequence::Future, false) => Verdict::Unknown,
    }
}

/// Checks whether the trigger of `run_id` (no record yet) is still stored;
/// `stored`: the caller triggered the run, so it was.
///
/// # Errors
///
/// `Transport` when the stream cannot be read (the run then stays `QUEUED`
/// for the caller, who asks again later).
pub(super) async fn check(inner: &Inner, run_id: &str, stored: bool) -> Result<Unrun, CallError> {
    let Some((_, sequence)) = wire::parse_run_id(run_id) else {
        return Ok(if stored {
            Unrun::Queued
        } else {
            Unrun::Unknown
        });
    };
    let transport =
        |e: &dyn std::fmt::Display| CallError::new(CallErrorKind::Transport, e.to_string());
    let js = async_nats::jetstream::new(inner.nats.clone());
    let name = wire::stream(&inner.project);
    let stream = js
        .get_stream_no_info(&name)
        .await
        .map_err(|e| transport(&e))?;
    let at = match stream.get_raw_message(sequence).await {
        Ok(stored) if stored.subject.as_str() == inner.subjects.trigger() => AtSequence::Trigger,
        Ok(_) => AtSequence::Other,
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
            let info = js.get_stream(&name).await.map_err(|e| transport(&e))?;
            if sequence > info.cached_info().state.last_sequence {
                AtSequence::Future
            } else {
                AtSequence::Removed
            }
        }
        Err(e) => return Err(transport(&e)),
    };
    match verdict(at, stored) {
        Verdict::Queued => return Ok(Unrun::Queued),
        Verdict::Unknown => return Ok(Unrun::Unknown),
        Verdict::Expired => {}
    }
    let data = record(inner, run_id, sequence);
    let collection = wire::runs_collection(&inner.project);
    match inner
        .documents
        .put_ref(&collection, run_id, &data, Some(0))
        .await
    {
        Ok(written) => Ok(Unrun::Expired(RunRecord::from_data(
            run_id,
            &inner.job,
            written.version,
            data,
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
        (field::CREATED_AT, Value::from(now.as_str())),
        (field::JOB, inner.job.as_str().into()),
        (field::RUN_ID, run_id.into()),
        (field::MODULE_ID, inner.module_id.as_str().into()),
        (field::STATUS, wire::RunStatus::Failed.as_str().into()),
        (field::ATTEMPT, Value::Int(0)),
        (field::INSTANCE, "".into()),
        (
            field::SEQUENCE,
            Value::Int(i64::try_from(sequence).unwrap_or(i64::MAX)),
        ),
        (field::ERROR, wire::EXPIRED_UNRUN_ERROR.into()),
        (field::LOGS, Value::List(Vec::new())),
        (field::FINISHED_AT, now.as_str().into()),
    ] {
        data.insert(k.to_owned(), v);
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_trigger_known_stored_and_gone_expires() {
        use AtSequence::*;
        let rows = [
            (Trigger, true, Verdict::Queued),
            (Trigger, false, Verdict::Queued),
            (Removed, true, Verdict::Expired),
            (Other, true, Verdict::Expired),
            (Future, true, Verdict::Queued),
            // From a run id alone: a future sequence, a schedule message's
            // or another job's, or one removed, is no run of this job's.
            (Removed, false, Verdict::Unknown),
            (Other, false, Verdict::Unknown),
            (Future, false, Verdict::Unknown),
        ];
        for (at, stored, expected) in rows {
            assert_eq!(verdict(at, stored), expected, "{at:?}, stored {stored}");
        }
    }
}
