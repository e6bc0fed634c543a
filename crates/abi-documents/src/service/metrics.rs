//! Request counters and latency sums by operation and code, in the
//! Prometheus text format (`ABI_METRICS_ADDR`, `GET /metrics`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use abi_wire::ErrorCode;
use abi_wire::documents::Operation;

/// The latency buckets, in seconds.
const BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5,
];

#[derive(Debug, Default, Clone)]
struct Series {
    count: u64,
    sum_secs: f64,
    buckets: [u64; BUCKETS.len()],
}

/// What the service has answered so far.
#[derive(Debug, Default)]
pub struct Metrics {
    answered: Mutex<BTreeMap<(Operation, &'static str), Series>>,
    dropped: Mutex<BTreeMap<Operation, u64>>,
}

impl Metrics {
    /// Counts one answered request (`code` `None`: success).
    pub fn observe(&self, operation: Operation, code: Option<ErrorCode>, took: Duration) {
        let code = code.map_or(abi_wire::codes::OK_LABEL, ErrorCode::as_str);
        let secs = took.as_secs_f64();
        // A poisoned lock only means another thread panicked mid-update: the
        // counters stay usable.
        let mut answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        let series = answered.entry((operation, code)).or_default();
        series.count += 1;
        series.sum_secs += secs;
        for (bucket, bound) in series.buckets.iter_mut().zip(BUCKETS) {
            if secs <= bound {
                *bucket += 1;
            }
        }
    }

    /// Counts a request dropped because it had no reply subject.
    pub fn no_reply(&self, operation: Operation) {
        let mut dropped = self.dropped.lock().unwrap_or_else(|e| e.into_inner());
        *dropped.entry(operation).or_default() += 1;
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP abi_documents_requests_total Requests answered, by operation and code.\n",
        );
        out.push_str("# TYPE abi_documents_requests_total counter\n");
        let answered = self
            .answered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for ((op, code), series) in &answered {
            let _ = writeln!(
                out,
                "abi_documents_requests_total{{operation=\"{}\",code=\"{code}\"}} {}",
                op.as_str(),
                series.count
            );
        }
        out.push_str(
            "# HELP abi_documents_request_seconds Time to answer a request, by operation.\n",
        );
        out.push_str("# TYPE abi_documents_request_seconds histogram\n");
        let mut by_op: BTreeMap<Operation, Series> = BTreeMap::new();
        for ((op, _), series) in &answered {
            let total = by_op.entry(*op).or_default();
            total.count += series.count;
            total.sum_secs += series.sum_secs;
            for (t, s) in total.buckets.iter_mut().zip(series.buckets) {
                *t += s;
            }
        }
        for (op, series) in &by_op {
            let op = op.as_str();
            for (bound, n) in BUCKETS.iter().zip(series.buckets) {
                let _ = writeln!(
                    out,
                    "abi_documents_request_seconds_bucket{{operation=\"{op}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "abi_documents_request_seconds_bucket{{operation=\"{op}\",le=\"+Inf\"}} {}",
                series.count
            );
            let _ = writeln!(
                out,
                "abi_documents_request_seconds_sum{{operation=\"{op}\"}} {}",
                series.sum_secs
            );
            let _ = writeln!(
                out,
                "abi_documents_request_seconds_count{{operation=\"{op}\"}} {}",
                series.count
            );
        }
        out.push_str("# HELP abi_documents_dropped_total Requests without a reply subject, not carried out.\n");
        out.push_str("# TYPE abi_documents_dropped_total counter\n");
        let dropped = self
            .dropped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (op, n) in dropped {
            let _ = writeln!(
                out,
                "abi_documents_dropped_total{{operation=\"{}\"}} {n}",
                op.as_str()
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        m.observe(Operation::Put, None, Duration::from_millis(1));
        m.observe(
            Operation::Put,
            Some(ErrorCode::VersionConflict),
            Duration::from_millis(3),
        );
        m.no_reply(Operation::Get);
        let text = m.render();
        assert!(text.contains("abi_documents_requests_total{operation=\"put\",code=\"OK\"} 1"));
        assert!(text.contains(
            "abi_documents_requests_total{operation=\"put\",code=\"VERSION_CONFLICT\"} 1"
        ));
        assert!(text.contains("abi_documents_request_seconds_count{operation=\"put\"} 2"));
        assert!(
            text.contains("abi_documents_request_seconds_bucket{operation=\"put\",le=\"0.001\"} 1")
        );
        assert!(text.contains("abi_documents_dropped_total{operation=\"get\"} 1"));
    }
}
