//! [`JobHost`]: serves a module's jobs from their durable pull consumers,
//! the reference's `JobHost` state machine with three fixes: batch fetches
//! up to the free slots, fenced record writes, and a shutdown that hands
//! unfinished runs back without spending an attempt.
//!
//! Files: `consumer.rs` (the consumer config, byte-identical to the
//! reference's), `fetch.rs` (one loop per job), `delivery.rs` (one trigger,
//! from its run record to its ack), `supervise.rs` (the handler, its
//! heartbeats, timeout, cancel and hand-back), `record.rs` (compare-and-swap writes
//! and the fence), `runs.rs` (what is running here: cancel, hand back),
//! `machine.rs` (what a delivery does, given its record: pure, table-tested),
//! `schedules.rs` (one schedule message per Cron/Every, never republished
//! unchanged), `events.rs` (OnEvent bridges), `reaper.rs` (lost runs),
//! `retry.rs` (the retry driver: retries that hold no slot during their
//! backoff), `retry_queue.rs` (where deliveries leave the retries they
//! decide on), `ack.rs` (answering a delivery),
//! `retention.rs` (pruning finished runs), `coalesce.rs` (skipping ticks
//! that fired while a run was going), `payload.rs` (claim checks).

mod ack;
mod cancel;
mod coalesce;
mod consumer;
mod delivery;
mod events;
mod fetch;
mod machine;
mod payload;
mod reaper;
mod record;
mod recorded;
mod retention;
mod retry;
mod retry_queue;
mod runs;
pub(crate) mod schedules;
mod supervise;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use super::{JobHandler, JobSpec};
use abi_sdk_core::BoxError;
use abi_sdk_core::DocumentClient;
use abi_sdk_core::host::stopping::Stopping;
use abi_sdk_core::host::{Host, Links, ServedHost};

pub use consumer::consumer_config;
pub use retention::JobRetention;

/// The host's name in logs and errors.
const HOST_NAME: &str = "jobs";

/// The part of a drain kept for writing handed-back records.
const HANDBACK_SAVE_RESERVE: Duration = Duration::from_secs(1);

/// How a host runs its jobs; defaults are the reference's (`job_host.py`).
#[derive(Debug, Clone)]
pub struct JobHostOptions {
    /// `+WPI` and progress saves, this often (default 10 s).
    pub heartbeat_interval: Duration,
    /// The consumer's ack wait (default 30 s; every host of a job must agree).
    /// Also how often the host looks for retries whose host stopped, and how
    /// late such a retry is before it is taken over.
    pub ack_wait: Duration,
    /// How long one pull waits for triggers (default 1 s).
    pub fetch_expires: Duration,
    /// The first retry's delay, doubled per attempt (default 5 s).
    pub backoff_base: Duration,
    /// The longest retry delay (default 300 s).
    pub max_backoff: Duration,
    /// On close, how long a cancelled handler may take to stop before it is
    /// aborted and its run handed back (default 2 s).
    pub handback_grace: Duration,
    /// A RUNNING run without a heartbeat this long is lost (default 300 s).
    pub lost_after: Duration,
    /// How often the upkeep (reaper, then retention) runs, first at start
    /// (default 10 min, the reference's `JobRetention.interval`).
    pub upkeep_interval: Duration,
    /// Which finished run records the upkeep deletes; `None` keeps them all
    /// (default [`JobRetention::default`], the reference's).
    pub retention: Option<JobRetention>,
    /// Refuses cancels that carry no token (default false: the reference's
    /// caller signs none, so a mixed fleet needs them accepted). Turn it on
    /// once every caller of the module's jobs is ours.
    pub require_signed_cancels: bool,
}

impl Default for JobHostOptions {
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_secs(10),
            ack_wait: Duration::from_secs(30),
            fetch_expires: Duration::from_secs(1),
            backoff_base: Duration::from_secs(5),
            max_backoff: Duration::from_secs(300),
            handback_grace: Duration::from_secs(2),
            lost_after: Duration::from_secs(300),
            upkeep_interval: Duration::from_secs(600),
            retention: Some(JobRetention::default()),
            require_signed_cancels: false,
        }
    }
}

/// One declared job and its handler.
#[derive(Clone)]
pub(crate) struct Job {
    pub(crate) spec: Arc<JobSpec>,
    pub(crate) handler: Arc<dyn JobHandler>,
    pub(crate) subjects: abi_wire::jobs::JobSubjects,
    /// `subjects.done()`, named once: every run's end publishes there.
    pub(crate) done: async_nats::Subject,
}

/// What a job host talks to.
#[derive(Clone, Debug)]
pub struct JobHostLinks {
    /// The module's NATS connection.
    pub nats: async_nats::Client,
    /// The module's documents (its own namespace).
    pub documents: DocumentClient,
    /// The project (`ABI_PROJECT`).
    pub project: String,
    /// The module whose jobs these are.
    pub module_id: String,
    /// The registration's instance id, written on every record.
    pub instance_id: String,
}

impl From<&Links> for JobHostLinks {
    fn from(links: &Links) -> Self {
        Self {
            nats: links.nats().clone(),
            documents: links.documents().clone(),
            project: links.project().to_owned(),
            module_id: links.module_id().to_owned(),
            instance_id: links.instance_id().to_owned(),
        }
    }
}

pub(crate) struct Shared {
    pub(crate) options: JobHostOptions,
    pub(crate) links: JobHostLinks,
    pub(crate) js: async_nats::jetstream::Context,
    pub(crate) collection: String,
    pub(crate) stream: String,
    pub(crate) runs: runs::Runs,
    /// Each job's local slots (`max_concurrency`), shared by its fetch loop
    /// and its re-driven retries.
    pub(crate) slots: std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>,
    /// Drain stops fetching (the fetch loops end); close also ends the
    /// loops and the retries of completion saves; the work is the runs.
    pub(crate) stopping: Stopping,
    /// The retries deliveries decided on, for the retry driver.
    pub(crate) retries: retry_queue::RetryQueue,
    /// The run records' writes: each run's in turn, many runs' together
    /// when many wait.
    pub(crate) record_puts: abi_sdk_core::documents::PutQueue,
}

/// A module's jobs and their handlers: what the module serves. Declare it
/// with [`abi_sdk_core::ModuleSpec::serve`] (or each job with
/// [`abi_sdk_core::ModuleSpec::job_handler`]) and the runner binds it once the
/// instance registered, prepares it, starts it at the rollout's cutover,
/// drains and closes it. [`JobHost::bind`] makes a running host by hand.
///
/// ```no_run
/// use std::sync::Arc;
/// use abi_jobs::{JobContext, JobHost, JobResult, JobSpec};
///
/// # fn f() -> Result<(), abi_jobs::JobSpecError> {
/// let host = JobHost::new().job(JobSpec::new("ingest")?, |_cx: JobContext| async {
///     JobResult::Ok(serde_json::json!({"done": true}))
/// });
/// let spec = abi_sdk_core::ModuleSpec::new("acme.ingest").serve(Arc::new(host));
/// # let _ = spec; Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct JobHost {
    jobs: Vec<(JobSpec, Arc<dyn JobHandler>)>,
    options: JobHostOptions,
}

impl std::fmt::Debug for JobHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHost")
            .field(
                "jobs",
                &self.jobs.iter().map(|(s, _)| s.name()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// A job host bound to its links ([`JobHost::bind`]): it serves once
/// started, and the runner (or its owner) drains and closes it.
pub struct BoundJobHost {
    jobs: Vec<Job>,
    shared: Arc<Shared>,
    loops: TaskTracker,
}

impl std::fmt::Debug for BoundJobHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundJobHost")
            .field("module_id", &self.shared.links.module_id)
            .field(
                "jobs",
                &self.jobs.iter().map(|j| j.spec.name()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Why a job host cannot do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum JobHostError {
    /// A JetStream call failed.
    #[error("jetstream: {0}")]
    JetStream(String),
    /// A document call failed.
    #[error("documents: {0}")]
    Documents(#[from] abi_sdk_core::CallError),
}

impl JobHost {
    /// A host of no job yet, with the reference's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `spec` with `handler`.
    #[must_use]
    pub fn job(mut self, spec: JobSpec, handler: impl JobHandler) -> Self {
        self.jobs.push((spec, Arc::new(handler)));
        self
    }

    /// Sets the options (default [`JobHostOptions::default`]).
    #[must_use]
    pub fn options(mut self, options: JobHostOptions) -> Self {
        self.options = options;
        self
    }

    /// Whether no job is declared.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The declared descriptors, for the module's discovery descriptor.
    pub fn descriptors(&self) -> Vec<abi_proto::discovery::v1::JobDescriptor> {
        self.jobs.iter().map(|(s, _)| s.to_descriptor()).collect()
    }

    /// A running host of these jobs over `links`; nothing is created or
    /// subscribed until [`BoundJobHost::prepare_consumers`] and
    /// [`BoundJobHost::start_serving`].
    pub fn bind(&self, links: JobHostLinks) -> BoundJobHost {
        let jobs = self
            .jobs
            .iter()
            .map(|(spec, handler)| {
                let subjects =
                    abi_wire::jobs::JobSubjects::new(&links.project, &links.module_id, spec.name());
                Job {
                    spec: Arc::new(spec.clone()),
                    handler: handler.clone(),
                    done: subjects.done().into(),
                    subjects,
                }
            })
            .collect();
        let shared = Shared {
            options: self.options.clone(),
            collection: abi_wire::jobs::runs_collection(&links.project),
            stream: abi_wire::jobs::stream(&links.project),
            js: async_nats::jetstream::new(links.nats.clone()),
            record_puts: links.documents.put_queue(),
            links,
            runs: runs::Runs::default(),
            slots: self
                .jobs
                .iter()
                .map(|(spec, _)| {
                    let slots = tokio::sync::Semaphore::new(spec.concurrency() as usize);
                    (spec.name().to_owned(), Arc::new(slots))
                })
                .collect(),
            stopping: Stopping::new(),
            retries: retry_queue::RetryQueue::new(),
        };
        BoundJobHost {
            jobs,
            shared: Arc::new(shared),
            loops: TaskTracker::new(),
        }
    }
}

impl BoundJobHost {
    /// One reaper pass now (it also runs at start and every
    /// `upkeep_interval`): fails the runs nothing will finish; returns how many.
    ///
    /// # Errors
    ///
    /// [`JobHostError`] when the document service or JetStream fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled pass may have failed some lost runs and not others (each write is compare-and-swap, so none twice); the next pass goes on.
    pub async fn reap_lost_runs(&self) -> Result<usize, JobHostError> {
        reaper::reap(&self.shared, &self.jobs).await
    }

    /// One retention pass now (the upkeep runs one after each reaper pass):
    /// deletes the finished run records `options.retention` lets go; returns
    /// how many (0 without a retention).
    ///
    /// # Errors
    ///
    /// [`JobHostError`] when the document service fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled pass may have deleted part of its batch; the next pass goes on.
    pub async fn prune(&self) -> Result<u64, JobHostError> {
        match &self.shared.options.retention {
            Some(retention) => retention::prune(&self.shared, &self.jobs, retention).await,
            None => Ok(0),
        }
    }

    /// How many runs this host is running now.
    pub fn running(&self) -> usize {
        self.shared.runs.len()
    }

    /// Creates the consumers that are missing, and nothing else.
    ///
    /// # Errors
    ///
    /// [`JobHostError`] when JetStream refuses.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may have created some consumers; calling it again creates the rest.
    pub async fn prepare_consumers(&self) -> Result<(), JobHostError> {
        for job in &self.jobs {
            consumer::create_if_missing(&self.shared, job).await?;
        }
        Ok(())
    }

    /// Ensures the runs collection, creates or updates every consumer,
    /// reconciles the schedules, subscribes the event bridges, the cancel subject and starts the fetch loops.
    ///
    /// # Errors
    ///
    /// [`JobHostError`] when the document service or JetStream refuses.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled start may leave consumers, schedules or subscriptions set up without the fetch loops; close the host.
    pub async fn start_serving(&self) -> Result<(), JobHostError> {
        let shared = self.shared.clone();
        record::ensure_collection(&shared).await?;
        let jobs = self.jobs.clone();
        let mut consumers = Vec::new();
        for job in &jobs {
            consumers.push(consumer::create_or_update(&shared, job).await?);
            let reconciled = schedules::reconcile(
                &shared.js,
                &shared.stream,
                &job.subjects,
                job.spec.triggers(),
            )
            .await?;
            if reconciled == schedules::Reconciled::Paused {
                tracing::info!(job = %job.spec.name(), "the job's schedules are paused (abictl resume starts them)");
            }
        }
        let hosted = hosted_jobs(&jobs);
        if let Some(job) = jobs.first() {
            let mut cancels = shared
                .links
                .nats
                .subscribe(job.subjects.cancel())
                .await
                .map_err(|e| JobHostError::JetStream(e.to_string()))?;
            let runs_shared = shared.clone();
            self.loops.spawn(async move {
                loop {
                    tokio::select! {
                        biased;
                        () = runs_shared.stopping.closed() => break,
                        msg = cancels.next() => match msg {
                            Some(msg) => {
                                if !cancel::authorized(&runs_shared, &msg).await {
                                    continue;
                                }
                                let run_id = String::from_utf8_lossy(&msg.payload).into_owned();
                                if !runs_shared.runs.cancel(&run_id) {
                                    cancel::cancel_idle(&runs_shared, &hosted, &run_id).await;
                                }
                            }
                            None => break,
                        },
                    }
                }
            });
        }
        if !jobs.is_empty() {
            let (upkeep, upkeep_jobs) = (shared.clone(), jobs.clone());
            self.loops.spawn(async move {
                loop {
                    // A store hiccup in one must not stop the other, nor the next pass.
                    if let Err(err) = reaper::reap(&upkeep, &upkeep_jobs).await {
                        warn!(error = %err, "job run reaper failed; retrying");
                    }
                    if let Some(retention) = &upkeep.options.retention
                        && let Err(err) = retention::prune(&upkeep, &upkeep_jobs, retention).await
                    {
                        warn!(error = %err, "job run retention failed; retrying");
                    }
                    tokio::select! {
                        () = upkeep.stopping.closed() => break,
                        () = tokio::time::sleep(upkeep.options.upkeep_interval) => {}
                    }
                }
            });
        }
        if !jobs.is_empty() {
            // Retries whose host stopped wait no longer than an ack wait or
            // two (the upkeep runs every 10 minutes): one find per job.
            let (sweeper, swept) = (shared.clone(), hosted_jobs(&jobs));
            self.loops.spawn(async move {
                loop {
                    tokio::select! {
                        () = sweeper.stopping.closed() => break,
                        () = tokio::time::sleep(sweeper.options.ack_wait) => {}
                    }
                    if let Err(err) = retry::sweep(&sweeper, &swept).await {
                        warn!(error = %err, "job retry sweep failed; retrying");
                    }
                }
            });
        }
        if let Some(queue) = shared.retries.take_receiver() {
            self.loops.spawn(retry::drive(shared.clone(), queue));
        }
        for (job, consumer) in jobs.into_iter().zip(consumers) {
            let job = Arc::new(job);
            events::subscribe(&shared, &job, &self.loops).await?;
            self.loops.spawn(fetch::run(shared.clone(), job, consumer));
        }
        // Announced only once the server processed the subscriptions (a
        // round trip), as the reference's flush_to_broker.
        shared
            .links
            .nats
            .flush()
            .await
            .map_err(|e| JobHostError::JetStream(e.to_string()))?;
        info!(module_id = %shared.links.module_id, jobs = self.jobs.len(), "job host started");
        Ok(())
    }

    /// Stops fetching, waits up to `timeout` less the hand-back reserve for
    /// the runs in flight (they keep heartbeating), then hands back the rest.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: fetching stops at once, but a cancelled call skips
    /// the hand-back of runs still going at the deadline (they run on to
    /// their end); follow it with [`JobHost::close_now`].
    pub async fn drain_within(&self, timeout: Duration) {
        let shared = &self.shared;
        shared.stopping.stop_accepting();
        // What a hand-back needs: the handler's grace, then one record write.
        let reserve = shared.options.handback_grace + HANDBACK_SAVE_RESERVE;
        if !shared
            .stopping
            .settled_within(timeout.saturating_sub(reserve))
            .await
        {
            let left = shared.runs.hand_back_all();
            warn!(
                runs = left,
                "runs still going at the end of the drain; handing them back"
            );
            shared.stopping.settled_within(reserve).await;
        }
    }

    /// Hands back every run still going, waits for their records, and
    /// stops; [`BoundJobHost::close_by`] with three hand-back graces for each
    /// of its two waits.
    ///
    /// # Cancel safety
    ///
    /// As [`BoundJobHost::close_by`].
    pub async fn close_now(&self) {
        let grace = self.shared.options.handback_grace * 3;
        self.close_by(Instant::now() + grace * 2).await;
    }

    /// Hands back every run still going, waits for their records (at most
    /// three hand-back graces, and not past `deadline`), then stops the
    /// loops by `deadline`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: runs are handed back first, but a cancelled call may
    /// leave the host's loops running; call it again.
    pub async fn close_by(&self, deadline: Instant) {
        let shared = &self.shared;
        shared.stopping.stop_accepting();
        shared.runs.hand_back_all();
        let saves_until = deadline.min(Instant::now() + shared.options.handback_grace * 3);
        if !shared.stopping.settled_by(saves_until).await {
            warn!("job runs still saving after the close grace");
        }
        shared.stopping.close();
        self.loops.close();
        let _ = tokio::time::timeout_at(deadline, self.loops.wait()).await;
    }
}

fn hosted_jobs(jobs: &[Job]) -> Vec<Arc<Job>> {
    jobs.iter().cloned().map(Arc::new).collect()
}

impl Host for BoundJobHost {
    fn name(&self) -> &str {
        HOST_NAME
    }

    fn prepare(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move { Ok(self.prepare_consumers().await?) })
    }

    fn start(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move { Ok(self.start_serving().await?) })
    }

    fn drain(&self, timeout: Duration) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            self.drain_within(timeout).await;
            Ok(())
        })
    }

    fn close(&self, deadline: Instant) -> BoxFuture<'_, ()> {
        Box::pin(self.close_by(deadline))
    }
}

impl ServedHost for JobHost {
    fn name(&self) -> &str {
        HOST_NAME
    }

    fn declare(&self, descriptor: &mut abi_proto::discovery::v1::ModuleDescriptor) {
        descriptor.jobs.extend(self.descriptors());
    }

    fn gated(&self) -> bool {
        true
    }

    fn bind(&self, links: &Links) -> Arc<dyn Host> {
        Arc::new(JobHost::bind(self, JobHostLinks::from(links)))
    }
}
