//! A module process for end-to-end tests, configured by environment
//! variables, that prints what happens to it on stdout, one `EVENT` line each.
//!
//! - `E2E_ID`: module id; `E2E_VERSION`: package version (default 1.0.0);
//! - `E2E_DEPS`: `id:major,id:major` dependencies;
//! - `E2E_JOB_HOST=1`: adds a job host that reports prepare/start/drain/close;
//! - `E2E_SERVED_HOST=1`: the spec serves a host (declaring agent `recorder`)
//!   that reports bind/start/drain/close;
//! - `E2E_FAIL`: `on_load`, `on_initialized` or `job_start` fails on purpose;
//! - `E2E_WORK_MS`: `run` starts one piece of work of that length, holding a guard;
//! - `E2E_STARTUP_MS`, `E2E_REFRESH_MS`, `E2E_NO_WATCH=1`: discovery timings;
//! - the SDK's own variables: `NATS_URL`, `ABI_PROJECT`, `ABI_MODULE_KEY`, ...
//!
//! Exit code 0 after a clean stop; 1 with `EVENT exit error <kind>` otherwise.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abi_proto::discovery::v1 as pb;
use abi_sdk::{
    BoxError, Config, Context, DiscoveryConfig, HookResult, Host, Links, Module, ModuleSpec,
    Runner, ServedHost,
};
use futures::future::BoxFuture;

fn event(what: &str) {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    println!("EVENT {what} t_us={ms}");
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

fn fails(hook: &str) -> bool {
    env("E2E_FAIL").as_deref() == Some(hook)
}

struct TestModule {
    work: Option<Duration>,
}

impl Module for TestModule {
    async fn on_load(&self, _cx: &Context) -> HookResult {
        event("on_load");
        if fails("on_load") {
            return Err("on_load failed on purpose".into());
        }
        Ok(())
    }

    async fn on_initialized(&self, cx: &Context) -> HookResult {
        let instance = cx
            .session()
            .map(|s| s.instance_id().to_owned())
            .unwrap_or_default();
        // What discovery says of the dependencies at this moment.
        let mut deps_ready = true;
        for dep in cx.modules().all() {
            deps_ready &= dep.ready_instances().await.is_ok();
        }
        event(&format!(
            "on_initialized instance={instance} deps_ready={deps_ready}"
        ));
        if fails("on_initialized") {
            return Err("on_initialized failed on purpose".into());
        }
        Ok(())
    }

    async fn on_unloaded(&self, _cx: &Context) -> HookResult {
        event("on_unloaded");
        Ok(())
    }

    async fn run(&self, cx: Context) -> HookResult {
        let status = cx.status();
        event(&format!("run status={status}"));
        if let Some(addr) = cx.health_addr() {
            event(&format!("health addr={addr}"));
        }
        if let Some(length) = self.work
            && let Some(guard) = cx.begin_work()
        {
            tokio::spawn(async move {
                event("work_started");
                tokio::time::sleep(length).await;
                event("work_finished");
                drop(guard);
            });
        }
        cx.stopping().cancelled().await;
        event("stopping");
        Ok(())
    }
}

struct JobHost;

impl Host for JobHost {
    fn name(&self) -> &str {
        "jobs"
    }

    fn prepare(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async {
            event("job_host prepare");
            Ok(())
        })
    }

    fn start(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async {
            event("job_host start");
            if fails("job_start") {
                return Err("job host start failed on purpose".into());
            }
            Ok(())
        })
    }

    fn drain(&self, _timeout: Duration) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async {
            event("job_host drain");
            Ok(())
        })
    }

    fn close(&self, _deadline: tokio::time::Instant) -> BoxFuture<'_, ()> {
        Box::pin(async { event("job_host close") })
    }
}

/// A host the spec carries: declares one agent, reports each step.
struct Recorder;

impl Host for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn start(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async {
            event("served_host start");
            Ok(())
        })
    }

    fn drain(&self, _timeout: Duration) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async {
            event("served_host drain");
            Ok(())
        })
    }

    fn close(&self, _deadline: tokio::time::Instant) -> BoxFuture<'_, ()> {
        Box::pin(async { event("served_host close") })
    }
}

impl ServedHost for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn declare(&self, descriptor: &mut pb::ModuleDescriptor) {
        descriptor.agents.push(pb::AgentDescriptor {
            name: "recorder".into(),
            description: "declared by the served host".into(),
            contract_major: 1,
            capabilities: vec!["agent.invoke.v1".into()],
        });
    }

    fn bind(&self, links: &Links) -> Arc<dyn Host> {
        event(&format!(
            "served_host bind instance={}",
            links.instance_id()
        ));
        Arc::new(Recorder)
    }
}

fn millis(key: &str) -> Option<Duration> {
    env(key)
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
}

#[tokio::main]
async fn main() {
    // The test harness reads stdout; logs (ABI_LOG, off by default) go to stderr.
    let _ = abi_process::logs::init("off");
    let id = env("E2E_ID").unwrap_or_else(|| "e2e".into());
    let mut spec =
        ModuleSpec::new(&id).package_version(env("E2E_VERSION").unwrap_or_else(|| "1.0.0".into()));
    for dep in env("E2E_DEPS").unwrap_or_default().split(',') {
        if let Some((dep_id, major)) = dep.split_once(':') {
            spec = spec.dependency(dep_id, major.parse().unwrap_or(1));
        }
    }
    if env("E2E_SERVED_HOST").is_some() {
        spec = spec.serve(Arc::new(Recorder));
    }
    let mut config = match Config::from_env(&id) {
        Ok(config) => config,
        Err(err) => {
            // The whole chain: the error, then each cause.
            event(&format!(
                "exit error {:?} {}",
                err.kind(),
                abi_process::error_chain(&err)
            ));
            std::process::exit(1);
        }
    };
    if let Some(project) = env("ABI_PROJECT") {
        let mut discovery = DiscoveryConfig::default()
            .project(project)
            .watch(env("E2E_NO_WATCH").is_none());
        if let Some(startup) = millis("E2E_STARTUP_MS") {
            discovery = discovery.startup_timeout(startup);
        }
        if let Some(refresh) = millis("E2E_REFRESH_MS") {
            discovery = discovery.refresh_interval(refresh);
        }
        config = config.discovery(discovery);
    }
    if let Some(attempts) = env("E2E_MAX_RECONNECTS").and_then(|v| v.parse().ok()) {
        config = config.max_reconnects(Some(attempts));
    }
    if let Some(drain) = millis("E2E_DRAIN_MS") {
        config = config.drain_timeout(drain);
    }
    let mut runner = Runner::new(spec).config(config);
    if env("E2E_JOB_HOST").is_some() {
        runner = runner.job_host(Arc::new(JobHost));
    }
    let module = TestModule {
        work: millis("E2E_WORK_MS"),
    };
    match runner.run(module).await {
        Ok(()) => event("exit ok"),
        Err(err) => {
            // The whole chain: the error, then each cause.
            event(&format!(
                "exit error {:?} {}",
                err.kind(),
                abi_process::error_chain(&err)
            ));
            std::process::exit(1);
        }
    }
}
