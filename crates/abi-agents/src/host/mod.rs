//! [`AgentHost`]: serves a module's agents on the reference's four
//! instance-addressed subjects, keeping run records, event fragments and
//! conversation claims in the document service exactly as the reference's
//! `AgentHost` does, so Python and Rust hosts and callers mix.
//!
//! Beyond the reference: submits are ordered per invocation and per
//! conversation instead of behind one process-wide lock (`keyed.rs`); a full
//! host answers `AGENT_BUSY` at once instead of leaving requests in the
//! subscription's buffer (`serve.rs`); the upkeep (`upkeep.rs`) releases the
//! conversation claims of owners discovery no longer lists and deletes
//! finished records and their events after a retention period.
//!
//! Files: `serve.rs` (subscriptions, concurrency, replies), `ops.rs` (one
//! request: the reference's checks in its order), `auth.rs` (discovery's
//! answers, cached), `submit.rs`, `run.rs` (one execution: events, saves,
//! pushes, deadline and idle timeout, cancel), `view.rs` (the `Invocation`
//! a reply carries), `claims.rs`, `upkeep.rs`, `keyed.rs`.

mod auth;
mod claims;
mod keyed;
mod machine;
mod ops;
mod refusal;
mod run;
mod serve;
mod submit;
mod upkeep;
mod view;
mod writes;

use abi_wire::agents::RunStatus;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use abi_document_model::CollectionSpec;
use futures::future::BoxFuture;
use tokio::time::Instant;

use tokio_util::task::TaskTracker;
use tracing::info;

use super::handler::{AgentHandler, AgentSpec};
use abi_sdk_core::BoxError;
use abi_sdk_core::DocumentClient;
use abi_sdk_core::SessionHandle;
use abi_sdk_core::host::serve::RequestLoop;
use abi_sdk_core::host::stopping::Stopping;
use abi_sdk_core::host::{self, Host, ServedHost};
use abi_sdk_core::{CallError, DiscoveryClient};

pub use upkeep::AgentRetention;

/// The host's name in logs and errors.
const HOST_NAME: &str = "agents";

/// How a host serves its agents; defaults are the reference's where it has one.
#[derive(Debug, Clone)]
pub struct AgentHostOptions {
    /// A streamed run, or one without a deadline, with no progress this long
    /// is timed out (default 300 s, the reference's).
    pub idle_timeout: Duration,
    /// Requests handled at once; beyond it a request is answered
    /// `AGENT_BUSY` at once (default 64, the reference's limit, which waits
    /// instead).
    pub max_concurrency: usize,
    /// Live runs at once, all agents together (default 200, the reference's).
    pub max_active_runs: usize,
    /// How often the upkeep runs, first at start (default 60 s).
    pub upkeep_interval: Duration,
    /// Which finished records the upkeep deletes; `None` keeps them all
    /// (default [`AgentRetention::default`], 7 days).
    pub retention: Option<AgentRetention>,
}

impl Default for AgentHostOptions {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(abi_wire::agents::DEFAULT_IDLE_TIMEOUT_SECS),
            max_concurrency: 64,
            max_active_runs: abi_wire::agents::MAX_ACTIVE_RUNS,
            upkeep_interval: Duration::from_secs(60),
            retention: Some(AgentRetention::default()),
        }
    }
}

/// What the host talks to, taken from the running module.
#[derive(Clone, Debug)]
pub(crate) struct Links {
    pub(crate) nats: async_nats::Client,
    pub(crate) discovery: DiscoveryClient,
    pub(crate) documents: DocumentClient,
    pub(crate) session: SessionHandle,
    pub(crate) project: String,
    pub(crate) module_id: String,
    pub(crate) contract_major: u32,
}

/// The names of the three collections.
#[derive(Debug, Clone)]
pub(crate) struct Collections {
    pub(crate) runs: String,
    pub(crate) events: String,
    pub(crate) claims: String,
}

/// What every task of the host shares.
pub(crate) struct Shared {
    pub(crate) links: Links,
    pub(crate) options: AgentHostOptions,
    pub(crate) collections: Collections,
    pub(crate) handlers: HashMap<String, Arc<dyn AgentHandler>>,
    pub(crate) runs: run::Runs,
    pub(crate) auth: auth::Authorizations,
    pub(crate) membership: view::Membership,
    pub(crate) submits: keyed::KeyedLocks,
    /// Drain and close refuse submits; close stops the upkeep; the work is
    /// the runs executing.
    pub(crate) stopping: Stopping,
    /// The subscriptions and the calls being handled.
    pub(crate) requests: Arc<RequestLoop>,
}

impl Shared {
    pub(crate) fn instance_id(&self) -> &str {
        self.links.session.instance_id()
    }

    pub(crate) fn documents(&self) -> &DocumentClient {
        &self.links.documents
    }

    pub(crate) fn is_closing(&self) -> bool {
        !self.stopping.accepting()
    }
}

/// A module's agents and their handlers: what the module serves. Declare
/// it on the module with [`abi_sdk_core::ModuleSpec::serve`]; the runner binds it
/// once the instance registered ([`BoundAgentHost`]), starts, drains and
/// closes it.
///
/// ```no_run
/// use std::sync::Arc;
/// use abi_agents::{AgentHost, AgentSpec, invoke_fn};
/// use abi_sdk_core::ModuleSpec;
///
/// let host = AgentHost::new().agent(
///     AgentSpec::new("echo", "Repeats the prompt"),
///     invoke_fn(|prompt, _cx| async move { Ok(prompt) }),
/// );
/// let spec = ModuleSpec::new("acme.echo").serve(Arc::new(host));
/// ```
#[derive(Default)]
pub struct AgentHost {
    agents: Vec<(AgentSpec, Arc<dyn AgentHandler>)>,
    options: AgentHostOptions,
    observers: Vec<BindObserver>,
}

impl std::fmt::Debug for AgentHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentHost")
            .field(
                "agents",
                &self
                    .agents
                    .iter()
                    .map(|(s, _)| s.name())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Called with each host bound from a declaration ([`AgentHost::on_bind`]).
type BindObserver = Box<dyn Fn(&Arc<BoundAgentHost>) + Send + Sync>;

/// An agent host bound to a running module: it serves once started.
pub struct BoundAgentHost {
    shared: Arc<Shared>,
    loops: TaskTracker,
}

impl std::fmt::Debug for BoundAgentHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundAgentHost")
            .field("instance_id", &self.shared.instance_id())
            .finish_non_exhaustive()
    }
}

/// Why an agent host cannot do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum AgentHostError {
    /// A NATS subscription failed.
    #[error("nats: {0}")]
    Nats(String),
    /// A document call failed.
    #[error("documents: {0}")]
    Documents(#[from] CallError),
}

impl AgentHost {
    /// A host of no agent yet, with the default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `spec` with `handler`.
    #[must_use]
    pub fn agent(mut self, spec: AgentSpec, handler: Arc<dyn AgentHandler>) -> Self {
        self.agents.push((spec, handler));
        self
    }

    /// Sets the options (default [`AgentHostOptions::default`]).
    #[must_use]
    pub fn options(mut self, options: AgentHostOptions) -> Self {
        self.options = options;
        self
    }

    /// Calls `observer` with each running host the runner binds from this
    /// declaration (once per run of the module), before it starts: a way to
    /// keep a handle for [`BoundAgentHost::upkeep`] or
    /// [`BoundAgentHost::running`] (default none).
    #[must_use]
    pub fn on_bind(
        mut self,
        observer: impl Fn(&Arc<BoundAgentHost>) + Send + Sync + 'static,
    ) -> Self {
        self.observers.push(Box::new(observer));
        self
    }

    fn bind_links(&self, links: &host::Links) -> Arc<BoundAgentHost> {
        let project = links.project().to_owned();
        let links = Links {
            nats: links.nats().clone(),
            discovery: links.discovery().clone(),
            documents: links.documents().clone(),
            session: links.session().clone(),
            module_id: links.module_id().to_owned(),
            contract_major: links.session().descriptor().contract_major,
            project: project.clone(),
        };
        let shared = Shared {
            links,
            options: self.options.clone(),
            collections: Collections {
                runs: abi_wire::agents::runs_collection(&project),
                events: abi_wire::agents::events_collection(&project),
                claims: abi_wire::agents::claims_collection(&project),
            },
            handlers: self
                .agents
                .iter()
                .map(|(s, h)| (s.name.clone(), h.clone()))
                .collect(),
            runs: run::Runs::default(),
            auth: auth::authorizations(),
            membership: view::Membership::default(),
            submits: keyed::KeyedLocks::default(),
            stopping: Stopping::new(),
            requests: Arc::new(serve::request_loop(self.options.max_concurrency)),
        };
        let bound = Arc::new(BoundAgentHost {
            shared: Arc::new(shared),
            loops: TaskTracker::new(),
        });
        for observer in &self.observers {
            observer(&bound);
        }
        bound
    }
}

impl BoundAgentHost {
    /// How many runs execute here now.
    pub fn running(&self) -> usize {
        self.shared.runs.len()
    }

    /// One upkeep pass now (it also runs at start and every
    /// `upkeep_interval`): releases claims of owners discovery no longer
    /// lists, then applies the retention; returns (claims released, records
    /// deleted).
    ///
    /// # Errors
    ///
    /// [`AgentHostError`] when a store call fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled pass may have released some claims or deleted some records and not others; the next pass finishes the work.
    pub async fn upkeep(&self) -> Result<(usize, usize), AgentHostError> {
        upkeep::pass(&self.shared).await
    }

    async fn start_serving(&self) -> Result<(), AgentHostError> {
        let shared = self.shared.clone();
        for name in [
            &shared.collections.runs,
            &shared.collections.claims,
            &shared.collections.events,
        ] {
            shared
                .documents()
                .ensure_collection(CollectionSpec::new(name.clone()))
                .await?;
        }
        serve::subscribe(&shared).await?;
        self.loops.spawn(upkeep::run(shared.clone()));
        info!(
            instance_id = %shared.instance_id(),
            agents = shared.handlers.len(),
            "agent host started"
        );
        Ok(())
    }

    async fn drain_within(&self, timeout: Duration) {
        let shared = &self.shared;
        shared.stopping.stop_accepting();
        shared.stopping.settled_within(timeout).await;
    }

    /// Stops receiving, answers what was received, cancels the runs still
    /// going (their records say CANCELLED) and stops, each wait bounded by
    /// `deadline`.
    async fn close_by(&self, deadline: Instant) {
        let shared = &self.shared;
        shared.stopping.close();
        shared.requests.close(deadline).await;
        for run in shared.runs.all() {
            run::cancel(shared, &run, RunStatus::Cancelled).await;
        }
        shared.stopping.settled_by(deadline).await;
        self.loops.close();
        let _ = tokio::time::timeout_at(deadline, self.loops.wait()).await;
    }
}

impl Host for BoundAgentHost {
    fn name(&self) -> &str {
        HOST_NAME
    }

    fn start(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move { Ok(self.start_serving().await?) })
    }

    fn drain(&self, timeout: Duration) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            self.drain_within(timeout).await;
            Ok(())
        })
    }

    fn close(&self, deadline: Instant) -> BoxFuture<'_, ()> {
        Box::pin(self.close_by(deadline))
    }
}

impl ServedHost for AgentHost {
    fn name(&self) -> &str {
        HOST_NAME
    }

    fn declare(&self, descriptor: &mut abi_proto::discovery::v1::ModuleDescriptor) {
        for (spec, _) in &self.agents {
            descriptor.agents.push(spec.to_descriptor());
        }
    }

    fn bind(&self, links: &host::Links) -> Arc<dyn Host> {
        self.bind_links(links)
    }
}
