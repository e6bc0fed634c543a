//! Waiting on discovery: dependencies READY before `on_initialized`, and a
//! rollout's cutover before its job hosts start.
//!
//! Both react to registry events at once and poll every refresh interval as
//! a fallback, so a lost or stalled watch only costs the reference's delay.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use tracing::debug;

use crate::client::proxy::Modules;
use crate::error::{CallError, CallErrorKind};
use crate::session::SessionHandle;
use crate::status::Status;
use crate::watch::{RegistryEvent, RegistryWatch};

/// Failures that mean "not yet": the dependency may still come up.
fn not_yet(kind: CallErrorKind) -> bool {
    matches!(
        kind,
        CallErrorKind::ModuleNotFound
            | CallErrorKind::ModuleUnavailable
            | CallErrorKind::IncompatibleModule
            | CallErrorKind::Unavailable
            | CallErrorKind::RegistryBusy
            | CallErrorKind::NoResponders
            | CallErrorKind::Transport
            | CallErrorKind::TimedOut
    )
}

/// Returns once every declared dependency has a READY instance.
///
/// # Errors
///
/// A lookup failure that waiting cannot fix (`PermissionDenied`, ...).
///
/// # Cancel safety
///
/// Cancel safe; the caller bounds it with the startup timeout.
pub(crate) async fn dependencies_ready(
    modules: &Modules,
    watch: &mut Option<RegistryWatch>,
    refresh: Duration,
) -> Result<(), CallError> {
    let proxies = modules.all();
    let wanted: HashSet<String> = proxies.iter().map(|p| p.module_id().to_owned()).collect();
    loop {
        let mut pending = Vec::new();
        for proxy in &proxies {
            match proxy.ready_instances().await {
                Ok(_) => {}
                Err(err) if not_yet(err.kind()) => pending.push(proxy.module_id().to_owned()),
                Err(err) => return Err(err),
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        debug!(pending = ?pending, "waiting for dependencies");
        wait_for(watch, refresh, |event| wanted.contains(event.module_id())).await;
    }
}

/// Waits for a registry event `relevant` accepts (true), or `refresh`
/// (false), whichever comes first. Without a watch it only sleeps.
async fn wait_for(
    watch: &mut Option<RegistryWatch>,
    refresh: Duration,
    relevant: impl Fn(&RegistryEvent) -> bool,
) -> bool {
    let sleep = tokio::time::sleep(refresh);
    tokio::pin!(sleep);
    let Some(events) = watch.as_mut() else {
        sleep.await;
        return false;
    };
    loop {
        tokio::select! {
            () = &mut sleep => return false,
            event = events.next() => match event {
                Some(event) if relevant(&event) => return true,
                Some(_) => {}
                None => {
                    sleep.await;
                    return false;
                }
            },
        }
    }
}

/// Returns once the instance serves (READY or DEGRADED), or never when a
/// drain was requested first.
///
/// A registry event about this instance triggers a renewal at once, which
/// brings its new status; otherwise the status is checked every `refresh`.
///
/// # Cancel safety
///
/// Cancel safe.
pub(crate) async fn cutover(
    session: &SessionHandle,
    watch: &mut Option<RegistryWatch>,
    refresh: Duration,
) {
    let drain = session.drain_requested();
    let me = session.instance_id().to_owned();
    let mut status_rx = session.status_changes();
    loop {
        if drain.is_cancelled() {
            return std::future::pending().await;
        }
        if session.current_status().is_serving() {
            return;
        }
        tokio::select! {
            () = drain.cancelled() => {}
            _ = status_rx.changed() => {}
            event = wait_for(watch, refresh, |e| e.instance().instance_id == me && Status::parse(&e.instance().status).is_serving()) => {
                // The snapshot says this instance serves: confirm with a renewal
                // now rather than at the next scheduled one.
                if event && let Err(err) = session.renew().await {
                    debug!(error = %err, "renewal after cutover event failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::client::DiscoveryClient;
    use crate::session::Rollout;
    use crate::token::TokenSource;

    const REFRESH: Duration = Duration::from_millis(100);

    /// A client whose connection never comes up: the gate must decide
    /// without calling discovery (no registry event, so no renewal).
    async fn offline_client() -> DiscoveryClient {
        let nats = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect("nats://127.0.0.1:1")
            .await
            .unwrap();
        DiscoveryClient::new(nats, "p", TokenSource::issued("t"))
    }

    fn rollout() -> Rollout {
        Rollout {
            id: "r-1".into(),
            modules: vec!["m".into()],
        }
    }

    /// What the runner does after the cutover: start the job hosts.
    async fn gated_start(session: SessionHandle, started: Arc<AtomicBool>) {
        let mut watch = None;
        cutover(&session, &mut watch, REFRESH).await;
        started.store(true, Ordering::SeqCst);
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_before_serving_keeps_the_job_hosts_stopped_for_good() {
        let session = SessionHandle::for_test(offline_client().await, rollout(), Status::Staged);
        let started = Arc::new(AtomicBool::new(false));
        let gate = tokio::spawn(gated_start(session.clone(), started.clone()));
        // Still STAGED after several refreshes: not started.
        tokio::time::sleep(REFRESH * 5).await;
        assert!(!started.load(Ordering::SeqCst));
        // Discovery answers DRAINING (a newer generation took over) ...
        session.confirm_for_test(Status::Draining);
        assert!(session.drain_requested().is_cancelled());
        tokio::time::sleep(REFRESH * 5).await;
        // ... and a status that serves afterwards does not open the gate.
        session.confirm_for_test(Status::Ready);
        tokio::time::sleep(REFRESH * 50).await;
        assert!(!started.load(Ordering::SeqCst));
        assert!(!gate.is_finished());
        gate.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_requested_before_the_gate_is_reached_wins_over_ready() {
        // Already READY, but the drain came first: never cut over.
        let session = SessionHandle::for_test(offline_client().await, rollout(), Status::Starting);
        session.confirm_for_test(Status::Draining);
        session.confirm_for_test(Status::Ready);
        let mut watch = None;
        let gated =
            tokio::time::timeout(REFRESH * 100, cutover(&session, &mut watch, REFRESH)).await;
        assert!(gated.is_err(), "the gate opened after a drain request");
    }

    #[tokio::test(start_paused = true)]
    async fn the_gate_opens_once_discovery_reports_serving() {
        for serving in [Status::Ready, Status::Degraded] {
            let session =
                SessionHandle::for_test(offline_client().await, rollout(), Status::Staged);
            let started = Arc::new(AtomicBool::new(false));
            let gate = tokio::spawn(gated_start(session.clone(), started.clone()));
            tokio::time::sleep(REFRESH * 5).await;
            assert!(!started.load(Ordering::SeqCst));
            session.confirm_for_test(serving);
            tokio::time::timeout(REFRESH * 10, gate)
                .await
                .unwrap()
                .unwrap();
            assert!(started.load(Ordering::SeqCst), "{serving}");
        }
    }
}
