//! [`Session`]: one registration and the lease that keeps it alive.
//!
//! The session registers STARTING with a random instance id and lease token,
//! then renews on the reference's schedule ([`crate::schedule`]). Each renewal
//! reports whether the process is initialized or draining; a renewal answered
//! DRAINING asks the process to drain. After `LEASE_EXPIRED` (the lease passed,
//! or an admin evicted the instance) the session registers again under the
//! same instance id with a new lease token, so what the process serves keeps
//! its address. Transient failures are retried with backoff; any other wire
//! code ends the session with an error.
//!
//! Every change of the instance's status (as discovery answers it, or
//! UNAVAILABLE when the lease is not confirmed) is logged once, and every
//! [`DEFAULT_HEALTH_SUMMARY_INTERVAL`] the renewal loop logs a summary of
//! the renewals since the session started.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::client::DiscoveryClient;
use crate::error::{CallError, CallErrorKind, Error, kind_display};
use crate::ids;
use crate::schedule;
use crate::status::Status;

/// The lease assumed before the service grants one (the reference's default).
const INITIAL_LEASE: Duration = Duration::from_secs(20);

/// The first pause before registering again while nobody serves discovery.
const FIRST_REGISTER_RETRY: Duration = Duration::from_millis(100);
/// The longest pause between those attempts: short, so a module starts
/// within about 2 s of discovery starting.
const MAX_REGISTER_RETRY: Duration = Duration::from_secs(2);

/// How often the lease health summary is logged by default.
pub const DEFAULT_HEALTH_SUMMARY_INTERVAL: Duration = Duration::from_secs(300);

/// Why a session failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionErrorKind {
    /// Registering was refused or failed (see the source [`CallError`]).
    Register,
    /// A renewal failed with a code that no retry can fix.
    Renew,
    /// The service did not answer before the deadline.
    TimedOut,
}

kind_display!(SessionErrorKind {
    Register => "registration failed",
    Renew => "lease renewal failed for good",
    TimedOut => "timed out",
});

/// A failed session.
pub type SessionError = Error<SessionErrorKind>;

/// Rollout membership sent at registration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// Shared by every process that must cut over together; empty: no rollout.
    pub id: String,
    /// The module ids the rollout needs before it replaces the previous one.
    pub modules: Vec<String>,
}

/// A live registration. Dropping it stops renewing (the lease then expires);
/// [`Session::close`] also unregisters.
#[derive(Debug)]
pub struct Session {
    handle: SessionHandle,
    heartbeat: Option<JoinHandle<SessionError>>,
}

/// A cheap handle on a session's state, for code that must not own it.
#[derive(Clone, Debug)]
pub struct SessionHandle {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    client: DiscoveryClient,
    descriptor: pb::ModuleDescriptor,
    rollout: Rollout,
    instance_id: String,
    state: Mutex<State>,
    /// One register or renew at a time, so flags and lease token stay consistent.
    exchange: tokio::sync::Mutex<()>,
    drain_requested: CancellationToken,
    status_tx: watch::Sender<Status>,
}

#[derive(Debug)]
struct State {
    lease_token: String,
    initialized: bool,
    draining: bool,
    lease: Duration,
    confirmed_until: Option<Instant>,
    status: Status,
    /// Zero: no health summary.
    summary_interval: Duration,
}

impl State {
    /// Records `new` as the instance's status; returns the previous one
    /// when it changed, so each change is logged once.
    fn set_status(&mut self, new: Status) -> Option<Status> {
        let old = std::mem::replace(&mut self.status, new);
        (old != new).then_some(old)
    }
}

/// Logs a status change of `instance_id`, if any.
fn log_status_change(instance_id: &str, change: Option<Status>, new: Status) {
    if let Some(old) = change {
        info!(instance_id = %instance_id, old_status = %old, new_status = %new, "instance status changed");
    }
}

/// Renewal outcomes since the renewal loop started, for the health summary.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tally {
    ok: u64,
    failed: u64,
    /// The last successful renewal, or the start of the loop (the lease was
    /// just confirmed by the registration).
    last_ok: Instant,
}

impl Tally {
    fn new(now: Instant) -> Self {
        Self {
            ok: 0,
            failed: 0,
            last_ok: now,
        }
    }

    fn record(&mut self, ok: bool, now: Instant) {
        if ok {
            self.ok = self.ok.saturating_add(1);
            self.last_ok = now;
        } else {
            self.failed = self.failed.saturating_add(1);
        }
    }

    /// Successful renewals over all renewals, 1.0 before the first one.
    fn success_rate(&self) -> f64 {
        let total = self.ok.saturating_add(self.failed);
        if total == 0 {
            1.0
        } else {
            self.ok as f64 / total as f64
        }
    }
}

impl Session {
    /// Registers `descriptor` (STARTING) and starts renewing in the background.
    ///
    /// # Errors
    ///
    /// [`SessionErrorKind::Register`] (or `TimedOut`) with the call's error as source.
    ///
    /// # Cancel safety
    ///
    /// Cancelling may leave a registration behind; its lease then expires.
    pub async fn start(
        client: DiscoveryClient,
        descriptor: pb::ModuleDescriptor,
        rollout: Rollout,
    ) -> Result<Self, SessionError> {
        Self::start_with_id(client, descriptor, rollout, ids::uuid4()).await
    }

    pub(crate) async fn start_with_id(
        client: DiscoveryClient,
        descriptor: pb::ModuleDescriptor,
        rollout: Rollout,
        instance_id: String,
    ) -> Result<Self, SessionError> {
        let shared = Self::shared(client, descriptor, rollout, instance_id);
        {
            let _exchange = shared.exchange.lock().await;
            shared.register().await.map_err(register_error)?;
        }
        Ok(Self::started(shared))
    }

    /// Registers like [`Session::start`], but while nobody serves discovery
    /// ("no responders": the service is not up yet, or restarting) tries
    /// again with backoff (100 ms doubling to 2 s) until `wait` has passed,
    /// logging once that it waits. Any other failure ends it at once.
    ///
    /// # Errors
    ///
    /// As [`Session::start`]; after `wait`, the last "no responders" failure
    /// (or `TimedOut` when an attempt was still running at the deadline).
    ///
    /// # Cancel safety
    ///
    /// As [`Session::start`].
    pub(crate) async fn start_when_served(
        client: DiscoveryClient,
        descriptor: pb::ModuleDescriptor,
        rollout: Rollout,
        wait: Duration,
    ) -> Result<Self, SessionError> {
        let deadline = Instant::now() + wait;
        let shared = Self::shared(client, descriptor, rollout, ids::uuid4());
        let mut delay = FIRST_REGISTER_RETRY;
        let mut last: Option<CallError> = None;
        loop {
            let attempt = {
                let _exchange = shared.exchange.lock().await;
                tokio::time::timeout_at(deadline, shared.register()).await
            };
            match attempt {
                Ok(Ok(_)) => break,
                Ok(Err(err))
                    if err.kind() == CallErrorKind::NoResponders
                        && Instant::now() + delay < deadline =>
                {
                    if last.is_none() {
                        info!(
                            module_id = %shared.descriptor.module_id,
                            wait_secs = wait.as_secs_f64(),
                            "discovery does not serve this project yet; waiting for it"
                        );
                    }
                    last = Some(err);
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(MAX_REGISTER_RETRY);
                }
                Ok(Err(err)) => return Err(register_error(err)),
                Err(_) => {
                    let last = last.map(|e| format!("; last: {e}")).unwrap_or_default();
                    return Err(SessionError::new(
                        SessionErrorKind::TimedOut,
                        format!("discovery did not register this instance within {wait:?}{last}"),
                    ));
                }
            }
        }
        Ok(Self::started(shared))
    }

    /// The state of a session not registered yet.
    fn shared(
        client: DiscoveryClient,
        descriptor: pb::ModuleDescriptor,
        rollout: Rollout,
        instance_id: String,
    ) -> Arc<Shared> {
        let (status_tx, _) = watch::channel(Status::Starting);
        Arc::new(Shared {
            client,
            descriptor,
            rollout,
            instance_id,
            state: Mutex::new(State {
                lease_token: ids::lease_token(),
                initialized: false,
                draining: false,
                lease: INITIAL_LEASE,
                confirmed_until: None,
                status: Status::Starting,
                summary_interval: DEFAULT_HEALTH_SUMMARY_INTERVAL,
            }),
            exchange: tokio::sync::Mutex::new(()),
            drain_requested: CancellationToken::new(),
            status_tx,
        })
    }

    /// Starts renewing the lease `shared` just registered.
    fn started(shared: Arc<Shared>) -> Self {
        info!(instance_id = %shared.instance_id, module_id = %shared.descriptor.module_id, "registered with discovery");
        let heartbeat = tokio::spawn(heartbeat(shared.clone()));
        Self {
            handle: SessionHandle { shared },
            heartbeat: Some(heartbeat),
        }
    }

    /// A handle sharing this session's state.
    pub fn handle(&self) -> SessionHandle {
        self.handle.clone()
    }

    /// Waits until the background renewals end for good and returns why.
    /// Pending forever while they run.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn failed(&mut self) -> SessionError {
        match self.heartbeat.as_mut() {
            Some(task) => {
                let result = task.await;
                self.heartbeat = None;
                match result {
                    Ok(err) => err,
                    Err(join) => SessionError::new(SessionErrorKind::Renew, "renewal task stopped")
                        .with_source(join),
                }
            }
            None => std::future::pending().await,
        }
    }

    /// Stops renewing and unregisters, best effort: on failure the lease expires.
    pub async fn close(self) {
        self.close_within(None).await;
    }

    /// Stops renewing, then unregisters, best effort, giving up after
    /// `limit` (`None`: the call's own deadline). Logs what happened; a
    /// lease left behind expires on its own.
    pub(crate) async fn close_within(mut self, limit: Option<Duration>) {
        let request = self.stop_renewing().await;
        let shared = &self.handle.shared;
        let call = shared.client.call(&request);
        let outcome = match limit {
            Some(limit) => tokio::time::timeout(limit, call).await,
            None => Ok(call.await),
        };
        match outcome {
            Ok(Ok(_)) => info!(instance_id = %shared.instance_id, "unregistered from discovery"),
            Ok(Err(err)) => {
                warn!(instance_id = %shared.instance_id, error = %err, "unregister failed; the lease will expire")
            }
            Err(_) => {
                warn!(instance_id = %shared.instance_id, timeout = ?limit, "unregister timed out; the lease will expire")
            }
        }
    }

    /// Stops renewing without unregistering (nothing could carry the
    /// request, or no time is left): the lease expires on its own. `why`
    /// goes to the log.
    pub(crate) async fn abandon(mut self, why: &'static str) {
        self.stop_renewing().await;
        warn!(instance_id = %self.handle.shared.instance_id, reason = why, "unregister skipped; the lease will expire");
    }

    /// Ends the renewals, marks the instance STOPPED and returns the
    /// request that unregisters it.
    async fn stop_renewing(&mut self) -> pb::UnregisterRequest {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
            let _ = task.await;
        }
        let shared = &self.handle.shared;
        let (lease_token, change) = {
            let mut state = shared.state();
            let change = state.set_status(Status::Stopped);
            state.confirmed_until = None;
            (state.lease_token.clone(), change)
        };
        log_status_change(&shared.instance_id, change, Status::Stopped);
        shared.status_tx.send_replace(Status::Stopped);
        pb::UnregisterRequest {
            instance_id: shared.instance_id.clone(),
            lease_token,
            ..Default::default()
        }
    }
}

/// A failed registration as a session error.
fn register_error(err: CallError) -> SessionError {
    let kind = if err.kind() == CallErrorKind::TimedOut {
        SessionErrorKind::TimedOut
    } else {
        SessionErrorKind::Register
    };
    SessionError::new(kind, format!("could not register with discovery: {err}")).with_source(err)
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
    }
}

impl std::ops::Deref for Session {
    type Target = SessionHandle;

    fn deref(&self) -> &SessionHandle {
        &self.handle
    }
}

impl SessionHandle {
    /// This process's instance id (kept across re-registrations).
    pub fn instance_id(&self) -> &str {
        &self.shared.instance_id
    }

    /// The module id registered.
    pub fn module_id(&self) -> &str {
        &self.shared.descriptor.module_id
    }

    /// The rollout this instance belongs to.
    pub fn rollout(&self) -> &Rollout {
        &self.shared.rollout
    }

    /// The last status discovery confirmed, or [`Status::Unavailable`] once
    /// the confirmed lease passed or the last renewal failed.
    pub fn current_status(&self) -> Status {
        let state = self.shared.state();
        match state.confirmed_until {
            Some(until) if Instant::now() < until => state.status,
            _ if state.status == Status::Stopped => Status::Stopped,
            _ => Status::Unavailable,
        }
    }

    /// Follows the status after each registration or renewal.
    pub fn status_changes(&self) -> watch::Receiver<Status> {
        self.shared.status_tx.subscribe()
    }

    /// Cancelled once discovery answered DRAINING (a newer generation took
    /// over) or the process asked to drain itself.
    pub fn drain_requested(&self) -> CancellationToken {
        self.shared.drain_requested.clone()
    }

    /// How often the renewal loop logs its health summary (renewals ok and
    /// failed since the start, success rate, time since the last success,
    /// status); default [`DEFAULT_HEALTH_SUMMARY_INTERVAL`], zero turns it off.
    pub fn set_health_summary_interval(&self, interval: Duration) {
        self.shared.state().summary_interval = interval;
    }

    /// Reports the instance initialized from the next renewal on.
    pub fn set_initialized(&self) {
        self.shared.state().initialized = true;
    }

    /// Reports the instance draining from the next renewal on. Draining is
    /// one way: it is never reported off again.
    pub fn set_draining(&self) {
        self.shared.state().draining = true;
    }

    /// Renews now (also reporting the flags) and returns the new status.
    ///
    /// # Errors
    ///
    /// The call's error; `LEASE_EXPIRED` is not handled here (the background
    /// renewals register again).
    ///
    /// # Cancel safety
    ///
    /// Cancelling may leave the renewal applied without its status recorded.
    pub async fn renew(&self) -> Result<Status, CallError> {
        let _exchange = self.shared.exchange.lock().await;
        self.shared.renew().await
    }
}

#[cfg(test)]
impl SessionHandle {
    /// A handle on a session that never registered (no renewal loop): its
    /// calls go to `client`, its status is `status`, confirmed for a minute.
    pub(crate) fn for_test(client: DiscoveryClient, rollout: Rollout, status: Status) -> Self {
        let (status_tx, _) = watch::channel(status);
        let shared = Arc::new(Shared {
            client,
            descriptor: pb::ModuleDescriptor {
                module_id: "m".into(),
                ..Default::default()
            },
            rollout,
            instance_id: ids::uuid4(),
            state: Mutex::new(State {
                lease_token: ids::lease_token(),
                initialized: false,
                draining: false,
                lease: INITIAL_LEASE,
                confirmed_until: Some(Instant::now() + Duration::from_secs(60)),
                status,
                summary_interval: Duration::ZERO,
            }),
            exchange: tokio::sync::Mutex::new(()),
            drain_requested: CancellationToken::new(),
            status_tx,
        });
        Self { shared }
    }

    /// Sets the status as a renewal answering `status` would.
    pub(crate) fn confirm_for_test(&self, status: Status) {
        self.shared.confirm(
            Instant::now(),
            60.0,
            Some(&pb::Instance {
                instance_id: self.shared.instance_id.clone(),
                status: status.as_str().into(),
                ..Default::default()
            }),
        );
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a panic elsewhere while updating plain fields;
        // they are still consistent enough to read and overwrite.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn confirm(
        &self,
        started: Instant,
        lease_seconds: f64,
        instance: Option<&pb::Instance>,
    ) -> Status {
        let lease = Duration::try_from_secs_f64(lease_seconds.max(0.0)).unwrap_or(INITIAL_LEASE);
        let status = instance
            .map(|i| Status::parse(&i.status))
            .unwrap_or(Status::Unknown);
        let change = {
            let mut state = self.state();
            state.lease = lease;
            state.confirmed_until = Some(started + lease);
            if status == Status::Draining {
                state.draining = true;
            }
            state.set_status(status)
        };
        log_status_change(&self.instance_id, change, status);
        if status == Status::Draining {
            self.drain_requested.cancel();
        }
        self.status_tx.send_replace(status);
        status
    }

    fn mark_unavailable(&self) {
        let change = self.state().set_status(Status::Unavailable);
        if change.is_some() {
            log_status_change(&self.instance_id, change, Status::Unavailable);
            self.status_tx.send_replace(Status::Unavailable);
        }
    }

    /// Registers under the current lease token. Callers hold `exchange`.
    async fn register(&self) -> Result<Status, CallError> {
        let lease_token = self.state().lease_token.clone();
        let started = Instant::now();
        let reply = self
            .client
            .call(&pb::RegisterRequest {
                descriptor: Some(self.descriptor.clone()),
                instance_id: self.instance_id.clone(),
                lease_token,
                rollout_id: self.rollout.id.clone(),
                rollout_modules: self.rollout.modules.clone(),
                ..Default::default()
            })
            .await?;
        Ok(self.confirm(started, reply.lease_seconds, reply.instance.as_ref()))
    }

    /// Renews, reporting the flags. Callers hold `exchange`.
    async fn renew(&self) -> Result<Status, CallError> {
        let request = {
            let state = self.state();
            pb::RenewRequest {
                instance_id: self.instance_id.clone(),
                lease_token: state.lease_token.clone(),
                initialized: state.initialized,
                draining: state.draining,
                ..Default::default()
            }
        };
        let started = Instant::now();
        let reply = self.client.call(&request).await?;
        Ok(self.confirm(started, reply.lease_seconds, reply.instance.as_ref()))
    }

    /// One renewal; after `LEASE_EXPIRED`, a fresh lease under the same id.
    async fn renew_or_register(&self) -> Result<Status, CallError> {
        let _exchange = self.exchange.lock().await;
        match self.renew().await {
            Err(err) if err.kind() == CallErrorKind::LeaseExpired => {
                self.mark_unavailable();
                warn!(instance_id = %self.instance_id, "lease lost; registering again under the same instance id");
                self.state().lease_token = ids::lease_token();
                let status = self.register().await?;
                info!(instance_id = %self.instance_id, status = %status, "registered again");
                Ok(status)
            }
            other => other,
        }
    }

    fn next_delay(&self, failures: u32) -> Duration {
        let state = self.state();
        let remaining = state
            .confirmed_until
            .map(|u| u.saturating_duration_since(Instant::now()));
        schedule::renew_delay(state.lease, failures, remaining, schedule::jitter())
    }
}

/// What the renewal loop drives: one attempt at a time, the schedule, and
/// how a failure shows. A trait so the loop runs on a paused clock in tests.
trait Renewal: Send + Sync + 'static {
    fn attempt(&self) -> impl Future<Output = Result<Status, CallError>> + Send;
    fn delay(&self, failures: u32) -> Duration;
    fn failed(&self);
    fn instance_id(&self) -> &str;
    /// Zero: no summary.
    fn summary_interval(&self) -> Duration;
    fn summary(&self, tally: &Tally, now: Instant);
}

impl Renewal for Shared {
    fn attempt(&self) -> impl Future<Output = Result<Status, CallError>> + Send {
        self.renew_or_register()
    }

    fn delay(&self, failures: u32) -> Duration {
        self.next_delay(failures)
    }

    fn failed(&self) {
        self.mark_unavailable();
    }

    fn instance_id(&self) -> &str {
        &self.instance_id
    }

    fn summary_interval(&self) -> Duration {
        self.state().summary_interval
    }

    fn summary(&self, tally: &Tally, now: Instant) {
        let status = self.state().status;
        info!(
            instance_id = %self.instance_id,
            renewals_ok = tally.ok,
            renewals_failed = tally.failed,
            success_rate = tally.success_rate(),
            secs_since_last_success = now.saturating_duration_since(tally.last_ok).as_secs_f64(),
            status = %status,
            "lease health (renewals since the session started)"
        );
    }
}

/// Renews until a failure no retry can fix, and returns it.
///
/// `LEASE_EXPIRED` is handled inside an attempt (a fresh registration); here
/// it only counts as a failure when registering again failed too.
///
/// After a renewal, once the summary interval passed since the last summary
/// (or the start), logs the counts since the start.
async fn heartbeat<R: Renewal>(lease: Arc<R>) -> SessionError {
    let mut failures = 0u32;
    let mut tally = Tally::new(Instant::now());
    let mut last_summary = Instant::now();
    loop {
        tokio::time::sleep(lease.delay(failures)).await;
        let outcome = lease.attempt().await;
        let now = Instant::now();
        tally.record(outcome.is_ok(), now);
        let interval = lease.summary_interval();
        if !interval.is_zero() && now.saturating_duration_since(last_summary) >= interval {
            lease.summary(&tally, now);
            last_summary = now;
        }
        match outcome {
            Ok(_) => failures = 0,
            Err(err) if err.is_retryable() || err.kind() == CallErrorKind::LeaseExpired => {
                lease.failed();
                failures = failures.saturating_add(1);
                warn!(instance_id = %lease.instance_id(), error = %err, failures, "lease renewal will retry");
            }
            Err(err) => {
                lease.failed();
                error!(instance_id = %lease.instance_id(), error = %err, "lease renewal cannot recover");
                return SessionError::new(
                    SessionErrorKind::Renew,
                    "discovery refused the lease renewal",
                )
                .with_source(err);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::VecDeque;

    use super::*;

    /// A lease of 20 s whose attempts follow a script and are timed.
    struct Scripted {
        outcomes: Mutex<VecDeque<Result<Status, CallErrorKind>>>,
        attempts: Mutex<Vec<Instant>>,
        confirmed_until: Mutex<Instant>,
        unavailable: Mutex<usize>,
        summary_interval: Duration,
        summaries: Mutex<Vec<(Tally, Instant)>>,
    }

    const LEASE: Duration = Duration::from_secs(20);

    impl Renewal for Scripted {
        fn attempt(&self) -> impl Future<Output = Result<Status, CallError>> + Send {
            let now = Instant::now();
            self.attempts.lock().unwrap().push(now);
            let outcome = self
                .outcomes
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Ok(Status::Ready));
            if outcome.is_ok() {
                *self.confirmed_until.lock().unwrap() = now + LEASE;
            }
            async move { outcome.map_err(|kind| CallError::new(kind, "scripted")) }
        }

        fn delay(&self, failures: u32) -> Duration {
            let left = self
                .confirmed_until
                .lock()
                .unwrap()
                .saturating_duration_since(Instant::now());
            schedule::renew_delay(LEASE, failures, Some(left), schedule::jitter())
        }

        fn failed(&self) {
            *self.unavailable.lock().unwrap() += 1;
        }

        fn instance_id(&self) -> &str {
            "i"
        }

        fn summary_interval(&self) -> Duration {
            self.summary_interval
        }

        fn summary(&self, tally: &Tally, now: Instant) {
            self.summaries.lock().unwrap().push((*tally, now));
        }
    }

    fn scripted(outcomes: Vec<Result<Status, CallErrorKind>>) -> Arc<Scripted> {
        scripted_with_summary(outcomes, DEFAULT_HEALTH_SUMMARY_INTERVAL)
    }

    fn scripted_with_summary(
        outcomes: Vec<Result<Status, CallErrorKind>>,
        summary_interval: Duration,
    ) -> Arc<Scripted> {
        Arc::new(Scripted {
            outcomes: Mutex::new(outcomes.into()),
            attempts: Mutex::default(),
            confirmed_until: Mutex::new(Instant::now() + LEASE),
            unavailable: Mutex::default(),
            summary_interval,
            summaries: Mutex::default(),
        })
    }

    fn gaps(lease: &Scripted) -> Vec<f64> {
        let attempts = lease.attempts.lock().unwrap();
        attempts
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect()
    }

    fn near(actual: f64, expected: f64) -> bool {
        (expected * 0.9 - 1e-3..=expected * 1.1 + 1e-3).contains(&actual)
    }

    #[tokio::test(start_paused = true)]
    async fn healthy_renewals_every_five_seconds_and_backoff_within_the_lease() {
        use CallErrorKind::*;
        let lease = scripted(vec![
            Ok(Status::Ready),
            Err(Unavailable),
            Err(RegistryBusy),
            Ok(Status::Ready),
            Ok(Status::Ready),
        ]);
        let started = Instant::now();
        let task = tokio::spawn(heartbeat(lease.clone()));
        // Let the paused clock run through the script and one more attempt.
        tokio::time::sleep(Duration::from_secs(40)).await;
        task.abort();
        let first = (lease.attempts.lock().unwrap()[0] - started).as_secs_f64();
        assert!(near(first, 5.0), "first renewal after {first}");
        let gaps = gaps(&lease);
        // Renewed at ~5 s, so the lease runs to ~25 s. The failure at ~10 s
        // would double the wait to ~10 s, but half of the ~15 s left caps it
        // (7.5 s); the next failure gets half of what is left then.
        assert!(near(gaps[0], 5.0), "{gaps:?}");
        assert!((gaps[1] - (20.0 - gaps[0]) / 2.0).abs() < 1e-3, "{gaps:?}");
        assert!((gaps[2] - gaps[1] / 2.0).abs() < 1e-3, "{gaps:?}");
        assert!(
            near(gaps[3], 5.0),
            "back to healthy after a success: {gaps:?}"
        );
        assert_eq!(*lease.unavailable.lock().unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_lease_backs_off_by_half_a_lease_without_spinning() {
        let lease = scripted(vec![Err(CallErrorKind::TimedOut); 6]);
        let task = tokio::spawn(heartbeat(lease.clone()));
        tokio::time::sleep(Duration::from_secs(120)).await;
        task.abort();
        let gaps = gaps(&lease);
        assert!(gaps.len() >= 4, "{gaps:?}");
        // Once the lease passed, each wait is the backoff capped at half a lease.
        for gap in &gaps[2..] {
            assert!((0.05..=10.0 + 1e-3).contains(gap), "{gaps:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_code_no_retry_can_fix_ends_the_loop() {
        let lease = scripted(vec![
            Ok(Status::Ready),
            Err(CallErrorKind::PermissionDenied),
        ]);
        let err = tokio::time::timeout(Duration::from_secs(60), heartbeat(lease.clone()))
            .await
            .unwrap();
        assert_eq!(err.kind(), SessionErrorKind::Renew);
        assert_eq!(lease.attempts.lock().unwrap().len(), 2);
        assert_eq!(*lease.unavailable.lock().unwrap(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn lease_expired_after_a_failed_registration_is_retried() {
        let lease = scripted(vec![Err(CallErrorKind::LeaseExpired), Ok(Status::Starting)]);
        let task = tokio::spawn(heartbeat(lease.clone()));
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!task.is_finished());
        task.abort();
        assert!(lease.attempts.lock().unwrap().len() >= 3);
    }

    #[tokio::test(start_paused = true)]
    async fn the_health_summary_counts_renewals_since_the_start() {
        use CallErrorKind::*;
        // ok, fail, fail, ok, then ok forever.
        let lease = scripted_with_summary(
            vec![
                Ok(Status::Ready),
                Err(Unavailable),
                Err(TimedOut),
                Ok(Status::Ready),
            ],
            Duration::from_secs(60),
        );
        let started = Instant::now();
        let task = tokio::spawn(heartbeat(lease.clone()));
        tokio::time::sleep(Duration::from_secs(150)).await;
        task.abort();
        let summaries = lease.summaries.lock().unwrap().clone();
        let attempts = lease.attempts.lock().unwrap().clone();
        // A summary at the first renewal a minute or more after the last one
        // (or the start); healthy renewals are at most ~5.5 s apart.
        assert_eq!(summaries.len(), 2, "{summaries:?}");
        let mut previous = started;
        for (tally, at) in &summaries {
            let gap = (*at - previous).as_secs_f64();
            assert!((60.0..66.0).contains(&gap), "{gap}");
            previous = *at;
            let so_far = attempts.iter().filter(|a| **a <= *at).count() as u64;
            assert_eq!(tally.ok + tally.failed, so_far, "{tally:?}");
            assert_eq!(tally.failed, 2, "{tally:?}");
            assert!((tally.success_rate() - (so_far - 2) as f64 / so_far as f64).abs() < 1e-9);
            // The summary follows a successful renewal.
            assert_eq!(tally.last_ok, *at);
        }
        // A zero interval turns the summary off.
        let quiet = scripted_with_summary(vec![], Duration::ZERO);
        let task = tokio::spawn(heartbeat(quiet.clone()));
        tokio::time::sleep(Duration::from_secs(120)).await;
        task.abort();
        assert!(quiet.summaries.lock().unwrap().is_empty());
        assert!(quiet.attempts.lock().unwrap().len() > 10);
    }

    #[test]
    fn tally_reports_time_since_the_last_success_and_the_rate() {
        let start = Instant::now();
        let mut tally = Tally::new(start);
        assert_eq!(tally.success_rate(), 1.0);
        tally.record(true, start + Duration::from_secs(5));
        tally.record(false, start + Duration::from_secs(10));
        tally.record(false, start + Duration::from_secs(15));
        tally.record(true, start + Duration::from_secs(20));
        tally.record(false, start + Duration::from_secs(25));
        assert_eq!((tally.ok, tally.failed), (2, 3));
        assert!((tally.success_rate() - 0.4).abs() < 1e-9);
        assert_eq!(tally.last_ok, start + Duration::from_secs(20));
    }

    #[test]
    fn a_status_change_is_reported_once_not_on_every_renewal() {
        let mut state = State {
            lease_token: String::new(),
            initialized: false,
            draining: false,
            lease: LEASE,
            confirmed_until: None,
            status: Status::Starting,
            summary_interval: DEFAULT_HEALTH_SUMMARY_INTERVAL,
        };
        // What renewals and failures would set, in order.
        let sequence = [
            Status::Starting,
            Status::Starting,
            Status::Degraded,
            Status::Degraded,
            Status::Ready,
            Status::Ready,
            Status::Ready,
            Status::Unavailable,
            Status::Unavailable,
            Status::Starting,
            Status::Ready,
            Status::Draining,
            Status::Draining,
        ];
        let changes: Vec<(Status, Status)> = sequence
            .iter()
            .filter_map(|&new| state.set_status(new).map(|old| (old, new)))
            .collect();
        assert_eq!(
            changes,
            vec![
                (Status::Starting, Status::Degraded),
                (Status::Degraded, Status::Ready),
                (Status::Ready, Status::Unavailable),
                (Status::Unavailable, Status::Starting),
                (Status::Starting, Status::Ready),
                (Status::Ready, Status::Draining),
            ]
        );
        assert_eq!(state.status, Status::Draining);
    }
}
