//! Prometheus metrics in the text exposition format, served on `GET /metrics` at
//! `ABI_METRICS_ADDR` when it is set.
//!
//! A sink: it reads the service and nothing reads it. Every value is read at
//! scrape time from counters the service keeps anyway (the `telemetry` atomics
//! in [`endpoints::Stats`] and in the writer), so the request path pays
//! a few relaxed atomic adds and nothing else. The request counts are the very
//! ones `$SRV.STATS` reports: both read [`endpoints::Stats`].
//!
//! | metric | type | labels | meaning |
//! | --- | --- | --- | --- |
//! | `abi_discovery_requests_total` | counter | `operation`, `code` | requests answered; `code` is `OK` or the `CallError` code (an unknown code counts as `OTHER`) |
//! | `abi_discovery_request_duration_seconds` | histogram | `operation` | time from taking a request to its reply being ready |
//! | `abi_discovery_requests_dropped_total` | counter | | requests dropped unanswered because they had no reply subject |
//! | `abi_discovery_cas_conflicts_total` | counter | | snapshot compare-and-swaps that lost to another writer |
//! | `abi_discovery_cas_retries_total` | counter | | batch attempts after the first (re-read and re-apply) |
//! | `abi_discovery_registry_busy_total` | counter | | batches answered `REGISTRY_BUSY` (every attempt conflicted) |
//! | `abi_discovery_store_errors_total` | counter | | store failures and timeouts, writes and lookups |
//! | `abi_discovery_writer_commits_total` | counter | | snapshots written |
//! | `abi_discovery_writer_batch_size` | histogram | | mutations per writer batch |
//! | `abi_discovery_snapshot_bytes` | gauge | | size of the snapshot this process last wrote or downloaded |
//! | `abi_discovery_live_instances` | gauge | `status` | live instances by computed status in this process's cached snapshot (absent while nothing is cached, e.g. after a store failure) |
//!
//! Labels are bounded: nine operations, the wire codes plus `OK` and `OTHER`,
//! and the five statuses.
//!
//! [`endpoints::Stats`]: crate::endpoints::Stats

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::discovery::Discovery;
use crate::endpoints::Stats;
use crate::endpoints::stats::OK;
use crate::telemetry::HistogramSnapshot;
use abi_wire::discovery::Operation;

/// The content type of the Prometheus text format.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The statuses the live-instance gauge reports (the registry's five).
pub const STATUSES: [&str; 5] = abi_wire::status::ALL;

/// What a scrape reads: the endpoint counters and the registry facade.
#[derive(Debug, Clone)]
pub struct Metrics {
    stats: Arc<Stats>,
    discovery: Discovery,
}

impl Metrics {
    /// Metrics over the endpoints' `stats` and `discovery`'s writer and cache.
    pub fn new(stats: Arc<Stats>, discovery: Discovery) -> Self {
        Self { stats, discovery }
    }

    /// Every metric, in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Encoder::default();

        out.header(
            "abi_discovery_requests_total",
            "counter",
            "Requests answered, by operation and reply code (OK on success).",
        );
        for op in Operation::ALL {
            let endpoint = self.stats.endpoint(op);
            for (code, count) in &endpoint.codes {
                out.sample(
                    "abi_discovery_requests_total",
                    &[("operation", op.as_str()), ("code", code)],
                    *count,
                );
            }
            if !endpoint.codes.iter().any(|(code, _)| *code == OK) {
                // Every operation shows up from the start, at zero.
                out.sample(
                    "abi_discovery_requests_total",
                    &[("operation", op.as_str()), ("code", OK)],
                    0,
                );
            }
        }

        out.header(
            "abi_discovery_request_duration_seconds",
            "histogram",
            "Time to handle a request, from taking it to its reply being ready.",
        );
        for op in Operation::ALL {
            out.histogram(
                "abi_discovery_request_duration_seconds",
                ("operation", op.as_str()),
                &self.stats.duration(op),
                NANOS_PER_SECOND,
            );
        }

        out.counter(
            "abi_discovery_requests_dropped_total",
            "Requests dropped unanswered: they had no reply subject.",
            self.stats.dropped_without_reply(),
        );

        let writer = self.discovery.stats();
        out.counter(
            "abi_discovery_cas_conflicts_total",
            "Snapshot compare-and-swaps that lost to another writer.",
            writer.conflicts,
        );
        out.counter(
            "abi_discovery_cas_retries_total",
            "Writer batch attempts after the first.",
            writer.retries,
        );
        out.counter(
            "abi_discovery_registry_busy_total",
            "Writer batches answered REGISTRY_BUSY after every attempt conflicted.",
            writer.busy,
        );
        out.counter(
            "abi_discovery_store_errors_total",
            "Snapshot store failures and timeouts (writes and lookups).",
            writer.store_errors,
        );
        out.counter(
            "abi_discovery_writer_commits_total",
            "Snapshots written.",
            writer.commits,
        );
        out.header(
            "abi_discovery_writer_batch_size",
            "histogram",
            "Mutations per writer batch.",
        );
        out.histogram(
            "abi_discovery_writer_batch_size",
            ("", ""),
            &self.discovery.batch_sizes(),
            1,
        );
        out.header(
            "abi_discovery_snapshot_bytes",
            "gauge",
            "Size of the snapshot this process last wrote or downloaded.",
        );
        out.sample("abi_discovery_snapshot_bytes", &[], writer.snapshot_bytes);

        out.header(
            "abi_discovery_live_instances",
            "gauge",
            "Live instances by status, in this process's cached snapshot.",
        );
        if let Some(counts) = self.live_instances() {
            for (status, count) in STATUSES.iter().zip(counts) {
                out.sample("abi_discovery_live_instances", &[("status", status)], count);
            }
        }
        out.text
    }

    /// Live instances per status of [`STATUSES`] in the cached snapshot, with
    /// freshly computed statuses (`None` while nothing is cached).
    pub fn live_instances(&self) -> Option<[u64; STATUSES.len()]> {
        let state = self.discovery.cached_snapshot()?;
        let live = abi_registry::view(&state, self.discovery.now());
        let mut counts = [0_u64; STATUSES.len()];
        for record in &live.records {
            let status = record.instance.as_ref().map_or("", |i| i.status.as_str());
            // The registry computes one of its five statuses; anything else is
            // not counted rather than turned into an unbounded label.
            if let Some(i) = STATUSES.iter().position(|s| *s == status) {
                counts[i] += 1;
            }
        }
        Some(counts)
    }
}

/// Binds `addr` and serves `GET /metrics` until `stop` is cancelled.
///
/// Returns once the socket is bound, so a scrape made afterwards is answered.
///
/// # Errors
///
/// The I/O error of binding `addr`.
///
/// # Cancel safety
///
/// Cancel safe: dropping it before it returns only closes the socket.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    stop: CancellationToken,
) -> std::io::Result<JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tracing::info!(addr = %local, "serving metrics on /metrics");
    let app = router(metrics);
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::warn!(error = %error, "the metrics server stopped");
        }
    }))
}

/// The metrics routes (`GET /metrics`), for serving or testing in process.
pub fn router(metrics: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Arc::new(metrics))
}

async fn scrape(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    ([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], metrics.render())
}

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Writes the text format into a string.
#[derive(Default)]
struct Encoder {
    text: String,
}

impl Encoder {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.header(name, "counter", help);
        self.sample(name, &[], value);
    }

    /// One sample; label values are static, bounded names that need no escaping.
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.text.push_str(name);
        self.labels(labels);
        let _ = writeln!(self.text, " {value}");
    }

    fn labels(&mut self, labels: &[(&str, &str)]) {
        let mut labels = labels.iter().filter(|(key, _)| !key.is_empty()).peekable();
        if labels.peek().is_none() {
            return;
        }
        self.text.push('{');
        for (i, (key, value)) in labels.enumerate() {
            if i > 0 {
                self.text.push(',');
            }
            let _ = write!(self.text, "{key}=\"{value}\"");
        }
        self.text.push('}');
    }

    /// The `_bucket`, `_sum` and `_count` series of `h`, whose values are in
    /// units of `1 / scale` (nanoseconds with a scale of 10^9 give seconds).
    fn histogram(&mut self, name: &str, label: (&str, &str), h: &HistogramSnapshot, scale: u64) {
        let to_unit = |v: u64| v as f64 / scale as f64;
        let bucket = format!("{name}_bucket");
        for (bound, count) in &h.buckets {
            let le = to_unit(*bound).to_string();
            self.sample(&bucket, &[label, ("le", &le)], count);
        }
        self.sample(&bucket, &[label, ("le", "+Inf")], h.count);
        self.sample(&format!("{name}_sum"), &[label], to_unit(h.sum));
        self.sample(&format!("{name}_count"), &[label], h.count);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::telemetry::Histogram;

    static BOUNDS: [u64; 3] = [1, 5, 10];

    #[tokio::test]
    async fn every_metric_is_rendered_and_documented() {
        use tokio_util::task::TaskTracker;

        let tracker = TaskTracker::new();
        let discovery = Discovery::start(
            Arc::new(crate::store::memory::MemoryStore::new()),
            abi_registry::Rules::default(),
            Arc::new(crate::clock::ManualClock::new(1_000.0)),
            crate::discovery::DiscoveryConfig::default(),
            &tracker,
            CancellationToken::new(),
        );
        let stats = Arc::new(Stats::default());
        stats.record(
            Operation::Renew,
            std::time::Duration::from_millis(3),
            Some(("LEASE_EXPIRED", "gone")),
        );
        let metrics = Metrics::new(Arc::clone(&stats), discovery.clone());
        // Nothing cached yet: no live-instance samples.
        assert_eq!(metrics.live_instances(), None);
        discovery.snapshot().await.unwrap();
        assert_eq!(metrics.live_instances(), Some([0; 5]));
        let text = metrics.render();
        assert!(text.contains(
            "abi_discovery_requests_total{operation=\"renew\",code=\"LEASE_EXPIRED\"} 1\n"
        ));
        assert!(text.contains("abi_discovery_requests_total{operation=\"renew\",code=\"OK\"} 0\n"));
        assert!(text.contains(
            "abi_discovery_request_duration_seconds_bucket{operation=\"renew\",le=\"0.005\"} 1\n"
        ));
        assert!(text.contains("abi_discovery_live_instances{status=\"READY\"} 0\n"));
        let names: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|rest| rest.split(' ').next())
            .collect();
        assert_eq!(names.len(), 11, "{text}");
        let module_doc = include_str!("metrics.rs");
        let operator_doc = include_str!("../../../docs/metrics.md");
        for name in names {
            let row = format!("| `{name}` |");
            assert!(module_doc.contains(&row), "{name} is not in the module doc");
            assert!(
                operator_doc.contains(&row),
                "{name} is not in docs/metrics.md"
            );
        }
    }

    #[test]
    fn histogram_text() {
        let h = Histogram::new(&BOUNDS);
        h.observe(500_000_000);
        h.observe(20);
        let mut out = Encoder::default();
        out.histogram("d", ("operation", "renew"), &h.snapshot(), 1_000_000_000);
        out.histogram("b", ("", ""), &Histogram::new(&BOUNDS).snapshot(), 1);
        assert_eq!(
            out.text,
            "d_bucket{operation=\"renew\",le=\"0.000000001\"} 0\n\
             d_bucket{operation=\"renew\",le=\"0.000000005\"} 0\n\
             d_bucket{operation=\"renew\",le=\"0.00000001\"} 0\n\
             d_bucket{operation=\"renew\",le=\"+Inf\"} 2\n\
             d_sum{operation=\"renew\"} 0.50000002\n\
             d_count{operation=\"renew\"} 2\n\
             b_bucket{le=\"1\"} 0\n\
             b_bucket{le=\"5\"} 0\n\
             b_bucket{le=\"10\"} 0\n\
             b_bucket{le=\"+Inf\"} 0\n\
             b_sum 0\n\
             b_count 0\n"
        );
    }
}
