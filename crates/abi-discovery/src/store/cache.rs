//! The decoded snapshot, shared by the writer and the lookups of one process.

use std::sync::{Arc, Mutex};

use abi_proto::discovery::v1 as pb;
use abi_registry::Prepared;

/// A decoded snapshot as stored, with the revision it was read or written at
/// and the change token ([`super::SnapshotStore::revision`]) that vouches for
/// it: while the store reports that same token, nothing changed since.
///
/// The snapshot is kept [`Prepared`], so the lookups that find it current
/// share one status computation instead of making one each.
#[derive(Debug, Clone)]
pub(crate) struct Decoded {
    pub(crate) prepared: Arc<Prepared>,
    pub(crate) revision: u64,
    pub(crate) token: u64,
    /// The store's [`epoch`](super::SnapshotStore::epoch) when it was read:
    /// revisions only compare within one epoch.
    pub(crate) epoch: u64,
}

impl Decoded {
    /// `state` at `revision` of store epoch `epoch`, vouched for by `token`.
    pub(crate) fn new(state: pb::RegistryState, revision: u64, token: u64, epoch: u64) -> Self {
        Self {
            prepared: Arc::new(Prepared::new(Arc::new(state))),
            revision,
            token,
            epoch,
        }
    }

    /// The snapshot, as stored.
    pub(crate) fn state(&self) -> &Arc<pb::RegistryState> {
        self.prepared.state()
    }
}

/// The latest decoded snapshot this process knows of. Never older than one
/// it already held: an update with a lower revision (a slow read overtaken by
/// a write) is ignored, unless it comes from a later store epoch (the bucket
/// was re-created and its revisions started over). The lock is only held to
/// copy an `Arc`, never across an `.await`.
#[derive(Debug, Default)]
pub(crate) struct SnapshotCache {
    inner: Mutex<Option<Decoded>>,
}

impl SnapshotCache {
    /// The cached snapshot, if any.
    pub(crate) fn get(&self) -> Option<Decoded> {
        self.lock().clone()
    }

    /// Keeps `decoded` unless the cache already holds a newer revision of
    /// the same epoch, or anything of a later epoch.
    pub(crate) fn offer(&self, decoded: Decoded) {
        let mut guard = self.lock();
        if guard.as_ref().is_none_or(|current| {
            (decoded.epoch, decoded.revision) >= (current.epoch, current.revision)
        }) {
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
        Decoded::new(pb::RegistryState::default(), revision, revision, 0)
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

    #[test]
    fn a_later_epoch_replaces_any_revision_and_an_earlier_one_none() {
        let cache = SnapshotCache::default();
        cache.offer(decoded(9));
        let restarted =
            |revision, epoch| Decoded::new(pb::RegistryState::default(), revision, revision, epoch);
        cache.offer(restarted(1, 1));
        assert_eq!(cache.get().map(|d| (d.epoch, d.revision)), Some((1, 1)));
        cache.offer(decoded(12));
        assert_eq!(cache.get().map(|d| (d.epoch, d.revision)), Some((1, 1)));
    }
}
