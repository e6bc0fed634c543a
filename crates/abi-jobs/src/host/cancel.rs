//! Cancels of runs that are not running here (better than the reference,
//! which drops them): a queued run (no record yet) gets a CANCELLED record,
//! so its trigger is acknowledged unrun when it arrives; a RETRYING run is
//! CANCELLED before its next attempt. Every host of the module hears the
//! cancel; compare-and-swap writes make one of them win, and a RUNNING run
//! is left to the host running it. A Python host delivering such a trigger
//! retires it the same way (its record is terminal).
//!
//! Cancels are authenticated when signed ([`authorized`]).

use abi_wire::jobs as wire;

use super::machine::OnCancel;
use super::recorded::{CancelledQueued, Change};
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use tracing::{info, warn};

use super::{Job, Shared, record};
use crate::time::now_iso;
use abi_sdk_core::DocumentClient;
use abi_sdk_core::{CallErrorKind, TokenSource};

/// Whether a cancel may act. A module host cannot check tokens itself (it
/// lacks the platform secret), so a signed cancel is checked by the
/// document service: the host reads the run's record *with the caller's
/// token*, and only a token the service accepts for the module's namespace
/// (the right a caller needs to follow the run at all) lets the cancel act.
/// A forged, expired or foreign token is refused.
///
/// An unsigned cancel is accepted, as the reference's hosts accept every
/// cancel: the reference's caller (`JobRun.cancel`) signs none, and
/// refusing it would break a mixed fleet. Our caller always signs; with
/// [`super::JobHostOptions::require_signed_cancels`] an unsigned cancel is
/// refused.
pub(super) async fn authorized(shared: &Shared, msg: &async_nats::Message) -> bool {
    let token = msg
        .headers
        .as_ref()
        .and_then(|h| h.get(abi_wire::auth::AUTH_HEADER))
        .map(|v| v.as_str().to_owned());
    let Some(token) = token else {
        let accepted = !shared.options.require_signed_cancels;
        if !accepted {
            let run_id = String::from_utf8_lossy(&msg.payload);
            warn!(run_id = %run_id, "cancel refused: it carries no token and signed cancels are required");
        }
        return accepted;
    };
    let run_id = String::from_utf8_lossy(&msg.payload);
    let caller = DocumentClient::new(
        shared.links.nats.clone(),
        TokenSource::issued(token),
        shared.links.module_id.clone(),
    );
    match caller.get(&shared.collection, &run_id).await {
        Ok(_) => true,
        Err(e)
            if matches!(
                e.kind(),
                CallErrorKind::DocumentNotFound | CallErrorKind::CollectionNotFound
            ) =>
        {
            true
        }
        Err(e) => {
            warn!(run_id = %run_id, error = %e, "cancel refused: its token was not accepted");
            false
        }
    }
}

/// Cancels `run_id` if it belongs to one of `jobs` and has not started or
/// waits for a retry.
pub(super) async fn cancel_idle(shared: &Shared, jobs: &[std::sync::Arc<Job>], run_id: &str) {
    let Some((name, sequence)) = wire::parse_run_id(run_id) else {
        return;
    };
    let Some(job) = jobs.iter().find(|j| j.spec.name() == name) else {
        return;
    };
    if let Err(err) = cancel(shared, job, run_id, sequence).await {
        warn!(run_id = %run_id, error = %err, "could not cancel a queued or retrying run");
    }
}

async fn cancel(
    shared: &Shared,
    job: &Job,
    run_id: &str,
    sequence: u64,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let existing = record::get(shared, run_id).await?;
    let now = now_iso();
    let decision = super::machine::on_cancel(existing.as_ref().map(|d| &d.data));
    let (data, if_version) = match (decision, existing) {
        (OnCancel::Nothing, _) => return Ok(()),
        (OnCancel::CancelRetrying, Some(doc)) => {
            let mut data = doc.data;
            Change::Cancelled { at: &now }.apply(&mut data);
            (data, doc.version)
        }
        (OnCancel::CancelRetrying, None) => return Ok(()),
        (OnCancel::CancelIfQueued, _) => {
            // Only a trigger of this job that is still stored can be queued.
            let stream = shared.js.get_stream(&shared.stream).await?;
            match stream.get_raw_message(sequence).await {
                Ok(stored) if stored.subject.as_str() == job.subjects.trigger() => {}
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(()),
                Err(e) => return Err(e.into()),
            }
            let data = CancelledQueued {
                job: job.spec.name(),
                run_id,
                module_id: &shared.links.module_id,
                max_attempts: i64::from(job.spec.attempts()),
                instance: &shared.links.instance_id,
                sequence,
                at: &now,
            }
            .to_data();
            (data, 0)
        }
    };
    match shared
        .links
        .documents
        .put(&shared.collection, run_id, data, Some(if_version))
        .await
    {
        Ok(_) => {
            info!(run_id = %run_id, "run cancelled before its next attempt");
            let notice = wire::completion_notice(run_id, wire::CANCELLED);
            shared
                .links
                .nats
                .publish(job.done.clone(), notice.into())
                .await?;
            Ok(())
        }
        // Another host cancelled it first, or it just started.
        Err(e) if e.kind() == abi_sdk_core::CallErrorKind::VersionConflict => Ok(()),
        Err(e) => Err(e.into()),
    }
}
