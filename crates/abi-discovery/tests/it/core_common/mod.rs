//! Builders, store wrappers and harness shared by the core tests (store,
//! writer, faults).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod load;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use abi_discovery::clock::ManualClock;
use abi_discovery::config::Secret;
use abi_discovery::discovery::{Discovery, DiscoveryConfig, DiscoveryError};
use abi_discovery::endpoints::MAX_PAYLOAD_CAP;
use abi_discovery::service::{HandlerConfig, ServiceCore};
use abi_discovery::store::jetstream::{JetStreamStore, JetStreamStoreConfig};
use abi_discovery::store::{CasError, Snapshot, SnapshotStore, StoreError};
pub use abi_proto::discovery::v1 as pb;
use abi_registry::{Mutation, Outcome, RegistryState, Rules};
use bytes::Bytes;
use futures::future::BoxFuture;
use prost::Message;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The identity the tests register as.
pub const OWNER: &str = "owner";
/// A fixed "now" for the manual clock, far from any lease expiry.
pub const NOW: f64 = 1_800_000_000.0;
/// The project secret of the harness's handler (the core tests call the
/// core directly, without tokens).
pub const SECRET: &str = "core-tests-secret-0123456789abcdef";
/// Generous deadline for anything that should happen soon on a loaded box.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A valid registration of `module_id` (contract 1) as `instance_id`.
pub fn registration(module_id: &str, instance_id: &str) -> pb::RegisterRequest {
    pb::RegisterRequest {
        descriptor: Some(pb::ModuleDescriptor {
            module_id: module_id.to_owned(),
            contract_major: 1,
            ..Default::default()
        }),
        instance_id: instance_id.to_owned(),
        lease_token: format!("{}{instance_id}", "t".repeat(32)),
        ..Default::default()
    }
}

/// Registers `instance_id` of module `m`.
pub fn register(instance_id: &str) -> Mutation {
    Mutation::Register(registration("m", instance_id))
}

/// A registration the rules refuse (`INVALID_ARGUMENT`: no module id).
pub fn invalid_register(instance_id: &str) -> Mutation {
    Mutation::Register(registration("", instance_id))
}

/// Unregisters `instance_id` (registered with [`register`]).
pub fn unregister(instance_id: &str) -> Mutation {
    let req = registration("m", instance_id);
    Mutation::Unregister(pb::UnregisterRequest {
        instance_id: req.instance_id,
        lease_token: req.lease_token,
        ..Default::default()
    })
}

/// `get_module` for module `m` at contract 1.
pub fn get_m() -> pb::GetModuleRequest {
    pb::GetModuleRequest {
        module_id: "m".to_owned(),
        contract_major: 1,
        ..Default::default()
    }
}

/// The instance ids `get_module(m)` lists (empty when the module is gone).
pub async fn listed(discovery: &Discovery) -> Vec<String> {
    match discovery.get_module(&get_m()).await {
        Ok(response) => response
            .instances
            .into_iter()
            .map(|i| i.instance_id)
            .collect(),
        Err(e) if e.code() == abi_registry::ErrorCode::ModuleNotFound => Vec::new(),
        Err(e) => panic!("get_module failed: {e}"),
    }
}

/// Decodes a stored snapshot.
pub fn decode(snapshot: &Snapshot) -> RegistryState {
    RegistryState::decode(snapshot.bytes.clone()).unwrap()
}

/// Records of a state keyed by instance id (order-independent comparison).
pub fn by_id(state: &RegistryState) -> BTreeMap<String, pb::RegistryRecord> {
    let mut map = BTreeMap::new();
    for record in &state.records {
        let id = record.instance.as_ref().unwrap().instance_id.clone();
        assert!(
            map.insert(id.clone(), record.clone()).is_none(),
            "instance {id} stored twice"
        );
    }
    map
}

/// Applies `mutations` one by one to an empty registry at `now`, the way the
/// writer does, and returns the state (for comparing with what was stored).
pub fn replay(rules: &Rules, mutations: &[(Mutation, &str)], now: f64) -> RegistryState {
    let mut state = RegistryState::default();
    for (mutation, owner) in mutations {
        abi_registry::prune_expired(&mut state, now);
        let _ = rules.apply(&mut state, mutation, owner, now);
    }
    state
}

/// A started service core with its shutdown handle; the tests call its
/// [`Discovery`] directly.
pub struct Harness {
    pub discovery: Discovery,
    pub clock: Arc<ManualClock>,
    pub core: ServiceCore,
    pub shutdown: CancellationToken,
}

impl Harness {
    /// A service core over `store` with a manual clock at [`NOW`].
    pub fn start(store: Arc<dyn SnapshotStore>, cfg: DiscoveryConfig) -> Self {
        let clock = Arc::new(ManualClock::new(NOW));
        let shutdown = CancellationToken::new();
        let core = ServiceCore::start(
            store,
            Rules::default(),
            clock.clone(),
            cfg,
            HandlerConfig {
                secret: Secret::new(SECRET),
                broker_max_payload: MAX_PAYLOAD_CAP,
            },
            shutdown.clone(),
        );
        Self {
            discovery: core.discovery().clone(),
            clock,
            core,
            shutdown,
        }
    }

    /// Stops the writer and waits for it (bounded).
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(DEADLINE, self.core.stopped())
            .await
            .expect("writer stops");
    }
}

/// Unwraps a successful register outcome.
pub fn registered(outcome: Result<Outcome, DiscoveryError>) -> pb::RegisterResponse {
    match outcome {
        Ok(Outcome::Register(response)) => response,
        other => panic!("expected a registration, got {other:?}"),
    }
}

/// A store wrapper that counts calls and can make compare-and-swaps conflict,
/// fail, hang or wait at a gate.
#[derive(Debug)]
pub struct TestStore {
    pub inner: Arc<dyn SnapshotStore>,
    pub reads: AtomicUsize,
    pub cas_calls: AtomicUsize,
    /// This many next compare-and-swaps conflict (usize::MAX: all).
    pub conflicts_left: AtomicUsize,
    /// This many next compare-and-swaps fail with a store error.
    pub failures_left: AtomicUsize,
    /// When set, every compare-and-swap first takes a permit (tests hand them
    /// out to hold a batch in flight).
    pub gate: Option<Arc<Semaphore>>,
    /// When true, compare-and-swaps hang until [`TestStore::timeout`] and
    /// then fail as timed out, as a store whose backend never answers does
    /// (every adapter bounds its calls).
    pub hang: bool,
    /// When true, reads and revision checks hang the same way.
    pub hang_reads: bool,
    /// How long a hanging call takes to time out (default: the service's
    /// default store timeout).
    pub timeout: Duration,
    pub revisions: AtomicUsize,
    /// When set, every revision check first takes a permit.
    pub revision_gate: Option<Arc<Semaphore>>,
    /// Signalled when a revision check reaches its gate.
    pub at_revision_gate: Arc<tokio::sync::Notify>,
    /// Signalled when a compare-and-swap reaches the gate.
    pub at_gate: Arc<tokio::sync::Notify>,
}

impl TestStore {
    pub fn new(inner: Arc<dyn SnapshotStore>) -> Self {
        Self {
            inner,
            reads: AtomicUsize::new(0),
            cas_calls: AtomicUsize::new(0),
            conflicts_left: AtomicUsize::new(0),
            failures_left: AtomicUsize::new(0),
            gate: None,
            hang: false,
            hang_reads: false,
            timeout: abi_discovery::discovery::DEFAULT_STORE_TIMEOUT,
            revisions: AtomicUsize::new(0),
            revision_gate: None,
            at_revision_gate: Arc::new(tokio::sync::Notify::new()),
            at_gate: Arc::new(tokio::sync::Notify::new()),
        }
    }

    pub fn cas_calls(&self) -> usize {
        self.cas_calls.load(Ordering::SeqCst)
    }

    /// Waits out the store's own deadline, then fails like it.
    async fn time_out(&self, op: &'static str) -> StoreError {
        tokio::time::sleep(self.timeout).await;
        StoreError::TimedOut {
            op,
            timeout: self.timeout,
        }
    }

    fn take(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                0 => None,
                usize::MAX => Some(usize::MAX),
                n => Some(n - 1),
            })
            .is_ok()
    }
}

impl SnapshotStore for TestStore {
    fn read(&self) -> BoxFuture<'_, Result<Snapshot, StoreError>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if self.hang_reads {
            return Box::pin(async move { Err(self.time_out("read").await) });
        }
        self.inner.read()
    }

    fn compare_and_swap(
        &self,
        bytes: Bytes,
        revision: u64,
    ) -> BoxFuture<'_, Result<u64, CasError>> {
        Box::pin(async move {
            self.cas_calls.fetch_add(1, Ordering::SeqCst);
            if let Some(gate) = &self.gate {
                self.at_gate.notify_one();
                gate.acquire().await.unwrap().forget();
            }
            if self.hang {
                return Err(CasError::Store(self.time_out("compare_and_swap").await));
            }
            if Self::take(&self.conflicts_left) {
                return Err(CasError::Conflict);
            }
            if Self::take(&self.failures_left) {
                return Err(CasError::Store(StoreError::backend(
                    "compare_and_swap",
                    "injected failure",
                )));
            }
            self.inner.compare_and_swap(bytes, revision).await
        })
    }

    fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            self.revisions.fetch_add(1, Ordering::SeqCst);
            if self.hang_reads {
                return Err(self.time_out("revision").await);
            }
            if let Some(gate) = &self.revision_gate {
                self.at_revision_gate.notify_one();
                gate.acquire().await.unwrap().forget();
            }
            self.inner.revision().await
        })
    }

    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }
}

/// Connects to one of `urls` (waiting until connected); reconnects are on.
pub async fn connect(urls: &[String]) -> async_nats::Client {
    let addrs: Vec<async_nats::ServerAddr> = urls.iter().map(|u| u.parse().unwrap()).collect();
    tokio::time::timeout(DEADLINE, async_nats::ConnectOptions::new().connect(addrs))
        .await
        .expect("connect in time")
        .expect("connect")
}

/// Opens the JetStream store of `project` on `client`, waiting (as the
/// service does) for a cluster that has just formed to place the replicas.
pub async fn jetstream_store(
    client: &async_nats::Client,
    project: &str,
    replicas: usize,
) -> JetStreamStore {
    let context = async_nats::jetstream::new(client.clone());
    JetStreamStore::open_within(
        &context,
        &JetStreamStoreConfig {
            project: project.to_owned(),
            replicas,
            timeout: Duration::from_secs(5),
        },
        DEADLINE,
    )
    .await
    .expect("open the registry bucket")
}
