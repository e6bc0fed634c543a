//! The jobs run's results: one column per target, the markdown table, and
//! the verdicts on the issue's targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::LEVELS;
use super::workload::Cell;
use crate::measure::Summary;
use crate::report::judged;
use crate::service::Usage;

/// Issue 24's latency target: trigger-to-start p50 on an idle host, ms.
pub const START_P50_TARGET_MS: f64 = 1.0;
/// Issue 24's CPU target: host, abi-documents and nats-server together,
/// microseconds per run of the judged cell.
pub const RUN_CPU_TARGET_US: f64 = 250.0;
/// Issue 24's CPU target for the job host alone, microseconds per run of
/// the judged cell.
pub const HOST_CPU_TARGET_US: f64 = 60.0;
/// The issue's throughput target at `max_concurrency` 64: at least this
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

/// The verdict table on issue 24's targets for our host: throughput,
/// trigger-to-start, the CPU of a run in all and of the host alone.
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
    let (total, host) = cpu_verdicts(ours.cpu_per_run);
    let _ = writeln!(
        out,
        "| CPU per run at max_concurrency {JUDGED_LEVEL}, host + abi-documents + nats-server <= {RUN_CPU_TARGET_US:.0} µs | {} | {} |",
        total.0, total.1
    );
    let _ = writeln!(
        out,
        "| CPU per run at max_concurrency {JUDGED_LEVEL}, job host <= {HOST_CPU_TARGET_US:.0} µs | {} | {} |",
        host.0, host.1
    );
    out
}

/// What a run's CPU (host, abi-documents, nats-server, bench caller; µs)
/// says of the two CPU targets: (measured, verdict) for the three
/// processes together, then for the host alone.
fn cpu_verdicts(per_run: Option<[f64; 4]>) -> ((String, &'static str), (String, &'static str)) {
    match per_run {
        Some([host, documents, nats, _caller]) => {
            let total = host + documents + nats;
            (
                (
                    format!("{host:.1} + {documents:.1} + {nats:.1} = {total:.1} µs"),
                    judged(total <= RUN_CPU_TARGET_US),
                ),
                // One decimal: 60.4 µs misses the target, and must not read "60".
                (format!("{host:.1} µs"), judged(host <= HOST_CPU_TARGET_US)),
            )
        }
        None => (
            ("not measured".to_owned(), judged(false)),
            ("not measured".to_owned(), judged(false)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_cpu_is_judged_in_all_and_for_the_host_alone() {
        let met = judged(true);
        let missed = judged(false);
        // (host, documents, nats, caller) -> (total verdict, host verdict)
        let table = [
            ([56.0, 117.0, 47.0, 13.0], met, met),
            ([60.0, 140.0, 50.0, 99.0], met, met),
            ([61.0, 100.0, 40.0, 0.0], met, missed),
            ([50.0, 160.0, 41.0, 0.0], missed, met),
            ([100.0, 290.0, 105.0, 20.0], missed, missed),
        ];
        for (per_run, total, host) in table {
            let (t, h) = cpu_verdicts(Some(per_run));
            assert_eq!((t.1, h.1), (total, host), "{per_run:?}");
        }
        let (t, h) = cpu_verdicts(Some([56.0, 117.0, 47.0, 13.0]));
        assert_eq!(t.0, "56.0 + 117.0 + 47.0 = 220.0 µs");
        assert_eq!(h.0, "56.0 µs");
        let (_, h) = cpu_verdicts(Some([60.4, 100.0, 40.0, 0.0]));
        assert_eq!(h, ("60.4 µs".to_owned(), missed));
        let (t, h) = cpu_verdicts(None);
        assert_eq!((t.1, h.1), (missed, missed));
        assert_eq!(t.0, "not measured");
    }

    #[test]
    fn the_verdicts_name_issue_24s_targets() {
        let mut ours = Column::new("ours");
        ours.start = Some(Summary {
            p50: std::time::Duration::from_micros(1_200),
            p99: std::time::Duration::from_micros(2_000),
        });
        ours.cpu_per_run = Some([56.0, 117.0, 47.0, 13.0]);
        let reference = Column::new("reference");
        let table = verdicts(&ours, &reference);
        assert!(
            table.contains(
                "| trigger-to-start p50 <= 1 ms on an idle host | p50 1.200 ms | **missed** |"
            ),
            "{table}"
        );
        assert!(
            table.contains("<= 250 µs | 56.0 + 117.0 + 47.0 = 220.0 µs | **met** |"),
            "{table}"
        );
        assert!(
            table.contains("job host <= 60 µs | 56.0 µs | **met** |"),
            "{table}"
        );
        assert_eq!(table.lines().count(), 2 + 4, "{table}");
    }
}
