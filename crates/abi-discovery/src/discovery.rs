//! The facade the endpoints call: mutations go to the writer task, lookups
//! read the snapshot (re-downloading it only when it changed).
//!
//! **Read-your-writes across owners.** Every lookup first asks the store for
//! its cheap change token ([`SnapshotStore::revision`]: stream info on
//! JetStream, answered by the stream leader) and serves the cached decoded
//! snapshot only when the token is the one that snapshot was read or written
//! at; otherwise it re-downloads (through the leader). So a lookup reflects
//! every write acknowledged before it arrived, whichever process made it, at
//! the cost of one small request instead of a snapshot download.
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
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use abi_registry::{Error, ErrorCode, Mutation, Outcome, Rules};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::clock::Clock;
use crate::store::SnapshotStore;
use crate::store::cache::SnapshotCache;
use crate::store::coalesce::Coalescer;
use crate::writer::{self, Counters, UNAVAILABLE_MESSAGE, WriteCmd, Writer, WriterConfig};

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
    /// Deadline of every store call.
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
    lookups: Coalescer<Result<Arc<pb::RegistryState>, Error>>,
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
    /// Spawns the writer task on `tracker` and returns the facade. The writer
    /// stops when `shutdown` fires, after committing what it already accepted;
    /// mutations sent after that are answered `UNAVAILABLE`.
    pub fn start(
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
                store_timeout: cfg.store_timeout,
            },
        };
        tracker.spawn(
            writer
                .run(cmd_rx, shutdown)
                .instrument(tracing::info_span!("discovery_writer")),
        );
        Self {
            inner: Arc::new(Inner {
                cmd_tx,
                rules,
                clock,
                counters: Arc::clone(&counters),
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
    /// The rules' refusal, `REGISTRY_BUSY` when other writers kept winning,
    /// `UNAVAILABLE` when the store failed or the writer has stopped.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: once the writer has taken the mutation it is
    /// committed even if this future is dropped (as in the reference).
    pub async fn mutate(&self, mutation: Mutation, owner: &str) -> Result<Outcome, Error> {
        let (reply, answer) = oneshot::channel();
        let cmd = WriteCmd {
            mutation,
            owner: owner.to_owned(),
            reply,
        };
        if self.inner.cmd_tx.send(cmd).await.is_err() {
            return Err(unavailable());
        }
        answer.await.unwrap_or_else(|_| Err(unavailable()))
    }

    /// `get_module` on the current snapshot.
    ///
    /// # Errors
    ///
    /// The rules' refusal, or `UNAVAILABLE` when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn get_module(
        &self,
        req: &pb::GetModuleRequest,
    ) -> Result<pb::GetModuleResponse, Error> {
        let state = self.snapshot().await?;
        self.inner
            .rules
            .get_module(&state, req, self.inner.clock.now())
    }

    /// `list_modules` on the current snapshot.
    ///
    /// # Errors
    ///
    /// The rules' refusal, or `UNAVAILABLE` when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn list_modules(
        &self,
        req: &pb::ListModulesRequest,
    ) -> Result<pb::ListModulesResponse, Error> {
        let state = self.snapshot().await?;
        self.inner
            .rules
            .list_modules(&state, req, self.inner.clock.now())
    }

    /// Whether provider `owner` may serve an agent call, on the current
    /// snapshot.
    ///
    /// # Errors
    ///
    /// The rules' refusal, or `UNAVAILABLE` when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn authorize_agent(
        &self,
        req: &pb::AuthorizeAgentRequest,
        owner: &str,
    ) -> Result<pb::AuthorizeAgentResponse, Error> {
        let state = self.snapshot().await?;
        self.inner
            .rules
            .authorize_agent(&state, req, owner, self.inner.clock.now())
    }

    /// Whether provider `owner` may serve a model call, on the current
    /// snapshot.
    ///
    /// # Errors
    ///
    /// The rules' refusal, or `UNAVAILABLE` when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn authorize_model(
        &self,
        req: &pb::AuthorizeModelRequest,
        owner: &str,
    ) -> Result<pb::AuthorizeModelResponse, Error> {
        let state = self.snapshot().await?;
        self.inner
            .rules
            .authorize_model(&state, req, owner, self.inner.clock.now())
    }

    /// Whether provider `owner` may serve an app request, on the current
    /// snapshot.
    ///
    /// # Errors
    ///
    /// The rules' refusal, or `UNAVAILABLE` when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn authorize_app(
        &self,
        req: &pb::AuthorizeAppRequest,
        owner: &str,
    ) -> Result<pb::AuthorizeAppResponse, Error> {
        let state = self.snapshot().await?;
        self.inner
            .rules
            .authorize_app(&state, req, owner, self.inner.clock.now())
    }

    /// The current snapshot as stored (expired records included), for tools
    /// that dump or watch it.
    ///
    /// # Errors
    ///
    /// `UNAVAILABLE` when the store failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (reads only).
    pub async fn snapshot(&self) -> Result<Arc<pb::RegistryState>, Error> {
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
        }
    }
}

impl Reader {
    /// The current snapshot: the cached one while the store's change token
    /// still vouches for it, else a fresh download.
    async fn load(&self) -> Result<Arc<pb::RegistryState>, Error> {
        let token = self.bounded("revision", self.store.revision()).await?;
        if let Some(cached) = self.cache.get()
            && cached.token == token
        {
            Counters::bump(&self.counters.cache_hits);
            return Ok(cached.state);
        }
        let snapshot = self.bounded("read", self.store.read()).await?;
        let decoded = writer::decode(snapshot.bytes, snapshot.revision, token).map_err(|e| {
            Counters::bump(&self.counters.store_errors);
            tracing::warn!(error = %e, revision = snapshot.revision, "registry snapshot does not decode");
            unavailable()
        })?;
        Counters::bump(&self.counters.reloads);
        let state = Arc::clone(&decoded.state);
        self.cache.offer(decoded);
        Ok(state)
    }

    /// Runs a store call under the store deadline; failures become
    /// `UNAVAILABLE` (logged here, once).
    async fn bounded<T>(
        &self,
        op: &'static str,
        call: impl Future<Output = Result<T, crate::store::StoreError>>,
    ) -> Result<T, Error> {
        let error = match tokio::time::timeout(self.store_timeout, call).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => writer::error_chain(&e),
            Err(_) => format!("timed out after {:?}", self.store_timeout),
        };
        Counters::bump(&self.counters.store_errors);
        self.cache.clear();
        tracing::warn!(op, %error, "registry lookup failed");
        Err(unavailable())
    }
}

fn unavailable() -> Error {
    Error::new(ErrorCode::Unavailable, UNAVAILABLE_MESSAGE)
}
