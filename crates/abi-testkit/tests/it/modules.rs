//! Modules run against the in-process registry: the runner's order, drain,
//! lease loss, outages and rollouts, all without NATS.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi_sdk::{
    Context, DiscoveryConfig, HookResult, Module, ModuleSpec, RegistryEvent, RunErrorKind, Status,
};
use abi_testkit::{Ended, TestRegistry};
use futures::StreamExt;
use tokio::sync::{Notify, mpsc};

/// Every wait in these tests is bounded by this.
const DEADLINE: Duration = Duration::from_secs(20);

/// A module that reports its hooks as `"<name> <hook>"` lines and hands its
/// context to the test.
#[derive(Clone)]
struct Probe {
    name: &'static str,
    events: mpsc::UnboundedSender<String>,
    cx: Arc<Mutex<Option<Context>>>,
    fail_initialized: bool,
    /// When set, `run` holds a work guard until notified.
    work: Option<Arc<Notify>>,
}

impl Probe {
    fn new(name: &'static str, events: &mpsc::UnboundedSender<String>) -> Self {
        Self {
            name,
            events: events.clone(),
            cx: Arc::default(),
            fail_initialized: false,
            work: None,
        }
    }

    fn say(&self, what: impl std::fmt::Display) {
        let _ = self.events.send(format!("{} {what}", self.name));
    }

    fn context(&self) -> Context {
        self.cx
            .lock()
            .unwrap()
            .clone()
            .expect("the module has loaded")
    }
}

impl Module for Probe {
    async fn on_load(&self, cx: &Context) -> HookResult {
        *self.cx.lock().unwrap() = Some(cx.clone());
        self.say("on_load");
        Ok(())
    }

    async fn on_initialized(&self, cx: &Context) -> HookResult {
        if self.fail_initialized {
            return Err("on_initialized refused".into());
        }
        for dependency in cx.modules().all() {
            let ready = dependency.ready_instances().await?;
            self.say(format!(
                "sees {} ready={}",
                dependency.module_id(),
                ready.len()
            ));
        }
        self.say("on_initialized");
        Ok(())
    }

    async fn on_unloaded(&self, _cx: &Context) -> HookResult {
        self.say("on_unloaded");
        Ok(())
    }

    async fn run(&self, cx: Context) -> HookResult {
        if let Some(release) = &self.work {
            let guard = cx.begin_work().expect("not stopping yet");
            self.say("work started");
            let release = release.clone();
            let events = self.events.clone();
            let name = self.name;
            tokio::spawn(async move {
                release.notified().await;
                let _ = events.send(format!("{name} work done"));
                drop(guard);
            });
        }
        cx.stopping().cancelled().await;
        Ok(())
    }
}

/// Waits for the next line that starts with `prefix` and returns it.
async fn expect(events: &mut mpsc::UnboundedReceiver<String>, prefix: &str) -> String {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let line = events.recv().await.expect("events open");
            if line.starts_with(prefix) {
                return line;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {prefix:?} in time"))
}

/// Waits until `cx`'s session reports `status`.
async fn session_status(cx: &Context, status: Status) {
    let mut changes = cx.session().expect("registered").status_changes();
    tokio::time::timeout(DEADLINE, changes.wait_for(|s| *s == status))
        .await
        .unwrap_or_else(|_| panic!("the session never reported {status}"))
        .unwrap();
}

/// The stored hash of `instance_id`'s lease token.
fn lease_hash(registry: &TestRegistry, instance_id: &str) -> String {
    registry
        .snapshot()
        .1
        .records
        .into_iter()
        .find(|r| {
            r.instance
                .as_ref()
                .is_some_and(|i| i.instance_id == instance_id)
        })
        .map(|r| r.lease_hash)
        .expect("stored")
}

async fn next_event(watch: &mut abi_sdk::RegistryWatch) -> RegistryEvent {
    tokio::time::timeout(DEADLINE, watch.next())
        .await
        .expect("an event in time")
        .expect("the watch never ends")
}

#[tokio::test]
async fn a_dependent_initializes_only_once_its_dependency_is_ready() {
    let registry = TestRegistry::new();
    let (tx, mut events) = mpsc::unbounded_channel();
    let consumer = registry.start_module(
        ModuleSpec::new("consumer").dependency("provider", 1),
        Probe::new("consumer", &tx),
    );
    expect(&mut events, "consumer on_load").await;
    registry
        .wait_for_status("consumer", Status::Starting)
        .await
        .unwrap();

    let provider = registry.start_module(ModuleSpec::new("provider"), Probe::new("provider", &tx));
    expect(&mut events, "provider on_initialized").await;
    // The consumer's dependency was READY when its hook ran.
    assert_eq!(
        expect(&mut events, "consumer sees").await,
        "consumer sees provider ready=1"
    );
    expect(&mut events, "consumer on_initialized").await;
    registry
        .wait_for_status("consumer", Status::Ready)
        .await
        .unwrap();

    consumer.stop().await.unwrap();
    registry.wait_gone("consumer").await.unwrap();
    provider.stop().await.unwrap();
    registry.wait_gone("provider").await.unwrap();
}

#[tokio::test]
async fn a_missing_dependency_ends_startup_with_dependency_timeout() {
    let registry = TestRegistry::new();
    let (tx, mut events) = mpsc::unbounded_channel();
    let spec = ModuleSpec::new("lonely").dependency("absent", 1);
    let config = registry.config("lonely").discovery(
        DiscoveryConfig::default()
            .project(registry.project())
            .startup_timeout(Duration::from_millis(300))
            .refresh_interval(Duration::from_millis(50)),
    );
    let result = registry
        .runner(spec)
        .config(config)
        .run(Probe::new("lonely", &tx))
        .await;
    let err = result.expect_err("no dependency, no start");
    assert_eq!(err.kind(), RunErrorKind::DependencyTimeout);
    assert_eq!(err.code(), Some("DEPENDENCY_TIMEOUT"));
    expect(&mut events, "lonely on_unloaded").await;
    // It registered while waiting, and unregistered on the way out.
    assert!(registry.instances("lonely").is_empty());
    assert!(registry.snapshot().0 >= 2, "register then unregister");
}

#[tokio::test]
async fn stop_drains_in_flight_work_before_unregistering() {
    let registry = TestRegistry::new();
    let (tx, mut events) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let mut probe = Probe::new("worker", &tx);
    probe.work = Some(release.clone());
    let worker = registry.start_module(ModuleSpec::new("worker"), probe);
    expect(&mut events, "worker work started").await;
    registry
        .wait_for_status("worker", Status::Ready)
        .await
        .unwrap();

    let stopping = tokio::spawn(worker.stop());
    // Others see it draining while its work runs, and it stays registered.
    let draining = registry
        .wait_for_status("worker", Status::Draining)
        .await
        .unwrap();
    assert!(!stopping.is_finished());
    assert_eq!(registry.instances("worker").len(), 1);

    release.notify_one();
    expect(&mut events, "worker work done").await;
    expect(&mut events, "worker on_unloaded").await;
    tokio::time::timeout(DEADLINE, stopping)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    registry.wait_gone("worker").await.unwrap();
    assert!(!draining.instance_id.is_empty());
}

#[tokio::test]
async fn an_evicted_instance_registers_again_under_the_same_id() {
    // A short lease: renewals every half second.
    let registry = TestRegistry::builder().lease_seconds(2.0).start().unwrap();
    let (tx, _events) = mpsc::unbounded_channel();
    let module = registry.start_module(ModuleSpec::new("evictee"), Probe::new("evictee", &tx));
    let before = registry
        .wait_for_status("evictee", Status::Ready)
        .await
        .unwrap();
    let lease_before = lease_hash(&registry, &before.instance_id);

    let evicted = registry.admin().evict(&before.instance_id).await.unwrap();
    assert_eq!(evicted.instance_id, before.instance_id);
    let revision_after_evict = registry.snapshot().0;
    let back = registry
        .wait_until(DEADLINE, |r| {
            (r.snapshot().0 > revision_after_evict)
                .then(|| r.instances("evictee"))
                .filter(|found| !found.is_empty())
        })
        .await
        .expect("registered again");
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].instance_id, before.instance_id);
    // A new lease token: the old one was revoked with the eviction.
    assert_ne!(lease_hash(&registry, &back[0].instance_id), lease_before);
    module.stop().await.unwrap();
}

#[tokio::test]
async fn a_killed_dependency_degrades_its_dependent_until_another_serves() {
    let registry = TestRegistry::builder().lease_seconds(1.0).start().unwrap();
    let (tx, mut events) = mpsc::unbounded_channel();
    let provider = registry.start_module(ModuleSpec::new("db"), Probe::new("db", &tx));
    let app = registry.start_module(
        ModuleSpec::new("app").dependency("db", 1),
        Probe::new("app", &tx),
    );
    expect(&mut events, "app on_initialized").await;
    registry
        .wait_for_status("app", Status::Ready)
        .await
        .unwrap();

    // kill -9: no unregister, the lease runs out.
    provider.kill();
    registry
        .wait_for_status("app", Status::Degraded)
        .await
        .unwrap();
    assert!(!app.is_finished(), "a degraded dependent keeps running");

    let provider = registry.start_module(ModuleSpec::new("db"), Probe::new("db2", &tx));
    registry
        .wait_for_status("app", Status::Ready)
        .await
        .unwrap();
    app.stop().await.unwrap();
    provider.stop().await.unwrap();
}

#[tokio::test]
async fn an_outage_makes_the_session_unavailable_until_the_service_answers() {
    let registry = TestRegistry::builder().lease_seconds(2.0).start().unwrap();
    let (tx, _events) = mpsc::unbounded_channel();
    let probe = Probe::new("patient", &tx);
    let module = registry.start_module(ModuleSpec::new("patient"), probe.clone());
    registry
        .wait_for_status("patient", Status::Ready)
        .await
        .unwrap();
    let cx = probe.context();
    session_status(&cx, Status::Ready).await;

    registry.pause();
    session_status(&cx, Status::Unavailable).await;
    assert_eq!(cx.status(), Status::Unavailable);
    registry.resume();
    session_status(&cx, Status::Ready).await;
    assert!(!module.is_finished());
    module.stop().await.unwrap();
}

#[tokio::test]
async fn a_failing_hook_stops_the_module_and_leaves_nothing_registered() {
    let registry = TestRegistry::new();
    let (tx, mut events) = mpsc::unbounded_channel();
    let mut probe = Probe::new("broken", &tx);
    probe.fail_initialized = true;
    let module = registry.start_module(ModuleSpec::new("broken"), probe);
    match module.finished().await {
        Err(Ended::Failed(err)) => assert_eq!(err.kind(), RunErrorKind::Initialized),
        other => panic!("expected on_initialized to fail, got {other:?}"),
    }
    expect(&mut events, "broken on_unloaded").await;
    registry.wait_gone("broken").await.unwrap();
}

#[tokio::test]
async fn the_watch_reports_arrivals_and_departures() {
    let registry = TestRegistry::new();
    let mut watch = registry.watch();
    let (tx, _events) = mpsc::unbounded_channel();
    let module = registry.start_module(ModuleSpec::new("seen"), Probe::new("seen", &tx));
    let registered = next_event(&mut watch).await;
    assert!(
        matches!(registered, RegistryEvent::Registered(_)),
        "{registered:?}"
    );
    assert_eq!(registered.module_id(), "seen");
    let id = registered.instance().instance_id.clone();
    loop {
        match next_event(&mut watch).await {
            RegistryEvent::StatusChanged { instance, .. } if instance.status == "READY" => break,
            RegistryEvent::StatusChanged { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    module.stop().await.unwrap();
    loop {
        match next_event(&mut watch).await {
            RegistryEvent::Gone(instance) => {
                assert_eq!(instance.instance_id, id);
                break;
            }
            RegistryEvent::StatusChanged { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_rollout_serves_only_once_its_cohort_is_complete() {
    let registry = TestRegistry::new();
    let (tx, mut events) = mpsc::unbounded_channel();
    let start = |module_id: &'static str, rollout: &str, name: &'static str| {
        let config = registry.config(module_id).discovery(
            DiscoveryConfig::default()
                .project(registry.project())
                .refresh_interval(Duration::from_millis(100))
                .rollout_id(rollout)
                .rollout_modules(["rx", "ry"]),
        );
        let runner = registry.runner(ModuleSpec::new(module_id)).config(config);
        abi_testkit::RunningModule::from_runner(runner, Probe::new(name, &tx))
    };
    let x1 = start("rx", "v1", "x1");
    let y1 = start("ry", "v1", "y1");
    registry.wait_for_status("rx", Status::Ready).await.unwrap();
    registry.wait_for_status("ry", Status::Ready).await.unwrap();

    // Half of v2 waits, staged; v1 keeps serving.
    let x2 = start("rx", "v2", "x2");
    expect(&mut events, "x2 on_initialized").await;
    let staged = registry
        .wait_for_status("rx", Status::Staged)
        .await
        .unwrap();
    assert_eq!(
        registry
            .instances("rx")
            .iter()
            .filter(|i| i.status == "READY")
            .count(),
        1
    );
    assert!(!x1.is_finished() && !y1.is_finished());

    // The rest of v2: it serves, and v1 drains and stops on its own.
    let y2 = start("ry", "v2", "y2");
    tokio::time::timeout(DEADLINE, x1.finished())
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(DEADLINE, y1.finished())
        .await
        .unwrap()
        .unwrap();
    let serving = registry
        .wait_until(DEADLINE, |r| {
            let x = r.instances("rx");
            let y = r.instances("ry");
            (x.len() == 1 && y.len() == 1 && x[0].status == "READY" && y[0].status == "READY")
                .then(|| x[0].instance_id.clone())
        })
        .await
        .expect("v2 serves alone");
    assert_eq!(serving, staged.instance_id);
    x2.stop().await.unwrap();
    y2.stop().await.unwrap();
}

#[tokio::test]
async fn a_module_of_another_project_finds_no_service() {
    let registry = TestRegistry::new();
    let (tx, _events) = mpsc::unbounded_channel();
    let config = registry
        .config("stray")
        .request_timeout(Duration::from_secs(1))
        .discovery(
            DiscoveryConfig::default()
                .project("elsewhere")
                .startup_timeout(Duration::from_secs(1)),
        );
    let err = registry
        .runner(ModuleSpec::new("stray"))
        .config(config)
        .run(Probe::new("stray", &tx))
        .await
        .expect_err("nobody serves that project");
    assert_eq!(err.kind(), RunErrorKind::Register);
    assert!(registry.instances("stray").is_empty());
}

/// A plain host that reports its close; `hangs` keeps the close going for good.
struct Closing {
    name: &'static str,
    events: mpsc::UnboundedSender<String>,
    hangs: bool,
}

impl abi_sdk::Host for Closing {
    fn name(&self) -> &str {
        self.name
    }

    fn close(&self, _deadline: tokio::time::Instant) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = self.events.send(format!("{} close", self.name));
            if self.hangs {
                std::future::pending::<()>().await;
            }
        })
    }
}

#[tokio::test]
async fn a_host_overrunning_its_close_leaves_time_for_the_next_host_and_on_unloaded() {
    let registry = TestRegistry::new();
    let (tx, mut events) = mpsc::unbounded_channel();
    let grace = Duration::from_secs(2);
    let config = registry.config("closer").shutdown_grace(grace);
    let host = |name, hangs| {
        Arc::new(Closing {
            name,
            events: tx.clone(),
            hangs,
        })
    };
    let runner = registry
        .runner(ModuleSpec::new("closer"))
        .config(config)
        .host(host("stuck", true))
        .host(host("quick", false));
    let module = abi_testkit::RunningModule::from_runner(runner, Probe::new("closer", &tx));
    registry
        .wait_for_status("closer", Status::Ready)
        .await
        .unwrap();

    let asked = tokio::time::Instant::now();
    tokio::time::timeout(DEADLINE, module.stop())
        .await
        .expect("the module stops")
        .unwrap();
    expect(&mut events, "stuck close").await;
    expect(&mut events, "quick close").await;
    expect(&mut events, "closer on_unloaded").await;
    // Within the budget, with room for a slow machine.
    assert!(
        asked.elapsed() < grace + Duration::from_secs(2),
        "stopped after {:?}",
        asked.elapsed()
    );
    registry.wait_gone("closer").await.unwrap();
}
