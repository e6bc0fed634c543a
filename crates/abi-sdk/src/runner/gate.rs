//! Waiting on discovery: dependencies READY before `on_initialized`, and a
//! rollout's cutover before its job hosts start.
//!
//! Both react to registry events at once and poll every refresh interval as
//! a fallback, so a lost or stalled watch only costs the reference's delay.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use tracing::debug;

use crate::error::{CallError, CallErrorKind};
use crate::proxy::Modules;
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
