//! Retries that hold no concurrency slot during their backoff.
//!
//! nats-server keeps a trigger nak'ed with a delay in the consumer's
//! pending set until it is redelivered (`processNak` only moves its
//! timestamp), and `max_ack_pending` (= `max_concurrency`) counts that set:
//! the reference's RETRYING run blocks its job for the whole backoff. Our
//! host acknowledges the trigger instead, records the run RETRYING with
//! `retry_owner` (its instance), and at `retry_at` runs the next attempt
//! itself from the trigger still stored in the stream (same run id, same
//! record, counted on the record as always), in one of the job's local slots.
//!
//! The record says who re-drives it: no `retry_owner`, JetStream (a Python
//! host's nak); an instance id, that host, at `retry_at`; empty, any of our
//! hosts. Every host of ours takes over a retry whose owner let `retry_at`
//! pass by an ack wait, a released one once due (a sweep every ack wait),
//! and a re-driven attempt lost without heartbeats, attempts left (the
//! reaper), each claimed with a compare-and-swap. A Python host never receives such a trigger
//! again; its reaper still fails the run once the trigger expired.

use std::sync::Arc;
use std::time::Duration;

use abi_document_model::{Datetime, Document, FindQuery, Predicate, Value};
use abi_wire::jobs::{self as wire, field};
use async_nats::jetstream::Message;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use futures::StreamExt as _;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::delivery::{self, Meta, Prior};
use super::recorded::{Change, Recorded};
use super::retry_queue::Due;
use super::{Job, JobHostError, Shared, machine, record};
use crate::time::now_iso;
use abi_sdk_core::CallErrorKind;

/// The record field naming the host that re-drives a RETRYING run.
const OWNER: &str = field::RETRY_OWNER;

/// The retry driver: runs each retry the deliveries queue, until the host
/// closes.
pub(super) async fn drive(shared: Arc<Shared>, mut queue: mpsc::UnboundedReceiver<Due>) {
    loop {
        let due = tokio::select! {
            biased;
            () = shared.stopping.closed() => return,
            due = queue.recv() => match due {
                Some(due) => due,
                None => return,
            },
        };
        schedule(&shared, &due.job, &due.run_id, due.sequence, due.delay);
    }
}

/// Runs the next attempt of `run_id` after `delay`, in one of the job's
/// slots, unless the host stops first (then another host's upkeep does).
fn schedule(shared: &Arc<Shared>, job: &Arc<Job>, run_id: &str, sequence: u64, delay: Duration) {
    let (shared, job, run_id) = (shared.clone(), job.clone(), run_id.to_owned());
    let tasks = shared.stopping.work().clone();
    tasks.spawn(async move {
        tokio::select! {
            biased;
            () = shared.stopping.stopped_accepting() => return,
            () = tokio::time::sleep(delay) => {}
        }
        let Some(slots) = shared.slots.get(job.spec.name()).cloned() else {
            return;
        };
        let permit = tokio::select! {
            biased;
            () = shared.stopping.stopped_accepting() => return,
            permit = slots.acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        redrive(&shared, &job, &run_id, sequence).await;
        drop(permit);
    });
}

/// The next attempt, if the record still waits for this host's retry.
async fn redrive(shared: &Arc<Shared>, job: &Arc<Job>, run_id: &str, sequence: u64) {
    let later = shared.options.backoff_base;
    let doc = match record::get(shared, run_id).await {
        Ok(Some(doc)) => doc,
        Ok(None) => return,
        Err(err) => {
            warn!(run_id = %run_id, error = %err, "job retry could not read its run; retrying");
            return schedule(shared, job, run_id, sequence, later);
        }
    };
    if !machine::retry_is_mine(&doc.data, &shared.links.instance_id) {
        // Cancelled, taken over, or finished meanwhile.
        return;
    }
    let stream = match shared.js.get_stream(&shared.stream).await {
        Ok(stream) => stream,
        Err(err) => {
            warn!(run_id = %run_id, error = %err, "job retry could not read its trigger; retrying");
            return schedule(shared, job, run_id, sequence, later);
        }
    };
    let stored = match stream.get_raw_message(sequence).await {
        Ok(stored) if stored.subject.as_str() == job.subjects.trigger() => stored,
        // A recreated stream reuses sequences: another job's message is not its trigger.
        Ok(_) => return expire(shared, job, run_id, doc).await,
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
            return expire(shared, job, run_id, doc).await;
        }
        Err(err) => {
            warn!(run_id = %run_id, error = %err, "job retry could not read its trigger; retrying");
            return schedule(shared, job, run_id, sequence, later);
        }
    };
    let attempt = Recorded::of(&doc.data)
        .attempt
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0);
    let meta = Meta {
        sequence,
        delivered: attempt + 1,
        stored_nanos: stored.time.unix_timestamp_nanos(),
    };
    let msg = Box::new(Message {
        message: async_nats::Message {
            subject: stored.subject,
            // No delivery to acknowledge: acks and heartbeats are skipped.
            reply: None,
            length: stored.payload.len(),
            payload: stored.payload,
            headers: Some(stored.headers),
            status: None,
            description: None,
        },
        context: shared.js.clone(),
    });
    delivery::handle_at(shared, job, msg, meta, Prior::Read(doc)).await;
}

/// The trigger left the stream before its retry: the run cannot go on.
async fn expire(shared: &Shared, job: &Job, run_id: &str, doc: Document) {
    let data = machine::retry_expired(doc.data, &now_iso());
    match shared
        .links
        .documents
        .put(&shared.collection, run_id, data, Some(doc.version))
        .await
    {
        Ok(_) => delivery::notify(shared, job, run_id, wire::FAILED).await,
        Err(e) if e.kind() == CallErrorKind::VersionConflict => {}
        Err(err) => warn!(run_id = %run_id, error = %err, "could not fail an expired job retry"),
    }
}

/// One sweep over `jobs`: takes over the retries of ours past their time
/// (by an ack wait when another host owns them); returns how many.
pub(super) async fn sweep(shared: &Arc<Shared>, jobs: &[Arc<Job>]) -> Result<usize, JobHostError> {
    let due = iso_before(Datetime::now(), Duration::ZERO);
    let mut taken = 0;
    for job in jobs {
        let query = FindQuery {
            where_: vec![
                Predicate::new(field::JOB, "eq", job.spec.name()),
                Predicate::new(field::STATUS, "eq", wire::RETRYING),
                Predicate::new(OWNER, "exists", Value::Bool(true)),
                Predicate::new(field::RETRY_AT, "lte", due.as_str()),
            ],
            ..FindQuery::default()
        };
        let documents = &shared.links.documents;
        let mut found = std::pin::pin!(documents.find_all(&shared.collection, query));
        while let Some(doc) = found.next().await {
            // Lost RUNNING attempts are the reaper's: nothing is lost here.
            if take_over(shared, job, &doc?, "").await? {
                taken += 1;
            }
        }
    }
    Ok(taken)
}

/// `(now - after).isoformat()`.
fn iso_before(now: Datetime, after: Duration) -> String {
    let micros = i64::try_from(after.as_micros()).unwrap_or(i64::MAX);
    Datetime::from_unix_micros(now.unix_micros().saturating_sub(micros))
        .unwrap_or(now)
        .isoformat()
}

/// The upkeep's part: takes over a retry of ours its host will not run
/// (see the module's text); whether it did. `lost_cutoff`: a RUNNING run
/// heartbeating before it is lost.
pub(super) async fn take_over(
    shared: &Arc<Shared>,
    job: &Arc<Job>,
    doc: &Document,
    lost_cutoff: &str,
) -> Result<bool, JobHostError> {
    let me = shared.links.instance_id.as_str();
    let now = Datetime::now();
    let (now_iso, owner_stale_before) = (now.isoformat(), iso_before(now, shared.options.ack_wait));
    let sweep = machine::Sweep {
        me,
        now: &now_iso,
        owner_stale_before: &owner_stale_before,
        lost_before: lost_cutoff,
        accepting: shared.stopping.accepting(),
    };
    let Some(sequence) = machine::take_over(&doc.data, &doc.id, sweep) else {
        return Ok(false);
    };
    let owner = Recorded::of(&doc.data)
        .retry_owner
        .unwrap_or_default()
        .to_owned();
    let mut data = doc.data.clone();
    Change::RetryTakenOver {
        owner: me,
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
            info!(run_id = %doc.id, from = %owner, "job retry taken over");
            schedule(shared, job, &doc.id, sequence, Duration::ZERO);
            Ok(true)
        }
        // Its host is alive after all, or another host took it.
        Err(e)
            if matches!(
                e.kind(),
                CallErrorKind::VersionConflict | CallErrorKind::DocumentNotFound
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}
