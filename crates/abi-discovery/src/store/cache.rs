//! The decoded snapshot, shared by the writer and the lookups of one process.

use std::sync::{Arc, Mutex};

use abi_proto::discovery::v1 as pb;

/// A decoded snapshot as stored, with the revision it was read or written at
/// and the change token ([`super::SnapshotStore::revision`]) that vouches for
/// it: while the store reports that same token, nothing changed since.
#[derive(Debug, Clone)]
pub(crate) struct Decoded {
    pub(crate) state: Arc<pb::RegistryState>,
    pub(crate) revision: u64,
    pub(crate) token: u64,
}

/// The latest decoded snapshot this process knows of. Never older than one
/// it already held: an update with a lower revision (a slow read overtaken by
/// a write) is ignored. The lock is only held to copy an `Arc`, never across
/// an `.await`.
#[derive(Debug, Default)]
pub(crate) struct SnapshotCache {
    inner: Mutex<Option<Decoded>>,
}

impl SnapshotCache {
    /// The cached snapshot, if any.
    pub(crate) fn get(&self) -> Option<Decoded> {
        self.lock().clone()
    }

    /// Keeps `decoded` unless the cache already holds a newer revision.
    pub(crate) fn offer(&self, decoded: Decoded) {
        let mut guard = self.lock();
        if guard
            .as_ref()
            .is_none_or(|current| decoded.revision >= current.revision)
        {
            *guard = Some(decoded);
        }
    }

    /// Forgets the snapshot (after a store failure, nothing cached is trusted).
    pub(crate) fn clear(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Decoded>> {
        // The value is replaced in one assignment, so a poisoned lock still
        // holds a whole value.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(revision: u64) -> Decoded {
        Decoded {
            state: Arc::new(pb::RegistryState::default()),
            revision,
            token: revision,
        }
    }

    #[test]
    fn never_goes_back_to_an_older_revision() {
        let cache = SnapshotCache::default();
        assert!(cache.get().is_none());
        cache.offer(decoded(5));
        cache.offer(decoded(3));
        assert_eq!(cache.get().map(|d| d.revision), Some(5));
        cache.offer(decoded(7));
        assert_eq!(cache.get().map(|d| d.revision), Some(7));
        cache.clear();
        assert!(cache.get().is_none());
    }
}
