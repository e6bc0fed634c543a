//! [`RegistryWatch`]: registry events from the snapshot's KV key.
//!
//! The service keeps the whole registry in one JetStream KV key. This watch
//! follows that key, decodes each snapshot and reports what changed between
//! two of them. Instances whose lease passes without a write are reported by
//! the clock, like lookups drop them.
//!
//! Statuses in a snapshot are the ones the service computed at its last write:
//! a lookup can tell more (it recomputes readiness once expired instances are
//! gone). Treat events as "something changed, look again" when exactness
//! matters; the dependency gate does exactly that.
//!
//! With an in-process service (the test kit) the snapshots come from a
//! channel instead of the KV key; the events are the same.
//!
//! A KV watcher can stall after a server restart without reporting an error.
//! Every check interval the watch reads the key directly; if the key moved on
//! and the watcher has not delivered anything for a whole interval since, the
//! watch applies what it read and reopens the watcher after that revision.
//!
//! Layout: `diff.rs` holds the pure decisions (events between snapshots,
//! expiry, stall detection), `kv.rs` the KV follower, `local.rs` the
//! in-process follower; both followers report through `Live` here.

mod diff;
mod kv;
mod local;

use std::collections::HashMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abi_proto::discovery::v1 as pb;
use futures::Stream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::local::LocalSnapshot;
use crate::status::Status;

/// How often the watch checks that its watcher still follows the key.
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// The longest wait between two attempts to reopen a failed watcher.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Events buffered for a slow reader before the watch waits for it.
pub const DEFAULT_CAPACITY: usize = 256;
/// The deadline of each JetStream request the watch makes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// The wall clock the watch compares lease expiries with.
///
/// Leases in a snapshot are wall-clock times (seconds since the Unix epoch),
/// while the watch sleeps on the Tokio clock. A test on a paused Tokio clock
/// gives the watch a clock that follows the Tokio clock, so that sleeping
/// until an expiry also makes it pass (with the system clock the expiry
/// would never pass and the watch would sleep again at once, for ever).
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Seconds since the Unix epoch.
    fn now_epoch(&self) -> f64;
}

/// The system's wall clock (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_epoch(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }
}

/// Timings of a [`RegistryWatch`].
#[derive(Clone, Debug)]
pub struct WatchOptions {
    check_interval: Duration,
    max_backoff: Duration,
    capacity: usize,
    clock: Arc<dyn Clock>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            check_interval: DEFAULT_CHECK_INTERVAL,
            max_backoff: DEFAULT_MAX_BACKOFF,
            capacity: DEFAULT_CAPACITY,
            clock: Arc::new(SystemClock),
        }
    }
}

impl WatchOptions {
    /// How often the watcher's progress is checked against the key (default 2 s).
    #[must_use]
    pub fn check_interval(mut self, interval: Duration) -> Self {
        self.check_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// The longest backoff between reopen attempts (default 5 s).
    #[must_use]
    pub fn max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = backoff.max(FIRST_BACKOFF);
        self
    }

    /// Events buffered for a slow reader (default 256).
    #[must_use]
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// The wall clock lease expiries are compared with (default
    /// [`SystemClock`]).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// What happened to one instance between two registry snapshots.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RegistryEvent {
    /// An instance appeared (including every instance present when the watch starts).
    Registered(pb::Instance),
    /// An instance's stored status changed.
    StatusChanged {
        /// The instance as the latest snapshot holds it.
        instance: pb::Instance,
        /// Its status before.
        previous: Status,
    },
    /// An instance left the registry (unregistered or evicted).
    Gone(pb::Instance),
    /// An instance's lease passed.
    Expired(pb::Instance),
}

impl RegistryEvent {
    /// The instance the event is about.
    pub fn instance(&self) -> &pb::Instance {
        match self {
            Self::Registered(i) | Self::Gone(i) | Self::Expired(i) => i,
            Self::StatusChanged { instance, .. } => instance,
        }
    }

    /// The module id of the instance the event is about.
    pub fn module_id(&self) -> &str {
        self.instance()
            .descriptor
            .as_ref()
            .map(|d| d.module_id.as_str())
            .unwrap_or("")
    }
}

/// A stream of [`RegistryEvent`]s. It never ends on its own: failures are
/// retried with backoff. Dropping it stops the background task.
#[derive(Debug)]
pub struct RegistryWatch {
    events_rx: mpsc::Receiver<RegistryEvent>,
    task: JoinHandle<()>,
}

impl RegistryWatch {
    /// Follows the registry of discovery `project` over `nats`: the watch
    /// only reads the registry's KV key, so it needs no discovery token.
    /// Until the registry exists, it waits for it.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (the watch runs in a spawned task).
    pub fn new(nats: async_nats::Client, project: impl AsRef<str>, options: WatchOptions) -> Self {
        let (events_tx, events_rx) = mpsc::channel(options.capacity);
        let live = Live::new(events_tx, options.clock.clone());
        let follower = kv::Follower::new(nats, project.as_ref(), options, live);
        let task = tokio::spawn(follower.run());
        Self { events_rx, task }
    }

    /// Follows the snapshots of an in-process service. Without a service
    /// for the project (`None`) nothing is ever reported.
    pub(crate) fn spawn_local(
        snapshots: Option<watch::Receiver<LocalSnapshot>>,
        options: WatchOptions,
    ) -> Self {
        let (events_tx, events_rx) = mpsc::channel(options.capacity);
        let live = Live::new(events_tx, options.clock);
        let task = tokio::spawn(local::follow_local(snapshots, live));
        Self { events_rx, task }
    }
}

impl Stream for RegistryWatch {
    type Item = RegistryEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events_rx.poll_recv(cx)
    }
}

impl Drop for RegistryWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The live set as last reported, and where its changes go.
struct Live {
    events_tx: mpsc::Sender<RegistryEvent>,
    /// Live instances by id, as last reported.
    instances: HashMap<String, pb::Instance>,
    clock: Arc<dyn Clock>,
}

impl Live {
    fn new(events_tx: mpsc::Sender<RegistryEvent>, clock: Arc<dyn Clock>) -> Self {
        Self {
            events_tx,
            instances: HashMap::new(),
            clock,
        }
    }

    /// Reports what changed in `state`. Returns false when the reader is gone.
    async fn apply(&mut self, state: pb::RegistryState) -> bool {
        let events = diff::diff(&mut self.instances, state, self.clock.now_epoch());
        self.send_all(events).await
    }

    /// Reports the instances whose lease passed. False when the reader is gone.
    async fn expire(&mut self) -> bool {
        let events = diff::expire(&mut self.instances, self.clock.now_epoch());
        self.send_all(events).await
    }

    async fn send_all(&self, events: Vec<RegistryEvent>) -> bool {
        for event in events {
            if self.events_tx.send(event).await.is_err() {
                return false;
            }
        }
        true
    }

    /// When the soonest lease passes, if any instance is live.
    fn next_expiry(&self) -> Option<Instant> {
        let soonest = self
            .instances
            .values()
            .map(|i| i.expires_at)
            .fold(f64::INFINITY, f64::min);
        if !soonest.is_finite() {
            return None;
        }
        let wait = (soonest - self.clock.now_epoch()).max(0.0);
        Some(Instant::now() + Duration::from_secs_f64(wait.min(86_400.0)))
    }

    async fn reader_gone(&self) {
        self.events_tx.closed().await;
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
