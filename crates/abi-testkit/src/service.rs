//! The in-process service: the real request handler and group-commit writer
//! of `abi-discovery`, over the in-memory store, answering the SDK's local
//! transport.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use abi_discovery::clock::SystemClock;
use abi_discovery::config::Secret;
use abi_discovery::discovery::DiscoveryConfig;
use abi_discovery::service::{HandlerConfig, ServiceCore};
use abi_discovery::store::Snapshot;
use abi_discovery::store::memory::MemoryStore;
use abi_sdk::{LocalDiscovery, LocalError, LocalSnapshot};
use abi_wire::discovery::Operation;
use async_nats::HeaderMap;
use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The broker payload limit the handler is told about (the NATS default).
const BROKER_MAX_PAYLOAD: usize = 1024 * 1024;

/// One project's discovery service in this process.
#[derive(Debug)]
pub(crate) struct InProcessService {
    project: String,
    core: ServiceCore,
    store: Arc<MemoryStore>,
    snapshots: watch::Sender<LocalSnapshot>,
    /// While set, every request fails as if the service were down.
    paused: AtomicBool,
    /// Stops the writer task when the service goes away.
    shutdown: CancellationToken,
}

impl InProcessService {
    /// Starts the writer on the current Tokio runtime.
    pub(crate) fn start(project: String, rules: abi_registry::Rules, secret: &str) -> Arc<Self> {
        let store = Arc::new(MemoryStore::new());
        let shutdown = CancellationToken::new();
        let core = ServiceCore::start(
            store.clone(),
            rules,
            Arc::new(SystemClock),
            DiscoveryConfig::default(),
            HandlerConfig {
                secret: Secret::new(secret),
                broker_max_payload: BROKER_MAX_PAYLOAD,
            },
            shutdown.clone(),
        );
        let (snapshots, _) = watch::channel(LocalSnapshot::default());
        let service = Arc::new(Self {
            project,
            core,
            store,
            snapshots,
            paused: AtomicBool::new(false),
            shutdown,
        });
        tokio::spawn(relay_snapshots(
            service.store.subscribe(),
            service.snapshots.clone(),
            service.shutdown.clone(),
        ));
        service
    }

    /// The stored snapshot.
    pub(crate) fn stored(&self) -> Snapshot {
        self.store.subscribe().borrow().clone()
    }

    /// The stored snapshot, following every write.
    pub(crate) fn subscribe(&self) -> watch::Receiver<LocalSnapshot> {
        self.snapshots.subscribe()
    }

    pub(crate) fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    pub(crate) fn project(&self) -> &str {
        &self.project
    }
}

impl Drop for InProcessService {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Copies the store's snapshots into the SDK's snapshot type.
async fn relay_snapshots(
    mut from: watch::Receiver<Snapshot>,
    to: watch::Sender<LocalSnapshot>,
    shutdown: CancellationToken,
) {
    loop {
        let snapshot = from.borrow_and_update().clone();
        to.send_replace(LocalSnapshot {
            revision: snapshot.revision,
            bytes: snapshot.bytes,
        });
        tokio::select! {
            changed = from.changed() => if changed.is_err() { return },
            () = shutdown.cancelled() => return,
        }
    }
}

impl LocalDiscovery for InProcessService {
    fn request<'a>(
        &'a self,
        project: &'a str,
        operation: &'static str,
        token: &'a str,
        payload: Bytes,
    ) -> BoxFuture<'a, Result<Bytes, LocalError>> {
        Box::pin(async move {
            if project != self.project {
                return Err(LocalError::NoService(format!("project {project:?}")));
            }
            let Some(op) = Operation::from_name(operation) else {
                return Err(LocalError::NoService(format!("operation {operation:?}")));
            };
            if self.paused.load(Ordering::SeqCst) {
                return Err(LocalError::Stopped);
            }
            let mut headers = HeaderMap::new();
            headers.insert(abi_auth::AUTH_HEADER, token);
            let reply = self
                .core
                .handler()
                .handle(op, Some(&headers), &payload)
                .await;
            Ok(Bytes::from(reply.payload))
        })
    }

    fn snapshots(&self, project: &str) -> Option<watch::Receiver<LocalSnapshot>> {
        (project == self.project).then(|| self.subscribe())
    }
}
