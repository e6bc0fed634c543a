//! The snapshot store port: one opaque value (the encoded registry) guarded
//! by a revision, written only by compare-and-swap.
//!
//! Adapters: [`memory::MemoryStore`] (tests, single process) and
//! [`jetstream::JetStreamStore`] (a JetStream KV bucket, shared with the
//! reference implementation). The port is dyn-compatible so the service holds
//! an `Arc<dyn SnapshotStore>` and tests can wrap one (to inject conflicts or
//! failures).

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

pub(crate) mod attempts;
pub(crate) mod cache;
pub(crate) mod coalesce;
pub(crate) mod decode;
pub mod jetstream;
pub(crate) mod jetstream_codes;
pub mod memory;

/// The stored value and the revision it was read at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The encoded `RegistryState`; empty when the key was never written (or
    /// was deleted).
    pub bytes: Bytes,
    /// The revision of that value; 0 when the key was never written.
    pub revision: u64,
}

/// The store could not be reached or answered with an error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The operation did not finish within the configured store timeout.
    #[error("snapshot store {op} timed out after {timeout:?}")]
    TimedOut {
        /// Which operation (`read`, `revision`, `compare_and_swap`, `open`).
        op: &'static str,
        /// The deadline that passed.
        timeout: Duration,
    },
    /// The backend failed.
    #[error("snapshot store {op} failed")]
    Backend {
        /// Which operation failed.
        op: &'static str,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    /// A backend failure of `op`.
    pub fn backend(
        op: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Backend {
            op,
            source: source.into(),
        }
    }
}

/// Why a [`SnapshotStore::compare_and_swap`] did not write.
#[derive(Debug, thiserror::Error)]
pub enum CasError {
    /// The key's revision is no longer the expected one: someone else wrote.
    /// Nothing was written.
    #[error("snapshot revision conflict")]
    Conflict,
    /// The store failed; the write may or may not have happened.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The port: read the snapshot, write it by compare-and-swap, and ask cheaply
/// whether it changed.
///
/// Every method is bounded in time by the adapter (errors, never hangs).
pub trait SnapshotStore: Send + Sync + std::fmt::Debug {
    /// The current value and its revision, as of a point after every write
    /// acknowledged before the call (adapters must not serve stale replicas).
    /// A missing key is `Snapshot { bytes: empty, revision: 0 }`.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot answer in time.
    fn read(&self) -> BoxFuture<'_, Result<Snapshot, StoreError>>;

    /// Writes `bytes` only if the key's revision is still `revision` (0: the
    /// key must not exist), returning the new revision.
    ///
    /// # Errors
    ///
    /// [`CasError::Conflict`] when the revision moved on (nothing written);
    /// [`CasError::Store`] when the store failed (the outcome is unknown).
    fn compare_and_swap(&self, bytes: Bytes, revision: u64)
    -> BoxFuture<'_, Result<u64, CasError>>;

    /// A cheap change token, without downloading the value: it is equal to
    /// [`read`](Self::read)'s revision when nothing else is stored beside the
    /// snapshot, and in any case it changes whenever the snapshot does and is
    /// at least as recent as every acknowledged write. Callers compare it with
    /// the token they last saw to decide whether to re-read.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot answer in time.
    fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Grows when the store's revisions start over (the JetStream bucket was
    /// deleted and created again), so that a cache which never goes back to
    /// a lower revision knows to let go of what it holds. Read it before a
    /// call to tag that call's result. Default: revisions never start over.
    fn epoch(&self) -> u64 {
        0
    }
}
