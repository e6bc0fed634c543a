//! One job's fetch loop: pulls as many triggers as there are free slots in
//! one request (the reference pulls one per round trip), and hands each to
//! its own task holding a slot.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use futures::StreamExt as _;
use tokio::sync::Semaphore;
use tracing::warn;

use super::{Job, Shared, delivery};

/// How long past its expiry a pull may go unanswered: the server ends
/// every pull at its expiry, unless a reconnect lost the request (the
/// client's own limit is 5 s, which would leave the job unfetched that long).
const PULL_GRACE: Duration = Duration::from_secs(1);

/// Runs until the host stops fetching; triggers received after that are
/// handed straight back (a bare `-NAK`).
pub(super) async fn run(shared: Arc<Shared>, job: Arc<Job>, consumer: PullConsumer) {
    let slots = match shared.slots.get(job.spec.name()) {
        Some(slots) => slots.clone(),
        None => Arc::new(Semaphore::new(job.spec.concurrency() as usize)),
    };
    loop {
        let first = tokio::select! {
            biased;
            () = shared.stopping.stopped_accepting() => return,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let mut permits = vec![first];
        while let Ok(permit) = slots.clone().try_acquire_owned() {
            permits.push(permit);
        }
        let batch = consumer
            .fetch()
            .max_messages(permits.len())
            .expires(shared.options.fetch_expires)
            .messages()
            .await;
        let mut batch = match batch {
            Ok(batch) => batch,
            Err(err) => {
                warn!(job = %job.spec.name(), error = %err, "job fetch failed; retrying");
                tokio::select! {
                    () = shared.stopping.stopped_accepting() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        let deadline = tokio::time::Instant::now() + shared.options.fetch_expires + PULL_GRACE;
        loop {
            let next = tokio::select! {
                next = batch.next() => next,
                () = tokio::time::sleep_until(deadline) => {
                    warn!(job = %job.spec.name(), "job pull unanswered (a reconnect?); pulling again");
                    break;
                }
            };
            let Some(message) = next else {
                break;
            };
            let message = match message {
                Ok(message) => message,
                Err(err) => {
                    warn!(job = %job.spec.name(), error = %err, "job fetch interrupted");
                    break;
                }
            };
            if !shared.stopping.accepting() {
                super::ack::hand_back_unstarted(&shared, &message).await;
                continue;
            }
            let Some(permit) = permits.pop() else {
                // More than asked for cannot arrive; hand it back if it does.
                super::ack::hand_back_unstarted(&shared, &message).await;
                continue;
            };
            let (shared, job) = (shared.clone(), job.clone());
            let tasks = shared.stopping.work().clone();
            let message = Box::new(message);
            // Boxed: a delivery's future is several KiB, and a task
            // holding it inline copies it whole when spawned, when placed
            // in its cell and when finished.
            tasks.spawn(Box::pin(async move {
                delivery::handle(&shared, &job, message).await;
                drop(permit);
            }));
        }
    }
}
