//! The host kit: [`Host`], something a module serves (jobs, agents, models,
//! apps), started and drained by the runner in the reference's order, and
//! [`ServedHost`], the declaration a [`crate::ModuleSpec`] carries and the
//! runner turns into a running host once the instance registered
//! ([`ServedHost::bind`] with the module's [`Links`]). A running host is
//! built from its links, so there is no such thing as an unbound host.
//!
//! The runner knows two kinds: plain hosts start right after `on_initialized`,
//! before the instance reports itself initialized; gated hosts (the job host,
//! [`ServedHost::gated`], and those given to [`crate::Runner::job_host`])
//! only [`Host::prepare`] before the instance serves and [`Host::start`]
//! once discovery reports READY or DEGRADED, never if a drain was requested
//! first, because schedules and consumers are module-wide and belong to the
//! serving generation. Without a rollout id gated hosts start before
//! readiness too.
//!
//! Where each method is called in the runner's lifecycle (`runner/`):
//! `bind` then `prepare`/`start` before the instance reports itself
//! initialized (`prepare_hosts`), a gated host's `start` once the instance
//! serves (`start_job_hosts`), `drain` on every host at the same time while
//! the module drains (`drain_hosts`), and `close` on one host after the
//! other, gated hosts first, then the others, each in the order they were
//! declared (`close_hosts`), each given a share of the time left
//! (`close.rs`).

pub(crate) mod close;
pub mod grants;
mod links;
pub mod serve;
pub mod stopping;

use std::sync::Arc;
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::error::BoxError;

pub use links::{Links, MissingLink};

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

    /// Releases everything by `deadline`; called once, whether or not the
    /// host started, after [`Host::drain`] when the module drained.
    ///
    /// The contract: work still going is stopped so that nothing finished
    /// is lost and nothing unfinished counts as done (a job run is handed
    /// back, a chat answered as interrupted), and the future ends by
    /// `deadline` or very soon after. The runner stops waiting at
    /// `deadline` whatever the host does, closes the next host and still
    /// calls `on_unloaded`; a host that overruns loses only what it had
    /// not saved yet, as a killed process would.
    fn close(&self, deadline: Instant) -> BoxFuture<'_, ()> {
        let _ = deadline;
        Box::pin(async {})
    }
}

/// What a [`crate::ModuleSpec`] serves ([`crate::ModuleSpec::serve`]): a
/// declaration of jobs, agents or models and their handlers. It adds what it
/// serves to the module's descriptor when declared; once the instance
/// registered, the runner builds the running [`Host`] from the module's
/// [`Links`] and starts it (gated or not, [`ServedHost::gated`]).
pub trait ServedHost: Send + Sync + 'static {
    /// A short name for logs.
    fn name(&self) -> &str;

    /// Adds what this host serves (its jobs, agents, models) to `descriptor`.
    fn declare(&self, descriptor: &mut pb::ModuleDescriptor);

    /// Whether the running host waits for the rollout's cutover before it
    /// starts (default false; the job host says true).
    fn gated(&self) -> bool {
        false
    }

    /// The running host, built from the module's links; called once per
    /// run of the module, after it registered.
    fn bind(&self, links: &Links) -> Arc<dyn Host>;
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
