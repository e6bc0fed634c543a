//! In-memory adapter: one value and a revision counter in a watch channel,
//! so that in-process readers can follow every write.

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::watch;

use super::{CasError, Snapshot, SnapshotStore, StoreError};

/// A [`SnapshotStore`] in process memory, for tests and single-process use.
/// Revisions start at 0 (nothing written) and grow by one per write.
#[derive(Debug)]
pub struct MemoryStore {
    current: watch::Sender<Snapshot>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self {
            current: watch::Sender::new(Snapshot::default()),
        }
    }
}

impl MemoryStore {
    /// An empty store (revision 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// The stored snapshot, updated after every successful write (the
    /// in-process stand-in for watching the KV key).
    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.current.subscribe()
    }

    fn current(&self) -> Snapshot {
        self.current.borrow().clone()
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
        let mut result = Err(CasError::Conflict);
        // The check and the write happen under the channel's lock, so two
        // writers at one revision cannot both win.
        self.current.send_if_modified(|current| {
            if current.revision != revision {
                return false;
            }
            let next = revision + 1;
            *current = Snapshot {
                bytes,
                revision: next,
            };
            result = Ok(next);
            true
        });
        Box::pin(async move { result })
    }

    fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        let revision = self.current.borrow().revision;
        Box::pin(async move { Ok(revision) })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn subscribers_see_each_successful_write_and_no_refused_one() {
        let store = MemoryStore::new();
        let mut rx = store.subscribe();
        assert_eq!(rx.borrow_and_update().revision, 0);
        assert_eq!(
            store
                .compare_and_swap(Bytes::from_static(b"a"), 0)
                .await
                .unwrap(),
            1
        );
        assert!(rx.has_changed().unwrap());
        assert_eq!(rx.borrow_and_update().bytes, Bytes::from_static(b"a"));
        assert!(matches!(
            store.compare_and_swap(Bytes::from_static(b"b"), 0).await,
            Err(CasError::Conflict)
        ));
        assert!(!rx.has_changed().unwrap());
        assert_eq!(store.read().await.unwrap().revision, 1);
    }
}
