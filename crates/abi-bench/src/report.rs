//! The results of one target, and the markdown table of all of them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::LEVELS;
use crate::measure::Summary;
use crate::service::Usage;

/// A measured operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    /// `register` (re-registering a live instance: a full write).
    Register,
    /// `renew`.
    Renew,
    /// `get_module` with nothing changed since the previous call.
    GetModule,
}

impl Op {
    /// Every operation, in table order.
    pub const ALL: [Op; 3] = [Op::Register, Op::Renew, Op::GetModule];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Register => "register",
            Op::Renew => "renew",
            Op::GetModule => "get_module",
        }
    }
}

/// What one target measured. Cells it does not measure stay empty ("—").
#[derive(Debug, Default)]
pub struct Column {
    /// Column heading.
    pub name: &'static str,
    /// Latency per operation and live-instance count.
    pub latency: BTreeMap<(Op, usize), Summary>,
    /// Sustained operations per second at 256 instances.
    pub throughput: Option<f64>,
    /// The service process's CPU and memory.
    pub usage: Option<Usage>,
    /// Failed calls over the whole run.
    pub errors: u64,
    /// Set when the target was not run; every cell then says "skipped".
    pub skipped: bool,
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

/// The markdown table, one row per metric, one column per target.
pub fn table(columns: &[Column], callers: usize) -> String {
    let mut out = String::new();
    let mut row = |label: &str, cell: &dyn Fn(&Column) -> Option<String>| {
        let _ = write!(out, "| {label} |");
        for column in columns {
            let text = if column.skipped {
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
        for n in LEVELS {
            row(
                &format!("{} @{n}: p50 / p99 (ms)", op.as_str()),
                &|c: &Column| {
                    c.latency.get(&(op, n)).map(|s| {
                        format!(
                            "{:.3} / {:.3}",
                            s.p50.as_secs_f64() * 1e3,
                            s.p99.as_secs_f64() * 1e3
                        )
                    })
                },
            );
        }
    }
    row(
        &format!("renew throughput @256, {callers} callers (ops/s)"),
        &|c: &Column| c.throughput.map(|t| format!("{t:.0}")),
    );
    row("service CPU while measured (s)", &|c: &Column| {
        c.usage.map(|u| format!("{:.2}", u.cpu_secs))
    });
    row("service peak RSS (MiB)", &|c: &Column| {
        c.usage.map(|u| format!("{:.1}", u.peak_rss_mib))
    });
    row("failed calls", &|c: &Column| Some(c.errors.to_string()));
    header + &out
}

/// A verdict cell: `**met**` or `**missed**`.
pub fn judged(met: bool) -> &'static str {
    if met { "**met**" } else { "**missed**" }
}

/// The median of `values` (the lower of the middle two for an even
/// count); `None` when there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len().checked_sub(1)? / 2).copied()
}

/// `values`' median, and their spread when there are several:
/// `"1152 (1110-1266)"`; `None` when there are none.
pub fn median_and_spread(values: &[f64]) -> Option<String> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = median(&sorted)?;
    match (sorted.first(), sorted.last()) {
        (Some(min), Some(max)) if sorted.len() > 1 => {
            Some(format!("{median:.0} ({min:.0}-{max:.0})"))
        }
        _ => Some(format!("{median:.0}")),
    }
}

/// The measured and verdict cells of a "throughput at least `target` times
/// the reference's" row, from our rate and the reference's (runs/s).
pub fn throughput_verdict(
    ours: Option<f64>,
    reference: Option<f64>,
    reference_skipped: bool,
    target: f64,
) -> (String, &'static str) {
    match (ours, reference) {
        _ if reference_skipped => (
            "reference skipped".to_owned(),
            "not judged (reference skipped)",
        ),
        (Some(a), Some(b)) if b > 0.0 => {
            let ratio = a / b;
            (
                format!("{a:.0} vs {b:.0} runs/s: **{ratio:.1}x**"),
                judged(ratio >= target),
            )
        }
        _ => ("not measured".to_owned(), judged(false)),
    }
}

#[cfg(test)]
mod median_tests {
    #[test]
    fn a_median_comes_with_the_spread_of_several_runs() {
        assert_eq!(super::median(&[]), None);
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(
            super::median(&[4.0, 2.0]),
            Some(2.0),
            "the lower middle of an even count"
        );
        assert_eq!(super::median_and_spread(&[]), None);
        assert_eq!(super::median_and_spread(&[5.0]).as_deref(), Some("5"));
        assert_eq!(
            super::median_and_spread(&[1266.0, 1110.0, 1152.0]).as_deref(),
            Some("1152 (1110-1266)")
        );
        assert_eq!(
            super::median_and_spread(&[4.0, 2.0]).as_deref(),
            Some("2 (2-4)")
        );
    }
}
