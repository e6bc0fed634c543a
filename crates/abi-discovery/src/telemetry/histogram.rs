//! A fixed-bucket histogram on atomics, and the copy a reader takes of it.

use std::sync::atomic::{AtomicU64, Ordering};

/// A fixed-bucket histogram on atomics: observing is one search over the
/// bounds and two relaxed adds.
#[derive(Debug)]
pub(crate) struct Histogram<const N: usize> {
    bounds: &'static [u64; N],
    buckets: [AtomicU64; N],
    overflow: AtomicU64,
    sum: AtomicU64,
}

/// A copy of a [`Histogram`]: cumulative counts per upper bound, total count and sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// `(upper bound, observations <= bound)`, bounds ascending.
    pub buckets: Vec<(u64, u64)>,
    /// Every observation (the `+Inf` bucket).
    pub count: u64,
    /// Sum of the observed values.
    pub sum: u64,
}

impl<const N: usize> Histogram<N> {
    /// An empty histogram with these inclusive upper bounds (ascending).
    pub(crate) const fn new(bounds: &'static [u64; N]) -> Self {
        Self {
            bounds,
            buckets: [const { AtomicU64::new(0) }; N],
            overflow: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    /// Counts one observation of `value`.
    pub(crate) fn observe(&self, value: u64) {
        match self.bounds.iter().position(|bound| value <= *bound) {
            Some(i) => self.buckets[i].fetch_add(1, Ordering::Relaxed),
            None => self.overflow.fetch_add(1, Ordering::Relaxed),
        };
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// A copy of the counts (each bucket read once, so `count` matches the buckets).
    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let mut running = 0_u64;
        let buckets = self
            .bounds
            .iter()
            .zip(&self.buckets)
            .map(|(bound, bucket)| {
                running += bucket.load(Ordering::Relaxed);
                (*bound, running)
            })
            .collect();
        HistogramSnapshot {
            buckets,
            count: running + self.overflow.load(Ordering::Relaxed),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static BOUNDS: [u64; 3] = [1, 5, 10];

    #[test]
    fn histogram_counts_cumulatively() {
        let h = Histogram::new(&BOUNDS);
        for v in [0, 1, 3, 10, 11, 100] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, [(1, 2), (5, 3), (10, 4)]);
        assert_eq!(s.count, 6);
        assert_eq!(s.sum, 125);
    }
}
