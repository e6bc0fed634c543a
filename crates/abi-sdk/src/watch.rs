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

use std::collections::HashMap;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abi_proto::discovery::v1 as pb;
use async_nats::jetstream::kv::{Entry, Operation, Store};
use futures::{Stream, StreamExt};
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::local::LocalSnapshot;
use crate::status::Status;
use crate::subjects;

/// How often the watch checks that its watcher still follows the key.
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// The longest wait between two attempts to reopen a failed watcher.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Events buffered for a slow reader before the watch waits for it.
pub const DEFAULT_CAPACITY: usize = 256;
/// The deadline of each JetStream request the watch makes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Timings of a [`RegistryWatch`].
#[derive(Clone, Debug)]
pub struct WatchOptions {
    check_interval: Duration,
    max_backoff: Duration,
    capacity: usize,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            check_interval: DEFAULT_CHECK_INTERVAL,
            max_backoff: DEFAULT_MAX_BACKOFF,
            capacity: DEFAULT_CAPACITY,
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
    pub(crate) fn spawn(nats: async_nats::Client, project: String, options: WatchOptions) -> Self {
        let (events_tx, events_rx) = mpsc::channel(options.capacity);
        let follower = Follower {
            js: async_nats::jetstream::new(nats),
            bucket: subjects::registry_bucket(&project),
            options,
            live: Live::new(events_tx),
            revision: 0,
        };
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
        let task = tokio::spawn(follow_local(snapshots, Live::new(events_tx)));
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
}

impl Live {
    fn new(events_tx: mpsc::Sender<RegistryEvent>) -> Self {
        Self {
            events_tx,
            instances: HashMap::new(),
        }
    }

    /// Reports what changed in `state`. Returns false when the reader is gone.
    async fn apply(&mut self, state: pb::RegistryState) -> bool {
        let events = diff(&mut self.instances, state, now_epoch());
        self.send_all(events).await
    }

    /// Reports the instances whose lease passed. False when the reader is gone.
    async fn expire(&mut self) -> bool {
        let events = expire(&mut self.instances, now_epoch());
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
        let wait = (soonest - now_epoch()).max(0.0);
        Some(Instant::now() + Duration::from_secs_f64(wait.min(86_400.0)))
    }

    async fn reader_gone(&self) {
        self.events_tx.closed().await;
    }
}

/// The in-process counterpart of [`Follower`]: every snapshot the channel
/// shows is applied (a channel never stalls, so there is nothing to check).
async fn follow_local(mut snapshots: Option<watch::Receiver<LocalSnapshot>>, mut live: Live) {
    if snapshots.is_none() {
        warn!("no in-process discovery service for this project: the watch reports nothing");
    }
    let mut revision = 0;
    loop {
        if let Some(rx) = snapshots.as_mut() {
            let snapshot = rx.borrow_and_update().clone();
            if snapshot.revision > revision {
                revision = snapshot.revision;
                match pb::RegistryState::decode(snapshot.bytes.as_ref()) {
                    Ok(state) => {
                        if !live.apply(state).await {
                            return;
                        }
                    }
                    Err(err) => warn!(error = %err, "undecodable registry snapshot skipped"),
                }
            }
        }
        let next_expiry = live.next_expiry();
        tokio::select! {
            open = next_change(&mut snapshots) => {
                if !open {
                    // The service stopped: only expiries are left to report.
                    snapshots = None;
                }
            }
            () = sleep_until_opt(next_expiry) => {
                if !live.expire().await {
                    return;
                }
            }
            () = live.reader_gone() => return,
        }
    }
}

/// Waits for the next snapshot; false once the sender is gone. Never
/// returns without a channel.
async fn next_change(snapshots: &mut Option<watch::Receiver<LocalSnapshot>>) -> bool {
    match snapshots {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

/// The background task: follows the key and keeps the last live set.
struct Follower {
    js: async_nats::jetstream::Context,
    bucket: String,
    options: WatchOptions,
    live: Live,
    /// The last revision applied (0: none yet).
    revision: u64,
}

/// Why following stopped: reopen, or the reader is gone.
enum Stop {
    Reopen,
    ReaderGone,
}

impl Follower {
    async fn run(mut self) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match self.follow(&mut backoff).await {
                Stop::ReaderGone => return,
                Stop::Reopen => {}
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.live.reader_gone() => return,
            }
            backoff = (backoff * 2).min(self.options.max_backoff);
        }
    }

    /// Opens a watcher and follows it until it fails, stalls or the reader leaves.
    async fn follow(&mut self, backoff: &mut Duration) -> Stop {
        let store = match tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.js.get_key_value(self.bucket.clone()),
        )
        .await
        {
            Ok(Ok(store)) => store,
            Ok(Err(err)) => {
                debug!(bucket = %self.bucket, error = %err, "registry bucket not available yet");
                return self.expire_now().await;
            }
            Err(_) => return self.expire_now().await,
        };
        let opened = if self.revision == 0 {
            tokio::time::timeout(
                REQUEST_TIMEOUT,
                store.watch_with_history(subjects::REGISTRY_KEY),
            )
            .await
        } else {
            tokio::time::timeout(
                REQUEST_TIMEOUT,
                store.watch_from_revision(subjects::REGISTRY_KEY, self.revision + 1),
            )
            .await
        };
        let mut watcher = match opened {
            Ok(Ok(watcher)) => watcher,
            Ok(Err(err)) => {
                warn!(bucket = %self.bucket, error = %err, "cannot open the registry watcher");
                return self.expire_now().await;
            }
            Err(_) => return self.expire_now().await,
        };
        *backoff = FIRST_BACKOFF;
        let mut check = tokio::time::interval_at(
            Instant::now() + self.options.check_interval,
            self.options.check_interval,
        );
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The revision the watcher was at when a newer one was first seen in the key.
        let mut behind_since: Option<u64> = None;
        loop {
            let next_expiry = self.live.next_expiry();
            tokio::select! {
                entry = watcher.next() => match entry {
                    Some(Ok(entry)) => {
                        if !self.apply_entry(&entry).await {
                            return Stop::ReaderGone;
                        }
                    }
                    Some(Err(err)) => {
                        warn!(bucket = %self.bucket, error = %err, "registry watcher failed; reopening");
                        return Stop::Reopen;
                    }
                    None => return Stop::Reopen,
                },
                () = sleep_until_opt(next_expiry) => {
                    if !self.live.expire().await {
                        return Stop::ReaderGone;
                    }
                }
                _ = check.tick() => {
                    match self.check(&store, &mut behind_since).await {
                        Some(stop) => return stop,
                        None => continue,
                    }
                }
                () = self.live.reader_gone() => return Stop::ReaderGone,
            }
        }
    }

    /// Compares the key with what the watcher delivered. Returns a reason to
    /// stop following when the watcher stalled.
    async fn check(&mut self, store: &Store, behind_since: &mut Option<u64>) -> Option<Stop> {
        let entry = match tokio::time::timeout(REQUEST_TIMEOUT, store.entry(subjects::REGISTRY_KEY))
            .await
        {
            Ok(Ok(entry)) => entry,
            // The server is unreachable: the watcher cannot be blamed yet.
            Ok(Err(_)) | Err(_) => return None,
        };
        let entry = entry?;
        if !watcher_stalled(entry.revision, self.revision, behind_since) {
            return None;
        }
        warn!(bucket = %self.bucket, revision = entry.revision, "registry watcher stalled; reopening");
        if !self.apply_entry(&entry).await {
            return Some(Stop::ReaderGone);
        }
        Some(Stop::Reopen)
    }

    /// Applies one KV entry. Returns false when the reader is gone.
    async fn apply_entry(&mut self, entry: &Entry) -> bool {
        if entry.revision <= self.revision {
            return true;
        }
        self.revision = entry.revision;
        let state = match entry.operation {
            Operation::Put => match pb::RegistryState::decode(entry.value.as_ref()) {
                Ok(state) => state,
                Err(err) => {
                    warn!(bucket = %self.bucket, error = %err, "undecodable registry snapshot skipped");
                    return true;
                }
            },
            Operation::Delete | Operation::Purge => pb::RegistryState::default(),
        };
        self.live.apply(state).await
    }

    /// Reports expiries while the key cannot be followed, then asks to reopen.
    async fn expire_now(&mut self) -> Stop {
        if self.live.expire().await {
            Stop::Reopen
        } else {
            Stop::ReaderGone
        }
    }
}

/// Whether a check finds the watcher stalled: the key (at `key_revision`)
/// is newer than the last revision `applied`, and was already newer at the
/// previous check with nothing delivered since. `behind_since` carries the
/// applied revision at which the key was first seen ahead.
fn watcher_stalled(key_revision: u64, applied: u64, behind_since: &mut Option<u64>) -> bool {
    if key_revision <= applied {
        *behind_since = None;
        return false;
    }
    if *behind_since != Some(applied) {
        // Newer in the key than delivered: give the watcher one interval.
        *behind_since = Some(applied);
        return false;
    }
    true
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn now_epoch() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Replaces `live` with the live instances of `state` and returns the events.
pub(crate) fn diff(
    live: &mut HashMap<String, pb::Instance>,
    state: pb::RegistryState,
    now: f64,
) -> Vec<RegistryEvent> {
    let mut next: HashMap<String, pb::Instance> = HashMap::new();
    let mut events = Vec::new();
    for record in state.records {
        let Some(instance) = record.instance else {
            continue;
        };
        if instance.expires_at <= now {
            continue;
        }
        match live.get(&instance.instance_id) {
            None => events.push(RegistryEvent::Registered(instance.clone())),
            Some(before) if before.status != instance.status => {
                events.push(RegistryEvent::StatusChanged {
                    instance: instance.clone(),
                    previous: Status::parse(&before.status),
                })
            }
            Some(_) => {}
        }
        next.insert(instance.instance_id.clone(), instance);
    }
    let mut left: Vec<_> = live
        .drain()
        .filter(|(id, _)| !next.contains_key(id))
        .map(|(_, i)| i)
        .collect();
    left.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    for instance in left {
        events.push(if instance.expires_at <= now {
            RegistryEvent::Expired(instance)
        } else {
            RegistryEvent::Gone(instance)
        });
    }
    *live = next;
    events
}

/// Removes instances whose lease passed by `now` and returns their events.
pub(crate) fn expire(live: &mut HashMap<String, pb::Instance>, now: f64) -> Vec<RegistryEvent> {
    let mut gone: Vec<_> = live
        .values()
        .filter(|i| i.expires_at <= now)
        .cloned()
        .collect();
    gone.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    for instance in &gone {
        live.remove(&instance.instance_id);
    }
    gone.into_iter().map(RegistryEvent::Expired).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, status: &str, expires_at: f64) -> pb::RegistryRecord {
        pb::RegistryRecord {
            instance: Some(pb::Instance {
                instance_id: id.into(),
                status: status.into(),
                expires_at,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ids(events: &[RegistryEvent]) -> Vec<(String, &'static str)> {
        events
            .iter()
            .map(|e| {
                let tag = match e {
                    RegistryEvent::Registered(_) => "registered",
                    RegistryEvent::StatusChanged { .. } => "status",
                    RegistryEvent::Gone(_) => "gone",
                    RegistryEvent::Expired(_) => "expired",
                };
                (e.instance().instance_id.clone(), tag)
            })
            .collect()
    }

    #[test]
    fn successive_snapshots_become_events() {
        let mut live = HashMap::new();
        let first = pb::RegistryState {
            records: vec![
                record("a", "STARTING", 100.0),
                record("b", "READY", 100.0),
                record("old", "READY", 5.0),
            ],
        };
        let events = diff(&mut live, first, 10.0);
        assert_eq!(
            ids(&events),
            vec![("a".into(), "registered"), ("b".into(), "registered")]
        );

        let second = pb::RegistryState {
            records: vec![record("a", "READY", 100.0)],
        };
        let events = diff(&mut live, second, 20.0);
        assert_eq!(
            ids(&events),
            vec![("a".into(), "status"), ("b".into(), "gone")]
        );
        assert!(matches!(
            &events[0],
            RegistryEvent::StatusChanged {
                previous: Status::Starting,
                ..
            }
        ));

        let third = pb::RegistryState {
            records: vec![record("a", "READY", 100.0)],
        };
        assert!(diff(&mut live, third, 30.0).is_empty());
        assert_eq!(
            ids(&expire(&mut live, 100.0)),
            vec![("a".into(), "expired")]
        );
        assert!(live.is_empty());
    }

    /// Runs checks, one per interval, against a key and a watcher described by
    /// `key_at(tick)` and `delivered_at(tick)`; returns the first tick at which
    /// the watch gives up on the watcher and applies the key itself.
    fn first_stall(key_at: impl Fn(u32) -> u64, delivered_at: impl Fn(u32) -> u64) -> Option<u32> {
        let mut behind_since = None;
        (1..=20).find(|&tick| watcher_stalled(key_at(tick), delivered_at(tick), &mut behind_since))
    }

    #[test]
    fn a_stalled_watcher_is_overtaken_by_the_key_within_two_checks() {
        // The key moves from 3 to 5 just before check 4; the watcher stays at 3.
        let key = |tick| if tick >= 4 { 5 } else { 3 };
        assert_eq!(first_stall(key, |_| 3), Some(5));
        // Moved on just after check 4: seen at 5, applied at 6, so the change
        // is reported between one and two check intervals after the write.
        let key = |tick| if tick >= 5 { 5 } else { 3 };
        assert_eq!(first_stall(key, |_| 3), Some(6));
    }

    #[test]
    fn a_watcher_that_delivers_is_never_reopened() {
        // In step all along.
        assert_eq!(first_stall(u64::from, u64::from), None);
        // One interval late at every check, but moving: not a stall.
        assert_eq!(first_stall(|t| u64::from(t) + 1, u64::from), None);
        // Catches up after lagging one check.
        let delivered = |tick| if tick == 4 { 3 } else { 5 };
        assert_eq!(first_stall(|t| if t >= 4 { 5 } else { 3 }, delivered), None);
        // Moving, then stuck at 7 while the key is at 9.
        let delivered = |tick: u32| u64::from(tick.min(7));
        assert_eq!(first_stall(|t| u64::from(t.min(7)) + 2, delivered), Some(8));
    }

    #[test]
    fn a_key_behind_what_was_applied_resets_the_stall_detection() {
        let mut behind_since = None;
        assert!(!watcher_stalled(5, 3, &mut behind_since));
        // The key read back older (e.g. another server): forget the suspicion.
        assert!(!watcher_stalled(3, 3, &mut behind_since));
        assert_eq!(behind_since, None);
        assert!(!watcher_stalled(5, 3, &mut behind_since));
        assert!(watcher_stalled(5, 3, &mut behind_since));
    }
}
