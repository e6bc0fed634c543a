//! Schedule reconciliation (the reference's `reconcile_schedules`): one
//! schedule message per Cron/Every trigger on `schedule.<index>`, published
//! only when missing or changed (republishing would restart an `@every`
//! interval), with the sequence just read expected so hosts starting
//! together write it once; indexes beyond the declared ones are purged.
//!
//! A job's schedules can be paused (`abictl pause`): a marker message on
//! the job's `paused` subject, and no schedule message. A host that finds
//! the marker publishes nothing; resuming removes the marker and publishes
//! the declared schedules again.

use abi_wire::jobs::{self as wire, JobSubjects};
use async_nats::HeaderMap;
use async_nats::jetstream::Context;
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::stream::{LastRawMessageErrorKind, Stream};
use tracing::warn;

use super::JobHostError;
use crate::{Trigger, go_duration_seconds};

/// Compare-and-publish tries of one schedule (the reference's three).
const TRIES: usize = 3;

/// The headers and body of one schedule trigger, in the reference's order.
fn schedule_message(
    trigger: &Trigger,
    subjects: &JobSubjects,
) -> Option<(Vec<(&'static str, String)>, String)> {
    let (schedule, time_zone, input, every) = match trigger {
        Trigger::Cron {
            expression,
            time_zone,
            input,
        } => (expression.clone(), time_zone.as_str(), input, None),
        Trigger::Every { interval, input } => (
            format!("@every {interval}"),
            "",
            input,
            go_duration_seconds(interval).ok(),
        ),
        Trigger::OnEvent { .. } => return None,
    };
    let mut headers = vec![(wire::SCHEDULE_HEADER, schedule)];
    if !time_zone.is_empty() {
        headers.push((wire::SCHEDULE_TIME_ZONE_HEADER, time_zone.to_owned()));
    }
    if !input.is_empty() {
        headers.push((wire::INPUT_HASH_HEADER, wire::input_hash(input)));
    }
    headers.push((wire::SCHEDULE_TARGET_HEADER, subjects.trigger()));
    headers.push((wire::SCHEDULE_TTL_HEADER, wire::schedule_tick_ttl(every)));
    headers.push((wire::TRIGGER_HEADER, wire::SCHEDULE_TRIGGER.to_owned()));
    let body = if input.is_empty() {
        "{}".to_owned()
    } else {
        input.clone()
    };
    Some((headers, body))
}

fn js_error(e: impl std::fmt::Display) -> JobHostError {
    JobHostError::JetStream(e.to_string())
}

/// What [`reconcile`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reconciled {
    /// The declared schedules are stored.
    Published,
    /// The job's schedules are paused: none is stored.
    Paused,
}

/// Publishes the job's schedules that changed and purges stale indexes;
/// while the job is paused, purges them all instead.
pub(crate) async fn reconcile(
    js: &Context,
    stream_name: &str,
    subjects: &JobSubjects,
    triggers: &[Trigger],
) -> Result<Reconciled, JobHostError> {
    let stream = js.get_stream(stream_name).await.map_err(js_error)?;
    if paused_since(&stream, subjects).await?.is_some() {
        purge_from(&stream, subjects, 0).await?;
        return Ok(Reconciled::Paused);
    }
    publish(js, &stream, subjects, triggers).await?;
    // A pause stored while these were published: its purge may have run
    // before them, so purge again rather than leave a paused job ticking.
    if paused_since(&stream, subjects).await?.is_some() {
        purge_from(&stream, subjects, 0).await?;
        return Ok(Reconciled::Paused);
    }
    Ok(Reconciled::Published)
}

/// Pauses the job's schedules: stores the marker, then purges every
/// schedule message (in that order, so a host reconciling meanwhile sees
/// the marker after its publish and purges too).
pub(crate) async fn pause(
    js: &Context,
    stream_name: &str,
    subjects: &JobSubjects,
) -> Result<(), JobHostError> {
    let stream = js.get_stream(stream_name).await.map_err(js_error)?;
    js.publish(subjects.paused(), bytes::Bytes::new())
        .await
        .map_err(js_error)?
        .await
        .map_err(js_error)?;
    purge_from(&stream, subjects, 0).await
}

/// Resumes the job's schedules: removes the marker and publishes
/// `triggers`' schedules. Returns how many schedules the job has.
pub(crate) async fn resume(
    js: &Context,
    stream_name: &str,
    subjects: &JobSubjects,
    triggers: &[Trigger],
) -> Result<usize, JobHostError> {
    let stream = js.get_stream(stream_name).await.map_err(js_error)?;
    stream
        .purge()
        .filter(subjects.paused())
        .await
        .map_err(js_error)?;
    publish(js, &stream, subjects, triggers).await
}

/// When the job's schedules were paused, if they are.
pub(crate) async fn paused_since(
    stream: &Stream,
    subjects: &JobSubjects,
) -> Result<Option<async_nats::datetime::DateTime>, JobHostError> {
    match stream
        .get_last_raw_message_by_subject(&subjects.paused())
        .await
    {
        Ok(marker) => Ok(Some(marker.time)),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(js_error(e)),
    }
}

/// Publishes what changed of `triggers`' schedules, purges the indexes past
/// them; returns how many there are.
async fn publish(
    js: &Context,
    stream: &Stream,
    subjects: &JobSubjects,
    triggers: &[Trigger],
) -> Result<usize, JobHostError> {
    let schedules: Vec<_> = triggers
        .iter()
        .filter_map(|t| schedule_message(t, subjects))
        .collect();
    for (index, (headers, body)) in schedules.iter().enumerate() {
        ensure(js, stream, &subjects.schedule(index), headers, body).await?;
    }
    purge_from(stream, subjects, schedules.len()).await?;
    Ok(schedules.len())
}

/// Purges the schedule messages of indexes `first..`.
async fn purge_from(
    stream: &Stream,
    subjects: &JobSubjects,
    first: usize,
) -> Result<(), JobHostError> {
    for index in first..wire::MAX_TRIGGERS {
        stream
            .purge()
            .filter(subjects.schedule(index))
            .await
            .map_err(js_error)?;
    }
    Ok(())
}

async fn ensure(
    js: &Context,
    stream: &Stream,
    subject: &str,
    headers: &[(&'static str, String)],
    body: &str,
) -> Result<(), JobHostError> {
    let wanted = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    };
    for _ in 0..TRIES {
        let sequence = match stream.get_last_raw_message_by_subject(subject).await {
            Ok(current) => {
                let found = |name: &str| current.headers.get(name).map(|v| v.as_str().to_owned());
                if wire::SCHEDULE_HEADERS
                    .iter()
                    .all(|name| found(name).as_deref() == wanted(name))
                {
                    return Ok(());
                }
                current.sequence
            }
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => 0,
            Err(e) => return Err(js_error(e)),
        };
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, value.as_str());
        }
        map.insert(
            async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            sequence.to_string().as_str(),
        );
        map.insert(
            async_nats::header::NATS_EXPECTED_STREAM,
            stream.cached_info().config.name.as_str(),
        );
        let sent = js
            .publish_with_headers(subject.to_owned(), map, body.to_owned().into())
            .await
            .map_err(js_error)?
            .await;
        match sent {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => continue,
            Err(e) => return Err(js_error(e)),
        }
    }
    warn!(subject = %subject, "schedule kept changing while it was reconciled; keeping the one another host wrote");
    Ok(())
}
