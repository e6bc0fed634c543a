//! The lease state one session shares between its owner, its handles and its
//! renewal loop, and the calls that change it: register, renew, confirm, and
//! marking the instance unavailable.
//!
//! The instance's status lives in one place, the `status_tx` watch channel:
//! readers borrow it, [`SessionHandle::status_changes`](super::SessionHandle::status_changes)
//! subscribes to it, and `send_if_modified` tells each writer whether the
//! status changed, so every change is logged once.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Rollout;
use crate::client::DiscoveryClient;
use crate::error::{CallError, CallErrorKind};
use crate::ids;
use crate::schedule;
use crate::status::Status;

/// The lease assumed before the service grants one (the reference's default).
const INITIAL_LEASE: Duration = Duration::from_secs(20);

/// One registration's state.
#[derive(Debug)]
pub(super) struct Lease {
    pub(super) client: DiscoveryClient,
    pub(super) descriptor: pb::ModuleDescriptor,
    pub(super) rollout: Rollout,
    pub(super) instance_id: String,
    state: Mutex<State>,
    /// One register or renew at a time, so flags and lease token stay consistent.
    pub(super) exchange: tokio::sync::Mutex<()>,
    pub(super) drain_requested: CancellationToken,
    /// The instance's status: the only copy.
    status_tx: watch::Sender<Status>,
}

/// What the calls read and write besides the status.
#[derive(Debug)]
pub(super) struct State {
    pub(super) lease_token: String,
    pub(super) initialized: bool,
    pub(super) draining: bool,
    lease: Duration,
    pub(super) confirmed_until: Option<Instant>,
    /// Zero: no health summary.
    pub(super) summary_interval: Duration,
}

/// Whether a status update notifies the receivers when the status stays
/// the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Notify {
    /// Every registration or renewal notifies, as `status_changes` promises.
    Always,
    /// A local decision (the lease is not confirmed) notifies only a change.
    OnChange,
}

impl Lease {
    /// The state of a session not registered yet (`confirmed_until` `None`),
    /// or of a test handle.
    pub(super) fn new(
        client: DiscoveryClient,
        descriptor: pb::ModuleDescriptor,
        rollout: Rollout,
        instance_id: String,
        status: Status,
        confirmed_until: Option<Instant>,
        summary_interval: Duration,
    ) -> Self {
        let (status_tx, _) = watch::channel(status);
        Self {
            client,
            descriptor,
            rollout,
            instance_id,
            state: Mutex::new(State {
                lease_token: ids::lease_token(),
                initialized: false,
                draining: false,
                lease: INITIAL_LEASE,
                confirmed_until,
                summary_interval,
            }),
            exchange: tokio::sync::Mutex::new(()),
            drain_requested: CancellationToken::new(),
            status_tx,
        }
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a panic elsewhere while updating plain fields;
        // they are still consistent enough to read and overwrite.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The status as last recorded.
    pub(super) fn status(&self) -> Status {
        *self.status_tx.borrow()
    }

    /// The last status discovery confirmed, or [`Status::Unavailable`] once
    /// the confirmed lease passed, [`Status::Stopped`] once closed.
    pub(super) fn current_status(&self) -> Status {
        // The state lock is held while reading the status, as every writer
        // holds it while writing both, so the pair is consistent.
        let state = self.state();
        let status = self.status();
        match state.confirmed_until {
            Some(until) if Instant::now() < until => status,
            _ if status == Status::Stopped => Status::Stopped,
            _ => Status::Unavailable,
        }
    }

    /// Follows the status.
    pub(super) fn subscribe(&self) -> watch::Receiver<Status> {
        self.status_tx.subscribe()
    }

    /// Records `new` and logs the change, if any, once. Callers hold the
    /// state lock (see [`Lease::current_status`]).
    fn record_status(&self, new: Status, notify: Notify) {
        let change = record_status(&self.status_tx, new, notify);
        if let Some(old) = change {
            info!(instance_id = %self.instance_id, old_status = %old, new_status = %new, "instance status changed");
        }
    }

    /// Records what discovery answered to a call sent at `started`.
    pub(super) fn confirm(
        &self,
        started: Instant,
        lease_seconds: f64,
        instance: Option<&pb::Instance>,
    ) -> Status {
        let lease = Duration::try_from_secs_f64(lease_seconds.max(0.0)).unwrap_or(INITIAL_LEASE);
        let status = instance
            .map(|i| Status::parse(&i.status))
            .unwrap_or(Status::Unknown);
        {
            let mut state = self.state();
            state.lease = lease;
            state.confirmed_until = Some(started + lease);
            if status == Status::Draining {
                state.draining = true;
                // Requested before the status shows DRAINING, so whoever
                // sees that status also sees the request.
                self.drain_requested.cancel();
            }
            self.record_status(status, Notify::Always);
        }
        status
    }

    /// The lease is not confirmed (a renewal failed, or it was lost).
    pub(super) fn mark_unavailable(&self) {
        let _state = self.state();
        self.record_status(Status::Unavailable, Notify::OnChange);
    }

    /// Marks the instance STOPPED (no lease any more) and returns the lease
    /// token to unregister with.
    pub(super) fn stop(&self) -> String {
        let mut state = self.state();
        state.confirmed_until = None;
        self.record_status(Status::Stopped, Notify::Always);
        state.lease_token.clone()
    }

    /// Registers under the current lease token. Callers hold `exchange`.
    pub(super) async fn register(&self) -> Result<Status, CallError> {
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
    pub(super) async fn renew(&self) -> Result<Status, CallError> {
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
    pub(super) async fn renew_or_register(&self) -> Result<Status, CallError> {
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

    /// How long to wait before the next renewal after `failures` failures.
    pub(super) fn next_delay(&self, failures: u32) -> Duration {
        let state = self.state();
        let remaining = state
            .confirmed_until
            .map(|u| u.saturating_duration_since(Instant::now()));
        schedule::renew_delay(state.lease, failures, remaining, schedule::jitter())
    }
}

/// Sets `status_tx` to `new`; returns the previous status when it changed,
/// so each change is logged once. Receivers are notified of every update
/// with [`Notify::Always`], of changes only with [`Notify::OnChange`].
fn record_status(status_tx: &watch::Sender<Status>, new: Status, notify: Notify) -> Option<Status> {
    let mut change = None;
    status_tx.send_if_modified(|status| {
        let old = std::mem::replace(status, new);
        change = (old != new).then_some(old);
        change.is_some() || notify == Notify::Always
    });
    change
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_change_is_reported_once_not_on_every_renewal() {
        let (status_tx, mut status_rx) = watch::channel(Status::Starting);
        // What renewals and failures would set, in order.
        let sequence = [
            (Status::Starting, Notify::Always),
            (Status::Starting, Notify::Always),
            (Status::Degraded, Notify::Always),
            (Status::Degraded, Notify::Always),
            (Status::Ready, Notify::Always),
            (Status::Ready, Notify::Always),
            (Status::Ready, Notify::Always),
            (Status::Unavailable, Notify::OnChange),
            (Status::Unavailable, Notify::OnChange),
            (Status::Starting, Notify::Always),
            (Status::Ready, Notify::Always),
            (Status::Draining, Notify::Always),
            (Status::Draining, Notify::Always),
        ];
        let mut changes = Vec::new();
        let mut notified = 0;
        for (new, notify) in sequence {
            if let Some(old) = record_status(&status_tx, new, notify) {
                changes.push((old, new));
            }
            if status_rx.has_changed().unwrap_or(false) {
                notified += 1;
                status_rx.borrow_and_update();
            }
        }
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
        // Every renewal notifies; the repeated local UNAVAILABLE does not.
        assert_eq!(notified, sequence.len() - 1);
        assert_eq!(*status_rx.borrow(), Status::Draining);
    }
}
