//! Each job's durable pull consumer, configured exactly as the reference's
//! `_consumer_config`: every host of a job rewrites it on start, so Python
//! and Rust hosts must send the same config or they overwrite each other.

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};

use super::{Job, JobHostError, Shared};

/// The consumer of `job`: durable, filtered on its trigger subject, explicit
/// acks, new triggers only, `ack_wait`, unlimited deliveries (attempts are
/// counted on the run record), at most `max_concurrency` unacknowledged.
pub fn consumer_config(
    subjects: &abi_wire::jobs::JobSubjects,
    max_concurrency: u32,
    ack_wait: std::time::Duration,
) -> pull::Config {
    pull::Config {
        durable_name: Some(subjects.consumer()),
        filter_subject: subjects.trigger(),
        ack_policy: AckPolicy::Explicit,
        deliver_policy: DeliverPolicy::New,
        ack_wait,
        max_deliver: -1,
        max_ack_pending: i64::from(max_concurrency),
        ..Default::default()
    }
}

fn config(shared: &Shared, job: &Job) -> pull::Config {
    consumer_config(
        &job.subjects,
        job.spec.concurrency(),
        shared.options.ack_wait,
    )
}

fn js_error(e: impl std::fmt::Display) -> JobHostError {
    JobHostError::JetStream(e.to_string())
}

/// `prepare`: creates the consumer only when it does not exist.
pub(super) async fn create_if_missing(shared: &Shared, job: &Job) -> Result<(), JobHostError> {
    let stream = shared
        .js
        .get_stream(&shared.stream)
        .await
        .map_err(js_error)?;
    match stream.consumer_info(job.subjects.consumer()).await {
        Ok(_) => Ok(()),
        Err(_) => {
            stream
                .create_consumer(config(shared, job))
                .await
                .map_err(js_error)?;
            Ok(())
        }
    }
}

/// `start`: creates the consumer or updates it to this code's limits.
pub(super) async fn create_or_update(
    shared: &Shared,
    job: &Job,
) -> Result<PullConsumer, JobHostError> {
    shared
        .js
        .create_consumer_on_stream(config(shared, job), shared.stream.as_str())
        .await
        .map_err(js_error)
}
