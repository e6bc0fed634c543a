//! What a module is: a declaration ([`ModuleSpec`]) and hooks ([`Module`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use abi_proto::discovery::v1 as pb;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::client::DiscoveryClient;
use crate::client::proxy::Modules;
use crate::error::BoxError;
use crate::session::SessionHandle;
use crate::status::Status;

/// What a hook returns.
pub type HookResult = Result<(), BoxError>;

/// A module's lifecycle hooks. Every hook has a default; a module overrides
/// what it needs.
///
/// The runner calls them in this order: `on_load`, (register, wait for
/// dependencies), `on_initialized`, (hosts, readiness, health), `run`; on a
/// stop signal or when `run` returns: (drain), `on_unloaded`, (unregister).
pub trait Module: Send + Sync + 'static {
    /// Before the module registers. Default: nothing.
    fn on_load(&self, cx: &Context) -> impl Future<Output = HookResult> + Send {
        let _ = cx;
        async { Ok(()) }
    }

    /// Once every dependency has a READY instance, before the instance
    /// reports itself initialized. Default: nothing.
    fn on_initialized(&self, cx: &Context) -> impl Future<Output = HookResult> + Send {
        let _ = cx;
        async { Ok(()) }
    }

    /// After draining, before the instance unregisters. Default: nothing.
    fn on_unloaded(&self, cx: &Context) -> impl Future<Output = HookResult> + Send {
        let _ = cx;
        async { Ok(()) }
    }

    /// The module's work. Returning ends the module. Default: wait until the
    /// module is asked to stop ([`Context::stopping`]).
    fn run(&self, cx: Context) -> impl Future<Output = HookResult> + Send {
        async move {
            cx.stopping().cancelled().await;
            Ok(())
        }
    }
}

/// A module's declaration: identity, contract and what it serves.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleSpec {
    pub(crate) descriptor: pb::ModuleDescriptor,
    pub(crate) served: crate::host::ServedHosts,
}

impl ModuleSpec {
    /// A module `module_id`, version "0.0.0", contract major 1, declaring nothing.
    pub fn new(module_id: impl Into<String>) -> Self {
        Self {
            descriptor: pb::ModuleDescriptor {
                module_id: module_id.into(),
                package_version: "0.0.0".into(),
                contract_major: 1,
                ..Default::default()
            },
            served: crate::host::ServedHosts::default(),
        }
    }

    /// The package version (default "0.0.0").
    #[must_use]
    pub fn package_version(mut self, version: impl Into<String>) -> Self {
        self.descriptor.package_version = version.into();
        self
    }

    /// The contract major this module serves (default 1).
    #[must_use]
    pub fn contract_major(mut self, major: u32) -> Self {
        self.descriptor.contract_major = major;
        self
    }

    /// Declares a module this one needs at `contract_major` (default none).
    #[must_use]
    pub fn dependency(mut self, module_id: impl Into<String>, contract_major: u32) -> Self {
        self.descriptor.dependencies.push(pb::Dependency {
            module_id: module_id.into(),
            contract_major,
        });
        self
    }

    /// Declares an agent (default none).
    #[must_use]
    pub fn agent(mut self, agent: pb::AgentDescriptor) -> Self {
        self.descriptor.agents.push(agent);
        self
    }

    /// Declares a job or workflow another process serves, from its
    /// descriptor (default none); the runner refuses to start a module
    /// whose descriptor the reference would not read
    /// ([`ModuleSpec::check_declarations`]). A job this process serves is
    /// declared by its host ([`ModuleSpec::serve`]).
    #[must_use]
    pub fn job(mut self, job: pb::JobDescriptor) -> Self {
        self.descriptor.jobs.push(job);
        self
    }

    /// Serves `host` (a `JobHost`, an `AgentHost` or a `ModelHost`, or
    /// any [`crate::ServedHost`]): what it serves joins the descriptor
    /// now; the runner binds it once the instance registered, starts it
    /// after `on_initialized` (a job host at the rollout's cutover), drains
    /// it with the others and closes it, job hosts first, then the others in
    /// the order they were given (serve models before agents to close them
    /// in the reference's order).
    #[must_use]
    pub fn serve(mut self, host: std::sync::Arc<dyn crate::host::ServedHost>) -> Self {
        host.declare(&mut self.descriptor);
        self.served.0.push(host);
        self
    }

    /// Declares a model (default none).
    #[must_use]
    pub fn model(mut self, model: pb::ModelDescriptor) -> Self {
        self.descriptor.models.push(model);
        self
    }

    /// Declares an app (default none).
    #[must_use]
    pub fn app(mut self, app: pb::AppDescriptor) -> Self {
        self.descriptor.apps.push(app);
        self
    }

    /// Checks every declaration as the reference reads it back: a raw
    /// descriptor given to [`ModuleSpec::job`] that a Python caller could not
    /// decode is refused here, before the module registers.
    /// [`crate::Config::validate_for`] (run by the runner) calls it.
    ///
    /// # Errors
    ///
    /// `job '<name>': <the reference's message>` for the first bad job.
    pub fn check_declarations(&self) -> Result<(), String> {
        for job in &self.descriptor.jobs {
            crate::job_spec::JobSpec::from_descriptor(job)
                .map_err(|err| format!("job {:?}: {err}", job.name))?;
        }
        for app in &self.descriptor.apps {
            check_app(app)?;
        }
        Ok(())
    }

    /// The module id.
    pub fn module_id(&self) -> &str {
        &self.descriptor.module_id
    }

    /// The descriptor sent to discovery.
    pub fn descriptor(&self) -> &pb::ModuleDescriptor {
        &self.descriptor
    }
}

/// The reference's `AppDescriptor.__post_init__` checks, with its messages
/// (discovery reads an empty entry as `index.html`).
fn check_app(app: &pb::AppDescriptor) -> Result<(), String> {
    if !abi_wire::names::app_name(&app.name) {
        return Err(format!(
            "App name {}: 1 to 64 letters, digits, '_' or '-' (it is a URL segment)",
            abi_pyjson::python_str_repr(&app.name)
        ));
    }
    if app.entry.starts_with('/') || app.entry.split('/').any(|part| part == "..") {
        return Err(format!("App {}: entry must be a relative path", app.name));
    }
    Ok(())
}

/// What hooks get: the connection, the declared dependencies, the session,
/// and the drain machinery. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    module_id: String,
    nats: Option<async_nats::Client>,
    client: Option<DiscoveryClient>,
    modules: Modules,
    session: OnceLock<SessionHandle>,
    health_addr: OnceLock<SocketAddr>,
    stopping: CancellationToken,
    work: TaskTracker,
}

/// Held while a piece of work runs: a draining module waits (up to its drain
/// timeout) until every guard is dropped before it unloads.
#[derive(Debug)]
pub struct WorkGuard {
    _token: TaskTrackerToken,
}

impl Context {
    pub(crate) fn new(
        module_id: String,
        nats: Option<async_nats::Client>,
        client: Option<DiscoveryClient>,
        modules: Modules,
        stopping: CancellationToken,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                module_id,
                nats,
                client,
                modules,
                session: OnceLock::new(),
                health_addr: OnceLock::new(),
                stopping,
                work: TaskTracker::new(),
            }),
        }
    }

    /// This module's id.
    pub fn module_id(&self) -> &str {
        &self.inner.module_id
    }

    /// The module's NATS connection; `None` when the module runs against an
    /// in-process service ([`crate::Runner::local`], the test kit).
    pub fn nats(&self) -> Option<&async_nats::Client> {
        self.inner.nats.as_ref()
    }

    /// The discovery client, when discovery is on.
    pub fn discovery(&self) -> Option<&DiscoveryClient> {
        self.inner.client.as_ref()
    }

    /// A document client bound to this module's namespace (its id), with the
    /// module's token; `None` without discovery or without NATS.
    pub fn documents(&self) -> Option<crate::DocumentClient> {
        self.inner
            .client
            .as_ref()?
            .documents(self.inner.module_id.clone())
    }

    /// Proxies for the declared dependencies.
    pub fn modules(&self) -> &Modules {
        &self.inner.modules
    }

    /// The registration, once the module registered (after `on_load`).
    pub fn session(&self) -> Option<&SessionHandle> {
        self.inner.session.get()
    }

    /// The instance's status as the probe reports it: [`Status::Disabled`]
    /// without discovery.
    pub fn status(&self) -> Status {
        match (&self.inner.client, self.inner.session.get()) {
            (None, _) => Status::Disabled,
            (Some(_), Some(session)) => session.current_status(),
            (Some(_), None) => Status::Starting,
        }
    }

    /// Where the health probe listens, once it started.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.inner.health_addr.get().copied()
    }

    /// Cancelled when the module should stop taking new work (a stop signal,
    /// or discovery asked this instance to drain).
    pub fn stopping(&self) -> &CancellationToken {
        &self.inner.stopping
    }

    /// A guard for one piece of new work, or `None` once the module is
    /// stopping (new work is refused while work already started finishes).
    pub fn begin_work(&self) -> Option<WorkGuard> {
        if self.inner.stopping.is_cancelled() {
            return None;
        }
        Some(WorkGuard {
            _token: self.inner.work.token(),
        })
    }

    pub(crate) fn set_session(&self, session: SessionHandle) {
        let _ = self.inner.session.set(session);
    }

    pub(crate) fn set_health_addr(&self, addr: SocketAddr) {
        let _ = self.inner.health_addr.set(addr);
    }

    /// Waits until every [`WorkGuard`] is dropped.
    pub(crate) async fn work_done(&self) {
        self.inner.work.close();
        self.inner.work.wait().await;
    }
}
