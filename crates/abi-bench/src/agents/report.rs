//! The agents run's results: one column per target (the raw floor, our
//! hosts, the reference's), the markdown table, and the verdicts on the
//! issue's two targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::workload::Measured;
use crate::measure::Summary;
use crate::report::judged;
use crate::service::Usage;

/// The latency target: chat p50 at most this many times a raw
/// request-reply's.
pub const CHAT_P50_TARGET_RATIO: f64 = 2.0;
/// The throughput target: agent invokes per second with the
/// concurrent callers, at least this many times the reference's.
pub const AGENT_THROUGHPUT_TARGET_RATIO: f64 = 10.0;

/// One call kind measured against one target, with the CPU each process
/// spent per successful call of its throughput phase.
#[derive(Debug, Default, Clone)]
pub struct Phase {
    /// Latency, throughput and failures.
    pub measured: Measured,
    /// CPU microseconds per call: host, abi-documents, abi-discovery,
    /// nats-server, the bench's callers.
    pub cpu_per_call: Option<[f64; 5]>,
    /// Requests to the document service and discovery per call, by
    /// operation (a counted pass, one call at a time).
    pub calls: Option<super::calls::PerCall>,
}

/// What one target measured. Cells it does not measure stay empty ("—").
#[derive(Debug, Default)]
pub struct Column {
    /// Column heading.
    pub name: &'static str,
    /// Plain NATS request-reply (the raw floor only).
    pub raw: Option<Phase>,
    /// `ChatModel::invoke` of the echo chat model.
    pub chat: Option<Phase>,
    /// `AgentClient::invoke` of the echo agent (submit to result).
    pub agent: Option<Phase>,
    /// The target process's CPU and memory over all its phases.
    pub usage: Option<Usage>,
    /// CPU seconds `abi-documents` used while this target was measured.
    pub documents_cpu: Option<f64>,
    /// CPU seconds `abi-discovery` used while this target was measured.
    pub discovery_cpu: Option<f64>,
    /// CPU seconds nats-server used while this target was measured.
    pub nats_cpu: Option<f64>,
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

    /// Failures of every phase, by kind of call and code.
    pub fn failures(&self) -> BTreeMap<String, u64> {
        let mut all = BTreeMap::new();
        for (kind, phase) in [
            ("raw", &self.raw),
            ("chat", &self.chat),
            ("agent", &self.agent),
        ] {
            for (code, n) in phase.iter().flat_map(|p| &p.measured.failures) {
                *all.entry(format!("{kind} {code}")).or_default() += n;
            }
        }
        all
    }
}

fn ms(summary: Option<Summary>) -> Option<String> {
    summary.map(|s| {
        format!(
            "{:.3} / {:.3}",
            s.p50.as_secs_f64() * 1e3,
            s.p99.as_secs_f64() * 1e3
        )
    })
}

fn p50_ms(phase: &Option<Phase>) -> Option<f64> {
    Some(phase.as_ref()?.measured.latency?.p50.as_secs_f64() * 1e3)
}

fn rate(phase: &Option<Phase>) -> Option<f64> {
    phase.as_ref()?.measured.rate
}

/// The markdown table, one row per metric, one column per target.
pub fn table(columns: &[Column], callers: usize) -> String {
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
    type Pick = fn(&Column) -> &Option<Phase>;
    let kinds: [(&str, &str, Pick); 3] = [
        ("raw request-reply", "calls", |c| &c.raw),
        ("chat invoke", "chats", |c| &c.chat),
        ("agent invoke, submit to result", "runs", |c| &c.agent),
    ];
    for (kind, unit, pick) in kinds {
        row(&format!("{kind}, one at a time: p50 / p99 (ms)"), &|c| {
            ms(pick(c).as_ref()?.measured.latency)
        });
        row(
            &format!(
                "{kind}, throughput with {callers} callers ({unit}/s; median, and min-max of the runs)"
            ),
            &|c| crate::report::median_and_spread(&pick(c).as_ref()?.measured.rates),
        );
    }
    for (kind, _, pick) in kinds {
        row(
            &format!(
                "CPU per call, {kind} at {callers} callers: host / abi-documents / abi-discovery / nats-server / bench callers (µs)"
            ),
            &|c| {
                pick(c)
                    .as_ref()?
                    .cpu_per_call
                    .map(|[h, d, s, n, b]| format!("{h:.0} / {d:.0} / {s:.0} / {n:.0} / {b:.0}"))
            },
        );
    }
    for (kind, _, pick) in &kinds[1..] {
        row(
            &format!(
                "service requests per call, {kind}, one at a time ({} calls counted)",
                super::calls::COUNTED_CALLS
            ),
            &|c| pick(c).as_ref()?.calls.as_ref().map(super::calls::describe),
        );
    }
    row("host process CPU while measured (s)", &|c| {
        c.usage.map(|u| format!("{:.2}", u.cpu_secs))
    });
    row("host process peak RSS (MiB)", &|c| {
        c.usage.map(|u| format!("{:.1}", u.peak_rss_mib))
    });
    row("abi-documents CPU while measured (s)", &|c| {
        c.documents_cpu.map(|s| format!("{s:.2}"))
    });
    row("abi-discovery CPU while measured (s)", &|c| {
        c.discovery_cpu.map(|s| format!("{s:.2}"))
    });
    row("nats-server CPU while measured (s)", &|c| {
        c.nats_cpu.map(|s| format!("{s:.2}"))
    });
    row("failed calls by code", &|c| {
        let failures = c.failures();
        Some(if failures.is_empty() {
            "0".to_owned()
        } else {
            failures
                .iter()
                .map(|(code, n)| format!("{code} x{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
    });
    let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
    let mut header = format!("| metric | {} |\n|---|", names.join(" | "));
    header.push_str(&"---|".repeat(columns.len()));
    header.push('\n');
    header + &out
}

/// The verdict table on the two targets for our hosts.
pub fn verdicts(raw: &Column, ours: &Column, reference: &Column, callers: usize) -> String {
    let mut out = String::from("| target | measured | verdict |\n|---|---|---|\n");
    let (line, verdict) = match (p50_ms(&ours.chat), p50_ms(&raw.raw)) {
        (Some(chat), Some(floor)) if floor > 0.0 => {
            let ratio = chat / floor;
            let theirs = p50_ms(&reference.chat)
                .map(|r| format!(" (reference: {r:.3} ms, {:.1}x)", r / floor))
                .unwrap_or_default();
            (
                format!("p50 {chat:.3} ms vs raw {floor:.3} ms: **{ratio:.2}x**{theirs}"),
                judged(ratio <= CHAT_P50_TARGET_RATIO),
            )
        }
        _ => ("not measured".to_owned(), judged(false)),
    };
    let _ = writeln!(
        out,
        "| chat p50 <= {CHAT_P50_TARGET_RATIO:.0}x a raw request-reply | {line} | {verdict} |"
    );
    let (line, verdict) = crate::report::throughput_verdict(
        rate(&ours.agent),
        rate(&reference.agent),
        reference.skipped.is_some(),
        AGENT_THROUGHPUT_TARGET_RATIO,
    );
    let _ = writeln!(
        out,
        "| agent invoke throughput with {callers} callers >= {AGENT_THROUGHPUT_TARGET_RATIO:.0}x the reference's | {line} | {verdict} |"
    );
    out
}
