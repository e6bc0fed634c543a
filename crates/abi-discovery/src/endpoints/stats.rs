//! Per-endpoint request counters, shared by the endpoints (which count) and the
//! micro-service `$SRV.STATS` responder (which reports).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::subjects::Operation;

/// Counters of one endpoint.
#[derive(Debug, Default)]
pub struct EndpointStats {
    requests: AtomicU64,
    errors: AtomicU64,
    processing_nanos: AtomicU64,
    last_error: Mutex<String>,
}

/// A consistent-enough copy of one endpoint's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointSnapshot {
    /// Requests answered.
    pub requests: u64,
    /// Requests answered with a `CallError`.
    pub errors: u64,
    /// Total handling time.
    pub processing: Duration,
    /// The last error, as `CODE: message` (empty when none yet).
    pub last_error: String,
}

/// Counters of every endpoint, plus requests dropped for want of a reply subject.
#[derive(Debug)]
pub struct Stats {
    started: SystemTime,
    endpoints: [EndpointStats; Operation::ALL.len()],
    dropped_without_reply: AtomicU64,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            started: SystemTime::now(),
            endpoints: Default::default(),
            dropped_without_reply: AtomicU64::new(0),
        }
    }
}

impl Stats {
    /// When counting started (the service's start).
    pub fn started(&self) -> SystemTime {
        self.started
    }

    /// Counts one answered request of `op`, `error` being its `CallError` if any.
    pub fn record(&self, op: Operation, elapsed: Duration, error: Option<(&str, &str)>) {
        let endpoint = &self.endpoints[index(op)];
        endpoint.requests.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        endpoint
            .processing_nanos
            .fetch_add(nanos, Ordering::Relaxed);
        if let Some((code, message)) = error {
            endpoint.errors.fetch_add(1, Ordering::Relaxed);
            let mut last = endpoint
                .last_error
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            // Rule refusals already read "CODE: message"; the edge's own do not.
            *last = if message.starts_with(code) {
                message.to_owned()
            } else {
                format!("{code}: {message}")
            };
        }
    }

    /// Counts a request that had no reply subject (dropped unanswered).
    pub fn record_dropped_without_reply(&self) {
        self.dropped_without_reply.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests dropped for want of a reply subject.
    pub fn dropped_without_reply(&self) -> u64 {
        self.dropped_without_reply.load(Ordering::Relaxed)
    }

    /// A copy of the counters of `op`.
    pub fn endpoint(&self, op: Operation) -> EndpointSnapshot {
        let endpoint = &self.endpoints[index(op)];
        EndpointSnapshot {
            requests: endpoint.requests.load(Ordering::Relaxed),
            errors: endpoint.errors.load(Ordering::Relaxed),
            processing: Duration::from_nanos(endpoint.processing_nanos.load(Ordering::Relaxed)),
            last_error: endpoint
                .last_error
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone(),
        }
    }
}

fn index(op: Operation) -> usize {
    // ALL lists every variant once, so the position always exists.
    Operation::ALL.iter().position(|o| *o == op).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_endpoint() {
        let stats = Stats::default();
        stats.record(Operation::Register, Duration::from_millis(2), None);
        stats.record(
            Operation::Register,
            Duration::from_millis(3),
            Some(("LEASE_EXPIRED", "gone")),
        );
        stats.record_dropped_without_reply();
        let register = stats.endpoint(Operation::Register);
        assert_eq!(register.requests, 2);
        assert_eq!(register.errors, 1);
        assert_eq!(register.processing, Duration::from_millis(5));
        assert_eq!(register.last_error, "LEASE_EXPIRED: gone");
        assert_eq!(
            stats.endpoint(Operation::Renew),
            EndpointSnapshot::default()
        );
        assert_eq!(stats.dropped_without_reply(), 1);
    }
}
