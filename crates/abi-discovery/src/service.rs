//! The service core, assembled in one place: the group-commit writer task,
//! the [`Discovery`] core over a snapshot store, and the request [`Handler`]
//! in front of it.
//!
//! Every embedder starts it the same way: the binary (`run`, over JetStream),
//! the test kit and the fuzz target (over the in-memory store), and the
//! tests; only the store, the clock and the settings differ.

use std::sync::Arc;

use abi_registry::Rules;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
use crate::config::Secret;
use crate::discovery::{Discovery, DiscoveryConfig};
use crate::endpoints::Handler;
use crate::store::SnapshotStore;

/// What the request handler is told: how tokens are checked and what the
/// broker lets through.
#[derive(Debug, Clone)]
pub struct HandlerConfig {
    /// The project secret that signs service and module tokens.
    pub secret: Secret,
    /// The broker's payload limit; the handler caps requests and replies at
    /// the smaller of it and 512 KiB.
    pub broker_max_payload: usize,
}

/// A running service core: the writer task, the [`Discovery`] core and the
/// [`Handler`] over it.
#[derive(Debug)]
pub struct ServiceCore {
    discovery: Discovery,
    handler: Arc<Handler<Discovery>>,
    /// Tracks the writer task alone, so stopping can wait for its last batch.
    writer: TaskTracker,
}

impl ServiceCore {
    /// Spawns the writer task over `store` and returns the core.
    ///
    /// The writer stops when `shutdown` is cancelled, after committing the
    /// mutations it already accepted; later mutations are answered
    /// `UNAVAILABLE`. Wait for it with [`ServiceCore::stopped`].
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (the writer task needs one).
    pub fn start(
        store: Arc<dyn SnapshotStore>,
        rules: Rules,
        clock: Arc<dyn Clock>,
        cfg: DiscoveryConfig,
        handler: HandlerConfig,
        shutdown: CancellationToken,
    ) -> Self {
        let writer = TaskTracker::new();
        let discovery = Discovery::start(store, rules, clock, cfg, &writer, shutdown);
        // Nothing else is spawned on it: closed now, `stopped` resolves once
        // the writer ends.
        writer.close();
        let handler = Arc::new(Handler::new(
            discovery.clone(),
            handler.secret,
            handler.broker_max_payload,
        ));
        Self {
            discovery,
            handler,
            writer,
        }
    }

    /// The core the handler calls (cheap to clone).
    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// The request handler, shared with the endpoints' tasks.
    pub fn handler(&self) -> &Arc<Handler<Discovery>> {
        &self.handler
    }

    /// Resolves once the writer task has ended: after `shutdown` was cancelled
    /// and its last batch committed, or after it died.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn stopped(&self) {
        self.writer.wait().await;
    }
}
