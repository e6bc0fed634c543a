//! The counters the writer and the lookups bump, read by `Discovery::stats`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::histogram::Histogram;

/// Counters shared by the writer and the lookups, read by `stats()`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) batches: AtomicU64,
    pub(crate) mutations: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) conflicts: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) busy: AtomicU64,
    pub(crate) store_errors: AtomicU64,
    pub(crate) lookups: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
    pub(crate) reloads: AtomicU64,
    /// Size of the snapshot last written or downloaded, in bytes.
    pub(crate) snapshot_bytes: AtomicU64,
    /// Mutations per batch.
    pub(crate) batch_sizes: BatchSizes,
}

/// Upper bounds of the batch size histogram: powers of two up to the largest
/// sensible `ABI_MAX_BATCH`.
static BATCH_SIZE_BOUNDS: [u64; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// The batch size histogram, with its bounds.
#[derive(Debug)]
pub(crate) struct BatchSizes(pub(crate) Histogram<11>);

impl Default for BatchSizes {
    fn default() -> Self {
        Self(Histogram::new(&BATCH_SIZE_BOUNDS))
    }
}

impl Counters {
    /// Adds one to `counter` (relaxed: the counters are independent totals,
    /// read only for reporting).
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
