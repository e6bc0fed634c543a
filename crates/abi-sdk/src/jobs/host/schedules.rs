//! Schedule reconciliation (the reference's `reconcile_schedules`): one
//! schedule message per Cron/Every trigger on `schedule.<index>`, published
//! only when missing or changed (republishing would restart an `@every`
//! interval), with the sequence just read expected so hosts starting
//! together write it once; indexes beyond the declared ones are purged.

use abi_wire::jobs::{self as wire, JobSubjects};
use async_nats::HeaderMap;
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::stream::{LastRawMessageErrorKind, Stream};
use tracing::warn;

use super::{Job, JobHostError, Shared};
use crate::jobs::{Trigger, go_duration_seconds};

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

/// Publishes the job's schedules that changed and purges stale indexes.
pub(super) async fn reconcile(shared: &Shared, job: &Job) -> Result<(), JobHostError> {
    let stream = shared
        .js
        .get_stream(&shared.stream)
        .await
        .map_err(js_error)?;
    let schedules: Vec<_> = job
        .spec
        .triggers()
        .iter()
        .filter_map(|t| schedule_message(t, &job.subjects))
        .collect();
    for (index, (headers, body)) in schedules.iter().enumerate() {
        ensure(
            shared,
            &stream,
            &job.subjects.schedule(index),
            headers,
            body,
        )
        .await?;
    }
    for index in schedules.len()..wire::MAX_TRIGGERS {
        stream
            .purge()
            .filter(job.subjects.schedule(index))
            .await
            .map_err(js_error)?;
    }
    Ok(())
}

async fn ensure(
    shared: &Shared,
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
            shared.stream.as_str(),
        );
        let sent = shared
            .js
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
