//! The runner: owns the connection and calls a module's hooks in the
//! reference's order.
//!
//! ```text
//! on_load -> register STARTING (+ renewals) -> every dependency READY
//!   -> on_initialized -> start hosts (job hosts: prepare only in a rollout)
//!   -> report initialized -> health probe -> run
//! stop (SIGTERM/SIGINT, or discovery says DRAINING):
//!   report draining, meanwhile drain hosts + wait for work guards
//!   -> close hosts -> on_unloaded -> unregister -> flush NATS
//! ```
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
mod gate;
mod module;

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use module::{Context, HookResult, Module, ModuleSpec, WorkGuard};

use crate::client::DiscoveryClient;
use crate::config::{Config, ConfigError, ConfigErrorKind};
use crate::error::{BoxError, Error, kind_display};
use crate::health::HealthServer;
use crate::host::Host;
use crate::local::LocalDiscovery;
use crate::proxy::Modules;
use crate::session::{Rollout, Session, SessionError};
use crate::shutdown;
use crate::transport::Link;
use crate::watch::{RegistryWatch, WatchOptions};
use budget::Budget;

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

    /// Adds a job host: in a rollout it only prepares until the instance
    /// serves (default none).
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
    /// A [`RunError`] whose kind says which step failed.
    pub async fn run<M: Module>(self, module: M) -> Result<(), RunError> {
        let Runner {
            spec,
            config,
            hosts,
            job_hosts,
            stop,
            signals,
            local,
        } = self;
        let mut config = match config {
            Some(config) => config,
            None => Config::from_env(spec.module_id())?,
        };
        if let Some(discovery) = config.discovery.as_mut() {
            discovery.fill_rollout(&|key| std::env::var(key).ok());
            discovery.validate()?;
        }
        if !spec.descriptor.dependencies.is_empty() && config.discovery.is_none() {
            return Err(ConfigError::new(
                ConfigErrorKind::DependenciesWithoutDiscovery,
                "this module declares module dependencies: configure discovery (ABI_PROJECT)",
            )
            .into());
        }
        let token = config.token.take();
        if config.discovery.is_some() && token.is_none() {
            return Err(ConfigError::new(
                ConfigErrorKind::MissingToken,
                format!(
                    "set ABI_MODULE_KEY to the module key of {:?}, or ABI_SERVICE_TOKEN",
                    spec.module_id()
                ),
            )
            .into());
        }
        let stop = stop.unwrap_or_default();
        let signal_task = signals.then(|| shutdown::on_signal(stop.clone()));
        let parts = Parts {
            spec: &spec,
            config: &config,
            token,
            hosts: &hosts,
            job_hosts: &job_hosts,
            stop,
            local,
        };
        let result = run_module_inner(&module, parts).await;
        if let Some(task) = signal_task {
            task.abort();
        }
        match &result {
            Ok(()) => info!(module_id = %spec.module_id(), "module stopped"),
            Err(err) => error!(module_id = %spec.module_id(), error = %err, "module failed"),
        }
        result
    }
}

/// Runs `module` with the configuration from the environment.
///
/// # Errors
///
/// As [`Runner::run`].
pub async fn run_module<M: Module>(spec: ModuleSpec, module: M) -> Result<(), RunError> {
    Runner::new(spec).run(module).await
}

struct Parts<'a> {
    spec: &'a ModuleSpec,
    config: &'a Config,
    token: Option<crate::token::TokenSource>,
    hosts: &'a [Arc<dyn Host>],
    job_hosts: &'a [Arc<dyn Host>],
    stop: CancellationToken,
    local: Option<Arc<dyn LocalDiscovery>>,
}

/// How the serving phase ended.
enum Ended {
    Run(Result<(), BoxError>),
    /// A stop request: a signal or the caller's token.
    Stop,
    /// Discovery answered DRAINING (a newer generation serves).
    Drain,
    Session(SessionError),
    Gate(RunError),
    Lost,
}

fn hook_error(kind: RunErrorKind) -> impl FnOnce(BoxError) -> RunError {
    move |err| RunError::new(kind, err.to_string()).with_source(err)
}

/// Awaits `fut` unless `stop` fires first (`None`).
async fn until<T>(stop: &CancellationToken, fut: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        value = fut => Some(value),
    }
}

/// Connects; `lost` is cancelled once the client gives up reconnecting.
async fn connect(
    config: &Config,
    module_id: &str,
    lost: CancellationToken,
) -> Result<async_nats::Client, RunError> {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into());
    let settings = config
        .nats_settings()
        .map_err(|e| RunError::new(RunErrorKind::Config, e.to_string()).with_source(e))?;
    let connect_error = |e: abi_process::ConnectError| match e {
        abi_process::ConnectError::TimedOut { .. } => {
            RunError::new(RunErrorKind::TimedOut, e.to_string())
        }
        other => RunError::new(RunErrorKind::Connect, other.to_string()).with_source(other),
    };
    let options = settings
        .options(&format!("{module_id}@{host}"))
        .await
        .map_err(connect_error)?
        .event_callback(move |event| {
            let lost = lost.clone();
            async move {
                // The client reports giving up as an error, then closes.
                if matches!(
                    event,
                    async_nats::Event::Closed
                        | async_nats::Event::ClientError(async_nats::ClientError::MaxReconnects)
                ) {
                    lost.cancel();
                }
            }
        })
        .max_reconnects(config.max_reconnects)
        .custom_inbox_prefix(MODULE_INBOX_PREFIX)
        .request_timeout(Some(config.request_timeout));
    settings.connect_with(options).await.map_err(connect_error)
}

async fn run_module_inner<M: Module>(module: &M, parts: Parts<'_>) -> Result<(), RunError> {
    let Parts {
        spec,
        config,
        token,
        hosts,
        job_hosts,
        stop,
        local,
    } = parts;
    let lost = CancellationToken::new();
    let (nats, link) = match local {
        Some(service) => (None, Link::Local(service)),
        None => {
            let nats = connect(config, spec.module_id(), lost.clone()).await?;
            (Some(nats.clone()), Link::Nats(nats))
        }
    };
    let discovery = config.discovery.clone();
    let client = match (&discovery, token) {
        (Some(d), Some(token)) => Some(DiscoveryClient::with_link(
            link,
            d.project.clone(),
            Arc::new(token),
            config.request_timeout,
        )),
        _ => None,
    };
    let dependencies: Vec<(String, u32)> = spec
        .descriptor
        .dependencies
        .iter()
        .map(|d| (d.module_id.clone(), d.contract_major))
        .collect();
    // What the module sees as "stop taking work": cancelled by a stop
    // request, and by the runner when it drains for discovery. `stop` itself
    // stays a stop request only, so one arriving while draining is noticed.
    let stopping = stop.child_token();
    let cx = Context::new(
        spec.module_id().to_owned(),
        nats.clone(),
        client.clone(),
        Modules::new(client.clone(), dependencies.clone()),
        stopping.clone(),
    );
    let rollout = discovery
        .as_ref()
        .map(|d| Rollout {
            id: d.rollout_id.clone(),
            modules: d.rollout_modules.clone(),
        })
        .unwrap_or_default();
    let refresh = discovery
        .as_ref()
        .map(|d| d.refresh_interval)
        .unwrap_or(Duration::from_secs(2));
    let gated = client.is_some() && !rollout.id.is_empty() && !job_hosts.is_empty();
    let watched = discovery.as_ref().is_some_and(|d| d.watch);
    let mut watch: Option<RegistryWatch> = match &client {
        Some(c) if watched && (!dependencies.is_empty() || gated) => {
            Some(c.watch_with(WatchOptions::default().check_interval(refresh)))
        }
        _ => None,
    };

    let mut session: Option<Session> = None;
    let mut health: Option<HealthServer> = None;
    let mut reported_draining = false;
    // Set when a stop request arrives; otherwise when cleaning up.
    let mut budget: Option<Budget> = None;
    // Whether a call over NATS can get anywhere now. Without a connection
    // the client queues requests until it reconnects, so they could only
    // run into their deadline.
    let online = || {
        !lost.is_cancelled()
            && nats
                .as_ref()
                .is_none_or(|n| n.connection_state() == async_nats::connection::State::Connected)
    };

    let outcome: Result<(), RunError> = async {
        // Startup. A stop request between steps ends the module cleanly.
        module.on_load(&cx).await.map_err(hook_error(RunErrorKind::Load))?;
        if let (Some(client), Some(d)) = (&client, &discovery) {
            let started = until(
                &stop,
                Session::start_when_served(client.clone(), spec.descriptor.clone(), rollout.clone(), d.startup_timeout),
            )
            .await;
            let Some(started) = started else { return Ok(()) };
            let started = started.map_err(|e| RunError::new(RunErrorKind::Register, e.message().to_owned()).with_source(e))?;
            started.set_health_summary_interval(d.health_summary_interval);
            cx.set_session(started.handle());
            session = Some(started);
            if !dependencies.is_empty() {
                let waited = until(
                    &stop,
                    tokio::time::timeout(d.startup_timeout, gate::dependencies_ready(cx.modules(), &mut watch, refresh)),
                )
                .await;
                match waited {
                    None => return Ok(()),
                    Some(Err(_)) => {
                        let ids: Vec<_> = dependencies.iter().map(|(id, _)| id.as_str()).collect();
                        return Err(RunError::new(
                            RunErrorKind::DependencyTimeout,
                            format!("required modules did not become ready within {:?}: {ids:?}", d.startup_timeout),
                        )
                        .with_code("DEPENDENCY_TIMEOUT"));
                    }
                    Some(Ok(Err(err))) => {
                        return Err(RunError::new(RunErrorKind::Dependency, err.to_string()).with_source(err));
                    }
                    Some(Ok(Ok(()))) => {}
                }
            }
        }
        module
            .on_initialized(&cx)
            .await
            .map_err(hook_error(RunErrorKind::Initialized))?;
        for host in hosts {
            host.start().await.map_err(host_error(host.as_ref(), "start"))?;
        }
        for host in job_hosts {
            if gated {
                // Only what must exist before this generation serves.
                host.prepare().await.map_err(host_error(host.as_ref(), "prepare"))?;
            } else {
                host.start().await.map_err(host_error(host.as_ref(), "start"))?;
            }
        }
        if let Some(session) = &session {
            session.set_initialized();
            match session.renew().await {
                Ok(status) => info!(instance_id = %session.instance_id(), status = %status, "module initialized"),
                // The background renewals report it again and handle lease loss.
                Err(err) if err.is_retryable() || err.kind() == crate::CallErrorKind::LeaseExpired => {
                    warn!(error = %err, "could not report initialized yet");
                }
                Err(err) => return Err(RunError::new(RunErrorKind::Session, err.to_string()).with_source(err)),
            }
        }
        if let Some(addr) = config.health {
            let status_cx = cx.clone();
            let server = HealthServer::start(addr, Arc::new(move || status_cx.status()))
                .await
                .map_err(|e| RunError::new(RunErrorKind::Health, format!("cannot listen on {addr}")).with_source(e))?;
            cx.set_health_addr(server.addr());
            health = Some(server);
        }
        if stop.is_cancelled() {
            return Ok(());
        }

        // Serving.
        let run = module.run(cx.clone());
        tokio::pin!(run);
        let handle = session.as_ref().map(|s| s.handle());
        let drain_requested = handle.as_ref().map(|s| s.drain_requested()).unwrap_or_default();
        let gate = async {
            if let (true, Some(handle)) = (gated, &handle) {
                gate::cutover(handle, &mut watch, refresh).await;
                info!("rollout cut over; starting job hosts");
                for host in job_hosts {
                    host.start().await.map_err(host_error(host.as_ref(), "start"))?;
                }
            }
            std::future::pending::<Result<(), RunError>>().await
        };
        tokio::pin!(gate);
        // Biased: a stop wakes `run` too (it usually waits on `stopping`), and
        // the stop must win so that the module drains.
        let ended = tokio::select! {
            biased;
            () = stop.cancelled() => Ended::Stop,
            () = drain_requested.cancelled() => Ended::Drain,
            () = lost.cancelled() => Ended::Lost,
            result = &mut run => Ended::Run(result),
            err = session_failed(&mut session) => Ended::Session(err),
            result = &mut gate => match result {
                Err(err) => Ended::Gate(err),
                Ok(()) => Ended::Stop,
            },
        };
        match ended {
            Ended::Run(Ok(())) => Ok(()),
            Ended::Run(Err(err)) => Err(hook_error(RunErrorKind::Run)(err)),
            Ended::Session(err) => Err(err.into()),
            Ended::Gate(err) => Err(err),
            // Nothing can be reported or drained without NATS: stop, so a
            // supervisor starts a process that can serve.
            Ended::Lost => Err(RunError::new(
                RunErrorKind::Connect,
                "the NATS connection closed for good",
            )),
            Ended::Stop | Ended::Drain => {
                // New work is refused from here on.
                stopping.cancel();
                let drain_started = Instant::now();
                // A stop request starts the shutdown budget. A drain discovery
                // asked for has no deadline from outside: its work gets the
                // drain timeout, until a stop request brings the budget in.
                if matches!(ended, Ended::Stop) {
                    budget = Some(Budget::start(config.shutdown_grace));
                    info!(grace = ?config.shutdown_grace, "module stopping");
                } else {
                    info!(timeout = ?config.drain_timeout, "discovery asked this instance to drain");
                }
                let early = budget;
                let report_limit = early.map_or(Some(budget::STEP_CAP), |b| b.step());
                let report = async {
                    if let Some(session) = &session {
                        session.set_draining();
                        report_draining(session, report_limit, online()).await;
                    }
                };
                reported_draining = session.is_some();
                let drain = async {
                    let first_until = match early {
                        Some(b) => b.work_deadline(config.drain_timeout),
                        None => drain_started + config.drain_timeout,
                    };
                    let left = first_until.saturating_duration_since(Instant::now());
                    let waits = hosts.iter().chain(job_hosts).map(|h| async move {
                        if let Err(err) = h.drain(left).await {
                            warn!(host = h.name(), error = %err, "host drain failed");
                        }
                    });
                    let all = async {
                        join_all(waits).await;
                        cx.work_done().await;
                    };
                    tokio::pin!(all);
                    let late = tokio::select! {
                        biased;
                        () = &mut all => return None,
                        () = tokio::time::sleep_until(first_until) => {
                            warn!(waited = ?drain_started.elapsed(), "work still running at the end of its time to drain");
                            return None;
                        }
                        () = stop.cancelled(), if early.is_none() => Budget::start(config.shutdown_grace),
                    };
                    info!(grace = ?config.shutdown_grace, "module stopping while it drains");
                    let until = late.work_deadline(config.drain_timeout).min(first_until);
                    if tokio::time::timeout_at(until, &mut all).await.is_err() {
                        warn!(waited = ?drain_started.elapsed(), "work still running at the end of its share of the shutdown budget");
                    }
                    Some(late)
                };
                let both = async {
                    let ((), late) = tokio::join!(report, drain);
                    late
                };
                tokio::pin!(both);
                // `run` keeps going while work drains: it may be doing some of it.
                let late = tokio::select! {
                    late = &mut both => late,
                    result = &mut run => {
                        if let Err(err) = result {
                            warn!(error = %err, "run failed while draining");
                        }
                        both.await
                    }
                };
                if late.is_some() {
                    budget = late;
                }
                Ok(())
            }
        }
    }
    .await;

    // Cleanup, whatever happened above, within the shutdown budget.
    stopping.cancel();
    let budget = budget.unwrap_or_else(|| Budget::start(config.shutdown_grace));
    if let Some(server) = health.take() {
        let limit = budget.step().unwrap_or_default();
        if tokio::time::timeout(limit, server.close()).await.is_err() {
            warn!("health probe still closing; leaving it");
        }
    }
    if let Some(session) = &session
        && !reported_draining
    {
        session.set_draining();
        report_draining(session, budget.step(), online()).await;
    }
    // The module's own hooks: normally quick, bounded by the whole budget.
    let hooks = async {
        for host in job_hosts.iter().chain(hosts) {
            host.close().await;
        }
        module
            .on_unloaded(&cx)
            .await
            .map_err(hook_error(RunErrorKind::Unloaded))
    };
    let unloaded = match tokio::time::timeout_at(budget.deadline(), hooks).await {
        Ok(unloaded) => unloaded,
        Err(_) => {
            warn!("hosts closing or on_unloaded still running at the end of the shutdown budget");
            Ok(())
        }
    };
    if let Some(session) = session.take() {
        match (online(), budget.step()) {
            (_, None) => session.abandon("the shutdown budget is spent").await,
            (false, _) => session.abandon("no NATS connection").await,
            (true, Some(limit)) => session.close_within(Some(limit)).await,
        }
    }
    drop(watch);
    if let Some(nats) = &nats {
        match (online(), budget.step()) {
            (_, None) => warn!("NATS flush skipped: the shutdown budget is spent"),
            (false, _) => warn!("NATS flush skipped: no connection"),
            (true, Some(limit)) => match tokio::time::timeout(limit, nats.flush()).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => warn!(error = %err, "NATS flush failed at exit"),
                Err(_) => warn!(timeout = ?limit, "NATS flush timed out at exit"),
            },
        }
    }
    info!(elapsed = ?budget.elapsed(), grace = ?config.shutdown_grace, "shutdown finished");
    outcome.and(unloaded)
}

/// Reports the instance draining with one renewal within `limit`; skipped
/// when `online` is false or no time is left (`None`). Logs the outcome; a
/// failure changes nothing else (the renewals in the background report
/// draining too, and the lease expires if nothing gets through).
async fn report_draining(session: &Session, limit: Option<Duration>, online: bool) {
    match (online, limit) {
        (_, None) => warn!("draining not reported: the shutdown budget is spent"),
        (false, _) => warn!("draining not reported: no NATS connection"),
        (true, Some(limit)) => match tokio::time::timeout(limit, session.renew()).await {
            Ok(Ok(status)) => info!(status = %status, "module draining"),
            Ok(Err(err)) => warn!(error = %err, "could not report draining"),
            Err(_) => warn!(timeout = ?limit, "could not report draining in time"),
        },
    }
}

fn host_error<'a>(host: &'a dyn Host, step: &'a str) -> impl FnOnce(BoxError) -> RunError + 'a {
    move |err| {
        RunError::new(
            RunErrorKind::Host,
            format!("host {} failed to {step}: {err}", host.name()),
        )
        .with_source(err)
    }
}

async fn session_failed(session: &mut Option<Session>) -> SessionError {
    match session.as_mut() {
        Some(session) => session.failed().await,
        None => std::future::pending().await,
    }
}
