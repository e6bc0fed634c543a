//! Event bridges (the reference's `bridge_event`): one core NATS
//! subscription per `OnEvent` trigger, in the job's queue group so each
//! event is bridged by one host; an event the filter keeps is stored as a
//! durable trigger (`Abi-Job-Trigger: event`, `Nats-TTL: 24h`, a
//! `Nats-Msg-Id` derived from the event's own so a repeated event is one
//! run). Unlike the reference, events are bridged one at a time per
//! subscription (bounded, in order) instead of one unbounded task each.

use abi_wire::jobs as wire;
use async_nats::{HeaderMap, Message};
use futures::StreamExt as _;
use tracing::warn;

use super::{Job, JobHostError, Shared};
use abi_sdk_core::job_spec::event_filter;

/// Subscribes every `OnEvent` trigger of `job`; the returned loops end when
/// the host stops fetching (drain or close).
pub(super) async fn subscribe(
    shared: &std::sync::Arc<Shared>,
    job: &std::sync::Arc<Job>,
    loops: &tokio_util::task::TaskTracker,
) -> Result<(), JobHostError> {
    for trigger in job.spec.triggers() {
        let crate::Trigger::OnEvent { subject, filter } = trigger else {
            continue;
        };
        let filter: Option<serde_json::Value> = if filter.is_empty() {
            None
        } else {
            serde_json::from_str(filter).ok()
        };
        let mut events = shared
            .links
            .nats
            .queue_subscribe(subject.clone(), job.subjects.events_queue())
            .await
            .map_err(|e| JobHostError::JetStream(e.to_string()))?;
        let (shared, job) = (shared.clone(), job.clone());
        loops.spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    () = shared.stopping.stopped_accepting() => break,
                    event = events.next() => match event {
                        Some(event) => bridge(&shared, &job, &event, filter.as_ref()).await,
                        None => break,
                    },
                }
            }
            let _ = events.unsubscribe().await;
        });
    }
    Ok(())
}

/// Stores one event as a trigger of `job`, unless the filter rejects it.
async fn bridge(shared: &Shared, job: &Job, event: &Message, filter: Option<&serde_json::Value>) {
    let data = if event.payload.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&event.payload).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&event.payload).into_owned())
        })
    };
    if !event_filter::matches(&data, filter) {
        return;
    }
    let trigger = job.subjects.trigger();
    let mut headers = HeaderMap::new();
    headers.insert(wire::TRIGGER_HEADER, wire::EVENT_TRIGGER);
    headers.insert(wire::TTL_HEADER, wire::EVENT_TRIGGER_TTL);
    let event_id = event
        .headers
        .as_ref()
        .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
        .map(|v| v.as_str().to_owned())
        .filter(|v| !v.is_empty());
    if let Some(event_id) = event_id {
        let id = wire::hash(&[&trigger, event.subject.as_str(), &event_id]);
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
    }
    headers.insert(
        async_nats::header::NATS_EXPECTED_STREAM,
        shared.stream.as_str(),
    );
    // json.dumps({"subject": ..., "data": ...}): that key order, default separators.
    let body = format!(
        "{{\"subject\": {}, \"data\": {}}}",
        abi_pyjson::json_string(event.subject.as_str()),
        abi_pyjson::dumps_default(&abi_sdk_core::documents::json::to_py(&data))
    );
    let sent = async {
        shared
            .js
            .publish_with_headers(trigger, headers, body.into())
            .await?
            .await
    };
    if let Err(err) = sent.await {
        warn!(job = %job.spec.name(), error = %err, "could not store an event trigger");
    }
}
