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

mod heartbeat;
mod lease;

use std::sync::Arc;
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::client::DiscoveryClient;
use crate::error::{CallError, CallErrorKind, Error, kind_display};
use crate::ids;
use crate::status::Status;
use lease::Lease;

/// The first pause before registering again while nobody serves discovery
/// (or it answered a code that asks for a retry).
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
    lease: Arc<Lease>,
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
        let lease = Self::unregistered(client, descriptor, rollout, instance_id);
        {
            let _exchange = lease.exchange.lock().await;
            lease.register().await.map_err(register_error)?;
        }
        Ok(Self::started(lease))
    }

    /// Registers like [`Session::start`], but after a failure a retry may fix
    /// tries again with backoff (100 ms doubling to 2 s) until `wait` has
    /// passed: "no responders" (the service is not up yet, or restarting;
    /// logged once), and the codes that ask for a retry, such as
    /// `REGISTRY_BUSY` or `UNAVAILABLE` while the bucket's stream elects a
    /// new leader after a node died (each logged). A registration is
    /// idempotent: every attempt sends the same instance id and lease token,
    /// and discovery answers a repeat without a second record. Any other
    /// failure ends it at once.
    ///
    /// # Errors
    ///
    /// As [`Session::start`]; after `wait`, the last retryable failure (or
    /// `TimedOut` when an attempt was still running at the deadline).
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
        let lease = Self::unregistered(client, descriptor, rollout, ids::uuid4());
        let mut delay = FIRST_REGISTER_RETRY;
        let mut last: Option<CallError> = None;
        loop {
            let attempt = {
                let _exchange = lease.exchange.lock().await;
                tokio::time::timeout_at(deadline, lease.register()).await
            };
            match attempt {
                Ok(Ok(_)) => break,
                Ok(Err(err)) if err.is_retryable() && Instant::now() + delay < deadline => {
                    if err.kind() != CallErrorKind::NoResponders {
                        warn!(
                            module_id = %lease.descriptor.module_id,
                            error = %err,
                            "registration will retry"
                        );
                    } else if last.is_none() {
                        info!(
                            module_id = %lease.descriptor.module_id,
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
        Ok(Self::started(lease))
    }

    /// The state of a session not registered yet.
    fn unregistered(
        client: DiscoveryClient,
        descriptor: pb::ModuleDescriptor,
        rollout: Rollout,
        instance_id: String,
    ) -> Arc<Lease> {
        Arc::new(Lease::new(
            client,
            descriptor,
            rollout,
            instance_id,
            Status::Starting,
            None,
            DEFAULT_HEALTH_SUMMARY_INTERVAL,
        ))
    }

    /// Starts renewing `lease`, just registered.
    fn started(lease: Arc<Lease>) -> Self {
        info!(instance_id = %lease.instance_id, module_id = %lease.descriptor.module_id, "registered with discovery");
        let heartbeat = heartbeat::spawn(lease.clone());
        Self {
            handle: SessionHandle { lease },
            heartbeat: Some(heartbeat),
        }
    }

    /// A handle sharing this session's state.
    pub fn handle(&self) -> SessionHandle {
        self.handle.clone()
    }

    /// This process's instance id (kept across re-registrations).
    pub fn instance_id(&self) -> &str {
        self.handle.instance_id()
    }

    /// The module id registered.
    pub fn module_id(&self) -> &str {
        self.handle.module_id()
    }

    /// The rollout this instance belongs to.
    pub fn rollout(&self) -> &Rollout {
        self.handle.rollout()
    }

    /// As [`SessionHandle::current_status`].
    pub fn current_status(&self) -> Status {
        self.handle.current_status()
    }

    /// As [`SessionHandle::status_changes`].
    pub fn status_changes(&self) -> watch::Receiver<Status> {
        self.handle.status_changes()
    }

    /// As [`SessionHandle::drain_requested`].
    pub fn drain_requested(&self) -> CancellationToken {
        self.handle.drain_requested()
    }

    /// As [`SessionHandle::set_health_summary_interval`].
    pub fn set_health_summary_interval(&self, interval: Duration) {
        self.handle.set_health_summary_interval(interval);
    }

    /// As [`SessionHandle::set_initialized`].
    pub fn set_initialized(&self) {
        self.handle.set_initialized();
    }

    /// As [`SessionHandle::set_draining`].
    pub fn set_draining(&self) {
        self.handle.set_draining();
    }

    /// As [`SessionHandle::renew`].
    ///
    /// # Errors
    ///
    /// As [`SessionHandle::renew`].
    ///
    /// # Cancel safety
    ///
    /// As [`SessionHandle::renew`].
    pub async fn renew(&self) -> Result<Status, CallError> {
        self.handle.renew().await
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
    ///
    /// # Cancel safety
    ///
    /// Cancelling may leave the registration behind; its lease then expires.
    pub async fn close(self) {
        self.close_within(None).await;
    }

    /// Stops renewing, then unregisters, best effort, giving up after
    /// `limit` (`None`: the call's own deadline). Logs what happened; a
    /// lease left behind expires on its own.
    pub(crate) async fn close_within(mut self, limit: Option<Duration>) {
        let request = self.stop_renewing().await;
        let lease = &self.handle.lease;
        let call = lease.client.call(&request);
        let outcome = match limit {
            Some(limit) => tokio::time::timeout(limit, call).await,
            None => Ok(call.await),
        };
        match outcome {
            Ok(Ok(_)) => info!(instance_id = %lease.instance_id, "unregistered from discovery"),
            Ok(Err(err)) => {
                warn!(instance_id = %lease.instance_id, error = %err, "unregister failed; the lease will expire")
            }
            Err(_) => {
                warn!(instance_id = %lease.instance_id, timeout = ?limit, "unregister timed out; the lease will expire")
            }
        }
    }

    /// Stops renewing without unregistering (nothing could carry the
    /// request, or no time is left): the lease expires on its own. `why`
    /// goes to the log.
    pub(crate) async fn abandon(mut self, why: &'static str) {
        self.stop_renewing().await;
        warn!(instance_id = %self.handle.lease.instance_id, reason = why, "unregister skipped; the lease will expire");
    }

    /// Ends the renewals, marks the instance STOPPED and returns the
    /// request that unregisters it.
    async fn stop_renewing(&mut self) -> pb::UnregisterRequest {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
            let _ = task.await;
        }
        let lease = &self.handle.lease;
        let lease_token = lease.stop();
        pb::UnregisterRequest {
            instance_id: lease.instance_id.clone(),
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
    // The call's error is the source, not repeated in the message.
    let mut error = SessionError::new(kind, "discovery did not register the instance");
    if let Some(code) = err.code() {
        error = error.with_code(code.to_owned());
    }
    error.with_source(err)
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
    }
}

impl SessionHandle {
    /// This process's instance id (kept across re-registrations).
    pub fn instance_id(&self) -> &str {
        &self.lease.instance_id
    }

    /// The module id registered.
    pub fn module_id(&self) -> &str {
        &self.lease.descriptor.module_id
    }

    /// The lease token of the current registration (it changes when the
    /// instance registers again): what hosts show discovery to be vouched for.
    pub fn lease_token(&self) -> String {
        self.lease.state().lease_token.clone()
    }

    /// The descriptor registered.
    pub fn descriptor(&self) -> &pb::ModuleDescriptor {
        &self.lease.descriptor
    }

    /// The rollout this instance belongs to.
    pub fn rollout(&self) -> &Rollout {
        &self.lease.rollout
    }

    /// The last status discovery confirmed, or [`Status::Unavailable`] once
    /// the confirmed lease passed or the last renewal failed.
    pub fn current_status(&self) -> Status {
        self.lease.current_status()
    }

    /// Follows the status after each registration or renewal.
    pub fn status_changes(&self) -> watch::Receiver<Status> {
        self.lease.subscribe()
    }

    /// Cancelled once discovery answered DRAINING (a newer generation took
    /// over) or the process asked to drain itself.
    pub fn drain_requested(&self) -> CancellationToken {
        self.lease.drain_requested.clone()
    }

    /// How often the renewal loop logs its health summary (renewals ok and
    /// failed since the start, success rate, time since the last success,
    /// status); default [`DEFAULT_HEALTH_SUMMARY_INTERVAL`], zero turns it off.
    pub fn set_health_summary_interval(&self, interval: Duration) {
        self.lease.state().summary_interval = interval;
    }

    /// Reports the instance initialized from the next renewal on.
    pub fn set_initialized(&self) {
        self.lease.state().initialized = true;
    }

    /// Reports the instance draining from the next renewal on. Draining is
    /// one way: it is never reported off again.
    pub fn set_draining(&self) {
        self.lease.state().draining = true;
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
        let _exchange = self.lease.exchange.lock().await;
        self.lease.renew().await
    }
}

#[cfg(test)]
impl SessionHandle {
    /// A handle on a session that never registered (no renewal loop): its
    /// calls go to `client`, its status is `status`, confirmed for a minute.
    pub(crate) fn for_test(client: DiscoveryClient, rollout: Rollout, status: Status) -> Self {
        let descriptor = pb::ModuleDescriptor {
            module_id: "m".into(),
            ..Default::default()
        };
        let lease = Arc::new(Lease::new(
            client,
            descriptor,
            rollout,
            ids::uuid4(),
            status,
            Some(Instant::now() + Duration::from_secs(60)),
            Duration::ZERO,
        ));
        Self { lease }
    }

    /// Sets the status as a renewal answering `status` would.
    pub(crate) fn confirm_for_test(&self, status: Status) {
        self.lease.confirm(
            Instant::now(),
            60.0,
            Some(&pb::Instance {
                instance_id: self.lease.instance_id.clone(),
                status: status.as_str().into(),
                ..Default::default()
            }),
        );
    }
}
