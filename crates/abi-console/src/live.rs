//! The tasks that follow a project for the console: the registry's KV key
//! (every write, and every lease that runs out between writes), the jobs'
//! trigger and completion subjects, the chat and agent submit subjects.
//! What they learn is kept for new pages (the modules view, chat counts)
//! and pushed to open pages as [`Event`]s.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_registry::pb;
use abi_sdk::DiscoveryClient;
use abi_wire::discovery::{REGISTRY_KEY, registry_bucket};
use async_nats::jetstream;
use futures::StreamExt as _;
use prost::Message as _;
use serde::Serialize;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::ConsoleError;
use crate::model::modules::ModulesView;
use crate::reads::now_epoch;

/// How often the view is rebuilt between writes: leases run out without
/// any write, and an instance whose lease ended leaves the view.
const EXPIRY_CHECK: Duration = Duration::from_secs(1);
/// How long to wait before watching again when the bucket is missing or
/// the watch ended.
const REWATCH: Duration = Duration::from_secs(1);
/// A view whose only news are renewals is pushed this often, so the leases
/// pages count down stay near the truth without a push per renewal.
const LEASE_REFRESH: Duration = Duration::from_secs(5);
/// Run and agent notices are gathered this long before they are pushed:
/// a busy job sends one event per window, not one per run.
const NOTICE_WINDOW: Duration = Duration::from_millis(250);
/// Events a slow page may fall behind by before it misses some (it reloads
/// what it shows then).
const EVENT_BUFFER: usize = 256;
/// Chats are counted over this window.
const CHAT_WINDOW: Duration = Duration::from_secs(15 * 60);

/// What kind of news an [`Event`] carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The modules view changed (data: the whole view).
    Modules,
    /// Runs of some jobs were queued or ended (data: the jobs).
    Runs,
    /// Chats were counted (data: the counts).
    Chats,
    /// Agent runs were submitted (data: the modules).
    Agents,
}

impl EventKind {
    /// The event's name on the stream.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Modules => "modules",
            Self::Runs => "runs",
            Self::Chats => "chats",
            Self::Agents => "agents",
        }
    }
}

/// One piece of news for open pages.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its kind.
    pub kind: EventKind,
    /// Its JSON.
    pub data: Arc<str>,
}

/// The registry as last read.
#[derive(Debug, Default)]
pub struct Registry {
    /// The live records, statuses computed.
    pub live: pb::RegistryState,
    /// What the modules page shows.
    pub view: ModulesView,
    /// The view as JSON.
    pub json: Arc<str>,
}

/// What the console follows.
#[derive(Debug, Clone)]
pub struct Live {
    registry: watch::Receiver<Arc<Registry>>,
    events: broadcast::Sender<Event>,
    chats: Arc<Mutex<ChatCounts>>,
}

impl Live {
    /// Starts the tasks on `tasks`; they end when `stop` is cancelled.
    ///
    /// # Errors
    ///
    /// No NATS connection. A subscription the broker refuses is logged and
    /// left out (that part of the console stays empty).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the tasks already spawned stop with `stop`.
    pub async fn start(
        client: &DiscoveryClient,
        tasks: &TaskTracker,
        stop: CancellationToken,
    ) -> Result<Self, ConsoleError> {
        let nats = client.nats().cloned().ok_or(ConsoleError::NoConnection)?;
        let project = client.project().to_owned();
        let empty = Registry {
            json: to_json(&ModulesView::default()),
            ..Registry::default()
        };
        let (registry_tx, registry) = watch::channel(Arc::new(empty));
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let chats = Arc::new(Mutex::new(ChatCounts::default()));
        tasks.spawn(follow_registry(
            jetstream::new(nats.clone()),
            project.clone(),
            registry_tx,
            events.clone(),
            stop.clone(),
        ));
        let notices = Notices {
            nats: nats.clone(),
            project: project.clone(),
            registry: registry.clone(),
            events: events.clone(),
        };
        for subject in [
            abi_wire::jobs::all_triggers(&project),
            abi_wire::jobs::all_done(&project),
        ] {
            if let Some(subscriber) = subscribe(&nats, &subject).await {
                tasks.spawn(notices.clone().follow_runs(subscriber, stop.clone()));
            }
        }
        if let Some(subscriber) = subscribe(&nats, &abi_wire::agents::all_submits(&project)).await {
            tasks.spawn(notices.clone().follow_agents(subscriber, stop.clone()));
        }
        if let Some(subscriber) = subscribe(&nats, &abi_wire::models::all_chats(&project)).await {
            tasks.spawn(notices.follow_chats(subscriber, chats.clone(), stop));
        }
        Ok(Self {
            registry,
            events,
            chats,
        })
    }

    /// The registry as last read.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.borrow().clone()
    }

    /// News from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Chats counted per model and replica.
    pub fn chats(&self) -> Vec<ChatCount> {
        let registry = self.registry();
        let mut counts = self.chats.lock().unwrap_or_else(|e| e.into_inner());
        counts.snapshot(Instant::now(), &registry.live)
    }
}

async fn subscribe(nats: &async_nats::Client, subject: &str) -> Option<async_nats::Subscriber> {
    match nats.subscribe(subject.to_owned()).await {
        Ok(subscriber) => Some(subscriber),
        Err(error) => {
            warn!(%subject, %error, "the console cannot follow this subject");
            None
        }
    }
}

fn to_json<T: Serialize>(value: &T) -> Arc<str> {
    serde_json::to_string(value)
        .unwrap_or_else(|_| "null".to_owned())
        .into()
}

/// What a page shows that a renewal does not change: the view without its
/// revision, time of reading, leases left and ages (pages count those down
/// themselves, and get them afresh every [`LEASE_REFRESH`]).
fn stable(view: &ModulesView) -> ModulesView {
    let mut stable = view.clone();
    stable.revision = 0;
    stable.read_at = 0.0;
    for instance in stable.modules.iter_mut().flat_map(|m| &mut m.instances) {
        instance.lease_left_secs = 0.0;
        instance.up_secs = 0.0;
    }
    stable
}

/// Whether a lease in `state` ran out by `now` (the view drops it).
fn any_expired(state: &pb::RegistryState, now: f64) -> bool {
    state
        .records
        .iter()
        .filter_map(|r| r.instance.as_ref())
        .any(|i| i.expires_at <= now)
}

/// Follows the registry key until `stop`: each write, and each second in
/// between for leases that ran out.
async fn follow_registry(
    js: jetstream::Context,
    project: String,
    registry: watch::Sender<Arc<Registry>>,
    events: broadcast::Sender<Event>,
    stop: CancellationToken,
) {
    let bucket = registry_bucket(&project);
    let mut stored = (pb::RegistryState::default(), 0u64);
    let mut shown: Option<ModulesView> = None;
    let mut pushed_at = Instant::now();
    // Builds the view; pushes it when what it shows changed, and otherwise
    // (renewals only) at most every LEASE_REFRESH. Between writes (`on_tick`)
    // the view changes only when a lease ran out, or for that refresh.
    let mut publish = |state: &pb::RegistryState, revision: u64, on_tick: bool| {
        let now = now_epoch();
        if on_tick && !any_expired(state, now) && pushed_at.elapsed() < LEASE_REFRESH {
            return;
        }
        let live = abi_registry::view(state, now);
        let view = ModulesView::build(&live, revision, now);
        let steady = stable(&view);
        let changed = shown.as_ref() != Some(&steady);
        if !changed && pushed_at.elapsed() < LEASE_REFRESH {
            return;
        }
        shown = Some(steady);
        pushed_at = Instant::now();
        let json = to_json(&view);
        let _ = events.send(Event {
            kind: EventKind::Modules,
            data: json.clone(),
        });
        registry.send_replace(Arc::new(Registry { live, view, json }));
    };
    publish(&stored.0, 0, false);
    while !stop.is_cancelled() {
        let watch = match js.get_key_value(bucket.clone()).await {
            Ok(store) => store.watch_with_history(REGISTRY_KEY).await.ok(),
            Err(error) => {
                debug!(%bucket, %error, "no registry bucket yet");
                None
            }
        };
        let Some(mut watch) = watch else {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(REWATCH) => continue,
            }
        };
        let mut tick = tokio::time::interval(EXPIRY_CHECK);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => publish(&stored.0, stored.1, true),
                entry = watch.next() => {
                    let Some(Ok(entry)) = entry else { break };
                    match pb::RegistryState::decode(entry.value.as_ref()) {
                        Ok(state) => {
                            stored = (state, entry.revision);
                            publish(&stored.0, stored.1, false);
                        }
                        Err(error) => warn!(%error, "a registry snapshot that does not decode"),
                    }
                }
            }
        }
    }
}

/// What the notice tasks share.
#[derive(Clone)]
struct Notices {
    nats: async_nats::Client,
    project: String,
    registry: watch::Receiver<Arc<Registry>>,
    events: broadcast::Sender<Event>,
}

/// A job whose runs changed, as the runs event names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
struct JobRef {
    module_id: String,
    job: String,
}

impl Notices {
    /// Which declared job a (module hash, job hash) pair is.
    fn job_names(&self) -> HashMap<(String, String), JobRef> {
        let registry = self.registry.borrow().clone();
        let mut names = HashMap::new();
        for instance in registry
            .live
            .records
            .iter()
            .filter_map(|r| r.instance.as_ref())
        {
            let module_id = abi_registry::overview::module_of(instance);
            for job in instance.descriptor.iter().flat_map(|d| &d.jobs) {
                let subjects =
                    abi_wire::jobs::JobSubjects::new(&self.project, module_id, &job.name);
                let (mh, jh) = subjects.hashes();
                names.insert(
                    (mh.to_owned(), jh.to_owned()),
                    JobRef {
                        module_id: module_id.to_owned(),
                        job: job.name.clone(),
                    },
                );
            }
        }
        names
    }

    /// Gathers the jobs whose runs were queued or ended, and pushes them
    /// once per window.
    async fn follow_runs(self, mut subscriber: async_nats::Subscriber, stop: CancellationToken) {
        let mut changed: Vec<JobRef> = Vec::new();
        let mut names = self.job_names();
        let mut flush = tokio::time::interval(NOTICE_WINDOW);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = flush.tick() => self.push_gathered(EventKind::Runs, &mut changed),
                message = subscriber.next() => {
                    let Some(message) = message else { break };
                    let Some((mh, jh)) = abi_wire::jobs::subject_hashes(&self.project, &message.subject) else {
                        continue;
                    };
                    let key = (mh.to_owned(), jh.to_owned());
                    if !names.contains_key(&key) {
                        names = self.job_names();
                    }
                    if let Some(job) = names.get(&key) {
                        changed.push(job.clone());
                    }
                }
            }
        }
        let _ = subscriber.unsubscribe().await;
    }

    /// Pushes the modules whose agents were sent a submit, once per window.
    async fn follow_agents(self, mut subscriber: async_nats::Subscriber, stop: CancellationToken) {
        let mut changed: Vec<String> = Vec::new();
        let mut flush = tokio::time::interval(NOTICE_WINDOW);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = flush.tick() => self.push_gathered(EventKind::Agents, &mut changed),
                message = subscriber.next() => {
                    let Some(message) = message else { break };
                    let Some(instance) = abi_wire::agents::instance_of_subject(&self.project, &message.subject) else {
                        continue;
                    };
                    if let Some(module) = self.module_of_instance(instance) {
                        changed.push(module);
                    }
                }
            }
        }
        let _ = subscriber.unsubscribe().await;
    }

    /// Counts chats per model and replica, and pushes the counts once per
    /// second while chats come.
    async fn follow_chats(
        self,
        mut subscriber: async_nats::Subscriber,
        counts: Arc<Mutex<ChatCounts>>,
        stop: CancellationToken,
    ) {
        let mut dirty = false;
        let mut flush = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = flush.tick() => {
                    if dirty {
                        dirty = false;
                        let registry = self.registry.borrow().clone();
                        let snapshot = counts
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .snapshot(Instant::now(), &registry.live);
                        let _ = self.events.send(Event { kind: EventKind::Chats, data: to_json(&snapshot) });
                    }
                }
                message = subscriber.next() => {
                    let Some(message) = message else { break };
                    if let Some((instance, model)) = abi_wire::models::parse_chat_subject(&self.project, &message.subject) {
                        counts
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .count(instance, model, Instant::now());
                        dirty = true;
                    }
                }
            }
        }
        let _ = subscriber.unsubscribe().await;
        drop(self.nats);
    }

    /// Pushes what a window gathered, each thing once, and starts the next.
    fn push_gathered<T: Serialize + Ord>(&self, kind: EventKind, gathered: &mut Vec<T>) {
        if gathered.is_empty() {
            return;
        }
        gathered.sort();
        gathered.dedup();
        let _ = self.events.send(Event {
            kind,
            data: to_json(gathered),
        });
        gathered.clear();
    }

    fn module_of_instance(&self, instance_id: &str) -> Option<String> {
        let registry = self.registry.borrow();
        registry
            .live
            .records
            .iter()
            .filter_map(|r| r.instance.as_ref())
            .find(|i| i.instance_id == instance_id)
            .map(|i| abi_registry::overview::module_of(i).to_owned())
    }
}

/// Chats seen per (instance, model), each with when it was seen.
#[derive(Debug, Default)]
pub struct ChatCounts {
    seen: HashMap<(String, String), (u64, VecDeque<Instant>)>,
}

/// The chats of one model on one replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatCount {
    /// The replica's module.
    pub module_id: String,
    /// The replica.
    pub instance_id: String,
    /// The model.
    pub model: String,
    /// Chats in the last minute.
    pub last_minute: usize,
    /// Chats in the last 15 minutes.
    pub last_15_minutes: usize,
    /// Chats since the console started.
    pub total: u64,
}

impl ChatCounts {
    /// Counts one chat of `model` on `instance` at `now`.
    pub fn count(&mut self, instance: &str, model: &str, now: Instant) {
        let (total, times) = self
            .seen
            .entry((instance.to_owned(), model.to_owned()))
            .or_default();
        *total += 1;
        times.push_back(now);
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) > CHAT_WINDOW)
        {
            times.pop_front();
        }
    }

    /// The counts at `now`, the module of each replica from `live`, busiest
    /// first.
    pub fn snapshot(&mut self, now: Instant, live: &pb::RegistryState) -> Vec<ChatCount> {
        let modules: HashMap<&str, &str> = live
            .records
            .iter()
            .filter_map(|r| r.instance.as_ref())
            .map(|i| (i.instance_id.as_str(), abi_registry::overview::module_of(i)))
            .collect();
        let mut out: Vec<ChatCount> = self
            .seen
            .iter_mut()
            .map(|((instance, model), (total, times))| {
                while times
                    .front()
                    .is_some_and(|t| now.duration_since(*t) > CHAT_WINDOW)
                {
                    times.pop_front();
                }
                let minute = Duration::from_secs(60);
                ChatCount {
                    module_id: modules
                        .get(instance.as_str())
                        .map_or_else(String::new, |m| (*m).to_owned()),
                    instance_id: instance.clone(),
                    model: model.clone(),
                    last_minute: times
                        .iter()
                        .filter(|t| now.duration_since(**t) <= minute)
                        .count(),
                    last_15_minutes: times.len(),
                    total: *total,
                }
            })
            .collect();
        out.sort_by(|a, b| {
            (b.last_15_minutes, &a.model, &a.instance_id).cmp(&(
                a.last_15_minutes,
                &b.model,
                &b.instance_id,
            ))
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::modules::{InstanceRow, ModuleRow};

    #[test]
    fn a_renewal_is_no_news_and_a_status_change_is() {
        let view = |revision: u64, lease: f64, status: &str| ModulesView {
            revision,
            read_at: revision as f64,
            modules: vec![ModuleRow {
                module_id: "m".into(),
                instances: vec![InstanceRow {
                    instance_id: "i".into(),
                    status: status.into(),
                    lease_left_secs: lease,
                    up_secs: lease * 2.0,
                    ..InstanceRow::default()
                }],
                ..ModuleRow::default()
            }],
            ..ModulesView::default()
        };
        let ready = abi_wire::status::READY;
        assert_eq!(stable(&view(1, 20.0, ready)), stable(&view(2, 19.0, ready)));
        assert_ne!(
            stable(&view(1, 20.0, ready)),
            stable(&view(2, 20.0, abi_wire::status::DRAINING))
        );
        let mut state = pb::RegistryState::default();
        state.records.push(pb::RegistryRecord {
            instance: Some(pb::Instance {
                expires_at: 10.0,
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(!any_expired(&state, 9.0));
        assert!(any_expired(&state, 10.0));
    }

    #[test]
    fn chats_are_counted_per_model_and_replica_over_their_windows() {
        let t0 = Instant::now();
        let mut counts = ChatCounts::default();
        counts.count("i-1", "echo", t0);
        counts.count("i-1", "echo", t0 + Duration::from_secs(100));
        counts.count("i-2", "echo", t0 + Duration::from_secs(100));
        let later = t0 + Duration::from_secs(130);
        let snapshot = counts.snapshot(later, &pb::RegistryState::default());
        let rows: Vec<(&str, usize, usize, u64)> = snapshot
            .iter()
            .map(|c| {
                (
                    c.instance_id.as_str(),
                    c.last_minute,
                    c.last_15_minutes,
                    c.total,
                )
            })
            .collect();
        assert_eq!(rows, [("i-1", 1, 2, 2), ("i-2", 1, 1, 1)]);
        let much_later = t0 + CHAT_WINDOW + Duration::from_secs(101);
        let snapshot = counts.snapshot(much_later, &pb::RegistryState::default());
        assert!(snapshot.iter().all(|c| c.last_15_minutes == 0));
        assert_eq!(snapshot.iter().map(|c| c.total).sum::<u64>(), 3);
    }
}
