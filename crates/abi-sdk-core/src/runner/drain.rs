//! The way down: `drain` (stop taking work, report DRAINING, let work in
//! flight finish) and `cleanup` (close the probe and the hosts,
//! `on_unloaded`, unregister, flush), both within the shutdown budget
//! ([`super::budget`]).

use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, warn};

use super::budget::{self, Budget};
use super::lifecycle::{DrainReason, Lifecycle, hook_error};
use super::{HookResult, Module, RunError, RunErrorKind};
use crate::session::Session;

impl<M: Module> Lifecycle<'_, M> {
    /// Step 3: refuses new work, reports the instance draining and, at the
    /// same time, drains the hosts and waits for the work guards; `run`
    /// keeps going meanwhile (it may be doing some of that work).
    ///
    /// A stop request starts the shutdown budget; a drain discovery asked
    /// for has no deadline from outside: its work gets the drain timeout,
    /// until a stop request brings the budget in.
    pub(super) async fn drain<R>(&mut self, reason: DrainReason, run: Pin<&mut R>)
    where
        R: Future<Output = HookResult>,
    {
        // New work is refused from here on.
        self.stopping.cancel();
        let drain_started = Instant::now();
        if reason == DrainReason::Stop {
            self.budget = Some(Budget::start(self.config.shutdown_grace));
            info!(grace = ?self.config.shutdown_grace, "module stopping");
        } else {
            info!(timeout = ?self.config.drain_timeout, "discovery asked this instance to drain");
        }
        let early = self.budget;
        let report_limit = early.map_or(Some(budget::STEP_CAP), |b| b.step());
        let online = self.online();
        let session = &self.session;
        let report = async {
            if let Some(session) = session {
                session.set_draining();
                report_draining(session, report_limit, online).await;
            }
        };
        self.reported_draining = session.is_some();
        let (config, stop, cx) = (self.config, &self.stop, &self.cx);
        let (hosts, job_hosts) = (&self.hosts, &self.job_hosts);
        let drain = async {
            let first_until = match early {
                Some(b) => b.work_deadline(config.drain_timeout),
                None => drain_started + config.drain_timeout,
            };
            let left = first_until.saturating_duration_since(Instant::now());
            let all = async {
                Self::drain_hosts(hosts, job_hosts, left).await;
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
            result = run => {
                if let Err(err) = result {
                    warn!(error = %err, "run failed while draining");
                }
                both.await
            }
        };
        if late.is_some() {
            self.budget = late;
        }
    }

    /// Step 4, whatever happened before: closes the health probe, reports
    /// draining if `drain` did not, closes the hosts, calls `on_unloaded`,
    /// unregisters and flushes NATS, within the shutdown budget (started
    /// now unless a stop request started it). Returns `outcome`, else
    /// `on_unloaded`'s failure.
    pub(super) async fn cleanup(mut self, outcome: Result<(), RunError>) -> Result<(), RunError> {
        self.stopping.cancel();
        let budget = self
            .budget
            .unwrap_or_else(|| Budget::start(self.config.shutdown_grace));
        if let Some(server) = self.health.take() {
            let limit = budget.step().unwrap_or_default();
            if tokio::time::timeout(limit, server.close()).await.is_err() {
                warn!("health probe still closing; leaving it");
            }
        }
        if let Some(session) = &self.session
            && !self.reported_draining
        {
            session.set_draining();
            report_draining(session, budget.step(), self.online()).await;
        }
        // The hosts close within the budget less its reserve, each in its
        // share, so `on_unloaded` is called even when a host overruns.
        self.close_hosts(budget.hosts_deadline()).await;
        // The module's own hook: normally quick, bounded by the whole budget.
        let unloaded = self.module.on_unloaded(&self.cx);
        let unloaded = match tokio::time::timeout_at(budget.deadline(), unloaded).await {
            Ok(unloaded) => unloaded.map_err(hook_error(RunErrorKind::Unloaded)),
            Err(_) => {
                warn!("on_unloaded still running at the end of the shutdown budget");
                Ok(())
            }
        };
        if let Some(session) = self.session.take() {
            match (self.online(), budget.step()) {
                (_, None) => session.abandon("the shutdown budget is spent").await,
                (false, _) => session.abandon("no NATS connection").await,
                (true, Some(limit)) => session.close_within(Some(limit)).await,
            }
        }
        drop(self.watch.take());
        // The module's last spans leave with what is left of the budget.
        if let Some(limit) = budget.step() {
            crate::traces::flush_within(limit).await;
        }
        if let Some(nats) = &self.nats {
            match (self.online(), budget.step()) {
                (_, None) => warn!("NATS flush skipped: the shutdown budget is spent"),
                (false, _) => warn!("NATS flush skipped: no connection"),
                (true, Some(limit)) => match tokio::time::timeout(limit, nats.flush()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => warn!(error = %err, "NATS flush failed at exit"),
                    Err(_) => warn!(timeout = ?limit, "NATS flush timed out at exit"),
                },
            }
        }
        info!(elapsed = ?budget.elapsed(), grace = ?self.config.shutdown_grace, "shutdown finished");
        outcome.and(unloaded)
    }
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
