//! Per-endpoint request counters, shared by the endpoints (which count), the
//! micro-service `$SRV.STATS` responder and the Prometheus metrics (which report).
//!
//! One set of atomics is the single source of truth: the request count is the sum
//! of the per-code counts, the error count that sum minus the `OK`s, and the
//! processing time the duration histogram's sum.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use abi_registry::ErrorCode;

use crate::telemetry::{Histogram, HistogramSnapshot};
use abi_wire::discovery::Operation;

/// The code label of a request answered without a `CallError`.
pub use abi_wire::codes::OK_LABEL as OK;
/// The code label of a `CallError` code this version does not know.
pub const OTHER: &str = "OTHER";

/// Code slots: `OK`, every [`ErrorCode`], then [`OTHER`].
const CODE_SLOTS: usize = ErrorCode::ALL.len() + 2;

/// Upper bounds of the request duration histogram, in nanoseconds: 0.5 ms to 10 s
/// (a lookup takes about a millisecond, a write a few; the store deadline is 5 s).
static DURATION_BOUNDS_NANOS: [u64; 14] = [
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Counters of one endpoint.
#[derive(Debug)]
pub struct EndpointStats {
    codes: [AtomicU64; CODE_SLOTS],
    duration: Histogram<14>,
    last_error: Mutex<String>,
}

impl Default for EndpointStats {
    fn default() -> Self {
        Self {
            codes: [const { AtomicU64::new(0) }; CODE_SLOTS],
            duration: Histogram::new(&DURATION_BOUNDS_NANOS),
            last_error: Mutex::default(),
        }
    }
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
    /// Requests answered per code label ([`OK`], a wire code or [`OTHER`]), only
    /// the codes seen, `OK` first; they add up to `requests`.
    pub codes: Vec<(&'static str, u64)>,
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

    /// Counts one answered request of `op`, `error` being its `CallError` code
    /// and message if any.
    pub fn record(&self, op: Operation, elapsed: Duration, error: Option<(&str, &str)>) {
        let endpoint = &self.endpoints[index(op)];
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        endpoint.duration.observe(nanos);
        endpoint.codes[code_slot(error.map(|(code, _)| code))].fetch_add(1, Ordering::Relaxed);
        if let Some((code, message)) = error {
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
        let codes: Vec<(&'static str, u64)> = endpoint
            .codes
            .iter()
            .enumerate()
            .map(|(slot, count)| (code_label(slot), count.load(Ordering::Relaxed)))
            .filter(|(_, count)| *count > 0)
            .collect();
        let requests = codes.iter().map(|(_, count)| count).sum();
        let ok = codes
            .iter()
            .find(|(code, _)| *code == OK)
            .map_or(0, |(_, count)| *count);
        EndpointSnapshot {
            requests,
            errors: requests - ok,
            processing: Duration::from_nanos(endpoint.duration.snapshot().sum),
            last_error: endpoint
                .last_error
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone(),
            codes,
        }
    }

    /// The request duration histogram of `op`, in nanoseconds.
    pub fn duration(&self, op: Operation) -> HistogramSnapshot {
        self.endpoints[index(op)].duration.snapshot()
    }
}

/// The code label of a slot: [`OK`], a wire code, or [`OTHER`].
pub(crate) fn code_label(slot: usize) -> &'static str {
    match slot {
        0 => OK,
        _ => ErrorCode::ALL
            .get(slot - 1)
            .map_or(OTHER, |code| code.as_str()),
    }
}

fn code_slot(code: Option<&str>) -> usize {
    match code {
        None => 0,
        Some(code) => ErrorCode::ALL
            .iter()
            .position(|known| known.as_str() == code)
            .map_or(CODE_SLOTS - 1, |i| i + 1),
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
        stats.record(
            Operation::Register,
            Duration::from_millis(1),
            Some(("FROM_THE_FUTURE", "x")),
        );
        stats.record_dropped_without_reply();
        let register = stats.endpoint(Operation::Register);
        assert_eq!(register.requests, 3);
        assert_eq!(register.errors, 2);
        assert_eq!(register.processing, Duration::from_millis(6));
        assert_eq!(register.last_error, "FROM_THE_FUTURE: x");
        assert_eq!(
            register.codes,
            [("OK", 1), ("LEASE_EXPIRED", 1), ("OTHER", 1)]
        );
        let duration = stats.duration(Operation::Register);
        assert_eq!(duration.count, 3);
        assert_eq!(duration.sum, 6_000_000);
        assert_eq!(duration.buckets[1], (1_000_000, 1));
        assert_eq!(duration.buckets[3], (5_000_000, 3));
        assert_eq!(
            stats.endpoint(Operation::Renew),
            EndpointSnapshot::default()
        );
        assert_eq!(stats.dropped_without_reply(), 1);
    }

    #[test]
    fn every_wire_code_has_its_own_label() {
        assert_eq!(code_label(code_slot(None)), OK);
        for code in ErrorCode::ALL {
            assert_eq!(code_label(code_slot(Some(code.as_str()))), code.as_str());
        }
        assert_eq!(code_label(code_slot(Some("NOPE"))), OTHER);
    }
}
