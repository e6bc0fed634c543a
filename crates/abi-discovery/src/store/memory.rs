//! In-memory adapter: one value and a revision counter behind a mutex.

use std::sync::Mutex;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::{CasError, Snapshot, SnapshotStore, StoreError};

/// A [`SnapshotStore`] in process memory, for tests and single-process use.
/// Revisions start at 0 (nothing written) and grow by one per write.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Snapshot>,
}

impl MemoryStore {
    /// An empty store (revision 0).
    pub fn new() -> Self {
        Self::default()
    }

    fn current(&self) -> Snapshot {
        // A poisoned lock only means a panic elsewhere while holding it; the
        // snapshot itself is always whole (assigned in one statement).
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl SnapshotStore for MemoryStore {
    fn read(&self) -> BoxFuture<'_, Result<Snapshot, StoreError>> {
        let snapshot = self.current();
        Box::pin(async move { Ok(snapshot) })
    }

    fn compare_and_swap(
        &self,
        bytes: Bytes,
        revision: u64,
    ) -> BoxFuture<'_, Result<u64, CasError>> {
        let result = {
            let mut guard = self
                .inner
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if guard.revision == revision {
                let next = revision + 1;
                *guard = Snapshot {
                    bytes,
                    revision: next,
                };
                Ok(next)
            } else {
                Err(CasError::Conflict)
            }
        };
        Box::pin(async move { result })
    }

    fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        let revision = self.current().revision;
        Box::pin(async move { Ok(revision) })
    }
}
