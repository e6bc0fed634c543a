//! Record-call floors (`--record-call-floors`): the raw floor plus the
//! run-record calls a host makes per run, to see what those calls cost on
//! this machine without the rest of a host (no handler task, heartbeat,
//! payload decoding or fencing).
//!
//! - `records4`: what our host does today: read the record (none yet),
//!   create it RUNNING (`if_version = 0`), read it again, write the
//!   outcome on the version read;
//! - `records2`: create it RUNNING, then write the outcome on the version
//!   the create returned (no reads);
//! - `records2c`: the same two calls, the triggers pulled by one continuous
//!   pull per job instead of one fetch per free slot.
//!
//! Both write the fields of a real run record to the runs collection with
//! the reference's indexes, through the same document service.

use std::sync::Arc;
use std::time::Duration;

use abi_document_model::{CollectionSpec, Data, FieldSpec, Value};
use abi_sdk::jobs::JobHostOptions;
use abi_sdk::jobs::host::consumer_config;
use abi_sdk::{DocumentClient, TokenSource};
use abi_wire::jobs::{self as wire, JobSubjects, field};
use anyhow::Context as _;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::{self, Message};
use futures::StreamExt as _;
use tokio::sync::Semaphore;

use super::{PROJECT, jobs, started_subject, token};

/// The module of the four-call floor.
pub const FOUR_MODULE: &str = "bench.records4";
/// The module of the two-call floor.
pub const TWO_MODULE: &str = "bench.records2";
/// The module of the two-call floor pulling continuously.
pub const CONTINUOUS_MODULE: &str = "bench.records2c";
/// How long one pull waits for messages (the hosts' default).
const FETCH_EXPIRES: Duration = Duration::from_secs(1);

/// One floor's links.
struct Floor {
    nats: async_nats::Client,
    docs: DocumentClient,
    collection: String,
    module: &'static str,
    reads: bool,
}

/// Starts the floor of `module` (four calls when `reads`), one pull loop per
/// job: fetching as many triggers as it has free slots, as our host does,
/// or (`continuous`) one continuous pull.
///
/// # Errors
///
/// When the runs collection or a consumer cannot be made.
///
/// # Cancel safety
///
/// Not cancel safe: dropped between two consumers, the loops already spawned run on detached
/// (their handles are lost) and the consumers made stay on the stream.
pub async fn start(
    nats: &async_nats::Client,
    module: &'static str,
    reads: bool,
    continuous: bool,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let floor = Arc::new(Floor {
        nats: nats.clone(),
        docs: DocumentClient::new(nats.clone(), TokenSource::issued(token(module)), module),
        collection: wire::runs_collection(PROJECT),
        module,
        reads,
    });
    let mut spec = CollectionSpec::new(floor.collection.clone());
    for field in ["job", "status", "finished_at"] {
        spec = spec.field(FieldSpec::new(field, "string").indexed());
    }
    floor
        .docs
        .ensure_collection(spec)
        .await
        .context("the runs collection")?;
    let stream = jetstream::new(nats.clone())
        .get_stream(wire::stream(PROJECT))
        .await
        .context("the jobs stream")?;
    let mut loops = Vec::new();
    for (name, n) in jobs() {
        let subjects = JobSubjects::new(PROJECT, module, &name);
        let config = consumer_config(&subjects, n, JobHostOptions::default().ack_wait);
        let consumer: PullConsumer = stream
            .create_consumer(config)
            .await
            .with_context(|| format!("the consumer of {name}"))?;
        let (floor, name) = (floor.clone(), Arc::new(name));
        let subjects = Arc::new(subjects);
        loops.push(if continuous {
            tokio::spawn(pull_continuously(floor, consumer, name, subjects, n))
        } else {
            tokio::spawn(fetch_free_slots(floor, consumer, name, subjects, n))
        });
    }
    nats.flush().await?;
    Ok(loops)
}

/// Our host's pull pattern: one fetch of as many triggers as there are free
/// slots (each fetch subscribes a new inbox and drops it when it ends).
async fn fetch_free_slots(
    floor: Arc<Floor>,
    consumer: PullConsumer,
    name: Arc<String>,
    subjects: Arc<JobSubjects>,
    n: u32,
) {
    let slots = Arc::new(Semaphore::new(n as usize));
    loop {
        let Ok(first) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut permits = vec![first];
        while let Ok(permit) = slots.clone().try_acquire_owned() {
            permits.push(permit);
        }
        let batch = consumer
            .fetch()
            .max_messages(permits.len())
            .expires(FETCH_EXPIRES)
            .messages()
            .await;
        let Ok(mut batch) = batch else { continue };
        while let Some(Ok(msg)) = batch.next().await {
            let Some(permit) = permits.pop() else { break };
            let (floor, name, subjects) = (floor.clone(), name.clone(), subjects.clone());
            tokio::spawn(async move {
                floor.run(&name, &subjects, msg).await;
                drop(permit);
            });
        }
    }
}

/// One continuous pull (`PullConsumer::stream`, one inbox, pull requests
/// renewed as messages arrive) of up to `n` messages; the consumer's
/// `max_ack_pending` (`n`) bounds what runs at once.
async fn pull_continuously(
    floor: Arc<Floor>,
    consumer: PullConsumer,
    name: Arc<String>,
    subjects: Arc<JobSubjects>,
    n: u32,
) {
    loop {
        let messages = consumer
            .stream()
            .max_messages_per_batch(n as usize)
            .expires(FETCH_EXPIRES)
            .messages()
            .await;
        let Ok(mut messages) = messages else { continue };
        while let Some(Ok(msg)) = messages.next().await {
            let (floor, name, subjects) = (floor.clone(), name.clone(), subjects.clone());
            tokio::spawn(async move { floor.run(&name, &subjects, msg).await });
        }
    }
}

impl Floor {
    /// One trigger: the record calls around the "started" message, the
    /// completion notice (FAILED when a call failed), the ack.
    async fn run(&self, job: &str, subjects: &JobSubjects, msg: Message) {
        let Ok(info) = msg.info() else { return };
        let run_id = wire::run_id(job, info.stream_sequence);
        let status = match self.records(job, &run_id, info.stream_sequence).await {
            Ok(()) => wire::SUCCEEDED,
            Err(error) => {
                eprintln!("  {}: run {run_id}: {error:#}", self.module);
                wire::FAILED
            }
        };
        // Lost publishes show up as missing runs in the bench.
        let notice = wire::completion_notice(&run_id, status);
        let _ = self.nats.publish(subjects.done(), notice.into()).await;
        let _ = msg.ack().await;
    }

    async fn records(&self, job: &str, run_id: &str, sequence: u64) -> anyhow::Result<()> {
        let docs = &self.docs;
        if self.reads {
            docs.try_get(&self.collection, run_id).await?;
        }
        let running = running_fields(self.module, job, run_id, sequence);
        let created = docs
            .put(&self.collection, run_id, running.clone(), Some(0))
            .await?;
        let _ = self
            .nats
            .publish(started_subject(self.module), run_id.to_owned().into())
            .await;
        let (mut data, version) = if self.reads {
            let doc = docs
                .try_get(&self.collection, run_id)
                .await?
                .context("the record just written")?;
            (doc.data, doc.version)
        } else {
            (running, created.version)
        };
        let now = abi_sdk::jobs::time::now_iso();
        data.insert(field::STATUS.into(), wire::SUCCEEDED.into());
        data.insert(field::LOGS.into(), Value::List(Vec::new()));
        data.insert(field::FINISHED_AT.into(), now.into());
        data.insert(field::RESULT.into(), Value::Null);
        docs.put(&self.collection, run_id, data, Some(version))
            .await?;
        Ok(())
    }
}

/// The fields a host writes when a run starts.
fn running_fields(module: &str, job: &str, run_id: &str, sequence: u64) -> Data {
    let now = abi_sdk::jobs::time::now_iso();
    let mut trigger = Data::new();
    trigger.insert(field::TRIGGER_KIND.into(), wire::MANUAL_TRIGGER.into());
    let mut payload = Data::new();
    payload.insert("n".into(), Value::Int(0));
    let mut data = Data::new();
    for (key, value) in [
        (field::CREATED_AT, Value::from(now.as_str())),
        (field::JOB, job.into()),
        (field::RUN_ID, run_id.into()),
        (field::MODULE_ID, module.into()),
        (field::STATUS, wire::RUNNING.into()),
        (field::ATTEMPT, Value::Int(1)),
        (field::MAX_ATTEMPTS, Value::Int(1)),
        (field::TRIGGER, trigger.into()),
        (field::PAYLOAD, payload.into()),
        (field::INSTANCE, format!("{module}-1").into()),
        (
            field::SEQUENCE,
            Value::Int(i64::try_from(sequence).unwrap_or(i64::MAX)),
        ),
        (field::FIRED_AT, now.as_str().into()),
        (field::STARTED_AT, now.as_str().into()),
        (field::HEARTBEAT_AT, now.as_str().into()),
        (field::TRACE_ID, "".into()),
        (field::ERROR, "".into()),
    ] {
        data.insert(key.to_owned(), value);
    }
    data
}
