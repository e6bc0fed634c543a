//! One delivery of one trigger, the reference's `_handle_delivery`: read
//! the run record (a first delivery assumes there is none, see
//! [`Prior::LikelyAbsent`]), decide the attempt, record RUNNING, run the handler with
//! `+WPI` heartbeats, a timeout and cancels, record the outcome, then ack,
//! nak with a backoff, or term. Two departures: a record taken over by
//! another attempt is never written (fencing), and a run stopped by the
//! host's shutdown is handed back (`-NAK`) with its attempt given back.
//! With [`crate::JobSpec::coalesce_ticks`], a schedule tick that fired
//! while another run was going is recorded SKIPPED unrun (`coalesce.rs`).

use std::sync::Arc;
use std::time::Duration;

use abi_document_model::{Data, Datetime, Document, Value};
use abi_wire::jobs::{self as wire, Ack, RunStatus, field};
use async_nats::jetstream::Message;
use tracing::{Instrument as _, debug, error, info, warn};

use super::ack::reply;
use super::machine::{self, Decision, Facts};
use super::record::logs;
use super::record::{self, Fence, Saved};
use super::recorded::{Change, Ended, Started};
use super::supervise::{Outcome, supervise};
use super::{Job, Shared};
use crate::JobContext;
use crate::time::{fired_at, iso_after, now_iso};
use abi_sdk_core::documents::json::to_doc;

fn backoff(shared: &Shared, attempt: u32) -> Duration {
    backoff_delay(
        shared.options.backoff_base,
        shared.options.max_backoff,
        attempt,
    )
}

/// `min(base * 2^(attempt-1), max)`: the reference's retry delay.
fn backoff_delay(base: Duration, max: Duration, attempt: u32) -> Duration {
    let exp = attempt.saturating_sub(1).min(31);
    base.saturating_mul(1u32 << exp).min(max)
}

fn header(msg: &Message, name: &str) -> Option<String> {
    msg.headers
        .as_ref()?
        .get(name)
        .map(|v| v.as_str().to_owned())
        .filter(|v| !v.is_empty())
}

/// Whether the trigger's `Nats-TTL` ends within `within` of now.
fn expires_within(msg: &Message, stored_nanos: i128, within: Duration) -> bool {
    let Some(ttl) = header(msg, wire::TTL_HEADER) else {
        return false;
    };
    let lifetime = if ttl.bytes().all(|b| b.is_ascii_digit()) {
        ttl.parse::<f64>().ok()
    } else {
        crate::go_duration_seconds(&ttl).ok()
    };
    let Some(lifetime) = lifetime else {
        return false;
    };
    let now = time_now_nanos();
    stored_nanos as f64 + lifetime * 1e9 <= now as f64 + within.as_secs_f64() * 1e9
}

fn time_now_nanos() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or_default()
}

/// What a delivery needs of its JetStream metadata.
#[derive(Debug, Clone, Copy)]
pub(super) struct Meta {
    /// The trigger's stream sequence.
    pub(super) sequence: u64,
    /// How many times it was delivered (a re-driven retry: its attempt).
    pub(super) delivered: u64,
    /// When the stream stored it, nanoseconds since the epoch.
    pub(super) stored_nanos: i128,
}

/// What a delivery knows of its run record before it starts.
#[derive(Debug)]
pub(super) enum Prior {
    /// Nothing: the record is read first.
    Unknown,
    /// A first delivery: there is most likely no record yet, so the RUNNING
    /// one is created without a read (create-only). One that exists after
    /// all (a run cancelled while queued, a record of an expired-trigger
    /// caller or of an older trigger from a recreated stream) makes the
    /// create a `VERSION_CONFLICT`: the record is read and the delivery
    /// decided again.
    LikelyAbsent,
    /// Read just before (a re-driven retry); a record changed since makes
    /// the start a `VERSION_CONFLICT`, and the delivery is decided again.
    Read(Document),
}

/// How far [`run_attempt`] went.
enum Step {
    /// The delivery was handled to its end.
    Done,
    /// What was assumed of the record did not hold: read it and decide again.
    Reread,
}

/// Handles one delivery to its end (ack, nak or term). The message comes
/// boxed: it is some 400 bytes, which every future of the delivery would
/// otherwise hold, and copy, as it passes it down.
pub(super) async fn handle(shared: &Arc<Shared>, job: &Arc<Job>, msg: Box<Message>) {
    let Ok(info) = msg.info() else {
        warn!("a job delivery without JetStream metadata; dropped");
        return;
    };
    let meta = Meta {
        sequence: info.stream_sequence,
        delivered: info.delivered.max(1).unsigned_abs(),
        stored_nanos: info.published.unix_timestamp_nanos(),
    };
    let prior = if info.delivered == 1 {
        Prior::LikelyAbsent
    } else {
        Prior::Unknown
    };
    handle_at(shared, job, msg, meta, prior).await;
}

/// Handles a trigger to its end; `msg` without a reply is a retry this
/// host re-drives (`retry.rs`): nothing to acknowledge. Inside the
/// reference's CONSUMER span `job <name>`, continuing the trace of the
/// message that triggered the run.
pub(super) async fn handle_at(
    shared: &Arc<Shared>,
    job: &Arc<Job>,
    msg: Box<Message>,
    meta: Meta,
    prior: Prior,
) {
    use abi_sdk_core::traces::{self, Kind};
    let span = if traces::enabled() {
        let name = format!("job {}", job.spec.name());
        let span = traces::server_span(
            Kind::Consumer,
            &msg.subject,
            Some(&name),
            msg.headers.as_ref(),
        );
        traces::set_attribute(&span, "abi.module.id", shared.links.module_id.clone());
        traces::set_attribute(&span, "abi.job.name", job.spec.name().to_owned());
        traces::set_attribute(
            &span,
            "abi.job.run_id",
            wire::run_id(job.spec.name(), meta.sequence),
        );
        traces::set_attribute(
            &span,
            "abi.job.delivery",
            i64::try_from(meta.delivered).unwrap_or(i64::MAX),
        );
        span
    } else {
        tracing::Span::none()
    };
    handle_traced(shared, job, msg, meta, prior)
        .instrument(span)
        .await;
}

async fn handle_traced(
    shared: &Arc<Shared>,
    job: &Arc<Job>,
    msg: Box<Message>,
    meta: Meta,
    mut prior: Prior,
) {
    let Meta {
        sequence,
        delivered: delivery,
        stored_nanos,
    } = meta;
    let run_id = wire::run_id(job.spec.name(), sequence);
    let fired = fired_at(stored_nanos);
    let delivery = u32::try_from(delivery.max(1)).unwrap_or(u32::MAX);
    loop {
        let (existing, assumed) = match prior {
            Prior::Unknown => match record::get(shared, &run_id).await {
                Ok(doc) => (doc, false),
                Err(err) => {
                    return defer(shared, job, &msg, &run_id, sequence, delivery, &err).await;
                }
            },
            Prior::LikelyAbsent => (None, true),
            Prior::Read(doc) => (Some(doc), true),
        };
        let facts = Facts {
            fired_at: &fired,
            max_attempts: job.spec.attempts(),
            running_here: shared.runs.contains(&run_id),
            owner_fresh_for: shared.options.ack_wait,
            now_micros: Datetime::now().unix_micros(),
        };
        let (attempt, replace) = match machine::on_delivery(
            existing.as_ref().map(|d| &d.data),
            facts,
        ) {
            Decision::Start { attempt, replace } => (attempt, replace),
            Decision::Retire(status) => {
                return reply(shared, &msg, machine::retire_ack(status)).await;
            }
            Decision::Exhausted => {
                warn!(run_id = %run_id, delivery, "job run used its attempts; dropping the delivery");
                return reply(shared, &msg, Ack::Term).await;
            }
            Decision::AwaitOwner { wait } => return await_owner(shared, &msg, &run_id, wait).await,
        };
        let start = Start {
            existing: existing.as_ref(),
            replace,
            assumed,
            attempt,
        };
        let delivered = Delivered {
            msg: &msg,
            run_id: &run_id,
            fired: &fired,
            sequence,
            stored_nanos,
            delivery,
        };
        let step = run_attempt(shared, job, delivered, start).await;
        match step {
            Step::Done => return,
            Step::Reread => {
                debug!(run_id = %run_id, "job run record not as assumed; reading it");
                prior = Prior::Unknown;
            }
        }
    }
}

/// The delivery an attempt answers: its run, when it was stored, how many
/// times it came.
#[derive(Clone, Copy)]
struct Delivered<'a> {
    msg: &'a Message,
    run_id: &'a str,
    /// The trigger's `fired_at`.
    fired: &'a str,
    sequence: u64,
    stored_nanos: i128,
    /// The broker's delivery count, from 1.
    delivery: u32,
}

/// How an attempt starts: over which record, as which attempt.
struct Start<'a> {
    /// The record read or assumed (`None`: none).
    existing: Option<&'a Document>,
    /// Whether an older trigger's record is replaced.
    replace: bool,
    /// Whether `existing` was assumed, not just read: a `VERSION_CONFLICT`
    /// (or an unreadable payload) then reads the record and decides again.
    assumed: bool,
    attempt: i64,
}

async fn run_attempt(
    shared: &Arc<Shared>,
    job: &Arc<Job>,
    delivered: Delivered<'_>,
    start: Start<'_>,
) -> Step {
    let Delivered {
        msg,
        run_id,
        fired,
        sequence,
        stored_nanos,
        delivery,
    } = delivered;
    let Start {
        existing,
        replace,
        assumed,
        attempt,
    } = start;
    // A start refused on a record assumed, not read, is decided again.
    let conflicted = |err: &abi_sdk_core::CallError| {
        assumed && err.kind() == abi_sdk_core::CallErrorKind::VersionConflict
    };
    let mut trigger = serde_json::Map::new();
    trigger.insert(
        field::TRIGGER_KIND.into(),
        header(msg, wire::TRIGGER_HEADER)
            .unwrap_or_else(|| wire::MANUAL_TRIGGER.into())
            .into(),
    );
    if let Some(scheduler) = header(msg, wire::SCHEDULER_HEADER) {
        trigger.insert(field::TRIGGER_SCHEDULER.into(), scheduler.into());
    }
    let trigger = serde_json::Value::Object(trigger);
    let payload = match super::payload::read(shared, msg).await {
        Ok(payload) => payload,
        // The record, had it been read, might retire the trigger unread.
        Err(_) if assumed => return Step::Reread,
        Err(err) => {
            error!(run_id = %run_id, delivery, error = %err, "job payload unreadable; redelivering later");
            let delay = backoff(shared, delivery);
            later(shared, job, msg, run_id, sequence, delay).await;
            return Step::Done;
        }
    };
    // Held from before the record is written: two attempts of one run never
    // run here at once.
    let Some(claim) = shared.runs.claim(run_id) else {
        let wait = shared.options.ack_wait.max(machine::MIN_OWNER_WAIT);
        await_owner(shared, msg, run_id, wait).await;
        return Step::Done;
    };
    let started_at = now_iso();
    let fields = Started {
        job: job.spec.name(),
        run_id,
        module_id: &shared.links.module_id,
        attempt,
        max_attempts: i64::from(job.spec.attempts()),
        trigger: to_doc(&trigger),
        payload: to_doc(&payload),
        instance: &shared.links.instance_id,
        sequence,
        fired_at: fired,
        started_at: &started_at,
    }
    .into_data();
    let trigger_kind = trigger[field::TRIGGER_KIND].as_str().unwrap_or("");
    if machine::coalesces(job.spec.coalesces_ticks(), trigger_kind) {
        match super::coalesce::overlapping(shared, job.spec.name(), run_id, fired).await {
            Ok(Some(other)) => {
                let fields = machine::coalesced(fields, attempt - 1, &other, &now_iso());
                match record::start(shared, run_id, existing, fields, replace).await {
                    Ok(_) => {}
                    Err(err) if conflicted(&err) => return Step::Reread,
                    Err(err) => {
                        defer(shared, job, msg, run_id, sequence, delivery, &err).await;
                        return Step::Done;
                    }
                }
                info!(run_id = %run_id, other = %other, "schedule tick coalesced into a run still going");
                notify(shared, job, run_id, RunStatus::Skipped.as_str()).await;
                reply(shared, msg, Ack::Ack).await;
                return Step::Done;
            }
            Ok(None) => {}
            Err(err) => {
                defer(shared, job, msg, run_id, sequence, delivery, &err).await;
                return Step::Done;
            }
        }
    }
    let first_record = existing.is_none();
    let (kept, claimed) = match record::claim(shared, run_id, existing, fields, replace).await {
        Ok(claimed) => claimed,
        Err(err) if conflicted(&err) => return Step::Reread,
        Err(err) => {
            defer(shared, job, msg, run_id, sequence, delivery, &err).await;
            return Step::Done;
        }
    };
    let mut fence = Fence {
        attempt,
        instance: shared.links.instance_id.clone(),
        started_at,
        kept,
    };
    let attempt_u32 = u32::try_from(attempt).unwrap_or(u32::MAX);
    let cx = JobContext::new(run_id, job.spec.name(), attempt_u32, trigger, payload).on_host(
        crate::RunHost {
            nats: shared.links.nats.clone(),
            documents: shared.links.documents.clone(),
            project: shared.links.project.clone(),
            module_id: shared.links.module_id.clone(),
            fired_at: fired.to_owned(),
            spec: job.spec.clone(),
            first_record,
        },
    );
    let outcome = supervise(
        shared,
        job,
        msg,
        &cx,
        &claim.control,
        run_id,
        &mut fence,
        claimed,
    )
    .await;
    drop(claim);
    cx.cancelled().cancel();
    match outcome {
        Outcome::TakenOver => {
            warn!(run_id = %run_id, "job run taken over by another attempt; its record is left alone");
        }
        // No record of this attempt to write: as a start that failed.
        Outcome::Unclaimed(err) => defer(shared, job, msg, run_id, sequence, delivery, &err).await,
        Outcome::HandBack => {
            let fields = Change::HandedBack {
                attempt: attempt - 1,
                logs: logs(&cx),
                at: &now_iso(),
                // Re-driven here (no delivery to nak): released to any host's
                // upkeep.
                release_owner: msg.reply.is_none(),
            }
            .fields();
            match record::save(shared, run_id, &fields, &mut fence).await {
                Ok(Saved::Written) => reply(shared, msg, Ack::Nak(None)).await,
                Ok(Saved::Fenced) => {}
                // The record still shows this attempt RUNNING: the redelivery
                // after the ack wait counts it (the reference's behaviour).
                Err(err) => warn!(run_id = %run_id, error = %err, "could not hand a job run back"),
            }
        }
        Outcome::Finished {
            status,
            error,
            retryable,
            result,
        } => {
            finish(
                shared,
                job,
                Attempt {
                    msg,
                    cx: &cx,
                    run_id,
                    fence: &mut fence,
                    attempt: attempt_u32,
                    sequence,
                    stored_nanos,
                },
                status,
                error,
                retryable,
                result,
            )
            .await;
        }
    }
    Step::Done
}

/// The reference's `_result`: the value, or a preview when its JSON passes 64 KiB.
fn result_value(value: &serde_json::Value) -> Value {
    let encoded = abi_pyjson::dumps_default(&abi_sdk_core::documents::json::to_py(value));
    if encoded.len() > wire::MAX_RESULT_BYTES {
        let preview: String = encoded.chars().take(wire::RESULT_PREVIEW_CHARS).collect();
        let mut data = Data::new();
        data.insert(field::RESULT_TRUNCATED.into(), Value::Bool(true));
        data.insert(field::RESULT_PREVIEW.into(), Value::String(preview));
        return Value::Object(data);
    }
    to_doc(value)
}

/// Where an attempt runs: its delivery, context, record and fence.
struct Attempt<'a> {
    msg: &'a Message,
    cx: &'a JobContext,
    run_id: &'a str,
    fence: &'a mut Fence,
    attempt: u32,
    sequence: u64,
    stored_nanos: i128,
}

/// Records what an ended attempt becomes ([`machine::on_outcome`]), then
/// answers its delivery (and schedules the retry, if one).
async fn finish(
    shared: &Arc<Shared>,
    job: &Arc<Job>,
    at: Attempt<'_>,
    status: RunStatus,
    error: String,
    retryable: bool,
    result: Option<serde_json::Value>,
) {
    let Attempt {
        msg,
        cx,
        run_id,
        fence,
        attempt,
        sequence,
        stored_nanos,
    } = at;
    let retry_delay = backoff(shared, attempt);
    let becomes = machine::on_outcome(machine::Ended {
        status,
        error,
        retryable,
        attempt,
        max_attempts: job.spec.attempts(),
        expires_before_retry: expires_within(msg, stored_nanos, retry_delay),
    });
    let status = becomes.status;
    let now = now_iso();
    let skipped = cx.skipped().unwrap_or_default();
    let fields = Change::Ended(Ended {
        status,
        error: &becomes.error,
        logs: logs(cx),
        retry: (status == RunStatus::Retrying)
            .then(|| (iso_after(retry_delay), shared.links.instance_id.as_str())),
        finished_at: status.is_terminal().then_some(now.as_str()),
        result: matches!(status, RunStatus::Succeeded | RunStatus::Skipped)
            .then(|| result_value(&result.unwrap_or(serde_json::Value::Null))),
        skip_reason: (status == RunStatus::Skipped).then_some(skipped.as_str()),
    })
    .fields();
    // Keep the delivery (heartbeats) until the completion is stored: acking
    // first could lose it, nak'ing would run it again.
    loop {
        match record::save(shared, run_id, &fields, fence).await {
            Ok(Saved::Written) => break,
            Ok(Saved::Fenced) => {
                warn!(run_id = %run_id, "job run taken over before it finished; its record is left alone");
                return;
            }
            Err(err) => {
                warn!(run_id = %run_id, error = %err, "job completion not saved; retrying");
                if shared.stopping.is_closed() {
                    return;
                }
                reply(shared, msg, Ack::Progress).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    if status.is_terminal() {
        notify(shared, job, run_id, status.as_str()).await;
    }
    reply(shared, msg, becomes.ack).await;
    if status == RunStatus::Retrying {
        shared.retries.schedule(job, run_id, sequence, retry_delay);
    }
}

/// Tells waiters a run ended (core NATS, at most once: they poll too).
pub(super) async fn notify(shared: &Shared, job: &Job, run_id: &str, status: &str) {
    let notice = wire::completion_notice(run_id, status);
    if let Err(err) = shared
        .links
        .nats
        .publish(job.done.clone(), notice.into())
        .await
    {
        warn!(run_id = %run_id, error = %err, "could not publish a job completion");
    }
}

/// A live owner runs the run (another host, or this one): the delivery
/// starts nothing and comes again after `wait`, by when the owner finished
/// (the record retires it) or stopped heartbeating (it is taken over).
async fn await_owner(shared: &Shared, msg: &Message, run_id: &str, wait: Duration) {
    if msg.reply.is_none() {
        // A retry re-driven here that another attempt took: nothing to do.
        debug!(run_id = %run_id, "job retry taken by a running attempt");
        return;
    }
    info!(run_id = %run_id, wait_ms = wait.as_millis() as u64, "job run is running under a live owner; its duplicate delivery waits");
    reply(shared, msg, Ack::Nak(Some(wait))).await;
}

/// The record could not be read or written: redeliver later, using no attempt.
async fn defer(
    shared: &Arc<Shared>,
    job: &Arc<Job>,
    msg: &Message,
    run_id: &str,
    sequence: u64,
    delivery: u32,
    err: &abi_sdk_core::CallError,
) {
    let delay = backoff(shared, delivery);
    error!(run_id = %run_id, delivery, error = %err, "job run could not start; redelivering later");
    later(shared, job, msg, run_id, sequence, delay).await;
}

/// Tries the trigger again after `delay`: a nak for a delivery, a new
/// local timer for a re-driven retry.
async fn later(
    shared: &Arc<Shared>,
    job: &Arc<Job>,
    msg: &Message,
    run_id: &str,
    sequence: u64,
    delay: Duration,
) {
    if msg.reply.is_some() {
        reply(shared, msg, Ack::Nak(Some(delay))).await;
    } else {
        shared.retries.schedule(job, run_id, sequence, delay);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_as_the_references() {
        let (base, max) = (Duration::from_secs(5), Duration::from_secs(300));
        let delays: Vec<u64> = (1..=8)
            .map(|a| backoff_delay(base, max, a).as_secs())
            .collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(backoff_delay(base, max, 100), max);
    }

    #[test]
    fn results_past_64_kib_become_a_preview() {
        let small = serde_json::json!({"a": [1, 2]});
        assert_eq!(result_value(&small), to_doc(&small));
        let big = serde_json::json!({"a": "x".repeat(70_000)});
        let Value::Object(preview) = result_value(&big) else {
            panic!("a preview object");
        };
        assert_eq!(preview["truncated"], Value::Bool(true));
        let Value::String(text) = &preview["preview"] else {
            panic!("preview text");
        };
        assert_eq!(text.len(), 2000);
        assert!(text.starts_with("{\"a\": \"xxx"));
    }
}
