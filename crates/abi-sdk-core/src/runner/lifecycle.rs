//! [`Lifecycle`]: one run of a module as four steps, `start`, `serve`,
//! `drain` and `cleanup`, the four lines of the diagram in `runner/mod.rs`.
//!
//! The steps share the state a run builds up (the session, the registry
//! watch, the health probe, the shutdown budget) as fields of one struct,
//! so each step is a method that reads what the previous ones left.
//! `startup.rs` holds `start` (and the connection), `drain.rs` holds
//! `drain` and `cleanup`; `serve` is here.
//!
//! Hosts plug in at four named points: [`Lifecycle::prepare_hosts`] before
//! the instance reports itself initialized, [`Lifecycle::start_job_hosts`]
//! when a rollout's instance serves, [`Lifecycle::drain_hosts`] all at once
//! while draining, and [`Lifecycle::close_hosts`] one by one, in a fixed
//! order, while cleaning up.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::budget::Budget;
use super::gate;
use super::{Context, HookResult, Module, ModuleSpec, RunError, RunErrorKind};
use crate::client::DiscoveryClient;
use crate::config::{Config, DiscoveryConfig};
use crate::error::BoxError;
use crate::health::HealthServer;
use crate::host::{Host, Links, MissingLink, ServedHost, close};
use crate::local::LocalDiscovery;
use crate::session::{Rollout, Session, SessionError};
use crate::token::TokenSource;
use crate::watch::RegistryWatch;

/// What a run is given: the checked configuration and the builder's parts.
pub(super) struct Parts<'a> {
    pub(super) spec: &'a ModuleSpec,
    pub(super) config: &'a Config,
    pub(super) token: Option<TokenSource>,
    /// The runner's plain hosts.
    pub(super) hosts: Vec<Arc<dyn Host>>,
    /// The runner's gated hosts.
    pub(super) job_hosts: Vec<Arc<dyn Host>>,
    /// What the spec serves, bound once the instance registered.
    pub(super) served: Vec<Arc<dyn ServedHost>>,
    pub(super) stop: CancellationToken,
    pub(super) local: Option<Arc<dyn LocalDiscovery>>,
}

/// One run of `module`, from connecting to returning.
pub(super) struct Lifecycle<'a, M> {
    pub(super) module: &'a M,
    pub(super) spec: &'a ModuleSpec,
    pub(super) config: &'a Config,
    /// Plain hosts: those bound from the spec, then the runner's.
    pub(super) hosts: Vec<Arc<dyn Host>>,
    /// Gated hosts: those bound from the spec (the job host first), then
    /// the runner's.
    pub(super) job_hosts: Vec<Arc<dyn Host>>,
    /// What the spec serves; bound (and moved into `hosts` and `job_hosts`)
    /// by `prepare_hosts`.
    pub(super) served: Vec<Arc<dyn ServedHost>>,
    /// A stop request (a signal or the caller's token); only ever that.
    pub(super) stop: CancellationToken,
    /// What the module sees as "stop taking work": cancelled by a stop
    /// request, and by the runner when it drains for discovery. `stop`
    /// itself stays a stop request only, so one arriving while draining is
    /// noticed.
    pub(super) stopping: CancellationToken,
    /// Cancelled once the NATS client gives up reconnecting.
    pub(super) lost: CancellationToken,
    /// `None` with an in-process service.
    pub(super) nats: Option<async_nats::Client>,
    pub(super) cx: Context,
    /// `None` without discovery.
    pub(super) client: Option<DiscoveryClient>,
    pub(super) discovery: Option<DiscoveryConfig>,
    pub(super) dependencies: Vec<(String, u32)>,
    pub(super) rollout: Rollout,
    /// The readiness polling fallback.
    pub(super) refresh: Duration,
    /// Whether job hosts wait for the rollout's cutover.
    pub(super) gated: bool,
    pub(super) watch: Option<RegistryWatch>,
    pub(super) session: Option<Session>,
    pub(super) health: Option<HealthServer>,
    /// Whether `drain` reported the instance draining already.
    pub(super) reported_draining: bool,
    /// Set when a stop request arrives; otherwise when cleaning up.
    pub(super) budget: Option<Budget>,
}

/// How `start` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Started {
    /// The module serves next.
    Serving,
    /// A stop request arrived first: the module cleans up and ends cleanly.
    Stopped,
}

/// How the serving phase ended.
pub(super) enum Ended {
    Run(Result<(), BoxError>),
    /// A stop request: a signal or the caller's token.
    Stop,
    /// `run` returned because a stop request had begun (it waits on
    /// `stopping`, which a stop cancels before the stop token itself reads
    /// cancelled): the module drains all the same, `run` already over.
    StopAfterRun(Result<(), BoxError>),
    /// Discovery answered DRAINING (a newer generation serves).
    Drain,
    Session(SessionError),
    Gate(RunError),
    Lost,
}

/// Why the module drains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DrainReason {
    /// A stop request: the shutdown budget starts now.
    Stop,
    /// Discovery asked for it: the work gets the drain timeout, until a stop
    /// request brings the budget in.
    Requested,
}

impl<M: Module> Lifecycle<'_, M> {
    /// The four steps, in order; `cleanup` runs whatever happened before it.
    ///
    /// # Errors
    ///
    /// The first step that failed, else `on_unloaded`'s failure.
    pub(super) async fn run(mut self) -> Result<(), RunError> {
        let outcome = self.start_serve_drain().await;
        self.cleanup(outcome).await
    }

    /// `start`, then `serve` until something ends it, then `drain` when a
    /// stop or discovery asked for it. A stop request during `start` ends
    /// the module cleanly.
    async fn start_serve_drain(&mut self) -> Result<(), RunError> {
        if self.start().await? == Started::Stopped {
            return Ok(());
        }
        // Copied out so that the future borrows the module, not `self`.
        let module = self.module;
        let run = module.run(self.cx.clone());
        tokio::pin!(run);
        match self.serve(run.as_mut()).await {
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
            Ended::Stop => {
                self.drain(DrainReason::Stop, run).await;
                Ok(())
            }
            Ended::StopAfterRun(result) => {
                if let Err(err) = result {
                    warn!(error = %err, "run failed as the module began to stop");
                }
                // `run` is over: nothing of it is polled again.
                self.drain(DrainReason::Stop, std::pin::pin!(std::future::pending()))
                    .await;
                Ok(())
            }
            Ended::Drain => {
                self.drain(DrainReason::Requested, run).await;
                Ok(())
            }
        }
    }

    /// Serves: `run` goes on until a stop request, a drain discovery asks
    /// for, the lease or the connection lost for good, or `run` returning.
    /// In a rollout the job hosts start here, once the instance serves.
    ///
    /// # Cancel safety
    ///
    /// Not meant to be cancelled: `run` is polled in place and may be
    /// mid-way through any await.
    async fn serve<R>(&mut self, mut run: Pin<&mut R>) -> Ended
    where
        R: Future<Output = HookResult>,
    {
        let handle = self.session.as_ref().map(Session::handle);
        let drain_requested = handle
            .as_ref()
            .map(|s| s.drain_requested())
            .unwrap_or_default();
        let (gated, refresh, job_hosts) = (self.gated, self.refresh, &self.job_hosts);
        let watch = &mut self.watch;
        let gate = async {
            if let (true, Some(handle)) = (gated, &handle) {
                gate::cutover(handle, watch, refresh).await;
                info!("rollout cut over; starting job hosts");
                Self::start_job_hosts(job_hosts).await?;
            }
            std::future::pending::<Result<(), RunError>>().await
        };
        tokio::pin!(gate);
        // Biased: a stop wakes `run` too (it usually waits on `stopping`), and
        // the stop must win so that the module drains. Every branch is cancel
        // safe: the cancelled futures are either polled again later (`run`)
        // or only wait (tokens, the session's task, the gate, which is
        // dropped only when serving ends).
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Ended::Stop,
            () = drain_requested.cancelled() => Ended::Drain,
            () = self.lost.cancelled() => Ended::Lost,
            // A stop cancels `stopping` (a child of the stop token) before
            // the stop token reads cancelled, and another worker may poll
            // this in between: `run`, waiting on `stopping`, returns first.
            // That is still a stop, and the work in flight must drain.
            result = run.as_mut() => if self.stopping.is_cancelled() {
                Ended::StopAfterRun(result)
            } else {
                Ended::Run(result)
            },
            err = session_failed(&mut self.session) => Ended::Session(err),
            result = &mut gate => match result {
                Err(err) => Ended::Gate(err),
                Ok(()) => Ended::Stop,
            },
        }
    }

    /// Host plug-in point, before the instance reports itself initialized:
    /// plain hosts start; job hosts only prepare in a rollout (they start
    /// at the cutover) and start at once otherwise.
    ///
    /// # Errors
    ///
    /// [`RunErrorKind::Host`] from the first host that failed.
    pub(super) async fn prepare_hosts(&mut self) -> Result<(), RunError> {
        self.bind_served()?;
        for host in &self.hosts {
            host.start()
                .await
                .map_err(host_error(host.as_ref(), "start"))?;
        }
        for host in &self.job_hosts {
            if self.gated {
                // Only what must exist before this generation serves.
                host.prepare()
                    .await
                    .map_err(host_error(host.as_ref(), "prepare"))?;
            } else {
                host.start()
                    .await
                    .map_err(host_error(host.as_ref(), "start"))?;
            }
        }
        Ok(())
    }

    /// Builds the running hosts of what the spec serves from the module's
    /// links: gated ones go first among the job hosts, the others first
    /// among the plain hosts, each in declaration order.
    ///
    /// # Errors
    ///
    /// [`RunErrorKind::Host`] naming the first host and what the module lacks.
    fn bind_served(&mut self) -> Result<(), RunError> {
        let Some(first) = self.served.first() else {
            return Ok(());
        };
        let links = self.links().map_err(|missing| {
            RunError::new(
                RunErrorKind::Host,
                format!("host {} needs {missing}", first.name()),
            )
            .with_source(missing)
        })?;
        let (mut gated, mut plain) = (Vec::new(), Vec::new());
        for declared in std::mem::take(&mut self.served) {
            let bound = declared.bind(&links);
            if declared.gated() {
                gated.push(bound);
            } else {
                plain.push(bound);
            }
        }
        gated.append(&mut self.job_hosts);
        plain.append(&mut self.hosts);
        (self.job_hosts, self.hosts) = (gated, plain);
        Ok(())
    }

    /// What a served host is built from, once the module registered.
    fn links(&self) -> Result<Links, MissingLink> {
        let cx = &self.cx;
        let nats = cx.nats().ok_or(MissingLink::Nats)?.clone();
        let discovery = cx.discovery().ok_or(MissingLink::Discovery)?.clone();
        let documents = cx.documents().ok_or(MissingLink::Nats)?;
        let session = cx.session().ok_or(MissingLink::Registration)?.clone();
        Ok(Links::new(nats, discovery, documents, session))
    }

    /// Host plug-in point, when a rollout's instance serves: the job hosts
    /// start, in order.
    ///
    /// # Errors
    ///
    /// [`RunErrorKind::Host`] from the first host that failed.
    async fn start_job_hosts(job_hosts: &[Arc<dyn Host>]) -> Result<(), RunError> {
        for host in job_hosts {
            host.start()
                .await
                .map_err(host_error(host.as_ref(), "start"))?;
        }
        Ok(())
    }

    /// Host plug-in point, while draining: every host drains at the same
    /// time, each given `left`; a failure is logged and changes nothing else.
    pub(super) async fn drain_hosts(
        hosts: &[Arc<dyn Host>],
        job_hosts: &[Arc<dyn Host>],
        left: Duration,
    ) {
        let waits = hosts.iter().chain(job_hosts).map(|h| async move {
            if let Err(err) = h.drain(left).await {
                warn!(host = h.name(), error = %err, "host drain failed");
            }
        });
        join_all(waits).await;
    }

    /// Host plug-in point, while cleaning up: every host closes, one after
    /// the other, in a fixed order: job hosts first, then plain hosts, each
    /// kind in the order they were declared. Each gets an equal share of
    /// the time left until `until` and is left behind at the end of it, so
    /// one that overruns cannot take the others' time.
    pub(super) async fn close_hosts(&self, until: Instant) {
        let all: Vec<&Arc<dyn Host>> = self.job_hosts.iter().chain(&self.hosts).collect();
        for (i, host) in all.iter().enumerate() {
            let deadline = close::share(Instant::now(), until, all.len() - i);
            if tokio::time::timeout_at(deadline, host.close(deadline))
                .await
                .is_err()
            {
                warn!(
                    host = host.name(),
                    "host still closing at its deadline; going on without it"
                );
            }
        }
    }

    /// Whether a call over NATS can get anywhere now. Without a connection
    /// the client queues requests until it reconnects, so they could only
    /// run into their deadline.
    pub(super) fn online(&self) -> bool {
        !self.lost.is_cancelled()
            && self
                .nats
                .as_ref()
                .is_none_or(|n| n.connection_state() == async_nats::connection::State::Connected)
    }
}

/// A hook's failure as the run's error of `kind`.
pub(super) fn hook_error(kind: RunErrorKind) -> impl FnOnce(BoxError) -> RunError {
    move |err| RunError::new(kind, err.to_string()).with_source(err)
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

/// Waits for the session's renewals to end for good; pending without one.
async fn session_failed(session: &mut Option<Session>) -> SessionError {
    match session.as_mut() {
        Some(session) => session.failed().await,
        None => std::future::pending().await,
    }
}
