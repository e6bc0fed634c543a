//! The jobs run's results: one column per target, the markdown table, and
//! the verdicts on the targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::LEVELS;
use super::workload::Cell;
use crate::measure::Summary;
use crate::report::judged;
use crate::service::Usage;

/// The latency target: trigger-to-start p50 on an idle host, ms.
pub const START_P50_TARGET_MS: f64 = 2.0;
/// The throughput target at `max_concurrency` 64: at least this
/// many times the reference's.
pub const THROUGHPUT_TARGET_RATIO: f64 = 10.0;
/// The cell the throughput target is judged at.
pub const JUDGED_LEVEL: u32 = 64;

/// What one target measured. Cells it does not measure stay empty ("—").
#[derive(Debug, Default)]
pub struct Column {
    /// Column heading.
    pub name: &'static str,
    /// Trigger to the handler's first action, idle host.
    pub start: Option<Summary>,
    /// Trigger to the completion notice, idle host.
    pub done: Option<Summary>,
    /// Throughput per `max_concurrency`: the run of median rate.
    pub throughput: BTreeMap<u32, Cell>,
    /// Every run's rate per `max_concurrency`, in the order they ran.
    pub rates: BTreeMap<u32, Vec<f64>>,
    /// The target process's CPU and memory.
    pub usage: Option<Usage>,
    /// CPU seconds `abi-documents` used while this target was measured.
    pub documents_cpu: Option<f64>,
    /// CPU seconds nats-server used while this target was measured.
    pub nats_cpu: Option<f64>,
    /// CPU microseconds per run of the judged throughput cell: host,
    /// abi-documents, nats-server, the bench's caller.
    pub cpu_per_run: Option<[f64; 4]>,
    /// Runs that failed, never started or never ended, over the whole run.
    pub failed: u64,
    /// Why the target was not run; its cells then say "skipped".
    pub skipped: Option<String>,
}

impl Column {
    /// An empty column.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            ..Self::default()
        }
    }
}

fn latency(summary: Option<Summary>) -> Option<String> {
    summary.map(|s| {
        format!(
            "{:.3} / {:.3}",
            s.p50.as_secs_f64() * 1e3,
            s.p99.as_secs_f64() * 1e3
        )
    })
}

/// The markdown table, one row per metric, one column per target.
pub fn table(columns: &[Column], triggers: usize) -> String {
    let mut out = String::new();
    let mut row = |label: &str, cell: &dyn Fn(&Column) -> Option<String>| {
        let _ = write!(out, "| {label} |");
        for column in columns {
            let text = if column.skipped.is_some() {
                "skipped".to_owned()
            } else {
                cell(column).unwrap_or_else(|| "—".to_owned())
            };
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    };
    row("trigger-to-start, idle: p50 / p99 (ms)", &|c| {
        latency(c.start)
    });
    row("trigger-to-completion notice, idle: p50 / p99 (ms)", &|c| {
        latency(c.done)
    });
    for n in LEVELS {
        row(
            &format!(
                "throughput, max_concurrency {n}, {triggers} triggers (runs/s; median, and min-max of the runs)"
            ),
            &|c| {
                c.rates
                    .get(&n)
                    .and_then(|r| crate::report::median_and_spread(r))
            },
        );
    }
    row(
        &format!("triggers stored while publishing, max_concurrency {JUDGED_LEVEL} (/s)"),
        &|c| {
            c.throughput
                .get(&JUDGED_LEVEL)
                .map(|t| format!("{:.0}", t.publish_rate))
        },
    );
    row("host process CPU while measured (s)", &|c| {
        c.usage.map(|u| format!("{:.2}", u.cpu_secs))
    });
    row("host process peak RSS (MiB)", &|c| {
        c.usage.map(|u| format!("{:.1}", u.peak_rss_mib))
    });
    row("abi-documents CPU while measured (s)", &|c| {
        c.documents_cpu.map(|s| format!("{s:.2}"))
    });
    row("nats-server CPU while measured (s)", &|c| {
        c.nats_cpu.map(|s| format!("{s:.2}"))
    });
    row(
        &format!(
            "CPU per run, max_concurrency {JUDGED_LEVEL}: host / abi-documents / nats-server / bench caller (µs)"
        ),
        &|c| {
            c.cpu_per_run
                .map(|[h, d, n, b]| format!("{h:.0} / {d:.0} / {n:.0} / {b:.0}"))
        },
    );
    row("failed or missing runs", &|c| Some(c.failed.to_string()));
    let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
    let mut header = format!("| metric | {} |\n|---|", names.join(" | "));
    header.push_str(&"---|".repeat(columns.len()));
    header.push('\n');
    header + &out
}

/// The verdict table on the two targets for our host.
pub fn verdicts(ours: &Column, reference: &Column) -> String {
    let mut out = String::from("| target | measured | verdict |\n|---|---|---|\n");
    let rate = |c: &Column| c.throughput.get(&JUDGED_LEVEL).map(|t| t.rate);
    let (line, verdict) = crate::report::throughput_verdict(
        rate(ours),
        rate(reference),
        reference.skipped.is_some(),
        THROUGHPUT_TARGET_RATIO,
    );
    let _ = writeln!(
        out,
        "| throughput at max_concurrency {JUDGED_LEVEL} >= {THROUGHPUT_TARGET_RATIO:.0}x the reference's | {line} | {verdict} |"
    );
    let (line, verdict) = match ours.start {
        Some(s) => {
            let ms = s.p50.as_secs_f64() * 1e3;
            (format!("p50 {ms:.3} ms"), judged(ms <= START_P50_TARGET_MS))
        }
        None => ("not measured".to_owned(), judged(false)),
    };
    let _ = writeln!(
        out,
        "| trigger-to-start p50 <= {START_P50_TARGET_MS:.0} ms on an idle host | {line} | {verdict} |"
    );
    out
}
