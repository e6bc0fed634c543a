//! The first step, `start`: connect, load, register, wait for the
//! dependencies, initialize, prepare the hosts, report initialized, open the
//! health probe. A stop request while registering or waiting ends the
//! module cleanly.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::gate;
use super::lifecycle::{Lifecycle, Parts, Started, hook_error};
use super::{Context, MODULE_INBOX_PREFIX, Module, RunError, RunErrorKind};
use crate::client::DiscoveryClient;
use crate::client::proxy::Modules;
use crate::config::{Config, DEFAULT_REFRESH_INTERVAL};
use crate::error::CallErrorKind;
use crate::health::HealthServer;
use crate::session::{Rollout, Session};
use crate::transport::Link;
use crate::watch::WatchOptions;

/// The code a [`RunErrorKind::DependencyTimeout`] carries, as the
/// reference's startup failure names it.
const DEPENDENCY_TIMEOUT_CODE: &str = abi_wire::codes::DEPENDENCY_TIMEOUT;

impl<'a, M: Module> Lifecycle<'a, M> {
    /// Connects (unless the service is in-process) and assembles the run:
    /// the discovery client, the module's [`Context`], and the registry
    /// watch when readiness waits can use one.
    ///
    /// # Errors
    ///
    /// [`RunErrorKind::Connect`], `TimedOut` or `Config` when NATS cannot
    /// be reached with the configured settings.
    pub(super) async fn connect(module: &'a M, parts: Parts<'a>) -> Result<Self, RunError> {
        let Parts {
            spec,
            config,
            token,
            hosts,
            job_hosts,
            served,
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
            .unwrap_or(DEFAULT_REFRESH_INTERVAL);
        let gated = client.is_some()
            && !rollout.id.is_empty()
            && (!job_hosts.is_empty() || served.iter().any(|h| h.gated()));
        let watched = discovery.as_ref().is_some_and(|d| d.watch);
        let watch = match &client {
            Some(c) if watched && (!dependencies.is_empty() || gated) => {
                Some(c.watch_with(WatchOptions::default().check_interval(refresh)))
            }
            _ => None,
        };
        Ok(Self {
            module,
            spec,
            config,
            hosts,
            job_hosts,
            served,
            stop,
            stopping,
            lost,
            nats,
            cx,
            client,
            discovery,
            dependencies,
            rollout,
            refresh,
            gated,
            watch,
            session: None,
            health: None,
            reported_draining: false,
            budget: None,
        })
    }

    /// Step 1: everything up to serving.
    ///
    /// # Errors
    ///
    /// The first startup step that failed (`Load`, `Register`,
    /// `DependencyTimeout`, `Dependency`, `Initialized`, `Host`, `Session`,
    /// `Health`).
    pub(super) async fn start(&mut self) -> Result<Started, RunError> {
        let module = self.module;
        module
            .on_load(&self.cx)
            .await
            .map_err(hook_error(RunErrorKind::Load))?;
        if self.register().await? == Started::Stopped {
            return Ok(Started::Stopped);
        }
        if self.dependencies_ready().await? == Started::Stopped {
            return Ok(Started::Stopped);
        }
        module
            .on_initialized(&self.cx)
            .await
            .map_err(hook_error(RunErrorKind::Initialized))?;
        self.prepare_hosts().await?;
        self.report_initialized().await?;
        self.open_health().await?;
        if self.stop.is_cancelled() {
            return Ok(Started::Stopped);
        }
        Ok(Started::Serving)
    }

    /// Registers STARTING (waiting for discovery to serve, within the
    /// startup timeout) and starts the renewals. Nothing without discovery.
    async fn register(&mut self) -> Result<Started, RunError> {
        let (Some(client), Some(d)) = (&self.client, &self.discovery) else {
            return Ok(Started::Serving);
        };
        let started = until(
            &self.stop,
            Session::start_when_served(
                client.clone(),
                self.spec.descriptor.clone(),
                self.rollout.clone(),
                d.startup_timeout,
            ),
        )
        .await;
        let Some(started) = started else {
            return Ok(Started::Stopped);
        };
        let started = started.map_err(|e| {
            let id = self.spec.module_id();
            let mut message = format!("could not register {id}");
            if e.code() == Some(abi_wire::ErrorCode::Unauthenticated.as_str()) {
                message.push_str(&format!(
                    " (discovery refused its token: ABI_MODULE_KEY must be what `abictl key {id}` prints \
                     for this project's secret; the key of another module id is refused)"
                ));
            }
            RunError::new(RunErrorKind::Register, message).with_source(e)
        })?;
        started.set_health_summary_interval(d.health_summary_interval);
        self.cx.set_session(started.handle());
        self.session = Some(started);
        Ok(Started::Serving)
    }

    /// Waits until every dependency has a READY instance, within the
    /// startup timeout. Nothing without discovery or dependencies.
    async fn dependencies_ready(&mut self) -> Result<Started, RunError> {
        let (Some(_), Some(d)) = (&self.client, &self.discovery) else {
            return Ok(Started::Serving);
        };
        if self.dependencies.is_empty() {
            return Ok(Started::Serving);
        }
        let waited = until(
            &self.stop,
            tokio::time::timeout(
                d.startup_timeout,
                gate::dependencies_ready(self.cx.modules(), &mut self.watch, self.refresh),
            ),
        )
        .await;
        match waited {
            None => Ok(Started::Stopped),
            Some(Err(_)) => {
                let ids: Vec<_> = self
                    .dependencies
                    .iter()
                    .map(|(id, _)| id.as_str())
                    .collect();
                Err(RunError::new(
                    RunErrorKind::DependencyTimeout,
                    format!(
                        "required modules did not become ready within {:?}: {ids:?}",
                        d.startup_timeout
                    ),
                )
                .with_code(DEPENDENCY_TIMEOUT_CODE))
            }
            Some(Ok(Err(err))) => {
                Err(RunError::new(RunErrorKind::Dependency, err.to_string()).with_source(err))
            }
            Some(Ok(Ok(()))) => Ok(Started::Serving),
        }
    }

    /// Reports the instance initialized with one renewal now; a failure
    /// that retries can fix is left to the background renewals.
    async fn report_initialized(&self) -> Result<(), RunError> {
        let Some(session) = &self.session else {
            return Ok(());
        };
        session.set_initialized();
        match session.renew().await {
            Ok(status) => {
                info!(instance_id = %session.instance_id(), status = %status, "module initialized")
            }
            // The background renewals report it again and handle lease loss.
            Err(err) if err.is_retryable() || err.kind() == CallErrorKind::LeaseExpired => {
                warn!(error = %err, "could not report initialized yet");
            }
            Err(err) => {
                return Err(RunError::new(RunErrorKind::Session, err.to_string()).with_source(err));
            }
        }
        Ok(())
    }

    /// Opens the health probe, when configured.
    async fn open_health(&mut self) -> Result<(), RunError> {
        let Some(addr) = self.config.health else {
            return Ok(());
        };
        let status_cx = self.cx.clone();
        let server = HealthServer::start(addr, Arc::new(move || status_cx.status()))
            .await
            .map_err(|e| {
                RunError::new(RunErrorKind::Health, format!("cannot listen on {addr}"))
                    .with_source(e)
            })?;
        self.cx.set_health_addr(server.addr());
        self.health = Some(server);
        Ok(())
    }
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
