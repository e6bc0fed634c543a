//! `abi-bench apps --smoke` end to end: a real nats-server, the real
//! `abi-discovery` and `abi-documents` binaries, the raw floor and our
//! module (an AppHost under the runner) as processes of this binary, the
//! Python reference's module under its `run_module`, and both document
//! services with their clients, a few calls each. A correctness check of
//! the tables only: no timing is asserted.

use crate::common::{SmokeRun, is_latency, is_number};

const COLUMNS: [&str; 3] = [
    "raw request-reply floor",
    "ours (Rust AppHost)",
    "reference (Python AppHost)",
];

/// A row's label, the columns that measure it, what a measured cell looks like.
type Check = (&'static str, std::ops::Range<usize>, fn(&str) -> bool);

/// A cell like `2.31x`.
fn is_ratio(cell: &str) -> bool {
    cell.strip_suffix('x').is_some_and(is_number)
}

/// A cell like `1152` or `1152 (1110-1266)`.
fn is_rate(cell: &str) -> bool {
    let median = cell.split(' ').next().unwrap_or_default();
    is_number(median) && median.parse::<f64>().unwrap() > 0.0
}

#[test]
fn smoke_run_measures_every_row_where_it_applies() {
    let run = SmokeRun::run("apps", &COLUMNS);
    let row = |prefix: &str| run.row(prefix);
    let (all, hosts, ours) = (1..4, 2..4, 2..3);
    let checks: [Check; 15] = [
        ("GET of 1 KiB, one at a time", all.clone(), is_latency),
        (
            "raw request-reply of 1 KiB, each before one of the host's GETs",
            hosts.clone(),
            is_latency,
        ),
        (
            "GET p50 / interleaved raw request-reply p50",
            hosts.clone(),
            is_ratio,
        ),
        ("GET of 1 KiB with 64 callers", all.clone(), is_rate),
        ("GET requests/s, ours / reference", ours, is_ratio),
        ("CPU per GET at 64 callers", all, |c| {
            let parts: Vec<&str> = c.split(" / ").collect();
            parts.len() == 4 && parts.iter().all(|p| is_number(p))
        }),
        ("streamed download of 4 MiB", hosts.clone(), is_rate),
        (
            "host peak RSS during the downloads",
            hosts.clone(),
            is_number,
        ),
        (
            "caller (our AppClient) peak RSS during the downloads",
            hosts.clone(),
            is_number,
        ),
        ("streamed upload of 4 MiB", hosts.clone(), is_rate),
        ("host peak RSS during the uploads", hosts.clone(), is_number),
        (
            "caller (our AppClient) peak RSS during the uploads",
            hosts.clone(),
            is_number,
        ),
        (
            "overflowed document put of 2 MiB",
            hosts.clone(),
            is_latency,
        ),
        (
            "document service peak RSS during the puts",
            hosts.clone(),
            is_number,
        ),
        ("failed calls", 1..4, |c| c == "0"),
    ];
    for (label, measured_by, looks_right) in &checks {
        let cells = row(label);
        for i in 1..=COLUMNS.len() {
            if measured_by.contains(&i) {
                assert!(looks_right(&cells[i]), "{label}, column {i}: {cells:?}");
            } else {
                assert_eq!(cells[i], "—", "{label} is not measured there: {cells:?}");
            }
        }
    }
    assert_eq!(
        run.rows.len(),
        checks.len(),
        "no other rows:\n{}",
        run.stdout
    );

    let verdicts = &run.verdicts;
    assert_eq!(verdicts[0], ["target", "measured", "verdict"]);
    assert_eq!(verdicts.len(), 2 + 2, "two targets:\n{}", run.stdout);
    for verdict in &verdicts[2..] {
        assert!(
            verdict[2] == "**met**" || verdict[2] == "**missed**",
            "every target judged: {verdict:?}"
        );
    }
}
