//! The runner: owns the connection and calls a module's hooks in the
//! reference's order.
//!
//! ```text
//! start:   on_load -> register STARTING (+ renewals) -> every dependency READY
//!          -> on_initialized -> prepare hosts (plain hosts start; job hosts
//!          only prepare in a rollout) -> report initialized -> health probe
//! serve:   run, until a stop (SIGTERM/SIGINT), DRAINING from discovery, run
//!          returning, or the lease or NATS lost for good; in a rollout the
//!          job hosts start once the instance serves
//! drain:   (stop or DRAINING) report draining, meanwhile drain every host
//!          at once + wait for work guards
//! cleanup: close hosts (job hosts, then the others) -> on_unloaded
//!          -> unregister -> flush NATS
//! ```
//!
//! Each line is one step of `Lifecycle` (`lifecycle.rs`): `start` in
//! `startup.rs`, `serve` in `lifecycle.rs`, `drain` and `cleanup` in
//! `drain.rs`. `cleanup` runs whatever happened before it.
//!
//! A draining instance stays registered (DRAINING) until it unregisters as
//! the very last step, so others see it leave only once its work is done.
//!
//! A stop request fits the shutdown budget ([`Config::shutdown_grace`],
//! default 8 s, under Docker's 10 s): work in flight gets it first, the
//! discovery calls and the flush share what is left, and a call that needs
//! NATS is skipped at once while the client is not connected (it could only
//! wait for a reconnect). Whatever is skipped, the lease expires on its own.
//! A drain discovery asks for (a newer generation serves) has no such
//! deadline: its work gets the drain timeout, until a stop request arrives.
//!
//! At startup, a module that finds nobody serving discovery yet ("no
//! responders") waits for it within the startup timeout instead of failing.

mod budget;
mod drain;
mod gate;
mod lifecycle;
mod module;
mod startup;
mod validate;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::{error, info};

pub use module::{Context, HookResult, Module, ModuleSpec, WorkGuard};

use crate::config::{Config, ConfigError};
use crate::error::{Error, kind_display};
use crate::host::{Host, ServedHost};
use crate::local::LocalDiscovery;
use crate::session::SessionError;
use crate::shutdown;
use lifecycle::{Lifecycle, Parts};

/// The inbox prefix module connections use, as the reference's modules do
/// (the broker may forbid modules the default `_INBOX.>`).
pub const MODULE_INBOX_PREFIX: &str = "_INBOX_MODULES";

/// Why a module stopped with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunErrorKind {
    /// The configuration was refused (see the source [`ConfigError`]).
    Config,
    /// NATS could not be reached.
    Connect,
    /// `on_load` failed.
    Load,
    /// Registering with discovery failed.
    Register,
    /// A dependency had no READY instance within the startup timeout.
    DependencyTimeout,
    /// Looking up a dependency failed in a way waiting cannot fix.
    Dependency,
    /// `on_initialized` failed.
    Initialized,
    /// A host failed to prepare or start.
    Host,
    /// The health probe could not listen.
    Health,
    /// The lease was lost for good (see the source [`SessionError`]).
    Session,
    /// `run` failed.
    Run,
    /// `on_unloaded` failed.
    Unloaded,
    /// NATS did not answer before the deadline.
    TimedOut,
}

kind_display!(RunErrorKind {
    Config => "invalid configuration",
    Connect => "cannot connect to NATS",
    Load => "on_load failed",
    Register => "registration failed",
    DependencyTimeout => "dependencies not ready in time",
    Dependency => "dependency lookup failed",
    Initialized => "on_initialized failed",
    Host => "host failed",
    Health => "health probe failed",
    Session => "discovery session failed",
    Run => "run failed",
    Unloaded => "on_unloaded failed",
    TimedOut => "timed out",
});

/// A module that stopped with an error.
pub type RunError = Error<RunErrorKind>;

impl From<ConfigError> for RunError {
    fn from(err: ConfigError) -> Self {
        let message = err.to_string();
        RunError::new(RunErrorKind::Config, message).with_source(err)
    }
}

impl From<SessionError> for RunError {
    fn from(err: SessionError) -> Self {
        let message = err.to_string();
        RunError::new(RunErrorKind::Session, message).with_source(err)
    }
}

/// Runs a module: `Runner::new(spec).run(module).await`.
#[must_use = "a runner does nothing until `run`"]
pub struct Runner {
    spec: ModuleSpec,
    config: Option<Config>,
    hosts: Vec<Arc<dyn Host>>,
    job_hosts: Vec<Arc<dyn Host>>,
    stop: Option<CancellationToken>,
    signals: bool,
    local: Option<Arc<dyn LocalDiscovery>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("spec", &self.spec)
            .field("config", &self.config)
            .field(
                "hosts",
                &self
                    .hosts
                    .iter()
                    .map(|h| h.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .field(
                "job_hosts",
                &self
                    .job_hosts
                    .iter()
                    .map(|h| h.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .field("signals", &self.signals)
            .field("local", &self.local)
            .finish()
    }
}

impl Runner {
    /// A runner for the module `spec` declares.
    pub fn new(spec: ModuleSpec) -> Self {
        Self {
            spec,
            config: None,
            hosts: Vec::new(),
            job_hosts: Vec::new(),
            stop: None,
            signals: true,
            local: None,
        }
    }

    /// The configuration (default: [`Config::from_env`] when the module runs).
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Adds a host started right after `on_initialized` (default none).
    pub fn host(mut self, host: Arc<dyn Host>) -> Self {
        self.hosts.push(host);
        self
    }

    /// Adds a gated host of your own: in a rollout it only prepares until
    /// the instance serves (default none). The SDK's job host is declared
    /// instead, with [`ModuleSpec::serve`], and the runner gates it the
    /// same way.
    pub fn job_host(mut self, host: Arc<dyn Host>) -> Self {
        self.job_hosts.push(host);
        self
    }

    /// Stops the module (drains it) when `token` is cancelled, besides the
    /// signals (default: signals only).
    pub fn stop_on(mut self, token: CancellationToken) -> Self {
        self.stop = Some(token);
        self
    }

    /// Whether SIGTERM and SIGINT drain the module (default true).
    pub fn handle_signals(mut self, enabled: bool) -> Self {
        self.signals = enabled;
        self
    }

    /// Talks to `service` in this process instead of connecting to NATS
    /// (default: NATS at the configured URL). The configured discovery
    /// project and token are used as they would be over NATS;
    /// [`Context::nats`] is `None`. The `abi-testkit` crate sets this up.
    pub fn local(mut self, service: Arc<dyn LocalDiscovery>) -> Self {
        self.local = Some(service);
        self
    }

    /// Runs `module` until it stops.
    ///
    /// Returns `Ok` after a clean drain (stop signal) or when `run` returned `Ok`.
    ///
    /// # Errors
    ///
    /// A [`RunError`] whose kind says which step failed; it is also logged
    /// (`module failed`, with its causes), whatever step it came from.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future skips the drain (work in flight
    /// is cut, the registration is not released); stop the module with
    /// [`Runner::stop_on`] or a signal so it drains and leaves discovery.
    pub async fn run<M: Module>(self, module: M) -> Result<(), RunError> {
        let module_id = self.spec.module_id().to_owned();
        let result = self.run_to_end(module).await;
        match &result {
            Ok(()) => info!(module_id = %module_id, "module stopped"),
            Err(err) => error!(
                module_id = %module_id,
                error = %abi_process::error_chain(err),
                "module failed"
            ),
        }
        result
    }

    async fn run_to_end<M: Module>(self, module: M) -> Result<(), RunError> {
        let Runner {
            spec,
            config,
            hosts,
            job_hosts,
            stop,
            signals,
            local,
        } = self;
        // What the spec serves, bound once registered, in declaration
        // order; the runner's own hosts follow them.
        let served: Vec<Arc<dyn ServedHost>> = spec.served.0.clone();
        let mut config = match config {
            Some(config) => config,
            None => Config::from_env(spec.module_id())?,
        };
        if let Some(discovery) = config.discovery.as_mut() {
            discovery.fill_rollout(&|key| std::env::var(key).ok());
        }
        config.validate_for(&spec)?;
        let token = config.token.take();
        let stop = stop.unwrap_or_default();
        let signal_task = signals.then(|| shutdown::on_signal(stop.clone()));
        let parts = Parts {
            spec: &spec,
            config: &config,
            token,
            hosts,
            job_hosts,
            served,
            stop,
            local,
        };
        let result = match Lifecycle::connect(&module, parts).await {
            Ok(lifecycle) => lifecycle.run().await,
            Err(err) => Err(err),
        };
        if let Some(task) = signal_task {
            task.abort();
        }
        result
    }
}

/// Runs `module` with the configuration from the environment.
///
/// # Errors
///
/// As [`Runner::run`].
///
/// # Cancel safety
///
/// Not cancel safe: as [`Runner::run`].
pub async fn run_module<M: Module>(spec: ModuleSpec, module: M) -> Result<(), RunError> {
    Runner::new(spec).run(module).await
}
