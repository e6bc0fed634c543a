//! An in-process discovery service the SDK can talk to instead of NATS.
//!
//! Everything above the transport (tokens, call envelopes, typed errors, the
//! lease session, the runner, the registry watch) stays the same: only the
//! bytes travel through a function call instead of a NATS request, and
//! registry snapshots arrive on a channel instead of a KV watcher. The
//! `abi-testkit` crate implements [`LocalDiscovery`] with the real service
//! core over an in-memory store, so module code can be tested without a
//! NATS server.

use std::fmt;

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::watch;

/// One stored registry snapshot: the encoded `RegistryState` and its revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalSnapshot {
    /// Grows by one per write; 0 means nothing was written yet.
    pub revision: u64,
    /// The encoded `abi.discovery.v1.RegistryState` (empty at revision 0).
    pub bytes: Bytes,
}

/// A discovery service living in the same process.
///
/// The SDK sends it exactly what it would publish on
/// `abi.discovery.<project>.v1.<operation>`: the encoded request and the
/// `Nats-Auth-Token` value; the service answers with the encoded
/// `<Operation>Response` (a refusal travels inside it as a `CallError`, as
/// over NATS).
pub trait LocalDiscovery: Send + Sync + fmt::Debug + 'static {
    /// Answers one request of `operation` (`"register"`, `"get_module"`, ...)
    /// for `project`. An `Err` is a transport failure, not a refusal.
    fn request<'a>(
        &'a self,
        project: &'a str,
        operation: &'static str,
        token: &'a str,
        payload: Bytes,
    ) -> BoxFuture<'a, Result<Bytes, LocalError>>;

    /// The current registry snapshot of `project`, updated on every write.
    /// `None` when this service does not serve `project`.
    fn snapshots(&self, project: &str) -> Option<watch::Receiver<LocalSnapshot>>;
}

/// Why an in-process request could not be answered at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// Nobody serves that project or operation (the NATS equivalent of
    /// "no responders").
    #[error("no in-process discovery service for {0}")]
    NoService(String),
    /// The service has stopped.
    #[error("the in-process discovery service has stopped")]
    Stopped,
}
