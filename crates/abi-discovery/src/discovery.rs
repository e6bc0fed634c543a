//! The facade the endpoints call: mutations go to the writer task, lookups
//! read the snapshot (re-downloading it only when it changed).
//!
//! **Read-your-writes across owners.** Every lookup first asks the store for
//! its cheap change token ([`SnapshotStore::revision`]: on JetStream, "is
//! there a message on the key after the revision I know", a direct get on a
//! one-replica bucket, else asked of the stream leader; see
//! `store::jetstream`) and serves the cached decoded snapshot only when the
//! token is the one that snapshot was read or written at; otherwise it
//! re-reads (the check already fetched the newer value, so this only proves
//! nothing newer came). So a lookup reflects every write acknowledged before
//! it arrived, whichever process made it, at the cost of one small request
//! instead of a snapshot download.
//!
//! The reference also lets `authorize_agent` polls (not `new_invocation`)
//! and `authorize_app` answer from a snapshot up to `snapshot_seconds` (1 s)
//! old without any request. That would let a provider keep serving for up to
//! a second after another owner acknowledged its eviction, so we do not keep
//! it: those calls use the same token check as every lookup, which already
//! avoids the download that made the shortcut worthwhile.
//!
//! **Coalescing.** Concurrent lookups share one check (and download): a
//! lookup joins a check that starts after it arrived, never one already
//! under way (see `store::coalesce`), so sharing keeps read-your-writes.

use std::num::NonZeroUsize;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use abi_registry::{Mutation, Outcome, Prepared, Rules};
use futures::FutureExt as _;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::clock::Clock;
pub use crate::error::DiscoveryError;
use crate::store::SnapshotStore;
use crate::store::cache::SnapshotCache;
use crate::store::coalesce::Coalescer;
use crate::store::decode::{decode, error_chain};
use crate::telemetry::{Counters, HistogramSnapshot};
pub use crate::writer::{BUSY_MESSAGE, CONFLICT_BUDGET, MIN_ATTEMPTS};
use crate::writer::{WriteCmd, Writer, WriterConfig};

/// Default writer queue capacity: enough for bursts from a few hundred
/// instances renewing at once, small enough that a stuck store pushes back on
/// the endpoints quickly.
pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;
/// Default most mutations per compare-and-swap: large batches amortise the
/// round trip, and applying 64 mutations to a 512 KiB snapshot stays cheap.
pub const DEFAULT_MAX_BATCH: usize = 64;
/// Default linger for a batch to fill: none. While one batch commits the next
/// one accumulates anyway, so waiting only adds latency when idle.
pub const DEFAULT_MAX_DELAY: Duration = Duration::ZERO;
/// Default deadline of one store call: long enough for a JetStream leader
/// election (a few seconds), short enough for callers' 10 s+ request timeouts.
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(5);

/// Settings of the writer and of store calls.
#[derive(Debug, Clone)]
pub struct DiscoveryConfig {
    /// Capacity of the writer's queue (callers wait when it is full).
    pub queue_capacity: NonZeroUsize,
    /// Most mutations committed in one compare-and-swap.
    pub max_batch: NonZeroUsize,
    /// How long the writer lingers for a batch to fill (zero: not at all).
    pub max_delay: Duration,
    /// Deadline of every lookup's store call. Writes rely on the store's own
    /// bound (every adapter bounds its calls; the JetStream one is opened with
    /// the same `--store-timeout-secs`).
    pub store_timeout: Duration,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        Self {
            queue_capacity: NonZeroUsize::new(DEFAULT_QUEUE_CAPACITY).unwrap_or(NonZeroUsize::MIN),
            max_batch: NonZeroUsize::new(DEFAULT_MAX_BATCH).unwrap_or(NonZeroUsize::MIN),
            max_delay: DEFAULT_MAX_DELAY,
            store_timeout: DEFAULT_STORE_TIMEOUT,
        }
    }
}

/// Counters since start, for metrics and `$SRV.STATS`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiscoveryStats {
    /// Batches the writer committed or refused.
    pub batches: u64,
    /// Mutations the writer took.
    pub mutations: u64,
    /// Successful compare-and-swaps.
    pub commits: u64,
    /// Compare-and-swaps that lost to another writer.
    pub conflicts: u64,
    /// Attempts after the first in a batch.
    pub retries: u64,
    /// Batches answered `REGISTRY_BUSY`.
    pub busy: u64,
    /// Store failures and timeouts (writes and lookups).
    pub store_errors: u64,
    /// Lookups served.
    pub lookups: u64,
    /// Snapshot checks (shared by coalesced lookups) that found the cached
    /// snapshot current.
    pub cache_hits: u64,
    /// Snapshot downloads by lookup checks.
    pub reloads: u64,
    /// Size of the snapshot last written or downloaded, in bytes.
    pub snapshot_bytes: u64,
}

/// The discovery service's core, cheap to clone. See the module docs.
#[derive(Debug, Clone)]
pub struct Discovery {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cmd_tx: mpsc::Sender<WriteCmd>,
    rules: Rules,
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
    reader: Reader,
    /// Cancelled when the writer task dies unexpectedly.
    writer_failed: CancellationToken,
    lookups: Coalescer<Result<Arc<Prepared>, DiscoveryError>>,
}

/// What a lookup needs to load the snapshot; owned by each flight (it holds
/// no reference back to [`Inner`], so flights never keep it alive).
#[derive(Debug, Clone)]
struct Reader {
    store: Arc<dyn SnapshotStore>,
    cache: Arc<SnapshotCache>,
    counters: Arc<Counters>,
    store_timeout: Duration,
}

impl Discovery {
    /// Spawns the writer task on `tracker` and returns the facade (embedders
    /// start it through [`ServiceCore::start`](crate::service::ServiceCore::start)). The writer
    /// stops when `shutdown` fires, after committing what it already accepted;
    /// mutations sent after that are answered `UNAVAILABLE`.
    pub(crate) fn start(
        store: Arc<dyn SnapshotStore>,
        rules: Rules,
        clock: Arc<dyn Clock>,
        cfg: DiscoveryConfig,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        let (cmd_tx, cmd_rx) = mpsc::channel(cfg.queue_capacity.get());
        let cache = Arc::new(SnapshotCache::default());
        let counters = Arc::new(Counters::default());
        let writer = Writer {
            store: Arc::clone(&store),
            rules: rules.clone(),
            clock: Arc::clone(&clock),
            cache: Arc::clone(&cache),
            counters: Arc::clone(&counters),
            cfg: WriterConfig {
                max_batch: cfg.max_batch.get(),
                max_delay: cfg.max_delay,
            },
        };
        let writer_failed = CancellationToken::new();
        let failed = writer_failed.clone();
        let run = writer
            .run(cmd_rx, shutdown)
            .instrument(tracing::info_span!("discovery_writer"));
        tracker.spawn(async move {
            // A panic drops the writer's queue, so every later mutation is
            // answered UNAVAILABLE: report it instead of serving like that.
            if let Err(panic) = AssertUnwindSafe(run).catch_unwind().await {
                tracing::error!(
                    panic = panic_message(panic.as_ref()),
                    "the registry writer task died"
                );
                failed.cancel();
            }
        });
        Self {
            inner: Arc::new(Inner {
                cmd_tx,
                rules,
                clock,
                counters: Arc::clone(&counters),
                writer_failed,
                reader: Reader {
                    store,
                    cache,
                    counters,
                    store_timeout: cfg.store_timeout,
                },
                lookups: Coalescer::default(),
            }),
        }
    }

    /// Applies `mutation` for caller `owner` through the writer (group
    /// commit) and returns its outcome.
    ///
    /// # Errors
    ///
    /// [`DiscoveryError::Refused`] with the rules' refusal, or `REGISTRY_BUSY`
    /// when other writers kept winning; [`DiscoveryError::Unavailable`] when
    /// the store failed or the writer has stopped.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: once the writer has taken the mutation it is
    /// committed even if this future is dropped (as in the reference).
    pub async fn mutate(&self, mutation: Mutation, owner: &str) -> Result<Outcome, DiscoveryError> {
        let (reply, answer) = oneshot::channel();
        let cmd = WriteCmd {
            mutation,
            owner: owner.to_owned(),
            reply,
        };
        if self.inner.cmd_tx.send(cmd).await.is_err() {
            return Err(DiscoveryError::Unavailable);
        }
        answer.await.unwrap_or(Err(DiscoveryError::Unavailable))
    }

    /// `get_module` on the current snapshot.
    ///
    /// # Errors
    ///
    /// [`DiscoveryError::Refused`] with the rules' refusal, or
    /// [`DiscoveryError::Unavailable`] when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn get_module(
        &self,
        req: &pb::GetModuleRequest,
    ) -> Result<pb::GetModuleResponse, DiscoveryError> {
        let prepared = self.current().await?;
        self.inner
            .rules
            .get_module(&*prepared, req, self.inner.clock.now())
            .map_err(DiscoveryError::Refused)
    }

    /// `list_modules` on the current snapshot.
    ///
    /// # Errors
    ///
    /// [`DiscoveryError::Refused`] with the rules' refusal, or
    /// [`DiscoveryError::Unavailable`] when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn list_modules(
        &self,
        req: &pb::ListModulesRequest,
    ) -> Result<pb::ListModulesResponse, DiscoveryError> {
        let prepared = self.current().await?;
        self.inner
            .rules
            .list_modules(&*prepared, req, self.inner.clock.now())
            .map_err(DiscoveryError::Refused)
    }

    /// Whether provider `owner` may serve an agent call, on the current
    /// snapshot.
    ///
    /// # Errors
    ///
    /// [`DiscoveryError::Refused`] with the rules' refusal, or
    /// [`DiscoveryError::Unavailable`] when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn authorize_agent(
        &self,
        req: &pb::AuthorizeAgentRequest,
        owner: &str,
    ) -> Result<pb::AuthorizeAgentResponse, DiscoveryError> {
        let prepared = self.current().await?;
        self.inner
            .rules
            .authorize_agent(&*prepared, req, owner, self.inner.clock.now())
            .map_err(DiscoveryError::Refused)
    }

    /// Whether provider `owner` may serve a model call, on the current
    /// snapshot.
    ///
    /// # Errors
    ///
    /// [`DiscoveryError::Refused`] with the rules' refusal, or
    /// [`DiscoveryError::Unavailable`] when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn authorize_model(
        &self,
        req: &pb::AuthorizeModelRequest,
        owner: &str,
    ) -> Result<pb::AuthorizeModelResponse, DiscoveryError> {
        let prepared = self.current().await?;
        self.inner
            .rules
            .authorize_model(&*prepared, req, owner, self.inner.clock.now())
            .map_err(DiscoveryError::Refused)
    }

    /// Whether provider `owner` may serve an app request, on the current
    /// snapshot.
    ///
    /// # Errors
    ///
    /// [`DiscoveryError::Refused`] with the rules' refusal, or
    /// [`DiscoveryError::Unavailable`] when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn authorize_app(
        &self,
        req: &pb::AuthorizeAppRequest,
        owner: &str,
    ) -> Result<pb::AuthorizeAppResponse, DiscoveryError> {
        let prepared = self.current().await?;
        self.inner
            .rules
            .authorize_app(&*prepared, req, owner, self.inner.clock.now())
            .map_err(DiscoveryError::Refused)
    }

    /// The current snapshot as stored (expired records included), for tools
    /// that dump or watch it.
    ///
    /// # Errors
    ///
    /// [`DiscoveryError::Unavailable`] when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn snapshot(&self) -> Result<Arc<pb::RegistryState>, DiscoveryError> {
        Ok(Arc::clone(self.current().await?.state()))
    }

    /// The current snapshot, prepared for lookups (see [`Reader::load`]).
    async fn current(&self) -> Result<Arc<Prepared>, DiscoveryError> {
        Counters::bump(&self.inner.counters.lookups);
        let reader = self.inner.reader.clone();
        self.inner
            .lookups
            .join(move || Box::pin(async move { reader.load().await }))
            .await
    }

    /// The rules this service applies.
    pub fn rules(&self) -> &Rules {
        &self.inner.rules
    }

    /// Counters since start.
    pub fn stats(&self) -> DiscoveryStats {
        let c = &self.inner.counters;
        let get = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        DiscoveryStats {
            batches: get(&c.batches),
            mutations: get(&c.mutations),
            commits: get(&c.commits),
            conflicts: get(&c.conflicts),
            retries: get(&c.retries),
            busy: get(&c.busy),
            store_errors: get(&c.store_errors),
            lookups: get(&c.lookups),
            cache_hits: get(&c.cache_hits),
            reloads: get(&c.reloads),
            snapshot_bytes: get(&c.snapshot_bytes),
        }
    }

    /// Mutations per writer batch, since start.
    pub(crate) fn batch_sizes(&self) -> HistogramSnapshot {
        self.inner.counters.batch_sizes.0.snapshot()
    }

    /// The snapshot this process last read or wrote, as stored (expired
    /// records included), without asking the store: `None` before the first
    /// one and after a store failure. It may miss other owners' latest writes.
    pub(crate) fn cached_snapshot(&self) -> Option<Arc<pb::RegistryState>> {
        self.inner
            .reader
            .cache
            .get()
            .map(|decoded| Arc::clone(decoded.state()))
    }

    /// The service clock's current time, in seconds since the Unix epoch.
    pub(crate) fn now(&self) -> f64 {
        self.inner.clock.now()
    }

    /// Resolves once the writer task has died (it panicked): from then on every
    /// mutation is answered `UNAVAILABLE`, so the process should exit. Never
    /// resolves when the writer stops normally.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn writer_failed(&self) -> WaitForCancellationFutureOwned {
        self.inner.writer_failed.clone().cancelled_owned()
    }

    /// Whether the writer task has died (see [`Discovery::writer_failed`]).
    pub fn writer_has_failed(&self) -> bool {
        self.inner.writer_failed.is_cancelled()
    }
}

impl Reader {
    /// The current snapshot: the cached one while the store's change token
    /// still vouches for it, else a fresh download.
    async fn load(&self) -> Result<Arc<Prepared>, DiscoveryError> {
        let token = self.bounded("revision", self.store.revision()).await?;
        // After the token: the check is where the store notices a re-created
        // bucket, so the epoch read now is the one the token belongs to.
        let epoch = self.store.epoch();
        if let Some(cached) = self.cache.get()
            && cached.token == token
            && cached.epoch == epoch
        {
            Counters::bump(&self.counters.cache_hits);
            return Ok(cached.prepared);
        }
        let snapshot = self.bounded("read", self.store.read()).await?;
        self.counters
            .snapshot_bytes
            .store(snapshot.bytes.len() as u64, Ordering::Relaxed);
        let decoded = decode(snapshot.bytes, snapshot.revision, token, epoch).map_err(|e| {
            Counters::bump(&self.counters.store_errors);
            tracing::warn!(error = %e, revision = snapshot.revision, "registry snapshot does not decode");
            DiscoveryError::Unavailable
        })?;
        Counters::bump(&self.counters.reloads);
        let prepared = Arc::clone(&decoded.prepared);
        self.cache.offer(decoded);
        Ok(prepared)
    }

    /// Runs a store call under the store deadline; failures become
    /// `UNAVAILABLE` (logged here, once).
    async fn bounded<T>(
        &self,
        op: &'static str,
        call: impl Future<Output = Result<T, crate::store::StoreError>>,
    ) -> Result<T, DiscoveryError> {
        let error = match tokio::time::timeout(self.store_timeout, call).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => error_chain(&e),
            Err(_) => format!("timed out after {:?}", self.store_timeout),
        };
        Counters::bump(&self.counters.store_errors);
        self.cache.clear();
        tracing::warn!(op, %error, "registry lookup failed");
        Err(DiscoveryError::Unavailable)
    }
}

/// The text of a panic payload (a `&str` or a `String`), if it has one.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use bytes::Bytes;
    use futures::future::BoxFuture;

    use abi_registry::ErrorCode;

    use super::*;
    use crate::clock::ManualClock;
    use crate::store::memory::MemoryStore;
    use crate::store::{CasError, Snapshot, StoreError};

    /// A store whose compare-and-swap panics, to kill the writer.
    #[derive(Debug)]
    struct PanickingStore;

    impl SnapshotStore for PanickingStore {
        fn read(&self) -> BoxFuture<'_, Result<Snapshot, StoreError>> {
            Box::pin(async { Ok(Snapshot::default()) })
        }

        fn compare_and_swap(&self, _: Bytes, _: u64) -> BoxFuture<'_, Result<u64, CasError>> {
            Box::pin(async { panic!("injected writer failure") })
        }

        fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
            Box::pin(async { Ok(0) })
        }
    }

    fn start(
        store: Arc<dyn SnapshotStore>,
        tracker: &TaskTracker,
        stop: CancellationToken,
    ) -> Discovery {
        Discovery::start(
            store,
            Rules::default(),
            Arc::new(ManualClock::new(1_000.0)),
            DiscoveryConfig::default(),
            tracker,
            stop,
        )
    }

    fn register() -> Mutation {
        Mutation::Register(pb::RegisterRequest {
            descriptor: Some(pb::ModuleDescriptor {
                module_id: "billing".into(),
                contract_major: 1,
                ..Default::default()
            }),
            instance_id: "billing-1".into(),
            lease_token: "t".repeat(32),
            ..Default::default()
        })
    }

    #[tokio::test]
    async fn a_writer_panic_is_reported() {
        let tracker = TaskTracker::new();
        let discovery = start(Arc::new(PanickingStore), &tracker, CancellationToken::new());
        assert!(!discovery.writer_has_failed());
        let answer = discovery.mutate(register(), "billing").await;
        assert_eq!(answer.unwrap_err().code(), ErrorCode::Unavailable);
        tokio::time::timeout(Duration::from_secs(30), discovery.writer_failed())
            .await
            .expect("the writer's death is reported");
        assert!(discovery.writer_has_failed());
        let again = discovery.mutate(register(), "billing").await;
        assert_eq!(again.unwrap_err().code(), ErrorCode::Unavailable);
    }

    #[tokio::test]
    async fn a_writer_stopped_on_purpose_has_not_failed() {
        let tracker = TaskTracker::new();
        let stop = CancellationToken::new();
        let discovery = start(Arc::new(MemoryStore::new()), &tracker, stop.clone());
        assert!(discovery.mutate(register(), "billing").await.is_ok());
        assert_eq!(discovery.batch_sizes().count, 1);
        assert!(discovery.stats().snapshot_bytes > 0);
        let cached = discovery.cached_snapshot().expect("the write is cached");
        assert_eq!(cached.records.len(), 1);
        stop.cancel();
        tracker.close();
        tokio::time::timeout(Duration::from_secs(30), tracker.wait())
            .await
            .expect("the writer stops");
        assert!(!discovery.writer_has_failed());
    }
}
