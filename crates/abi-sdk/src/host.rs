//! [`Host`]: something a module serves (jobs, agents, apps), started and
//! drained by the runner in the reference's order.
//!
//! The runner knows two kinds: plain hosts start right after `on_initialized`,
//! before the instance reports itself initialized; job hosts
//! ([`crate::Runner::job_host`]) are gated in a rollout: they only
//! [`Host::prepare`] before the instance serves and [`Host::start`] once
//! discovery reports READY or DEGRADED, never if a drain was requested first,
//! because schedules and consumers are module-wide and belong to the serving
//! generation. Without a rollout id job hosts start before readiness too.
//!
//! Where each method is called in the runner's lifecycle (`runner/`):
//! `prepare`/`start` before the instance reports itself initialized
//! (`prepare_hosts`), a gated job host's `start` once the instance serves
//! (`start_job_hosts`), `drain` on every host at the same time while the
//! module drains (`drain_hosts`), and `close` on one host after the other,
//! job hosts first, then the others, each in the order they were added
//! (`close_hosts`).

use std::sync::Arc;
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use futures::future::BoxFuture;

use crate::error::BoxError;

/// A service the module hosts. Every method has a no-op default.
pub trait Host: Send + Sync + 'static {
    /// A short name for logs.
    fn name(&self) -> &str;

    /// Creates what must exist before the instance can serve, and nothing
    /// else (a job host creates its consumers here so no trigger is lost).
    fn prepare(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }

    /// Starts taking work.
    fn start(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }

    /// Stops taking new work and waits up to `timeout` for work already started.
    fn drain(&self, timeout: Duration) -> BoxFuture<'_, Result<(), BoxError>> {
        let _ = timeout;
        Box::pin(async { Ok(()) })
    }

    /// Releases everything; called once, whether or not it started.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// A host the module's declaration carries ([`crate::ModuleSpec::serve`]):
/// an agent or model host. It adds what it serves to the module's
/// descriptor when declared, and the runner binds it to the module's
/// [`crate::Context`] (connection, discovery, documents, instance id) before
/// starting it with the plain hosts, after `on_initialized` and before the
/// instance reports itself initialized, as the reference subscribes agents
/// and models.
pub trait ServedHost: Host {
    /// Adds what this host serves (its agents, its models) to `descriptor`.
    fn declare(&self, descriptor: &mut pb::ModuleDescriptor);

    /// Takes what it needs from the running module; called once, before
    /// [`Host::start`]. A host that cannot serve in this context (no
    /// discovery, no document service) says so here and the module fails.
    ///
    /// # Errors
    ///
    /// Whatever the host lacks, as a message naming it.
    fn bind(&self, cx: &crate::Context) -> Result<(), BoxError>;
}

/// The hosts a [`crate::ModuleSpec`] carries, in declaration order (the
/// order they start and close in). Compared by identity.
#[derive(Clone, Default)]
pub(crate) struct ServedHosts(pub(crate) Vec<Arc<dyn ServedHost>>);

impl std::fmt::Debug for ServedHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|h| h.name()))
            .finish()
    }
}

impl PartialEq for ServedHosts {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len() && self.0.iter().zip(&other.0).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}
