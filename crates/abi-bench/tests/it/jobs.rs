//! `abi-bench jobs --smoke` end to end: a real nats-server, the real
//! `abi-discovery` (the jobs stream) and `abi-documents` (the run records)
//! binaries, the raw floor and our host as processes of this binary, and the
//! Python reference's `JobHost`, a few runs each. A correctness check of the
//! tables only: no timing is asserted.

use crate::common::{SmokeRun, is_latency, is_number};

const COLUMNS: [&str; 3] = [
    "raw JetStream floor",
    "JobHost (Rust)",
    "reference JobHost (Python)",
];

#[test]
fn smoke_run_prints_every_row_and_verdict_for_every_target() {
    let run = SmokeRun::run("jobs", &COLUMNS);
    let stdout = &run.stdout;
    let rows = &run.rows;
    let row = |prefix: &str| run.row(prefix);
    for label in ["trigger-to-start, idle", "trigger-to-completion notice"] {
        let r = row(label);
        assert!(r[1..].iter().all(|c| is_latency(c)), "{label}: {r:?}");
    }
    for n in [1, 16, 64] {
        let r = row(&format!("throughput, max_concurrency {n}, 50 triggers"));
        assert!(
            r[1..].iter().all(|c| is_number(c) && c != "0"),
            "max_concurrency {n}: {r:?}"
        );
    }
    let stored = row("triggers stored while publishing");
    assert!(stored[1..].iter().all(|c| is_number(c) && c != "0"));
    for label in [
        "host process CPU",
        "host process peak RSS",
        "abi-documents CPU",
        "nats-server CPU",
    ] {
        let r = row(label);
        assert!(r[1..].iter().all(|c| is_number(c)), "{label}: {r:?}");
    }
    let split_cpu = row("CPU per run, max_concurrency 64");
    for cell in &split_cpu[1..] {
        let parts: Vec<&str> = cell.split(" / ").collect();
        assert!(
            parts.len() == 4 && parts.iter().all(|p| is_number(p)),
            "four processes' CPU per run: {split_cpu:?}"
        );
    }
    let failed = row("failed or missing runs");
    assert_eq!(&failed[1..], ["0", "0", "0"], "every run succeeded");
    assert_eq!(rows.len(), 12, "no other rows:\n{stdout}");

    let verdicts = &run.verdicts;
    assert_eq!(verdicts[0], ["target", "measured", "verdict"]);
    assert_eq!(verdicts.len(), 2 + 4, "four targets:\n{stdout}");
    for verdict in &verdicts[2..] {
        assert!(
            verdict[2] == "**met**" || verdict[2] == "**missed**",
            "every target judged: {verdict:?}"
        );
    }
}

#[test]
fn a_workflow_smoke_run_measures_journaled_runs_on_both_hosts() {
    let columns = [
        "raw JetStream floor",
        "workflow_fn (Rust)",
        "reference workflow_handler (Python)",
    ];
    // Two runs of each cell: the median and the spread.
    let run = SmokeRun::run_with(
        "jobs",
        &["--workflow-steps", "2", "--repeats", "2"],
        &columns,
    );
    assert!(
        run.stdout
            .contains("workflows of 2 journaled no-op steps (the raw floor stays a plain job)"),
        "the notes say what ran:\n{}",
        run.stdout
    );
    let done = run.row("trigger-to-completion notice");
    assert!(done[1..].iter().all(|c| is_latency(c)), "{done:?}");
    let judged = run.row("throughput, max_concurrency 64");
    for cell in &judged[1..] {
        let (median, spread) = cell.split_once(" (").expect("a median and a spread");
        let (low, high) = spread
            .trim_end_matches(')')
            .split_once('-')
            .expect("min-max");
        assert!(
            [median, low, high].iter().all(|v| is_number(v)),
            "{judged:?}"
        );
    }
    let failed = run.row("failed or missing runs");
    assert_eq!(
        &failed[1..],
        ["0", "0", "0"],
        "every workflow run succeeded"
    );
}
