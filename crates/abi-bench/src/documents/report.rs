//! The documents run's results: one column per target, the markdown table,
//! and the verdicts on the targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::measure::Summary;
use crate::service::Usage;

/// The latency target: a get's p50 at most this many raw
/// request-replies.
pub const GET_TARGET_RATIO: f64 = 2.0;

/// What issue 24 asks of one of our storages at the run's callers (64 by
/// default): its put throughput against the reference's, and where the
/// issue names them, puts per second and the service's CPU per call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StorageTargets {
    /// Put throughput at least this many times the reference's.
    pub put_ratio: f64,
    /// Successful puts per second, at least.
    pub puts_per_sec: Option<f64>,
    /// The service's CPU per put, microseconds, at most.
    pub put_cpu_us: Option<f64>,
    /// The service's CPU per get, microseconds, at most.
    pub get_cpu_us: Option<f64>,
}

/// Issue 24's targets for `abi-documents` on SQLite.
pub const SQLITE_TARGETS: StorageTargets = StorageTargets {
    put_ratio: 40.0,
    puts_per_sec: Some(30_000.0),
    put_cpu_us: Some(40.0),
    get_cpu_us: Some(25.0),
};

/// Issue 24's target for `abi-documents` on PostgreSQL: its throughput
/// against the reference's only.
pub const POSTGRES_TARGETS: StorageTargets = StorageTargets {
    put_ratio: 10.0,
    puts_per_sec: None,
    put_cpu_us: None,
    get_cpu_us: None,
};

/// A measured operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    /// `put` with `if_version = 0` of a new id.
    Create,
    /// `put` with `if_version` = the stored version.
    Cas,
    /// `get` of a stored document.
    Get,
    /// `find`: a page of an `eq` on an indexed field, `order_by` another.
    Find,
}

impl Op {
    /// Every operation, in table order.
    pub const ALL: [Op; 4] = [Op::Create, Op::Cas, Op::Get, Op::Find];
}

/// What one target measured. Cells it does not measure stay empty ("—").
#[derive(Debug, Default)]
pub struct Column {
    /// Column heading.
    pub name: &'static str,
    /// Latency per operation.
    pub latency: BTreeMap<Op, Summary>,
    /// A raw request-reply of a get request, each sent just before one of
    /// this target's gets: the floor its get target is judged against.
    pub paired_get_floor: Option<Summary>,
    /// Successful puts per second with the run's concurrent callers: the
    /// median of the runs.
    pub throughput: Option<f64>,
    /// Every run's rate, in the order they ran.
    pub rates: Vec<f64>,
    /// The service process's CPU and memory.
    pub usage: Option<Usage>,
    /// The service process's CPU per successful put in the throughput
    /// phase, in microseconds.
    pub cpu_per_put_us: Option<f64>,
    /// Every get throughput run's rate (successful gets per second with
    /// the run's concurrent callers), in the order they ran.
    pub get_rates: Vec<f64>,
    /// The service process's CPU per successful get in the get throughput
    /// phase, in microseconds.
    pub cpu_per_get_us: Option<f64>,
    /// Failed calls by phase and code.
    pub failures: BTreeMap<(&'static str, String), u64>,
    /// Why the target was not run, if it was not; its cells then say
    /// "skipped".
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

    /// Failed calls over the whole run.
    pub fn failed(&self) -> u64 {
        self.failures.values().sum()
    }
}

/// The shape of the run, for the row labels.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Items a find page asks for.
    pub page: usize,
    /// Documents in the set find searches.
    pub records: usize,
    /// Concurrent callers of the throughput phase.
    pub callers: usize,
}

/// The markdown table, one row per metric, one column per target.
pub fn table(columns: &[Column], shape: Shape) -> String {
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
    let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
    let mut header = format!("| metric | {} |\n|---|", names.join(" | "));
    header.push_str(&"---|".repeat(columns.len()));
    header.push('\n');
    for op in Op::ALL {
        let label = match op {
            Op::Create => "put (create, if_version = 0): p50 / p99 (ms)".to_owned(),
            Op::Cas => "put (CAS, if_version = current): p50 / p99 (ms)".to_owned(),
            Op::Get => "get: p50 / p99 (ms)".to_owned(),
            Op::Find => format!(
                "find ({} of {}: eq on an indexed field, order_by): p50 / p99 (ms)",
                shape.page, shape.records
            ),
        };
        row(&label, &|c: &Column| {
            c.latency.get(&op).map(|s| {
                format!(
                    "{:.3} / {:.3}",
                    s.p50.as_secs_f64() * 1e3,
                    s.p99.as_secs_f64() * 1e3
                )
            })
        });
    }
    row(
        "raw req-reply of a get, interleaved with the target's gets: p50 / p99 (ms)",
        &|c: &Column| {
            c.paired_get_floor.map(|s| {
                format!(
                    "{:.3} / {:.3}",
                    s.p50.as_secs_f64() * 1e3,
                    s.p99.as_secs_f64() * 1e3
                )
            })
        },
    );
    row(
        &format!(
            "put throughput, {} callers (ops/s; median, and min-max of the runs)",
            shape.callers
        ),
        &|c: &Column| crate::report::median_and_spread(&c.rates),
    );
    row(
        &format!(
            "service process CPU per put, {} callers (µs)",
            shape.callers
        ),
        &|c: &Column| c.cpu_per_put_us.map(|us| format!("{us:.0}")),
    );
    row(
        &format!(
            "get throughput, {} callers (ops/s; median, and min-max of the runs)",
            shape.callers
        ),
        &|c: &Column| crate::report::median_and_spread(&c.get_rates),
    );
    row(
        &format!(
            "service process CPU per get, {} callers (µs)",
            shape.callers
        ),
        &|c: &Column| c.cpu_per_get_us.map(|us| format!("{us:.0}")),
    );
    row("service process CPU while measured (s)", &|c: &Column| {
        c.usage.map(|u| format!("{:.2}", u.cpu_secs))
    });
    row("service process peak RSS (MiB)", &|c: &Column| {
        c.usage.map(|u| format!("{:.1}", u.peak_rss_mib))
    });
    row("failed calls", &|c: &Column| Some(c.failed().to_string()));
    row("failed calls by phase: code", &|c: &Column| {
        Some(if c.failures.is_empty() {
            "none".to_owned()
        } else {
            c.failures
                .iter()
                .map(|((phase, code), n)| format!("{phase}: {code} x{n}"))
                .collect::<Vec<_>>()
                .join("; ")
        })
    });
    header + &out
}

/// The verdict table: each of our storages against its targets. A get is
/// judged against the raw request-replies interleaved with it (else
/// `floor`, the raw request-reply column); `reference` is the reference's
/// column.
pub fn verdicts(floor: &Column, ours: &[(&Column, StorageTargets)], reference: &Column) -> String {
    let mut out = String::from("| target | measured | verdict |\n|---|---|---|\n");
    let ms = |s: &Summary| s.p50.as_secs_f64() * 1e3;
    for (column, _) in ours {
        let (raw, which) = match &column.paired_get_floor {
            Some(paired) => (Some(paired), "interleaved"),
            None => (floor.latency.get(&Op::Get), "raw column"),
        };
        let measured = match (column.latency.get(&Op::Get), raw) {
            _ if column.skipped.is_some() => None,
            (Some(get), Some(raw)) => {
                let ratio = ms(get) / ms(raw);
                Some((
                    format!(
                        "{:.3} ms vs {:.3} ms ({which}): **{ratio:.2}x**",
                        ms(get),
                        ms(raw)
                    ),
                    ratio <= GET_TARGET_RATIO,
                ))
            }
            _ => None,
        };
        push_verdict(
            &mut out,
            &format!(
                "{}: get p50 <= {GET_TARGET_RATIO}x raw request-reply p50",
                column.name
            ),
            measured,
        );
    }
    for (column, targets) in ours {
        let target_ratio = targets.put_ratio;
        let measured = match (column.throughput, reference.throughput) {
            _ if column.skipped.is_some() || reference.skipped.is_some() => None,
            (Some(ours), Some(theirs)) if theirs > 0.0 => {
                let ratio = ours / theirs;
                let failed = reference
                    .failures
                    .iter()
                    .filter(|((phase, _), _)| *phase == "throughput")
                    .map(|(_, n)| n)
                    .sum::<u64>();
                Some((
                    format!(
                        "{ours:.0} vs {theirs:.0} ops/s: **{ratio:.1}x** \
                         (successful puts only; the reference failed {failed} in that phase)"
                    ),
                    ratio >= target_ratio,
                ))
            }
            _ => None,
        };
        push_verdict(
            &mut out,
            &format!(
                "{}: put throughput >= {target_ratio}x the reference's",
                column.name
            ),
            measured,
        );
        for (target, measured) in own_verdicts(column, targets) {
            push_verdict(&mut out, &target, measured);
        }
    }
    out
}

/// The targets a storage meets or misses on its own (no other column
/// needed): puts per second, CPU per put and per get; each as the target's
/// wording and, when measured, the figure and whether it holds.
fn own_verdicts(
    column: &Column,
    targets: &StorageTargets,
) -> Vec<(String, Option<(String, bool)>)> {
    let measured = |value: Option<f64>| value.filter(|_| column.skipped.is_none());
    let mut out = Vec::new();
    if let Some(floor) = targets.puts_per_sec {
        out.push((
            format!("{}: put throughput >= {floor:.0}/s", column.name),
            measured(column.throughput).map(|rate| (format!("{rate:.0}/s"), rate >= floor)),
        ));
    }
    let cpu = [
        ("put", targets.put_cpu_us, column.cpu_per_put_us),
        ("get", targets.get_cpu_us, column.cpu_per_get_us),
    ];
    for (op, target, value) in cpu {
        if let Some(ceiling) = target {
            out.push((
                format!("{}: service CPU per {op} <= {ceiling:.0} µs", column.name),
                // One decimal: 40.3 µs misses a 40 µs target, and must not read "40".
                measured(value).map(|us| (format!("{us:.1} µs"), us <= ceiling)),
            ));
        }
    }
    out
}

fn push_verdict(out: &mut String, target: &str, measured: Option<(String, bool)>) {
    let (text, verdict) = match measured {
        Some((text, true)) => (text, "**met**"),
        Some((text, false)) => (text, "**missed**"),
        None => ("not measured".to_owned(), "—"),
    };
    let _ = writeln!(out, "| {target} | {text} | {verdict} |");
}

#[cfg(test)]
mod verdict_tests {
    use super::*;

    fn sqlite(puts: f64, put_us: f64, get_us: f64) -> Column {
        let mut column = Column::new("abi-documents (SQLite)");
        column.throughput = Some(puts);
        column.cpu_per_put_us = Some(put_us);
        column.cpu_per_get_us = Some(get_us);
        column
    }

    #[test]
    fn sqlite_is_judged_on_its_rate_and_its_cpu_per_call() {
        // (puts/s, µs per put, µs per get) -> (rate, put, get) holds
        let table = [
            ((30_000.0, 40.0, 25.0), (true, true, true)),
            ((21_740.0, 38.0, 15.0), (false, true, true)),
            ((35_000.0, 41.0, 26.0), (true, false, false)),
        ];
        for ((puts, put_us, get_us), expected) in table {
            let verdicts = own_verdicts(&sqlite(puts, put_us, get_us), &SQLITE_TARGETS);
            assert!(verdicts.iter().all(|(_, m)| m.is_some()), "all measured");
            let held: Vec<bool> = verdicts
                .iter()
                .map(|(_, m)| m.as_ref().is_some_and(|m| m.1))
                .collect();
            assert_eq!(
                held,
                [expected.0, expected.1, expected.2],
                "{puts} {put_us} {get_us}"
            );
        }
        let verdicts = own_verdicts(&sqlite(21_740.4, 38.2, 15.0), &SQLITE_TARGETS);
        let names: Vec<&str> = verdicts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "abi-documents (SQLite): put throughput >= 30000/s",
                "abi-documents (SQLite): service CPU per put <= 40 µs",
                "abi-documents (SQLite): service CPU per get <= 25 µs",
            ]
        );
        assert_eq!(
            verdicts[0].1.as_ref().map(|m| m.0.as_str()),
            Some("21740/s")
        );
        let edge = own_verdicts(&sqlite(30_000.0, 40.3, 25.0), &SQLITE_TARGETS);
        assert_eq!(edge[1].1, Some(("40.3 µs".to_owned(), false)));
    }

    #[test]
    fn a_skipped_storage_is_not_judged_and_postgres_has_only_its_ratio() {
        let mut skipped = sqlite(50_000.0, 10.0, 10.0);
        skipped.skipped = Some("--skip-postgres".to_owned());
        assert!(
            own_verdicts(&skipped, &SQLITE_TARGETS)
                .iter()
                .all(|(_, m)| m.is_none())
        );
        assert!(own_verdicts(&sqlite(1.0, 1.0, 1.0), &POSTGRES_TARGETS).is_empty());
    }

    #[test]
    fn each_storage_is_held_to_its_own_ratio() {
        let mut reference = Column::new("reference (Python, SQLite)");
        reference.throughput = Some(500.0);
        let ours = sqlite(15_000.0, 38.0, 15.0);
        let mut postgres = Column::new("abi-documents (PostgreSQL)");
        postgres.throughput = Some(6_000.0);
        let table = verdicts(
            &Column::new("raw"),
            &[(&ours, SQLITE_TARGETS), (&postgres, POSTGRES_TARGETS)],
            &reference,
        );
        assert!(
            table.contains(
                "(SQLite): put throughput >= 40x the reference's | 15000 vs 500 ops/s: **30.0x**"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "(PostgreSQL): put throughput >= 10x the reference's | 6000 vs 500 ops/s: **12.0x**"
            ),
            "{table}"
        );
        let rows: Vec<&str> = table
            .lines()
            .filter(|l| l.contains("put throughput >= "))
            .collect();
        assert!(rows[0].ends_with("**missed** |"), "{table}");
        assert!(rows[1].ends_with("**missed** |"), "30000/s: {table}");
        assert!(rows[2].ends_with("**met** |"), "{table}");
    }
}
